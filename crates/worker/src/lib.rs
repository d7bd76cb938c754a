//! The taskwire worker: stateless, database-free, horizontally scalable.
//!
//! Pulls `TaskRequest`s from the shared durable consumer of its queue, claims each from
//! the coordinator (getting a fencing epoch), runs the agent session, streams progress,
//! publishes the result and only then acknowledges the message.
//!
//! - [`config`]: the settings, [`WorkerConfig`].
//! - [`cost`]: usage and cost between the session and the wire; a request's budget.
//! - [`task`]: one message, from decode to disposition.
//! - [`outcome`]: [`outcome::Disposition`] and the one place it maps onto the bus's
//!   `Settlement` (ack, nak, term).
//! - [`liveness`]: in-progress acks for every held task message, from a thread and a
//!   connection of their own.
//! - [`limits`]: the models' rate budgets shared by the fleet (the limits bucket).
//! - [`progress`]: ordered progress publishing.
//! - [`cancel`]: running sessions, cancel notices, stop reasons.
//! - [`session`]: one attempt's agent session (workspace, transcript, subtask, loop).
//! - [`host`]: the session's link to the fleet: child tasks and approvals.
//! - [`sandbox`]: the command sandbox chosen at start.
//! - [`health`]: `/healthz`, `/readyz` and `/metrics` over HTTP (`--http-listen`).
//! - [`metrics`]: the worker's metrics: sessions, model calls, tool calls.
//! - [`workspace`]: the task's workspace: made, started from inherited and earlier
//!   changes, and its patches out (result, children) and in (a child's).
//! - [`saved`]: the transcript as saved, with the workspace's state beside it.
//! - [`spans`]: the attempt's trace span (`invoke_agent`).
//! - [`error`]: the error type, [`WorkerError`].

pub mod cancel;
pub mod config;
pub mod cost;
pub mod error;
pub mod health;
pub mod host;
pub mod limits;
pub mod liveness;
pub mod metrics;
pub mod outcome;
pub mod progress;
pub mod sandbox;
pub mod saved;
pub mod session;
pub mod spans;
pub mod task;
pub mod workspace;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use taskwire_agent::ToolRegistry;
use taskwire_agent::tools::BashTool;
use taskwire_bus::{Bus, BusConfig, Subjects};

use taskwire_llm::router::{ANTHROPIC_PREFIX, ModelRouter, OPENAI_PREFIX, RouterConfig};
use taskwire_llm::{AnthropicClient, AnthropicConfig, OpenAiClient, OpenAiConfig, Provider};
use taskwire_protocol::WorkerId;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub use config::{ModelConfig, WorkerConfig};
pub use error::WorkerError;

use crate::cancel::{Running, StopReason};

/// Longest a pull request waits for messages before it is renewed.
const PULL_EXPIRES: Duration = Duration::from_secs(5);

/// Runs a worker with the model clients from `config.model` until `shutdown`: the
/// OpenAI-compatible endpoint for every model, except `anthropic/<model>` when an
/// Anthropic endpoint is configured.
pub async fn run(config: WorkerConfig, shutdown: CancellationToken) -> Result<(), WorkerError> {
    let m = &config.model;
    let mut openai = OpenAiConfig::new(m.base_url.clone());
    openai.api_key = m.api_key.clone();
    openai.stream = m.stream;
    openai.request_timeout = m.request_timeout;
    openai.max_retries = m.max_retries;
    // Throttled calls are retried by the worker's `LimitedProvider`, for the fleet.
    openai.retry_throttled = false;
    let mut providers: HashMap<String, Arc<dyn Provider>> = HashMap::new();
    providers.insert(
        OPENAI_PREFIX.to_owned(),
        Arc::new(OpenAiClient::new(openai)?),
    );
    if let Some(base_url) = &m.anthropic_base_url {
        let mut anthropic = AnthropicConfig::new(base_url.clone());
        anthropic.http.api_key = m.anthropic_api_key.clone();
        anthropic.http.stream = m.stream;
        anthropic.http.request_timeout = m.request_timeout;
        anthropic.http.max_retries = m.max_retries;
        anthropic.http.retry_throttled = false;
        providers.insert(
            ANTHROPIC_PREFIX.to_owned(),
            Arc::new(AnthropicClient::new(anthropic)?),
        );
    }
    let router: Arc<dyn Provider> = Arc::new(ModelRouter::new(RouterConfig {
        default: OPENAI_PREFIX.to_owned(),
        providers,
    })?);
    // Models the catalogue declares `api = "responses"` go to the Responses API of
    // the same OpenAI-compatible endpoint.
    let responses: Vec<String> = config
        .models
        .responses_models()
        .map(str::to_owned)
        .collect();
    let provider = if responses.is_empty() {
        router
    } else {
        let mut http = taskwire_llm::ResponsesConfig::new(m.base_url.clone());
        http.api_key = m.api_key.clone();
        http.stream = m.stream;
        http.request_timeout = m.request_timeout;
        http.max_retries = m.max_retries;
        http.retry_throttled = false;
        let client = taskwire_llm::ResponsesClient::new(http)?;
        Arc::new(taskwire_llm::ModelSplit::new(
            router,
            Arc::new(client),
            responses,
        ))
    };
    run_with_provider(config, provider, shutdown).await
}

