//! Schedules: their rows, the scheduler's due scan, and the fire transaction.
//!
//! A tick fires once whatever the number of coordinators: a scheduler pass locks a due
//! schedule's row (`FOR UPDATE SKIP LOCKED`: another coordinator's pass skips it),
//! submits the tasks of its due ticks, records each tick in `schedule_runs` (keyed by
//! schedule and tick) and moves `next_fire_at` past them, all in one transaction
//! ([`FireTx`]). A pass that dies before its commit leaves nothing behind; the next pass
//! acts on the same ticks. Each tick's task also carries the idempotency key
//! [`tick_key`], so even a second write of the same tick would find the first task.
//! The clock is the database's (`now()`), never a coordinator's.

use chrono::{DateTime, Utc};
use taskwire_protocol::{TaskId, TaskStatus};
use uuid::Uuid;

use crate::{InsertOutcome, NewTask, Store, StoreError};

/// How many runs a schedule keeps (the newest).
const KEPT_RUNS: i64 = 1000;

/// The idempotency key of the task a schedule's tick submits.
pub fn tick_key(schedule_id: Uuid, tick: DateTime<Utc>) -> String {
    format!(
        "schedule/{schedule_id}/{}",
        tick.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// A schedule as stored. The policies and the task are kept as the coordinator wrote
/// them (names and an encoded `SubmitRequest`); it reads them back.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ScheduleRecord {
    pub schedule_id: Uuid,
    pub tenant: String,
    pub name: String,
    pub cron: Option<String>,
    pub every_ms: Option<i64>,
    pub time_zone: String,
    pub overlap: String,
    pub catch_up: String,
    pub catch_up_window_ms: i64,
    pub task_timeout_ms: Option<i64>,
    pub task: Vec<u8>,
    pub paused: bool,
    pub next_fire_at: Option<DateTime<Utc>>,
    pub last_tick: Option<DateTime<Utc>>,
    pub last_task_id: Option<Uuid>,
    pub queued_tick: Option<DateTime<Utc>>,
    pub fires: i64,
    pub skipped_overlap: i64,
    pub skipped_missed: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "schedule_id, tenant, name, cron, every_ms, time_zone, overlap, catch_up, \
     catch_up_window_ms, task_timeout_ms, task, paused, next_fire_at, last_tick, last_task_id, \
     queued_tick, fires, skipped_overlap, skipped_missed, created_at, updated_at";

/// What a schedule is, as a create or an update writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpecRow {
    pub tenant: String,
    pub name: String,
    pub cron: Option<String>,
    pub every_ms: Option<i64>,
    pub time_zone: String,
    pub overlap: String,
    pub catch_up: String,
    pub catch_up_window_ms: i64,
    pub task_timeout_ms: Option<i64>,
    pub task: Vec<u8>,
    pub paused: bool,
}

/// What happened at one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Started,
    SkippedOverlap,
    Queued,
    Triggered,
    Refused,
}

impl RunOutcome {
    /// The name stored in `schedule_runs.outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::SkippedOverlap => "skipped_overlap",
            Self::Queued => "queued",
            Self::Triggered => "triggered",
            Self::Refused => "refused",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "started" => Self::Started,
            "skipped_overlap" => Self::SkippedOverlap,
            "queued" => Self::Queued,
            "triggered" => Self::Triggered,
            "refused" => Self::Refused,
            _ => return None,
        })
    }
}

/// One tick acted on, with its task's status now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRun {
    pub tick: DateTime<Utc>,
    pub outcome: RunOutcome,
    pub task_id: Option<TaskId>,
    pub status: Option<TaskStatus>,
    pub fired_at: DateTime<Utc>,
    pub reason: String,
}

/// A `schedule_runs` row with its task's status: tick, outcome, task, status, fired at,
/// reason.
type RunRow = (
    DateTime<Utc>,
    String,
    Option<Uuid>,
    Option<String>,
    DateTime<Utc>,
    String,
);

/// A tick's record, as a fire writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub tick: DateTime<Utc>,
    pub outcome: RunOutcome,
    pub task_id: Option<TaskId>,
    pub reason: String,
}

/// How a fire moves its schedule on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advance {
    /// The next tick to act on (`None`: the cadence never ticks again).
    pub next_fire_at: Option<DateTime<Utc>>,
    /// The last tick acted on, if this fire acted on any.
    pub last_tick: Option<DateTime<Utc>>,
    /// The last task started, if this fire started any.
    pub last_task_id: Option<TaskId>,
    /// The tick waiting for the previous run (queue_one), replacing the stored one.
    pub queued_tick: Option<DateTime<Utc>>,
    /// Counters to add.
    pub fires: i64,
    pub skipped_overlap: i64,
    pub skipped_missed: i64,
    /// Whether `next_fire_at` is written (a trigger leaves the cadence alone).
    pub moves_cadence: bool,
}

