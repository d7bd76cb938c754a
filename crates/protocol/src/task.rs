//! The domain task request and result, and their conversions from and to the wire.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::patch::PatchRef;
use crate::spec_digest::{AgentSpecBundle, AgentSpecDigest};
use crate::value::{json_to_struct, struct_to_json};
use crate::{
    ClaimEpoch, ProtocolError, SessionId, TaskId, TaskStatus, TraceId, WorkerId, pb, time,
};

/// A reference to context the agent may fetch on demand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRef {
    pub kind: String,
    pub id: String,
    pub uri: String,
}

/// An artifact passed in or produced by a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub name: String,
    pub media_type: String,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
}

/// A validated task request, as dispatched to workers.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    pub task_id: TaskId,
    pub parent_task_id: Option<TaskId>,
    pub trace_id: TraceId,
    pub tenant: String,
    pub sender: String,
    pub agent: String,
    pub intent: String,
    pub prompt: String,
    pub input: Option<Value>,
    pub context_refs: Vec<ContextRef>,
    pub attachments: Vec<Attachment>,
    pub auth_scope: Vec<String>,
    pub idempotency_key: Option<String>,
    pub deadline: Option<DateTime<Utc>>,
    pub resume_token: Option<SessionId>,
    pub model: Option<String>,
    pub max_steps: Option<u32>,
    pub command: Option<String>,
    pub depth: u32,
    pub attempt: u32,
    /// The resolved agent definition (the coordinator's registry decides it), shared:
    /// the tasks of one agent hold one copy.
    pub agent_spec: Arc<pb::AgentSpec>,
    pub created_at: DateTime<Utc>,
    /// Attempts before the task is dead-lettered (at least 1).
    pub max_attempts: u32,
    /// The parent session's model, used when neither the request nor the agent names one.
    pub parent_model: Option<String>,
    /// A slash command's delegation to run before the model is asked anything.
    pub subtask: Option<Subtask>,
    /// Deepest task tree (a task at this depth starts no children).
    pub max_depth: u32,
    /// Agents the `task` tool may start: `(name, description)`; shared, as the spec.
    pub subagents: Arc<[(String, String)]>,
    /// The session is new (no transcript to load).
    pub new_session: bool,
    /// The ancestors' permission rules, nearest first, which bound the session's own
    /// (converted with the agent spec, feature `agent`). Empty for a root task.
    pub inherited_permission: Vec<pb::PermissionLayer>,
    /// Changes the task's workspace starts from (a `git diff --binary` relative to its
    /// source); for a child, its parent's changes so far. Empty for none.
    pub workspace_patch: String,
    /// A JSON Schema (JSON text) the final answer must satisfy; it comes back in the
    /// result's `structured`.
    pub output_schema: Option<String>,
    /// The prompt (or the subtask's) is a rendered command template whose !`cmd` are
    /// run before the session starts.
    pub expand_shell: bool,
    /// W3C trace context of the span that submitted the task; each attempt's span is
    /// its child. Empty when traces are not exported.
    pub traceparent: String,
    /// The same changes when too large to travel inline: an object in the patch
    /// bucket. At most one of `workspace_patch` and this is set.
    pub workspace_patch_ref: Option<PatchRef>,
    /// The subtree's budget (the tree's, narrowed by this task's submit).
    pub budget: crate::Budget,
    /// What the rest of the tree had spent when the task was submitted; counted
    /// against `budget`.
    pub spent_elsewhere: Usage,
    /// 1 (highest) to 5 (lowest).
    pub priority: crate::Priority,
    /// A forked child's start: its parent's conversation so far (shared: retries and
    /// redeliveries hold one copy).
    pub fork: Option<Arc<pb::ForkContext>>,
}

/// A slash command's delegation to a subagent (seed 000's SubtaskPart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtask {
    pub agent: String,
    pub description: String,
    pub prompt: String,
    pub command: String,
}

impl Subtask {
    /// The call id a worker runs a task's subtask under: its child is the one whose
    /// idempotency key is [`child_key`]`(task, SUBTASK_CALL_ID)`.
    pub const CALL_ID: &str = "call_subtask";
}

