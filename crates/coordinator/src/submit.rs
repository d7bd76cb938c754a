//! Submit: validation, building the envelope, and the group-commit batcher.
//!
//! Every `Submit` is validated and turned into a [`NewTask`], then handed to the
//! batcher, which writes whatever submits are waiting in one transaction (tasks and
//! outbox rows together) and hands the committed dispatches to this coordinator's relay
//! (see [`crate::relay::Handoff`]). Under load this is group commit; when idle a batch
//! holds one submit and adds no delay.

use chrono::Utc;
use prost::Message;
use sha2::{Digest, Sha256};
use taskwire_agent::output_schema::OutputSchema;
use taskwire_definitions::agent::AgentName;
use taskwire_definitions::builtin::{AgentRegistry, is_internal};
use taskwire_protocol::{
    Attachment, Budget, ContextRef, SessionId, TaskId, TaskRequest, TraceId, Usage, pb, time, value,
};
use taskwire_store::{InsertOutcome, NewTask, Store};
use tokio_util::sync::CancellationToken;

use crate::agents::Agents;
use crate::batch::Batcher;
use crate::relay::Handoff;
use crate::{CoordinatorConfig, CoordinatorError};

/// Most submits written in one transaction.
const MAX_BATCH: usize = 512;
/// Transactions in flight at once: one, so that submits arriving while it commits
/// gather into the next (group commit). More in flight split a coordinator's load into
/// more, smaller statements, each with its commit: with four, Postgres spent a quarter
/// more CPU per task, and more still with several coordinators (docs/performance.md).
const CONCURRENT_BATCHES: usize = 1;
/// Largest attempt budget a submit may ask for.
const MAX_ATTEMPTS_LIMIT: u32 = 20;
/// Largest `workspace_patch` a request carries (inline, in the dispatched envelope);
/// larger starting changes come as `workspace_patch_ref`.
pub const MAX_WORKSPACE_PATCH_BYTES: usize = taskwire_protocol::INLINE_START_PATCH_BYTES;

/// Hands validated submits to the group-commit loop.
#[derive(Clone)]
pub struct Submitter {
    batcher: Batcher<NewTask, Result<InsertOutcome, CoordinatorError>>,
}

impl Submitter {
    /// Starts the loop; it stops when `shutdown` fires.
    pub fn start(store: Store, relay: Handoff, shutdown: CancellationToken) -> Self {
        let batcher = Batcher::start(
            "submit batcher",
            MAX_BATCH,
            CONCURRENT_BATCHES,
            shutdown,
            move |tasks: Vec<NewTask>| {
                let (store, relay) = (store.clone(), relay.clone());
                async move {
                    let written = match &relay {
                        Handoff::Own { grace, .. } => store
                            .insert_tasks_relaying(&tasks, *grace)
                            .await
                            .map(|(outcomes, rows)| (outcomes, Some(rows))),
                        Handoff::Scan(_) => store.insert_tasks(&tasks).await.map(|o| (o, None)),
                    };
                    match written {
                        Ok((outcomes, rows)) => {
                            relay.hand(rows).await;
                            outcomes.into_iter().map(Ok).collect()
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, batch = tasks.len(), "submit batch failed");
                            // Store errors are not `Clone`: each waiter gets the message.
                            let (unavailable, msg) = (e.is_unavailable(), e.to_string());
                            tasks
                                .iter()
                                .map(|_| {
                                    Err(if unavailable {
                                        CoordinatorError::Unavailable(msg.clone())
                                    } else {
                                        CoordinatorError::Internal(msg.clone())
                                    })
                                })
                                .collect()
                        }
                    }
                }
            },
        );
        Self { batcher }
    }

    /// Writes one task (with whatever else is waiting) and returns its outcome.
    pub async fn submit(&self, task: NewTask) -> Result<InsertOutcome, CoordinatorError> {
        self.batcher.call(task).await.unwrap_or_else(|| {
            Err(CoordinatorError::Unavailable(
                "coordinator is shutting down".to_owned(),
            ))
        })
    }
}

/// What a parent contributes to (and how it bounds) a child submit.
#[derive(Debug, Clone)]
pub struct ParentInfo {
    pub task_id: TaskId,
    /// The parent's tenant: a child always runs as it.
    pub tenant: String,
    pub trace_id: TraceId,
    pub depth: u32,
    pub deadline: Option<chrono::DateTime<Utc>>,
    pub auth_scope: Vec<String>,
    /// The model the parent session runs on (model resolution for the child).
    pub model: Option<String>,
    /// The rules that bound the parent, nearest first: its agent's own, then what it
    /// inherited. The child inherits them all, so it never has more power than the
    /// parent.
    pub permission_layers: Vec<pb::PermissionLayer>,
    /// The budget of the parent's subtree: the child's is at most this.
    pub budget: Budget,
    /// The parent's priority: the child's is this or lower.
    pub priority: taskwire_protocol::Priority,
    /// The parent's conversation, for a child its `task` call forked (`fork: true`).
    pub fork: Option<pb::ForkContext>,
}

