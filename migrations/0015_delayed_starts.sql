-- Delayed starts: a task submitted with a not_before still ahead is stored as
-- 'scheduled', with no outbox row; when not_before comes, one statement moves it to
-- 'queued' and writes its outbox row (the lifecycle's `due`). A scheduled task has not
-- finished: the check of 0010 counts it among the open statuses.
ALTER TABLE tasks ADD COLUMN not_before timestamptz;
ALTER TABLE tasks DROP CONSTRAINT tasks_open_until_finished;
ALTER TABLE tasks ADD CONSTRAINT tasks_open_until_finished
    CHECK ((finished_at IS NULL) = (status IN ('scheduled', 'queued', 'running', 'awaiting_approval')));
-- The due scan. Its predicate leaves status out: a column an index reads would make
-- every claim (a status change) write index entries instead of the row in place
-- (see 0010); not_before never changes and finished_at only at the end.
CREATE INDEX tasks_scheduled ON tasks (not_before)
    WHERE finished_at IS NULL AND not_before IS NOT NULL;