/// The idempotency key of the child a parent starts for its call `call_id` (a `task`
/// call, or [`Subtask::CALL_ID`]): a later attempt of the parent asking again finds
/// the same child.
pub fn child_key(parent: TaskId, call_id: &str) -> String {
    format!("child:{parent}:{call_id}")
}

impl From<pb::Subtask> for Subtask {
    fn from(s: pb::Subtask) -> Self {
        Self {
            agent: s.agent,
            description: s.description,
            prompt: s.prompt,
            command: s.command,
        }
    }
}

impl From<&Subtask> for pb::Subtask {
    fn from(s: &Subtask) -> Self {
        Self {
            agent: s.agent.clone(),
            description: s.description.clone(),
            prompt: s.prompt.clone(),
            command: s.command.clone(),
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

impl TryFrom<pb::TaskRequest> for TaskRequest {
    type Error = ProtocolError;

    /// A request with its agent spec inline; one that names it by digest is resolved
    /// first ([`TaskRequest::from_dispatched`]).
    fn try_from(mut r: pb::TaskRequest) -> Result<Self, Self::Error> {
        let spec = r
            .agent_spec
            .take()
            .ok_or(ProtocolError::Missing("agent_spec"))?;
        let bundle = AgentSpecBundle {
            spec: Arc::new(spec),
            subagents: std::mem::take(&mut r.subagents)
                .into_iter()
                .map(|a| (a.name, a.description))
                .collect(),
        };
        Self::from_dispatched(r, &bundle)
    }
}

impl TaskRequest {
    /// The request `r` with `bundle`, the agent spec and subagents it names by digest
    /// (an inline spec and subagents in `r` are ignored). The caller has checked that
    /// the bundle is the one the digest names.
    pub fn from_dispatched(
        r: pb::TaskRequest,
        bundle: &AgentSpecBundle,
    ) -> Result<Self, ProtocolError> {
        let agent_spec = bundle.spec.clone();
        if r.agent.is_empty() {
            return Err(ProtocolError::Missing("agent"));
        }
        if r.prompt.is_empty() {
            return Err(ProtocolError::Missing("prompt"));
        }
        let workspace_patch_ref =
            PatchRef::from_wire("workspace_patch_ref", r.workspace_patch_ref)?;
        if workspace_patch_ref.is_some() && !r.workspace_patch.is_empty() {
            return Err(ProtocolError::invalid(
                "workspace_patch_ref",
                "is set together with workspace_patch",
            ));
        }
        if agent_spec.name != r.agent {
            return Err(ProtocolError::invalid(
                "agent_spec",
                "its name differs from `agent`",
            ));
        }
        Ok(Self {
            task_id: TaskId::parse_field("task_id", &r.task_id)?,
            parent_task_id: non_empty(&r.parent_task_id)
                .map(|s| TaskId::parse_field("parent_task_id", &s))
                .transpose()?,
            trace_id: TraceId::parse_field("trace_id", &r.trace_id)?,
            tenant: r.tenant,
            sender: r.sender,
            agent: r.agent,
            intent: r.intent,
            prompt: r.prompt,
            input: r.input.as_ref().map(struct_to_json),
            context_refs: r
                .context_refs
                .into_iter()
                .map(|c| ContextRef {
                    kind: c.r#type,
                    id: c.id,
                    uri: c.uri,
                })
                .collect(),
            attachments: r.attachments.into_iter().map(Attachment::from).collect(),
            auth_scope: r.auth_scope,
            idempotency_key: non_empty(&r.idempotency_key),
            deadline: time::opt_from_wire("deadline", r.deadline.as_ref())?,
            resume_token: non_empty(&r.resume_token)
                .map(|s| SessionId::parse_field("resume_token", &s))
                .transpose()?,
            model: r.model.filter(|m| !m.is_empty()),
            max_steps: r.max_steps,
            command: non_empty(&r.command),
            depth: r.depth,
            attempt: r.attempt,
            agent_spec,
            created_at: time::opt_from_wire("created_at", r.created_at.as_ref())?
                .ok_or(ProtocolError::Missing("created_at"))?,
            max_attempts: r.max_attempts.max(1),
            parent_model: non_empty(&r.parent_model),
            subtask: r.subtask.map(Subtask::from),
            max_depth: r.max_depth,
            subagents: bundle.subagents.clone(),
            new_session: r.new_session,
            inherited_permission: r.inherited_permission,
            workspace_patch: r.workspace_patch,
            output_schema: non_empty(&r.output_schema),
            expand_shell: r.expand_shell,
            traceparent: r.traceparent,
            workspace_patch_ref,
            budget: crate::Budget::from_wire(r.max_cost_usd, r.max_tokens)?,
            spent_elsewhere: r.spent_elsewhere.map(Usage::from).unwrap_or_default(),
            priority: crate::Priority::from_wire("priority", r.priority)?,
            fork: r.fork.map(Arc::new),
        })
    }
}

/// A request as stored and dispatched ([`TaskRequest::to_dispatch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Dispatch {
    /// The request naming its spec bundle by `digest`.
    pub wire: pb::TaskRequest,
    pub digest: AgentSpecDigest,
    /// The encoded bundle, whose SHA-256 is `digest`.
    pub bundle: Arc<[u8]>,
}

impl From<&TaskRequest> for pb::TaskRequest {
    /// The request with its agent spec inline.
    fn from(r: &TaskRequest) -> Self {
        r.wire(None)
    }
}

impl TaskRequest {
    /// Its agent spec and subagents (shared, not copied).
    pub fn spec_bundle(&self) -> AgentSpecBundle {
        AgentSpecBundle {
            spec: self.agent_spec.clone(),
            subagents: self.subagents.clone(),
        }
    }

    /// The request as stored and dispatched: its agent spec and subagents named by
    /// their bundle's digest, with the bundle encoded once, to store under it.
    pub fn to_dispatch(&self) -> Dispatch {
        let (digest, bundle) = self.spec_bundle().encoded();
        Dispatch {
            wire: self.wire(Some(digest)),
            digest,
            bundle,
        }
    }

    /// The wire form, with the spec and subagents inline or, given their digest, named
    /// by it.
    fn wire(&self, digest: Option<AgentSpecDigest>) -> pb::TaskRequest {
        let r = self;
        pb::TaskRequest {
            task_id: r.task_id.to_string(),
            parent_task_id: r.parent_task_id.map(|p| p.to_string()).unwrap_or_default(),
            trace_id: r.trace_id.to_string(),
            tenant: r.tenant.clone(),
            sender: r.sender.clone(),
            agent: r.agent.clone(),
            intent: r.intent.clone(),
            prompt: r.prompt.clone(),
            input: r.input.as_ref().map(json_to_struct),
            context_refs: r
                .context_refs
                .iter()
                .map(|c| pb::ContextRef {
                    r#type: c.kind.clone(),
                    id: c.id.clone(),
                    uri: c.uri.clone(),
                })
                .collect(),
            attachments: r.attachments.iter().map(pb::Attachment::from).collect(),
            auth_scope: r.auth_scope.clone(),
            idempotency_key: r.idempotency_key.clone().unwrap_or_default(),
            deadline: r.deadline.map(time::to_wire),
            resume_token: r.resume_token.map(|s| s.to_string()).unwrap_or_default(),
            model: r.model.clone(),
            max_steps: r.max_steps,
            command: r.command.clone().unwrap_or_default(),
            depth: r.depth,
            attempt: r.attempt,
            agent_spec: digest
                .is_none()
                .then(|| pb::AgentSpec::clone(&r.agent_spec)),
            agent_spec_digest: digest.map(|d| d.as_bytes().to_vec()).unwrap_or_default(),
            created_at: Some(time::to_wire(r.created_at)),
            max_attempts: r.max_attempts,
            parent_model: r.parent_model.clone().unwrap_or_default(),
            subtask: r.subtask.as_ref().map(pb::Subtask::from),
            max_depth: r.max_depth,
            subagents: match digest {
                Some(_) => Vec::new(),
                None => r
                    .subagents
                    .iter()
                    .map(|(name, description)| pb::AgentRef {
                        name: name.clone(),
                        description: description.clone(),
                    })
                    .collect(),
            },
            new_session: r.new_session,
            inherited_permission: r.inherited_permission.clone(),
            workspace_patch: r.workspace_patch.clone(),
            output_schema: r.output_schema.clone().unwrap_or_default(),
            expand_shell: r.expand_shell,
            traceparent: r.traceparent.clone(),
            workspace_patch_ref: crate::patch::to_wire(r.workspace_patch_ref.as_ref()),
            max_cost_usd: r.budget.max_cost_usd(),
            max_tokens: r.budget.max_tokens,
            spent_elsewhere: Some(pb::Usage::from(&r.spent_elsewhere)),
            priority: r.priority.into(),
            fork: r.fork.as_deref().cloned(),
        }
    }
}

impl From<pb::Attachment> for Attachment {
    fn from(a: pb::Attachment) -> Self {
        Self {
            name: a.name,
            media_type: a.media_type,
            uri: a.uri,
            data: a.data,
        }
    }
}

impl From<&Attachment> for pb::Attachment {
    fn from(a: &Attachment) -> Self {
        Self {
            name: a.name.clone(),
            media_type: a.media_type.clone(),
            uri: a.uri.clone(),
            data: a.data.clone(),
        }
    }
}

pub use crate::cost::Usage;

/// One tool call of a finished attempt, for the result's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallSummary {
    pub call_id: String,
    pub tool: String,
    pub title: String,
    pub ok: bool,
}

/// Something a session drew on: a file read, a URL fetched, a command run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// What found it: `read`, `grep`, `glob`, `file` (`@path`, context refs),
    /// `webfetch`, `bash`, `command` (a template's !`cmd`).
    pub source: String,
    /// The workspace-relative path, the URL or the command line.
    pub uri: String,
    /// A short piece of what came back.
    pub excerpt: String,
}

