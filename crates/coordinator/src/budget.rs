//! Budgets at child submit: no new child starts in a tree that spent its budget.
//!
//! A tree's spend, as the coordinator knows it, is the recorded usage of every task
//! under the top of the budget (finished attempts; a running session's calls count
//! once its result is recorded). A child asked for once that spend reaches a limit is
//! refused `RESOURCE_EXHAUSTED` naming the limit, which the parent's model sees as
//! the `task` tool's error; a child that already exists (the same call asked again
//! by a later attempt of its parent) is still found. An admitted child carries the
//! spend so far (`spent_elsewhere`), which its worker counts against the budget
//! before each model call.

use taskwire_protocol::TaskId;
use taskwire_store::NewTask;

use crate::CoordinatorError;

/// Refuses the child in `task` when its tree's budget is spent; otherwise records
/// the spend so far in its request.
pub async fn admit_child(
    state: &crate::State,
    parent: TaskId,
    task: &mut NewTask,
) -> Result<(), CoordinatorError> {
    let spent = state.store.budget_spent(parent).await?;
    let request = &mut task.request;
    if let Some(limit) = request.budget.exceeded_by(&spent) {
        let existing = match &request.idempotency_key {
            Some(key) => {
                state
                    .store
                    .task_by_idempotency_key(&request.tenant, key)
                    .await?
            }
            None => None,
        };
        if existing.is_none() {
            let spent = match limit {
                "max_tokens" => format!(
                    "{} of {} tokens",
                    spent.tokens(),
                    request.budget.max_tokens.unwrap_or_default()
                ),
                _ => format!(
                    "${} of ${}",
                    spent.cost_usd().unwrap_or_default(),
                    request.budget.max_cost_usd().unwrap_or_default()
                ),
            };
            tracing::info!(task.id = %parent, limit, "child refused, the tree spent its budget");
            return Err(CoordinatorError::ResourceExhausted(format!(
                "the task tree spent its {limit} budget ({spent}): no new child task starts"
            )));
        }
    }
    request.spent_elsewhere = spent;
    Ok(())
}
