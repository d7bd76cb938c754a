//! Handling of one task message: decode, claim, run, report, settle.

use backon::BackoffBuilder as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use taskwire_agent::output_schema::Structured;
use taskwire_agent::provenance::Source;
use taskwire_agent::{SessionOutcome, SessionStatus, ToolRegistry};
use taskwire_bus::messages::{ClaimRequest, ClaimVerdict, DeadLetter};
use taskwire_bus::{AgentSpecs, Bus, Delivery, Dispatched, Malformed, Subjects};
use taskwire_llm::Provider;
use taskwire_protocol::lifecycle::{self, Report};
use taskwire_protocol::{
    ErrorCode, Provenance, ResultErrorCode, SessionId, TaskError, TaskRequest, TaskResult,
    TaskStatus, ToolCallSummary, WorkerId,
};

use crate::cancel::{Running, StopReason};
use crate::outcome::{Disposition, retry_delay};
use crate::session::StartError;

/// How long a message that could not run now (the coordinator unreachable, the tenant
/// or session busy) waits before it is offered again: one second per delivery so far,
/// at most 30 s. Every delivery counts towards JetStream's `max_deliver`, so the wait
/// grows to ride out a long coordinator outage without spending the budget.
fn not_now_delay(delivered: u64) -> Duration {
    Duration::from_secs(delivered.clamp(1, 30))
}

/// What every task handler shares.
pub struct Context {
    /// Typed worker requests and publishes (its claim timeout is the configured one).
    pub bus: Bus,
    /// The agent specs dispatched requests name by digest, fetched once each.
    pub specs: AgentSpecs,
    /// Claims, batched with the other sessions' claims of the same moment.
    pub claims: taskwire_bus::claims::Claimer,
    /// The patch bucket: changes too large for a message are handed over through it.
    pub patches: taskwire_bus::Patches,
    pub subjects: Subjects,
    pub worker_id: WorkerId,
    pub provider: Arc<dyn Provider>,
    pub tools: ToolRegistry,
    /// The MCP servers sessions use (shipped with their agent specs).
    pub mcp: taskwire_agent::mcp::McpPool,
    /// Tool metrics, for the tools of a session's MCP servers.
    pub metrics: crate::metrics::Metrics,
    pub workspaces: taskwire_workspaces::Workspaces,
    /// The base's files as the system prompt of a session tells them before its
    /// workspace is made.
    pub base_facts: crate::workspace::BaseFacts,
    pub default_model: String,
    pub running: Running,
    pub retry_base_delay: Duration,
    pub retry_max_delay: Duration,
    pub approval_timeout: Duration,
    /// Instruction files for every session's system prompt.
    pub instructions: Vec<String>,
    /// Context windows (and prices) by model name.
    pub models: taskwire_llm::ModelCatalogue,
    /// The share of the window that triggers compaction; `None`: never.
    pub compaction_threshold: Option<f64>,
    /// Title new root sessions.
    pub titles: bool,
    /// The model titles are written with, when not the session's.
    pub small_model: Option<String>,
    /// Compaction summaries go to the small model.
    pub compact_with_small_model: bool,
    /// Ask providers to cache each session's repeated prefix.
    pub prompt_caching: bool,
    /// Runs the hooks sessions' specs carry.
    pub hooks: taskwire_agent::hooks::HookRunner,
}

/// The claim that lets this worker run one attempt.
pub use taskwire_bus::messages::Claim;

