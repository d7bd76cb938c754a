//! Submit: validation, building the envelope, and the group-commit batcher.
//!
//! Every `Submit` is validated and turned into a [`NewTask`], then handed to the
//! batcher, which writes whatever submits are waiting in one transaction (tasks and
//! outbox rows together) and wakes the relay. Under load this is group commit; when idle
//! a batch holds one submit and adds no delay.

use std::sync::Arc;

use chrono::Utc;
use futures::StreamExt;
use prost::Message;
use sha2::{Digest, Sha256};
use taskwire_agent::agent::AgentName;
use taskwire_agent::builtin::AgentRegistry;
use taskwire_protocol::{Attachment, ContextRef, SessionId, TaskId, TaskRequest, TraceId, pb, time, value};
use taskwire_store::{InsertOutcome, NewTask, Store};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{CoordinatorConfig, CoordinatorError};

/// Most submits written in one transaction.
const MAX_BATCH: usize = 512;
/// Transactions in flight at once.
const CONCURRENT_BATCHES: usize = 4;
/// Largest attempt budget a submit may ask for.
const MAX_ATTEMPTS_LIMIT: u32 = 20;

type Reply = oneshot::Sender<Result<InsertOutcome, CoordinatorError>>;

/// Hands validated submits to the batcher.
#[derive(Clone)]
pub struct Submitter {
    tx: mpsc::Sender<(NewTask, Reply)>,
}

impl Submitter {
    /// Starts the batcher loop; it stops when `shutdown` fires and the queue drains.
    pub fn start(store: Store, relay_wake: Arc<Notify>, shutdown: CancellationToken) -> Self {
        let (tx, rx) = mpsc::channel::<(NewTask, Reply)>(8 * MAX_BATCH);
        tokio::spawn(async move {
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .take_until(shutdown.cancelled_owned())
                .ready_chunks(MAX_BATCH)
                .for_each_concurrent(CONCURRENT_BATCHES, |batch| {
                    let store = store.clone();
                    let relay_wake = relay_wake.clone();
                    async move {
                        let (tasks, replies): (Vec<NewTask>, Vec<Reply>) = batch.into_iter().unzip();
                        match store.insert_tasks(&tasks).await {
                            Ok(outcomes) => {
                                relay_wake.notify_one();
                                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                                    let _ = reply.send(Ok(outcome));
                                }
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, batch = tasks.len(), "submit batch failed");
                                let unavailable = e.is_unavailable();
                                let msg = e.to_string();
                                for reply in replies {
                                    // Store errors are not `Clone`: each waiter gets the message.
                                    let err = if unavailable {
                                        CoordinatorError::Unavailable(msg.clone())
                                    } else {
                                        CoordinatorError::Internal(msg.clone())
                                    };
                                    let _ = reply.send(Err(err));
                                }
                            }
                        }
                    }
                })
                .await;
            tracing::debug!("submit batcher stopped");
        });
        Self { tx }
    }

    /// Writes one task (with whatever else is waiting) and returns its outcome.
    pub async fn submit(&self, task: NewTask) -> Result<InsertOutcome, CoordinatorError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send((task, reply))
            .await
            .map_err(|_| CoordinatorError::Internal("coordinator is shutting down".to_owned()))?;
        rx.await.map_err(|_| CoordinatorError::Internal("coordinator is shutting down".to_owned()))?
    }
}

/// What a parent contributes to a child submit.
pub struct ParentInfo {
    pub task_id: TaskId,
    pub trace_id: TraceId,
    pub depth: u32,
}

/// Validates a `SubmitRequest` and builds the task to insert.
pub fn build_task(
    cfg: &CoordinatorConfig,
    registry: &AgentRegistry,
    subjects: &taskwire_bus::Subjects,
    req: pb::SubmitRequest,
    parent: Option<ParentInfo>,
) -> Result<NewTask, CoordinatorError> {
    if req.agent.is_empty() {
        return Err(CoordinatorError::invalid("agent", "is required"));
    }
    let agent_name: AgentName =
        req.agent.parse().map_err(|e| CoordinatorError::invalid("agent", format!("{e}")))?;
    let spec = registry
        .get(&agent_name)
        .ok_or_else(|| CoordinatorError::NotFound(format!("agent `{}`", req.agent)))?;
    if req.prompt.trim().is_empty() {
        return Err(CoordinatorError::invalid("prompt", "is required and must not be blank"));
    }
    if req.prompt.len() > cfg.max_prompt_bytes {
        return Err(CoordinatorError::invalid(
            "prompt",
            format!("is {} bytes, more than the limit of {} bytes", req.prompt.len(), cfg.max_prompt_bytes),
        ));
    }
    let now = Utc::now();
    let deadline = time::opt_from_wire("deadline", req.deadline.as_ref())?;
    if let Some(d) = deadline
        && d <= now
    {
        return Err(CoordinatorError::invalid("deadline", format!("{d} is in the past")));
    }
    let max_attempts = req.max_attempts.unwrap_or(cfg.default_max_attempts);
    if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
        return Err(CoordinatorError::invalid("max_attempts", format!("must be between 1 and {MAX_ATTEMPTS_LIMIT}")));
    }
    if req.max_steps == Some(0) {
        return Err(CoordinatorError::invalid("max_steps", "must be at least 1"));
    }
    let digest = {
        // The digest covers what the client asked for, so a retried submit matches.
        let mut h = Sha256::new();
        h.update(req.encode_to_vec());
        format!("{:x}", h.finalize())
    };
    let trace_id = match (&parent, req.trace_id.as_str()) {
        (Some(p), _) => p.trace_id,
        (None, "") => TraceId::generate(),
        (None, t) => TraceId::parse_field("trace_id", t)?,
    };
    // The API layer has set the tenant from the caller's token (or the request).
    let tenant = if req.tenant.is_empty() { "default".to_owned() } else { req.tenant };
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
            .map(|c| ContextRef { kind: c.r#type, id: c.id, uri: c.uri })
            .collect(),
        attachments: req.attachments.into_iter().map(Attachment::from).collect(),
        auth_scope: req.auth_scope,
        idempotency_key: (!req.idempotency_key.is_empty()).then_some(req.idempotency_key),
        deadline,
        resume_token: match req.resume_token.as_str() {
            "" => None,
            t => Some(SessionId::parse_field("resume_token", t)?),
        },
        model: req.model.filter(|m| !m.is_empty()),
        max_steps: req.max_steps,
        command: (!req.command.is_empty()).then_some(req.command),
        depth: parent.as_ref().map_or(0, |p| p.depth + 1),
        attempt: 0,
        agent_spec: pb::AgentSpec::from(spec),
        created_at: now,
        max_attempts,
    };
    let size = pb::TaskRequest::from(&request).encoded_len();
    if size > cfg.max_request_bytes {
        return Err(CoordinatorError::invalid(
            "request",
            format!("encodes to {size} bytes, more than the limit of {} bytes", cfg.max_request_bytes),
        ));
    }
    Ok(NewTask { request, digest, subject: subjects.tasks(&cfg.queue) })
}
