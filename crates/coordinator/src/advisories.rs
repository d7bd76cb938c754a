//! JetStream's max-deliveries advisory: a task message delivered `max_deliver` times
//! without being settled stays in the WorkQueue stream forever unless someone acts.
//! The coordinator records the task as dead-lettered (with a dead-letter row holding
//! the message) and deletes the message. Failure policy: log and keep listening; the
//! message stays in the stream, so nothing is lost.

use async_nats::jetstream;
use futures::StreamExt;
use taskwire_bus::Subjects;
use taskwire_protocol::{TaskId, pb, task::decode};
use taskwire_store::Store;
use tokio_util::sync::CancellationToken;

#[derive(serde::Deserialize)]
struct MaxDeliveries {
    stream: String,
    stream_seq: u64,
    deliveries: u64,
}

/// Listens for max-deliveries advisories on the tasks stream until `shutdown`.
pub async fn run(
    client: async_nats::Client,
    js: jetstream::Context,
    store: Store,
    subjects: Subjects,
    shutdown: CancellationToken,
) {
    let subject = format!(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{}.*",
        subjects.tasks_stream()
    );
    let sub = match client.subscribe(subject.clone()).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, subject = %subject, "failed to subscribe to max-deliveries advisories");
            return;
        }
    };
    let mut sub = std::pin::pin!(sub.take_until(shutdown.cancelled_owned()));
    while let Some(msg) = sub.next().await {
        let advisory: MaxDeliveries = match serde_json::from_slice(&msg.payload) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring malformed max-deliveries advisory");
                continue;
            }
        };
        if let Err(e) = handle(&js, &store, &subjects, &advisory).await {
            tracing::warn!(error = %e, seq = advisory.stream_seq, "failed to handle a max-deliveries advisory");
        }
    }
}

async fn handle(
    js: &jetstream::Context,
    store: &Store,
    subjects: &Subjects,
    a: &MaxDeliveries,
) -> Result<(), String> {
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
    let task_id = decode::<pb::TaskRequest>("task request", &message.payload)
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
    if let Some(id) = task_id
        && store
            .dead_letter_task(id, &reason)
            .await
            .map_err(|e| e.to_string())?
    {
        tracing::warn!(task.id = %id, deliveries = a.deliveries, "task dead-lettered after max deliveries");
        // Wake watchers: the task is finished.
        let _ = js_client_publish(js, subjects.finished(id)).await;
    }
    stream
        .delete_message(a.stream_seq)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

async fn js_client_publish(js: &jetstream::Context, subject: String) -> Result<(), String> {
    js.client()
        .publish(subject, Vec::new().into())
        .await
        .map_err(|e| e.to_string())
}
