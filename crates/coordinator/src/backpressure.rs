//! Backpressure: the tasks stream is bounded, and `Submit` refuses work it could not
//! queue (`RESOURCE_EXHAUSTED`) rather than accepting it and dropping it.
//!
//! A named loop samples the stream's message count; submits compare against it. The
//! sample lags by at most `SAMPLE`: a burst may overshoot the bound by what arrives in
//! that window, and those tasks wait in the outbox (never lost) until the relay can
//! publish them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use taskwire_bus::Bus;
use tokio_util::sync::CancellationToken;

const SAMPLE: Duration = Duration::from_millis(100);

/// The latest sampled depth of the tasks stream.
#[derive(Clone, Default)]
pub struct QueueDepth(Arc<AtomicU64>);

impl QueueDepth {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Samples the depth of `stream` until `shutdown`; with `outbox` (a dispatch window
/// holds the backlog in Postgres), the dispatches waiting there count too. Failure
/// policy: keep the last sample and try again next tick.
pub async fn run(
    bus: Bus,
    stream: String,
    outbox: Option<taskwire_store::Store>,
    depth: QueueDepth,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let waiting = match &outbox {
            Some(store) => match store.outbox_count().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %e, "failed to count the outbox");
                    continue;
                }
            },
            None => 0,
        };
        match bus.stream_depth(&stream).await {
            Ok(messages) => depth
                .0
                .store(messages.saturating_add(waiting), Ordering::Relaxed),
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
