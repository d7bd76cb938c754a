//! The agent loop: ask the model, run the tools it calls, feed the results back, until
//! it answers in plain text or the step limit is reached (OpenCode's `SessionPrompt`
//! loop).
//!
//! - [`events`]: progress events, the observer trait, statuses and the outcome.
//! - `tool_calls`: permission checks and concurrent execution of one turn's calls.
//!
//! The loop owns no IO of its own: the model is a [`Provider`], files are reached only
//! through the [`ToolRegistry`] tools confined to a [`Workspace`], and progress leaves
//! through a [`SessionObserver`]. That keeps it testable with a scripted provider and
//! lets the worker decide where events and transcripts go.

pub mod events;
mod tool_calls;

use taskwire_llm::{ChatRequest, ChatResponse, LlmError, Message, Provider, StreamDelta, Usage};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use self::events::{
    NoopObserver, SessionEvent, SessionObserver, SessionOutcome, SessionStatus, ToolCallState,
    ToolCallSummary,
};
use self::tool_calls::Turn;
use crate::agent::AgentSpec;
use crate::error::SessionError;
use crate::tools::{Tool, ToolContext, ToolRegistry};
use crate::workspace::Workspace;

/// Sent with the last allowed step, which offers no tools, so that a session cut off
/// by its limit still ends with a useful, resumable summary.
const MAX_STEPS_PROMPT: &str = include_str!("prompt/max_steps.txt");

/// Everything one session run needs besides its collaborators.
#[derive(Debug, Clone)]
pub struct SessionParams {
    pub agent: AgentSpec,
    /// The resolved model id (request override → agent → parent → default).
    pub model: String,
    /// This run's user prompt.
    pub prompt: String,
    /// The effective step limit, already `min(request, agent)`. 0 is read as 1: even a
    /// zero budget gets one (tool-less) answer.
    pub max_steps: u32,
    /// A previous run's [`SessionOutcome::messages`] to resume from; empty for a new
    /// session.
    pub history: Vec<Message>,
    pub workspace: Workspace,
}

/// Runs one session to its end. Never fails: every ending, including a failed model
/// call, is a [`SessionOutcome`].
pub async fn run_session(
    params: SessionParams,
    provider: &dyn Provider,
    tools: &ToolRegistry,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> SessionOutcome {
    let span =
        tracing::info_span!("session", agent.name = %params.agent.name, model = %params.model);
    run(params, provider, tools, observer, cancel)
        .instrument(span)
        .await
}

async fn run(
    params: SessionParams,
    provider: &dyn Provider,
    tools: &ToolRegistry,
    observer: &dyn SessionObserver,
    cancel: CancellationToken,
) -> SessionOutcome {
    let SessionParams {
        agent,
        model,
        prompt,
        max_steps,
        history,
        workspace,
    } = params;
    let max_steps = max_steps.max(1);

    // The model is offered only these; `Turn` executes only these, whatever it calls.
    let offered: Vec<&dyn Tool> = tools.available_to(&agent).collect();
    let tool_defs: Vec<_> = offered.iter().map(|tool| tool.definition()).collect();

    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(Message::system(system_prompt(&agent, &workspace)));
    messages.extend(history);
    messages.push(Message::user(prompt));
    // The transcript lives in the request and grows in place: no copy per step.
    let mut request = ChatRequest {
        model,
        messages,
        tools: Vec::new(),
        temperature: agent.temperature,
        top_p: agent.top_p,
        max_tokens: None,
    };

    let ctx = ToolContext {
        workspace,
        cancel: cancel.child_token(),
    };
    let turn = Turn {
        agent: &agent,
        offered: &offered,
        registry: tools,
        ctx: &ctx,
        observer,
    };
    let mut totals = Run {
        usage: Usage::default(),
        steps: 0,
        text: String::new(),
        tool_calls: Vec::new(),
    };

    for step in 1..=max_steps {
        totals.steps = step;
        observer.on_event(SessionEvent::StepStarted { step });
        let last = step == max_steps;
        if last {
            request.tools.clear();
            request.messages.push(Message::user(MAX_STEPS_PROMPT));
        } else if request.tools.is_empty() {
            request.tools.clone_from(&tool_defs);
        }

        let response = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            response = chat(provider, &request, observer) => Some(response),
        };
        if last {
            // The instruction is for this call only; the transcript stays a plain
            // conversation that can be resumed with a fresh budget.
            request.messages.pop();
        }
        let response = match response {
            None => return totals.end(SessionStatus::Cancelled, request.messages, None),
            Some(Err(err)) => {
                tracing::warn!(step, retryable = err.retryable(), error = %err, "model call failed");
                let error = SessionError::from(&err);
                return totals.end(SessionStatus::Error, request.messages, Some(error));
            }
            Some(Ok(response)) => response,
        };
        totals.usage += response.usage;
        observer.on_event(SessionEvent::StepFinished {
            step,
            usage: response.usage,
        });
        let ChatResponse {
            text, tool_calls, ..
        } = response;
        if !text.is_empty() {
            totals.text.clone_from(&text);
        }

        if last {
            // No tools were offered; calls made anyway are dropped, not executed, and
            // left out of the transcript so that every recorded call has a result.
            if !tool_calls.is_empty() {
                tracing::debug!(
                    step,
                    calls = tool_calls.len(),
                    "ignoring tool calls on the last step"
                );
            }
            request.messages.push(Message::assistant(text, Vec::new()));
            return totals.end(SessionStatus::MaxSteps, request.messages, None);
        }
        if tool_calls.is_empty() {
            // The answer is this turn's text, even if empty, not an earlier preamble.
            totals.text.clone_from(&text);
            request.messages.push(Message::assistant(text, Vec::new()));
            return totals.end(SessionStatus::Completed, request.messages, None);
        }

        let results = turn.run(&tool_calls, &cancel).await;
        request.messages.push(Message::assistant(text, tool_calls));
        request.messages.extend(results.messages);
        totals.tool_calls.extend(results.summaries);
        if results.cancelled {
            return totals.end(SessionStatus::Cancelled, request.messages, None);
        }
    }
    unreachable!("the last step always returns")
}

/// One model call, forwarding streamed text as progress.
async fn chat(
    provider: &dyn Provider,
    request: &ChatRequest,
    observer: &dyn SessionObserver,
) -> Result<ChatResponse, LlmError> {
    let mut on_delta = |delta: StreamDelta| match delta {
        StreamDelta::Text(text) => observer.on_event(SessionEvent::TextDelta { text }),
    };
    provider.chat(request, &mut on_delta).await
}

/// The agent's prompt plus what it needs to know about where it runs.
fn system_prompt(agent: &AgentSpec, workspace: &Workspace) -> String {
    format!(
        "{}\n\n<env>\nworkspace root: {}\nTool paths are relative to the workspace root; \
         paths outside it are refused.\n</env>",
        agent.prompt.trim_end(),
        workspace.root().display()
    )
}

/// Totals gathered while the session runs.
struct Run {
    usage: Usage,
    steps: u32,
    text: String,
    tool_calls: Vec<ToolCallSummary>,
}

impl Run {
    fn end(
        self,
        status: SessionStatus,
        mut transcript: Vec<Message>,
        error: Option<SessionError>,
    ) -> SessionOutcome {
        // The system prompt is rebuilt on resume, from the spec the next run gets.
        transcript.remove(0);
        tracing::debug!(?status, steps = self.steps, "session ended");
        SessionOutcome {
            status,
            text: self.text,
            usage: self.usage,
            steps: self.steps,
            tool_calls: self.tool_calls,
            messages: transcript,
            error,
        }
    }
}
