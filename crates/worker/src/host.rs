//! The worker's [`SessionHost`]: what a session needs from the fleet, over NATS.
//!
//! - `task` tool: a child task is submitted through the coordinator (which checks the
//!   depth limit, the scope and the deadline), starting from the parent's files as
//!   they are (its changes so far travel in the request), then followed live on its
//!   progress subject (its tool calls reach the parent's progress) until the
//!   coordinator says it finished; its recorded result comes back to the model and its
//!   patch into the parent's workspace. The submit is idempotent, keyed by the parent
//!   task and the call id: a later attempt of the parent, resumed from its checkpoint,
//!   makes the same call and re-attaches to the same child, whose recorded patch it
//!   applies to its own new workspace.
//! - checkpoints: the session so far, and the workspace's changes, are saved through
//!   the coordinator (fenced by the claim) before a step's children start.
//! - `ask` permissions: the coordinator marks the task `awaiting_approval`; the answer
//!   (gRPC `Approve`) arrives on the task's approval subject. An unanswered ask times
//!   out as a deny; it never blocks forever.

use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull::OrderedConfig};
use async_trait::async_trait;
use futures::StreamExt;
use prost::Message as _;
use taskwire_agent::host::{
    ApprovalAnswer, ApprovalRequest, ChildProgress, ChildTaskRequest, ChildTaskResult,
};
use taskwire_agent::transcript::Transcript;
use taskwire_agent::{SessionError, SessionHost, ToolCallState};
use taskwire_llm::Usage;
use taskwire_protocol::{ClaimEpoch, SessionId, TaskId, TaskStatus, pb, task::decode};
use tokio_util::sync::CancellationToken;

use crate::saved::SavedRef;
use crate::task::Context;
use crate::workspace::{PATCH_NOT_CARRIED, TaskFiles};

/// Worker requests are idempotent (child submits by their key): several short tries
/// ride out a coordinator that was killed (its requests go unanswered) or is
/// restarting (no responders).
const RPC_TRY_TIMEOUT: Duration = Duration::from_secs(3);
const RPC_RETRIES: u32 = 2;
/// How often a task waiting for an approval asks the coordinator whether it was answered.
const APPROVAL_RECHECK: Duration = Duration::from_secs(5);
/// How often a waiting parent re-reads its child's status, in case a "finished" notice
/// was missed (a reconnect).
const CHILD_RECHECK: Duration = Duration::from_secs(2);
/// Room left in a NATS message for the rest of a checkpoint request.
const CHECKPOINT_MARGIN: usize = 4096;

/// One running attempt's host.
pub struct WorkerHost<'a> {
    pub ctx: &'a Context,
    pub task_id: TaskId,
    pub epoch: ClaimEpoch,
    /// The session this attempt runs, which checkpoints save.
    pub session_id: SessionId,
    /// The model this session runs on (children inherit it).
    pub model: String,
    pub subagents: Vec<(String, String)>,
    pub approval_timeout: Duration,
    /// The attempt's workspace: made when first needed; children start from it and
    /// their changes return to it.
    pub files: &'a TaskFiles<'a>,
    /// Set when the last checkpoint could not be saved because the workspace's
    /// changes are too large for it: the step's children are refused with this
    /// reason, since none may start that a later attempt could not find again.
    pub children_refused: std::sync::Mutex<Option<String>>,
}

/// Sends a worker request and decodes the reply.
pub async fn rpc<R: prost::Message + Default>(
    ctx: &Context,
    method: &str,
    body: Vec<u8>,
) -> Result<R, String> {
    let subject = ctx.subjects.rpc(method);
    let body = bytes::Bytes::from(body);
    let mut last_error = String::new();
    for attempt in 0..=RPC_RETRIES {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500) * attempt).await;
        }
        let request = ctx.client.request(subject.clone(), body.clone());
        match tokio::time::timeout(RPC_TRY_TIMEOUT, request).await {
            Ok(Ok(reply)) => {
                return decode::<R>("worker request reply", &reply.payload)
                    .map_err(|e| e.to_string());
            }
            Ok(Err(e)) => last_error = format!("request to {subject} failed: {e}"),
            Err(_) => last_error = format!("request to {subject} timed out"),
        }
    }
    Err(last_error)
}

/// The error of a reply's status, if any.
pub fn failed(status: Option<&pb::RpcStatus>) -> Option<String> {
    status
        .filter(|s| !s.code.is_empty())
        .map(|s| format!("{}: {}", s.code, s.message))
}

