-- Fewer index entries per task row version. A task's status changes (queued, running,
-- finished) each write a new row version and, because the status is indexed, an entry
-- in every index of the table. Two indexes were written on every change and are never
-- needed: tasks_trace is a prefix of tasks_trace_tenant (0004), which serves lookups
-- by trace alone too, and tasks_session (0004, session_id first) serves the lookup of
-- a session's running tasks that tasks_session_live was made for.
DROP INDEX IF EXISTS tasks_trace;
DROP INDEX IF EXISTS tasks_session_live;
