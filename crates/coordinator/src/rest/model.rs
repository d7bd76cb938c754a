//! The HTTP API's JSON: request bodies, and the API's messages as JSON, each a type
//! whose schema the OpenAPI document derives from it (`utoipa::ToSchema`).
//!
//! Written by hand rather than derived from the proto: the generated prost types carry
//! no serde, and JSON callers want lowercase names (`completed`, `tool_call`) and
//! RFC 3339 times rather than the wire's enums and timestamps. Field names are the
//! proto's.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::{TaskStatus, pb};
use utoipa::ToSchema;

/// A wire status as the lowercase name the CLI and the store use (`completed`).
pub fn status(value: i32) -> &'static str {
    TaskStatus::from_wire("status", value).map_or("unknown", TaskStatus::as_str)
}

/// A wire timestamp as RFC 3339.
pub fn time(t: Option<&prost_types::Timestamp>) -> Option<String> {
    t.and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .map(|t| t.to_rfc3339())
}

/// Model calls' tokens and cost.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// US dollars; null when none of the calls had a price.
    pub cost_usd: Option<f64>,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub unpriced_tokens: u64,
}

impl From<&pb::Usage> for Usage {
    fn from(u: &pb::Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cost_usd: u.cost_usd,
            cached_input_tokens: u.cached_input_tokens,
            cache_write_input_tokens: u.cache_write_input_tokens,
            unpriced_tokens: u.unpriced_tokens,
        }
    }
}

/// An error a task ended with.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskError {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// How a task ended: output, patch, errors and its usage (`own_usage` its own model
/// calls, `usage` its subtree's).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskResult {
    pub task_id: String,
    pub status: String,
    /// The final answer's text.
    pub text: String,
    /// The answer as JSON when the task had an output schema.
    pub structured: Option<Value>,
    /// A `git diff --binary` of what the task changed; empty when nothing.
    pub patch: String,
    pub errors: Vec<TaskError>,
    pub own_usage: Usage,
    pub usage: Usage,
    pub latency_ms: u64,
    pub steps: u32,
    pub session_id: String,
    pub worker: String,
}

impl From<&pb::TaskResult> for TaskResult {
    fn from(r: &pb::TaskResult) -> Self {
        let spent = TaskUsage::of_result(r);
        Self {
            task_id: r.task_id.clone(),
            status: status(r.status).to_owned(),
            text: r
                .output
                .as_ref()
                .map(|o| o.text.clone())
                .unwrap_or_default(),
            structured: r
                .output
                .as_ref()
                .and_then(|o| o.structured.as_ref())
                .map(taskwire_protocol::value::struct_to_json),
            patch: r.patch.clone(),
            errors: r
                .errors
                .iter()
                .map(|e| TaskError {
                    code: e.code.clone(),
                    message: e.message.clone(),
                    retryable: e.retryable,
                })
                .collect(),
            own_usage: Usage::from(&spent.own),
            usage: Usage::from(&spent.subtree),
            latency_ms: r.metrics.as_ref().map_or(0, |m| m.latency_ms),
            steps: r.metrics.as_ref().map_or(0, |m| m.steps),
            session_id: r.session_id.clone(),
            worker: r.worker_id.clone(),
        }
    }
}

/// One delivery attempt of a result webhook.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookDelivery {
    pub attempt: u32,
    pub started_at: Option<String>,
    /// The receiver's HTTP status; 0 when none came back.
    pub status_code: u32,
    pub error: String,
    pub duration_ms: u32,
}

/// A task's result webhook.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Webhook {
    pub url: String,
    /// `waiting` (the task runs), `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: u32,
    pub next_attempt_at: Option<String>,
    pub delivered_at: Option<String>,
    pub deliveries: Vec<WebhookDelivery>,
}

impl From<&pb::Webhook> for Webhook {
    fn from(w: &pb::Webhook) -> Self {
        let state = taskwire_protocol::status::webhook_state_name(w.state);
        Self {
            url: w.url.clone(),
            state: state.to_owned(),
            attempts: w.attempts,
            next_attempt_at: time(w.next_attempt_at.as_ref()),
            delivered_at: time(w.delivered_at.as_ref()),
            deliveries: w
                .deliveries
                .iter()
                .map(|d| WebhookDelivery {
                    attempt: d.attempt,
                    started_at: time(d.started_at.as_ref()),
                    status_code: d.status_code,
                    error: d.error.clone(),
                    duration_ms: d.duration_ms,
                })
                .collect(),
        }
    }
}

