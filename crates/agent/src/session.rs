//! The agent loop: ask the model, run the tools it calls, feed the results back, until
//! it answers in plain text or the step limit is reached (OpenCode's `SessionPrompt`
//! loop).
//!
//! - [`events`]: progress events, the observer trait, statuses and the outcome.
//! - [`budget`]: [`SessionBudget`], the tree's spending limit, checked before each
//!   model call.
//! - [`state`]: what a run remembers between calls (todos, approvals, child usage).
//! - [`background`]: `task` calls that run in the background, followed next to the
//!   loop; their results are given to the model at its next step.
//! - `tool_calls`: permission checks, approvals and concurrent execution of one
//!   turn's calls.
//! - [`compaction`]: the estimate of the next request's size and the summary that
//!   replaces the older turns when it would fill too much of the context window.
//!
//! The loop owns no IO of its own: the model is a [`Provider`], files and commands
//! are reached only through the [`ToolRegistry`] tools confined to a [`Workspace`],
//! approvals and child tasks go through the [`SessionHost`], and progress leaves
//! through a [`SessionObserver`]. That keeps it testable with a scripted provider and
//! lets the worker decide where events and transcripts go.

pub mod background;
pub mod budget;
pub mod compaction;
pub mod events;
pub mod setup;
pub mod state;
mod tool_calls;

use taskwire_llm::{ChatRequest, ChatResponse, LlmError, Message, Provider, StreamDelta, Usage};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use self::budget::SessionBudget;
pub use self::compaction::{CompactionPolicy, DEFAULT_COMPACTION_THRESHOLD};
pub use self::events::{
    NoopObserver, SessionEvent, SessionObserver, SessionOutcome, SessionStatus, ToolCallState,
    ToolCallSummary,
};
pub use self::setup::{SessionSetup, SetupError};
pub use self::state::SessionState;
use self::tool_calls::Turn;
use crate::error::SessionError;
use crate::hooks::{HookEvent, STOP_FEEDBACK, SessionHooks};
use crate::host::SessionHost;
use crate::system_prompt::WorkspaceFacts;
use crate::tools::{Tool, ToolContext, ToolRegistry};
use crate::transcript::{Part, Transcript, TranscriptMessage};
use crate::workspace::Workspace;
use taskwire_definitions::agent::AgentSpec;
use taskwire_definitions::permission::{PermissionLayer, Permissions};

/// Sent with the last allowed step, which offers no tools, so that a session cut off
/// by its limit still ends with a useful, resumable summary.
const MAX_STEPS_PROMPT: &str = include_str!("prompt/max_steps.txt");

/// Everything one session run needs besides its collaborators.
#[derive(Debug, Clone)]
pub struct SessionParams {
    pub agent: AgentSpec,
    /// The resolved model id (request override → agent → parent → default).
    pub model: String,
    /// This run's user prompt. Empty continues from the history without a new user
    /// message (how a session resumes after a slash-command subtask).
    pub prompt: String,
    /// The effective step limit, already `min(request, agent)`. 0 is read as 1: even a
    /// zero budget gets one (tool-less) answer.
    pub max_steps: u32,
    /// The session so far: a previous run's [`SessionOutcome::transcript`] to resume
    /// from, or `Transcript::new(session_id)` for a new session.
    pub history: Transcript,
    pub workspace: Workspace,
    /// The ancestors' rules, nearest first (empty for a root task): every call is
    /// judged by the agent's own rules and by each of these, and the strictest verdict
    /// wins.
    pub inherited_permission: Vec<PermissionLayer>,
    /// `history` was saved by an earlier attempt of this same task (a checkpoint, or
    /// the transcript of an attempt that failed and is being retried), not by a
    /// finished run: this run goes on from where that one stopped. It adds no prompt
    /// (the history holds it), first runs again the calls of an interrupted last step
    /// that have no result, with their ids (so `task` calls find the children they
    /// started), and counts the steps already taken against `max_steps`.
    pub from_checkpoint: bool,
    /// What the workspace's files are as the system prompt tells them; `None` looks
    /// them up at its root when the session starts.
    pub workspace_facts: Option<WorkspaceFacts>,
    /// Instruction files added to the system prompt after the project's `AGENTS.md`,
    /// as paths relative to the workspace root (see [`crate::system_prompt`]).
    pub instructions: Vec<String>,
    /// When the conversation is summarised to fit the model's context window; `None`
    /// never compacts.
    pub compaction: Option<CompactionPolicy>,
    /// The tree's spending limit; checked before each model call.
    pub budget: SessionBudget,
    /// Ask the provider to cache the prefix each step repeats (keyed by the session
    /// id; see `ChatRequest::cache_key`).
    pub prompt_caching: bool,
    /// The task's priority, 1 (highest) to 5 (lowest), 0 for the default: orders its
    /// calls waiting for a rate-limit slot (`ChatRequest::priority`).
    pub priority: u8,
    /// Who runs the agent's hooks (`agent.hooks`) and for which task.
    pub hooks: crate::hooks::HookContext,
    /// A forked child's start (see [`crate::fork`]): its requests send the parent's
    /// system prompt and tools under the parent's cache key, and a new session begins
    /// with the parent's conversation.
    pub fork: Option<crate::fork::Fork>,
}