/// Runs one task message to its disposition.
///
/// A session spends most of its life waiting on the model, and a waiting task holds
/// room for the largest future any of its steps may run: so the steps before and
/// after the session (the claim, the result's patch and publish, the workspace's
/// removal) and the session itself are boxed, each allocated only while it runs, and
/// a future handed down through several async functions is boxed once rather than
/// copied into each of their states.
///
/// The request itself is boxed too: at about a kilobyte it would otherwise take room
/// in each future it passes through.
pub async fn handle(
    ctx: &Context,
    msg: &Delivery<()>,
    dispatched: Result<Dispatched, Malformed>,
) -> Disposition {
    let delivered = msg.delivered;
    let later = Disposition::Retry {
        delay: Some(not_now_delay(delivered)),
    };
    let dispatched = match dispatched {
        Ok(d) => d,
        // Not a request: it never will run.
        Err(m) => return Box::pin(dead_letter(ctx, msg, &m.error.to_string(), None)).await,
    };
    let request = match Box::pin(ctx.specs.resolve(dispatched)).await {
        Ok(r) => Box::new(r),
        // Not a request, or one naming a spec no coordinator has: it never will run.
        Err(e) if matches!(e.code(), ErrorCode::InvalidArgument | ErrorCode::NotFound) => {
            let reason = e.to_string();
            return Box::pin(dead_letter(ctx, msg, &reason, None)).await;
        }
        // No coordinator answered (or none of this version yet): offered again later.
        Err(e) => {
            tracing::warn!(error = %e, "agent spec lookup failed, retrying later");
            return later;
        }
    };
    let task_id = request.task_id;
    let claim = ClaimRequest {
        task: task_id,
        worker: ctx.worker_id.clone(),
        delivery: delivered,
    };
    let claim = match Box::pin(ctx.claims.claim(claim)).await {
        Ok(ClaimVerdict::Granted(claim)) => claim,
        Ok(ClaimVerdict::Busy { .. }) => {
            tracing::debug!(task.id = %task_id, "tenant at its running limit, retrying later");
            return later;
        }
        Ok(ClaimVerdict::Finished { reason }) => {
            tracing::debug!(task.id = %task_id, reason = %reason, "task already finished, dropping");
            return Disposition::Done;
        }
        // No such task, or a request the coordinator cannot read: it never will run.
        Err(e) if matches!(e.code(), ErrorCode::NotFound | ErrorCode::InvalidArgument) => {
            let reason = format!("claim refused: {e}");
            return Box::pin(dead_letter(ctx, msg, &reason, Some(task_id))).await;
        }
        Err(e) => {
            tracing::warn!(task.id = %task_id, error = %e, "claim failed, retrying later");
            return later;
        }
    };
    let session_id = request.resume_token.unwrap_or_else(SessionId::generate);
    let span = crate::spans::invoke_agent(&request, claim.attempt, &ctx.worker_id, session_id);
    // The message is kept from redelivery by the worker's liveness thread
    // (`crate::liveness`), from the pull until it is settled.
    Box::pin(span.instrument(run_claimed(ctx, msg, request, claim, session_id))).await
}

async fn run_claimed(
    ctx: &Context,
    msg: &Delivery<()>,
    request: Box<TaskRequest>,
    claim: Claim,
    session_id: SessionId,
) -> Disposition {
    let started = Instant::now();
    let guard = ctx.running.register(request.task_id);
    let stop = guard.handle.clone();

    let ran = Box::pin(crate::session::run(ctx, &request, claim, session_id, &stop)).await;
    drop(guard);
    // What follows the session is boxed as well: a waiting session holds no room for it.
    Box::pin(report(
        ctx, msg, &request, claim, session_id, started, &stop, ran,
    ))
    .await
}

