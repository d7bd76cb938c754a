//! Claims: workers ask (request/reply) before running a task and get a fencing epoch.
//!
//! Requests are answered in batches: whatever claims are waiting go to Postgres in one
//! statement. A claim that finds its task finished (over its deadline or attempt
//! budget) ends the task's subtree too. Failure policy: a failed batch answers nothing, so the workers' requests
//! time out and they retry the message later (nak); the loop keeps serving.

use std::collections::HashSet;

use futures::StreamExt;
use prost::Message as _;
use taskwire_bus::Subjects;
use taskwire_protocol::{TaskId, WorkerId, pb, task::decode};
use taskwire_store::{ClaimOutcome, Store};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

const MAX_BATCH: usize = 512;
const CONCURRENT_BATCHES: usize = 4;

/// Serves claim requests (queue group `taskwire-coordinators`) until `shutdown`.
pub async fn run(
    client: async_nats::Client,
    store: Store,
    subjects: Subjects,
    max_running_per_tenant: Option<u32>,
    metrics: Metrics,
    shutdown: CancellationToken,
) -> Result<(), async_nats::SubscribeError> {
    let sub = client
        .queue_subscribe(
            subjects.claim(),
            taskwire_bus::subjects::COORDINATORS_GROUP.to_owned(),
        )
        .await?;
    sub.take_until(shutdown.cancelled_owned())
        .ready_chunks(MAX_BATCH)
        .for_each_concurrent(CONCURRENT_BATCHES, |batch| {
            let (client, store, subjects) = (client.clone(), store.clone(), subjects.clone());
            let metrics = metrics.clone();
            async move {
                let finished =
                    answer(&client, &store, &metrics, batch, max_running_per_tenant).await;
                if !finished.is_empty() {
                    crate::subtrees::end_subtrees(&store, &client, &subjects, &finished).await;
                }
            }
        })
        .await;
    Ok(())
}

/// Answers a batch of claims; returns the tasks found finished.
async fn answer(
    client: &async_nats::Client,
    store: &Store,
    metrics: &Metrics,
    batch: Vec<async_nats::Message>,
    max_running_per_tenant: Option<u32>,
) -> Vec<TaskId> {
    let mut claims = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    let mut seen = HashSet::new();
    for msg in batch {
        let Some(reply) = msg.reply.clone() else {
            continue;
        };
        let parsed = decode::<pb::ClaimRequest>("claim request", &msg.payload).and_then(|r| {
            Ok((
                TaskId::parse_field("task_id", &r.task_id)?,
                WorkerId::new(r.worker_id),
            ))
        });
        match parsed {
            Ok((task, worker)) if seen.insert(task) => {
                claims.push((task, worker));
                replies.push(reply);
            }
            Ok((task, _)) => {
                // The same task twice in one batch: leave the second unanswered; its
                // request times out and that worker retries the message later.
                tracing::debug!(task.id = %task, "concurrent claim left unanswered");
            }
            Err(e) => {
                let _ = client
                    .publish(reply, refuse(&e.to_string()).encode_to_vec().into())
                    .await;
            }
        }
    }
    let outcomes = match store.claim_tasks(&claims, max_running_per_tenant).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, batch = claims.len(), "claim batch failed");
            return Vec::new();
        }
    };
    let mut finished = Vec::new();
    for ((reply, outcome), (task, worker)) in replies.into_iter().zip(outcomes).zip(&claims) {
        let r = match outcome {
            ClaimOutcome::Granted {
                epoch,
                attempt,
                last_attempt,
                queued_for,
            } => {
                if let Some(waited) = queued_for {
                    metrics.task_claimed(waited);
                }
                tracing::debug!(task.id = %task, worker.id = %worker, attempt, "task claimed");
                pb::ClaimReply {
                    verdict: pb::claim_reply::Verdict::Granted as i32,
                    claim_epoch: epoch.0,
                    attempt,
                    reason: String::new(),
                    last_attempt,
                }
            }
            ClaimOutcome::Finished(status) => {
                finished.push(*task);
                pb::ClaimReply {
                    verdict: pb::claim_reply::Verdict::Finished as i32,
                    reason: format!("task is {status}"),
                    ..Default::default()
                }
            }
            ClaimOutcome::Busy => pb::ClaimReply {
                verdict: pb::claim_reply::Verdict::Busy as i32,
                reason: "the tenant is at its running-task limit".to_owned(),
                ..Default::default()
            },
            ClaimOutcome::Unknown => refuse(&format!("task {task} does not exist")),
        };
        let _ = client.publish(reply, r.encode_to_vec().into()).await;
    }
    finished
}

fn refuse(reason: &str) -> pb::ClaimReply {
    pb::ClaimReply {
        verdict: pb::claim_reply::Verdict::Unknown as i32,
        reason: reason.to_owned(),
        ..Default::default()
    }
}
