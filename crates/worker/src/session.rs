//! One attempt's agent session: resolve the agent and model, load the transcript,
//! make the task's workspace, run a command template's !`cmd` and a slash command's
//! subtask if there are some, run the loop (checking the answer against the task's
//! output schema; for a new root session, the `title` agent beside it), hand back the
//! transcript, the provenance, the title and the workspace.

use taskwire_agent::command::run_subtask;
use taskwire_agent::command::shell::{self, Expanded, shell_spans};
use taskwire_agent::output_schema::{Structured, run_session_with_schema};
use taskwire_agent::provenance::{Source, Sources};
use taskwire_agent::session::{SessionSetup, SessionState};
use taskwire_agent::system_prompt::WorkspaceFacts;
use taskwire_agent::tools::ToolContext;
use taskwire_agent::transcript::{SubtaskPart, Transcript};
use taskwire_agent::user_message::{InputAttachment, InputRef, TaskInputs, included_files, render};
use taskwire_agent::{SessionHost, SessionOutcome, SessionParams};
use taskwire_bus::messages::SessionSave;
use taskwire_definitions::AgentSpec;
use taskwire_definitions::permission::{PermissionLayer, Permissions};
use taskwire_protocol::{SessionId, TaskId, TaskRequest};

use crate::cancel::StopHandle;
use crate::host::WorkerHost;
use crate::progress::{ProgressPublisher, ProgressSink};
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
}

/// A session that ran to its end.
pub struct Ran<'a> {
    pub outcome: SessionOutcome,
    /// The answer checked against the task's output schema.
    pub structured: Structured,
    /// What the session drew on: files read, URLs fetched, commands run.
    pub provenance: Vec<Source>,
    /// The transcript to send with the result (when it was not saved already).
    pub transcript: Option<String>,
    /// The workspace the session ran in: kept until the result is recorded.
    pub workspace: TaskFiles<'a>,
    /// A new root session's title, when the `title` agent wrote one in time.
    pub title: Option<String>,
}

