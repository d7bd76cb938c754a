//! JetStream's max-deliveries advisory: a task message delivered `max_deliver` times
//! without being settled stays in the WorkQueue stream forever unless someone acts.
//! The coordinator records the task as dead-lettered (with a dead-letter row holding
//! the message) and deletes the message. The advisories themselves are kept in a
//! stream until handled. Failure policy: nak and retry; the loop restarts with backoff.

use futures::StreamExt;
use taskwire_bus::codec::decode_wire;
use taskwire_bus::{Bus, MaxDeliveries, Received, Settlement};
use taskwire_protocol::{TaskId, pb};
use taskwire_store::Store;
use tokio_util::sync::CancellationToken;

use crate::error::LoopError;
use crate::metrics::{DeadLetterReason, Metrics};

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
) -> Result<(), LoopError> {
    let messages = crate::aggregator::consume::<MaxDeliveries>(
        &bus,
        &bus.subjects().advisories_stream(),
        taskwire_bus::subjects::ADVISORIES_CONSUMER,
    )
    .await?;
    let mut messages = std::pin::pin!(messages.take_until(shutdown.cancelled_owned()));
    while let Some(received) = messages.next().await {
        let delivery = match received? {
            Received::Value(delivery) => delivery,
            Received::Malformed(delivery) => {
                tracing::warn!(error = %delivery.value.error, "dropping a malformed max-deliveries advisory");
                delivery.settle(Settlement::Term).await;
                continue;
            }
        };
        let advisory = &delivery.value;
        match handle(&bus, &store, &metrics, advisory).await {
            Ok(()) => delivery.settle(Settlement::AckSync).await,
            Err(e) => {
                tracing::warn!(error = %e, seq = advisory.stream_seq, "failed to handle a max-deliveries advisory, retrying");
                let retry = Some(std::time::Duration::from_secs(1));
                delivery.settle(Settlement::Nak(retry)).await;
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
) -> Result<(), LoopError> {
    let Some(message) = bus.advised_message(a).await? else {
        // Already settled or deleted meanwhile: nothing left to do.
        return Ok(());
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
            &message.subject,
            &reason,
            &message.payload,
            None,
            task_id.map(|t| t.as_uuid()),
        )
        .await?;
    metrics.dead_letter(DeadLetterReason::MaxDeliveries);
    if let Some(id) = task_id
        && let Some(ended) = store.dead_letter_task(id, &reason).await?
    {
        tracing::warn!(task.id = %id, deliveries = a.deliveries, "task dead-lettered after max deliveries");
        crate::effects::perform(store, bus, &[ended], &reason).await;
    }
    Ok(bus.delete_advised(a).await?)
}
