//! The live feeds, as server-sent events (each event's `data` one JSON object).
//!
//! - `/v1/tasks/{id}/events`: a task tree's events. The root is followed with the
//!   API's own `Watch` (replayed from the start, then live); every `child_task` event
//!   opens a `Watch` of that child, so the whole tree arrives on one connection, each
//!   event naming its task ([`TreeEvent`]): `{"type": "progress", ...}` or
//!   `{"type": "result", "task_id", "result"}`; `{"type": "end"}` follows the last
//!   result of the tree, and the response ends.
//! - `/v1/events`: status changes of the caller's tasks, from the progress events and
//!   the "finished" notices the watchers use ([`StatusChange`]), for the
//!   dashboard's list.
//!
//! Nothing polls: both feeds are NATS subscriptions, and a feed ends when the client
//! goes away (its watches with it).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;

use axum::extract::{Path, State as AxumState};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Serialize;
use taskwire_protocol::pb::task_service_server::TaskService;
use taskwire_protocol::{TaskId, pb};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::model::{ErrorBody, Progress, StatusChange, TaskResult, TreeEvent, status};
use super::{ApiError, HttpApi, request};
use crate::api::TaskApi;
use crate::auth::Principal;

/// Tasks whose tenant a list feed remembers before it starts over.
const SEEN_LIMIT: usize = 10_000;

type SseStream = Response;

