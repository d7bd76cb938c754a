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
//! - background children (`task` with `background: true`): the same submit and
//!   follow, but the child's patch is returned to the session instead of applied, and
//!   brought in (`apply_child_changes`) when the result is given to the model.
//! - checkpoints: the session so far, and the workspace's changes, are saved through
//!   the coordinator (fenced by the claim) before a step's children start.
//! - `ask` permissions: the coordinator marks the task `awaiting_approval`; the answer
//!   (gRPC `Approve`) arrives on the task's approval subject. An unanswered ask times
//!   out as a deny; it never blocks forever.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use taskwire_agent::host::{
    ApprovalAnswer, ApprovalRequest, ChildProgress, ChildTaskRequest, ChildTaskResult,
};
use taskwire_agent::transcript::Transcript;
use taskwire_agent::{SessionError, SessionHost, ToolCallState};
use taskwire_bus::Received;
use taskwire_bus::messages::{self, ApprovalDecision, ChildSubmit, SessionSave};
use taskwire_protocol::{ClaimEpoch, SessionId, TaskId, pb};
use tokio_util::sync::CancellationToken;

use crate::saved::SavedRef;
use crate::task::Context;
use crate::workspace::TaskFiles;

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
    pub skills: std::sync::Arc<[taskwire_definitions::skill::Skill]>,
    pub approval_timeout: Duration,
    /// The attempt's workspace: made when first needed; children start from it and
    /// their changes return to it.
    pub files: &'a TaskFiles<'a>,
    /// Set when the last checkpoint could not be saved because the workspace's
    /// changes are too large for it: the step's children are refused with this
    /// reason, since none may start that a later attempt could not find again.
    pub children_refused: std::sync::Mutex<Option<String>>,
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
        let mut decisions = match ctx.bus.approval_decisions(self.task_id).await {
            Ok(s) => s,
            Err(e) => {
                return ApprovalAnswer::Reject {
                    message: Some(format!("approval could not be requested: {e}")),
                };
            }
        };
        let ask = messages::ApprovalAsk {
            task: self.task_id,
            epoch: self.epoch,
            request_id: request.request_id.clone(),
            permission: request.permission.clone(),
            patterns: request.patterns.clone(),
            title: request.title.clone(),
        };
        match ctx.bus.approval_ask(&ask).await {
            Ok(()) => asked(),
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
                d = decisions.next() => {
                    let Some(d) = d else { break };
                    let Ok(d) = d else { continue };
                    if d.request_id == request.request_id {
                        return answer_of(d);
                    }
                }
                _ = recheck.tick() => {
                    if let Ok(Some(d)) = ctx.bus.approval_check(self.task_id, &request.request_id).await {
                        return answer_of(d);
                    }
                }
                _ = &mut give_up => break,
            }
        }
        match ctx
            .bus
            .approval_timeout(self.task_id, &request.request_id)
            .await
        {
            // Answered just before the timeout closed it: the answer stands.
            Ok(Some(d)) => answer_of(d),
            Ok(None) => {
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
            taskwire_protocol::child_key(self.task_id, &request.call_id)
        };
        if let Some(reason) = self
            .children_refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return Err(reason);
        }
        if let Some(model) = &request.model {
            ctx.models.within_price_of(model, &self.model)?;
        }
        let start = self.files.child_start().await?;
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
        let submit = ChildSubmit {
            parent: self.task_id,
            parent_epoch: self.epoch,
            parent_model: Some(self.model.clone()).filter(|m| !m.is_empty()),
            // The `execute_tool task` span: the child's spans hang under it.
            traceparent: taskwire_traces::Span::current().traceparent(),
            fork: request.fork.as_ref().map(|fork| fork.to_wire()),
            request: pb::SubmitRequest {
                agent: request.subagent_type.clone(),
                prompt: request.prompt.clone(),
                intent: request.description.clone(),
                resume_token: request.session_id.clone().unwrap_or_default(),
                command: request.command.clone().unwrap_or_default(),
                model: request.model.clone(),
                idempotency_key,
                context_refs,
                workspace_patch: start.inline,
                workspace_patch_ref: start.by_reference.as_ref().map(pb::PatchRef::from),
                ..Default::default()
            },
        };
        let reply = ctx
            .bus
            .child_submit(&submit)
            .await
            .map_err(|e| format!("the child task was refused: {e}"))?;
        let child = reply.task;
        on_progress(ChildProgress::Started {
            task_id: child.to_string(),
            session_id: reply.session.clone(),
        });
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
        // Only an answer the parent can use brings its changes along. A background
        // child's are brought in when its result is given to the model.
        if outcome.succeeded() && request.background {
            match finished.not_carried {
                Some(why) => {
                    outcome.changes_not_applied =
                        Some(format!("they did not come back with its result: {why}"));
                }
                None if !finished.patch.is_empty() => {
                    outcome.deferred_patch = Some(finished.patch);
                }
                None => {}
            }
        } else if outcome.succeeded() {
            outcome.changes_not_applied = match finished.not_carried {
                Some(why) => Some(format!("they did not come back with its result: {why}")),
                None => self.files.bring_back(&finished.patch).await.err(),
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
            session_id: reply.session,
            ..outcome
        })
    }

    fn subagents(&self) -> &[(String, String)] {
        &self.subagents
    }

    fn skills(&self) -> std::sync::Arc<[taskwire_definitions::skill::Skill]> {
        self.skills.clone()
    }

    async fn ensure_workspace(&self) -> Result<(), SessionError> {
        if self.files.reads_base() {
            return Ok(());
        }
        match self.files.get().await {
            Ok(_) => Ok(()),
            Err(e) => Err(SessionError {
                message: format!("failed to prepare the task's workspace: {e}"),
                retryable: e.is_retryable(),
            }),
        }
    }

    async fn apply_child_changes(&self, patch: &str) -> Result<(), String> {
        self.files.bring_back(patch).await?;
        tracing::info!(task.id = %self.task_id, bytes = patch.len(), "background child's changes applied");
        Ok(())
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
        let limit = self.ctx.bus.max_payload().saturating_sub(CHECKPOINT_MARGIN);
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
        let save = SessionSave {
            session: self.session_id,
            task: self.task_id,
            epoch: self.epoch,
            transcript_json,
        };
        self.ctx
            .bus
            .session_save(&save)
            .await
            .map_err(|e| e.to_string())?;
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
        .bus
        .finished_notices(child)
        .await
        .map_err(|e| format!("failed to follow child task {child}: {e}"))?;
    let mut events = ctx.bus.replay_progress(child).await.ok();
    let mut recheck = tokio::time::interval(CHILD_RECHECK);
    loop {
        tokio::select! {
            Some(Ok(received)) = async { match events.as_mut() { Some(e) => e.next().await, None => None } } => {
                // A malformed message has no events to pass on.
                let Received::Value(delivery) = received else { continue };
                for p in delivery.value.0 {
                    match p.event {
                        Some(pb::task_progress::Event::ToolCall(t)) => {
                            let state = match t.state() {
                                pb::ToolCallState::Pending => ToolCallState::Pending,
                                pb::ToolCallState::Running => ToolCallState::Running,
                                pb::ToolCallState::Error => ToolCallState::Error,
                                _ => ToolCallState::Completed,
                            };
                            // A call the child shows for a descendant keeps that task's id.
                            let task_id = if t.task_id.is_empty() { child.to_string() } else { t.task_id };
                            on_progress(ChildProgress::ToolCall { task_id, call_id: t.call_id, tool: t.tool, title: t.title, state });
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
    let state = ctx
        .bus
        .task_lookup(child, parent)
        .await
        .map_err(|e| format!("failed to read child task {child}: {e}"))?;
    if !state.status.is_terminal() {
        return Ok(None);
    }
    // A finished task without a result passes on only its status.
    let (mut text, errors, usage, mut patch, patch_ref, session_id) = match state.result {
        Some(r) => (
            r.text,
            r.errors,
            r.usage,
            r.patch,
            r.patch_ref,
            r.session_id,
        ),
        None => Default::default(),
    };
    if text.is_empty()
        && let Some(e) = errors.first()
    {
        text = e.message.clone();
    }
    let mut not_carried = errors
        .iter()
        .find(|e| e.is(taskwire_protocol::ResultErrorCode::PatchNotCarried))
        .map(|e| e.message.clone());
    // A patch too large for the reply comes through the patch bucket.
    if not_carried.is_none()
        && let Some(reference) = patch_ref
    {
        match ctx.patches.get(&reference).await {
            Ok(p) => patch = p,
            Err(e) => not_carried = Some(format!("failed to read them: {e}")),
        }
    }
    Ok(Some(Finished {
        result: ChildTaskResult {
            task_id: child.to_string(),
            session_id: session_id.map(|s| s.to_string()).unwrap_or_default(),
            status: state.status.as_str().to_owned(),
            text,
            usage: crate::cost::to_session(usage),
            changes_not_applied: None,
            deferred_patch: None,
        },
        patch,
        not_carried,
    }))
}

fn answer_of(d: ApprovalDecision) -> ApprovalAnswer {
    match d.answer {
        messages::Answer::Once => ApprovalAnswer::Once,
        messages::Answer::Always => ApprovalAnswer::Always,
        messages::Answer::Reject => ApprovalAnswer::Reject { message: d.message },
    }
}
