//! JetStream's max-deliveries advisory: a task message delivered `max_deliver` times
//! without being settled stays in the WorkQueue stream forever unless someone acts.
//! The coordinator records the task as dead-lettered (with a dead-letter row holding
//! the message) and deletes the message. The advisories themselves are kept in a
//! stream until handled. Failure policy: nak and retry; the loop restarts with backoff.

use async_nats::jetstream::AckKind;
use futures::StreamExt;
use taskwire_bus::Bus;
use taskwire_bus::codec::decode_wire;
use taskwire_protocol::{TaskId, pb};
use taskwire_store::Store;
use tokio_util::sync::CancellationToken;

use crate::metrics::{DeadLetterReason, Metrics};

#[derive(serde::Deserialize)]
struct MaxDeliveries {
    stream: String,
    stream_seq: u64,
    deliveries: u64,
}

/// Handles max-deliveries advisories (kept in the advisories stream, so none is lost
/// while no coordinator runs) until `shutdown`; each is acknowledged once handled and
/// redelivered if handling failed (Postgres down, say).
pub async fn run(bus: Bus, store: Store, metrics: Metrics, shutdown: CancellationToken) {
    crate::aggregator::supervise("max-deliveries advisories", shutdown.clone(), || {
        advisories_once(
            bus.clone(),
            store.clone(),
            metrics.clone(),
            shutdown.clone(),
        )
    })
    .await
}

async fn advisories_once(
    bus: Bus,
    store: Store,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let messages = crate::aggregator::consume(
        bus.js(),
        &bus.subjects().advisories_stream(),
        taskwire_bus::subjects::ADVISORIES_CONSUMER,
    )
    .await?;
    let mut messages = std::pin::pin!(messages.take_until(shutdown.cancelled_owned()));
    while let Some(msg) = messages.next().await {
        let msg = msg.map_err(|e| e.to_string())?;
        let advisory: MaxDeliveries = match serde_json::from_slice(&msg.payload) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "dropping a malformed max-deliveries advisory");
                let _ = msg.ack_with(AckKind::Term).await;
                continue;
            }
        };
        match handle(&bus, &store, &metrics, &advisory).await {
            Ok(()) => {
                let _ = msg.double_ack().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, seq = advisory.stream_seq, "failed to handle a max-deliveries advisory, retrying");
                let _ = msg
                    .ack_with(AckKind::Nak(Some(std::time::Duration::from_secs(1))))
                    .await;
            }
        }
    }
    Ok(())
}

async fn handle(
    bus: &Bus,
    store: &Store,
    metrics: &Metrics,
    a: &MaxDeliveries,
) -> Result<(), String> {
    let js = bus.js();
    let stream = js.get_stream(&a.stream).await.map_err(|e| e.to_string())?;
    let message = match stream.get_raw_message(a.stream_seq).await {
        Ok(m) => m,
        Err(e) => {
            // Already settled or deleted meanwhile: nothing left to do.
            tracing::debug!(error = %e, seq = a.stream_seq, "advised message is gone");
            return Ok(());
        }
    };
    let reason = format!(
        "delivered {} times without being settled (max deliveries reached)",
        a.deliveries
    );
    let task_id = decode_wire::<pb::TaskRequest>("task request", &message.payload)
        .ok()
        .and_then(|r| TaskId::parse_field("task_id", &r.task_id).ok());
    store
        .record_dead_letter(
            message.subject.as_str(),
            &reason,
            &message.payload,
            None,
            task_id.map(|t| t.as_uuid()),
        )
        .await
        .map_err(|e| e.to_string())?;
    metrics.dead_letter(DeadLetterReason::MaxDeliveries);
    if let Some(id) = task_id
        && let Some(ended) = store
            .dead_letter_task(id, &reason)
            .await
            .map_err(|e| e.to_string())?
    {
        tracing::warn!(task.id = %id, deliveries = a.deliveries, "task dead-lettered after max deliveries");
        crate::effects::perform(store, bus, &[ended], &reason).await;
    }
    stream
        .delete_message(a.stream_seq)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}
