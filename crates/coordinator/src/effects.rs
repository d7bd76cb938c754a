//! The coordinator's part of the lifecycle: after the store made a transition, the
//! effects `taskwire_protocol::lifecycle` names for it are performed here, and only
//! here. The store performs `Dispatch` and `RecordAttempt` in the transition's own
//! statement; the worker performs `Redeliver` (a nak with its retry backoff).
//!
//! - `StopWorker`: a cancel notice, so a worker still running the task stops;
//! - `NotifyWatchers`: a finished notice, so `Watch` streams and waiting parents look;
//! - `CancelDescendants`: the live tasks under it are cancelled in the store, each with a
//!   reason naming the task that ended (`parent task … ended (error)`), and their own
//!   effects follow. A task is never cancelled for a parent that is still live: a parent
//!   whose attempt crashed or is retried keeps its children, which its next attempt
//!   re-attaches to.
//!
//! Failure policy: notices are best effort (a lost one is covered by the worker's
//! deadline and fenced writes, and by watchers' and parents' rechecks); a failed store
//! write is logged and left to the sweeper, which looks for ended tasks with live
//! children on every tick.

use taskwire_bus::Bus;
use taskwire_bus::messages::CancelNotice;
use taskwire_protocol::{Effect, TaskId};
use taskwire_store::{Store, Transitioned};

/// Performs the effects of `changed`; `why` is the reason a worker told to stop hears
/// when the transition names none (a cancel by request, a deadline).
pub async fn perform(store: &Store, bus: &Bus, changed: &[Transitioned], why: &str) {
    for t in changed {
        notify(bus, t, why).await;
    }
    let ended = ended(changed);
    if !ended.is_empty() {
        end_subtrees(store, bus, &ended).await;
    }
}

/// `CancelDescendants` of the terminal tasks `ended`: their live descendants are
/// cancelled, and those cancellations' own effects follow.
pub async fn end_subtrees(store: &Store, bus: &Bus, ended: &[TaskId]) {
    let mut ended = ended.to_vec();
    while !ended.is_empty() {
        let cancelled = match store.cancel_descendants(&ended).await {
            Ok(cancelled) => cancelled,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    tasks = ended.len(),
                    "failed to cancel the descendants of ended tasks, the sweeper retries"
                );
                return;
            }
        };
        for c in &cancelled {
            let reason = c.reason.as_deref().unwrap_or("an ancestor ended");
            tracing::info!(task.id = %c.task_id, reason, "task cancelled: its parent ended");
            notify(bus, c, reason).await;
        }
        // Their subtrees were cancelled by the same statement; a round more finds any
        // child submitted meanwhile.
        ended = self::ended(&cancelled);
    }
}

/// The tasks whose descendants are to be cancelled: those that ended, less those the
/// transition's statement found without children (a recorded result says; a child
/// submitted after it is the sweeper's, like one submitted after the walk).
fn ended(changed: &[Transitioned]) -> Vec<TaskId> {
    changed
        .iter()
        .filter(|t| t.has(Effect::CancelDescendants) && t.children != Some(false))
        .map(|t| t.task_id)
        .collect()
}

/// `StopWorker` and `NotifyWatchers`, where the transition names them.
async fn notify(bus: &Bus, t: &Transitioned, why: &str) {
    if t.has(Effect::StopWorker) {
        let notice = CancelNotice {
            task: t.task_id,
            reason: t.reason.as_deref().unwrap_or(why).to_owned(),
        };
        if let Err(e) = bus.notify_cancel(&notice).await {
            tracing::debug!(task.id = %t.task_id, error = %e, "cancel notice not sent");
        }
    }
    if t.has(Effect::NotifyWatchers)
        && let Err(e) = bus.notify_finished(t.task_id).await
    {
        tracing::debug!(task.id = %t.task_id, error = %e, "finished notice not sent");
    }
}

#[cfg(test)]
mod tests {
    use taskwire_protocol::TaskStatus;
    use taskwire_protocol::lifecycle::{self, EventKind};

    use super::*;

    fn finished(children: Option<bool>) -> Transitioned {
        Transitioned {
            task_id: TaskId::generate(),
            status: TaskStatus::Completed,
            effects: lifecycle::effects(EventKind::Finish, TaskStatus::Completed),
            reason: None,
            children,
        }
    }

    #[test]
    fn an_ended_task_known_to_have_no_children_is_not_walked() {
        let (leaf, parent, unknown) = (finished(Some(false)), finished(Some(true)), finished(None));
        assert!(leaf.has(Effect::CancelDescendants));
        assert_eq!(
            ended(&[leaf, parent.clone(), unknown.clone()]),
            vec![parent.task_id, unknown.task_id]
        );
    }
}
