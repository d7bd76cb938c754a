//! The taskwire coordinator: the only process that talks to Postgres.
//!
//! - [`api`]: the gRPC `TaskService`.
//! - [`server`]: what serves it: accepted sockets (`TCP_NODELAY`), TLS, health and
//!   reflection (v1 and v1alpha).
//! - [`auth`]: bearer tokens → tenant and scopes; tenant isolation.
//! - [`ownership`]: ids named by callers, looked up with their tenant where they enter.
//! - [`submit`]: validation and the group-commit submit batcher.
//! - [`batch`]: the group-commit loop behind submits.
//! - [`relay`]: publishes the outbox to the JetStream tasks stream.
//! - [`claims`]: answers workers' claims with a fencing epoch.
//! - [`worker_rpc`]: workers' other requests: child tasks, lookups, sessions, approvals.
//! - [`aggregator`]: records results (fenced) and dead letters.
//! - [`advisories`]: dead-letters tasks whose message reached JetStream's max deliveries.
//! - [`watch`]: live progress streaming with replay.
//! - [`commands`]: agent and command registries (reloaded on change) and `RunCommand`.
//! - [`sweeper`]: finishes overdue tasks; cancels what ended parents left running.
//! - [`subtrees`]: a task that ends cancels its live descendants.
//! - [`backpressure`]: samples the tasks stream's depth for `Submit`'s bound.
//! - [`config`], [`error`], [`convert`].
//!
//! [`run`] binds the configured address; tests call [`serve`] with a listener on port 0.

pub mod advisories;
pub mod aggregator;
pub mod api;
pub mod auth;
pub mod backpressure;
pub mod batch;
pub mod claims;
pub mod commands;
pub mod config;
pub mod convert;
pub mod error;
pub mod ownership;
pub mod relay;
pub mod server;
pub mod submit;
pub mod subtrees;
pub mod sweeper;
pub mod watch;
pub mod worker_rpc;

use std::sync::Arc;

use taskwire_agent::builtin::AgentRegistry;
use taskwire_bus::{BusConfig, Subjects};
use taskwire_protocol::{TaskId, pb};
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
    pub client: async_nats::Client,
    pub js: async_nats::jetstream::Context,
    pub subjects: Subjects,
    /// The agent registry; replaced as a whole when the agents directory changes.
    pub agents: std::sync::RwLock<Arc<AgentRegistry>>,
    /// The slash commands; replaced as a whole when the commands directory changes.
    pub commands: std::sync::RwLock<Arc<taskwire_agent::command::CommandRegistry>>,
    pub submitter: submit::Submitter,
    /// Wakes the outbox relay after a write that queued a dispatch.
    pub relay_wake: Arc<Notify>,
    /// Tasks waiting in the tasks stream (sampled).
    pub queue_depth: backpressure::QueueDepth,
    /// The patch bucket: large result patches are read from it and handed out through it.
    pub patches: taskwire_bus::Patches,
}

impl State {
    /// The current agent registry.
    pub fn registry(&self) -> Arc<AgentRegistry> {
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

    /// Tells a worker running `task` to stop, and watchers that it is finished.
    pub async fn notify_stopped(&self, task: TaskId, reason: &str) {
        subtrees::notify_stopped(&self.client, &self.subjects, task, reason).await;
    }
}

/// Binds `config.listen` and serves until `shutdown`.
pub async fn run(
    config: CoordinatorConfig,
    shutdown: CancellationToken,
) -> Result<(), CoordinatorError> {
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| CoordinatorError::Serve(format!("failed to bind {}: {e}", config.listen)))?;
    serve(config, listener, shutdown).await
}

