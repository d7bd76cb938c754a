-- Ownership checks look sessions up by id across every task that ran in them (a
-- resume_token naming a session whose transcript is not saved yet, say), so the
-- session index covers all tasks, not only live ones.
CREATE INDEX tasks_session ON tasks (session_id, tenant);
-- A List filtered by trace is checked against the caller's tenant.
CREATE INDEX tasks_trace_tenant ON tasks (trace_id, tenant);
