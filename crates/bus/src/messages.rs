//! The domain values that worker requests, their replies and the notices carry, and
//! their wire (`taskwire.v1`) forms. Only this file and [`crate::codec`] see prost
//! structs; the coordinator and the worker see these types.
//! Replies are encoded in [`crate::replies`].

use taskwire_protocol::{
    AgentSpecDigest, ClaimEpoch, ProtocolError, SessionId, TaskId, TaskResult, TaskStatus,
    WorkerId, pb,
};

use crate::codec::Envelope;
use crate::consumer::Incoming;
use crate::error::CodecError;

/// A worker asks to run a task it pulled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub task: TaskId,
    pub worker: WorkerId,
    /// JetStream's delivery count of the message.
    pub delivery: u64,
}

/// The claims one worker had waiting at once, sent as one request. The coordinator
/// reads each claim on its own (a malformed one is refused alone) and answers each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimBatch(pub Vec<ClaimRequest>);

/// The claim that lets a worker run one attempt, fenced by its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub epoch: ClaimEpoch,
    pub attempt: u32,
    /// No retry may follow this attempt.
    pub last_attempt: bool,
}

/// The coordinator's answer to a claim. A task that does not exist is an error
/// (`NOT_FOUND`), not a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimVerdict {
    /// Run it.
    Granted(Claim),
    /// Already finished (completed, cancelled, over its deadline): drop the message.
    Finished { reason: String },
    /// The tenant runs as many tasks as it may: offer it again later.
    Busy { reason: String },
}

/// A running task starts a child (the `task` tool).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSubmit {
    pub parent: TaskId,
    /// The parent's current claim: a request from a stale attempt is refused.
    pub parent_epoch: ClaimEpoch,
    /// The parent session's model, for a child whose request and agent name none.
    pub parent_model: Option<String>,
    /// The child, as a gRPC `Submit` would ask for it (the coordinator validates both
    /// the same way).
    pub request: pb::SubmitRequest,
    /// W3C trace context of the parent's `task` tool call, under which the child's
    /// spans hang; empty when traces are not exported.
    pub traceparent: String,
    /// `task` with `fork: true`: the parent's conversation, for the child to start from.
    pub fork: Option<pb::ForkContext>,
}

/// The child a submit made, or found (the same call asked again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSubmitted {
    pub task: TaskId,
    pub session: String,
    pub created: bool,
}

/// A task as a worker sees it: its status and, once finished, what it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskState {
    pub task: TaskId,
    pub status: TaskStatus,
    /// Its recorded result, with as much as a parent uses (text, errors, usage, patch,
    /// session): a patch too large for the reply is an object in the patch bucket
    /// (`patch_ref`). An earlier coordinator's reply names no trace; the task's id
    /// stands in for its `trace_id`.
    pub result: Option<TaskResult>,
}

/// A saved session transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The transcript as JSON.
    pub transcript_json: Vec<u8>,
    /// The task whose attempt saved it last: a task finds its own checkpoint by it.
    pub saved_by: TaskId,
}

/// Save a session's transcript, fenced by the saving task's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSave {
    pub session: SessionId,
    pub task: TaskId,
    pub epoch: ClaimEpoch,
    pub transcript_json: Vec<u8>,
}

/// A running task asks for approval of a permission its rules say `ask` for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalAsk {
    pub task: TaskId,
    pub epoch: ClaimEpoch,
    pub request_id: String,
    pub permission: String,
    pub patterns: Vec<String>,
    pub title: String,
}

/// How an approval was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Once,
    Always,
    Reject,
}

/// An answered approval, sent to the asking task's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub task: TaskId,
    pub request_id: String,
    pub answer: Answer,
    pub message: Option<String>,
}

/// Stop a running task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CancelNotice {
    pub task: TaskId,
    pub reason: String,
}

/// A task message that can never run, reported by a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub subject: String,
    pub reason: String,
    pub payload: Vec<u8>,
    pub worker_id: String,
    /// The task, when the payload could be read that far.
    pub task: Option<TaskId>,
}

/// A notice about a task that says everything in its subject, `<P>.<kind>.<task>`:
/// that it finished (the payload is empty), or, for a listener that only times
/// progress, that it sent some (the payload is not read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskNotice {
    pub task: TaskId,
}

impl Incoming for TaskNotice {
    fn read(subject: &str, _payload: &[u8]) -> Result<Self, CodecError> {
        let last = subject.rsplit('.').next().unwrap_or_default();
        let task =
            TaskId::parse_field("subject", last).map_err(|e| CodecError::new("task notice", e))?;
        Ok(Self { task })
    }
}

/// The fleet's backlog, by the stage a task waits in, as one coordinator sampled it;
/// shared on `<P>.backlog` so that the other coordinators need not sample it too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Dispatches committed and not yet published.
    pub outbox: u64,
    /// Task messages in the tasks stream: waiting for a worker, or running.
    pub tasks: u64,
    /// Results published by workers and not yet recorded.
    pub results: u64,
}

impl Backlog {
    /// Tasks the fleet is behind on, all stages together.
    pub fn total(&self) -> u64 {
        self.outbox
            .saturating_add(self.tasks)
            .saturating_add(self.results)
    }
}

