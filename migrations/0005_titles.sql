-- A root session's short title, written by the worker's hidden `title` agent and
-- carried by the task's result. Null until one arrives, and for child tasks.
ALTER TABLE tasks ADD COLUMN title text;