#[async_trait]
impl SessionHost for WorkerHost<'_> {
    async fn approve(
        &self,
        request: ApprovalRequest,
        asked: &(dyn Fn() + Send + Sync),
    ) -> ApprovalAnswer {
        let ctx = self.ctx;
        // Subscribe before asking, so the answer cannot slip past.
        let mut decisions = match ctx
            .client
            .subscribe(ctx.subjects.approval(self.task_id))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                return ApprovalAnswer::Reject {
                    message: Some(format!("approval could not be requested: {e}")),
                };
            }
        };
        let ask = |timed_out, check| {
            pb::ApprovalAsk {
                task_id: self.task_id.to_string(),
                claim_epoch: self.epoch.0,
                request_id: request.request_id.clone(),
                permission: request.permission.clone(),
                patterns: request.patterns.clone(),
                title: request.title.clone(),
                timed_out,
                check,
            }
            .encode_to_vec()
        };
        match rpc::<pb::ApprovalAskReply>(ctx, "approval", ask(false, false)).await {
            Ok(r) if failed(r.status.as_ref()).is_none() => asked(),
            Ok(r) => {
                let reason = failed(r.status.as_ref()).unwrap_or_default();
                return ApprovalAnswer::Reject {
                    message: Some(format!("approval could not be requested: {reason}")),
                };
            }
            Err(e) => {
                return ApprovalAnswer::Reject {
                    message: Some(format!("approval could not be requested: {e}")),
                };
            }
        }
        // The decision arrives as a plain NATS message; a periodic check through the
        // coordinator finds an answer whose message this worker missed (a reconnect).
        let give_up = tokio::time::sleep(self.approval_timeout);
        tokio::pin!(give_up);
        let mut recheck = tokio::time::interval(APPROVAL_RECHECK);
        recheck.tick().await; // the first tick is immediate
        loop {
            tokio::select! {
                msg = decisions.next() => {
                    let Some(msg) = msg else { break };
                    let Ok(d) = decode::<pb::ApprovalDecision>("approval decision", &msg.payload) else { continue };
                    if d.request_id == request.request_id {
                        return answer_of(d);
                    }
                }
                _ = recheck.tick() => {
                    if let Ok(pb::ApprovalAskReply { decision: Some(d), .. }) =
                        rpc::<pb::ApprovalAskReply>(ctx, "approval", ask(false, true)).await
                    {
                        return answer_of(d);
                    }
                }
                _ = &mut give_up => break,
            }
        }
        match rpc::<pb::ApprovalAskReply>(ctx, "approval", ask(true, false)).await {
            // Answered just before the timeout closed it: the answer stands.
            Ok(pb::ApprovalAskReply {
                decision: Some(d), ..
            }) => answer_of(d),
            Ok(_) => {
                tracing::info!(task.id = %self.task_id, request_id = %request.request_id, "approval timed out, denying");
                ApprovalAnswer::TimedOut
            }
            Err(e) => {
                tracing::warn!(task.id = %self.task_id, error = %e, "failed to close a timed-out approval");
                ApprovalAnswer::TimedOut
            }
        }
    }

    async fn run_child(
        &self,
        request: ChildTaskRequest,
        on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
        cancel: CancellationToken,
    ) -> Result<ChildTaskResult, String> {
        let ctx = self.ctx;
        // Without a call id there is nothing to recognise the call by on a later attempt.
        let idempotency_key = if request.call_id.is_empty() {
            String::new()
        } else {
            format!("child:{}:{}", self.task_id, request.call_id)
        };
        let workspace = self
            .files
            .get()
            .await
            .map_err(|e| format!("failed to prepare your workspace: {e}"))?;
        if let Some(reason) = self
            .children_refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Err(reason);
        }
        let start = crate::workspace::child_start(self.ctx, self.task_id, workspace).await?;
        let context_refs = start
            .source
            .map(|s| {
                let r = s.to_ref();
                pb::ContextRef {
                    r#type: r.kind,
                    id: r.id,
                    uri: r.uri,
                }
            })
            .into_iter()
            .collect();
        let submit = pb::ChildSubmit {
            parent_task_id: self.task_id.to_string(),
            parent_claim_epoch: self.epoch.0,
            parent_model: self.model.clone(),
            request: Some(pb::SubmitRequest {
                agent: request.subagent_type.clone(),
                prompt: request.prompt.clone(),
                intent: request.description.clone(),
                resume_token: request.session_id.clone().unwrap_or_default(),
                command: request.command.clone().unwrap_or_default(),
                idempotency_key,
                context_refs,
                workspace_patch: start.inline,
                workspace_patch_ref: start.by_reference.as_ref().map(pb::PatchRef::from),
                ..Default::default()
            }),
        };
        let reply = rpc::<pb::ChildSubmitReply>(ctx, "child", submit.encode_to_vec()).await?;
        if let Some(e) = failed(reply.status.as_ref()) {
            return Err(format!("the child task was refused: {e}"));
        }
        let child = TaskId::parse_field("task_id", &reply.task_id).map_err(|e| e.to_string())?;
        if reply.created {
            tracing::info!(task.id = %self.task_id, child.id = %child, agent.name = %request.subagent_type, "child task started");
        } else {
            tracing::info!(task.id = %self.task_id, child.id = %child, agent.name = %request.subagent_type, call_id = %request.call_id, "re-attached to child task");
        }
        let finished = tokio::select! {
            r = follow_child(ctx, self.task_id, child, on_progress) => r,
            _ = cancel.cancelled() => Err(format!("stopped while child task {child} was running")),
        }?;
        let mut outcome = finished.result;
        // Only an answer the parent can use brings its changes along.
        if outcome.succeeded() {
            outcome.changes_not_applied = match finished.not_carried {
                Some(why) => Some(format!("they did not come back with its result: {why}")),
                None => crate::workspace::bring_back(workspace, &finished.patch)
                    .await
                    .err(),
            };
            match &outcome.changes_not_applied {
                None if !finished.patch.is_empty() => {
                    tracing::info!(task.id = %self.task_id, child.id = %child, bytes = finished.patch.len(), "child's changes applied");
                }
                Some(why) => {
                    let reason = why.lines().next().unwrap_or_default();
                    tracing::info!(task.id = %self.task_id, child.id = %child, reason = %reason, "child's changes not applied");
                }
                None => {}
            }
        }
        Ok(ChildTaskResult {
            session_id: reply.session_id,
            ..outcome
        })
    }

    fn subagents(&self) -> Vec<(String, String)> {
        self.subagents.clone()
    }

    async fn ensure_workspace(&self) -> Result<(), SessionError> {
        match self.files.get().await {
            Ok(_) => Ok(()),
            Err(e) => Err(SessionError {
                message: format!("failed to prepare the task's workspace: {e}"),
                retryable: e.is_retryable(),
            }),
        }
    }

    async fn checkpoint(&self, transcript: &Transcript) -> Result<(), String> {
        // The files as they are now: a later attempt restores them before it goes on.
        let workspace = self
            .files
            .state()
            .await
            .map_err(|e| format!("failed to record the workspace: {e}"))?;
        let refuse_children = |reason: String| {
            tracing::info!(task.id = %self.task_id, reason = %reason, "no checkpoint: this step's children are refused");
            *self
                .children_refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
            Ok(())
        };
        if let Some(reason) = crate::workspace::too_large_to_delegate(workspace.patch.len()) {
            return refuse_children(reason);
        }
        let workspace = match workspace.for_saving(&self.ctx.patches, self.task_id).await {
            Ok(w) => w,
            Err(e) => {
                return refuse_children(format!(
                    "your workspace's changes could not be saved before delegating: {e}"
                ));
            }
        };
        let saved = SavedRef {
            transcript,
            workspace: Some(&workspace),
        };
        let transcript_json = serde_json::to_vec(&saved)
            .map_err(|e| format!("failed to encode the transcript: {e}"))?;
        let limit = self
            .ctx
            .client
            .server_info()
            .max_payload
            .saturating_sub(CHECKPOINT_MARGIN);
        if transcript_json.len() > limit
            && (!workspace.patch.is_empty() || workspace.patch_ref.is_some())
        {
            return refuse_children(format!(
                "your conversation and workspace changes ({} bytes) are too large to save before delegating; \
                 delegate with fewer or smaller changes",
                transcript_json.len()
            ));
        }
        *self
            .children_refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        let save = pb::SessionSave {
            session_id: self.session_id.to_string(),
            task_id: self.task_id.to_string(),
            claim_epoch: self.epoch.0,
            transcript_json,
        };
        let reply =
            rpc::<pb::SessionSaveReply>(self.ctx, "session.save", save.encode_to_vec()).await?;
        if let Some(e) = failed(reply.status.as_ref()) {
            return Err(e);
        }
        tracing::debug!(task.id = %self.task_id, session.id = %self.session_id, "checkpoint saved");
        Ok(())
    }
}

