//! The scheduler: every coordinator runs one. Each pass finds the schedules whose tick
//! came (or whose queued tick may start) and fires each in its own transaction
//! ([`taskwire_store::schedules::FireTx`]): the due ticks under the catch-up policy, each
//! tick under the overlap policy, the tasks with their outbox rows, the runs, and the
//! schedule moved past them. A schedule another coordinator is firing is skipped, so
//! each tick fires once. Failure policy: log, and the next pass tries again (nothing
//! was written).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use taskwire_protocol::TaskId;
use taskwire_store::InsertOutcome;
use taskwire_store::schedules::{Advance, FireOf, FireTx, NewRun, RunOutcome, tick_key};
use tokio_util::sync::CancellationToken;

use super::spec::{Stored, build};
use super::timing::{AtTick, at_tick, due};
use crate::metrics::ScheduleOutcome;
use crate::{CoordinatorError, State};

/// Most schedules one pass looks at.
const SCAN_LIMIT: i64 = 256;
/// Shortest wait between passes.
const MIN_WAIT: std::time::Duration = std::time::Duration::from_millis(5);
/// Most ticks one schedule fires in one pass (a catch-up of `all` continues next pass).
const MAX_FIRES: usize = 100;

/// Runs passes until `shutdown`: each at the earliest tick of any active schedule (by
/// the database's clock, so every coordinator wakes at the tick and the first to lock a
/// schedule fires it), and at least every `schedule_interval` (for queued ticks whose
/// previous run ended, and schedules created or resumed meanwhile).
pub async fn run(state: Arc<State>, shutdown: CancellationToken) {
    let interval = state.config.schedule_interval;
    let mut wait = interval;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if !pass(&state, &shutdown).await {
            // A failed fire stays due: look again at the usual pace, not at once.
            wait = interval;
            continue;
        }
        wait = match state.store.until_next_tick().await {
            // A schedule still due is another coordinator's, being fired: it moves on
            // within milliseconds.
            Ok(Some(until)) => until.clamp(MIN_WAIT, interval.max(MIN_WAIT)),
            Ok(None) => interval,
            Err(e) => {
                tracing::debug!(error = %e, "failed to read the next tick");
                interval
            }
        };
    }
}

/// One pass: every due schedule fired, if no other coordinator holds it; whether
/// nothing failed.
async fn pass(state: &State, shutdown: &CancellationToken) -> bool {
    let ids = match state.store.due_schedules(SCAN_LIMIT).await {
        Ok(ids) => ids,
        Err(e) => {
            tracing::warn!(error = %e, "scan for due schedules failed");
            return false;
        }
    };
    let mut ok = true;
    for id in ids {
        if shutdown.is_cancelled() {
            break;
        }
        if let Err(e) = fire_due(state, id).await {
            tracing::warn!(schedule.id = %id, error = %e, "schedule fire failed");
            ok = false;
        }
    }
    ok
}

/// What one fire did, acted on after its commit.
#[derive(Default)]
struct Fired {
    started: Vec<(DateTime<Utc>, TaskId, bool)>,
    cancel: Option<TaskId>,
    counts: Vec<(ScheduleOutcome, u64)>,
}

