-- Retries: an attempt budget per task, and the history of every attempt.
ALTER TABLE tasks ADD COLUMN max_attempts integer NOT NULL DEFAULT 3;
-- Attempts made before the last replay; the budget counts from here.
ALTER TABLE tasks ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;
-- Times a dead-lettered task was replayed (part of the replay's Nats-Msg-Id).
ALTER TABLE tasks ADD COLUMN replays integer NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN last_error text;

CREATE TABLE attempts (
    task_id      uuid        NOT NULL,
    attempt      integer     NOT NULL,
    claim_epoch  bigint      NOT NULL,
    worker_id    text        NOT NULL,
    -- running, then the attempt's outcome (queued = a retry was scheduled)
    status       text        NOT NULL,
    error        text,
    retryable    boolean     NOT NULL DEFAULT false,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (task_id, claim_epoch)
);