/// A finished child, as recorded.
struct Finished {
    result: ChildTaskResult,
    /// Its result's patch.
    patch: String,
    /// Why its patch is not in its result, when it is not.
    not_carried: Option<String>,
}

/// Forwards a child's tool calls until it is finished; returns its recorded result.
async fn follow_child(
    ctx: &Context,
    parent: TaskId,
    child: TaskId,
    on_progress: &(dyn Fn(ChildProgress) + Send + Sync),
) -> Result<Finished, String> {
    let mut finished = ctx
        .client
        .subscribe(ctx.subjects.finished(child))
        .await
        .map_err(|e| format!("failed to follow child task {child}: {e}"))?;
    let events = async {
        let stream = ctx.js.get_stream(ctx.subjects.events_stream()).await.ok()?;
        let consumer = stream
            .create_consumer(OrderedConfig {
                filter_subject: ctx.subjects.progress(child),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .ok()?;
        consumer.messages().await.ok()
    }
    .await;
    let mut events = events.map(|e| e.boxed());
    let mut recheck = tokio::time::interval(CHILD_RECHECK);
    loop {
        tokio::select! {
            Some(Ok(msg)) = async { match events.as_mut() { Some(e) => e.next().await, None => None } } => {
                if let Ok(p) = decode::<pb::TaskProgress>("task progress", &msg.payload) {
                    match p.event {
                        Some(pb::task_progress::Event::ToolCall(t)) => {
                            let state = match t.state() {
                                pb::ToolCallState::Pending => ToolCallState::Pending,
                                pb::ToolCallState::Running => ToolCallState::Running,
                                pb::ToolCallState::Error => ToolCallState::Error,
                                _ => ToolCallState::Completed,
                            };
                            on_progress(ChildProgress::ToolCall { task_id: child.to_string(), tool: t.tool, title: t.title, state });
                        }
                        // The child's own ask, or one it shows for a descendant: passed up
                        // unchanged, so it reaches the root whatever the depth.
                        Some(pb::task_progress::Event::ApprovalRequired(a)) => {
                            let task_id = if a.task_id.is_empty() { child.to_string() } else { a.task_id };
                            on_progress(ChildProgress::ApprovalRequired { task_id, request_id: a.request_id, permission: a.permission, patterns: a.patterns });
                        }
                        _ => {}
                    }
                }
            }
            _ = finished.next() => {
                if let Some(r) = child_result(ctx, parent, child).await? { return Ok(r) }
            }
            _ = recheck.tick() => {
                if let Some(r) = child_result(ctx, parent, child).await? { return Ok(r) }
            }
        }
    }
}

/// The child's result once it is finished; `None` while it runs.
async fn child_result(
    ctx: &Context,
    parent: TaskId,
    child: TaskId,
) -> Result<Option<Finished>, String> {
    let reply = rpc::<pb::TaskLookupReply>(
        ctx,
        "task",
        pb::TaskLookup {
            task_id: child.to_string(),
            asking_task_id: parent.to_string(),
        }
        .encode_to_vec(),
    )
    .await?;
    if let Some(e) = failed(reply.status.as_ref()) {
        return Err(format!("failed to read child task {child}: {e}"));
    }
    let Some(task) = reply.task else {
        return Ok(None);
    };
    let status = TaskStatus::from_wire("status", task.status).map_err(|e| e.to_string())?;
    if !status.is_terminal() {
        return Ok(None);
    }
    let result = task.result.unwrap_or_default();
    let usage = result.usage.unwrap_or_default();
    let mut text = result.output.map(|o| o.text).unwrap_or_default();
    if text.is_empty()
        && let Some(e) = result.errors.first()
    {
        text = e.message.clone();
    }
    let mut not_carried = result
        .errors
        .iter()
        .find(|e| e.code == PATCH_NOT_CARRIED)
        .map(|e| e.message.clone());
    let mut patch = result.patch;
    // A patch too large for the reply comes through the patch bucket.
    if not_carried.is_none()
        && let Some(reference) =
            taskwire_protocol::PatchRef::from_wire("patch_ref", result.patch_ref)
                .map_err(|e| e.to_string())?
    {
        match ctx.patches.get(&reference).await {
            Ok(p) => patch = p,
            Err(e) => not_carried = Some(format!("failed to read them: {e}")),
        }
    }
    Ok(Some(Finished {
        result: ChildTaskResult {
            task_id: child.to_string(),
            session_id: result.session_id,
            status: status.as_str().to_owned(),
            text,
            usage: Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
            },
            changes_not_applied: None,
        },
        patch,
        not_carried,
    }))
}

fn answer_of(d: pb::ApprovalDecision) -> ApprovalAnswer {
    let message = (!d.message.is_empty()).then_some(d.message);
    match pb::ApprovalAnswer::try_from(d.answer) {
        Ok(pb::ApprovalAnswer::Once) => ApprovalAnswer::Once,
        Ok(pb::ApprovalAnswer::Always) => ApprovalAnswer::Always,
        _ => ApprovalAnswer::Reject { message },
    }
}