/// The values `rx` yields, one event each, with keep-alive comments in between.
fn sse<T: Serialize + Send + 'static>(rx: mpsc::Receiver<T>) -> SseStream {
    let events = ReceiverStream::new(rx).map(|v| {
        let data = serde_json::to_string(&v).unwrap_or_else(|e| {
            format!("{{\"type\": \"error\", \"error\": \"unserializable event: {e}\"}}")
        });
        Ok::<_, Infallible>(Event::default().data(data))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Follows a task tree: its progress and results, and its descendants', replayed from
/// the start, then live; the response ends after `{"type": "end"}`.
#[utoipa::path(
    get, path = "/v1/tasks/{id}/events", tag = "tasks", operation_id = "events",
    params(("id" = uuid::Uuid, Path, description = "The root task's id")),
    responses(
        (status = 200, description = "Server-sent events, each `data` one JSON event", content_type = "text/event-stream", body = super::model::TreeEventSse),
        (status = 400, description = "The id is not a task id", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn tree_events(
    AxumState(d): AxumState<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<SseStream, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    // The root's watch checks the id and the tenant before anything streams.
    let root = api
        .watch(request(
            &caller,
            pb::WatchRequest {
                task_id: id.clone(),
            },
        ))
        .await?
        .into_inner();
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(follow_tree(api.clone(), caller, id, root, tx));
    Ok(sse(rx))
}

type Watch = <TaskApi as TaskService>::WatchStream;

/// One watch's events, tagged with its task; `None` when it ended.
type Tagged = (String, Option<Result<pb::WatchEvent, tonic::Status>>);

async fn follow_tree(
    api: TaskApi,
    caller: Principal,
    root_id: String,
    root: Watch,
    tx: mpsc::Sender<TreeEvent>,
) {
    let (inner_tx, mut inner) = mpsc::channel::<Tagged>(256);
    let mut followed = HashSet::from([root_id.clone()]);
    let mut open = 1usize;
    tokio::spawn(forward(root_id, root, inner_tx.clone()));
    loop {
        let (task, item) = tokio::select! {
            next = inner.recv() => match next {
                Some(next) => next,
                None => return,
            },
            // The browser went away while the tree was quiet: stop its watches now.
            () = tx.closed() => return,
        };
        let out = match item {
            None => {
                open -= 1;
                if open == 0 {
                    let _ = tx.send(TreeEvent::End).await;
                    return;
                }
                continue;
            }
            Some(Err(status)) => {
                tracing::debug!(task.id = %task, error = %status.message(), "dashboard watch failed");
                TreeEvent::Error {
                    task_id: task,
                    error: status.message().to_owned(),
                }
            }
            Some(Ok(pb::WatchEvent {
                event: Some(pb::watch_event::Event::Progress(p)),
            })) => {
                if let Some(pb::task_progress::Event::ChildTask(c)) = &p.event
                    && followed.insert(c.task_id.clone())
                {
                    let child = api
                        .watch(request(
                            &caller,
                            pb::WatchRequest {
                                task_id: c.task_id.clone(),
                            },
                        ))
                        .await;
                    match child {
                        Ok(stream) => {
                            open += 1;
                            tokio::spawn(forward(
                                c.task_id.clone(),
                                stream.into_inner(),
                                inner_tx.clone(),
                            ));
                        }
                        Err(status) => {
                            tracing::debug!(task.id = %c.task_id, error = %status.message(), "child not watched")
                        }
                    }
                }
                TreeEvent::Progress(Progress::from(&p))
            }
            Some(Ok(pb::WatchEvent {
                event: Some(pb::watch_event::Event::Result(r)),
            })) => TreeEvent::Result {
                task_id: task,
                result: TaskResult::from(&r),
            },
            Some(Ok(_)) => continue,
        };
        if tx.send(out).await.is_err() {
            return; // the browser went away; the forwarders stop on their next send
        }
    }
}

/// Hands one watch's events to the tree's feed; stops (dropping the watch) as soon as
/// the feed is gone, even while the task is quiet.
async fn forward(task: String, mut watch: Watch, tx: mpsc::Sender<Tagged>) {
    loop {
        let item = tokio::select! {
            item = watch.next() => item,
            () = tx.closed() => return,
        };
        let Some(item) = item else { break };
        if tx.send((task.clone(), Some(item))).await.is_err() {
            return;
        }
    }
    let _ = tx.send((task, None)).await;
}

/// Status changes of the caller's tasks, live (the dashboard's list).
#[utoipa::path(
    get, path = "/v1/events", tag = "tasks", operation_id = "status_changes",
    responses(
        (status = 200, description = "Server-sent events, each `data` one status change", content_type = "text/event-stream", body = super::model::StatusChangeSse),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn status_changes(
    AxumState(d): AxumState<HttpApi>,
    headers: HeaderMap,
) -> Result<SseStream, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let state = api.state().clone();
    let progress = state
        .bus
        .all_progress()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let finished = state
        .bus
        .all_finished_notices()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        // Per task: whether the caller may see it, and the last status sent.
        let mut seen: HashMap<TaskId, (bool, &'static str)> = HashMap::new();
        // Per task: the newest attempt its progress named, and that attempt when a
        // terminal status was sent. A progress event published before the result may
        // arrive after the finished notice (another subject, another publisher): a live
        // status of an attempt no newer than the end is stale (a replay's next attempt
        // is newer).
        let mut attempts: HashMap<TaskId, (u32, Option<u32>)> = HashMap::new();
        let mut progress = progress.fuse();
        let mut finished = finished.fuse();
        loop {
            let (id, status) = tokio::select! {
                Some(events) = progress.next() => {
                    // The last of the message's events names the task's status now.
                    let Some(p) = events.ok().and_then(|mut e| e.0.pop()) else { continue };
                    let Ok(id) = p.task_id.parse::<TaskId>() else { continue };
                    let status = status(p.status);
                    let entry = attempts.entry(id).or_insert((0, None));
                    entry.0 = entry.0.max(p.attempt);
                    if entry.1.is_some_and(|ended| p.attempt <= ended) && !is_terminal(status) {
                        continue;
                    }
                    (id, Some(status))
                }
                Some(notice) = finished.next() => {
                    let Ok(notice) = notice else { continue };
                    (notice.task, None)
                }
                () = tx.closed() => return,
                else => return,
            };
            if seen.len() > SEEN_LIMIT {
                seen.clear();
                attempts.clear();
            }
            let newest = attempts.get(&id).map_or(0, |a| a.0);
            let visible = match seen.get(&id) {
                Some((visible, _)) if status.is_some() => *visible,
                _ => match crate::ownership::task_by_id(&state, &caller, id).await {
                    Ok(rec) => {
                        let now = status.unwrap_or(rec.status.as_str());
                        // A "finished" notice names the recorded status, sent again even
                        // when an event named it already: a page may have added the row
                        // in between, from a read older than the record.
                        seen.insert(id, (true, ""));
                        if is_terminal(now) {
                            let ended = newest.max(rec.attempt);
                            attempts.insert(id, (ended, Some(ended)));
                        }
                        send_status(&tx, &mut seen, id, now).await;
                        continue;
                    }
                    Err(_) => {
                        seen.insert(id, (false, ""));
                        false
                    }
                },
            };
            if visible && let Some(now) = status {
                if is_terminal(now) {
                    attempts.insert(id, (newest, Some(newest)));
                }
                send_status(&tx, &mut seen, id, now).await;
            }
        }
    });
    Ok(sse(rx))
}

fn is_terminal(status: &str) -> bool {
    status
        .parse::<taskwire_protocol::TaskStatus>()
        .is_ok_and(|s| s.is_terminal())
}

/// Sends `status` for `id` unless it was the last one sent.
async fn send_status(
    tx: &mpsc::Sender<StatusChange>,
    seen: &mut HashMap<TaskId, (bool, &'static str)>,
    id: TaskId,
    status: &'static str,
) {
    let entry = seen.entry(id).or_insert((true, ""));
    if entry.1 != status {
        entry.1 = status;
        let _ = tx
            .send(StatusChange {
                task_id: id.to_string(),
                status: status.to_owned(),
            })
            .await;
    }
}
