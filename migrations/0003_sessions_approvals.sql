-- Sessions: every task runs in a session (new, or resumed by resume_token); the
-- transcript (messages and parts) is saved by the worker through the coordinator.
ALTER TABLE tasks ADD COLUMN session_id uuid;
CREATE INDEX tasks_session_live ON tasks (session_id)
    WHERE status IN ('running', 'awaiting_approval');

CREATE TABLE sessions (
    session_id   uuid        PRIMARY KEY,
    tenant       text        NOT NULL,
    -- The task (and claim) that last saved it: a stale attempt cannot overwrite it.
    task_id      uuid        NOT NULL,
    claim_epoch  bigint      NOT NULL,
    transcript   jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Approvals asked by running tasks (`ask` permissions) and their answers.
CREATE TABLE approvals (
    task_id      uuid        NOT NULL,
    request_id   text        NOT NULL,
    permission   text        NOT NULL,
    patterns     text[]      NOT NULL,
    title        text        NOT NULL,
    -- pending, once, always, reject, timed_out
    status       text        NOT NULL DEFAULT 'pending',
    message      text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    answered_at  timestamptz,
    PRIMARY KEY (task_id, request_id)
);