/// A schedule locked for one fire: the row, the database's clock, and whether the
/// last task it started is still going. Nothing is written until [`FireTx::commit`];
/// dropping it rolls back.
pub struct FireTx {
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    pub schedule: ScheduleRecord,
    /// The transaction's `now()`: the clock every tick is compared with.
    pub now: DateTime<Utc>,
    /// The last task the schedule started has not finished.
    pub previous_running: bool,
    runs: Vec<NewRun>,
}

impl FireTx {
    /// Inserts tasks (with their outbox rows) in the fire's transaction.
    pub async fn insert_tasks(
        &mut self,
        tasks: &[NewTask],
    ) -> Result<Vec<InsertOutcome>, StoreError> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        Ok(crate::tasks::insert_tasks_on(&mut self.tx, tasks, None)
            .await?
            .0)
    }

    /// Records a tick acted on (written at commit; a tick already recorded as queued
    /// is overwritten, any other is kept).
    pub fn record(&mut self, run: NewRun) {
        self.runs.push(run);
    }

    /// Writes the runs and the schedule's advance, and commits.
    pub async fn commit(mut self, advance: Advance) -> Result<(), StoreError> {
        let id = self.schedule.schedule_id;
        if !self.runs.is_empty() {
            let ticks: Vec<DateTime<Utc>> = self.runs.iter().map(|r| r.tick).collect();
            let outcomes: Vec<&str> = self.runs.iter().map(|r| r.outcome.as_str()).collect();
            let tasks: Vec<Option<Uuid>> = self
                .runs
                .iter()
                .map(|r| r.task_id.map(|t| t.as_uuid()))
                .collect();
            let reasons: Vec<&str> = self.runs.iter().map(|r| r.reason.as_str()).collect();
            sqlx::query(
                "INSERT INTO schedule_runs (schedule_id, tick, outcome, task_id, reason, fired_at) \
                 SELECT $1, r.tick, r.outcome, r.task_id, r.reason, now() \
                 FROM UNNEST($2::timestamptz[], $3::text[], $4::uuid[], $5::text[]) \
                      AS r(tick, outcome, task_id, reason) \
                 ON CONFLICT (schedule_id, tick) DO UPDATE \
                 SET outcome = EXCLUDED.outcome, task_id = EXCLUDED.task_id, \
                     reason = EXCLUDED.reason, fired_at = EXCLUDED.fired_at \
                 WHERE schedule_runs.outcome = 'queued'",
            )
            .bind(id)
            .bind(&ticks)
            .bind(&outcomes)
            .bind(&tasks)
            .bind(&reasons)
            .execute(&mut *self.tx)
            .await
            .map_err(|e| StoreError::from_sqlx("record schedule runs", e))?;
            sqlx::query(
                "DELETE FROM schedule_runs WHERE schedule_id = $1 AND tick < \
                 (SELECT tick FROM schedule_runs WHERE schedule_id = $1 \
                  ORDER BY tick DESC OFFSET $2 LIMIT 1)",
            )
            .bind(id)
            .bind(KEPT_RUNS)
            .execute(&mut *self.tx)
            .await
            .map_err(|e| StoreError::from_sqlx("prune schedule runs", e))?;
        }
        sqlx::query(
            "UPDATE schedules SET \
                 next_fire_at = CASE WHEN $2 THEN $3 ELSE next_fire_at END, \
                 last_tick = COALESCE($4, last_tick), \
                 last_task_id = COALESCE($5, last_task_id), \
                 queued_tick = $6, \
                 fires = fires + $7, skipped_overlap = skipped_overlap + $8, \
                 skipped_missed = skipped_missed + $9 \
             WHERE schedule_id = $1",
        )
        .bind(id)
        .bind(advance.moves_cadence)
        .bind(advance.next_fire_at)
        .bind(advance.last_tick)
        .bind(advance.last_task_id.map(|t| t.as_uuid()))
        .bind(advance.queued_tick)
        .bind(advance.fires)
        .bind(advance.skipped_overlap)
        .bind(advance.skipped_missed)
        .execute(&mut *self.tx)
        .await
        .map_err(|e| StoreError::from_sqlx("advance a schedule", e))?;
        self.tx
            .commit()
            .await
            .map_err(|e| StoreError::from_sqlx("commit a schedule's fire", e))
    }
}

/// Which schedule a fire locks.
#[derive(Debug, Clone, Copy)]
pub enum FireOf<'a> {
    /// One the due scan found: locked only if it is still due (a tick has come, or a
    /// queued tick's previous run has ended) and not paused; skipped if another
    /// coordinator holds it.
    Due(Uuid),
    /// A trigger: the tenant's schedule of that name, paused or not; waits for a
    /// coordinator's pass that holds it.
    Named { tenant: &'a str, name: &'a str },
}

