//! When a task ends, its subtree ends with it: every place that records a terminal
//! state (the aggregator's result write, the sweeper's deadline, a claim that finds the
//! task over its deadline or budget, a max-deliveries dead letter) calls
//! [`end_subtrees`], which cancels the live descendants in the store, each with a
//! reason naming the task that ended, and tells their workers to stop. `Cancel`
//! reaches the subtree itself (`Store::cancel_tree`).
//!
//! Failure policy: a failed store write is logged and left to the sweeper, which
//! looks for ended tasks with live children on every tick.

use taskwire_bus::Bus;
use taskwire_bus::messages::CancelNotice;
use taskwire_protocol::TaskId;
use taskwire_store::Store;

/// Cancels the live descendants of `ended` (tasks that reached a terminal state) and
/// sends each running one its cancel notice.
pub async fn end_subtrees(store: &Store, bus: &Bus, ended: &[TaskId]) {
    match store.cancel_descendants(ended).await {
        Ok(cancelled) => {
            for c in cancelled {
                tracing::info!(task.id = %c.task_id, reason = %c.reason, "task cancelled: its parent ended");
                notify_stopped(bus, c.task_id, &c.reason).await;
            }
        }
        Err(e) => tracing::warn!(
            error = %e,
            tasks = ended.len(),
            "failed to cancel the descendants of ended tasks, the sweeper retries"
        ),
    }
}

/// Tells a worker running `task` to stop, and watchers that it is finished.
/// Best effort: a lost notice is covered by the worker's deadline and fenced writes,
/// and by watchers' and parents' rechecks.
pub async fn notify_stopped(bus: &Bus, task: TaskId, reason: &str) {
    let notice = CancelNotice {
        task,
        reason: reason.to_owned(),
    };
    if let Err(e) = bus.notify_cancel(&notice).await {
        tracing::debug!(task.id = %task, error = %e, "cancel notice not sent");
    }
    if let Err(e) = bus.notify_finished(task).await {
        tracing::debug!(task.id = %task, error = %e, "finished notice not sent");
    }
}