/// Runs one session to its end. Never fails: every ending, including a failed model
/// call, is a [`SessionOutcome`].
pub async fn run_session(
    params: SessionParams,
    provider: &dyn Provider,
    tools: &ToolRegistry,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> SessionOutcome {
    // A log span only, at DEBUG (no exported span: the attempt's `invoke_agent` span
    // already names the agent and its `chat` spans the model).
    let span =
        tracing::debug_span!("session", agent.name = %params.agent.name, model = %params.model);
    let state = SessionState::new();
    // Background children run while the loop does; they end with it.
    let children = cancel.child_token();
    // Boxed: handed on into the `select!` below, each would otherwise take its room
    // twice in this function's state, for as long as the session runs.
    let session = Box::pin(run(params, provider, tools, host, observer, cancel, &state));
    let driver = Box::pin(background::drive(&state, host, observer, children.clone()));
    let outcome = async {
        tokio::select! {
            biased;
            outcome = session => outcome,
            never = driver => match never {},
        }
    }
    .instrument(span)
    .await;
    children.cancel();
    outcome
}

async fn run(
    params: SessionParams,
    provider: &dyn Provider,
    tools: &ToolRegistry,
    host: &dyn SessionHost,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
    state: &SessionState,
) -> SessionOutcome {
    let SessionParams {
        agent,
        model,
        prompt,
        max_steps,
        mut history,
        workspace,
        inherited_permission,
        from_checkpoint,
        workspace_facts,
        instructions,
        compaction,
        budget,
        prompt_caching,
        priority,
        hooks: hook_context,
        fork,
    } = params;
    let permissions = Permissions::new(&agent.permission, &inherited_permission);
    let max_steps = max_steps.max(1);
    let (steps_taken, interrupted, prompt) = if from_checkpoint {
        let steps = history.steps_since_last_user_message();
        (steps, history.take_interrupted_step(), String::new())
    } else {
        (0, None, prompt)
    };

    // The model is offered only these; `Turn` executes only these, whatever it calls.
    let (offered, tool_defs): (Vec<&dyn Tool>, Vec<_>) =
        tools.offered_to(&agent, permissions, host).unzip();
    let offers_task = offered.iter().any(|tool| tool.name() == TASK_TOOL);
    // A forked child sends its parent's tools, so that its requests share the
    // parent's prefix; it still runs only its own.
    let request_tools = fork
        .as_ref()
        .map_or_else(|| tool_defs.clone(), |f| f.tools.clone());
    let tools_bytes = compaction::tools_bytes(&request_tools);
    let source = if from_checkpoint || !history.messages.is_empty() {
        "resume"
    } else {
        "startup"
    };
    if let Some(fork) = &fork
        && history.messages.is_empty()
        && !from_checkpoint
    {
        let names: Vec<&str> = offered.iter().map(|tool| tool.name()).collect();
        history = fork.child_history(
            &history.session_id,
            agent.name.as_str(),
            &agent.prompt,
            &names,
        );
    }

    let ctx = ToolContext {
        workspace,
        cancel: cancel.child_token(),
        host,
        observer,
        state,
        call_id: String::new(),
        permissions,
    };
    let session_id = history.session_id.clone();
    let hooks = SessionHooks {
        hooks: &agent.hooks,
        context: &hook_context,
        session_id: &session_id,
        agent: agent.name.as_str(),
    };

    let mut messages = Vec::with_capacity(history.messages.len() * 2 + 2);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let facts = workspace_facts.unwrap_or_else(|| WorkspaceFacts::of(ctx.workspace.root()));
    let mut system = match &fork {
        Some(fork) => fork.system.clone(),
        None => crate::system_prompt::build(&agent, &ctx.workspace, facts, &instructions, &today),
    };
    let mut start_context = None;
    if hooks.any(HookEvent::SessionStart, source) {
        let mut fields = serde_json::Map::new();
        fields.insert("source".into(), source.into());
        let verdict = hooks
            .run(HookEvent::SessionStart, source, fields, "", &ctx)
            .await;
        if !verdict.context.is_empty() {
            let context = format!("{SESSION_START_CONTEXT}\n{}", verdict.context.join("\n\n"));
            if fork.is_some() {
                // The parent's system prompt stays as it was sent: the context comes
                // after the conversation.
                start_context = Some(context);
            } else {
                system.push_str("\n\n");
                system.push_str(&context);
            }
        }
    }
    messages.push(Message::system(system));
    messages.extend(history.to_messages());
    if let Some(context) = start_context {
        messages.push(Message::user(context));
    }
    // An empty prompt continues from the history as it is (after a subtask, whose
    // synthetic user message is already there).
    let prompt = (!prompt.trim().is_empty()).then_some(prompt);
    if let Some(prompt) = &prompt {
        messages.push(Message::user(prompt.clone()));
    }
    // The transcript lives in the request and grows in place: no copy per step.
    let mut request = ChatRequest {
        model,
        messages,
        tools: Vec::new(),
        temperature: agent.temperature,
        top_p: agent.top_p,
        max_tokens: None,
        cache_key: prompt_caching.then(|| match &fork {
            Some(fork) if !fork.cache_key.is_empty() => fork.cache_key.clone(),
            _ => history.session_id.clone(),
        }),
        reasoning_effort: agent.reasoning_effort.clone(),
        thinking_budget: agent.thinking_budget,
        priority,
    };

    state.set_todos(history.todos());
    let mut record = history;
    if let Some(prompt) = prompt {
        record.messages.push(TranscriptMessage::user(prompt));
    }
    let turn = Turn {
        agent: &agent,
        permissions,
        offered: &offered,
        registry: tools,
        ctx: &ctx,
        hooks: &hooks,
    };
    let mut totals = Run {
        usage: Usage::default(),
        steps: 0,
        text: String::new(),
        tool_calls: Vec::new(),
        record,
        agent: agent.name.to_string(),
    };

    if from_checkpoint {
        // The interrupted step's own calls re-attach when they run again below.
        background::reattach(state, &totals.record).await;
    }

    if let Some(step) = interrupted {
        let calls = unfinished_calls(&step);
        let ready = if uses_files(tools, calls.iter().map(|call| call.name.as_str())) {
            workspace_ready(host, &cancel).await
        } else {
            Ok(())
        };
        if let Err(error) = ready {
            // The step stays unfinished in the record: a later run goes on from it.
            totals.record.messages.push(step);
            let status = match error {
                Some(_) => SessionStatus::Error,
                None => SessionStatus::Cancelled,
            };
            return totals.end(status, request.messages, error, state);
        }
        if offers_task && calls.iter().any(forks) {
            // A forked child the interrupted step started (or was about to) gets the
            // conversation it would have got then.
            let cache_key = request
                .cache_key
                .clone()
                .unwrap_or_else(|| totals.record.session_id.clone());
            state.set_fork(crate::fork::Fork::take(
                &request.messages[0].content,
                &request_tools,
                &totals.record,
                agent.name.as_str(),
                &step.parts,
                cache_key,
            ));
        }
        let resumed = resume_step(&turn, step, &cancel).await;
        request.messages.extend(resumed.message.to_messages());
        totals.tool_calls.extend(resumed.summaries);
        totals.record.messages.push(resumed.message);
        if resumed.cancelled {
            return totals.end(SessionStatus::Cancelled, request.messages, None, state);
        }
    }

    let mut estimator = compaction::Estimator::default();
    // A stop hook already made this run go on once.
    let mut stop_hook_active = false;
    // A checkpoint's steps count against the budget; at least the last, tool-less,
    // step is always left.
    for step in steps_taken.saturating_add(1).min(max_steps)..=max_steps {
        if let Some(text) = background::results_message(state, host).await {
            request.messages.push(Message::user(text.clone()));
            totals
                .record
                .messages
                .push(TranscriptMessage::synthetic_user(text));
        }
        let mut spent = totals.usage;
        spent += state.child_usage();
        if let Some(message) = budget.exceeded(spent) {
            tracing::info!(step, reason = %message, "budget spent, ending the session");
            let error = SessionError {
                message,
                retryable: false,
            };
            return totals.end(
                SessionStatus::BudgetExceeded,
                request.messages,
                Some(error),
                state,
            );
        }
        let mut bytes = compaction::request_bytes(&request.messages, tools_bytes);
        if let Some(policy) = &compaction {
            let compacted = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                compacted = compact(policy, &estimator, bytes, false, provider, &request.model, request.priority, &mut totals, (&hooks, &ctx)) => Some(compacted),
            };
            match compacted {
                None => {
                    return totals.end(SessionStatus::Cancelled, request.messages, None, state);
                }
                Some(Err(err)) => {
                    tracing::warn!(step, retryable = err.retryable(), error = %err, "compaction failed");
                    let mut error = SessionError::from(&err);
                    error.message = format!("failed to compact the session: {}", error.message);
                    return totals.end(SessionStatus::Error, request.messages, Some(error), state);
                }
                Some(Ok(None)) => {}
                Some(Ok(Some(event))) => {
                    // The request goes on from the summary: the old turns are not sent.
                    request.messages.truncate(1);
                    request.messages.extend(totals.record.to_messages());
                    estimator.reset();
                    bytes = compaction::request_bytes(&request.messages, tools_bytes);
                    observer.on_event(event);
                }
            }
        }
        totals.steps += 1;
        observer.on_event(SessionEvent::StepStarted { step });
        let last = step == max_steps;
        // An agent without tools answers in one step anyway; the instruction to stop
        // calling tools would only confuse it.
        let instruct = last && !tool_defs.is_empty();
        if instruct {
            request.tools.clear();
            request.messages.push(Message::user(MAX_STEPS_PROMPT));
        } else if request.tools.is_empty() {
            request.tools.clone_from(&request_tools);
        }

        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            response = chat(provider, &request, observer) => Some(response),
        };
        // A provider that finds the request too long for the model's window: compact
        // (whatever the estimate said) and send the step's request once more.
        let response = match response {
            Some(Err(err)) if err.context_overflow() => {
                tracing::info!(step, error = %err, "the request overflowed the model's context, compacting and retrying once");
                let compacted = match &compaction {
                    Some(policy) => tokio::select! {
                        biased;
                        () = cancel.cancelled() => None,
                        compacted = compact(policy, &estimator, bytes, true, provider, &request.model, request.priority, &mut totals, (&hooks, &ctx)) => Some(compacted),
                    },
                    None => Some(Ok(None)),
                };
                match compacted {
                    None => None,
                    Some(Ok(Some(event))) => {
                        request.messages.truncate(1);
                        request.messages.extend(totals.record.to_messages());
                        if instruct {
                            request.messages.push(Message::user(MAX_STEPS_PROMPT));
                        }
                        estimator.reset();
                        bytes = compaction::request_bytes(&request.messages, tools_bytes);
                        observer.on_event(event);
                        tokio::select! {
                            biased;
                            () = cancel.cancelled() => None,
                            response = chat(provider, &request, observer) => Some(response),
                        }
                    }
                    Some(Ok(None)) => {
                        tracing::warn!(
                            step,
                            "the request overflowed the model's context and there is nothing to compact"
                        );
                        Some(Err(err))
                    }
                    Some(Err(compaction_err)) => {
                        tracing::warn!(step, error = %compaction_err, "compaction after a context overflow failed");
                        Some(Err(err))
                    }
                }
            }
            other => other,
        };
        if instruct {
            // The instruction is for this call only; the transcript stays a plain
            // conversation that can be resumed with a fresh budget.
            request.messages.pop();
        }
        let response = match response {
            None => return totals.end(SessionStatus::Cancelled, request.messages, None, state),
            Some(Err(err)) => {
                tracing::warn!(step, retryable = err.retryable(), error = %err, "model call failed");
                let error = SessionError::from(&err);
                return totals.end(SessionStatus::Error, request.messages, Some(error), state);
            }
            Some(Ok(response)) => response,
        };
        totals.usage += response.usage;
        estimator.reported(response.usage, bytes);
        observer.on_event(SessionEvent::StepFinished {
            step,
            usage: response.usage,
        });
        let ChatResponse {
            text,
            tool_calls,
            usage,
            reasoning,
            ..
        } = response;
        if !text.is_empty() {
            totals.text.clone_from(&text);
        }
        // The model's thinking is kept with its turn: the provider wants it back while
        // the turn's tool calls are answered, and a resumed session sends it too.
        let mut parts: Vec<Part> = reasoning
            .iter()
            .map(|r| Part::Reasoning {
                reasoning: r.clone(),
            })
            .collect();
        if !text.is_empty() {
            parts.push(Part::text(text.clone()));
        }
        let assistant = |text: String, calls| Message {
            reasoning: reasoning.clone(),
            ..Message::assistant(text, calls)
        };

        if !last && tool_calls.is_empty() && state.background.has_undelivered() {
            // An answer while background children run: it is not the last word. The
            // session waits for them and goes on with their results.
            tracing::info!(
                step,
                "answered while background tasks run, waiting for them"
            );
            parts.push(Part::StepFinish { usage });
            totals.record_assistant(parts);
            request.messages.push(assistant(text, Vec::new()));
            let waited = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                () = state.background.wait(None) => Some(()),
            };
            if waited.is_none() {
                return totals.end(SessionStatus::Cancelled, request.messages, None, state);
            }
            continue;
        }

        if last || tool_defs.is_empty() || tool_calls.is_empty() {
            // No tools were offered, or none called: this is the answer. Calls made
            // without tools on offer are dropped, not executed, and left out of the
            // transcript so that every recorded call has a result.
            if !tool_calls.is_empty() {
                tracing::debug!(
                    step,
                    calls = tool_calls.len(),
                    "ignoring tool calls made when no tools were offered"
                );
            }
            let status = if instruct {
                SessionStatus::MaxSteps
            } else {
                // The answer is this turn's text, even if empty, not an earlier
                // preamble.
                totals.text.clone_from(&text);
                SessionStatus::Completed
            };
            let stop = hooks.stop_event();
            if status == SessionStatus::Completed && hooks.any(stop, agent.name.as_str()) {
                let mut fields = serde_json::Map::new();
                fields.insert("stop_hook_active".into(), stop_hook_active.into());
                fields.insert("last_assistant_message".into(), text.clone().into());
                let verdict = hooks.run(stop, agent.name.as_str(), fields, "", &ctx).await;
                // Once per run, and only with a step left to go on with.
                if let Some((hook, reason)) = verdict.blocked
                    && !stop_hook_active
                    && !last
                {
                    tracing::info!(step, %hook, "a stop hook asked the session to go on");
                    stop_hook_active = true;
                    parts.push(Part::StepFinish { usage });
                    totals.record_assistant(parts);
                    request.messages.push(assistant(text, Vec::new()));
                    let feedback = format!("{STOP_FEEDBACK}\n{reason}");
                    request.messages.push(Message::user(feedback.clone()));
                    totals
                        .record
                        .messages
                        .push(TranscriptMessage::synthetic_user(feedback));
                    continue;
                }
            }
            parts.push(Part::StepFinish { usage });
            totals.record_assistant(parts);
            request.messages.push(assistant(text, Vec::new()));
            return totals.end(status, request.messages, None, state);
        }

        if offers_task && tool_calls.iter().any(|call| call.name == TASK_TOOL) {
            // Children are about to start: a later attempt must find them again.
            let mut pending = parts.clone();
            pending.extend(tool_calls.iter().map(Part::pending_call));
            pending.push(Part::StepFinish { usage });
            totals.record_assistant(pending);
            let saved = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                saved = host.checkpoint(&totals.record) => Some(saved),
            };
            totals.record.messages.pop();
            match saved {
                None => {
                    return totals.end(SessionStatus::Cancelled, request.messages, None, state);
                }
                Some(Err(reason)) => {
                    tracing::warn!(step, error = %reason, "failed to save a checkpoint before starting child tasks");
                    let error = SessionError {
                        message: format!(
                            "failed to save the session before starting child tasks: {reason}"
                        ),
                        retryable: true,
                    };
                    return totals.end(SessionStatus::Error, request.messages, Some(error), state);
                }
                Some(Ok(())) => {}
            }
        }

        if offers_task && tool_calls.iter().any(forks) {
            let cache_key = request
                .cache_key
                .clone()
                .unwrap_or_else(|| totals.record.session_id.clone());
            state.set_fork(crate::fork::Fork::take(
                &request.messages[0].content,
                &request_tools,
                &totals.record,
                agent.name.as_str(),
                &parts,
                cache_key,
            ));
        }
        let ready = if uses_files(tools, tool_calls.iter().map(|call| call.name.as_str())) {
            workspace_ready(host, &cancel).await
        } else {
            Ok(())
        };
        match ready {
            Ok(()) => {}
            Err(None) => {
                return totals.end(SessionStatus::Cancelled, request.messages, None, state);
            }
            Err(Some(error)) => {
                tracing::warn!(step, error = %error.message, "the session's files could not be made ready");
                return totals.end(SessionStatus::Error, request.messages, Some(error), state);
            }
        }
        let results = turn.run(&tool_calls, &cancel).await;
        request.messages.push(assistant(text, tool_calls));
        request.messages.extend(results.messages);
        totals.tool_calls.extend(results.summaries);
        parts.extend(results.parts);
        parts.push(Part::StepFinish { usage });
        totals.record_assistant(parts);
        if results.cancelled {
            return totals.end(SessionStatus::Cancelled, request.messages, None, state);
        }
    }
    unreachable!("the last step always returns")
}

