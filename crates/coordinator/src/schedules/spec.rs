//! A schedule's spec: checked where it enters (create, update), stored as a row, read
//! back for a fire, and shown as a `Schedule`.
//!
//! The task a schedule submits is checked at create as a submit would be (its agent,
//! budget, scopes, webhook), with the field named `task.FIELD`; at each tick it is built
//! again (an agent removed since is a `refused` run, not a failed coordinator).

use std::time::Duration;

use chrono::{DateTime, Utc};
use prost::Message;
use taskwire_protocol::{pb, time};
use taskwire_store::schedules::{ScheduleRecord, ScheduleRun, ScheduleSpecRow};

use super::timing::{CatchUp, Overlap, Timing, TimingError};
use crate::auth::Principal;
use crate::submit::{Origin, SubmitTrace, build_task};
use crate::{CoordinatorError, State};

/// `catch_up_window` when the spec gives none.
pub const DEFAULT_CATCH_UP_WINDOW: Duration = Duration::from_secs(3600);
/// Longest schedule name.
const MAX_NAME_LEN: usize = 128;

/// A spec that passed every check, ready to store.
#[derive(Debug)]
pub struct Checked {
    pub row: ScheduleSpecRow,
    pub timing: Timing,
}

/// What a stored schedule does, decoded.
#[derive(Debug)]
pub struct Stored {
    pub timing: Timing,
    pub overlap: Overlap,
    pub catch_up: CatchUp,
    pub catch_up_window: Duration,
    pub task_timeout: Option<Duration>,
    pub task: pb::SubmitRequest,
}

impl From<TimingError> for CoordinatorError {
    fn from(e: TimingError) -> Self {
        CoordinatorError::invalid(e.field, e.reason)
    }
}