/// Fires one due schedule, if no other coordinator holds it.
async fn fire_due(state: &State, id: uuid::Uuid) -> Result<(), CoordinatorError> {
    let Some(mut fire) = state.store.begin_fire(FireOf::Due(id)).await? else {
        return Ok(());
    };
    let stored = Stored::of(&fire.schedule)?;
    let now = fire.now;
    let mut fired = Fired::default();
    let mut running = fire.previous_running;
    let mut queued = fire.schedule.queued_tick;
    let mut advance = Advance {
        next_fire_at: fire.schedule.next_fire_at,
        moves_cadence: true,
        ..Advance::default()
    };
    // A tick that waited for the previous run, which has ended.
    if let Some(tick) = queued.filter(|_| !running) {
        queued = None;
        running |= start(
            state,
            &mut fire,
            &stored,
            tick,
            RunOutcome::Started,
            &mut advance,
            &mut fired,
        )
        .await?;
    }
    if let Some(next) = fire.schedule.next_fire_at.filter(|n| *n <= now) {
        let d = due(
            &stored.timing,
            next,
            now,
            stored.catch_up,
            stored.catch_up_window,
            state.config.schedule_grace,
            MAX_FIRES,
        );
        advance.next_fire_at = d.next;
        advance.skipped_missed = i64::try_from(d.missed).unwrap_or(i64::MAX);
        fired
            .counts
            .push((ScheduleOutcome::SkippedMissed, d.missed));
        if d.missed > 0 {
            tracing::info!(schedule = %fire.schedule.name, ticks = d.missed, policy = stored.catch_up.as_str(), "missed schedule ticks dropped");
        }
        for tick in d.fire {
            match at_tick(stored.overlap, running, queued.is_some()) {
                verdict @ (AtTick::Start | AtTick::CancelPreviousThenStart) => {
                    if verdict == AtTick::CancelPreviousThenStart {
                        fired.cancel = advance
                            .last_task_id
                            .or(fire.schedule.last_task_id.map(TaskId::from_uuid));
                    }
                    running |= start(
                        state,
                        &mut fire,
                        &stored,
                        tick,
                        RunOutcome::Started,
                        &mut advance,
                        &mut fired,
                    )
                    .await?;
                }
                AtTick::Skip => {
                    fire.record(NewRun {
                        tick,
                        outcome: RunOutcome::SkippedOverlap,
                        task_id: None,
                        reason: "the previous run was still going".to_owned(),
                    });
                    advance.skipped_overlap += 1;
                    fired.counts.push((ScheduleOutcome::SkippedOverlap, 1));
                }
                AtTick::Queue => {
                    fire.record(NewRun {
                        tick,
                        outcome: RunOutcome::Queued,
                        task_id: None,
                        reason: "waits for the previous run to end".to_owned(),
                    });
                    queued = Some(tick);
                    fired.counts.push((ScheduleOutcome::Queued, 1));
                }
            }
            advance.last_tick = Some(tick);
        }
    }
    advance.queued_tick = queued;
    let name = fire.schedule.name.clone();
    fire.commit(advance).await?;
    after_commit(state, &name, now, fired).await;
    Ok(())
}

/// Builds and inserts a tick's task, recording the run; whether a task was started.
#[allow(clippy::too_many_arguments)]
async fn start(
    state: &State,
    fire: &mut FireTx,
    stored: &Stored,
    tick: DateTime<Utc>,
    outcome: RunOutcome,
    advance: &mut Advance,
    fired: &mut Fired,
) -> Result<bool, CoordinatorError> {
    let key = tick_key(fire.schedule.schedule_id, tick);
    let mut task = stored.task.clone();
    if task.sender.is_empty() {
        task.sender = format!("schedule:{}", fire.schedule.name);
    }
    let refused = |reason: String| NewRun {
        tick,
        outcome: RunOutcome::Refused,
        task_id: None,
        reason,
    };
    if let Err(e) = crate::backpressure::admit(state) {
        fire.record(refused(e.to_string()));
        fired.counts.push((ScheduleOutcome::Refused, 1));
        return Ok(false);
    }
    let new = match build(state, &task, stored.task_timeout, tick, Some(key)) {
        Ok(new) => new,
        Err(e) => {
            tracing::warn!(schedule = %fire.schedule.name, tick = %tick, error = %e, "schedule tick refused");
            fire.record(refused(e.to_string()));
            fired.counts.push((ScheduleOutcome::Refused, 1));
            return Ok(false);
        }
    };
    let agent = new.request.agent.clone();
    let outcomes = fire.insert_tasks(std::slice::from_ref(&new)).await?;
    let (task_id, created) = match outcomes.first() {
        Some(InsertOutcome::Created(id)) => (*id, true),
        Some(InsertOutcome::Existing(id)) => (*id, false),
        Some(InsertOutcome::Conflict(id)) => {
            fire.record(refused(format!(
                "its idempotency key is held by task {id} with a different request"
            )));
            fired.counts.push((ScheduleOutcome::Refused, 1));
            return Ok(false);
        }
        None => {
            return Err(CoordinatorError::Internal(
                "insert returned no outcome".to_owned(),
            ));
        }
    };
    fire.record(NewRun {
        tick,
        outcome,
        task_id: Some(task_id),
        reason: String::new(),
    });
    if created {
        advance.fires += 1;
        state.metrics.task_submitted(agent.as_str());
    }
    advance.last_task_id = Some(task_id);
    let label = if outcome == RunOutcome::Triggered {
        ScheduleOutcome::Triggered
    } else {
        ScheduleOutcome::Started
    };
    fired.counts.push((label, 1));
    fired.started.push((tick, task_id, created));
    Ok(true)
}

