-- Tasks: one row per task (a node of a task tree), across all its attempts.
-- Postgres is the source of truth; NATS carries dispatch and events.
CREATE TABLE tasks (
    task_id          uuid PRIMARY KEY,
    parent_task_id   uuid,
    trace_id         text        NOT NULL,
    tenant           text        NOT NULL,
    agent            text        NOT NULL,
    prompt           text        NOT NULL,
    status           text        NOT NULL,
    attempt          integer     NOT NULL DEFAULT 0,
    -- Fencing token: incremented by every claim; results are written only with the current one.
    claim_epoch      bigint      NOT NULL DEFAULT 0,
    depth            integer     NOT NULL DEFAULT 0,
    idempotency_key  text,
    -- Digest of the submitted request, to tell a retried submit from a conflicting one.
    request_digest   text        NOT NULL,
    deadline         timestamptz,
    -- The encoded taskwire.v1.TaskRequest envelope.
    request          bytea       NOT NULL,
    -- The encoded taskwire.v1.TaskResult accepted for this task.
    result           bytea,
    worker_id        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
);

CREATE UNIQUE INDEX tasks_idempotency ON tasks (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX tasks_parent ON tasks (parent_task_id) WHERE parent_task_id IS NOT NULL;
CREATE INDEX tasks_trace ON tasks (trace_id);
CREATE INDEX tasks_live ON tasks (status, deadline)
    WHERE status IN ('queued', 'running', 'awaiting_approval');
CREATE INDEX tasks_created ON tasks (created_at DESC);

-- Transactional outbox: written with the task in one transaction, published to
-- JetStream by the relay (with Nats-Msg-Id = msg_id) and then deleted.
CREATE TABLE outbox (
    id          bigserial   PRIMARY KEY,
    task_id     uuid        NOT NULL,
    trace_id    text        NOT NULL,
    subject     text        NOT NULL,
    msg_id      text        NOT NULL,
    payload     bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Messages that could not be run (malformed envelopes, unknown tasks), with the reason.
CREATE TABLE dead_letters (
    id          bigserial   PRIMARY KEY,
    subject     text        NOT NULL,
    reason      text        NOT NULL,
    payload     bytea       NOT NULL,
    worker_id   text,
    task_id     uuid,
    created_at  timestamptz NOT NULL DEFAULT now()
);