/// Builds the attempt's result from how its session ran, publishes it, removes the
/// workspace, and says how the message is settled.
#[allow(clippy::too_many_arguments)]
async fn report(
    ctx: &Context,
    msg: &Delivery<()>,
    request: &TaskRequest,
    claim: Claim,
    session_id: SessionId,
    started: Instant,
    stop: &crate::cancel::StopHandle,
    ran: Result<crate::session::Ran<'_>, StartError>,
) -> Disposition {
    let task_id = request.task_id;

    if stop.reason() == Some(StopReason::Shutdown) {
        tracing::info!(task.id = %task_id, "worker shutting down, releasing task");
        return Disposition::Retry { delay: None };
    }
    let ended = |outcome| {
        result_of(
            request,
            claim,
            session_id,
            &ctx.worker_id,
            outcome,
            stop.reason(),
            started,
        )
    };
    let (result, workspace) = match ran {
        Ok(ran) => {
            let mut workspace = ran.workspace;
            let mut result = TaskResult {
                transcript_json: ran.transcript,
                title: ran.title,
                provenance: ran.provenance.into_iter().map(provenance_of).collect(),
                ..ended(ran.outcome)
            };
            match ran.structured {
                Structured::NotChecked => {}
                Structured::Valid(value) => result.structured = Some(value),
                Structured::Mismatch(errors) => {
                    tracing::info!(task.id = %task_id, "answer does not satisfy the output schema after one correction");
                    result.status = TaskStatus::Error;
                    result.errors.push(TaskError {
                        code: ResultErrorCode::OutputSchemaMismatch.as_str().into(),
                        message: format!(
                            "the answer does not satisfy the output schema, also after one correction:\n{errors}"
                        ),
                        retryable: false,
                    });
                }
            }
            match Box::pin(workspace.result_patch()).await {
                Ok((patch, patch_ref)) => {
                    result.patch = patch;
                    result.patch_ref = patch_ref;
                }
                Err(error) => {
                    tracing::warn!(task.id = %task_id, error = %error.message, "result without its patch, workspace kept");
                    result.errors.push(error);
                }
            }
            (result, Some(workspace))
        }
        Err(StartError::Unavailable(reason)) => {
            let delivered = msg.delivered;
            tracing::warn!(task.id = %task_id, reason = %reason, "session could not start, retrying later");
            return Disposition::Retry {
                delay: Some(not_now_delay(delivered)),
            };
        }
        Err(StartError::Invalid(reason)) => (
            TaskResult {
                errors: vec![TaskError {
                    code: ResultErrorCode::SessionNotStarted.as_str().into(),
                    message: reason,
                    retryable: false,
                }],
                ..result_of(
                    request,
                    claim,
                    session_id,
                    &ctx.worker_id,
                    empty_outcome(),
                    None,
                    started,
                )
            },
            None,
        ),
    };
    let disposition = Box::pin(publish_result(ctx, &result)).await;
    // After the result is recorded (or will be again by another attempt, which makes
    // a workspace of its own).
    if let Some(workspace) = workspace {
        Box::pin(workspace.remove()).await;
    }
    match disposition {
        Disposition::Done if result.retry_scheduled => {
            let delay = retry_delay(claim.attempt, ctx.retry_base_delay, ctx.retry_max_delay);
            tracing::info!(
                task.id = %result.task_id,
                task.attempt = claim.attempt,
                delay_ms = delay.as_millis() as u64,
                "retryable failure, retrying later"
            );
            Disposition::Retry { delay: Some(delay) }
        }
        other => other,
    }
}

/// Drives `session` while enforcing the deadline: at the deadline the attempt is
/// stopped, and `session` ends as it does when cancelled.
pub async fn supervise<T>(
    session: impl Future<Output = T>,
    deadline: Option<chrono::DateTime<chrono::Utc>>,
    stop: &crate::cancel::StopHandle,
) -> T {
    let mut session = std::pin::pin!(session);
    let until_deadline =
        deadline.map(|d| (d - chrono::Utc::now()).to_std().unwrap_or(Duration::ZERO));
    let deadline_sleep = tokio::time::sleep(until_deadline.unwrap_or(Duration::MAX / 4));
    let mut deadline_sleep = std::pin::pin!(deadline_sleep);
    let mut deadline_fired = false;
    loop {
        tokio::select! {
            outcome = &mut session => return outcome,
            _ = &mut deadline_sleep, if until_deadline.is_some() && !deadline_fired => {
                deadline_fired = true;
                stop.stop(StopReason::Deadline);
            }
        }
    }
}

fn provenance_of(source: Source) -> Provenance {
    Provenance {
        source: source.source,
        uri: source.uri,
        excerpt: source.excerpt,
    }
}

fn empty_outcome() -> SessionOutcome {
    SessionOutcome {
        status: SessionStatus::Error,
        text: String::new(),
        usage: Default::default(),
        own_usage: Default::default(),
        steps: 0,
        tool_calls: Vec::new(),
        messages: Vec::new(),
        transcript: taskwire_agent::transcript::Transcript::default(),
        error: None,
    }
}