/// Connects to Postgres and NATS, starts the background loops and serves gRPC on
/// `listener` until `shutdown`; then stops accepting, lets loops finish and returns.
pub async fn serve(
    config: CoordinatorConfig,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), CoordinatorError> {
    let authenticator = match &config.auth_tokens_file {
        Some(path) => auth::Authenticator::from_file(path)?,
        None => {
            tracing::warn!("no auth tokens file configured: the grpc api is open to any caller");
            auth::Authenticator::open()
        }
    };
    let tls = server::tls(config.tls_cert.as_deref(), config.tls_key.as_deref())?;
    let store = Store::connect(&config.database_url, config.db_max_connections).await?;
    let client =
        taskwire_bus::connect_with(&config.nats_url, "taskwire-coordinator", &config.nats).await?;
    let js = async_nats::jetstream::new(client.clone());
    let subjects = Subjects::new(&config.prefix);
    let bus = BusConfig {
        subjects: subjects.clone(),
        max_queued_tasks: config.max_queued_tasks,
        ack_wait: config.ack_wait,
        patches: taskwire_bus::patches::BucketLimits {
            max_age: config.patches_max_age,
            max_bytes: config.patches_max_bytes,
        },
        ..BusConfig::default()
    };
    let patches = taskwire_bus::Patches::new(js.clone(), &subjects);
    taskwire_bus::ensure_streams(&js, &bus).await?;

    let config_dirs = config.config_dirs();
    if !config_dirs.is_empty() {
        let dirs: Vec<_> = config_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        tracing::info!(dirs = ?dirs, "reading agents and commands");
    }
    let (agents, command_registry) = commands::load(&config_dirs);
    let loops = CancellationToken::new();
    let relay_wake = Arc::new(Notify::new());
    let submitter = submit::Submitter::start(store.clone(), relay_wake.clone(), loops.clone());
    let state = Arc::new(State {
        config,
        store: store.clone(),
        client: client.clone(),
        js: js.clone(),
        subjects: subjects.clone(),
        agents: std::sync::RwLock::new(Arc::new(agents)),
        commands: std::sync::RwLock::new(Arc::new(command_registry)),
        submitter,
        relay_wake: relay_wake.clone(),
        queue_depth: backpressure::QueueDepth::default(),
        patches: patches.clone(),
    });

    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(relay::run(
        store.clone(),
        js.clone(),
        relay_wake,
        loops.clone(),
    ));
    tasks.spawn({
        let (client, store, subjects, token) = (
            client.clone(),
            store.clone(),
            subjects.clone(),
            loops.clone(),
        );
        let limit = state.config.max_running_per_tenant;
        async move {
            if let Err(e) = claims::run(client, store, subjects, limit, token).await {
                tracing::error!(error = %e, "claim responder failed to subscribe");
            }
        }
    });
    tasks.spawn(aggregator::run_results(
        client.clone(),
        js.clone(),
        patches,
        store.clone(),
        subjects.clone(),
        loops.clone(),
    ));
    tasks.spawn(aggregator::run_dead_letters(
        js.clone(),
        store.clone(),
        subjects.clone(),
        loops.clone(),
    ));
    tasks.spawn(sweeper::run(state.clone(), loops.clone()));
    if !config_dirs.is_empty() {
        tasks.spawn(commands::watch(state.clone(), config_dirs, loops.clone()));
    }
    tasks.spawn({
        let (state, token) = (state.clone(), loops.clone());
        async move {
            if let Err(e) = worker_rpc::run(state, token).await {
                tracing::error!(error = %e, "worker request responder failed to subscribe");
            }
        }
    });
    tasks.spawn(advisories::run(
        js.clone(),
        store.clone(),
        subjects.clone(),
        loops.clone(),
    ));
    tasks.spawn(backpressure::run(
        js.clone(),
        subjects.tasks_stream(),
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
    let api = pb::task_service_server::TaskServiceServer::with_interceptor(
        api::TaskApi::new(state),
        auth::AuthInterceptor(authenticator),
    );
    let result = server
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(api)
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await
        .map_err(|e| CoordinatorError::Serve(e.to_string()));

    loops.cancel();
    while tasks.join_next().await.is_some() {}
    let _ = client.flush().await;
    tracing::info!("coordinator stopped");
    result
}
