-- Each task's priority, 1 (highest) to 5 (lowest), for get, ls and the dashboard.
ALTER TABLE tasks ADD COLUMN priority smallint NOT NULL DEFAULT 3;