impl ParentInfo {
    /// The parent as stored.
    pub fn of(request: &TaskRequest) -> Self {
        Self {
            task_id: request.task_id,
            tenant: request.tenant.clone(),
            trace_id: request.trace_id,
            depth: request.depth,
            deadline: request.deadline,
            auth_scope: request.auth_scope.clone(),
            model: None,
            permission_layers: layers_for_children(request),
            budget: request.budget,
            priority: request.priority,
            fork: None,
        }
    }
}

/// The layers a child of `parent` inherits: the rules of the parent's agent as it was
/// resolved for the parent (not the registry's current definition), then the parent's
/// inherited layers. A layer without rules restricts nothing and is left out. Rules
/// the parent's session added with `always` answers are never part of it.
fn layers_for_children(parent: &TaskRequest) -> Vec<pb::PermissionLayer> {
    let own = pb::PermissionLayer {
        agent: parent.agent.clone(),
        rules: parent.agent_spec.permission.clone(),
    };
    std::iter::once(own)
        .chain(parent.inherited_permission.iter().cloned())
        .filter(|layer| !layer.rules.is_empty())
        .collect()
}

/// Who decided that a task is started, which bounds the agents it may name.
///
/// A `task` call's `command` argument is filled in by a model, and a client's
/// `SubmitRequest.command` is a label: neither lets a task start a primary agent as a
/// child. Only the coordinator's own slash-command path does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A client's `Submit`, or a worker's child submit for a model's `task` call:
    /// under a parent only a subagent (mode `subagent` or `all`), and a `subtask`
    /// only to one.
    Request,
    /// The coordinator's slash-command path: `RunCommand`, and the child a worker
    /// starts for the subtask `RunCommand` put in its parent's request. It may name
    /// any agent but an internal one (`subtask: true` delegates even to a primary).
    Command,
}

/// The span a submit runs in, as the task records it.
#[derive(Debug, Clone, Default)]
pub struct SubmitTrace {
    /// The span's trace: a root task without a requested trace id takes it.
    pub trace_id: Option<TraceId>,
    /// The span's `traceparent`: each attempt's span is its child.
    pub traceparent: String,
}

impl SubmitTrace {
    /// The current exported span's trace (nothing when traces are not exported).
    pub fn current() -> Self {
        let span = taskwire_traces::Span::current();
        Self {
            trace_id: span.trace_id().and_then(TraceId::from_u128),
            traceparent: span.traceparent(),
        }
    }
}

