-- Claims written in place. A claim (queued -> running), a retry scheduled (running ->
-- queued) and an approval asked or answered (running <-> awaiting_approval) change a
-- task's status, which tasks_live had as its key and in its predicate: each of them
-- wrote a new row version with an entry in every index of the table (seven). The
-- tasks that have not finished are now found through finished_at, which is null
-- exactly while a task is queued, running or awaiting approval (the check below keeps
-- it so at every write), and which those changes leave alone. With room left on each
-- page, Postgres writes such an update as a heap-only tuple: the new version goes on
-- the same page and no index is written. A task's insert and its end still write
-- index entries. Pages are filled to half by inserts (fillfactor): with less room,
-- the end of one task took the room a claim of its neighbour needed (at 70, only half
-- of the claims were written in place). The price is disk: the table's pages hold
-- about half as many tasks as before.
ALTER TABLE tasks SET (fillfactor = 50);

-- Rows written by older versions already follow the rule; this makes sure of it.
UPDATE tasks SET finished_at = CASE WHEN finished_at IS NULL THEN updated_at END
 WHERE (finished_at IS NULL) <> (status IN ('queued', 'running', 'awaiting_approval'));
ALTER TABLE tasks ADD CONSTRAINT tasks_open_until_finished
    CHECK ((finished_at IS NULL) = (status IN ('queued', 'running', 'awaiting_approval')));

-- The sweeper's deadlines, and the running-task count of a tenant (with
-- --max-running-per-tenant), the gauges and the orphan check.
CREATE INDEX tasks_open_deadline ON tasks (deadline)
    WHERE finished_at IS NULL AND deadline IS NOT NULL;
CREATE INDEX tasks_open_tenant ON tasks (tenant) WHERE finished_at IS NULL;
DROP INDEX IF EXISTS tasks_live;
