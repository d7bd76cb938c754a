-- Schedules: a task submitted on a cron or interval cadence. A scheduler pass locks a
-- due schedule's row (FOR UPDATE SKIP LOCKED), submits the tasks of its due ticks and
-- moves next_fire_at past them in one transaction, so each tick fires once whatever
-- the number of coordinators; each tick's task also carries the idempotency key
-- 'schedule/<schedule_id>/<tick>', and each tick acted on has one schedule_runs row.
CREATE TABLE schedules (
    schedule_id        uuid PRIMARY KEY,
    tenant             text NOT NULL,
    name               text NOT NULL,
    -- Exactly one cadence: a cron expression or an interval.
    cron               text,
    every_ms           bigint CHECK (every_ms >= 1000),
    time_zone          text NOT NULL,
    overlap            text NOT NULL CHECK (overlap IN ('allow', 'skip', 'cancel_previous', 'queue_one')),
    catch_up           text NOT NULL CHECK (catch_up IN ('skip', 'one', 'all')),
    catch_up_window_ms bigint NOT NULL,
    task_timeout_ms    bigint,
    -- The SubmitRequest each tick submits (protobuf), checked at create.
    task               bytea NOT NULL,
    paused             boolean NOT NULL DEFAULT false,
    -- The next tick to act on; the scheduler's due scan reads it.
    next_fire_at       timestamptz,
    last_tick          timestamptz,
    -- The last task a tick started: the overlap policies look at whether it finished.
    last_task_id       uuid,
    -- queue_one: a tick that waits for last_task_id to finish.
    queued_tick        timestamptz,
    fires              bigint NOT NULL DEFAULT 0,
    skipped_overlap    bigint NOT NULL DEFAULT 0,
    skipped_missed     bigint NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, name),
    CHECK ((cron IS NULL) <> (every_ms IS NULL))
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused;
CREATE INDEX schedules_queued ON schedules (schedule_id) WHERE queued_tick IS NOT NULL;

-- One row per tick acted on (and per trigger); the newest are kept.
CREATE TABLE schedule_runs (
    schedule_id uuid NOT NULL REFERENCES schedules ON DELETE CASCADE,
    tick        timestamptz NOT NULL,
    outcome     text NOT NULL
                CHECK (outcome IN ('started', 'skipped_overlap', 'queued', 'triggered', 'refused')),
    task_id     uuid,
    reason      text NOT NULL DEFAULT '',
    fired_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, tick)
);