impl Envelope for Backlog {
    const NAME: &'static str = "backlog sample";
    type Wire = pb::BacklogSample;
    fn to_wire(&self) -> pb::BacklogSample {
        pb::BacklogSample {
            outbox: self.outbox,
            tasks: self.tasks,
            results: self.results,
        }
    }
    fn from_wire(w: pb::BacklogSample) -> Result<Self, ProtocolError> {
        Ok(Self {
            outbox: w.outbox,
            tasks: w.tasks,
            results: w.results,
        })
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl Envelope for ClaimRequest {
    const NAME: &'static str = "claim request";
    type Wire = pb::ClaimRequest;
    fn to_wire(&self) -> pb::ClaimRequest {
        pb::ClaimRequest {
            task_id: self.task.to_string(),
            worker_id: self.worker.to_string(),
            delivery: self.delivery,
        }
    }
    fn from_wire(w: pb::ClaimRequest) -> Result<Self, ProtocolError> {
        if w.worker_id.is_empty() {
            return Err(ProtocolError::Missing("worker_id"));
        }
        Ok(Self {
            task: TaskId::parse_field("task_id", &w.task_id)?,
            worker: WorkerId::new(w.worker_id),
            delivery: w.delivery,
        })
    }
}

impl Envelope for ClaimBatch {
    const NAME: &'static str = "claim batch";
    type Wire = pb::ClaimBatch;
    fn to_wire(&self) -> pb::ClaimBatch {
        pb::ClaimBatch {
            claims: self.0.iter().map(Envelope::to_wire).collect(),
        }
    }
    fn from_wire(w: pb::ClaimBatch) -> Result<Self, ProtocolError> {
        w.claims
            .into_iter()
            .map(ClaimRequest::from_wire)
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

impl Envelope for ChildSubmit {
    const NAME: &'static str = "child submit";
    type Wire = pb::ChildSubmit;
    fn to_wire(&self) -> pb::ChildSubmit {
        pb::ChildSubmit {
            parent_task_id: self.parent.to_string(),
            parent_claim_epoch: self.parent_epoch.0,
            request: Some(self.request.clone()),
            parent_model: self.parent_model.clone().unwrap_or_default(),
            traceparent: self.traceparent.clone(),
            fork: self.fork.clone(),
        }
    }
    fn from_wire(w: pb::ChildSubmit) -> Result<Self, ProtocolError> {
        Ok(Self {
            parent: TaskId::parse_field("parent_task_id", &w.parent_task_id)?,
            parent_epoch: ClaimEpoch(w.parent_claim_epoch),
            parent_model: non_empty(w.parent_model),
            request: w.request.ok_or(ProtocolError::Missing("request"))?,
            traceparent: w.traceparent,
            fork: w.fork,
        })
    }
}

/// A task lookup: `task`, asked by `asking` (only its tenant's tasks are found).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLookup {
    pub task: TaskId,
    pub asking: TaskId,
}

impl Envelope for TaskLookup {
    const NAME: &'static str = "task lookup";
    type Wire = pb::TaskLookup;
    fn to_wire(&self) -> pb::TaskLookup {
        pb::TaskLookup {
            task_id: self.task.to_string(),
            asking_task_id: self.asking.to_string(),
        }
    }
    fn from_wire(w: pb::TaskLookup) -> Result<Self, ProtocolError> {
        Ok(Self {
            task: TaskId::parse_field("task_id", &w.task_id)?,
            asking: TaskId::parse_field("asking_task_id", &w.asking_task_id)?,
        })
    }
}

/// An agent spec lookup: the spec a dispatched request names by `digest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSpecLookup {
    pub digest: AgentSpecDigest,
}

impl Envelope for AgentSpecLookup {
    const NAME: &'static str = "agent spec lookup";
    type Wire = pb::AgentSpecLookup;
    fn to_wire(&self) -> pb::AgentSpecLookup {
        pb::AgentSpecLookup {
            digest: self.digest.as_bytes().to_vec(),
        }
    }
    fn from_wire(w: pb::AgentSpecLookup) -> Result<Self, ProtocolError> {
        Ok(Self {
            digest: AgentSpecDigest::parse_field("digest", &w.digest)?,
        })
    }
}

/// A session load: `session`, for the task `task` that runs in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLoad {
    pub session: SessionId,
    pub task: TaskId,
}

impl Envelope for SessionLoad {
    const NAME: &'static str = "session load";
    type Wire = pb::SessionLoad;
    fn to_wire(&self) -> pb::SessionLoad {
        pb::SessionLoad {
            session_id: self.session.to_string(),
            task_id: self.task.to_string(),
        }
    }
    fn from_wire(w: pb::SessionLoad) -> Result<Self, ProtocolError> {
        Ok(Self {
            session: SessionId::parse_field("session_id", &w.session_id)?,
            task: TaskId::parse_field("task_id", &w.task_id)?,
        })
    }
}

impl Envelope for SessionSave {
    const NAME: &'static str = "session save";
    type Wire = pb::SessionSave;
    fn to_wire(&self) -> pb::SessionSave {
        pb::SessionSave {
            session_id: self.session.to_string(),
            task_id: self.task.to_string(),
            claim_epoch: self.epoch.0,
            transcript_json: self.transcript_json.clone(),
        }
    }
    fn from_wire(w: pb::SessionSave) -> Result<Self, ProtocolError> {
        Ok(Self {
            session: SessionId::parse_field("session_id", &w.session_id)?,
            task: TaskId::parse_field("task_id", &w.task_id)?,
            epoch: ClaimEpoch(w.claim_epoch),
            transcript_json: w.transcript_json,
        })
    }
}

/// The three approval requests share one subject; the flags tell them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalRequest {
    Ask(ApprovalAsk),
    Check { task: TaskId, request_id: String },
    TimedOut { task: TaskId, request_id: String },
}