/// Put before what `SessionStart` hooks add to the system prompt.
const SESSION_START_CONTEXT: &str = "Context from the session's start hooks:";

/// Summarises the older turns when the next request (`bytes` long) would pass the
/// policy's limit, or whatever the estimate says when `force` (the provider found the
/// request too long), and there is something to summarise: records the compaction and
/// returns the event that reports it. `Ok(None)` when no compaction was needed.
#[allow(clippy::too_many_arguments)]
async fn compact(
    policy: &CompactionPolicy,
    estimator: &compaction::Estimator,
    bytes: usize,
    force: bool,
    provider: &dyn Provider,
    model: &str,
    priority: u8,
    totals: &mut Run,
    hooks: (&SessionHooks<'_>, &ToolContext<'_>),
) -> Result<Option<SessionEvent>, LlmError> {
    let tokens_before = estimator.estimate(bytes);
    if !force && tokens_before <= policy.limit() {
        return Ok(None);
    }
    summarise_older_turns(
        policy,
        tokens_before,
        provider,
        model,
        priority,
        totals,
        hooks,
    )
    .await
}

/// Summarises the turns before the last one (from the last compaction on), when there
/// are any, and records the compaction.
async fn summarise_older_turns(
    policy: &CompactionPolicy,
    tokens_before: u64,
    provider: &dyn Provider,
    model: &str,
    priority: u8,
    totals: &mut Run,
    (hooks, ctx): (&SessionHooks<'_>, &ToolContext<'_>),
) -> Result<Option<SessionEvent>, LlmError> {
    let limit = policy.limit();
    let Some(end) = compaction::split_point(&totals.record) else {
        tracing::debug!(
            tokens_before,
            limit,
            "over the compaction limit with nothing to summarise"
        );
        return Ok(None);
    };
    tracing::info!(
        tokens_before,
        limit,
        window = policy.context_window,
        "compacting the session"
    );
    if hooks.any(HookEvent::PreCompact, "auto") {
        let mut fields = serde_json::Map::new();
        fields.insert("trigger".into(), "auto".into());
        fields.insert("custom_instructions".into(), "".into());
        // Told, not asked: a compaction goes ahead whatever the hooks answer.
        hooks
            .run(HookEvent::PreCompact, "auto", fields, "", ctx)
            .await;
    }
    // The agent's own model, else the policy's (a small model), else the session's.
    let model = policy
        .agent
        .model
        .as_deref()
        .or(policy.model.as_deref())
        .unwrap_or(model);
    let summary = compaction::summarise(
        provider,
        &policy.agent,
        model,
        &totals.record,
        end,
        priority,
    )
    .await?;
    if summary.text.trim().is_empty() {
        tracing::warn!(
            tokens_before,
            "compaction returned no summary, going on without it"
        );
        totals.usage += summary.usage;
        return Ok(None);
    }
    let usage = summary.usage;
    totals.usage += usage;
    compaction::record_compaction(&mut totals.record, end, summary, tokens_before);
    let tokens_after =
        compaction::tokens_of(compaction::request_bytes(&totals.record.to_messages(), 0));
    Ok(Some(SessionEvent::Compacted {
        tokens_before,
        tokens_after,
        usage,
    }))
}

