//! Row types written to and read from the store.

use chrono::{DateTime, Utc};
use prost::Message;
use taskwire_protocol::{
    AgentSpecDigest, Budget, ClaimEpoch, TaskId, TaskRequest, TaskResult, TaskStatus, TraceId,
    Usage, pb,
};

use crate::StoreError;

/// A task to insert, with the outbox message that dispatches it.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub request: TaskRequest,
    /// A digest of what the client asked for, compared on an idempotency-key match.
    pub digest: String,
    /// The task's title from the start (a child's: `DESCRIPTION (@AGENT subagent)`); a
    /// root task's is written by its session's title agent, with its result.
    pub title: Option<String>,
    /// The JetStream subject the relay publishes the request to.
    pub subject: String,
    /// Store and dispatch the request with its agent spec inline, as versions before
    /// specs were stored by digest did (for a rolling upgrade from one), instead of
    /// naming the spec by digest.
    pub inline_agent_spec: bool,
    /// Where to POST the result when the task ends (a result webhook; see
    /// [`crate::webhooks`]); checked by the coordinator before it gets here.
    pub callback_url: Option<String>,
    /// A delayed start: while it is ahead the task is stored `scheduled` and not
    /// dispatched ([`crate::Store::dispatch_due`] queues it when it comes).
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
}

/// A spec bundle's digest and encoding.
pub(crate) type SpecBundle = (AgentSpecDigest, std::sync::Arc<[u8]>);

impl NewTask {
    /// The encoded request as stored and dispatched and, unless the spec is inline,
    /// its spec bundle's digest and encoding, to store once.
    pub(crate) fn encoded(&self) -> (Vec<u8>, Option<SpecBundle>) {
        if self.inline_agent_spec {
            return (pb::TaskRequest::from(&self.request).encode_to_vec(), None);
        }
        let dispatch = self.request.to_dispatch();
        (
            dispatch.wire.encode_to_vec(),
            Some((dispatch.digest, dispatch.bundle)),
        )
    }
}

/// What happened to one submitted task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// A new task was written.
    Created(TaskId),
    /// The idempotency key matched a task with the same request: its id.
    Existing(TaskId),
    /// The idempotency key matched a task with a different request.
    Conflict(TaskId),
}

/// The answer to a worker's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// Run the attempt, fenced by `epoch`; `last_attempt`: no retry may follow it.
    /// `queued_for`: how long the task waited since it was last queued (its submit, a
    /// scheduled retry or a replay); `None` for a redelivery of a running task.
    Granted {
        epoch: ClaimEpoch,
        attempt: u32,
        last_attempt: bool,
        queued_for: Option<std::time::Duration>,
    },
    /// The claim ended the task (its deadline passed, or its attempt budget is spent):
    /// the lifecycle's effects of a claim into this status follow.
    Ended(TaskStatus),
    /// The task was already finished.
    Finished(TaskStatus),
    /// The tenant already runs as many tasks as it may: try again later.
    Busy,
    /// No such task.
    Unknown,
}

/// A result recorded by [`Store::record_results_timed`](crate::Store::record_results_timed).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedResult {
    /// The task's agent.
    pub agent: String,
    /// Time since the task was submitted.
    pub since_submit: std::time::Duration,
    /// Time since the recorded attempt was claimed.
    pub since_claim: Option<std::time::Duration>,
    /// The task's new status (`queued`: a retry) and what follows, by the lifecycle.
    pub transition: crate::Transitioned,
}

/// Filters for listing tasks; all set fields must match.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub tenant: Option<String>,
    pub trace_id: Option<TraceId>,
    pub parent_task_id: Option<TaskId>,
    pub status: Option<TaskStatus>,
    pub agent: Option<String>,
    pub limit: u32,
}

/// A task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub task_id: TaskId,
    pub parent_task_id: Option<TaskId>,
    pub trace_id: TraceId,
    pub tenant: String,
    pub agent: String,
    pub prompt: String,
    pub status: TaskStatus,
    pub attempt: u32,
    pub claim_epoch: ClaimEpoch,
    pub depth: u32,
    pub deadline: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub worker_id: Option<String>,
    pub result: Option<TaskResult>,
    /// The attempt number the task may reach (its budget, counted from the last replay).
    pub max_attempts: u32,
    /// The last attempt's error, if any.
    pub last_error: Option<String>,
    /// The title: a root task's session's, once an attempt's result brought one; a child's,
    /// `DESCRIPTION (@AGENT subagent)` from its submit.
    pub title: Option<String>,
    /// The task's own model calls over all its recorded attempts (descendants
    /// excluded); a subtree's is [`Store::subtree_usage`](crate::Store::subtree_usage).
    pub own_usage: Usage,
    /// The budget in effect for the task's subtree.
    pub budget: Budget,
    /// 1 (highest) to 5 (lowest).
    pub priority: taskwire_protocol::Priority,
    /// Every attempt, oldest first (filled by `get_task` and `list_tasks`; empty only
    /// for a task never claimed).
    pub attempts: Vec<AttemptRecord>,
    /// Its delayed start, if it was submitted with one.
    pub not_before: Option<DateTime<Utc>>,
}

