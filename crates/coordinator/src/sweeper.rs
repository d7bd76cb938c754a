//! The sweeper: finishes tasks whose deadline passed, wherever they are.
//!
//! A running task's worker also stops it at the deadline; the sweeper covers the
//! worker that vanished and the task still queued. It publishes a cancel notice (the
//! worker, if any, stops) and a "finished" notice (watchers end). Failure policy: log
//! and try again next tick.

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
        match state.store.expire_overdue(1000).await {
            Ok(ids) => {
                for id in ids {
                    tracing::info!(task.id = %id, "deadline exceeded");
                    state.notify_stopped(id, "deadline exceeded").await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "sweep for overdue tasks failed"),
        }
    }
}