impl Envelope for ApprovalRequest {
    const NAME: &'static str = "approval request";
    type Wire = pb::ApprovalAsk;
    fn to_wire(&self) -> pb::ApprovalAsk {
        match self {
            Self::Ask(a) => pb::ApprovalAsk {
                task_id: a.task.to_string(),
                claim_epoch: a.epoch.0,
                request_id: a.request_id.clone(),
                permission: a.permission.clone(),
                patterns: a.patterns.clone(),
                title: a.title.clone(),
                timed_out: false,
                check: false,
            },
            Self::Check { task, request_id } => pb::ApprovalAsk {
                task_id: task.to_string(),
                request_id: request_id.clone(),
                check: true,
                ..Default::default()
            },
            Self::TimedOut { task, request_id } => pb::ApprovalAsk {
                task_id: task.to_string(),
                request_id: request_id.clone(),
                timed_out: true,
                ..Default::default()
            },
        }
    }
    fn from_wire(w: pb::ApprovalAsk) -> Result<Self, ProtocolError> {
        let task = TaskId::parse_field("task_id", &w.task_id)?;
        if w.request_id.is_empty() {
            return Err(ProtocolError::Missing("request_id"));
        }
        let request_id = w.request_id;
        Ok(if w.check {
            Self::Check { task, request_id }
        } else if w.timed_out {
            Self::TimedOut { task, request_id }
        } else {
            Self::Ask(ApprovalAsk {
                task,
                epoch: ClaimEpoch(w.claim_epoch),
                request_id,
                permission: w.permission,
                patterns: w.patterns,
                title: w.title,
            })
        })
    }
}

impl Envelope for ApprovalDecision {
    const NAME: &'static str = "approval decision";
    type Wire = pb::ApprovalDecision;
    fn to_wire(&self) -> pb::ApprovalDecision {
        let answer = match self.answer {
            Answer::Once => pb::ApprovalAnswer::Once,
            Answer::Always => pb::ApprovalAnswer::Always,
            Answer::Reject => pb::ApprovalAnswer::Reject,
        };
        pb::ApprovalDecision {
            task_id: self.task.to_string(),
            request_id: self.request_id.clone(),
            answer: answer as i32,
            message: self.message.clone().unwrap_or_default(),
        }
    }
    fn from_wire(w: pb::ApprovalDecision) -> Result<Self, ProtocolError> {
        let answer = match pb::ApprovalAnswer::try_from(w.answer) {
            Ok(pb::ApprovalAnswer::Once) => Answer::Once,
            Ok(pb::ApprovalAnswer::Always) => Answer::Always,
            Ok(pb::ApprovalAnswer::Reject) => Answer::Reject,
            _ => return Err(ProtocolError::UnknownEnum("answer")),
        };
        Ok(Self {
            task: TaskId::parse_field("task_id", &w.task_id)?,
            request_id: w.request_id,
            answer,
            message: non_empty(w.message),
        })
    }
}

impl Envelope for CancelNotice {
    const NAME: &'static str = "cancel notice";
    type Wire = pb::CancelNotice;
    fn to_wire(&self) -> pb::CancelNotice {
        pb::CancelNotice {
            task_id: self.task.to_string(),
            reason: self.reason.clone(),
        }
    }
    fn from_wire(w: pb::CancelNotice) -> Result<Self, ProtocolError> {
        Ok(Self {
            task: TaskId::parse_field("task_id", &w.task_id)?,
            reason: w.reason,
        })
    }
}

impl Envelope for DeadLetter {
    const NAME: &'static str = "dead letter";
    type Wire = pb::DeadLetter;
    fn to_wire(&self) -> pb::DeadLetter {
        pb::DeadLetter {
            subject: self.subject.clone(),
            reason: self.reason.clone(),
            payload: self.payload.clone(),
            worker_id: self.worker_id.clone(),
            task_id: self.task.map(|t| t.to_string()).unwrap_or_default(),
        }
    }
    /// Lenient: a dead letter is recorded whatever it says about its task.
    fn from_wire(w: pb::DeadLetter) -> Result<Self, ProtocolError> {
        Ok(Self {
            task: w.task_id.parse().ok(),
            subject: w.subject,
            reason: w.reason,
            payload: w.payload,
            worker_id: w.worker_id,
        })
    }
}
