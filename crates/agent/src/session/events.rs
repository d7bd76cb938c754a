//! What a session reports while it runs ([`SessionEvent`]) and how it ends
//! ([`SessionOutcome`]). The worker maps events to `TaskProgress` and the outcome to
//! `TaskResult`; nothing here knows about the wire.

use serde::{Deserialize, Serialize};
use taskwire_llm::{Message, Usage};

use crate::error::SessionError;
use crate::transcript::Transcript;

/// Receives progress as it happens. Called inline from the session loop, so it must
/// be quick (push to a channel, not publish and wait).
pub trait SessionObserver: Send + Sync {
    fn on_event(&self, event: SessionEvent);
}

/// Any `Fn(SessionEvent)` is an observer, handy for tests and simple callers.
impl<F: Fn(SessionEvent) + Send + Sync> SessionObserver for F {
    fn on_event(&self, event: SessionEvent) {
        self(event)
    }
}

/// Discards events.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl SessionObserver for NoopObserver {
    fn on_event(&self, _event: SessionEvent) {}
}

/// One progress event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent {
    StepStarted {
        step: u32,
    },
    /// `usage` is this step's model call only.
    StepFinished {
        step: u32,
        usage: Usage,
    },
    TextDelta {
        text: String,
    },
    /// A tool call moved to `state`. Every call goes `pending`, then `running` unless
    /// it was refused, then `completed` or `error`.
    ToolCall {
        call_id: String,
        tool: String,
        state: ToolCallState,
        title: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// What the tool reports beside its output: set on `completed`, and on
        /// `running` updates of tools that report while they run (the `task` tool's
        /// child summary, seed 001 step 5).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<serde_json::Value>,
    },
    /// A tool call waits for an answer to an `ask` permission; the host asks. The
    /// call stays `pending` until answered.
    ApprovalRequired {
        request_id: String,
        permission: String,
        patterns: Vec<String>,
    },
    /// The `task` tool (or a command's subtask, the call `call_id`) submitted a child
    /// task (sent once per child, before it runs).
    ChildTask {
        task_id: String,
        agent: String,
        description: String,
        /// The child's session, to continue it with.
        #[serde(default)]
        session_id: String,
        #[serde(default)]
        call_id: String,
    },
    /// A tool call of a child task (or of one of its descendants, `task_id`) changed
    /// state; `call_id` is its id in that task's session.
    ChildToolCall {
        task_id: String,
        #[serde(default)]
        call_id: String,
        tool: String,
        title: String,
        state: ToolCallState,
    },
    /// The older turns were summarised to fit the model's context window: the next
    /// request was estimated at `tokens_before` tokens, the conversation from the
    /// summary on (system prompt and tools left out) at `tokens_after`. `usage` is the
    /// summary call's.
    Compacted {
        tokens_before: u64,
        tokens_after: u64,
        usage: Usage,
    },
    /// The next model call waits `wait_ms` for its slot in the model's rate budget
    /// (the fleet's limit, or a provider's `Retry-After`).
    RateLimited {
        model: String,
        wait_ms: u64,
    },
    /// A hook ran (see [`crate::hooks`]): `event` (`PreToolUse`, ...), `hook` (its
    /// command or URL), where it was declared, what it matched (a tool's name, ...),
    /// the tool call it ran for (else empty), `outcome` (`ok`, `blocked`, `failed`)
    /// and its reason or added context.
    Hook {
        event: String,
        hook: String,
        source: String,
        subject: String,
        #[serde(default)]
        call_id: String,
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        duration_ms: u64,
    },
    /// A descendant task (`task_id`) waits for an approval; this session waits on it.
    ChildApprovalRequired {
        task_id: String,
        request_id: String,
        permission: String,
        patterns: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallState {
    Pending,
    Running,
    Completed,
    Error,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// The model answered without calling tools.
    Completed,
    /// The step limit was reached; `text` is the model's summary. Resumable.
    MaxSteps,
    /// The task tree spent its budget (`max_tokens` or `max_cost_usd`) before a model
    /// call; `error` names the limit and `text` is the last thing said. Resumable.
    BudgetExceeded,
    Cancelled,
    /// The model call failed; see [`SessionOutcome::error`].
    Error,
}

/// One tool call of the session, for the result's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallSummary {
    pub call_id: String,
    pub tool: String,
    pub title: String,
    pub ok: bool,
}

/// The end of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOutcome {
    pub status: SessionStatus,
    /// The final answer for `completed`; otherwise the last non-empty assistant text
    /// (the summary for `max_steps`, whatever was said last for `cancelled` and
    /// `error`).
    pub text: String,
    /// Summed over all model calls of this run, plus the usage of its child tasks.
    pub usage: Usage,
    /// Summed over this run's own model calls only (children excluded).
    #[serde(default)]
    pub own_usage: Usage,
    /// Model calls started in this run.
    pub steps: u32,
    pub tool_calls: Vec<ToolCallSummary>,
    /// The conversation to resume from: the given history plus this run's user prompt,
    /// assistant turns and tool results. The system prompt is not included (it is
    /// rebuilt from the agent spec on every run) and neither is the step-limit
    /// instruction. Always well-formed: every tool call has a result. The same
    /// conversation as `transcript.to_messages()`.
    pub messages: Vec<Message>,
    /// The session record to persist and resume from: the given history plus this
    /// run, with tool states, titles and step usage.
    pub transcript: Transcript,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SessionError>,
}

impl SessionOutcome {
    /// An outcome for a session that could not start (bad spec, no workspace): no
    /// steps, the history unchanged.
    pub fn failed(history: Transcript, error: SessionError) -> Self {
        Self {
            status: SessionStatus::Error,
            text: String::new(),
            usage: Usage::default(),
            own_usage: Usage::default(),
            steps: 0,
            tool_calls: Vec::new(),
            messages: history.to_messages(),
            transcript: history,
            error: Some(error),
        }
    }
}