/// A task as `Get` answers it: state, usage (`usage` its own, `subtree` with its
/// descendants'), and its result once finished.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Task {
    pub task_id: String,
    pub parent_task_id: String,
    pub trace_id: String,
    pub tenant: String,
    pub agent: String,
    pub prompt: String,
    pub title: String,
    /// `queued`, `running`, `awaiting_approval`, `completed`, `failed`, ...
    pub status: String,
    /// 1 (highest) to 5 (lowest).
    pub priority: u32,
    /// What a running task waits for besides its model and tools
    /// (`awaiting_rate_limit`); empty otherwise.
    pub wait: String,
    pub wait_until: Option<String>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub depth: u32,
    /// The worker of the latest attempt; empty while queued.
    pub worker: String,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    pub deadline: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    pub usage: Usage,
    pub subtree: Usage,
    pub max_cost_usd: Option<f64>,
    pub max_tokens: Option<u64>,
    /// Its delayed start, if it has one (`scheduled` until then).
    pub not_before: Option<String>,
    pub result: Option<TaskResult>,
    pub webhook: Option<Webhook>,
}

impl From<&pb::Task> for Task {
    fn from(t: &pb::Task) -> Self {
        let spent = TaskUsage::of_task(t);
        Self {
            task_id: t.task_id.clone(),
            parent_task_id: t.parent_task_id.clone(),
            trace_id: t.trace_id.clone(),
            tenant: t.tenant.clone(),
            agent: t.agent.clone(),
            prompt: t.prompt.clone(),
            title: t.title.clone(),
            status: status(t.status).to_owned(),
            priority: t.priority,
            wait: t.wait.clone(),
            wait_until: time(t.wait_until.as_ref()),
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            depth: t.depth,
            worker: t
                .attempts
                .last()
                .map(|a| a.worker_id.clone())
                .unwrap_or_default(),
            created_at: time(t.created_at.as_ref()),
            updated_at: time(t.updated_at.as_ref()),
            deadline: time(t.deadline.as_ref()),
            started_at: time(t.attempts.first().and_then(|a| a.started_at.as_ref())),
            finished_at: time(t.attempts.last().and_then(|a| a.finished_at.as_ref())),
            usage: Usage::from(&spent.own),
            subtree: Usage::from(&spent.subtree),
            max_cost_usd: t.max_cost_usd,
            max_tokens: t.max_tokens,
            not_before: time(t.not_before.as_ref()),
            result: t.result.as_ref().map(TaskResult::from),
            webhook: t.webhook.as_ref().map(Webhook::from),
        }
    }
}

/// A page of tasks, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskList {
    pub tasks: Vec<Task>,
}