/// Validates a `SubmitRequest` and builds the task to insert.
pub fn build_task(
    cfg: &CoordinatorConfig,
    registry: &Agents,
    subjects: &taskwire_bus::Subjects,
    mut req: pb::SubmitRequest,
    mut parent: Option<ParentInfo>,
    origin: Origin,
    trace: SubmitTrace,
) -> Result<NewTask, CoordinatorError> {
    if req.agent.is_empty() {
        return Err(CoordinatorError::invalid("agent", "is required"));
    }
    let callback_url = match std::mem::take(&mut req.callback_url) {
        url if url.is_empty() => None,
        url => Some(
            crate::webhooks::check_url(&url, &cfg.webhook_policy())
                .map_err(|reason| CoordinatorError::invalid("callback_url", reason))?
                .to_string(),
        ),
    };
    let agent_name: AgentName = req
        .agent
        .parse()
        .map_err(|e| CoordinatorError::invalid("agent", format!("{e}")))?;
    let spec = registry
        .get(&agent_name)
        .ok_or_else(|| CoordinatorError::NotFound(format!("agent `{}`", req.agent)))?;
    if is_internal(&agent_name) {
        return Err(CoordinatorError::invalid(
            "agent",
            format!(
                "`{}` is an internal agent: workers run it themselves, never as a task",
                req.agent
            ),
        ));
    }
    if let Some(subtask) = &req.subtask {
        delegation_allowed(registry, "subtask.agent", &subtask.agent, origin)?;
    }
    if let Some(p) = &parent {
        // A slash command may delegate to any agent (`subtask: true`); the `task` tool
        // and a client naming a parent only to subagents.
        if !spec.mode.is_subagent() && origin != Origin::Command {
            return Err(CoordinatorError::invalid(
                "agent",
                format!(
                    "`{}` is a primary agent and cannot run as a subagent",
                    req.agent
                ),
            ));
        }
        if p.depth + 1 > cfg.max_depth {
            return Err(CoordinatorError::FailedPrecondition(format!(
                "depth limit reached: task {} is at depth {} and the limit is {}",
                p.task_id, p.depth, cfg.max_depth
            )));
        }
        if let Some(wider) = req
            .auth_scope
            .iter()
            .find(|s| !p.auth_scope.is_empty() && !p.auth_scope.contains(s))
        {
            return Err(CoordinatorError::PermissionDenied(format!(
                "auth_scope `{wider}` is wider than the parent task's scope"
            )));
        }
    }
    if req.prompt.trim().is_empty() {
        return Err(CoordinatorError::invalid(
            "prompt",
            "is required and must not be blank",
        ));
    }
    if req.prompt.len() > cfg.max_prompt_bytes {
        return Err(CoordinatorError::invalid(
            "prompt",
            format!(
                "is {} bytes, more than the limit of {} bytes",
                req.prompt.len(),
                cfg.max_prompt_bytes
            ),
        ));
    }
    let now = Utc::now();
    let deadline = time::opt_from_wire("deadline", req.deadline.as_ref())?;
    // A child never outlives its parent: its deadline is at most the parent's.
    let deadline = match (deadline, parent.as_ref().and_then(|p| p.deadline)) {
        (Some(own), Some(parents)) => Some(own.min(parents)),
        (own, parents) => own.or(parents),
    };
    if let Some(d) = deadline
        && d <= now
    {
        return Err(CoordinatorError::invalid(
            "deadline",
            format!("{d} is in the past"),
        ));
    }
    // A delayed start: a root task's, before its deadline (one already passed starts
    // at once).
    let not_before = time::opt_from_wire("not_before", req.not_before.as_ref())?;
    if let Some(start) = not_before {
        if parent.is_some() {
            return Err(CoordinatorError::invalid(
                "not_before",
                "a child task starts when its parent asks for it; only a root task may be scheduled",
            ));
        }
        if let Some(d) = deadline
            && d <= start
        {
            return Err(CoordinatorError::invalid(
                "not_before",
                format!("{start} is not before the deadline {d}"),
            ));
        }
    }
    let max_attempts = req.max_attempts.unwrap_or(cfg.default_max_attempts);
    if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
        return Err(CoordinatorError::invalid(
            "max_attempts",
            format!("must be between 1 and {MAX_ATTEMPTS_LIMIT}"),
        ));
    }
    // A file ref names a path inside the worker's workspace; one that cannot be is
    // refused here (the worker also checks, through the workspace, symlinks included).
    if let Some(bad) = req.context_refs.iter().find(|c| {
        let path = if c.id.is_empty() { &c.uri } else { &c.id };
        let path = std::path::Path::new(path.strip_prefix("file://").unwrap_or(path));
        c.r#type == "file"
            && (path.is_absolute()
                || path
                    .components()
                    .any(|p| matches!(p, std::path::Component::ParentDir)))
    }) {
        return Err(CoordinatorError::invalid(
            "context_refs",
            format!(
                "file `{}` is outside the workspace (use a path relative to it)",
                if bad.id.is_empty() { &bad.uri } else { &bad.id }
            ),
        ));
    }
    // A child runs at its parent's priority, or the lower one it asks for.
    let priority = match &parent {
        Some(p) => p.priority.for_child("priority", req.priority)?,
        None => taskwire_protocol::Priority::from_wire("priority", req.priority)?,
    };
    // A child's budget is its parent's, narrowed by what it asks for itself.
    let budget = Budget::from_wire(req.max_cost_usd, req.max_tokens)?;
    let budget = parent
        .as_ref()
        .map_or(budget, |p| p.budget.narrowed_by(budget));
    if req.max_steps == Some(0) {
        return Err(CoordinatorError::invalid("max_steps", "must be at least 1"));
    }
    if req.workspace_patch.len() > MAX_WORKSPACE_PATCH_BYTES {
        return Err(CoordinatorError::invalid(
            "workspace_patch",
            format!(
                "is {} bytes, more than the limit of {MAX_WORKSPACE_PATCH_BYTES} bytes",
                req.workspace_patch.len()
            ),
        ));
    }
    if !req.output_schema.is_empty() {
        OutputSchema::parse(&req.output_schema)
            .map_err(|reason| CoordinatorError::invalid("output_schema", reason))?;
    }
    let workspace_patch_ref = taskwire_protocol::PatchRef::from_wire(
        "workspace_patch_ref",
        req.workspace_patch_ref.take(),
    )?;
    if workspace_patch_ref.is_some() && !req.workspace_patch.is_empty() {
        return Err(CoordinatorError::invalid(
            "workspace_patch_ref",
            "is set together with workspace_patch; send one of them",
        ));
    }
    let digest = {
        // The digest covers what the client asked for, so a retried submit matches.
        // A child's starting changes are left out: a later attempt of its parent asks
        // for the same child from a workspace rebuilt on another worker, and must find
        // it whatever that diff looks like there.
        let mut h = Sha256::new();
        let mut keyed = req.clone();
        if parent.is_some() {
            keyed.workspace_patch.clear();
        } else {
            keyed.workspace_patch_ref = workspace_patch_ref.as_ref().map(pb::PatchRef::from);
        }
        h.update(keyed.encode_to_vec());
        // The webhook is part of what was asked for: a retry naming another is a conflict.
        h.update(callback_url.as_deref().unwrap_or("").as_bytes());
        format!("{:x}", h.finalize())
    };
    let trace_id = match (&parent, req.trace_id.as_str()) {
        (Some(p), _) => p.trace_id,
        (None, "") => trace.trace_id.unwrap_or_else(TraceId::generate),
        (None, t) => TraceId::parse_field("trace_id", t)?,
    };
    // The API layer has set the tenant from the caller's token (or the request).
    let tenant = if req.tenant.is_empty() {
        "default".to_owned()
    } else {
        req.tenant
    };
    // A child inherits its parent's scope when it asks for none.
    let fork = parent
        .as_mut()
        .and_then(|p| p.fork.take())
        .map(std::sync::Arc::new);
    if fork.is_some() && !req.resume_token.is_empty() {
        return Err(CoordinatorError::invalid(
            "fork",
            "a forked child starts a new session from its parent's conversation; it cannot also continue resume_token",
        ));
    }
    let auth_scope = match (&parent, req.auth_scope.is_empty()) {
        (Some(p), true) => p.auth_scope.clone(),
        _ => req.auth_scope,
    };
    // Built once per agent and registry, shared by the agent's tasks.
    let wire = registry.wire_spec(spec);
    let request = TaskRequest {
        task_id: TaskId::generate(),
        parent_task_id: parent.as_ref().map(|p| p.task_id),
        trace_id,
        tenant,
        sender: req.sender,
        agent: req.agent,
        intent: req.intent,
        prompt: req.prompt,
        input: req.input.as_ref().map(value::struct_to_json),
        context_refs: req
            .context_refs
            .into_iter()
            .map(|c| ContextRef {
                kind: c.r#type,
                id: c.id,
                uri: c.uri,
            })
            .collect(),
        attachments: req.attachments.into_iter().map(Attachment::from).collect(),
        auth_scope,
        idempotency_key: (!req.idempotency_key.is_empty()).then_some(req.idempotency_key),
        deadline,
        new_session: req.resume_token.is_empty(),
        // Every task runs in a session: the one it resumes, or a new one.
        resume_token: Some(match req.resume_token.as_str() {
            "" => SessionId::generate(),
            t => SessionId::parse_field("resume_token", t)?,
        }),
        model: req.model.filter(|m| !m.is_empty()),
        max_steps: req.max_steps,
        command: (!req.command.is_empty()).then_some(req.command),
        depth: parent.as_ref().map_or(0, |p| p.depth + 1),
        attempt: 0,
        agent_spec: wire.spec,
        created_at: now,
        max_attempts,
        parent_model: parent.as_ref().and_then(|p| p.model.clone()),
        subtask: req.subtask.map(taskwire_protocol::Subtask::from),
        max_depth: cfg.max_depth,
        subagents: wire.subagents,
        inherited_permission: parent.map(|p| p.permission_layers).unwrap_or_default(),
        workspace_patch: req.workspace_patch,
        output_schema: (!req.output_schema.is_empty()).then_some(req.output_schema),
        expand_shell: req.expand_shell,
        traceparent: trace.traceparent,
        workspace_patch_ref,
        budget,
        // Set by `submit_task` for a child in a budgeted tree.
        spent_elsewhere: Usage::default(),
        priority,
        fork,
    };
    // Checked here so that a bad one is refused at submit, naming the entry, instead
    // of failing on a worker.
    taskwire_protocol::GitSource::from_refs(&request.context_refs)?;
    let size = pb::TaskRequest::from(&request).encoded_len();
    if size > cfg.max_request_bytes {
        return Err(CoordinatorError::invalid(
            "request",
            format!(
                "encodes to {size} bytes, more than the limit of {} bytes",
                cfg.max_request_bytes
            ),
        ));
    }
    // A child is titled as its parent's `task` call described it (seed 001, step 2).
    let title = request
        .parent_task_id
        .map(|_| child_title(&request.intent, &request.agent));
    Ok(NewTask {
        request,
        digest,
        title,
        subject: subjects.tasks(&cfg.queue),
        inline_agent_spec: cfg.inline_agent_specs,
        callback_url,
        not_before,
    })
}

