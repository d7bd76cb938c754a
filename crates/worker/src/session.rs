//! One attempt's agent session: resolve the agent and model, load the transcript,
//! make the task's workspace, run a slash command's subtask if there is one, run the
//! loop, hand back the transcript and the workspace.

use prost::Message as _;
use taskwire_agent::command::run_subtask;
use taskwire_agent::permission::{PermissionAction, PermissionLayer, Permissions};
use taskwire_agent::policy::{child_tools_policy, restrict_to_scope};
use taskwire_agent::transcript::{SubtaskPart, Transcript};
use taskwire_agent::user_message::{InputAttachment, InputRef, TaskInputs, render};
use taskwire_agent::{AgentSpec, SessionOutcome, SessionParams, run_session};
use taskwire_llm::router::resolve_model;
use taskwire_protocol::{SessionId, TaskId, TaskRequest, pb};
use taskwire_workspaces::WorkspaceError;

use crate::cancel::StopHandle;
use crate::host::{WorkerHost, failed, rpc};
use crate::progress::ProgressPublisher;
use crate::saved::{Saved, SavedRef, WorkspaceState};
use crate::task::{Claim, Context, supervise};
use crate::workspace::TaskFiles;

/// Why a session could not start.
#[derive(Debug)]
pub enum StartError {
    /// The request cannot run anywhere (an invalid agent spec, an unreadable transcript).
    Invalid(String),
    /// The coordinator could not be reached to load the transcript: try again later.
    Unavailable(String),
    /// The task's workspace could not be reserved.
    Workspace(WorkspaceError),
}

/// A session that ran to its end.
pub struct Ran<'a> {
    pub outcome: SessionOutcome,
    /// The transcript to send with the result (when it was not saved already).
    pub transcript: Option<String>,
    /// The workspace the session ran in: kept until the result is recorded.
    pub workspace: TaskFiles<'a>,
}

/// Runs the attempt's session to its end, or says why it could not start.
pub async fn run<'a>(
    ctx: &'a Context,
    request: &'a TaskRequest,
    claim: Claim,
    session_id: SessionId,
    stop: &StopHandle,
) -> Result<Ran<'a>, StartError> {
    let agent = AgentSpec::try_from(&request.agent_spec)
        .map_err(|e| StartError::Invalid(format!("invalid agent spec: {e}")))?;
    // An ancestor's rule that cannot be read must not leave the child unbounded.
    let inherited = request
        .inherited_permission
        .iter()
        .map(PermissionLayer::try_from)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StartError::Invalid(format!("invalid inherited permission: {e}")))?;
    let model = resolve_model(
        request.model.as_deref(),
        agent.model.as_deref(),
        request.parent_model.as_deref(),
        &ctx.default_model,
    );
    // The worker enforces what a session may use; the model is never trusted to.
    let agent = restrict_to_scope(&agent, &request.auth_scope);
    let agent = if request.depth > 0 {
        child_tools_policy(&agent, request.depth, request.max_depth)
    } else {
        agent
    };
    let max_steps = request
        .max_steps
        .map_or(agent.max_steps, |m| m.min(agent.max_steps));
    let History {
        transcript: mut history,
        from_checkpoint,
        workspace: earlier,
    } = history(ctx, request, claim, session_id).await?;
    let workspace = TaskFiles::reserve(ctx, request, claim, earlier).await?;
    let tools_workspace = taskwire_agent::Workspace::new(workspace.root())
        .map_err(|e| StartError::Invalid(format!("unusable workspace: {e}")))?;
    // The files are made when first needed: now, when the first message or the
    // system prompt reads some (inputs naming files, project instructions).
    if needs_files_at_start(ctx, request) {
        workspace
            .get()
            .await
            .map_err(|e| StartError::Unavailable(format!("failed to make the workspace: {e}")))?;
    }
    // What the task brought along goes into its first user message; a ref the task
    // cannot have (outside the workspace) fails it before anything runs.
    let rendered = render(&request.prompt, &inputs_of(request), &tools_workspace)
        .map_err(|e| StartError::Invalid(e.to_string()))?;

    let (sink, publisher) = ProgressPublisher::start(
        ctx.js.clone(),
        ctx.subjects.progress(request.task_id),
        request.task_id,
        request.trace_id,
        claim.attempt,
    );
    let host = WorkerHost {
        ctx,
        task_id: request.task_id,
        epoch: claim.epoch,
        session_id,
        model: model.clone(),
        // The `task` tool lists only the agents this one (and its ancestors) may start.
        subagents: {
            let permissions = Permissions::new(&agent.permission, &inherited);
            request
                .subagents
                .iter()
                .filter(|(name, _)| permissions.evaluate("task", name) != PermissionAction::Deny)
                .cloned()
                .collect()
        },
        approval_timeout: ctx.approval_timeout,
        files: &workspace,
        children_refused: Default::default(),
    };
    let run = async {
        let mut prompt = rendered;
        let mut subtask_usage = taskwire_llm::Usage::default();
        if let Some(part) = request.subtask.as_ref().filter(|_| !from_checkpoint) {
            // A slash command's delegation runs first, with no model deciding it (a
            // checkpoint comes after it, and holds it).
            let part = SubtaskPart {
                agent: part.agent.clone(),
                description: part.description.clone(),
                prompt: part.prompt.clone(),
                command: (!part.command.is_empty()).then(|| part.command.clone()),
            };
            let done = run_subtask(&part, "call_subtask", &host, &sink, stop.token()).await;
            history.messages.extend(done.messages);
            subtask_usage = done.usage;
            prompt.clear(); // the subtask part is the user's message
        }
        let params = SessionParams {
            agent,
            model,
            prompt,
            max_steps,
            history,
            workspace: tools_workspace,
            inherited_permission: inherited,
            from_checkpoint,
            instructions: ctx.instructions.clone(),
        };
        let mut outcome = run_session(
            params,
            ctx.provider.as_ref(),
            &ctx.tools,
            &host,
            &sink,
            stop.token(),
        )
        .await;
        outcome.usage += subtask_usage;
        outcome
    };
    let outcome = supervise(run, request.deadline, stop).await;
    publisher.finish(sink).await;
    // A retried attempt goes on from this transcript, so it needs these files too.
    let state = match outcome.error.as_ref().filter(|e| e.retryable) {
        Some(_) => workspace.state().await.ok(),
        None => None,
    };
    let transcript = transcript_for_result(
        ctx,
        request,
        claim,
        session_id,
        &outcome.transcript,
        state.as_ref(),
    )
    .await;
    Ok(Ran {
        outcome,
        transcript,
        workspace,
    })
}