/// `POST /v1/tasks`: a task to submit. Every field but `agent` and `prompt` is optional;
/// unknown fields are refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    /// The agent to run (see `GET /v1/agents`).
    #[schema(pattern = "^[a-z0-9_-]{1,64}$", example = "general")]
    pub agent: String,
    #[schema(example = "Where does the relay publish task requests?")]
    pub prompt: String,
    /// Structured input, handed to the agent with the prompt.
    #[serde(default)]
    pub input: Option<serde_json::Map<String, Value>>,
    /// A repeated key answers the existing task (`created: false`).
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// RFC 3339; the task ends `deadline_exceeded` when it passes.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
    /// A budget for the task's whole subtree, in US dollars.
    #[serde(default)]
    #[schema(minimum = 0.0)]
    pub max_cost_usd: Option<f64>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// A JSON Schema the final answer must satisfy (an object, or its JSON text).
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Make the task a child of this one (its id; empty: none).
    #[serde(default)]
    #[schema(pattern = "^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?$")]
    pub parent_task_id: Option<String>,
    /// Continue this session (a result's `session_id`; empty: a new one).
    #[serde(default)]
    #[schema(pattern = "^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?$")]
    pub resume_token: Option<String>,
    /// 1 (highest) to 5 (lowest); 0 or none: the default 3, or a child's parent's.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 5)]
    pub priority: Option<u32>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Join an existing trace (32 lowercase hex digits; empty: a new one).
    #[serde(default)]
    #[schema(pattern = "^([0-9a-f]{32})?$")]
    pub trace_id: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
    #[serde(default)]
    pub sender: Option<String>,
    #[serde(default)]
    pub intent: Option<String>,
    #[serde(default)]
    pub auth_scope: Option<Vec<String>>,
    /// `{type: "git", uri, id}` names the repository and the revision to work in.
    #[serde(default)]
    pub context_refs: Option<Vec<ContextRef>>,
    /// A `git diff --binary` the workspace starts from.
    #[serde(default)]
    pub workspace_patch: Option<String>,
    /// Where to POST the result when the task ends (a signed result webhook).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// A delayed start (RFC 3339): the task waits `scheduled` until then (root tasks only).
    #[serde(default)]
    #[schema(format = DateTime)]
    pub not_before: Option<String>,
}

/// `POST /v1/commands/{name}`'s body: the command's arguments and options. Unknown
/// fields are refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandBody {
    /// The text after the command's name (`$ARGUMENTS`, `$1`..`$9`).
    #[serde(default)]
    pub arguments: Option<String>,
    #[serde(default)]
    pub tenant: Option<String>,
    /// Run it as a child of this task (its id; empty: none).
    #[serde(default)]
    #[schema(pattern = "^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?$")]
    pub parent_task_id: Option<String>,
    /// Continue this session (prompt mode; empty: a new one).
    #[serde(default)]
    #[schema(pattern = "^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?$")]
    pub session_id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    #[schema(format = DateTime)]
    pub deadline: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// A JSON Schema the final answer must satisfy (an object, or its JSON text).
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// Something the task draws on.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRef {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub uri: String,
}

/// `POST /v1/tasks`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    pub task_id: String,
    pub trace_id: String,
    /// False when an idempotency key matched an existing task.
    pub created: bool,
    pub session_id: String,
}

impl From<pb::SubmitResponse> for Submitted {
    fn from(r: pb::SubmitResponse) -> Self {
        Self {
            task_id: r.task_id,
            trace_id: r.trace_id,
            created: r.created,
            session_id: r.session_id,
        }
    }
}

/// `POST /v1/tasks/{id}/approvals/{request_id}`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalBody {
    pub answer: ApprovalAnswer,
    #[serde(default)]
    pub message: Option<String>,
}

/// How an approval is answered.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Allow this call.
    Once,
    /// Allow this and matching calls for the rest of the session.
    Always,
    /// Refuse; `message` goes back to the model.
    Reject,
}

/// `POST /v1/tasks/{id}/cancel`'s optional body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    #[serde(default)]
    pub reason: Option<String>,
}

/// A task's status after a cancel or an approval.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusReply {
    pub status: String,
}

/// An agent tasks can be sent to.
#[derive(Debug, Serialize, ToSchema)]
pub struct Agent {
    pub name: String,
    pub description: String,
    /// `primary`, `subagent` or `all`.
    pub mode: String,
    pub hidden: bool,
    pub model: Option<String>,
    pub max_steps: u32,
}

impl From<&pb::AgentSpec> for Agent {
    fn from(a: &pb::AgentSpec) -> Self {
        let mode = match pb::AgentMode::try_from(a.mode) {
            Ok(pb::AgentMode::Primary) => "primary",
            Ok(pb::AgentMode::Subagent) => "subagent",
            Ok(pb::AgentMode::All) => "all",
            _ => "unknown",
        };
        Self {
            name: a.name.clone(),
            description: a.description.clone(),
            mode: mode.to_owned(),
            hidden: a.hidden,
            model: a.model.clone(),
            max_steps: a.max_steps,
        }
    }
}

/// The agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<Agent>,
}

/// A finished task's session transcript (null when none was kept).
#[derive(Debug, Serialize, ToSchema)]
pub struct Transcript {
    pub transcript: Option<Value>,
}

