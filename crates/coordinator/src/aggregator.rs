//! The aggregator: records results and dead letters reported by workers.
//!
//! Results arrive on the RESULTS stream; each is written fenced by its claim epoch
//! (a stale attempt's result is discarded), then acknowledged, then a "finished" notice
//! wakes watchers; a task that ended this way has its live descendants cancelled. A message that cannot be decoded is recorded as a dead letter and
//! terminated. When traces are exported, each write is a `record_result` span under the
//! attempt's span. A result whose patch was too large for its message names an object in
//! the patch bucket: the aggregator reads it and records the whole patch; an object
//! that is gone or corrupt is recorded as the result's `patch_not_carried` error (the
//! rest of the result stands), and a bucket it cannot reach naks the message. Failure
//! policy: a failed database write naks the batch (redelivered after
//! a delay); the loop restarts with backoff if the consumer itself fails.

use std::time::Duration;

use backon::BackoffBuilder as _;

use futures::StreamExt;
use taskwire_bus::consumer::{Deliveries, Incoming};
use taskwire_bus::messages::DeadLetter;
use taskwire_bus::{Bus, BusError, PatchError, Patches, Received, Settlement};
use taskwire_protocol::{ResultErrorCode, TaskError, TaskResult, TaskStatus};
use taskwire_store::Store;
use tokio_util::sync::CancellationToken;

use crate::error::LoopError;
use crate::metrics::{DeadLetterReason, Metrics};

const MAX_BATCH: usize = 512;
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Consumes results until `shutdown`, restarting the consumer on failure.
pub async fn run_results(
    bus: Bus,
    patches: Patches,
    store: Store,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    supervise("results aggregator", shutdown.clone(), || {
        results_once(
            bus.clone(),
            patches.clone(),
            store.clone(),
            metrics.clone(),
            shutdown.clone(),
        )
    })
    .await
}

/// Consumes dead letters until `shutdown`, restarting the consumer on failure.
pub async fn run_dead_letters(
    bus: Bus,
    store: Store,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    supervise("dead-letter recorder", shutdown.clone(), || {
        dead_letters_once(
            bus.clone(),
            store.clone(),
            metrics.clone(),
            shutdown.clone(),
        )
    })
    .await
}