/// Whether the session reads files before its first tool call: inputs that name
/// workspace files, configured instruction files, a named repository (its own
/// `AGENTS.md`), or project instructions in the base.
fn needs_files_at_start(ctx: &Context, request: &TaskRequest) -> bool {
    let base = ctx.workspaces.base();
    request.prompt.contains('@')
        || !ctx.instructions.is_empty()
        || request
            .context_refs
            .iter()
            .any(|r| r.kind == "file" || r.kind == "git")
        || request
            .attachments
            .iter()
            .any(|a| a.data.is_empty() && !a.uri.is_empty())
        || taskwire_agent::system_prompt::PROJECT_FILES
            .iter()
            .any(|name| base.join(name).exists())
}

/// The task's inputs as the agent crate takes them.
fn inputs_of(request: &TaskRequest) -> TaskInputs {
    TaskInputs {
        input: request.input.clone(),
        context_refs: request
            .context_refs
            .iter()
            .map(|r| InputRef {
                kind: r.kind.clone(),
                id: r.id.clone(),
                uri: r.uri.clone(),
            })
            .collect(),
        attachments: request
            .attachments
            .iter()
            .map(|a| InputAttachment {
                name: a.name.clone(),
                media_type: a.media_type.clone(),
                uri: a.uri.clone(),
                data: a.data.clone(),
            })
            .collect(),
    }
}

/// Transcripts up to this size travel with the result (saved in its transaction);
/// larger ones are saved on their own, before the result, through the coordinator.
const TRANSCRIPT_WITH_RESULT: usize = 256 * 1024;

/// The session to start from.
struct History {
    transcript: Transcript,
    /// The transcript is this task's own checkpoint: the run goes on from it.
    from_checkpoint: bool,
    /// The workspace the checkpoint was saved with (only for this task's own).
    workspace: Option<WorkspaceState>,
}

