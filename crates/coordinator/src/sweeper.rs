//! The sweeper: dispatches scheduled tasks whose delayed start came, finishes tasks
//! whose deadline passed, wherever they are, and cancels what ended parents left
//! running.
//!
//! A running task's worker also stops it at the deadline; the sweeper covers the
//! worker that vanished and the task still queued. It publishes a cancel notice (the
//! worker, if any, stops) and a "finished" notice (watchers end). It also looks for
//! ended tasks that still have live children (a coordinator that stopped between the
//! two writes, a child submitted while its parent ended) and ends their subtrees, and
//! has the tables the hot path joins analysed while they grow.
//! Failure policy: log and try again next tick.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::State;

pub async fn run(state: Arc<State>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(state.config.sweep_interval);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let subject = state.subjects.tasks(&state.config.queue);
        match state.store.dispatch_due(1000, &subject).await {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(tasks = n, "scheduled tasks due: dispatched");
                state.relay_wake.notify_one();
            }
            Err(e) => tracing::warn!(error = %e, "dispatch of due scheduled tasks failed"),
        }
        match state.store.expire_overdue(1000).await {
            Ok(expired) => {
                for t in &expired {
                    tracing::info!(task.id = %t.task_id, "deadline exceeded");
                }
                state.perform(&expired, "deadline exceeded").await;
            }
            Err(e) => tracing::warn!(error = %e, "sweep for overdue tasks failed"),
        }
        // Plans follow the tables while they grow (see `taskwire_store::stats`).
        if let Err(e) = state.store.analyze_grown().await {
            tracing::warn!(error = %e, "analysis of grown tables failed");
        }
        match state.store.ended_with_live_children(1000).await {
            Ok(ids) => {
                if !ids.is_empty() {
                    tracing::info!(tasks = ids.len(), "ended tasks with live children found");
                    crate::effects::end_subtrees(&state.store, &state.bus, &ids).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "sweep for orphaned tasks failed"),
        }
    }
}
