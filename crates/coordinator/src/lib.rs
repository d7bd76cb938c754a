//! The taskwire coordinator: the only process that talks to Postgres.
//!
//! - [`api`]: the gRPC `TaskService`.
//! - [`server`]: what serves it: accepted sockets (`TCP_NODELAY`), TLS, health and
//!   reflection (v1 and v1alpha).
//! - [`budget`]: a child submit refused once its tree spent its budget.
//! - [`auth`]: bearer tokens → tenant and scopes; tenant isolation.
//! - [`ownership`]: ids named by callers, looked up with their tenant where they enter.
//! - [`submit`]: validation and the group-commit submit batcher.
//! - [`agents`]: the registry with its agents' wire specs, built once per registry.
//! - [`batch`]: the group-commit loop behind submits.
//! - [`relay`]: publishes the outbox to the JetStream tasks stream.
//! - [`worker_rpc`]: answers workers' requests (served by `taskwire_bus::serve`): child
//!   tasks, lookups, sessions, approvals, and claims through [`claims`].
//! - [`claims`]: answers a batch of claims with fencing epochs.
//! - [`aggregator`]: records results (fenced) and dead letters.
//! - [`advisories`]: dead-letters tasks whose message reached JetStream's max deliveries.
//! - [`watch`]: live progress streaming with replay.
//! - [`commands`]: agent and command registries (reloaded on change) and `RunCommand`.
//! - [`sweeper`]: finishes overdue tasks; cancels what ended parents left running.
//! - [`webhooks`]: POSTs a finished task's result to its `callback_url`, signed.
//! - [`subtrees`]: a task that ends cancels its live descendants.
//! - [`spans`]: the coordinator's trace spans (submit, dispatch, result write).
//! - [`backpressure`]: samples the tasks stream's depth for `Submit`'s bound.
//! - [`http`]: the HTTP listener: `/healthz`, `/readyz`, `/metrics`.
//! - [`rest`]: the HTTP/JSON API on the same listener (`/v1/...`, its OpenAPI document
//!   at `/v1/openapi.json`), with its live (SSE) feeds.
//! - [`dashboard`]: the web dashboard on the same listener (`/`, `/tasks/<id>`), over
//!   that API.
//! - [`metrics`]: the coordinator's metrics and the loop refreshing its gauges.
//! - [`config`], [`error`], [`convert`].
//!
//! [`run`] binds the configured addresses; tests call [`serve`] with a gRPC listener on
//! port 0 (or [`serve_with_http`] with both listeners).

pub mod advisories;
pub mod agents;
pub mod aggregator;
pub mod api;
pub mod auth;
pub mod backpressure;
pub mod batch;
pub mod budget;
pub mod claims;
pub mod commands;
pub mod config;
pub mod convert;
pub mod dashboard;
pub mod effects;
pub mod error;
#[cfg(test)]
mod fixture;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod ownership;
pub mod relay;
pub mod rest;
pub mod schedules;
pub mod server;
pub mod spans;
pub mod submit;
pub mod sweeper;
pub mod waits;
pub mod watch;
pub mod webhooks;
pub mod worker_rpc;

use std::sync::Arc;

use taskwire_bus::{Bus, BusConfig, Subjects};
use taskwire_protocol::pb;
use taskwire_store::Store;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use config::CoordinatorConfig;
pub use error::CoordinatorError;

/// What every part of the coordinator shares.
pub struct State {
    pub config: CoordinatorConfig,
    pub store: Store,
    pub subjects: Subjects,
    /// The NATS connection: typed publishes, consumers, subscriptions and worker
    /// requests.
    pub bus: Bus,
    /// The agent registry (with its agents' wire specs); replaced as a whole when the
    /// agents directory changes.
    pub agents: std::sync::RwLock<Arc<agents::Agents>>,
    /// The slash commands; replaced as a whole when the commands directory changes.
    pub commands: std::sync::RwLock<Arc<taskwire_agent::command::CommandRegistry>>,
    pub submitter: submit::Submitter,
    /// Wakes the outbox relay after a write that queued a dispatch.
    pub relay_wake: Arc<Notify>,
    /// Tasks waiting in the tasks stream (sampled).
    pub queue_depth: backpressure::QueueDepth,
    /// What `/metrics` exposes.
    pub metrics: metrics::Metrics,
    /// The patch bucket: large result patches are read from it and handed out through it.
    pub patches: taskwire_bus::Patches,
    /// Each tenant's result-webhook signing secret.
    pub webhook_secrets: webhooks::Secrets,
}