/// A child task's title: `DESCRIPTION (@AGENT subagent)`, or `(@AGENT subagent)`
/// when its parent gave no description.
pub fn child_title(description: &str, agent: &str) -> String {
    format!("{description} (@{agent} subagent)")
        .trim_start()
        .to_owned()
}

/// Refuses a `subtask` whose agent `origin` may not delegate to: an internal agent
/// always, a primary one unless the slash-command path put it there. An unknown one is
/// refused when the worker starts it (as for a `task` call).
fn delegation_allowed(
    registry: &AgentRegistry,
    field: &'static str,
    agent: &str,
    origin: Origin,
) -> Result<(), CoordinatorError> {
    let Ok(name) = agent.parse::<AgentName>() else {
        return Err(CoordinatorError::invalid(
            field,
            format!("`{agent}` is not an agent name"),
        ));
    };
    if is_internal(&name) {
        return Err(CoordinatorError::invalid(
            field,
            format!("`{agent}` is an internal agent: workers run it themselves, never as a task"),
        ));
    }
    match registry.get(&name) {
        Some(spec) if !spec.mode.is_subagent() && origin != Origin::Command => {
            Err(CoordinatorError::invalid(
                field,
                format!(
                    "`{agent}` is a primary agent: only a slash command (RunCommand) may delegate to it"
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// Submits a task for `caller` (gRPC `Submit`, a worker's child submit, `RunCommand`):
/// backpressure, tenant and scope from the caller, validation, the batched insert.
pub async fn submit_task(
    state: &crate::State,
    caller: &crate::auth::Principal,
    mut req: pb::SubmitRequest,
    parent: Option<ParentInfo>,
    origin: Origin,
) -> Result<pb::SubmitResponse, CoordinatorError> {
    crate::backpressure::admit(state)?;
    req.tenant = caller.tenant_for_submit(&req.tenant)?;
    // Ids the submit names belong to its tenant, or they do not exist for it.
    if let Some(p) = &parent
        && p.tenant != req.tenant
    {
        return Err(CoordinatorError::NotFound(format!(
            "parent task {}",
            p.task_id
        )));
    }
    if !req.callback_url.is_empty() && state.webhook_secrets.get(&req.tenant).is_none() {
        return Err(CoordinatorError::FailedPrecondition(format!(
            "callback_url: tenant `{}` has no webhook secret (the coordinator's --webhook-secrets-file names none)",
            req.tenant
        )));
    }
    crate::ownership::resumed_session(state, &req.tenant, &req.resume_token).await?;
    req.auth_scope = caller.scope_for_submit(std::mem::take(&mut req.auth_scope))?;
    let registry = state.registry();
    let parent_id = parent.as_ref().map(|p| p.task_id);
    let mut task = build_task(
        &state.config,
        &registry,
        &state.subjects,
        req,
        parent,
        origin,
        SubmitTrace::current(),
    )?;
    if let Some(parent_id) = parent_id
        && !task.request.budget.is_unlimited()
    {
        crate::budget::admit_child(state, parent_id, &mut task).await?;
    }
    let trace_id = task.request.trace_id;
    let session_id = task.request.resume_token;
    let agent = task.request.agent.clone();
    let (task_id, created) = match state.submitter.submit(task).await? {
        InsertOutcome::Created(id) => (id, true),
        InsertOutcome::Existing(id) => (id, false),
        InsertOutcome::Conflict(id) => {
            return Err(CoordinatorError::AlreadyExists(format!(
                "idempotency key already used by task {id} with a different request"
            )));
        }
    };
    crate::spans::submitted(task_id, trace_id);
    if created {
        state.metrics.task_submitted(agent.as_str());
        tracing::debug!(task.id = %task_id, trace.id = %trace_id, "task submitted");
        return Ok(pb::SubmitResponse {
            task_id: task_id.to_string(),
            trace_id: trace_id.to_string(),
            created,
            session_id: session_id.map(|s| s.to_string()).unwrap_or_default(),
        });
    }
    // An idempotent repeat: answer with the stored task's trace and session.
    let existing = state.store.task_request(task_id).await?;
    Ok(pb::SubmitResponse {
        task_id: task_id.to_string(),
        trace_id: existing
            .as_ref()
            .map_or(trace_id, |r| r.trace_id)
            .to_string(),
        created,
        session_id: existing
            .and_then(|r| r.resume_token)
            .map(|s| s.to_string())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submit(agent: &str, parent: Option<&TaskRequest>) -> TaskRequest {
        let cfg = CoordinatorConfig {
            max_depth: 3,
            ..Default::default()
        };
        let mut registry = AgentRegistry::builtin();
        let mut reviewer = taskwire_definitions::builtin::general();
        reviewer.name = "reviewer".parse().expect("valid name");
        reviewer.permission = vec![taskwire_definitions::PermissionRule::new(
            "bash",
            "git push*",
            taskwire_definitions::PermissionAction::Deny,
        )];
        registry.insert(reviewer);
        let req = pb::SubmitRequest {
            agent: agent.into(),
            prompt: "work".into(),
            ..Default::default()
        };
        let subjects = taskwire_bus::Subjects::new("t");
        build_task(
            &cfg,
            &Agents::from(registry),
            &subjects,
            req,
            parent.map(ParentInfo::of),
            // A slash command may start a primary agent under a parent.
            Origin::Command,
            SubmitTrace::default(),
        )
        .expect("valid submit")
        .request
    }

    fn build(
        req: pb::SubmitRequest,
        parent: Option<&TaskRequest>,
    ) -> Result<NewTask, CoordinatorError> {
        build_from(req, parent, Origin::Request)
    }

    fn build_from(
        req: pb::SubmitRequest,
        parent: Option<&TaskRequest>,
        origin: Origin,
    ) -> Result<NewTask, CoordinatorError> {
        let subjects = taskwire_bus::Subjects::new("t");
        build_task(
            &CoordinatorConfig::default(),
            &Agents::from(AgentRegistry::builtin()),
            &subjects,
            req,
            parent.map(ParentInfo::of),
            origin,
            SubmitTrace::default(),
        )
    }

    fn refused_field(result: Result<NewTask, CoordinatorError>) -> (String, String) {
        match result.map(|_| ()) {
            Err(CoordinatorError::InvalidArgument { field, reason }) => (field, reason),
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
    }

    #[test]
    fn a_forked_child_carries_its_parents_conversation_and_cannot_also_resume_a_session() {
        let parent = submit("build", None);
        let fork = pb::ForkContext {
            system: "you build".into(),
            tools_json: "[]".into(),
            transcript_json: r#"{"session_id":"s","messages":[]}"#.into(),
            cache_key: "ses-parent".into(),
        };
        let forked = |resume_token: &str| {
            let mut info = ParentInfo::of(&parent);
            info.fork = Some(fork.clone());
            let req = pb::SubmitRequest {
                agent: "general".into(),
                prompt: "go on".into(),
                resume_token: resume_token.into(),
                ..Default::default()
            };
            build_task(
                &CoordinatorConfig::default(),
                &Agents::from(AgentRegistry::builtin()),
                &taskwire_bus::Subjects::new("t"),
                req,
                Some(info),
                Origin::Request,
                SubmitTrace::default(),
            )
        };
        let child = forked("").expect("valid fork").request;
        assert_eq!(child.fork.as_deref(), Some(&fork));
        assert!(
            child.new_session,
            "a forked child starts a session of its own"
        );
        let (field, reason) = refused_field(forked(&SessionId::generate().to_string()));
        assert_eq!(field, "fork");
        assert!(
            reason.contains("cannot also continue resume_token"),
            "{reason}"
        );
        assert!(submit("general", Some(&parent)).fork.is_none());
    }

    #[test]
    fn a_child_is_titled_with_its_description_and_agent_and_a_root_task_is_not() {
        let root = submit("general", None);
        let req = pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "find the retry loop".into(),
            intent: "find retries".into(),
            ..Default::default()
        };
        let child = build(req.clone(), Some(&root)).expect("a valid child");
        assert_eq!(
            child.title.as_deref(),
            Some("find retries (@explore subagent)")
        );
        let untold = pb::SubmitRequest {
            intent: String::new(),
            ..req.clone()
        };
        let child = build(untold, Some(&root)).expect("a valid child");
        assert_eq!(child.title.as_deref(), Some("(@explore subagent)"));
        assert_eq!(build(req, None).expect("a valid root").title, None);
    }

    #[test]
    fn a_requests_command_label_never_lets_a_primary_agent_run_as_a_child() {
        let root = submit("build", None);
        let req = pb::SubmitRequest {
            agent: "build".into(),
            prompt: "work".into(),
            // What a model fills in as the `task` tool's `command` argument.
            command: "/anything".into(),
            ..Default::default()
        };
        let (field, reason) = refused_field(build(req.clone(), Some(&root)));
        assert_eq!(field, "agent");
        assert!(reason.contains("primary agent"), "{reason}");
        build_from(req, Some(&root), Origin::Command)
            .expect("the slash-command path may delegate to a primary agent");
    }

    #[test]
    fn plan_runs_as_a_child_and_keeps_its_read_only_rules() {
        let root = submit("build", None);
        let req = pb::SubmitRequest {
            agent: "plan".into(),
            prompt: "plan the change".into(),
            ..Default::default()
        };
        let child = build(req, Some(&root)).expect("plan is a subagent too (mode all)");
        let rules = &child.request.agent_spec.permission;
        assert!(
            rules.iter().any(|r| r.permission == "edit"
                && r.pattern == "*"
                && r.action == pb::PermissionAction::Deny as i32),
            "{rules:?}"
        );
    }

    #[test]
    fn internal_agents_are_refused_on_every_path_and_subagents_stay_open_to_root_submits() {
        let root = submit("build", None);
        for agent in ["compaction", "title"] {
            let req = pb::SubmitRequest {
                agent: agent.into(),
                prompt: "work".into(),
                command: "/anything".into(),
                ..Default::default()
            };
            for (parent, origin) in [
                (None, Origin::Request),
                (None, Origin::Command),
                (Some(&root), Origin::Request),
                (Some(&root), Origin::Command),
            ] {
                let (field, reason) = refused_field(build_from(req.clone(), parent, origin));
                assert_eq!(field, "agent", "{agent}");
                assert!(reason.contains("internal agent"), "{agent}: {reason}");
            }
        }
        for agent in ["explore", "general", "build"] {
            build(
                pb::SubmitRequest {
                    agent: agent.into(),
                    prompt: "work".into(),
                    ..Default::default()
                },
                None,
            )
            .unwrap_or_else(|e| panic!("a root submit of {agent}: {e:?}"));
        }
    }

    #[test]
    fn a_subtask_to_a_primary_or_internal_agent_comes_only_from_a_slash_command() {
        let with_subtask = |agent: &str| pb::SubmitRequest {
            agent: "explore".into(),
            prompt: "/fix the build".into(),
            subtask: Some(pb::Subtask {
                agent: agent.into(),
                prompt: "fix it".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (field, reason) = refused_field(build(with_subtask("build"), None));
        assert_eq!(field, "subtask.agent");
        assert!(reason.contains("only a slash command"), "{reason}");
        build_from(with_subtask("build"), None, Origin::Command).expect("RunCommand's subtask");
        build(with_subtask("explore"), None).expect("a subtask to a subagent");
        for origin in [Origin::Request, Origin::Command] {
            let (field, reason) = refused_field(build_from(with_subtask("title"), None, origin));
            assert_eq!(field, "subtask.agent");
            assert!(reason.contains("internal agent"), "{reason}");
        }
    }

    #[test]
    fn a_negative_or_nan_cost_budget_is_refused_naming_the_field() {
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let err = build(
                pb::SubmitRequest {
                    agent: "general".into(),
                    prompt: "work".into(),
                    max_cost_usd: Some(bad),
                    ..Default::default()
                },
                None,
            )
            .expect_err("refused");
            assert!(
                matches!(&err, CoordinatorError::InvalidArgument { field, .. } if field == "max_cost_usd"),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn a_child_inherits_its_parents_budget_and_may_narrow_but_not_widen_it() {
        let root = build(
            pb::SubmitRequest {
                agent: "general".into(),
                prompt: "work".into(),
                max_cost_usd: Some(1.5),
                max_tokens: Some(1000),
                ..Default::default()
            },
            None,
        )
        .expect("valid")
        .request;
        let child = |max_cost_usd, max_tokens| {
            build(
                pb::SubmitRequest {
                    agent: "explore".into(),
                    prompt: "work".into(),
                    max_cost_usd,
                    max_tokens,
                    ..Default::default()
                },
                Some(&root),
            )
            .expect("valid")
            .request
            .budget
        };
        assert_eq!(child(None, None), root.budget, "inherited");
        let wider = child(Some(10.0), Some(5000));
        assert_eq!(wider, root.budget, "never widened");
        let narrower = child(Some(0.25), Some(10));
        assert_eq!(narrower.max_cost_usd(), Some(0.25));
        assert_eq!(narrower.max_tokens, Some(10));
    }

    #[test]
    fn a_childs_starting_changes_travel_but_do_not_key_it() {
        let root = submit("general", None);
        let child = |patch: &str| pb::SubmitRequest {
            agent: "general".into(),
            prompt: "work".into(),
            idempotency_key: "child:p:c1".into(),
            workspace_patch: patch.into(),
            ..Default::default()
        };
        let first = build(child("diff --git a/x b/x\n+one"), Some(&root)).expect("valid");
        assert_eq!(first.request.workspace_patch, "diff --git a/x b/x\n+one");
        let again = build(child("diff --git a/x b/x\n+rebuilt"), Some(&root)).expect("valid");
        assert_eq!(
            first.digest, again.digest,
            "a parent's later attempt finds the child it started"
        );
        let root_one = build(child("+one"), None).expect("valid");
        let root_two = build(child("+two"), None).expect("valid");
        assert_ne!(
            root_one.digest, root_two.digest,
            "for a client's submit the starting changes are part of the request"
        );
    }

    #[test]
    fn large_starting_changes_travel_by_reference_checked_and_do_not_key_a_child() {
        let root = submit("general", None);
        let reference = |sha256: &str| pb::PatchRef {
            name: "start/p/1".into(),
            sha256: sha256.into(),
            size: 2 * 1024 * 1024,
        };
        let child = |r: pb::PatchRef, inline: &str| pb::SubmitRequest {
            agent: "general".into(),
            prompt: "work".into(),
            idempotency_key: "child:p:c1".into(),
            workspace_patch: inline.into(),
            workspace_patch_ref: Some(r),
            ..Default::default()
        };
        let first = build(child(reference(&"a".repeat(64)), ""), Some(&root)).expect("valid");
        assert_eq!(
            first.request.workspace_patch_ref.as_ref().map(|r| r.size),
            Some(2 * 1024 * 1024)
        );
        let again = build(child(reference(&"b".repeat(64)), ""), Some(&root)).expect("valid");
        assert_eq!(
            first.digest, again.digest,
            "a parent's later attempt finds its child"
        );
        let root_one = build(child(reference(&"a".repeat(64)), ""), None).expect("valid");
        let root_two = build(child(reference(&"b".repeat(64)), ""), None).expect("valid");
        assert_ne!(
            root_one.digest, root_two.digest,
            "a client's reference keys its task"
        );

        for bad in [
            child(reference("not hex"), ""),
            child(reference(&"a".repeat(64)), "diff --git a/x b/x\n"),
            child(
                pb::PatchRef {
                    size: taskwire_protocol::MAX_PATCH_BYTES + 1,
                    ..reference(&"a".repeat(64))
                },
                "",
            ),
        ] {
            match build(bad, None) {
                Err(CoordinatorError::InvalidArgument { field, .. }) => {
                    assert_eq!(field, "workspace_patch_ref")
                }
                other => panic!("refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn an_oversized_workspace_patch_is_refused_naming_the_field() {
        let req = pb::SubmitRequest {
            agent: "general".into(),
            prompt: "work".into(),
            workspace_patch: "x".repeat(MAX_WORKSPACE_PATCH_BYTES + 1),
            ..Default::default()
        };
        match build(req, None) {
            Err(CoordinatorError::InvalidArgument { field, reason }) => {
                assert_eq!(field, "workspace_patch");
                assert!(reason.contains("bytes"), "{reason}");
            }
            other => panic!("refused, got {other:?}"),
        }
    }

    #[test]
    fn a_bad_output_schema_is_refused_naming_the_field_and_a_good_one_travels() {
        for (schema, says) in [
            ("{not json", "not valid json"),
            (r#"{"type": "array"}"#, "JSON object"),
            (
                r#"{"type": "object", "required": "count"}"#,
                "not a valid JSON Schema",
            ),
        ] {
            let req = pb::SubmitRequest {
                agent: "general".into(),
                prompt: "work".into(),
                output_schema: schema.into(),
                ..Default::default()
            };
            match build(req, None) {
                Err(CoordinatorError::InvalidArgument { field, reason }) => {
                    assert_eq!(field, "output_schema");
                    assert!(reason.contains(says), "{schema}: {reason}");
                }
                other => panic!("{schema} refused, got {other:?}"),
            }
        }
        let schema = r#"{"type": "object", "required": ["count"]}"#;
        let req = pb::SubmitRequest {
            agent: "general".into(),
            prompt: "work".into(),
            output_schema: schema.into(),
            ..Default::default()
        };
        let task = build(req, None).expect("valid");
        assert_eq!(task.request.output_schema.as_deref(), Some(schema));
    }

    #[test]
    fn a_bad_git_context_ref_is_refused_naming_context_refs() {
        let req = pb::SubmitRequest {
            agent: "general".into(),
            prompt: "work".into(),
            context_refs: vec![pb::ContextRef {
                r#type: "git".into(),
                id: "main".into(),
                uri: "ext::sh -c id".into(),
            }],
            ..Default::default()
        };
        match build(req, None) {
            Err(CoordinatorError::InvalidArgument { field, .. }) => {
                assert_eq!(field, "context_refs")
            }
            other => panic!("refused, got {other:?}"),
        }
    }

    fn agents(request: &TaskRequest) -> Vec<&str> {
        request
            .inherited_permission
            .iter()
            .map(|layer| layer.agent.as_str())
            .collect()
    }

    #[test]
    fn a_child_inherits_its_parents_rules_and_everything_the_parent_inherited() {
        let root = submit("plan", None);
        assert!(
            root.inherited_permission.is_empty(),
            "a root inherits nothing"
        );

        let child = submit("reviewer", Some(&root));
        assert_eq!(agents(&child), ["plan"]);
        assert_eq!(
            child.inherited_permission[0].rules, root.agent_spec.permission,
            "the parent's rules as they were resolved for it"
        );

        let grandchild = submit("general", Some(&child));
        assert_eq!(agents(&grandchild), ["reviewer", "plan"], "nearest first");

        // `general` has no rules of its own: nothing to add, the bounds carry on.
        let great = submit("explore", Some(&grandchild));
        assert_eq!(agents(&great), ["reviewer", "plan"]);
    }
}
