//! Backpressure: `Submit` refuses work the fleet could not queue or is too far behind
//! on (`RESOURCE_EXHAUSTED`, with a hint to retry) rather than accepting it and letting
//! the backlog and its latency grow.
//!
//! A named loop samples, every `SAMPLE`, the fleet's backlog at each stage a task waits
//! in: dispatches in the outbox, task messages in the tasks stream (queued or running),
//! and results in the results stream that no coordinator has recorded yet. Submits
//! compare the tasks stream's depth with `--max-queued-tasks` (the stream's bound) and
//! the whole backlog with `--max-backlog`. The sample lags by at most `SAMPLE`: a burst
//! may overshoot a bound by what arrives in that window, and those tasks are kept
//! (never lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use taskwire_bus::Bus;
use tokio_util::sync::CancellationToken;

const SAMPLE: Duration = Duration::from_millis(100);

/// The latest sampled backlog, by stage. Cheap to clone.
#[derive(Clone, Default)]
pub struct QueueDepth(Arc<Stages>);

#[derive(Default)]
struct Stages {
    outbox: AtomicU64,
    tasks: AtomicU64,
    results: AtomicU64,
}

/// A backlog sample, by stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Dispatches committed and not yet published.
    pub outbox: u64,
    /// Task messages in the tasks stream: waiting for a worker, or running.
    pub tasks: u64,
    /// Results published by workers and not yet recorded.
    pub results: u64,
}

impl Backlog {
    /// Tasks the fleet is behind on, all stages together.
    pub fn total(&self) -> u64 {
        self.outbox
            .saturating_add(self.tasks)
            .saturating_add(self.results)
    }
}

impl QueueDepth {
    /// The tasks stream's depth (with a dispatch window, the outbox's dispatches too).
    pub fn get(&self) -> u64 {
        self.0.tasks.load(Ordering::Relaxed)
    }

    /// The whole backlog, by stage.
    pub fn backlog(&self) -> Backlog {
        Backlog {
            outbox: self.0.outbox.load(Ordering::Relaxed),
            tasks: self.0.tasks.load(Ordering::Relaxed),
            results: self.0.results.load(Ordering::Relaxed),
        }
    }
}

/// Whether a submit may be accepted now: refused `RESOURCE_EXHAUSTED` when the tasks
/// stream is full (`--max-queued-tasks`) or the fleet is too far behind
/// (`--max-backlog`), with what was sampled; counted by reason.
pub fn admit(state: &crate::State) -> Result<(), crate::CoordinatorError> {
    use crate::metrics::Refusal;
    let backlog = state.queue_depth.backlog();
    let queue_limit = u64::try_from(state.config.max_queued_tasks).unwrap_or(u64::MAX);
    if backlog.tasks >= queue_limit {
        state.metrics.submit_refused(Refusal::QueueFull);
        return Err(crate::CoordinatorError::ResourceExhausted(format!(
            "the task queue is full ({} tasks waiting, limit {queue_limit}); retry later",
            backlog.tasks
        )));
    }
    let limit = state.config.max_backlog;
    if limit > 0 && backlog.total() >= limit {
        state.metrics.submit_refused(Refusal::Backlog);
        return Err(crate::CoordinatorError::ResourceExhausted(format!(
            "the fleet is behind: {} tasks not finished ({} to dispatch, {} queued or running, \
             {} results to record; limit {limit}); retry in a second",
            backlog.total(),
            backlog.outbox,
            backlog.tasks,
            backlog.results
        )));
    }
    Ok(())
}

/// What the sampler reads.
pub struct Sources {
    pub bus: Bus,
    pub tasks_stream: String,
    pub results_stream: String,
    pub store: taskwire_store::Store,
    /// A dispatch window holds the backlog in the outbox: count it as queued too.
    pub window: bool,
    /// Most outbox rows counted (a count bounded by the largest limit compared with).
    pub outbox_cap: i64,
}

/// Samples the backlog until `shutdown`. Failure policy: keep a stage's last sample and
/// try again next tick.
pub async fn run(sources: Sources, depth: QueueDepth, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SAMPLE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        // Each stage is read before the stage a task comes to it from (results, the
        // tasks stream, the outbox), so a task that moves on between two reads is
        // counted at most once: a relay publishes a row before it deletes it, and read
        // the other way round the task could be counted in both.
        match sources.bus.stream_depth(&sources.results_stream).await {
            Ok(messages) => depth.0.results.store(messages, Ordering::Relaxed),
            Err(e) => tracing::debug!(error = %e, "failed to sample the results stream"),
        }
        let stream = sources.bus.stream_depth(&sources.tasks_stream).await;
        match sources.store.outbox_count_up_to(sources.outbox_cap).await {
            Ok(n) => depth.0.outbox.store(n, Ordering::Relaxed),
            Err(e) => tracing::debug!(error = %e, "failed to count the outbox"),
        }
        match stream {
            Ok(messages) => {
                let waiting = if sources.window {
                    depth.0.outbox.load(Ordering::Relaxed)
                } else {
                    0
                };
                depth
                    .0
                    .tasks
                    .store(messages.saturating_add(waiting), Ordering::Relaxed);
            }
            Err(e) => tracing::debug!(error = %e, "failed to sample the tasks stream"),
        }
    }
}

/// How often the dispatch window's count of undelivered tasks is sampled.
const PENDING_SAMPLE: Duration = Duration::from_millis(50);

/// Tasks in the tasks stream that no worker has taken yet (the workers' consumer's
/// pending count), as last sampled, and when that sample was started: the relay's
/// dispatch window (`--dispatch-window`) counts what it published since then on top.
#[derive(Clone, Default)]
pub struct Undelivered(Arc<std::sync::Mutex<Option<(u64, tokio::time::Instant)>>>);

impl Undelivered {
    /// `(count, when the sample that read it started)`; `None` before the first.
    pub fn get(&self) -> Option<(u64, tokio::time::Instant)> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, count: u64, started: tokio::time::Instant) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((count, started));
    }
}

/// Samples the undelivered tasks of `consumer` on `stream` until `shutdown` (the
/// stream's depth while no worker has made the consumer). Failure policy: keep the
/// last sample.
pub async fn sample_undelivered(
    bus: Bus,
    stream: String,
    consumer: String,
    undelivered: Undelivered,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(PENDING_SAMPLE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let started = tokio::time::Instant::now();
        let count = match bus.consumer_pending(&stream, &consumer).await {
            Ok(Some(pending)) => pending,
            Ok(None) => match bus.stream_depth(&stream).await {
                Ok(messages) => messages,
                Err(e) => {
                    tracing::debug!(error = %e, "failed to sample the undelivered tasks");
                    continue;
                }
            },
            Err(_) => continue,
        };
        undelivered.set(count, started);
    }
}