impl Store {
    /// The database's clock.
    pub async fn now(&self) -> Result<DateTime<Utc>, StoreError> {
        sqlx::query_scalar("SELECT now()")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("read the clock", e))
    }

    /// Creates a schedule; `false` when the tenant already has one of that name.
    pub async fn create_schedule(
        &self,
        schedule_id: Uuid,
        spec: &ScheduleSpecRow,
        next_fire_at: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO schedules (schedule_id, tenant, name, cron, every_ms, time_zone, overlap, \
                                    catch_up, catch_up_window_ms, task_timeout_ms, task, paused, next_fire_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (tenant, name) DO NOTHING",
        )
        .bind(schedule_id)
        .bind(&spec.tenant)
        .bind(&spec.name)
        .bind(&spec.cron)
        .bind(spec.every_ms)
        .bind(&spec.time_zone)
        .bind(&spec.overlap)
        .bind(&spec.catch_up)
        .bind(spec.catch_up_window_ms)
        .bind(spec.task_timeout_ms)
        .bind(&spec.task)
        .bind(spec.paused)
        .bind(next_fire_at)
        .execute(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("create a schedule", e))?;
        Ok(done.rows_affected() == 1)
    }

    /// Replaces a schedule's spec (its id, counters and runs stay) and its next fire
    /// time; a queued tick is dropped. `None` when the tenant has no such schedule.
    pub async fn update_schedule(
        &self,
        spec: &ScheduleSpecRow,
        next_fire_at: Option<DateTime<Utc>>,
    ) -> Result<Option<ScheduleRecord>, StoreError> {
        sqlx::query_as(crate::tasks::sql(format!(
            "UPDATE schedules SET cron = $3, every_ms = $4, time_zone = $5, overlap = $6, \
                 catch_up = $7, catch_up_window_ms = $8, task_timeout_ms = $9, task = $10, \
                 paused = $11, next_fire_at = $12, queued_tick = NULL, updated_at = now() \
             WHERE tenant = $1 AND name = $2 RETURNING {COLUMNS}"
        )))
        .bind(&spec.tenant)
        .bind(&spec.name)
        .bind(&spec.cron)
        .bind(spec.every_ms)
        .bind(&spec.time_zone)
        .bind(&spec.overlap)
        .bind(&spec.catch_up)
        .bind(spec.catch_up_window_ms)
        .bind(spec.task_timeout_ms)
        .bind(&spec.task)
        .bind(spec.paused)
        .bind(next_fire_at)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("update a schedule", e))
    }

    /// Pauses (`next_fire_at` kept, ignored) or resumes (from `next_fire_at`, which the
    /// caller computes from now) a schedule; `None` when there is no such schedule.
    pub async fn set_schedule_paused(
        &self,
        tenant: &str,
        name: &str,
        paused: bool,
        next_fire_at: Option<DateTime<Utc>>,
    ) -> Result<Option<ScheduleRecord>, StoreError> {
        sqlx::query_as(crate::tasks::sql(format!(
            "UPDATE schedules SET paused = $3, \
                 next_fire_at = CASE WHEN $3 THEN next_fire_at ELSE $4 END, \
                 queued_tick = CASE WHEN $3 THEN NULL ELSE queued_tick END, updated_at = now() \
             WHERE tenant = $1 AND name = $2 RETURNING {COLUMNS}"
        )))
        .bind(tenant)
        .bind(name)
        .bind(paused)
        .bind(next_fire_at)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("pause or resume a schedule", e))
    }

    /// Deletes a schedule and its runs; `false` when there was none.
    pub async fn delete_schedule(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM schedules WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|e| StoreError::from_sqlx("delete a schedule", e))?;
        Ok(done.rows_affected() == 1)
    }

    /// The tenant's schedule of that name.
    pub async fn schedule(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<ScheduleRecord>, StoreError> {
        sqlx::query_as(crate::tasks::sql(format!(
            "SELECT {COLUMNS} FROM schedules WHERE tenant = $1 AND name = $2"
        )))
        .bind(tenant)
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read a schedule", e))
    }

    /// The tenant's schedules by name (every tenant's with `None`).
    pub async fn list_schedules(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<ScheduleRecord>, StoreError> {
        sqlx::query_as(crate::tasks::sql(format!(
            "SELECT {COLUMNS} FROM schedules WHERE $1::text IS NULL OR tenant = $1 \
             ORDER BY tenant, name"
        )))
        .bind(tenant)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("list schedules", e))
    }

    /// A schedule's newest `limit` runs, newest first, with their tasks' status.
    pub async fn schedule_runs(
        &self,
        schedule_id: Uuid,
        limit: i64,
    ) -> Result<Vec<ScheduleRun>, StoreError> {
        let rows: Vec<RunRow> = sqlx::query_as(
            "SELECT r.tick, r.outcome, r.task_id, t.status, r.fired_at, r.reason \
                 FROM schedule_runs r LEFT JOIN tasks t ON t.task_id = r.task_id \
                 WHERE r.schedule_id = $1 ORDER BY r.tick DESC LIMIT $2",
        )
        .bind(schedule_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read schedule runs", e))?;
        rows.into_iter()
            .map(|(tick, outcome, task_id, status, fired_at, reason)| {
                let corrupt = |column, reason: String| StoreError::Corrupt {
                    task_id: format!("schedule {schedule_id}"),
                    column,
                    reason,
                };
                Ok(ScheduleRun {
                    tick,
                    outcome: RunOutcome::parse(&outcome).ok_or_else(|| {
                        corrupt("outcome", format!("unknown outcome `{outcome}`"))
                    })?,
                    task_id: task_id.map(TaskId::from_uuid),
                    status: status
                        .map(|s| s.parse::<TaskStatus>())
                        .transpose()
                        .map_err(|e| corrupt("status", e.to_string()))?,
                    fired_at,
                    reason,
                })
            })
            .collect()
    }

    /// Schedules a pass should act on: a tick has come (not paused), or a queued tick's
    /// previous run has ended. Read without locks; [`Store::begin_fire`] decides.
    pub async fn due_schedules(&self, limit: i64) -> Result<Vec<Uuid>, StoreError> {
        sqlx::query_scalar(
            "(SELECT schedule_id FROM schedules WHERE NOT paused AND next_fire_at <= now() \
              ORDER BY next_fire_at LIMIT $1) \
             UNION \
             (SELECT s.schedule_id FROM schedules s \
              WHERE s.queued_tick IS NOT NULL AND NOT s.paused \
                AND NOT EXISTS (SELECT 1 FROM tasks t \
                                WHERE t.task_id = s.last_task_id AND t.finished_at IS NULL) \
              LIMIT $1)",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("scan due schedules", e))
    }

    /// How long until the earliest tick of any active schedule, by the database's clock
    /// (zero when one is due); `None` when no schedule is active.
    pub async fn until_next_tick(&self) -> Result<Option<std::time::Duration>, StoreError> {
        let micros: Option<i64> = sqlx::query_scalar(
            "SELECT (EXTRACT(EPOCH FROM min(next_fire_at) - clock_timestamp()) * 1000000)::int8 \
             FROM schedules WHERE NOT paused",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(|e| StoreError::from_sqlx("read the next tick", e))?;
        Ok(micros.map(|m| std::time::Duration::from_micros(u64::try_from(m).unwrap_or(0))))
    }

    /// Locks a schedule for one fire. `None` when it is gone, no longer due, or (for
    /// [`FireOf::Due`]) another coordinator holds it.
    pub async fn begin_fire(&self, of: FireOf<'_>) -> Result<Option<FireTx>, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(|e| StoreError::from_sqlx("begin a schedule's fire", e))?;
        let row: Option<ScheduleRecord> = match of {
            FireOf::Due(id) => {
                sqlx::query_as(crate::tasks::sql(format!(
                    "SELECT {COLUMNS} FROM schedules s WHERE schedule_id = $1 AND NOT paused \
                   AND (next_fire_at <= now() OR (queued_tick IS NOT NULL AND NOT EXISTS \
                        (SELECT 1 FROM tasks t WHERE t.task_id = s.last_task_id \
                                                 AND t.finished_at IS NULL))) \
                 FOR UPDATE SKIP LOCKED"
                )))
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
            }
            FireOf::Named { tenant, name } => {
                sqlx::query_as(crate::tasks::sql(format!(
                    "SELECT {COLUMNS} FROM schedules WHERE tenant = $1 AND name = $2 FOR UPDATE"
                )))
                .bind(tenant)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
            }
        }
        .map_err(|e| StoreError::from_sqlx("lock a schedule", e))?;
        let Some(schedule) = row else {
            return Ok(None);
        };
        let (now, previous_running): (DateTime<Utc>, bool) = sqlx::query_as(
            "SELECT now(), EXISTS (SELECT 1 FROM tasks WHERE task_id = $1 AND finished_at IS NULL)",
        )
        .bind(schedule.last_task_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| StoreError::from_sqlx("read a schedule's previous run", e))?;
        Ok(Some(FireTx {
            tx,
            schedule,
            now,
            previous_running,
            runs: Vec::new(),
        }))
    }
}