/// Runs a worker with the given model provider until `shutdown`.
///
/// On shutdown it drains: it stops pulling (and `/readyz` turns 503), lets running
/// sessions finish for `config.drain_grace`, then stops the rest and releases their
/// tasks (nak) so that another worker picks them up at once.
/// Enters a user and mount namespace of the process's own, so that its workspaces can
/// be overlays; see `taskwire_sandbox::mounts`. Call it while the process has a single
/// thread, before the runtime starts.
pub fn enter_private_mounts() -> Result<(), taskwire_sandbox::SandboxError> {
    taskwire_sandbox::mounts::enter_private_mounts()
}

/// Whether workspaces may be overlays: asked for, and this process entered a mount
/// namespace of its own at start (`taskwire_sandbox::mounts`), which a worker run
/// inside another program (its tests) has not. Says why not, once.
fn overlays_usable(config: &WorkerConfig) -> bool {
    if !config.workspace_overlays {
        return false;
    }
    match taskwire_sandbox::mounts::private_mounts() {
        Ok(()) => {
            tracing::info!("workspaces of a git base are overlays of a shared checkout");
            true
        }
        Err(reason) => {
            tracing::info!(reason = %reason, "workspaces are copies: no mount namespace of the worker's own");
            false
        }
    }
}

pub async fn run_with_provider(
    config: WorkerConfig,
    provider: Arc<dyn Provider>,
    shutdown: CancellationToken,
) -> Result<(), WorkerError> {
    let worker_id = config
        .worker_id
        .clone()
        .map_or_else(WorkerId::generate, WorkerId::new);
    let readiness = health::Readiness::default();
    let metrics = metrics::Metrics::new();
    // Priced first, so that the measured calls carry their cost.
    let provider: Arc<dyn Provider> = Arc::new(taskwire_llm::PricedProvider::new(
        provider,
        config.models.clone(),
    ));
    let provider: Arc<dyn Provider> =
        Arc::new(metrics::MeteredProvider::new(provider, metrics.clone()));
    let http_stop = CancellationToken::new();
    // Dropped (and the listener stopped) on every way out of this function.
    let _http_stop_guard = http_stop.clone().drop_guard();
    let http = match config.http_listen {
        Some(addr) => Some(health::HealthListener::bind(addr).await?.spawn(
            readiness.clone(),
            &metrics,
            http_stop.clone(),
        )),
        None => None,
    };
    let subjects = Subjects::new(&config.prefix);
    let bus = Bus::connect(
        &config.nats_url,
        worker_id.as_str(),
        &config.nats,
        subjects.clone(),
    )
    .await?
    .with_timeout(taskwire_bus::Method::Claim, config.claim_timeout)
    .with_timeout(taskwire_bus::Method::ClaimBatch, config.claim_timeout);
    readiness.set_bus(bus.clone());
    let streams = BusConfig {
        subjects: subjects.clone(),
        ack_wait: config.ack_wait,
        ..BusConfig::default()
    };
    // The coordinator creates the streams; a worker started first waits for them.
    tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        _ = bus.wait_for_streams() => {}
    }
    // Every call keeps to its model's budget, shared with the fleet.
    let budgets: Arc<dyn taskwire_llm::limits::BudgetStore> =
        match limits::FleetBudgets::open(&bus).await {
            Ok(budgets) => Arc::new(budgets),
            Err(reason) => {
                tracing::warn!(%reason, "rate budgets are this worker's own, not the fleet's");
                Arc::new(taskwire_llm::limits::LocalBudgets::default())
            }
        };
    let provider: Arc<dyn Provider> = Arc::new(taskwire_llm::LimitedProvider::new(
        provider,
        config.models.clone(),
        budgets,
        Arc::new(metrics.clone()),
        taskwire_llm::limits::LimitSettings::default(),
    ));
    let concurrency = config.concurrency.max(1);
    metrics.set_capacity(concurrency);
    let consumer = bus.consume_tasks(&streams, &config.queue, -1).await?;
    // Beats as often as the stricter of this worker's ack wait and the consumer's
    // (another worker may have made it, with other settings).
    let ack_wait = consumer.ack_wait().min(config.ack_wait);
    let liveness = liveness::Liveness::start(
        &config.nats_url,
        &format!("{worker_id}-liveness"),
        &config.nats,
        liveness::beat_period(ack_wait),
    )
    .await?;

    let running = Running::default();
    let cancel_notices = bus.cancel_notices().await?;
    let listener_stop = CancellationToken::new();
    let listener = tokio::spawn(cancel::listen(
        cancel_notices,
        running.clone(),
        listener_stop.clone(),
    ));

    let mut tools = ToolRegistry::builtin();
    let command_sandbox = sandbox::command_sandbox(&config).await;
    tools.register(BashTool::new(command_sandbox.clone()));
    let hooks =
        taskwire_agent::hooks::HookRunner::new(command_sandbox.clone(), config.hook_urls.clone());
    let mcp = taskwire_agent::mcp::McpPool::new(command_sandbox);
    let tools = tools.wrap_each(|tool| metrics::MeteredTool::wrap(tool, metrics.clone()));
    let workspaces = taskwire_workspaces::Workspaces::open(taskwire_workspaces::WorkspacesConfig {
        base: config.workspace.clone(),
        dir: config.workspaces_dir.clone(),
        keep: config.keep_workspaces,
        owner: worker_id.to_string(),
        overlays: overlays_usable(&config),
    })
    .await?;
    let ctx = Arc::new(task::Context {
        specs: taskwire_bus::AgentSpecs::new(bus.clone()),
        // Lives as long as the context: the loop ends when the last handle is dropped.
        claims: taskwire_bus::claims::Claimer::start(bus.clone(), CancellationToken::new()),
        patches: bus.patches(),
        bus: bus.clone(),
        subjects,
        worker_id: worker_id.clone(),
        provider,
        tools,
        mcp,
        metrics: metrics.clone(),
        workspaces,
        base_facts: Default::default(),
        default_model: config.model.default_model.clone(),
        running: running.clone(),
        retry_base_delay: config.retry_base_delay,
        retry_max_delay: config.retry_max_delay,
        approval_timeout: config.approval_timeout,
        instructions: config.instructions.clone(),
        models: config.models.clone(),
        compaction_threshold: config.compaction_threshold,
        titles: config.titles,
        small_model: config.small_model.clone(),
        compact_with_small_model: config.compact_with_small_model,
        prompt_caching: config.prompt_caching,
        hooks,
    });
    readiness.consumer_ready();
    tracing::info!(worker.id = %worker_id, queue = %config.queue, concurrency, "worker pulling tasks");

    let permits = Arc::new(Semaphore::new(concurrency));
    let mut handlers = tokio::task::JoinSet::new();
    'pull: loop {
        // Wait for a free slot, then ask for as many messages as there are free slots.
        let first = tokio::select! {
            _ = shutdown.cancelled() => break 'pull,
            p = permits.clone().acquire_owned() => p.expect("semaphore is never closed"),
        };
        let mut slots = vec![first];
        while let Ok(p) = permits.clone().try_acquire_owned() {
            slots.push(p);
        }
        // The batch ends early when the connection was re-established meanwhile (a pull
        // request dies with the server it was sent to): then it pulls again at once.
        let mut batch = match consumer.batch(slots.len(), PULL_EXPIRES).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "pull request failed, retrying");
                drop(slots);
                tokio::select! {
                    _ = shutdown.cancelled() => break 'pull,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue 'pull,
                }
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => break 'pull,
                m = batch.next() => m,
            };
            let Some(received) = next else { break };
            let received = match received {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "pull batch error");
                    break;
                }
            };
            let Some(slot) = slots.pop() else {
                // More messages than slots cannot happen (max_messages = slots); release it.
                let release = outcome::Disposition::Retry { delay: None };
                received.settle(release.settlement()).await;
                continue;
            };
            let ctx = ctx.clone();
            let held = metrics.session_started();
            // A malformed message is dead-lettered by the handler, like a request no
            // coordinator can run.
            let (dispatched, delivery) = received.take();
            // Beaten for from now until it is settled.
            let alive = liveness.hold(&delivery);
            handlers.spawn(async move {
                let _held = held;
                let disposition = task::handle(&ctx, &delivery, dispatched).await;
                // Boxed, like every step a session is not waiting in: the task
                // holds room only for what is under way (see `task::handle`).
                Box::pin(delivery.settle(disposition.settlement())).await;
                drop(alive);
                drop(slot);
            });
        }
        while handlers.try_join_next().is_some() {}
    }

    readiness.draining();
    tracing::info!(worker.id = %worker_id, running = running.len(), "worker draining: no new tasks");
    let grace = tokio::time::sleep(config.drain_grace);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            next = handlers.join_next() => if next.is_none() { break },
            _ = &mut grace => {
                tracing::warn!(running = running.len(), "drain grace over, releasing running tasks");
                running.stop_all(StopReason::Shutdown);
                while handlers.join_next().await.is_some() {}
                break;
            }
        }
    }
    listener_stop.cancel();
    let _ = listener.await;
    liveness.stop().await;
    let _ = bus.flush().await;
    http_stop.cancel();
    if let Some(http) = http {
        let _ = http.await;
    }
    tracing::info!(worker.id = %worker_id, "worker stopped");
    Ok(())
}