/// Runs the attempt's session to its end, or says why it could not start.
///
/// The steps around the model loop are boxed (see [`crate::task::handle`]): a session
/// waiting on the model holds no room for them.
pub async fn run<'a>(
    ctx: &'a Context,
    request: &'a TaskRequest,
    claim: Claim,
    session_id: SessionId,
    stop: &StopHandle,
) -> Result<Ran<'a>, StartError> {
    let SessionSetup {
        agent,
        inherited,
        model,
        small_model,
        compaction,
        max_steps,
        schema,
        mcp: mcp_defs,
        subagents,
        skills,
    } = SessionSetup::builder(request, &ctx.default_model)
        .small_model(ctx.small_model.clone())
        .compaction(
            ctx.compaction_threshold,
            ctx.compact_with_small_model,
            &ctx.models,
        )
        .build()
        .map_err(|e| StartError::Invalid(e.to_string()))?;
    let fork = request
        .fork
        .as_deref()
        .map(taskwire_agent::fork::Fork::from_wire)
        .transpose()
        .map_err(|e| StartError::Invalid(format!("invalid fork: {e}")))?;
    let History {
        transcript: mut history,
        from_checkpoint,
        workspace: earlier,
    } = Box::pin(history(ctx, request, claim, session_id)).await?;
    let history_was_empty = history.messages.is_empty();
    // Titles go to the small model when the worker has one.
    let title_model = small_model.unwrap_or_else(|| model.clone());
    // A session offered no tool that changes files, and running no command template's
    // !`cmd`, reads the base directly when it starts from it as it is: no copy of its
    // own.
    let permissions = Permissions::new(&agent.permission, &inherited);
    let read_only = !request.expand_shell
        && !ctx.tools.may_change_files(&agent, permissions)
        && !taskwire_agent::mcp::may_change_files(&mcp_defs, &agent, permissions);
    let workspace = Box::pin(TaskFiles::reserve(ctx, request, claim, earlier, read_only)).await?;
    let tools_workspace = workspace.for_tools();
    let session_tools = Box::pin(mcp_tools(
        ctx,
        &mcp_defs,
        &agent,
        permissions,
        &workspace,
        &tools_workspace,
    ))
    .await?;
    let tools = session_tools.as_ref().unwrap_or(&ctx.tools);
    // The files are made when first needed: now, when the first message or the
    // system prompt reads some (inputs naming files, project instructions). Until then
    // the system prompt tells them as the base's, which the workspace will copy.
    let base_facts = ctx.base_facts.of(ctx.workspaces.base());
    let workspace_facts =
        if !workspace.reads_base() && needs_files_at_start(ctx, request, base_facts) {
            Box::pin(workspace.get()).await.map_err(|e| {
                StartError::Unavailable(format!("failed to make the workspace: {e}"))
            })?;
            None
        } else {
            Some(base_facts)
        };
    // What the task brought along goes into its first user message; a ref the task
    // cannot have (outside the workspace) fails it before anything runs.
    let inputs = inputs_of(request);
    let rendered = render(&request.prompt, &inputs, &tools_workspace)
        .map_err(|e| StartError::Invalid(e.to_string()))?;
    let mut sources = Sources::new();
    for file in included_files(&request.prompt, &inputs, &tools_workspace) {
        sources.add("file", &file, "");
    }

    let (sink, publisher) = ProgressPublisher::start(
        ctx.bus.clone(),
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
        subagents,
        skills,
        approval_timeout: ctx.approval_timeout,
        files: &workspace,
        children_refused: Default::default(),
    };
    let history_len = history.messages.len();
    let run = async {
        let mut prompt = rendered;
        let mut subtask_prompt = request.subtask.as_ref().map(|part| part.prompt.clone());
        if request.expand_shell && !from_checkpoint {
            // A command template's !`cmd`, run before anything else; in the prompt the
            // task was given, never in the files and inputs rendered after it.
            let target = match &mut subtask_prompt {
                Some(text) => text,
                None => &mut prompt,
            };
            let own = if request.subtask.is_some() {
                target.len()
            } else {
                request.prompt.len()
            };
            let expanded = Box::pin(expand_commands(
                &target[..own],
                &tools_workspace,
                &agent,
                &inherited,
                &host,
                &sink,
                stop,
            ))
            .await;
            for (command, output) in &expanded.ran {
                sources.add("command", command, output);
            }
            target.replace_range(..own, &expanded.text);
        }
        let mut subtask_usage = taskwire_llm::Usage::default();
        if let Some(part) = request.subtask.as_ref().filter(|_| !from_checkpoint) {
            // A slash command's delegation runs first, with no model deciding it (a
            // checkpoint comes after it, and holds it).
            let part = SubtaskPart {
                agent: part.agent.clone(),
                description: part.description.clone(),
                prompt: subtask_prompt.unwrap_or_default(),
                command: (!part.command.is_empty()).then(|| part.command.clone()),
            };
            let done = Box::pin(run_subtask(
                &part,
                taskwire_protocol::Subtask::CALL_ID,
                &host,
                &sink,
                stop.token(),
            ))
            .await;
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
            workspace_facts,
            instructions: ctx.instructions.clone(),
            compaction,
            budget: crate::cost::budget_of(request),
            prompt_caching: ctx.prompt_caching,
            priority: request.priority.get(),
            hooks: taskwire_agent::hooks::HookContext {
                runner: ctx.hooks.clone(),
                task_id: request.task_id.to_string(),
                subagent: request.parent_task_id.is_some(),
            },
            fork,
        };
        let (mut outcome, structured) = run_session_with_schema(
            params,
            schema.as_ref(),
            ctx.provider.as_ref(),
            tools,
            &host,
            &sink,
            stop.token(),
        )
        .await;
        outcome.usage += subtask_usage;
        (outcome, structured)
    };
    // A new root session gets a title, written beside its first step; a child's, a
    // resumed session's or a retried attempt's history already says what it is.
    // The `title` agent the definitions directories left (overridden, or the
    // built-in); none when one disabled it, and then no session is titled.
    // Built only for a session that is titled.
    let title_source =
        (ctx.titles && request.parent_task_id.is_none() && history_was_empty && !from_checkpoint)
            .then(|| title_source(request))
            .flatten()
            .and_then(|source| {
                let builtin = taskwire_definitions::builtin::title();
                taskwire_protocol::agent_spec::internal_agent(&request.agent_spec, builtin)
                    .map(|agent| (source, agent))
            });
    // Handed down through two more async functions: boxed once, not copied into each.
    let run = Box::pin(run);
    let ((mut outcome, structured), title) = run_beside_title(
        supervise(run, request.deadline, stop),
        title_source.map(|(source, agent)| {
            let wait = TitleWait::default();
            // The agent's own model, else the worker's small model, else the session's.
            let model = agent.model.clone().unwrap_or_else(|| title_model.clone());
            let title = Box::pin(write_title(
                ctx,
                agent,
                model,
                source,
                request.priority.get(),
                wait.clone(),
                stop,
            ));
            (title, wait)
        }),
    )
    .await;
    if let Some((_, usage)) = &title {
        outcome.usage += *usage;
        outcome.own_usage += *usage;
    }
    let title = title.and_then(|(title, _)| title);
    sources.add_tool_calls(
        outcome
            .transcript
            .messages
            .get(history_len..)
            .unwrap_or_default(),
        |name| ctx.tools.get(name).is_none() && tools.get(name).is_some(),
    );
    if sources.dropped() > 0 {
        tracing::debug!(task.id = %request.task_id, dropped = sources.dropped(), "provenance list full");
    }
    Box::pin(publisher.finish(sink)).await;
    // A retried attempt goes on from this transcript, so it needs these files too.
    let state = match outcome.error.as_ref().filter(|e| e.retryable) {
        Some(_) => Box::pin(workspace.state()).await.ok(),
        None => None,
    };
    let transcript = Box::pin(transcript_for_result(
        ctx,
        request,
        claim,
        session_id,
        &outcome.transcript,
        state.as_ref(),
    ))
    .await;
    Ok(Ran {
        outcome,
        structured,
        provenance: sources.into_vec(),
        transcript,
        workspace,
        title,
    })
}