/// One claim of a task and how it ended.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AttemptRecord {
    pub attempt: i32,
    pub claim_epoch: i64,
    pub worker_id: String,
    /// `running`, a final status, `queued` (a retry was scheduled) or `abandoned`
    /// (the worker stopped responding and the task was redelivered).
    pub status: String,
    pub error: Option<String>,
    pub retryable: bool,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// Why a replay was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayOutcome {
    Replayed,
    NotReplayable(TaskStatus),
    Unknown,
}

/// The columns `TaskRecord` is read from, in this order.
pub(crate) const TASK_COLUMNS: &str = "task_id, parent_task_id, trace_id, tenant, agent, prompt, status, \
     attempt, claim_epoch, depth, deadline, created_at, updated_at, finished_at, worker_id, result, \
     max_attempts + attempt_base AS max_attempts, last_error, title, own_input_tokens, \
     own_output_tokens, own_cost_picousd, own_unpriced_tokens, own_cached_input_tokens, \
     own_cache_write_input_tokens, max_tokens, max_cost_picousd, priority, not_before";

#[derive(sqlx::FromRow)]
pub(crate) struct TaskRow {
    task_id: uuid::Uuid,
    parent_task_id: Option<uuid::Uuid>,
    trace_id: String,
    tenant: String,
    agent: String,
    prompt: String,
    status: String,
    attempt: i32,
    claim_epoch: i64,
    depth: i32,
    deadline: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    worker_id: Option<String>,
    result: Option<Vec<u8>>,
    max_attempts: i32,
    last_error: Option<String>,
    title: Option<String>,
    own_input_tokens: i64,
    own_output_tokens: i64,
    own_cost_picousd: i64,
    own_unpriced_tokens: i64,
    own_cached_input_tokens: i64,
    own_cache_write_input_tokens: i64,
    priority: i16,
    max_tokens: Option<i64>,
    max_cost_picousd: Option<i64>,
    not_before: Option<DateTime<Utc>>,
}

impl TryFrom<TaskRow> for TaskRecord {
    type Error = StoreError;

    fn try_from(r: TaskRow) -> Result<Self, StoreError> {
        let corrupt = |column: &'static str, reason: String| StoreError::Corrupt {
            task_id: r.task_id.to_string(),
            column,
            reason,
        };
        let status = r
            .status
            .parse::<TaskStatus>()
            .map_err(|e| corrupt("status", e.to_string()))?;
        let trace_id = r
            .trace_id
            .parse::<TraceId>()
            .map_err(|e| corrupt("trace_id", e))?;
        let result = match &r.result {
            None => None,
            Some(bytes) => {
                let wire = pb::TaskResult::decode(bytes.as_slice())
                    .map_err(|e| corrupt("result", e.to_string()))?;
                Some(TaskResult::try_from(wire).map_err(|e| corrupt("result", e.to_string()))?)
            }
        };
        Ok(Self {
            task_id: TaskId::from_uuid(r.task_id),
            parent_task_id: r.parent_task_id.map(TaskId::from_uuid),
            trace_id,
            tenant: r.tenant,
            agent: r.agent,
            prompt: r.prompt,
            status,
            attempt: u32::try_from(r.attempt).unwrap_or_default(),
            claim_epoch: ClaimEpoch(u64::try_from(r.claim_epoch).unwrap_or_default()),
            depth: u32::try_from(r.depth).unwrap_or_default(),
            deadline: r.deadline,
            created_at: r.created_at,
            updated_at: r.updated_at,
            finished_at: r.finished_at,
            worker_id: r.worker_id,
            result,
            max_attempts: u32::try_from(r.max_attempts).unwrap_or_default(),
            last_error: r.last_error,
            title: r.title,
            own_usage: {
                let n = |v: i64| u64::try_from(v).unwrap_or_default();
                Usage {
                    input_tokens: n(r.own_input_tokens),
                    output_tokens: n(r.own_output_tokens),
                    cost_picousd: n(r.own_cost_picousd),
                    unpriced_tokens: n(r.own_unpriced_tokens),
                    cached_input_tokens: n(r.own_cached_input_tokens),
                    cache_write_input_tokens: n(r.own_cache_write_input_tokens),
                }
            },
            budget: Budget {
                max_tokens: r.max_tokens.and_then(|v| u64::try_from(v).ok()),
                max_cost_picousd: r.max_cost_picousd.and_then(|v| u64::try_from(v).ok()),
            },
            priority: taskwire_protocol::Priority::from_wire(
                "priority",
                u32::try_from(r.priority).unwrap_or(0),
            )
            .unwrap_or_default(),
            attempts: Vec::new(),
            not_before: r.not_before,
        })
    }
}

/// A message that could not be run.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct DeadLetterRecord {
    pub id: i64,
    pub subject: String,
    pub reason: String,
    pub payload: Vec<u8>,
    pub worker_id: Option<String>,
    pub task_id: Option<uuid::Uuid>,
    pub created_at: DateTime<Utc>,
}
