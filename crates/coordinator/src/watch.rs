//! `Watch`: a task's progress events from the start, then its result.
//!
//! Progress is replayed from the EVENTS stream with an ordered consumer on the task's
//! subject. The end is decided by the store: once the task is finished (the aggregator's
//! "finished" notice, or a periodic check as a safety net) the watcher reads up to the
//! last event stored at that moment, sends the recorded result (with the task's
//! recorded usage, own and subtree: `TaskUsage`), and closes.

use std::time::Duration;

use futures::StreamExt;
use taskwire_bus::Received;
use taskwire_protocol::{TaskId, pb};
use tokio::sync::mpsc;
use tonic::Status;

use crate::State;
use crate::convert::{result_of, usage_of};
use crate::error::WatchError;

/// How often a live watcher checks the store in case a "finished" notice was missed.
const RECHECK: Duration = Duration::from_secs(1);

pub type WatchItem = Result<pb::WatchEvent, Status>;

/// Streams one task's events into `tx` until its result has been sent.
pub async fn stream_task(
    state: std::sync::Arc<State>,
    task_id: TaskId,
    tx: mpsc::Sender<WatchItem>,
) {
    if let Err(e) = stream_inner(&state, task_id, &tx).await {
        let _ = tx
            .send(Err(Status::unavailable(format!(
                "watch of task {task_id} failed: {e}"
            ))))
            .await;
    }
}

async fn stream_inner(
    state: &State,
    task_id: TaskId,
    tx: &mpsc::Sender<WatchItem>,
) -> Result<(), WatchError> {
    // Subscribe before the first store check, so a finish in between is not missed.
    let mut finished = state.bus.finished_notices(task_id).await?;
    let mut events = state.bus.replay_progress(task_id).await?;

    let mut last_seen: u64 = 0;
    // `Some(seq)`: the task is finished and its last event is `seq` (0: none).
    let mut end_at: Option<u64> = None;
    let mut recheck = tokio::time::interval(RECHECK);
    loop {
        if let Some(end) = end_at
            && last_seen >= end
        {
            break;
        }
        tokio::select! {
            received = events.next() => {
                let Some(received) = received else { return Err(WatchError::EventsEnded) };
                match received? {
                    Received::Value(delivery) => {
                        last_seen = delivery.stream_sequence;
                        for p in delivery.value.0 {
                            let ev = pb::WatchEvent { event: Some(pb::watch_event::Event::Progress(p)) };
                            if tx.send(Ok(ev)).await.is_err() {
                                return Ok(()); // the client went away
                            }
                        }
                    }
                    Received::Malformed(delivery) => {
                        last_seen = delivery.stream_sequence;
                        tracing::warn!(task.id = %task_id, error = %delivery.value.error, "skipping malformed progress event");
                    }
                }
            }
            _ = finished.next(), if end_at.is_none() => {
                end_at = Some(last_event_seq(state, task_id).await);
            }
            _ = recheck.tick(), if end_at.is_none() => {
                if is_finished(state, task_id).await? {
                    end_at = Some(last_event_seq(state, task_id).await);
                }
            }
            _ = tx.closed() => return Ok(()),
        }
    }
    let record = state
        .store
        .get_task(task_id)
        .await?
        .ok_or(WatchError::TaskGone(task_id))?;
    // The result carries the task's usage as every view shows it, not the attempt's report.
    let mut subtree = state.store.subtree_usage(&[task_id]).await?;
    let mut result = result_of(&record);
    usage_of(&record, subtree.remove(&task_id)).set_on_result(&mut result);
    let ev = pb::WatchEvent {
        event: Some(pb::watch_event::Event::Result(result)),
    };
    let _ = tx.send(Ok(ev)).await;
    Ok(())
}

async fn is_finished(state: &State, task_id: TaskId) -> Result<bool, WatchError> {
    let record = state.store.get_task(task_id).await?;
    Ok(record.is_some_and(|r| r.status.is_terminal()))
}

/// The stream sequence of the last event of `task_id`, or 0 when there is none.
async fn last_event_seq(state: &State, task_id: TaskId) -> u64 {
    state
        .bus
        .last_progress(task_id)
        .await
        .map_or(0, |last| last.sequence)
}