/// How long a title still being written may hold up the result of a session that has
/// ended.
const TITLE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// The longest a title waiting for a rate-limit slot may hold up the result.
const TITLE_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Where the title call stands in a rate-limit wait, as its deltas tell: queued from
/// the first `RateLimited` it hears until its answer starts. The provider tells a wait
/// once, and a wait for a full budget is told as one poll of it, so the told end alone
/// says too little: while the call is queued, its wait lasts at least until now.
#[derive(Clone, Default)]
struct TitleWait(std::sync::Arc<std::sync::Mutex<Option<Queued>>>);

#[derive(Clone, Copy)]
struct Queued {
    /// The end of the wait last told, or when the answer started.
    until: tokio::time::Instant,
    /// Told a wait, and no answer yet.
    queued: bool,
}

impl TitleWait {
    fn set(&self, wait: std::time::Duration) {
        *self.lock() = Some(Queued {
            until: tokio::time::Instant::now() + wait,
            queued: true,
        });
    }

    /// The answer started: a call that was queued is no longer.
    fn answering(&self) {
        let mut state = self.lock();
        if let Some(q) = state.as_mut().filter(|q| q.queued) {
            *q = Queued {
                until: tokio::time::Instant::now(),
                queued: false,
            };
        }
    }

    /// When the wait ends (a queued call's not before now), or when the answer of a
    /// call that waited started; `None` for a call that never waited.
    fn until(&self) -> Option<tokio::time::Instant> {
        self.lock().map(|q| match q.queued {
            true => q.until.max(tokio::time::Instant::now()),
            false => q.until,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Queued>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `session` to its end with `title` beside it; the title gets [`TITLE_GRACE`]
/// more once the session is done, and is dropped after it. A title waiting for its
/// slot in the model's rate budget is not slow but queued: its grace runs from the end
/// of that wait, however many times the budget is asked again (a call still queued
/// waits at least until now), up to [`TITLE_MAX_WAIT`], so a throttled model loses no
/// titles.
async fn run_beside_title<S, T>(
    session: impl std::future::Future<Output = S>,
    title: Option<(impl std::future::Future<Output = Option<T>>, TitleWait)>,
) -> (S, Option<T>) {
    let Some((title, wait)) = title else {
        return (session.await, None);
    };
    tokio::pin!(session, title);
    tokio::select! {
        outcome = &mut session => {
            let ended = tokio::time::Instant::now();
            let mut deadline = ended + TITLE_GRACE;
            loop {
                tokio::select! {
                    title = &mut title => return (outcome, title),
                    () = tokio::time::sleep_until(deadline) => {}
                }
                let later = wait
                    .until()
                    .map(|until| (until + TITLE_GRACE).min(ended + TITLE_MAX_WAIT))
                    .filter(|later| *later > deadline);
                match later {
                    Some(later) => deadline = later,
                    None => {
                        tracing::debug!("no title in time, the result goes without one");
                        return (outcome, None);
                    }
                }
            }
        }
        title = &mut title => (session.await, title),
    }
}

/// What the title is written from: the prompt, or a slash command's rendered template.
fn title_source(request: &TaskRequest) -> Option<String> {
    [
        request.prompt.as_str(),
        request.subtask.as_ref().map_or("", |s| s.prompt.as_str()),
    ]
    .into_iter()
    .map(str::trim)
    .find(|text| !text.is_empty())
    .map(str::to_owned)
}

/// The `title` agent's title for `source` and the call's usage; `None` when it failed
/// (logged: a session without a title is still a good session) or was stopped.
async fn write_title(
    ctx: &Context,
    agent: taskwire_definitions::agent::AgentSpec,
    model: String,
    source: String,
    priority: u8,
    wait: TitleWait,
    stop: &StopHandle,
) -> Option<(Option<String>, taskwire_llm::Usage)> {
    let mut on_delta = |delta: taskwire_llm::StreamDelta| match delta {
        taskwire_llm::StreamDelta::RateLimited { wait: w, .. } => wait.set(w),
        taskwire_llm::StreamDelta::Text(_) => wait.answering(),
        taskwire_llm::StreamDelta::RateHints(_) => {}
    };
    let call = taskwire_agent::title::write_title(
        ctx.provider.as_ref(),
        &agent,
        &model,
        &source,
        priority,
        &mut on_delta,
    );
    let stopped = stop.token();
    tokio::select! {
        () = stopped.cancelled() => None,
        written = call => match written {
            Ok(written) => Some(written),
            Err(error) => {
                tracing::warn!(error = %error, "failed to write the session's title");
                None
            }
        },
    }
}

/// Runs the !`cmd` of a command template under the session's `bash` rules (asks go to
/// the task's approvals, as a tool call's would), once its files are ready.
async fn expand_commands(
    text: &str,
    workspace: &taskwire_agent::Workspace,
    agent: &AgentSpec,
    inherited: &[PermissionLayer],
    host: &WorkerHost<'_>,
    sink: &ProgressSink,
    stop: &StopHandle,
) -> Expanded {
    let commands = shell_spans(text).len();
    if commands == 0 {
        return Expanded {
            text: text.to_owned(),
            ran: Vec::new(),
        };
    }
    let Some(bash) = host.ctx.tools.get("bash") else {
        return Expanded {
            text: text.to_owned(),
            ran: Vec::new(),
        };
    };
    if let Err(e) = host.ensure_workspace().await {
        tracing::warn!(task.id = %host.task_id, error = %e.message, "template commands not run");
        return Expanded {
            text: format!(
                "{text}\n\n[the template's commands did not run: {}]",
                e.message
            ),
            ran: Vec::new(),
        };
    }
    let state = SessionState::new();
    let ctx = ToolContext {
        workspace: workspace.clone(),
        cancel: stop.token(),
        host,
        observer: sink,
        state: &state,
        call_id: String::new(),
        permissions: Permissions::new(&agent.permission, inherited),
    };
    tracing::debug!(task.id = %host.task_id, commands, "running the template's commands");
    shell::expand(text, bash, &ctx).await
}

/// Whether the session reads files before its first tool call: inputs that name
/// workspace files, configured instruction files, a named repository (its own
/// `AGENTS.md`), or project instructions in the base.
fn needs_files_at_start(ctx: &Context, request: &TaskRequest, base: WorkspaceFacts) -> bool {
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
        || base.project_file.is_some()
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
            Some((saved, saved_by)) if saved_by == request.task_id => {
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

/// The saved transcript and the task that saved it, if there is one. A coordinator
/// that cannot be reached (or a database that is down) means try again later; any
/// other refusal fails the attempt.
async fn load_transcript(
    ctx: &Context,
    task_id: TaskId,
    session_id: SessionId,
) -> Result<Option<(Saved, TaskId)>, StartError> {
    let stored = match ctx.bus.session_load(session_id, task_id).await {
        Ok(stored) => stored,
        Err(e) => {
            let reason = format!("failed to load session {session_id}: {e}");
            return Err(if e.is_retryable() {
                StartError::Unavailable(reason)
            } else {
                StartError::Invalid(reason)
            });
        }
    };
    let Some(stored) = stored else {
        return Ok(None);
    };
    let saved = serde_json::from_slice(&stored.transcript_json).map_err(|e| {
        StartError::Invalid(format!(
            "session {session_id} has an unreadable transcript: {e}"
        ))
    })?;
    Ok(Some((saved, stored.saved_by)))
}

/// The session's tools when its agent spec ships MCP servers it may use: the worker's
/// and theirs, listed now (a local server's workspace is made first: it runs there).
/// A server that cannot list its tools is left out, and a call to one of its tools is
/// the reason; the session goes on with the others. `None`: the worker's tools alone.
async fn mcp_tools(
    ctx: &Context,
    defs: &[taskwire_agent::mcp::McpServerDef],
    agent: &AgentSpec,
    permissions: taskwire_definitions::permission::Permissions<'_>,
    files: &TaskFiles<'_>,
    workspace: &taskwire_agent::Workspace,
) -> Result<Option<taskwire_agent::ToolRegistry>, StartError> {
    let servers = ctx.mcp.for_session(defs, agent, permissions);
    let switched_off: Vec<(String, String)> = defs
        .iter()
        .filter(|def| !servers.iter().any(|s| s.def().name == def.name))
        .map(|def| {
            let reason = format!(
                "the tools of MCP server {} are not available to agent {}: its tools or \
                 permission rules (or an ancestor's) switch them off",
                def.name, agent.name
            );
            (def.name.clone(), reason)
        })
        .collect();
    if servers.is_empty() && switched_off.is_empty() {
        return Ok(None);
    }
    if servers.iter().any(|s| s.def().is_local()) {
        Box::pin(files.get())
            .await
            .map_err(|e| StartError::Unavailable(format!("failed to make the workspace: {e}")))?;
    }
    let (tools, failed) =
        taskwire_agent::mcp::session_tools(&servers, workspace, permissions).await;
    let failed = failed.into_iter().chain(switched_off).collect();
    let metrics = ctx.metrics.clone();
    Ok(Some(
        ctx.tools.with_tools(
            tools
                .into_iter()
                .map(|t| Box::new(t) as Box<dyn taskwire_agent::Tool>)
                .collect(),
            failed,
            |tool| crate::metrics::MeteredTool::wrap(tool, metrics.clone()),
        ),
    ))
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
    let save = SessionSave {
        session: session_id,
        task: request.task_id,
        epoch: claim.epoch,
        transcript_json: body.into_bytes(),
    };
    if let Err(e) = ctx.bus.session_save(&save).await {
        tracing::warn!(task.id = %request.task_id, error = %e, "transcript not saved");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A title that answers `after` the session ended, having heard `told` first.
    async fn title_answering(
        wait: TitleWait,
        told: Option<Duration>,
        after: Duration,
    ) -> Option<&'static str> {
        if let Some(told) = told {
            wait.set(told);
        }
        tokio::time::sleep(after).await;
        wait.answering();
        Some("a title")
    }

    #[tokio::test]
    async fn a_title_still_queued_after_its_told_wait_is_kept_past_the_grace() {
        let wait = TitleWait::default();
        // The provider told one poll of the wait (100 ms); the slot came much later.
        let title = title_answering(
            wait.clone(),
            Some(Duration::from_millis(100)),
            TITLE_GRACE + Duration::from_secs(2),
        );
        let ((), title) = run_beside_title(async {}, Some((title, wait))).await;
        assert_eq!(title, Some("a title"));
    }

    #[tokio::test]
    async fn a_title_that_never_waited_is_dropped_after_the_grace() {
        let wait = TitleWait::default();
        let started = tokio::time::Instant::now();
        let title = title_answering(wait.clone(), None, TITLE_GRACE + Duration::from_secs(2));
        let ((), title) = run_beside_title(async {}, Some((title, wait))).await;
        assert_eq!(title, None);
        let took = started.elapsed();
        assert!(
            took >= TITLE_GRACE && took < TITLE_GRACE + Duration::from_secs(2),
            "{took:?}"
        );
    }
}