impl State {
    /// The current agent registry.
    pub fn registry(&self) -> Arc<agents::Agents> {
        self.agents
            .read()
            .expect("registry lock is never poisoned")
            .clone()
    }

    /// The current slash commands.
    pub fn commands(&self) -> Arc<taskwire_agent::command::CommandRegistry> {
        self.commands
            .read()
            .expect("registry lock is never poisoned")
            .clone()
    }

    /// Performs the lifecycle's effects of `changed` ([`effects::perform`]).
    pub async fn perform(&self, changed: &[taskwire_store::Transitioned], why: &str) {
        effects::perform(&self.store, &self.bus, changed, why).await;
    }
}

/// Binds `config.listen` and `config.http_listen` and serves until `shutdown`.
pub async fn run(
    config: CoordinatorConfig,
    shutdown: CancellationToken,
) -> Result<(), CoordinatorError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| CoordinatorError::Serve(format!("failed to bind {}: {e}", config.listen)))?;
    serve(config, listener, shutdown).await
}

/// [`serve_with_http`], binding `config.http_listen` for the HTTP listener.
pub async fn serve(
    config: CoordinatorConfig,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), CoordinatorError> {
    let http = http::bind(config.http_listen).await?;
    serve_with_http(config, listener, http, shutdown).await
}