impl From<pb::Provenance> for Provenance {
    fn from(p: pb::Provenance) -> Self {
        Self {
            source: p.source,
            uri: p.uri,
            excerpt: p.excerpt,
        }
    }
}

impl From<&Provenance> for pb::Provenance {
    fn from(p: &Provenance) -> Self {
        Self {
            source: p.source.clone(),
            uri: p.uri.clone(),
            excerpt: p.excerpt.clone(),
        }
    }
}

/// An error reported by an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskError {
    /// A [`ResultErrorCode`](crate::ResultErrorCode)'s name (a string on the wire, so
    /// a newer version's code still shows).
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl TaskError {
    pub fn new(code: crate::ResultErrorCode, message: impl Into<String>, retryable: bool) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: message.into(),
            retryable,
        }
    }

    /// Whether it has the code `code`.
    pub fn is(&self, code: crate::ResultErrorCode) -> bool {
        self.code == code.as_str()
    }
}

/// How one attempt ended, as recorded by the aggregator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub task_id: TaskId,
    pub trace_id: TraceId,
    pub attempt: u32,
    pub claim_epoch: ClaimEpoch,
    pub status: TaskStatus,
    pub text: String,
    pub structured: Option<Value>,
    pub tool_calls: Vec<ToolCallSummary>,
    pub errors: Vec<TaskError>,
    /// This attempt's model calls plus its children's (their whole subtrees).
    pub usage: Usage,
    /// This attempt's own model calls only.
    pub own_usage: Usage,
    pub latency_ms: u64,
    pub steps: u32,
    pub session_id: Option<SessionId>,
    pub worker_id: Option<WorkerId>,
    /// The lifecycle retries the attempt (a retryable error with attempts left); the
    /// worker redelivers the task after its backoff. Informative: the store decides
    /// from the report ([`TaskResult::report`]) and the task's attempt budget.
    pub retry_scheduled: bool,
    /// The session transcript (JSON text), saved with the result when present.
    pub transcript_json: Option<String>,
    /// What the task changed in its workspace: a `git diff --binary` from the files it
    /// started with (its source plus what it inherited from its parent) to its files at
    /// the end, new files included; for a parent, its children's changes included.
    /// Empty when nothing changed.
    pub patch: String,
    /// A new root session's title (see [`crate::title`]).
    pub title: Option<String>,
    /// The files read, URLs fetched and commands run, each once, in the order first
    /// used.
    pub provenance: Vec<Provenance>,
    /// W3C trace context of the attempt's span; the aggregator's result write is its
    /// child. Empty when traces are not exported.
    pub traceparent: String,
    /// The patch when too large to travel inline: an object in the patch bucket. The
    /// aggregator fetches it into `patch` before recording the result. At most one of
    /// `patch` and this is set.
    pub patch_ref: Option<PatchRef>,
}