pub(crate) async fn supervise<F, Fut, E>(
    name: &'static str,
    shutdown: CancellationToken,
    mut start: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    // 100 ms, doubling up to 5 s.
    let mut backoff = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_factor(2.0)
        .without_max_times()
        .build();
    while !shutdown.is_cancelled() {
        match start().await {
            Ok(()) => return,
            Err(e) => tracing::warn!(loop_name = name, error = %e, "loop failed, restarting"),
        }
        let delay = backoff.next().unwrap_or(Duration::from_secs(5));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// The deliveries of the durable consumer `name` on `stream`.
pub(crate) async fn consume<T: Incoming>(
    bus: &Bus,
    stream: &str,
    name: &str,
) -> Result<Deliveries<T>, BusError> {
    // A short ack wait: results a killed coordinator had prefetched come back quickly;
    // a slow write that outlives it is redelivered and then found already recorded.
    let consumer = bus
        .consume::<T>(stream, name, Duration::from_secs(10))
        .await?;
    consumer.messages().await
}

async fn results_once(
    bus: Bus,
    patches: Patches,
    store: Store,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), LoopError> {
    let messages = consume::<TaskResult>(
        &bus,
        &bus.subjects().results_stream(),
        taskwire_bus::subjects::RESULTS_CONSUMER,
    )
    .await?;
    let mut chunks = std::pin::pin!(
        messages
            .take_until(shutdown.cancelled_owned())
            .ready_chunks(MAX_BATCH)
    );
    while let Some(chunk) = chunks.next().await {
        let mut results = Vec::with_capacity(chunk.len());
        let mut acks = Vec::with_capacity(chunk.len());
        for received in chunk {
            match received? {
                Received::Value(delivery) => {
                    let (mut r, delivery) = delivery.take();
                    match fetch_patch(&patches, &mut r).await {
                        Ok(()) => {
                            results.push(r);
                            acks.push(delivery);
                        }
                        Err(e) => {
                            tracing::warn!(task.id = %r.task_id, error = %e, "failed to read a result's patch, redelivering");
                            delivery.settle(Settlement::Nak(Some(RETRY_DELAY))).await;
                        }
                    }
                }
                Received::Malformed(delivery) => {
                    let m = &delivery.value;
                    tracing::warn!(error = %m.error, subject = %m.subject, "malformed result, dead-lettering");
                    store
                        .record_dead_letter(
                            &m.subject,
                            &m.error.to_string(),
                            &m.payload,
                            None,
                            None,
                        )
                        .await?;
                    metrics.dead_letter(DeadLetterReason::MalformedResult);
                    delivery.settle(Settlement::Term).await;
                }
            }
        }
        // One span per result, spanning the batch's write (only when traces are exported).
        let spans: Vec<_> = results
            .iter()
            .map(|r| {
                taskwire_traces::exporting().then(|| {
                    crate::spans::record_result(&r.task_id, &r.trace_id, r.attempt, &r.traceparent)
                })
            })
            .collect();
        match store.record_results_timed(&results).await {
            Ok(recorded) => {
                let mut changed = Vec::new();
                for (((delivery, result), recorded), span) in
                    acks.iter().zip(&results).zip(recorded).zip(&spans)
                {
                    let span = span.clone().unwrap_or_else(taskwire_traces::Spanned::none);
                    span.trace.set("task.recorded", recorded.is_some());
                    match recorded {
                        Some(r) if r.transition.status == TaskStatus::Queued => {
                            metrics.task_retried(&r.agent);
                            span.in_scope(|| tracing::info!(task.id = %result.task_id, task.attempt = result.attempt, "attempt failed, retry scheduled"));
                        }
                        Some(r) => {
                            let status = r.transition.status;
                            metrics.task_finished(
                                &r.agent,
                                status.as_str(),
                                r.since_submit,
                                r.since_claim,
                            );
                            span.in_scope(|| tracing::debug!(task.id = %result.task_id, %status, "result recorded"));
                            changed.push(r.transition);
                        }
                        None => span.in_scope(|| {
                            tracing::info!(
                                task.id = %result.task_id,
                                task.attempt = result.attempt,
                                "result discarded: stale claim or task already finished"
                            )
                        }),
                    }
                    delivery.settle(Settlement::Ack).await;
                }
                crate::effects::perform(&store, &bus, &changed, "the task ended").await;
            }
            Err(e) => {
                for span in spans.iter().flatten() {
                    span.trace.fail("store_error");
                }
                tracing::warn!(error = %e, batch = results.len(), "failed to record results, redelivering");
                for delivery in &acks {
                    delivery.settle(Settlement::Nak(Some(RETRY_DELAY))).await;
                }
            }
        }
    }
    Ok(())
}

/// Replaces a result's patch reference with the patch it names. An object that is
/// gone or corrupt becomes the result's `patch_not_carried` error; only a bucket that
/// cannot be reached now is an `Err` (try again later).
async fn fetch_patch(patches: &Patches, result: &mut TaskResult) -> Result<(), PatchError> {
    let Some(reference) = result.patch_ref.take() else {
        return Ok(());
    };
    match patches.get(&reference).await {
        Ok(patch) => {
            tracing::debug!(task.id = %result.task_id, bytes = patch.len(), "result patch read from the patch bucket");
            result.patch = patch;
            Ok(())
        }
        Err(e) if e.is_retryable() => {
            result.patch_ref = Some(reference);
            Err(e)
        }
        Err(e) => {
            tracing::warn!(task.id = %result.task_id, error = %e, "result recorded without its patch");
            result.errors.push(TaskError {
                code: ResultErrorCode::PatchNotCarried.as_str().to_owned(),
                message: format!("the task's patch was not recorded: {e}"),
                retryable: false,
            });
            Ok(())
        }
    }
}

async fn dead_letters_once(
    bus: Bus,
    store: Store,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), LoopError> {
    let messages = consume::<DeadLetter>(
        &bus,
        &bus.subjects().dead_letter_stream(),
        taskwire_bus::subjects::DEAD_LETTERS_CONSUMER,
    )
    .await?;
    let mut messages = std::pin::pin!(messages.take_until(shutdown.cancelled_owned()));
    while let Some(received) = messages.next().await {
        let (letter, delivery) = received?.take();
        let (subject, reason, payload, worker, task) = match letter {
            Ok(d) => (
                d.subject,
                d.reason,
                d.payload,
                Some(d.worker_id),
                d.task.map(|t| t.as_uuid()),
            ),
            // Recorded as it is: a dead letter is never lost for being unreadable.
            Err(m) => (
                m.subject,
                m.error.to_string(),
                m.payload.to_vec(),
                None,
                None,
            ),
        };
        match store
            .record_dead_letter(&subject, &reason, &payload, worker.as_deref(), task)
            .await
        {
            Ok(()) => {
                metrics.dead_letter(DeadLetterReason::Rejected);
                tracing::warn!(subject = %subject, reason = %reason, "dead letter recorded");
                delivery.settle(Settlement::AckSync).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to record a dead letter, redelivering");
                delivery.settle(Settlement::Nak(Some(RETRY_DELAY))).await;
            }
        }
    }
    Ok(())
}