/// What a client needs to know before calling.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServerInfo {
    /// Whether requests need `Authorization: Bearer <token>`.
    pub auth: bool,
    pub version: String,
}

/// An error: the gRPC code's name (`NOT_FOUND`, `INVALID_ARGUMENT`, ...) and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub code: String,
    pub error: String,
}

/// What happened in a running task; `kind` names it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProgressEvent {
    StepStarted {
        step: u32,
    },
    StepFinished {
        step: u32,
        usage: Usage,
    },
    ToolCall {
        call_id: String,
        tool: String,
        /// `pending`, `running`, `completed` or `error`.
        state: String,
        title: String,
        error: String,
        /// The child task of a `task` call.
        task_id: String,
    },
    /// A piece of the answer's text.
    Text {
        text: String,
    },
    ChildTask {
        task_id: String,
        agent: String,
        description: String,
        call_id: String,
    },
    /// A tool call waits for an answer (`POST /v1/tasks/{task_id}/approvals/{request_id}`);
    /// `task_id` is the task that asks (a descendant's asks reach its ancestors too).
    ApprovalRequired {
        request_id: String,
        permission: String,
        patterns: Vec<String>,
        task_id: String,
    },
    Compaction {
        tokens_before: u64,
        tokens_after: u64,
    },
    RateLimitWait {
        model: String,
        wait_ms: u64,
    },
    /// A hook ran: `outcome` is `ok`, `blocked` or `failed`, `message` its reason or
    /// the context it added.
    Hook {
        event: String,
        hook: String,
        source: String,
        subject: String,
        call_id: String,
        outcome: String,
        message: String,
        duration_ms: u64,
    },
    Heartbeat,
}

/// One progress event of a task's attempt.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Progress {
    pub task_id: String,
    pub attempt: u32,
    pub seq: u64,
    /// The task's status as of this event.
    pub status: String,
    pub at: Option<String>,
    pub event: ProgressEvent,
}

impl From<&pb::TaskProgress> for Progress {
    fn from(p: &pb::TaskProgress) -> Self {
        use pb::task_progress::Event as E;
        let event = match &p.event {
            Some(E::StepStarted(s)) => ProgressEvent::StepStarted { step: s.step },
            Some(E::StepFinished(s)) => ProgressEvent::StepFinished {
                step: s.step,
                usage: Usage::from(&s.usage.unwrap_or_default()),
            },
            Some(E::ToolCall(c)) => ProgressEvent::ToolCall {
                call_id: c.call_id.clone(),
                tool: c.tool.clone(),
                state: tool_state(c.state).to_owned(),
                title: c.title.clone(),
                error: c.error.clone(),
                task_id: c.task_id.clone(),
            },
            Some(E::TextDelta(t)) => ProgressEvent::Text {
                text: t.text.clone(),
            },
            Some(E::ChildTask(c)) => ProgressEvent::ChildTask {
                task_id: c.task_id.clone(),
                agent: c.agent.clone(),
                description: c.description.clone(),
                call_id: c.call_id.clone(),
            },
            Some(E::ApprovalRequired(a)) => ProgressEvent::ApprovalRequired {
                request_id: a.request_id.clone(),
                permission: a.permission.clone(),
                patterns: a.patterns.clone(),
                task_id: if a.task_id.is_empty() {
                    p.task_id.clone()
                } else {
                    a.task_id.clone()
                },
            },
            Some(E::Compaction(c)) => ProgressEvent::Compaction {
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
            },
            Some(E::RateLimitWait(w)) => ProgressEvent::RateLimitWait {
                model: w.model.clone(),
                wait_ms: w.wait_ms,
            },
            Some(E::Hook(h)) => ProgressEvent::Hook {
                event: h.event.clone(),
                hook: h.hook.clone(),
                source: h.source.clone(),
                subject: h.subject.clone(),
                call_id: h.call_id.clone(),
                outcome: h.outcome.clone(),
                message: h.message.clone(),
                duration_ms: h.duration_ms,
            },
            Some(E::Heartbeat(_)) | None => ProgressEvent::Heartbeat,
        };
        Self {
            task_id: p.task_id.clone(),
            attempt: p.attempt,
            seq: p.seq,
            status: status(p.status).to_owned(),
            at: time(p.at.as_ref()),
            event,
        }
    }
}

