//! Background children: `task` calls with `background: true` return the child's task
//! id at once, and the child runs on while the session takes further steps.
//!
//! The children are followed by [`drive`], a future polled next to the session loop
//! (the session's host and observer are borrowed, so nothing is spawned): it asks
//! the host to run each child ([`SessionHost::run_child`]) and records how it ended.
//! A finished child's result reaches the model once, through [`Background::deliver`]:
//! at the start of the session's next step, or earlier through `task_status`. The
//! child's changes are brought into the session's files at that moment, never while
//! they run, so a step's own tools never see files change under them.
//!
//! When the session ends, [`drive`] is dropped with it and the token given to the
//! host fires: background children end with their parent (the coordinator, which
//! cancels the live descendants of a task that ended, makes sure of it across
//! processes).

use std::convert::Infallible;
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::SessionObserver;
use super::events::ToolCallState;
use super::state::SessionState;
use crate::host::{ChildProgress, ChildTaskRequest, ChildTaskResult, SessionHost};
use crate::tools::task::{Progress, finish};
use crate::transcript::{Part, Transcript};

/// The background children of one session run.
#[derive(Debug)]
pub struct Background {
    children: Mutex<Vec<Child>>,
    /// Boxed: a channel allocates room for a block of its items when it is made, and
    /// most sessions start no child in the background.
    starts: mpsc::UnboundedSender<Box<Start>>,
    /// Taken by [`drive`] when the session starts.
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Box<Start>>>>,
    /// Bumped whenever a child finishes, for those waiting on it.
    changed: watch::Sender<u64>,
}

impl Default for Background {
    fn default() -> Self {
        let (starts, receiver) = mpsc::unbounded_channel();
        Self {
            children: Mutex::default(),
            starts,
            receiver: Mutex::new(Some(receiver)),
            changed: watch::Sender::new(0),
        }
    }
}

/// One background child.
#[derive(Debug)]
struct Child {
    task_id: String,
    agent: String,
    description: String,
    state: ChildState,
}

#[derive(Debug)]
enum ChildState {
    Running,
    /// Ended; its result not yet given to the model. `calls` counts its tool calls.
    Finished {
        result: Result<ChildTaskResult, String>,
        calls: usize,
    },
    /// Its result is being given to the model (its changes applied).
    Delivering,
    /// Given to the model: how it ended, and the text the model read.
    Delivered {
        status: String,
        text: String,
    },
}

/// A request to start a child, and where to say it started.
#[derive(Debug)]
struct Start {
    request: ChildTaskRequest,
    started: oneshot::Sender<Result<String, String>>,
}

