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

use async_nats::jetstream;
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

/// Samples the depth of `stream` until `shutdown`. Failure policy: keep the last sample
/// and try again next tick.
pub async fn run(
    js: jetstream::Context,
    stream: String,
    depth: QueueDepth,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match js.get_stream(&stream).await {
            Ok(mut s) => match s.info().await {
                Ok(info) => depth.0.store(info.state.messages, Ordering::Relaxed),
                Err(e) => tracing::debug!(error = %e, "failed to sample the tasks stream"),
            },
            Err(e) => tracing::debug!(error = %e, "failed to sample the tasks stream"),
        }
    }
}