/// How the attempt ended, as a result: the session's status, and its error saying
/// whether it may pass. The lifecycle retries a retryable error while the attempt
/// budget lasts (`retry_scheduled`: this worker redelivers the task after its backoff)
/// and dead-letters the task when it is spent.
fn result_of(
    request: &TaskRequest,
    claim: Claim,
    session_id: SessionId,
    worker_id: &WorkerId,
    outcome: SessionOutcome,
    stopped: Option<StopReason>,
    started: Instant,
) -> TaskResult {
    let status = match (outcome.status, stopped) {
        (SessionStatus::Completed, _) => TaskStatus::Completed,
        (SessionStatus::MaxSteps, _) => TaskStatus::MaxSteps,
        (SessionStatus::BudgetExceeded, _) => TaskStatus::BudgetExceeded,
        (SessionStatus::Cancelled, Some(StopReason::Deadline)) => TaskStatus::DeadlineExceeded,
        (SessionStatus::Cancelled, _) => TaskStatus::Cancelled,
        (SessionStatus::Error, _) => TaskStatus::Error,
    };
    let report = Report {
        status,
        retryable: outcome.error.as_ref().is_some_and(|e| e.retryable)
            && status == TaskStatus::Error,
    };
    // The lifecycle decides, as the store will from the same report and budget.
    let retry_scheduled =
        lifecycle::after_attempt(report, !claim.last_attempt) == Ok(TaskStatus::Queued);
    let code = match status {
        TaskStatus::BudgetExceeded => ResultErrorCode::BudgetExceeded,
        _ => ResultErrorCode::SessionError,
    };
    let errors = outcome
        .error
        .map(|e| {
            vec![TaskError {
                code: code.as_str().into(),
                message: e.message,
                retryable: e.retryable,
            }]
        })
        .unwrap_or_default();
    TaskResult {
        task_id: request.task_id,
        trace_id: request.trace_id,
        attempt: claim.attempt,
        claim_epoch: claim.epoch,
        status,
        text: outcome.text,
        structured: None,
        tool_calls: outcome
            .tool_calls
            .into_iter()
            .map(|t| ToolCallSummary {
                call_id: t.call_id,
                tool: t.tool,
                title: t.title,
                ok: t.ok,
            })
            .collect(),
        errors,
        usage: crate::cost::to_protocol(outcome.usage),
        own_usage: crate::cost::to_protocol(outcome.own_usage),
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        steps: outcome.steps,
        session_id: Some(session_id),
        worker_id: Some(worker_id.clone()),
        retry_scheduled,
        transcript_json: None,
        patch: String::new(),
        title: None,
        provenance: Vec::new(),
        // Called in the attempt's span: the result write hangs under it.
        traceparent: taskwire_traces::Span::current().traceparent(),
        patch_ref: None,
    }
}

/// Stores the result in the RESULTS stream; the task message is acked only after
/// JetStream confirms it.
async fn publish_result(ctx: &Context, result: &TaskResult) -> Disposition {
    // Five tries, 200 ms, 400 ms, 800 ms and 1.6 s apart.
    let mut delays = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(200))
        .with_factor(2.0)
        .with_max_times(4)
        .build();
    for attempt in 0u32.. {
        match ctx.bus.publish_result(result).await {
            Ok(()) => {
                tracing::debug!(task.id = %result.task_id, status = %result.status, "result published");
                return Disposition::Done;
            }
            Err(e) => {
                let Some(delay) = delays.next() else { break };
                tracing::warn!(task.id = %result.task_id, attempt, error = %e, "failed to publish result, retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
    // Let JetStream redeliver: the next attempt's fenced result replaces this one.
    Disposition::Retry {
        delay: Some(Duration::from_secs(5)),
    }
}

/// Records a message that can never run, then rejects it.
async fn dead_letter(
    ctx: &Context,
    msg: &Delivery<()>,
    reason: &str,
    task: Option<taskwire_protocol::TaskId>,
) -> Disposition {
    tracing::warn!(subject = %msg.subject(), reason = %reason, "dead-lettering task message");
    let letter = DeadLetter {
        subject: msg.subject().to_owned(),
        reason: reason.to_owned(),
        payload: msg.payload().to_vec(),
        worker_id: ctx.worker_id.to_string(),
        task,
    };
    match ctx.bus.publish_dead_letter(&letter).await {
        Ok(()) => Disposition::Reject {
            reason: reason.to_owned(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "failed to record dead letter, retrying later");
            Disposition::Retry {
                delay: Some(Duration::from_secs(5)),
            }
        }
    }
}