/// The session to start from, and whether it is this task's own checkpoint.
///
/// A new session has nothing to load on its first attempt. Otherwise the saved
/// transcript is loaded: when this task saved it (an earlier attempt's checkpoint, or
/// the transcript of an attempt that failed and is retried) the run goes on from it,
/// with the files as that attempt had them; when another task did (`resume_token` of
/// a finished session) it is history to add this task's prompt to. A new session
/// never continues someone else's transcript.
async fn history(
    ctx: &Context,
    request: &TaskRequest,
    claim: Claim,
    session_id: SessionId,
) -> Result<History, StartError> {
    let fresh = || History {
        transcript: Transcript::new(session_id.to_string()),
        from_checkpoint: false,
        workspace: None,
    };
    if request.new_session && claim.attempt <= 1 {
        return Ok(fresh());
    }
    Ok(
        match load_transcript(ctx, request.task_id, session_id).await? {
            Some((saved, saved_by)) if saved_by == request.task_id.to_string() => {
                tracing::info!(task.id = %request.task_id, session.id = %session_id, "resuming from this task's checkpoint");
                let workspace = match saved.workspace {
                    Some(w) => Some(w.restored(&ctx.patches).await.map_err(|e| {
                        let message =
                            format!("failed to restore the checkpoint's workspace changes: {e}");
                        if e.is_retryable() {
                            StartError::Unavailable(message)
                        } else {
                            StartError::Invalid(message)
                        }
                    })?),
                    None => None,
                };
                History {
                    transcript: saved.transcript,
                    from_checkpoint: true,
                    workspace,
                }
            }
            Some((saved, _)) if !request.new_session => History {
                transcript: saved.transcript,
                from_checkpoint: false,
                workspace: None,
            },
            _ => fresh(),
        },
    )
}

/// The saved transcript and the task that saved it, if there is one.
async fn load_transcript(
    ctx: &Context,
    task_id: TaskId,
    session_id: SessionId,
) -> Result<Option<(Saved, String)>, StartError> {
    let unavailable =
        |e: String| StartError::Unavailable(format!("failed to load session {session_id}: {e}"));
    let load = pb::SessionLoad {
        session_id: session_id.to_string(),
        task_id: task_id.to_string(),
    };
    let reply = rpc::<pb::SessionLoadReply>(ctx, "session.load", load.encode_to_vec())
        .await
        .map_err(unavailable)?;
    if let Some(e) = failed(reply.status.as_ref()) {
        return Err(unavailable(e));
    }
    if !reply.found {
        return Ok(None);
    }
    let saved = serde_json::from_slice(&reply.transcript_json).map_err(|e| {
        StartError::Invalid(format!(
            "session {session_id} has an unreadable transcript: {e}"
        ))
    })?;
    Ok(Some((saved, reply.saved_by_task_id)))
}

/// The transcript (with `workspace`, the files' state for a retry) as JSON to send
/// with the result, or `None` after saving a large one on its own. A failure is
/// logged, not fatal: the result still counts, only a later resume would miss this
/// run. (Called under the attempt's in-progress acks.)
async fn transcript_for_result(
    ctx: &Context,
    request: &TaskRequest,
    claim: Claim,
    session_id: SessionId,
    transcript: &Transcript,
    workspace: Option<&WorkspaceState>,
) -> Option<String> {
    let workspace = match workspace {
        Some(w) => match w.for_saving(&ctx.patches, request.task_id).await {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(task.id = %request.task_id, error = %e, "transcript not saved: its workspace changes could not be handed over");
                return None;
            }
        },
        None => None,
    };
    let saved = SavedRef {
        transcript,
        workspace: workspace.as_ref(),
    };
    let body = match serde_json::to_string(&saved) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(task.id = %request.task_id, error = %e, "failed to encode the transcript");
            return None;
        }
    };
    if body.len() <= TRANSCRIPT_WITH_RESULT {
        return Some(body);
    }
    let body = body.into_bytes();
    let save = pb::SessionSave {
        session_id: session_id.to_string(),
        task_id: request.task_id.to_string(),
        claim_epoch: claim.epoch.0,
        transcript_json: body,
    };
    match rpc::<pb::SessionSaveReply>(ctx, "session.save", save.encode_to_vec()).await {
        Ok(r) => {
            if let Some(e) = failed(r.status.as_ref()) {
                tracing::warn!(task.id = %request.task_id, error = %e, "transcript not saved");
            }
        }
        Err(e) => tracing::warn!(task.id = %request.task_id, error = %e, "transcript not saved"),
    }
    None
}