/// What follows a committed fire: the relay woken, the previous run cancelled
/// (`cancel_previous`), metrics and logs.
async fn after_commit(state: &State, name: &str, now: DateTime<Utc>, fired: Fired) {
    if !fired.started.is_empty() {
        state.relay_wake.notify_one();
    }
    for (outcome, n) in fired.counts {
        state.metrics.schedule_ticks(outcome, n);
    }
    for (tick, task_id, created) in &fired.started {
        if *created {
            state
                .metrics
                .schedule_lag((now - *tick).to_std().unwrap_or_default());
        }
        tracing::info!(schedule = %name, tick = %tick, task.id = %task_id, "schedule fired");
    }
    if let Some(previous) = fired.cancel {
        let why =
            format!("cancelled by schedule `{name}`: a new tick started (overlap cancel_previous)");
        match state.store.cancel_tree(previous).await {
            Ok(cancelled) => {
                for t in &cancelled {
                    tracing::info!(task.id = %t.task_id, schedule = %name, "previous scheduled run cancelled");
                }
                state.perform(&cancelled, &why).await;
            }
            Err(e) => {
                tracing::warn!(task.id = %previous, schedule = %name, error = %e, "cancel of the previous scheduled run failed");
            }
        }
    }
}

/// Fires the tenant's schedule `name` now (TriggerSchedule): one task keyed by the
/// trigger's time, whatever the overlap policy, paused or not; the cadence is left
/// as it is.
pub async fn trigger(
    state: &State,
    tenant: &str,
    name: &str,
) -> Result<(TaskId, taskwire_protocol::TraceId), CoordinatorError> {
    let Some(mut fire) = state
        .store
        .begin_fire(FireOf::Named { tenant, name })
        .await?
    else {
        return Err(CoordinatorError::NotFound(format!("schedule `{name}`")));
    };
    let stored = Stored::of(&fire.schedule)?;
    let now = fire.now;
    let mut fired = Fired::default();
    let mut advance = Advance {
        queued_tick: fire.schedule.queued_tick,
        ..Advance::default()
    };
    if !start(
        state,
        &mut fire,
        &stored,
        now,
        RunOutcome::Triggered,
        &mut advance,
        &mut fired,
    )
    .await?
    {
        // The task was refused: say why, and keep nothing.
        crate::backpressure::admit(state)?;
        build(state, &stored.task, stored.task_timeout, now, None)?;
        return Err(CoordinatorError::Internal(
            "the triggered task was refused".to_owned(),
        ));
    }
    let Some(&(_, task_id, _)) = fired.started.first() else {
        return Err(CoordinatorError::Internal(
            "a started trigger recorded no task".to_owned(),
        ));
    };
    fire.commit(advance).await?;
    after_commit(state, name, now, fired).await;
    let trace_id = state
        .store
        .task_request(task_id)
        .await?
        .map(|r| r.trace_id)
        .ok_or_else(|| CoordinatorError::Internal(format!("task {task_id} vanished")))?;
    Ok((task_id, trace_id))
}