fn tool_state(value: i32) -> &'static str {
    match pb::ToolCallState::try_from(value) {
        Ok(pb::ToolCallState::Pending) => "pending",
        Ok(pb::ToolCallState::Running) => "running",
        Ok(pb::ToolCallState::Completed) => "completed",
        Ok(pb::ToolCallState::Error) => "error",
        _ => "unknown",
    }
}

/// One server-sent event of `GET /v1/tasks/{id}/events` (each event's `data` is one of
/// these as JSON); `type` names it. The feed ends after `end`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TreeEvent {
    /// A progress event of the task or a descendant.
    Progress(Progress),
    /// A task of the tree ended.
    Result { task_id: String, result: TaskResult },
    /// Following one task of the tree failed.
    Error { task_id: String, error: String },
    /// Every task of the tree ended.
    End,
}

/// One server-sent event of `GET /v1/events`: a task of the caller's changed status.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StatusChange {
    pub task_id: String,
    pub status: String,
}

/// What a schedule does at a tick while its previous run is still going.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleOverlap {
    /// Start anyway.
    Allow,
    /// Do not start this tick (the default).
    #[default]
    Skip,
    /// Cancel the previous run, then start.
    CancelPrevious,
    /// Start this tick when the previous run ends; at most one waits.
    QueueOne,
}

impl From<ScheduleOverlap> for pb::ScheduleOverlap {
    fn from(o: ScheduleOverlap) -> Self {
        match o {
            ScheduleOverlap::Allow => pb::ScheduleOverlap::Allow,
            ScheduleOverlap::Skip => pb::ScheduleOverlap::Skip,
            ScheduleOverlap::CancelPrevious => pb::ScheduleOverlap::CancelPrevious,
            ScheduleOverlap::QueueOne => pb::ScheduleOverlap::QueueOne,
        }
    }
}

impl ScheduleOverlap {
    /// A wire value (unspecified: the default, `skip`).
    pub fn from_wire(value: i32) -> Self {
        match pb::ScheduleOverlap::try_from(value) {
            Ok(pb::ScheduleOverlap::Allow) => Self::Allow,
            Ok(pb::ScheduleOverlap::CancelPrevious) => Self::CancelPrevious,
            Ok(pb::ScheduleOverlap::QueueOne) => Self::QueueOne,
            _ => Self::Skip,
        }
    }
}

/// What a schedule does with ticks missed while no coordinator ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleCatchUp {
    /// Missed ticks never run (the default).
    #[default]
    Skip,
    /// The latest missed tick runs once.
    One,
    /// Every missed tick within `catch_up_window` runs, oldest first.
    All,
}

impl From<ScheduleCatchUp> for pb::ScheduleCatchUp {
    fn from(c: ScheduleCatchUp) -> Self {
        match c {
            ScheduleCatchUp::Skip => pb::ScheduleCatchUp::Skip,
            ScheduleCatchUp::One => pb::ScheduleCatchUp::One,
            ScheduleCatchUp::All => pb::ScheduleCatchUp::All,
        }
    }
}

impl ScheduleCatchUp {
    /// A wire value (unspecified: the default, `skip`).
    pub fn from_wire(value: i32) -> Self {
        match pb::ScheduleCatchUp::try_from(value) {
            Ok(pb::ScheduleCatchUp::One) => Self::One,
            Ok(pb::ScheduleCatchUp::All) => Self::All,
            _ => Self::Skip,
        }
    }
}