impl TaskResult {
    /// How the attempt ended, for the lifecycle: its status, and whether it failed for
    /// a reason that may pass (an `error` whose first error, the session's, is
    /// retryable).
    pub fn report(&self) -> crate::lifecycle::Report {
        crate::lifecycle::Report {
            status: self.status,
            retryable: self.status == TaskStatus::Error
                && self.errors.first().is_some_and(|e| e.retryable),
        }
    }
}

impl TryFrom<pb::TaskResult> for TaskResult {
    type Error = ProtocolError;

    fn try_from(r: pb::TaskResult) -> Result<Self, Self::Error> {
        let status = TaskStatus::from_wire("status", r.status)?;
        if !status.is_terminal() {
            return Err(ProtocolError::invalid(
                "status",
                format!("{status} is not a final status"),
            ));
        }
        let patch_ref = PatchRef::from_wire("patch_ref", r.patch_ref)?;
        if patch_ref.is_some() && !r.patch.is_empty() {
            return Err(ProtocolError::invalid(
                "patch_ref",
                "is set together with patch",
            ));
        }
        let output = r.output.unwrap_or_default();
        let usage = r.usage.unwrap_or_default();
        let metrics = r.metrics.unwrap_or_default();
        Ok(Self {
            task_id: TaskId::parse_field("task_id", &r.task_id)?,
            trace_id: TraceId::parse_field("trace_id", &r.trace_id)?,
            attempt: r.attempt,
            claim_epoch: ClaimEpoch(r.claim_epoch),
            status,
            text: output.text,
            structured: output.structured.as_ref().map(struct_to_json),
            tool_calls: r
                .tool_calls
                .into_iter()
                .map(|t| ToolCallSummary {
                    ok: t.state == pb::ToolCallState::Completed as i32,
                    call_id: t.call_id,
                    tool: t.tool,
                    title: t.title,
                })
                .collect(),
            errors: r
                .errors
                .into_iter()
                .map(|e| TaskError {
                    code: e.code,
                    message: e.message,
                    retryable: e.retryable,
                })
                .collect(),
            usage: Usage::from(usage),
            own_usage: r.own_usage.map(Usage::from).unwrap_or_default(),
            latency_ms: metrics.latency_ms,
            steps: metrics.steps,
            session_id: non_empty(&r.session_id)
                .map(|s| SessionId::parse_field("session_id", &s))
                .transpose()?,
            worker_id: non_empty(&r.worker_id).map(WorkerId::new),
            retry_scheduled: r.retry_scheduled,
            patch: r.patch,
            title: crate::title::check_title(r.title)?,
            provenance: r.provenance.into_iter().map(Provenance::from).collect(),
            traceparent: r.traceparent,
            patch_ref,
            transcript_json: match r.transcript_json.is_empty() {
                true => None,
                false => Some(
                    String::from_utf8(r.transcript_json)
                        .map_err(|_| ProtocolError::invalid("transcript_json", "is not UTF-8"))?,
                ),
            },
        })
    }
}

