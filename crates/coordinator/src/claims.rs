//! Claims: workers ask before running a task and get a fencing epoch.
//!
//! The bus's serving loop hands over whatever claims are waiting as one batch, which
//! goes to Postgres in one statement. A claim that ends its task (over its deadline
//! or attempt budget) performs the lifecycle's effects of that end: its subtree ends
//! and its watchers hear. Failure policy: a failed
//! batch is answered with its error's code (`UNAVAILABLE` while the database is
//! unreachable), so workers offer the message again later.

use std::collections::HashSet;

use taskwire_bus::messages::{Claim, ClaimRequest, ClaimVerdict};
use taskwire_bus::{Bus, RpcError};
use taskwire_protocol::{ErrorCode, lifecycle};
use taskwire_store::{ClaimOutcome, Store};

use crate::CoordinatorError;
use crate::metrics::Metrics;

/// Answers a batch of claims, in order; returns, for each, its answer (`None`: left
/// unanswered).
pub async fn answer(
    store: &Store,
    bus: &Bus,
    metrics: &Metrics,
    claims: Vec<ClaimRequest>,
    max_running_per_tenant: Option<u32>,
) -> Vec<Option<Result<ClaimVerdict, RpcError>>> {
    let mut seen = HashSet::new();
    // The same task twice in one batch: the second is left unanswered; its request
    // times out and that worker offers the message again later.
    let first: Vec<bool> = claims.iter().map(|c| seen.insert(c.task)).collect();
    let batch: Vec<_> = claims
        .iter()
        .zip(&first)
        .filter(|(_, first)| **first)
        .map(|(c, _)| (c.task, c.worker.clone()))
        .collect();
    let outcomes = match store.claim_tasks(&batch, max_running_per_tenant).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, batch = batch.len(), "claim batch failed");
            let e = RpcError::from(CoordinatorError::from(e));
            return first.iter().map(|f| f.then(|| Err(e.clone()))).collect();
        }
    };
    let mut outcomes = outcomes.into_iter();
    let mut ended = Vec::new();
    let answers = claims
        .iter()
        .zip(first)
        .map(|(claim, first)| {
            if !first {
                tracing::debug!(task.id = %claim.task, "concurrent claim left unanswered");
                return None;
            }
            let outcome = outcomes.next()?;
            Some(verdict(claim, outcome, metrics, &mut ended))
        })
        .collect();
    if !ended.is_empty() {
        // Not awaited: the answers go out now; the subtree ends right after.
        let (store, bus) = (store.clone(), bus.clone());
        tokio::spawn(async move {
            crate::effects::perform(&store, &bus, &ended, "task ended at its claim").await
        });
    }
    answers
}

fn verdict(
    claim: &ClaimRequest,
    outcome: ClaimOutcome,
    metrics: &Metrics,
    ended: &mut Vec<taskwire_store::Transitioned>,
) -> Result<ClaimVerdict, RpcError> {
    match outcome {
        ClaimOutcome::Granted {
            epoch,
            attempt,
            last_attempt,
            queued_for,
        } => {
            if let Some(waited) = queued_for {
                metrics.task_claimed(waited);
            }
            tracing::debug!(task.id = %claim.task, worker.id = %claim.worker, attempt, "task claimed");
            Ok(ClaimVerdict::Granted(Claim {
                epoch,
                attempt,
                last_attempt,
            }))
        }
        ClaimOutcome::Ended(status) => {
            ended.push(taskwire_store::Transitioned {
                task_id: claim.task,
                status,
                effects: lifecycle::effects(lifecycle::EventKind::Claim, status),
                reason: None,
                children: None,
            });
            Ok(ClaimVerdict::Finished {
                reason: format!("task is {status}"),
            })
        }
        ClaimOutcome::Finished(status) => Ok(ClaimVerdict::Finished {
            reason: format!("task is {status}"),
        }),
        ClaimOutcome::Busy => Ok(ClaimVerdict::Busy {
            reason: "the tenant is at its running-task limit".to_owned(),
        }),
        ClaimOutcome::Unknown => Err(RpcError::new(
            ErrorCode::NotFound,
            format!("task {} does not exist", claim.task),
        )),
    }
}