/// `POST /v1/schedules` and `PUT /v1/schedules/{name}`: a schedule's spec. One of `cron`
/// and `every` is required; durations are written as `15m`, `1h 30m`, `2days`. Unknown
/// fields are refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpecBody {
    /// Unique within the tenant: letters, digits, `-`, `_` and `.`, at most 128.
    /// Required by `POST`; a `PUT` may leave it out (empty) for the path's, and
    /// another one is refused.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._-]{0,128}$", example = "nightly-report")]
    pub name: String,
    /// A cron expression: 5 fields (minute granularity) or 6 (seconds first), or an
    /// alias such as `@hourly`.
    #[serde(default)]
    #[schema(example = "0 3 * * *")]
    pub cron: Option<String>,
    /// An interval (`15m`), at least one second: ticks at multiples of it since the
    /// Unix epoch.
    #[serde(default)]
    pub every: Option<String>,
    /// An IANA time zone the cron expression is read in; none: UTC.
    #[serde(default)]
    #[schema(example = "Europe/Berlin")]
    pub time_zone: Option<String>,
    /// At a tick while the previous run still goes; none: `skip`.
    #[serde(default)]
    pub overlap: Option<ScheduleOverlap>,
    /// Ticks missed while no coordinator ran; none: `skip`.
    #[serde(default)]
    pub catch_up: Option<ScheduleCatchUp>,
    /// With `catch_up: all`, how far back a missed tick still runs; none: one hour.
    #[serde(default)]
    #[schema(example = "1h")]
    pub catch_up_window: Option<String>,
    /// Each task's deadline is its tick plus this (at least 1s); none: no deadline.
    #[serde(default)]
    #[schema(example = "30m")]
    pub task_timeout: Option<String>,
    /// Create it paused.
    #[serde(default)]
    pub paused: Option<bool>,
    /// The tenant the schedule and its tasks belong to; none: the caller's.
    #[serde(default)]
    pub tenant: Option<String>,
    /// What each tick submits, as `POST /v1/tasks` takes it, except `deadline` (use
    /// `task_timeout`), `not_before`, `idempotency_key`, `parent_task_id`,
    /// `resume_token` and `trace_id`, which a schedule refuses.
    pub task: SubmitBody,
}

/// The task a schedule submits at each tick, as stored.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScheduleTask {
    pub agent: String,
    pub prompt: String,
    pub input: Option<serde_json::Map<String, Value>>,
    pub model: Option<String>,
    pub max_steps: Option<u32>,
    pub max_attempts: Option<u32>,
    pub max_cost_usd: Option<f64>,
    pub max_tokens: Option<u64>,
    /// 1 (highest) to 5 (lowest); 0: the default 3.
    pub priority: u32,
    /// The JSON Schema the final answer must satisfy; null when none.
    pub output_schema: Option<Value>,
    pub tenant: String,
    pub sender: String,
    pub intent: String,
    pub auth_scope: Vec<String>,
    pub context_refs: Vec<ContextRef>,
    pub workspace_patch: String,
    pub callback_url: String,
}

impl From<&pb::SubmitRequest> for ScheduleTask {
    fn from(t: &pb::SubmitRequest) -> Self {
        let input = t
            .input
            .as_ref()
            .map(taskwire_protocol::value::struct_to_json)
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            });
        let output_schema = (!t.output_schema.is_empty()).then(|| {
            serde_json::from_str(&t.output_schema)
                .unwrap_or_else(|_| Value::String(t.output_schema.clone()))
        });
        Self {
            agent: t.agent.clone(),
            prompt: t.prompt.clone(),
            input,
            model: t.model.clone(),
            max_steps: t.max_steps,
            max_attempts: t.max_attempts,
            max_cost_usd: t.max_cost_usd,
            max_tokens: t.max_tokens,
            priority: t.priority,
            output_schema,
            tenant: t.tenant.clone(),
            sender: t.sender.clone(),
            intent: t.intent.clone(),
            auth_scope: t.auth_scope.clone(),
            context_refs: t
                .context_refs
                .iter()
                .map(|c| ContextRef {
                    kind: c.r#type.clone(),
                    id: c.id.clone(),
                    uri: c.uri.clone(),
                })
                .collect(),
            workspace_patch: t.workspace_patch.clone(),
            callback_url: t.callback_url.clone(),
        }
    }
}