impl From<&TaskResult> for pb::TaskResult {
    fn from(r: &TaskResult) -> Self {
        Self {
            task_id: r.task_id.to_string(),
            trace_id: r.trace_id.to_string(),
            attempt: r.attempt,
            claim_epoch: r.claim_epoch.0,
            status: pb::TaskStatus::from(r.status) as i32,
            output: Some(pb::Output {
                text: r.text.clone(),
                structured: r.structured.as_ref().map(json_to_struct),
            }),
            tool_calls: r
                .tool_calls
                .iter()
                .map(|t| pb::ToolCallSummary {
                    call_id: t.call_id.clone(),
                    tool: t.tool.clone(),
                    title: t.title.clone(),
                    state: if t.ok {
                        pb::ToolCallState::Completed
                    } else {
                        pb::ToolCallState::Error
                    } as i32,
                })
                .collect(),
            attachments: Vec::new(),
            patch: r.patch.clone(),
            patch_ref: crate::patch::to_wire(r.patch_ref.as_ref()),
            errors: r
                .errors
                .iter()
                .map(|e| pb::TaskError {
                    code: e.code.clone(),
                    message: e.message.clone(),
                    retryable: e.retryable,
                })
                .collect(),
            provenance: r.provenance.iter().map(pb::Provenance::from).collect(),
            usage: Some(pb::Usage::from(&r.usage)),
            own_usage: Some(pb::Usage::from(&r.own_usage)),
            metrics: Some(pb::Metrics {
                latency_ms: r.latency_ms,
                steps: r.steps,
            }),
            session_id: r.session_id.map(|s| s.to_string()).unwrap_or_default(),
            worker_id: r
                .worker_id
                .as_ref()
                .map(|w| w.to_string())
                .unwrap_or_default(),
            retry_scheduled: r.retry_scheduled,
            transcript_json: r
                .transcript_json
                .clone()
                .map(String::into_bytes)
                .unwrap_or_default(),
            title: r.title.clone().unwrap_or_default(),
            traceparent: r.traceparent.clone(),
        }
    }
}