/// How a child is doing, for `task_status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildStatus {
    pub task_id: String,
    pub agent: String,
    pub description: String,
    /// `running`, or the task status it ended with (`failed` when it could not be
    /// followed to its end).
    pub status: String,
    /// The result as the model reads it, once finished.
    pub result: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Background {
    /// Starts a child in the background; returns its task id once the host has
    /// submitted it. `Err` when it could not be started at all.
    pub async fn start(&self, mut request: ChildTaskRequest) -> Result<String, String> {
        request.background = true;
        let (started, answer) = oneshot::channel();
        self.starts
            .send(Box::new(Start { request, started }))
            .map_err(|_| "background tasks are not available in this session".to_owned())?;
        answer
            .await
            .map_err(|_| "the session ended before the background task started".to_owned())?
    }

    /// The task ids of every background child, in the order they started.
    pub fn task_ids(&self) -> Vec<String> {
        lock(&self.children)
            .iter()
            .map(|c| c.task_id.clone())
            .collect()
    }

    /// Whether a child is still running, or finished with a result the model has not
    /// been given.
    pub fn has_undelivered(&self) -> bool {
        lock(&self.children)
            .iter()
            .any(|c| matches!(c.state, ChildState::Running | ChildState::Finished { .. }))
    }

    /// Waits until none of `task_ids` (all children when `None`) is running.
    pub async fn wait(&self, task_ids: Option<&[String]>) {
        let mut changed = self.changed.subscribe();
        loop {
            let running = lock(&self.children).iter().any(|c| {
                matches!(c.state, ChildState::Running)
                    && task_ids.is_none_or(|ids| ids.contains(&c.task_id))
            });
            if !running || changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// The status of `task_ids` (all children when `None`), delivering the results of
    /// those that finished first: their changes are applied now.
    pub async fn status(
        &self,
        task_ids: Option<&[String]>,
        host: &dyn SessionHost,
    ) -> Vec<ChildStatus> {
        self.deliver(task_ids, host).await;
        lock(&self.children)
            .iter()
            .filter(|c| task_ids.is_none_or(|ids| ids.contains(&c.task_id)))
            .map(|c| {
                let (status, result) = match &c.state {
                    ChildState::Running => ("running".to_owned(), None),
                    ChildState::Finished { result, .. } => (ended_status(result), None),
                    ChildState::Delivering => ("finished".to_owned(), None),
                    ChildState::Delivered { status, text } => (status.clone(), Some(text.clone())),
                };
                ChildStatus {
                    task_id: c.task_id.clone(),
                    agent: c.agent.clone(),
                    description: c.description.clone(),
                    status,
                    result,
                }
            })
            .collect()
    }

    /// Gives the model the results of the finished children among `task_ids` (all
    /// when `None`) that it has not had yet: applies their changes and returns one
    /// text per child, in the order they started. Each result is delivered once.
    pub async fn deliver(
        &self,
        task_ids: Option<&[String]>,
        host: &dyn SessionHost,
    ) -> Vec<String> {
        let taken: Vec<_> = lock(&self.children)
            .iter_mut()
            .filter(|c| task_ids.is_none_or(|ids| ids.contains(&c.task_id)))
            .filter(|c| matches!(c.state, ChildState::Finished { .. }))
            .map(|c| {
                let ChildState::Finished { result, calls } =
                    std::mem::replace(&mut c.state, ChildState::Delivering)
                else {
                    unreachable!("filtered on finished children")
                };
                (
                    c.task_id.clone(),
                    c.agent.clone(),
                    c.description.clone(),
                    result,
                    calls,
                )
            })
            .collect();
        let mut delivered = Vec::with_capacity(taken.len());
        for (task_id, agent, description, result, calls) in taken {
            let result = match result {
                Ok(mut result) => {
                    if let Some(patch) = result.deferred_patch.take()
                        && let Err(why) = host.apply_child_changes(&patch).await
                    {
                        tracing::info!(child.id = %task_id, "background child's changes not applied");
                        result.changes_not_applied = Some(why);
                    }
                    Ok(result)
                }
                Err(reason) => Err(reason),
            };
            let status = ended_status(&result);
            let text = delivery_text(&task_id, &agent, &description, result, calls);
            if let Some(child) = lock(&self.children)
                .iter_mut()
                .find(|c| c.task_id == task_id)
            {
                child.state = ChildState::Delivered {
                    status,
                    text: text.clone(),
                };
            }
            delivered.push(text);
        }
        delivered
    }

    /// Records a child that was started by an earlier attempt but could not be
    /// followed again: the model is given the reason as its result.
    pub(crate) fn lost(&self, task_id: &str, request: &ChildTaskRequest, reason: String) {
        self.started(request, task_id);
        self.finished(task_id, Err(reason), 0);
    }

    fn started(&self, request: &ChildTaskRequest, task_id: &str) {
        let mut children = lock(&self.children);
        if children.iter().any(|c| c.task_id == task_id) {
            return;
        }
        children.push(Child {
            task_id: task_id.to_owned(),
            agent: request.subagent_type.clone(),
            description: request.description.clone(),
            state: ChildState::Running,
        });
    }

    fn finished(&self, task_id: &str, result: Result<ChildTaskResult, String>, calls: usize) {
        if let Some(child) = lock(&self.children)
            .iter_mut()
            .find(|c| c.task_id == task_id)
        {
            child.state = ChildState::Finished { result, calls };
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

/// The message that gives the model the results of the background children that
/// finished since its last step (applying their changes); `None` when none did.
pub(crate) async fn results_message(
    state: &SessionState,
    host: &dyn SessionHost,
) -> Option<String> {
    let finished = state.background.deliver(None, host).await;
    (!finished.is_empty()).then(|| {
        format!(
            "Background tasks you started have finished. Their results:\n\n{}",
            finished.join("\n\n")
        )
    })
}

/// Follows again the background children an earlier attempt started in steps before
/// `record`'s last, whose results the model never got ([`undelivered`]). One that
/// cannot be followed is given to the model as failed.
pub(crate) async fn reattach(state: &SessionState, record: &Transcript) {
    for (task_id, request) in undelivered(record) {
        tracing::info!(child.id = %task_id, call_id = %request.call_id, "re-attaching to a background child");
        if let Err(reason) = state.background.start(request.clone()).await {
            state.background.lost(&task_id, &request, reason);
        }
    }
}

/// What the `task` call returns for a child started in the background.
pub(crate) fn started_text(agent: &str, task_id: &str) -> String {
    format!(
        "started subagent {agent} in the background as task {task_id}. Its result will be \
         given to you when it finishes; meanwhile, go on with other work. Call task_status \
         to see how it is doing, or to wait for it."
    )
}

/// The task id in a [`started_text`].
fn started_task_id(output: &str) -> Option<&str> {
    let (_, rest) = output.split_once(" in the background as task ")?;
    rest.split_once(". ").map(|(id, _)| id)
}

/// The background children an earlier attempt of this session started whose results
/// the model never got (no delivery, no `task_status` with the result, after the
/// call): the requests to follow them again with, by task id. The host's submit is
/// keyed by the call id, so the same request finds the same child.
pub(crate) fn undelivered(history: &Transcript) -> Vec<(String, ChildTaskRequest)> {
    let mut found = Vec::new();
    for (index, message) in history.messages.iter().enumerate() {
        for part in &message.parts {
            let Part::ToolCall {
                call_id,
                tool,
                input,
                state: ToolCallState::Completed,
                output: Some(output),
                ..
            } = part
            else {
                continue;
            };
            if tool != "task"
                || input.get("background").and_then(serde_json::Value::as_bool) != Some(true)
            {
                continue;
            }
            let Some(task_id) = started_task_id(output) else {
                continue;
            };
            let prefix = format!("background task {task_id} (");
            let delivered = history.messages[index..].iter().any(|later| {
                later.parts.iter().any(|part| {
                    let text = match part {
                        Part::Text { text, .. } => text,
                        Part::ToolCall {
                            output: Some(text), ..
                        } => text,
                        _ => return false,
                    };
                    text.lines()
                        .any(|line| line.starts_with(&prefix) && line.ends_with(':'))
                })
            });
            if delivered {
                continue;
            }
            let text = |key: &str| {
                input
                    .get(key)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            };
            found.push((
                task_id.to_owned(),
                ChildTaskRequest {
                    call_id: call_id.clone(),
                    description: text("description").unwrap_or_default(),
                    prompt: text("prompt").unwrap_or_default(),
                    subagent_type: text("subagent_type").unwrap_or_default(),
                    session_id: text("session_id"),
                    command: text("command"),
                    background: true,
                    model: text("model").filter(|m| !m.trim().is_empty()),
                    // The child exists (its id is known): nothing to hand it.
                    fork: None,
                },
            ));
        }
    }
    found
}

fn ended_status(result: &Result<ChildTaskResult, String>) -> String {
    match result {
        Ok(r) => r.status.clone(),
        Err(_) => "failed".to_owned(),
    }
}

/// What the model reads of a finished background child: a line naming it and how it
/// ended, then the child's answer with its `<task_metadata>`, or the error.
fn delivery_text(
    task_id: &str,
    agent: &str,
    description: &str,
    result: Result<ChildTaskResult, String>,
    calls: usize,
) -> String {
    let status = ended_status(&result);
    let body = match result {
        Ok(result) => match finish(agent, description, result, calls) {
            Ok(output) => output.output,
            Err(error) => format!("error: {error}"),
        },
        Err(reason) => format!("error: subagent {agent} failed: {reason}"),
    };
    format!("background task {task_id} ({agent}: {description}) {status}:\n{body}")
}

/// Runs the session's background children until the session ends (it never returns
/// by itself; the session drops it). Each child's host call gets `cancel`, which the
/// session fires when it ends.
pub(crate) async fn drive(
    state: &SessionState,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> Infallible {
    let background = &state.background;
    let receiver = lock(&background.receiver).take();
    let Some(mut receiver) = receiver else {
        return std::future::pending().await;
    };
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some(start) = receiver.recv() => {
                running.push(follow(start, state, host, observer, cancel.clone()));
            }
            Some(()) = running.next(), if !running.is_empty() => {}
            else => return std::future::pending().await,
        }
    }
}

/// Runs one background child to its end and records the result.
async fn follow(
    start: Box<Start>,
    state: &SessionState,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) {
    let Start { request, started } = *start;
    let background = &state.background;
    let call_id = request.call_id.clone();
    let agent = request.subagent_type.clone();
    let description = request.description.clone();
    let progress = Progress::new(observer, &call_id, &agent, &description).in_background();
    let started = Mutex::new(Some(started));
    let first_id = Mutex::new(None::<String>);
    let on_progress = |update: ChildProgress| {
        if let ChildProgress::Started { task_id, .. } = &update
            && let Some(tx) = lock(&started).take()
        {
            background.started(&request, task_id);
            *lock(&first_id) = Some(task_id.clone());
            let _ = tx.send(Ok(task_id.clone()));
        }
        progress.child_update(update);
    };
    let result = host.run_child(request.clone(), &on_progress, cancel).await;
    if let Ok(r) = &result {
        progress.announce(&r.task_id, &r.session_id);
        state.add_child_usage(r.usage);
    }
    let never_started = lock(&started).take();
    if let Some(tx) = never_started {
        // A host that reports no start: the child is known only now.
        match &result {
            Ok(r) => {
                background.started(&request, &r.task_id);
                *lock(&first_id) = Some(r.task_id.clone());
                let _ = tx.send(Ok(r.task_id.clone()));
            }
            Err(reason) => {
                let _ = tx.send(Err(reason.clone()));
                return;
            }
        }
    }
    let Some(task_id) = lock(&first_id).clone() else {
        return;
    };
    tracing::debug!(child.id = %task_id, agent.name = %agent, "background child ended");
    background.finished(&task_id, result, progress.calls());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::transcript::TranscriptMessage;

    fn started_call(call_id: &str, task_id: &str) -> Part {
        Part::ToolCall {
            call_id: call_id.into(),
            tool: "task".into(),
            input: json!({"description": "A", "prompt": "look", "subagent_type": "explore", "background": true}),
            state: ToolCallState::Completed,
            title: "A".into(),
            output: Some(started_text("explore", task_id)),
            error: None,
        }
    }

    #[test]
    fn the_task_id_is_read_back_from_the_started_text() {
        assert_eq!(
            started_task_id(&started_text("explore", "t-1")),
            Some("t-1")
        );
        assert_eq!(started_task_id("report on look"), None);
    }

    #[test]
    fn only_background_children_without_a_delivered_result_are_followed_again() {
        let mut history = Transcript::new("s");
        history.messages.push(TranscriptMessage::assistant(
            "build",
            vec![started_call("c1", "t-1"), started_call("c2", "t-2")],
        ));
        // t-1's status was seen while it ran; t-2's result was delivered.
        history.messages.push(TranscriptMessage::assistant(
            "build",
            vec![Part::ToolCall {
                call_id: "s1".into(),
                tool: "task_status".into(),
                input: json!({}),
                state: ToolCallState::Completed,
                title: "background tasks".into(),
                output: Some("background task t-1 (explore: A) running".into()),
                error: None,
            }],
        ));
        history.messages.push(TranscriptMessage::synthetic_user(
            "Background tasks you started have finished. Their results:\n\n\
             background task t-2 (explore: A) completed:\nfound it",
        ));
        let found = undelivered(&history);
        assert_eq!(found.len(), 1);
        let (task_id, request) = &found[0];
        assert_eq!(task_id, "t-1");
        assert_eq!(request.call_id, "c1");
        assert!(request.background);
        assert_eq!(
            (request.subagent_type.as_str(), request.prompt.as_str()),
            ("explore", "look")
        );
    }

    #[tokio::test]
    async fn waiting_returns_at_once_without_running_children() {
        let background = Background::default();
        tokio::time::timeout(std::time::Duration::from_secs(1), background.wait(None))
            .await
            .expect("nothing to wait for");
        assert!(!background.has_undelivered());
    }
}
