//! Backpressure: `Submit` refuses work the fleet could not queue or is too far behind
//! on (`RESOURCE_EXHAUSTED`, with a hint to retry) rather than accepting it and letting
//! the backlog and its latency grow.
//!
//! A named loop samples the fleet's backlog at each stage a task waits in: dispatches
//! in the outbox, task messages in the tasks stream (queued or running), and results in
//! the results stream that no coordinator has recorded yet. Submits compare the tasks
//! stream's depth with `--max-queued-tasks` (the stream's bound) and the whole backlog
//! with `--max-backlog`.
//!
//! The coordinators sample for one another: each shares its sample on `<P>.backlog`,
//! and a coordinator that hears a peer's sample takes it and puts off its own, so the
//! fleet reads the streams and the outbox about once per `SAMPLE` whatever its number
//! of coordinators (each timer runs `SAMPLE` plus up to `JITTER`, so one coordinator
//! draws the shortest and the others take its sample). While the fleet is idle (an
//! empty backlog and no submit since) a sample is taken every `IDLE_SAMPLE`; the first
//! submit after it brings the next sample forward to `SAMPLE` after the last. The
//! sample thus lags by at most `SAMPLE` + `JITTER`: a burst may overshoot a bound by
//! what arrives in that window, and those tasks are kept (never lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use taskwire_bus::Bus;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use taskwire_bus::messages::Backlog;

/// How often the backlog is sampled while the fleet has work.
const SAMPLE: Duration = Duration::from_millis(100);
/// The most a sampler's timer adds to `SAMPLE`, drawn afresh each time.
const JITTER: Duration = Duration::from_millis(50);
/// How often it is sampled while the fleet is idle.
const IDLE_SAMPLE: Duration = Duration::from_secs(1);

/// The latest sampled backlog, by stage. Cheap to clone.
#[derive(Clone, Default)]
pub struct QueueDepth(Arc<Stages>);

#[derive(Default)]
struct Stages {
    outbox: AtomicU64,
    tasks: AtomicU64,
    results: AtomicU64,
    /// A submit was admitted since the sampler last sampled.
    submitted: AtomicBool,
    /// Wakes an idle sampler on the first submit.
    wake: tokio::sync::Notify,
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

    fn set(&self, backlog: Backlog) {
        self.0.outbox.store(backlog.outbox, Ordering::Relaxed);
        self.0.tasks.store(backlog.tasks, Ordering::Relaxed);
        self.0.results.store(backlog.results, Ordering::Relaxed);
    }

    /// A submit was admitted: an idle sampler samples again `SAMPLE` after its last.
    fn submitted(&self) {
        if !self.0.submitted.swap(true, Ordering::Relaxed) {
            self.0.wake.notify_one();
        }
    }

    /// How long until the sample after `backlog`: `IDLE_SAMPLE` when it is empty and no
    /// submit came since this coordinator's last sample, else `SAMPLE`; plus jitter.
    fn period_after(&self, backlog: &Backlog) -> Duration {
        let idle = backlog.total() == 0 && !self.0.submitted.load(Ordering::Relaxed);
        let base = if idle { IDLE_SAMPLE } else { SAMPLE };
        base + JITTER.mul_f64(fastrand::f64())
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
    state.queue_depth.submitted();
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

/// Samples the backlog until `shutdown`, sharing each sample with the other
/// coordinators and taking theirs. Failure policy: keep a stage's last sample and try
/// again next time; without the shared subject (it could not be subscribed), sample
/// alone.
pub async fn run(sources: Sources, depth: QueueDepth, shutdown: CancellationToken) {
    let mut peers = match sources.bus.backlog_samples().await {
        Ok(samples) => Some(samples),
        Err(e) => {
            tracing::warn!(error = %e, "cannot hear the other coordinators' backlog samples, sampling alone");
            None
        }
    };
    let mut last = Instant::now();
    let mut next = last;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
            _ = depth.0.wake.notified() => {
                next = next.min(last + SAMPLE);
                continue;
            }
            Some(shared) = next_shared(&mut peers) => {
                match shared {
                    Ok(backlog) => {
                        depth.set(backlog);
                        last = Instant::now();
                        next = last + depth.period_after(&backlog);
                    }
                    Err(m) => tracing::debug!(error = %m.error, "malformed backlog sample, ignored"),
                }
                continue;
            }
        }
        // Cleared before reading: a submit admitted meanwhile keeps the next sample near.
        depth.0.submitted.store(false, Ordering::Relaxed);
        let backlog = sample(&sources, &depth).await;
        depth.set(backlog);
        if peers.is_some()
            && let Err(e) = sources.bus.share_backlog(&backlog).await
        {
            tracing::debug!(error = %e, "failed to share a backlog sample");
        }
        last = Instant::now();
        next = last + depth.period_after(&backlog);
    }
}

/// The next sample a coordinator shared; pending forever without the subscription.
async fn next_shared(
    peers: &mut Option<taskwire_bus::subscription::Subscription<Backlog>>,
) -> Option<Result<Backlog, taskwire_bus::consumer::Malformed>> {
    match peers {
        Some(samples) => match samples.next().await {
            Some(sample) => Some(sample),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// One sample of the backlog; a stage that cannot be read keeps its last value.
async fn sample(sources: &Sources, depth: &QueueDepth) -> Backlog {
    let mut backlog = depth.backlog();
    // Each stage is read before the stage a task comes to it from (results, the tasks
    // stream, the outbox), so a task that moves on between two reads is counted at
    // most once: a relay publishes a row before it deletes it, and read the other way
    // round the task could be counted in both.
    match sources.bus.stream_depth(&sources.results_stream).await {
        Ok(messages) => backlog.results = messages,
        Err(e) => tracing::debug!(error = %e, "failed to sample the results stream"),
    }
    let stream = sources.bus.stream_depth(&sources.tasks_stream).await;
    match sources.store.outbox_count_up_to(sources.outbox_cap).await {
        Ok(n) => backlog.outbox = n,
        Err(e) => tracing::debug!(error = %e, "failed to count the outbox"),
    }
    match stream {
        Ok(messages) => {
            let waiting = if sources.window { backlog.outbox } else { 0 };
            backlog.tasks = messages.saturating_add(waiting);
        }
        Err(e) => tracing::debug!(error = %e, "failed to sample the tasks stream"),
    }
    backlog
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

#[cfg(test)]
mod tests;