/// Checks a name given to a schedule RPC.
pub fn check_name(name: &str) -> Result<(), CoordinatorError> {
    if name.is_empty() {
        return Err(CoordinatorError::invalid("name", "is required"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(CoordinatorError::invalid(
            "name",
            format!("is longer than {MAX_NAME_LEN} bytes"),
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(CoordinatorError::invalid(
            "name",
            format!("`{name}` may hold only letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(())
}

fn duration(field: &'static str, d: &prost_types::Duration) -> Result<Duration, CoordinatorError> {
    Duration::try_from(*d).map_err(|_| CoordinatorError::invalid(field, "must not be negative"))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Checks a spec for `caller` and builds its row.
pub fn check(
    state: &State,
    caller: &Principal,
    spec: pb::ScheduleSpec,
) -> Result<Checked, CoordinatorError> {
    check_name(&spec.name)?;
    let tenant = caller.tenant_for_submit(&spec.tenant)?;
    let (cron, every) = match &spec.cadence {
        Some(pb::schedule_spec::Cadence::Cron(c)) => (Some(c.as_str()), None),
        Some(pb::schedule_spec::Cadence::Every(d)) => (None, Some(duration("every", d)?)),
        None => (None, None),
    };
    let timing = Timing::from_parts(cron, every, &spec.time_zone)?;
    let overlap = overlap_of(spec.overlap)?;
    let catch_up = catch_up_of(spec.catch_up)?;
    let catch_up_window = match &spec.catch_up_window {
        Some(d) => duration("catch_up_window", d)?,
        None => DEFAULT_CATCH_UP_WINDOW,
    };
    let task_timeout = match &spec.task_timeout {
        Some(d) => {
            let d = duration("task_timeout", d)?;
            if d < Duration::from_secs(1) {
                return Err(CoordinatorError::invalid(
                    "task_timeout",
                    "must be at least 1s",
                ));
            }
            Some(d)
        }
        None => None,
    };
    let Some(mut task) = spec.task else {
        return Err(CoordinatorError::invalid(
            "task",
            "is required (the task each tick submits)",
        ));
    };
    let refuse = |field: &str, what: &str| {
        Err(CoordinatorError::invalid(
            format!("task.{field}"),
            format!("a schedule's task takes no {what}"),
        ))
    };
    if task.deadline.is_some() {
        return refuse(
            "deadline",
            "deadline (task_timeout sets one after each tick)",
        );
    }
    if task.not_before.is_some() {
        return refuse("not_before", "delayed start (its ticks say when it starts)");
    }
    if !task.idempotency_key.is_empty() {
        return refuse(
            "idempotency_key",
            "idempotency key (each tick's task is keyed by the schedule and the tick)",
        );
    }
    if !task.parent_task_id.is_empty() {
        return refuse("parent_task_id", "parent (its tasks are root tasks)");
    }
    if !task.resume_token.is_empty() {
        return refuse("resume_token", "session to resume");
    }
    if !task.trace_id.is_empty() {
        return refuse("trace_id", "trace id (each task starts its own trace)");
    }
    if !task.tenant.is_empty() && task.tenant != tenant {
        return Err(CoordinatorError::invalid(
            "task.tenant",
            format!("`{}` is not the schedule's tenant `{tenant}`", task.tenant),
        ));
    }
    task.tenant.clone_from(&tenant);
    task.auth_scope = caller.scope_for_submit(std::mem::take(&mut task.auth_scope))?;
    if !task.callback_url.is_empty() && state.webhook_secrets.get(&tenant).is_none() {
        return Err(CoordinatorError::FailedPrecondition(format!(
            "task.callback_url: tenant `{tenant}` has no webhook secret (the coordinator's --webhook-secrets-file names none)"
        )));
    }
    // The task as a tick would submit it now: refused here as a submit would be.
    build(state, &task, task_timeout, Utc::now(), None).map_err(|e| match e {
        CoordinatorError::InvalidArgument { field, reason } => CoordinatorError::InvalidArgument {
            field: format!("task.{field}"),
            reason,
        },
        // The one thing a build finds missing is the agent.
        CoordinatorError::NotFound(what) => {
            CoordinatorError::invalid("task.agent", format!("{what} not found"))
        }
        other => other,
    })?;
    let (cron, every_ms) = match timing.cadence() {
        super::timing::Cadence::Cron { expr, .. } => (Some(expr.clone()), None),
        super::timing::Cadence::Every(d) => (None, Some(millis(*d))),
    };
    Ok(Checked {
        row: ScheduleSpecRow {
            tenant,
            name: spec.name,
            cron,
            every_ms,
            time_zone: timing.time_zone().name().to_owned(),
            overlap: overlap.as_str().to_owned(),
            catch_up: catch_up.as_str().to_owned(),
            catch_up_window_ms: millis(catch_up_window),
            task_timeout_ms: task_timeout.map(millis),
            task: task.encode_to_vec(),
            paused: spec.paused,
        },
        timing,
    })
}

fn overlap_of(v: i32) -> Result<Overlap, CoordinatorError> {
    Ok(
        match pb::ScheduleOverlap::try_from(v)
            .map_err(|_| CoordinatorError::invalid("overlap", format!("unknown value {v}")))?
        {
            pb::ScheduleOverlap::Unspecified => Overlap::default(),
            pb::ScheduleOverlap::Allow => Overlap::Allow,
            pb::ScheduleOverlap::Skip => Overlap::Skip,
            pb::ScheduleOverlap::CancelPrevious => Overlap::CancelPrevious,
            pb::ScheduleOverlap::QueueOne => Overlap::QueueOne,
        },
    )
}

fn catch_up_of(v: i32) -> Result<CatchUp, CoordinatorError> {
    Ok(
        match pb::ScheduleCatchUp::try_from(v)
            .map_err(|_| CoordinatorError::invalid("catch_up", format!("unknown value {v}")))?
        {
            pb::ScheduleCatchUp::Unspecified => CatchUp::default(),
            pb::ScheduleCatchUp::Skip => CatchUp::Skip,
            pb::ScheduleCatchUp::One => CatchUp::One,
            pb::ScheduleCatchUp::All => CatchUp::All,
        },
    )
}

/// The task a tick at `tick` submits (with `key` as its idempotency key), built and
/// checked as a submit: its deadline is `task_timeout` after the later of the tick and
/// `now` (a catch-up's old tick still gets its whole timeout).
pub fn build(
    state: &State,
    task: &pb::SubmitRequest,
    task_timeout: Option<Duration>,
    tick: DateTime<Utc>,
    key: Option<String>,
) -> Result<taskwire_store::NewTask, CoordinatorError> {
    let mut req = task.clone();
    if let Some(timeout) = task_timeout {
        let start = tick.max(Utc::now());
        let deadline = chrono::Duration::from_std(timeout)
            .ok()
            .and_then(|d| start.checked_add_signed(d))
            .ok_or_else(|| CoordinatorError::invalid("task_timeout", "is too long"))?;
        req.deadline = Some(time::to_wire(deadline));
    }
    if let Some(key) = key {
        req.idempotency_key = key;
    }
    build_task(
        &state.config,
        &state.registry(),
        &state.subjects,
        req,
        None,
        Origin::Request,
        SubmitTrace::default(),
    )
}

impl Stored {
    /// Decodes a stored schedule (written by [`check`], so an error means a corrupt row).
    pub fn of(s: &ScheduleRecord) -> Result<Self, CoordinatorError> {
        let corrupt = |what: String| {
            CoordinatorError::Internal(format!("schedule {} ({}): {what}", s.name, s.schedule_id))
        };
        let every = s
            .every_ms
            .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        let timing = Timing::from_parts(s.cron.as_deref(), every, &s.time_zone)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(Self {
            timing,
            overlap: s
                .overlap
                .parse()
                .map_err(|e: TimingError| corrupt(e.to_string()))?,
            catch_up: s
                .catch_up
                .parse()
                .map_err(|e: TimingError| corrupt(e.to_string()))?,
            catch_up_window: Duration::from_millis(
                u64::try_from(s.catch_up_window_ms).unwrap_or(0),
            ),
            task_timeout: s
                .task_timeout_ms
                .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
            task: pb::SubmitRequest::decode(s.task.as_slice())
                .map_err(|e| corrupt(format!("task: {e}")))?,
        })
    }
}

fn pb_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or_default()
}

/// A stored schedule as the API shows it, with its next `next` fire times after `now`
/// (none while paused) and its `runs`.
pub fn to_pb(
    s: &ScheduleRecord,
    runs: &[ScheduleRun],
    now: DateTime<Utc>,
    next: usize,
) -> Result<pb::Schedule, CoordinatorError> {
    let stored = Stored::of(s)?;
    let cadence = match stored.timing.cadence() {
        super::timing::Cadence::Cron { expr, .. } => pb::schedule_spec::Cadence::Cron(expr.clone()),
        super::timing::Cadence::Every(d) => pb::schedule_spec::Cadence::Every(pb_duration(*d)),
    };
    let next_fires = if s.paused {
        Vec::new()
    } else {
        // The stored next fire time first (it may be due now), then the cadence's.
        let first = s.next_fire_at;
        let from = first.map_or(now, |f| f.max(now));
        first
            .into_iter()
            .chain(stored.timing.upcoming(from, next))
            .take(next)
            .map(time::to_wire)
            .collect()
    };
    Ok(pb::Schedule {
        schedule_id: s.schedule_id.to_string(),
        spec: Some(pb::ScheduleSpec {
            name: s.name.clone(),
            cadence: Some(cadence),
            time_zone: s.time_zone.clone(),
            overlap: overlap_pb(stored.overlap) as i32,
            catch_up: catch_up_pb(stored.catch_up) as i32,
            catch_up_window: Some(pb_duration(stored.catch_up_window)),
            task: Some(stored.task),
            task_timeout: stored.task_timeout.map(pb_duration),
            tenant: s.tenant.clone(),
            paused: s.paused,
        }),
        created_at: Some(time::to_wire(s.created_at)),
        updated_at: Some(time::to_wire(s.updated_at)),
        description: stored.timing.describe(),
        next_fires,
        recent_runs: runs.iter().map(run_pb).collect(),
        fires: u64::try_from(s.fires).unwrap_or(0),
        skipped_overlap: u64::try_from(s.skipped_overlap).unwrap_or(0),
        skipped_missed: u64::try_from(s.skipped_missed).unwrap_or(0),
        queued_tick: s.queued_tick.map(time::to_wire),
    })
}

fn overlap_pb(o: Overlap) -> pb::ScheduleOverlap {
    match o {
        Overlap::Allow => pb::ScheduleOverlap::Allow,
        Overlap::Skip => pb::ScheduleOverlap::Skip,
        Overlap::CancelPrevious => pb::ScheduleOverlap::CancelPrevious,
        Overlap::QueueOne => pb::ScheduleOverlap::QueueOne,
    }
}

fn catch_up_pb(c: CatchUp) -> pb::ScheduleCatchUp {
    match c {
        CatchUp::Skip => pb::ScheduleCatchUp::Skip,
        CatchUp::One => pb::ScheduleCatchUp::One,
        CatchUp::All => pb::ScheduleCatchUp::All,
    }
}

fn run_pb(r: &ScheduleRun) -> pb::ScheduleRun {
    use taskwire_store::schedules::RunOutcome;
    let outcome = match r.outcome {
        RunOutcome::Started => pb::ScheduleRunOutcome::Started,
        RunOutcome::SkippedOverlap => pb::ScheduleRunOutcome::SkippedOverlap,
        RunOutcome::Queued => pb::ScheduleRunOutcome::Queued,
        RunOutcome::Triggered => pb::ScheduleRunOutcome::Triggered,
        RunOutcome::Refused => pb::ScheduleRunOutcome::Refused,
    };
    pb::ScheduleRun {
        tick: Some(time::to_wire(r.tick)),
        outcome: outcome as i32,
        task_id: r.task_id.map(|t| t.to_string()).unwrap_or_default(),
        status: r
            .status
            .map_or(pb::TaskStatus::Unspecified, pb::TaskStatus::from) as i32,
        fired_at: Some(time::to_wire(r.fired_at)),
        reason: r.reason.clone(),
    }
}