/// What happened at one tick of a schedule.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ScheduleRun {
    /// The tick (RFC 3339); a trigger's is when it was triggered.
    pub tick: Option<String>,
    /// `started` (a task was submitted), `skipped_overlap` (the previous run still
    /// went), `queued` (waits for the previous run), `triggered` (by
    /// `POST /v1/schedules/{name}/trigger`) or `refused` (the submit was refused:
    /// `reason`).
    #[schema(example = "started")]
    pub outcome: String,
    /// The task submitted; null when none.
    pub task_id: Option<String>,
    /// That task's status now, as the tasks API names it; null when no task.
    pub status: Option<String>,
    /// When the tick was acted on.
    pub fired_at: Option<String>,
    pub reason: String,
}

impl From<&pb::ScheduleRun> for ScheduleRun {
    fn from(r: &pb::ScheduleRun) -> Self {
        let outcome = match pb::ScheduleRunOutcome::try_from(r.outcome) {
            Ok(pb::ScheduleRunOutcome::Started) => "started",
            Ok(pb::ScheduleRunOutcome::SkippedOverlap) => "skipped_overlap",
            Ok(pb::ScheduleRunOutcome::Queued) => "queued",
            Ok(pb::ScheduleRunOutcome::Triggered) => "triggered",
            Ok(pb::ScheduleRunOutcome::Refused) => "refused",
            _ => "unknown",
        };
        Self {
            tick: time(r.tick.as_ref()),
            outcome: outcome.to_owned(),
            task_id: (!r.task_id.is_empty()).then(|| r.task_id.clone()),
            status: (r.status != pb::TaskStatus::Unspecified as i32)
                .then(|| status(r.status).to_owned()),
            fired_at: time(r.fired_at.as_ref()),
            reason: r.reason.clone(),
        }
    }
}

/// A wire duration as humantime writes it (`15m`, `1h 30m`).
pub fn duration(d: Option<&prost_types::Duration>) -> Option<String> {
    d.and_then(|d| std::time::Duration::try_from(*d).ok())
        .map(|d| humantime::format_duration(d).to_string())
}

/// A schedule: its spec (`name` … `task`), its cadence in words, its next fire times
/// (none while paused), its most recent runs (newest first: 20 from
/// `GET /v1/schedules/{name}`, 3 per schedule from the list) and its counters.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Schedule {
    pub schedule_id: String,
    pub name: String,
    /// The cron expression; null for an interval schedule.
    pub cron: Option<String>,
    /// The interval (`15m`); null for a cron schedule.
    pub every: Option<String>,
    /// The IANA time zone cron ticks are read in (`UTC` when none was given).
    pub time_zone: String,
    pub overlap: ScheduleOverlap,
    pub catch_up: ScheduleCatchUp,
    pub catch_up_window: Option<String>,
    /// Each task's deadline after its tick; null: none.
    pub task_timeout: Option<String>,
    pub paused: bool,
    pub tenant: String,
    /// What each tick submits.
    pub task: ScheduleTask,
    /// The cadence in words (`every 15m`, `At 03:00 (Europe/Berlin)`).
    pub description: String,
    /// The next fire times (RFC 3339, up to 5); none while paused.
    pub next_fires: Vec<String>,
    pub recent_runs: Vec<ScheduleRun>,
    /// Tasks started by ticks and triggers.
    pub fires: u64,
    /// Ticks not started because the previous run still went.
    pub skipped_overlap: u64,
    /// Ticks dropped by the catch-up policy.
    pub skipped_missed: u64,
    /// A tick waiting for the previous run to end (`queue_one`).
    pub queued_tick: Option<String>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl From<&pb::Schedule> for Schedule {
    fn from(s: &pb::Schedule) -> Self {
        let spec = s.spec.clone().unwrap_or_default();
        let (cron, every) = match &spec.cadence {
            Some(pb::schedule_spec::Cadence::Cron(c)) => (Some(c.clone()), None),
            Some(pb::schedule_spec::Cadence::Every(d)) => (None, duration(Some(d))),
            None => (None, None),
        };
        Self {
            schedule_id: s.schedule_id.clone(),
            name: spec.name,
            cron,
            every,
            time_zone: spec.time_zone,
            overlap: ScheduleOverlap::from_wire(spec.overlap),
            catch_up: ScheduleCatchUp::from_wire(spec.catch_up),
            catch_up_window: duration(spec.catch_up_window.as_ref()),
            task_timeout: duration(spec.task_timeout.as_ref()),
            paused: spec.paused,
            tenant: spec.tenant,
            task: ScheduleTask::from(&spec.task.unwrap_or_default()),
            description: s.description.clone(),
            next_fires: s.next_fires.iter().filter_map(|t| time(Some(t))).collect(),
            recent_runs: s.recent_runs.iter().map(ScheduleRun::from).collect(),
            fires: s.fires,
            skipped_overlap: s.skipped_overlap,
            skipped_missed: s.skipped_missed,
            queued_tick: time(s.queued_tick.as_ref()),
            created_at: time(s.created_at.as_ref()),
            updated_at: time(s.updated_at.as_ref()),
        }
    }
}