/// Serves probes and metrics on `http_listener` at once; connects to Postgres and
/// NATS, starts the background loops and serves gRPC on `listener` until `shutdown`;
/// then turns not ready, stops accepting, lets loops finish and returns.
pub async fn serve_with_http(
    config: CoordinatorConfig,
    listener: TcpListener,
    http_listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), CoordinatorError> {
    let metrics = metrics::Metrics::new();
    metrics.set_backlog_limit(config.max_backlog);
    let readiness = http::Readiness::default();
    let http_stop = CancellationToken::new();
    // Dropped (and the listener stopped) on every way out of this function.
    let _http_stop_guard = http_stop.clone().drop_guard();
    let authenticator = match &config.auth_tokens_file {
        Some(path) => auth::Authenticator::from_file(path)?,
        None => {
            tracing::warn!("no auth tokens file configured: the grpc api is open to any caller");
            auth::Authenticator::open()
        }
    };
    let http_api = rest::HttpApi::new(authenticator.clone());
    let http_task = http::spawn(
        http_listener,
        http::router(readiness.clone(), &metrics)
            .merge(rest::routes(http_api.clone()))
            .merge(dashboard::routes())
            .merge(mcp::routes(http_api.clone())),
        http_stop.clone(),
    );
    let tls = server::tls(config.tls_cert.as_deref(), config.tls_key.as_deref())?;
    let store = Store::connect(&config.database_url, config.db_max_connections).await?;
    let subjects = Subjects::new(&config.prefix);
    let bus = Bus::connect(
        &config.nats_url,
        "taskwire-coordinator",
        &config.nats,
        subjects.clone(),
    )
    .await?;
    let streams = BusConfig {
        subjects: subjects.clone(),
        max_queued_tasks: config.max_queued_tasks,
        ack_wait: config.ack_wait,
        patches: taskwire_bus::patches::BucketLimits {
            max_age: config.patches_max_age,
            max_bytes: config.patches_max_bytes,
        },
        ..BusConfig::default()
    };
    bus.ensure_streams(&streams).await?;
    let patches = bus.patches();
    readiness.connected(store.clone(), bus.clone());

    let config_dirs = config.config_dirs();
    if !config_dirs.is_empty() {
        let dirs: Vec<_> = config_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        tracing::info!(dirs = ?dirs, "reading agents and commands");
    }
    let webhook_secrets = match &config.webhook_secrets_file {
        Some(path) => webhooks::Secrets::from_file(path)?,
        None => webhooks::Secrets::default(),
    };
    let (agents, command_registry) = commands::load(&config_dirs);
    let loops = CancellationToken::new();
    let relay_wake = Arc::new(Notify::new());
    let dispatch_window = config.dispatch_window;
    let (handoff, own_rows) =
        relay::Handoff::new(dispatch_window > 0, relay_wake.clone(), relay::OWN_GRACE);
    // The batch loops each keep a connection between their statements.
    let submitter = submit::Submitter::start(store.holding_a_connection(), handoff, loops.clone());
    let state = Arc::new(State {
        config,
        store: store.clone(),
        subjects: subjects.clone(),
        bus: bus.clone(),
        agents: std::sync::RwLock::new(Arc::new(agents.into())),
        commands: std::sync::RwLock::new(Arc::new(command_registry)),
        submitter,
        relay_wake: relay_wake.clone(),
        queue_depth: backpressure::QueueDepth::default(),
        metrics,
        patches: patches.clone(),
        webhook_secrets: webhook_secrets.clone(),
    });

    let mut tasks = tokio::task::JoinSet::new();
    let window = (dispatch_window > 0).then(|| relay::Window {
        size: dispatch_window,
        undelivered: backpressure::Undelivered::default(),
    });
    if let Some(window) = &window {
        tasks.spawn(backpressure::sample_undelivered(
            bus.clone(),
            subjects.tasks_stream(),
            subjects.workers_consumer(&state.config.queue),
            window.undelivered.clone(),
            loops.clone(),
        ));
    }
    tasks.spawn(relay::run(
        store.holding_a_connection(),
        bus.clone(),
        relay_wake,
        own_rows,
        window,
        loops.clone(),
    ));
    tasks.spawn({
        let (state, token) = (state.clone(), loops.clone());
        async move {
            let bus = state.bus.clone();
            let handler = Arc::new(worker_rpc::Handler::new(state));
            if let Err(e) = taskwire_bus::serve(bus, handler, token).await {
                tracing::error!(error = %e, "worker request responder failed to subscribe");
            }
        }
    });
    tasks.spawn(aggregator::run_results(
        bus.clone(),
        patches,
        store.holding_a_connection(),
        state.metrics.clone(),
        loops.clone(),
    ));
    tasks.spawn(aggregator::run_dead_letters(
        bus.clone(),
        store.clone(),
        state.metrics.clone(),
        loops.clone(),
    ));
    tasks.spawn(sweeper::run(state.clone(), loops.clone()));
    tasks.spawn(schedules::scheduler::run(state.clone(), loops.clone()));
    if !config_dirs.is_empty() {
        tasks.spawn(commands::watch(state.clone(), config_dirs, loops.clone()));
    }
    tasks.spawn(advisories::run(
        bus.clone(),
        store.clone(),
        state.metrics.clone(),
        loops.clone(),
    ));
    tasks.spawn(metrics::refresh(state.clone(), loops.clone()));
    let deliverer = webhooks::Deliverer::new(
        api::TaskApi::new(state.clone()),
        webhook_secrets,
        state.config.webhook_policy(),
    )?;
    tasks.spawn(deliverer.run(loops.clone()));
    tasks.spawn(backpressure::run(
        backpressure::Sources {
            bus: bus.clone(),
            tasks_stream: subjects.tasks_stream(),
            results_stream: subjects.results_stream(),
            store: store.clone(),
            window: dispatch_window > 0,
            outbox_cap: i64::try_from(
                state
                    .config
                    .max_backlog
                    .max(u64::try_from(state.config.max_queued_tasks).unwrap_or(0)),
            )
            .unwrap_or(i64::MAX)
            .saturating_add(1),
        },
        state.queue_depth.clone(),
        loops.clone(),
    ));

    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_service_status(
            "taskwire.v1.TaskService",
            tonic_health::ServingStatus::Serving,
        )
        .await;
    let (reflection_v1, reflection_v1alpha) = server::reflection()?;

    let addr = listener
        .local_addr()
        .map_err(|e| CoordinatorError::Serve(e.to_string()))?;
    tracing::info!(%addr, "coordinator serving grpc");
    let incoming = server::incoming(listener);
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        server = server
            .tls_config(tls)
            .map_err(|e| CoordinatorError::Config(format!("invalid tls settings: {e}")))?;
    }
    let task_api = api::TaskApi::new(state);
    http_api.connected(task_api.clone());
    let api = pb::task_service_server::TaskServiceServer::with_interceptor(
        task_api,
        auth::AuthInterceptor(authenticator),
    );
    let result = server
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(api)
        .serve_with_incoming_shutdown(incoming, async move {
            shutdown.cancelled().await;
            readiness.shutting_down();
        })
        .await
        .map_err(|e| CoordinatorError::Serve(e.to_string()));

    loops.cancel();
    while tasks.join_next().await.is_some() {}
    let _ = bus.flush().await;
    http_stop.cancel();
    let _ = http_task.await;
    tracing::info!("coordinator stopped");
    result
}