/// Decodes a protobuf message from bus bytes, naming the message type on failure.
pub fn decode<M: prost::Message + Default>(
    what: &'static str,
    bytes: &[u8],
) -> Result<M, ProtocolError> {
    M::decode(bytes).map_err(|e| ProtocolError::Decode {
        what,
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn sample() -> TaskRequest {
        TaskRequest {
            task_id: TaskId::generate(),
            parent_task_id: Some(TaskId::generate()),
            trace_id: TraceId::generate(),
            tenant: "acme".into(),
            sender: "svc".into(),
            agent: "explore".into(),
            intent: "search".into(),
            prompt: "find the config loader".into(),
            input: Some(serde_json::json!({"k": "v"})),
            context_refs: vec![ContextRef {
                kind: "file".into(),
                id: "".into(),
                uri: "src/main.rs".into(),
            }],
            attachments: vec![],
            auth_scope: vec!["read".into()],
            idempotency_key: Some("k1".into()),
            deadline: DateTime::from_timestamp(2_000_000_000, 0),
            resume_token: None,
            model: Some("m".into()),
            max_steps: Some(3),
            command: None,
            depth: 1,
            attempt: 0,
            agent_spec: Arc::new(pb::AgentSpec {
                name: "explore".into(),
                prompt: "you explore".into(),
                ..Default::default()
            }),
            created_at: DateTime::from_timestamp(1_900_000_000, 5).expect("in range"),
            max_attempts: 3,
            parent_model: Some("parent-model".into()),
            subtask: None,
            max_depth: 1,
            subagents: Arc::from([("explore".to_owned(), "searches code".to_owned())]),
            new_session: true,
            budget: crate::Budget {
                max_cost_picousd: Some(1_500_000_000_000),
                max_tokens: Some(10_000),
            },
            spent_elsewhere: Usage {
                input_tokens: 10,
                output_tokens: 2,
                cost_picousd: 36_000_000,
                unpriced_tokens: 0,
                cache_write_input_tokens: 0,
                cached_input_tokens: 0,
            },
            inherited_permission: vec![pb::PermissionLayer {
                agent: "plan".into(),
                rules: vec![pb::PermissionRule {
                    permission: "edit".into(),
                    pattern: "*".into(),
                    action: pb::PermissionAction::Deny as i32,
                }],
            }],
            workspace_patch: "diff --git a/x b/x\n".into(),
            output_schema: Some(r#"{"type": "object"}"#.into()),
            expand_shell: true,
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            workspace_patch_ref: None,
            priority: Default::default(),
            fork: Some(Arc::new(pb::ForkContext {
                system: "you build".into(),
                tools_json: r#"[{"name":"read","description":"reads","parameters":{}}]"#.into(),
                transcript_json: r#"{"session_id":"s","messages":[]}"#.into(),
                cache_key: "ses-parent".into(),
            })),
        }
    }

    #[test]
    fn task_request_round_trips_through_bytes() {
        let req = sample();
        let bytes = pb::TaskRequest::from(&req).encode_to_vec();
        let back = TaskRequest::try_from(
            decode::<pb::TaskRequest>("task request", &bytes).expect("decodes"),
        )
        .expect("valid");
        assert_eq!(back, req);
    }

    #[test]
    fn garbage_bytes_are_a_decode_error_not_a_panic() {
        let err = decode::<pb::TaskRequest>("task request", b"\xff\xff\xff not protobuf")
            .expect_err("garbage");
        assert!(matches!(err, ProtocolError::Decode { .. }), "{err}");
    }

    #[test]
    fn a_dispatched_request_names_its_spec_by_digest_and_resolves_back() {
        let mut req = sample();
        // A spec of a realistic size: its prompt is most of it.
        req.agent_spec = Arc::new(pb::AgentSpec {
            name: "explore".into(),
            prompt: "You explore code and answer with what you found. ".repeat(20),
            ..Default::default()
        });
        let Dispatch { wire, digest, .. } = req.to_dispatch();
        assert_eq!(wire.agent_spec, None);
        assert!(wire.subagents.is_empty());
        assert_eq!(wire.agent_spec_digest, digest.as_bytes().to_vec());
        assert_eq!(req.spec_bundle().digest(), digest);
        assert!(
            wire.encoded_len() < pb::TaskRequest::from(&req).encoded_len(),
            "the digest form is smaller"
        );
        let bytes = wire.encode_to_vec();
        let wire = decode::<pb::TaskRequest>("task request", &bytes).expect("decodes");
        // Without its spec it is not a request yet.
        assert_eq!(
            TaskRequest::try_from(wire.clone()),
            Err(ProtocolError::Missing("agent_spec"))
        );
        let back = TaskRequest::from_dispatched(wire, &req.spec_bundle()).expect("valid");
        assert_eq!(back, req);
        assert!(Arc::ptr_eq(&back.agent_spec, &req.agent_spec), "shared");
        assert!(Arc::ptr_eq(&back.subagents, &req.subagents), "shared");
    }

    #[test]
    fn a_spec_of_another_agent_is_refused() {
        let wire = sample().to_dispatch().wire;
        let other = AgentSpecBundle {
            spec: Arc::new(pb::AgentSpec {
                name: "general".into(),
                ..Default::default()
            }),
            subagents: Arc::from([]),
        };
        let err = TaskRequest::from_dispatched(wire, &other).expect_err("another agent");
        assert_eq!(err.field(), Some("agent_spec"));
    }

    #[test]
    fn missing_agent_spec_is_named() {
        let mut wire = pb::TaskRequest::from(&sample());
        wire.agent_spec = None;
        assert_eq!(
            TaskRequest::try_from(wire),
            Err(ProtocolError::Missing("agent_spec"))
        );
    }

    #[test]
    fn result_with_running_status_is_refused() {
        let wire = pb::TaskResult {
            task_id: TaskId::generate().to_string(),
            trace_id: TraceId::generate().to_string(),
            status: pb::TaskStatus::Running as i32,
            ..Default::default()
        };
        let err = TaskResult::try_from(wire).expect_err("running is not final");
        assert_eq!(err.field(), Some("status"));
    }
}