/// The calls of an interrupted step that have no result yet.
fn unfinished_calls(step: &TranscriptMessage) -> Vec<taskwire_llm::ToolCall> {
    step.parts
        .iter()
        .filter(|part| part.is_unfinished_call())
        .filter_map(Part::as_call)
        .collect()
}

/// Whether any of the calls named `calls` works on the session's files ([`Tool::uses_files`]);
/// a name no tool has counts as one that does.
fn uses_files<'a>(tools: &ToolRegistry, calls: impl IntoIterator<Item = &'a str>) -> bool {
    calls
        .into_iter()
        .any(|name| tools.get(name).is_none_or(Tool::uses_files))
}

/// Waits for the host to make the session's files ready ([`SessionHost::ensure_workspace`]);
/// `Err(None)` when the session is cancelled first.
async fn workspace_ready(
    host: &dyn SessionHost,
    cancel: &CancellationToken,
) -> Result<(), Option<SessionError>> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(None),
        ready = host.ensure_workspace() => ready.map_err(Some),
    }
}

/// The name of the tool whose calls start child tasks (and so need a checkpoint).
const TASK_TOOL: &str = "task";

/// Whether `call` is a `task` call with `fork: true`.
fn forks(call: &taskwire_llm::ToolCall) -> bool {
    call.name == TASK_TOOL
        && serde_json::from_str::<serde_json::Value>(&call.arguments)
            .is_ok_and(|args| args.get("fork").and_then(serde_json::Value::as_bool) == Some(true))
}