/// The schedules, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleList {
    pub schedules: Vec<Schedule>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_lowercase_names_and_unknown_values_say_so() {
        assert_eq!(status(pb::TaskStatus::Completed as i32), "completed");
        assert_eq!(
            status(pb::TaskStatus::AwaitingApproval as i32),
            "awaiting_approval"
        );
        assert_eq!(status(999), "unknown");
    }

    #[test]
    fn a_task_shows_its_own_and_subtree_usage_on_itself_and_its_result() {
        let usage = |tokens| {
            Some(pb::Usage {
                input_tokens: tokens,
                ..Default::default()
            })
        };
        let t = pb::Task {
            usage: usage(330),
            subtree_usage: usage(770),
            result: Some(pb::TaskResult {
                own_usage: usage(330),
                usage: usage(770),
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = serde_json::to_value(Task::from(&t)).expect("json");
        assert_eq!(v["usage"]["input_tokens"], 330);
        assert_eq!(v["subtree"]["input_tokens"], 770);
        assert_eq!(v["result"]["own_usage"], v["usage"]);
        assert_eq!(v["result"]["usage"], v["subtree"]);
    }

    #[test]
    fn a_descendants_approval_names_the_asking_task() {
        let p = pb::TaskProgress {
            task_id: "root".into(),
            event: Some(pb::task_progress::Event::ApprovalRequired(
                pb::ApprovalRequired {
                    request_id: "r1".into(),
                    task_id: "child".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        let v = serde_json::to_value(Progress::from(&p)).expect("json");
        assert_eq!(v["event"]["kind"], "approval_required");
        assert_eq!(v["event"]["task_id"], "child");
        let own = pb::TaskProgress {
            task_id: "root".into(),
            event: Some(pb::task_progress::Event::ApprovalRequired(
                Default::default(),
            )),
            ..Default::default()
        };
        let v = serde_json::to_value(Progress::from(&own)).expect("json");
        assert_eq!(v["event"]["task_id"], "root");
    }

    #[test]
    fn tree_events_are_tagged_by_type() {
        let v = serde_json::to_value(TreeEvent::End).expect("json");
        assert_eq!(v, serde_json::json!({"type": "end"}));
        let p = pb::TaskProgress {
            task_id: "t".into(),
            event: Some(pb::task_progress::Event::TextDelta(pb::TextDelta {
                text: "hi".into(),
            })),
            ..Default::default()
        };
        let v = serde_json::to_value(TreeEvent::Progress(Progress::from(&p))).expect("json");
        assert_eq!(v["type"], "progress");
        assert_eq!(v["task_id"], "t");
        assert_eq!(
            v["event"],
            serde_json::json!({"kind": "text", "text": "hi"})
        );
    }
}

/// One server-sent event of `GET /v1/tasks/{id}/events`: its `data` is a [`TreeEvent`]
/// as JSON (OpenAPI 3.2's reading of an event stream's schema: one event, not its data).
#[derive(Debug, ToSchema)]
pub struct TreeEventSse {
    /// A `TreeEvent` (see the components) as JSON.
    #[schema(content_media_type = "application/json")]
    pub data: String,
}

/// One server-sent event of `GET /v1/events`: its `data` is a [`StatusChange`] as JSON.
#[derive(Debug, ToSchema)]
pub struct StatusChangeSse {
    /// A `StatusChange` (see the components) as JSON.
    #[schema(content_media_type = "application/json")]
    pub data: String,
}
