-- Result webhooks: a task submitted with a callback URL has one row here, written in the
-- submit's own statement. Once the task ended, a coordinator takes the row on a lease
-- (so one delivery is in flight at a time, whichever coordinator makes it), POSTs the
-- result, and records the answer: `delivered` after a 2xx (never sent again), else a
-- retry at `next_attempt_at`, or `failed` once the attempts are spent.
CREATE TABLE webhooks (
    task_id         uuid        PRIMARY KEY REFERENCES tasks (task_id) ON DELETE CASCADE,
    tenant          text        NOT NULL,
    url             text        NOT NULL,
    state           text        NOT NULL DEFAULT 'waiting'
                                CHECK (state IN ('waiting', 'pending', 'delivered', 'failed')),
    attempts        int         NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    leased_by       text,
    delivered_at    timestamptz
);
-- The deliverer's scan: rows not yet delivered or failed.
CREATE INDEX webhooks_open ON webhooks (next_attempt_at) WHERE state IN ('waiting', 'pending');

-- Each POST: written when it starts (so one cut short by a stopped coordinator says so),
-- updated with the receiver's answer.
CREATE TABLE webhook_deliveries (
    task_id     uuid        NOT NULL REFERENCES webhooks (task_id) ON DELETE CASCADE,
    attempt     int         NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    status_code int         NOT NULL DEFAULT 0,
    error       text        NOT NULL DEFAULT '',
    duration_ms int         NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, attempt)
);