/// An interrupted step, finished.
struct ResumedStep {
    /// The step's assistant message, every call now with a result.
    message: TranscriptMessage,
    summaries: Vec<ToolCallSummary>,
    cancelled: bool,
}

/// Runs the calls of an interrupted step that have no result, with their original
/// ids, and puts their results in place; calls that had finished keep theirs.
async fn resume_step(
    turn: &Turn<'_>,
    step: TranscriptMessage,
    cancel: &CancellationToken,
) -> ResumedStep {
    let calls = unfinished_calls(&step);
    tracing::info!(calls = calls.len(), "resuming an interrupted step");
    let results = turn.run(&calls, cancel).await;
    let mut fresh = results.parts.into_iter();
    let parts = step
        .parts
        .into_iter()
        .map(|part| {
            if part.is_unfinished_call() {
                fresh.next().unwrap_or(part)
            } else {
                part
            }
        })
        .collect();
    ResumedStep {
        message: TranscriptMessage { parts, ..step },
        summaries: results.summaries,
        cancelled: results.cancelled,
    }
}

/// One model call, forwarding streamed text as progress.
async fn chat(
    provider: &dyn Provider,
    request: &ChatRequest,
    observer: &dyn SessionObserver,
) -> Result<ChatResponse, LlmError> {
    let mut on_delta = |delta: StreamDelta| match delta {
        StreamDelta::Text(text) => observer.on_event(SessionEvent::TextDelta { text }),
        StreamDelta::RateLimited { model, wait } => observer.on_event(SessionEvent::RateLimited {
            model,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        }),
        StreamDelta::RateHints(_) => {}
    };
    provider.chat(request, &mut on_delta).await
}

/// Totals gathered while the session runs.
struct Run {
    usage: Usage,
    steps: u32,
    text: String,
    tool_calls: Vec<ToolCallSummary>,
    /// The history plus this run so far.
    record: Transcript,
    agent: String,
}

impl Run {
    fn record_assistant(&mut self, parts: Vec<Part>) {
        self.record
            .messages
            .push(TranscriptMessage::assistant(self.agent.clone(), parts));
    }

    fn end(
        self,
        status: SessionStatus,
        mut messages: Vec<Message>,
        error: Option<SessionError>,
        state: &SessionState,
    ) -> SessionOutcome {
        // The system prompt is rebuilt on resume, from the spec the next run gets.
        messages.remove(0);
        let own_usage = self.usage;
        let mut usage = self.usage;
        usage += state.child_usage();
        tracing::debug!(?status, steps = self.steps, "session ended");
        SessionOutcome {
            status,
            text: self.text,
            usage,
            own_usage,
            steps: self.steps,
            tool_calls: self.tool_calls,
            messages,
            transcript: self.record,
            error,
        }
    }
}
