//! Coordinator settings. Every field has a default; the CLI layers env and flags on top.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How a coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Postgres URL (the source of truth). Default `postgres://postgres@127.0.0.1:5432/taskwire`.
    pub database_url: String,
    /// NATS URL. Default `nats://127.0.0.1:4222`.
    pub nats_url: String,
    /// gRPC listen address. Default `127.0.0.1:50051`.
    pub listen: SocketAddr,
    /// Subject prefix of this deployment. Default `taskwire`.
    pub prefix: String,
    /// Queue that tasks are dispatched to. Default `default`.
    pub queue: String,
    /// Largest accepted prompt, in bytes. Default 256 KiB.
    pub max_prompt_bytes: usize,
    /// Largest accepted encoded request (prompt, input, attachments), in bytes; must stay
    /// below NATS's `max_payload` (1 MiB by default). Default 768 KiB.
    pub max_request_bytes: usize,
    /// Most tasks waiting in the tasks stream. Default 1,000,000.
    pub max_queued_tasks: i64,
    /// Workers' ack wait (redelivery after a silent worker). Default 30 s.
    pub ack_wait: Duration,
    /// Postgres pool size. Default 16.
    pub db_max_connections: u32,
    /// How often the sweeper looks for overdue tasks. Default 1 s.
    pub sweep_interval: Duration,
    /// Attempts a task gets when its submit does not say. Default 3.
    pub default_max_attempts: u32,
    /// Directory with `agents/*.md` and `commands/*.md` (reloaded on change).
    /// Default: none (built-in agents only).
    pub config_dir: Option<PathBuf>,
    /// The primary agent slash commands run in. Default `build`.
    pub default_agent: String,
    /// Deepest task tree: a task at this depth may not start children. Default 1
    /// (a root task's subagents cannot start subagents of their own).
    pub max_depth: u32,
    /// Most tasks one tenant may have running at once; more wait queued. Default: no limit.
    pub max_running_per_tenant: Option<u32>,
    /// Bearer tokens → tenant and scopes (see `auth`). Default: none, the API is open.
    pub auth_tokens_file: Option<PathBuf>,
    /// PEM certificate chain and key for gRPC over TLS. Default: plaintext.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// NATS connection security (TLS, credentials).
    pub nats: taskwire_bus::NatsOptions,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            database_url: "postgres://postgres@127.0.0.1:5432/taskwire".to_owned(),
            nats_url: "nats://127.0.0.1:4222".to_owned(),
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            prefix: "taskwire".to_owned(),
            queue: "default".to_owned(),
            max_prompt_bytes: 256 * 1024,
            max_request_bytes: 768 * 1024,
            max_queued_tasks: 1_000_000,
            ack_wait: Duration::from_secs(30),
            db_max_connections: 16,
            sweep_interval: Duration::from_secs(1),
            default_max_attempts: 3,
            config_dir: None,
            default_agent: "build".to_owned(),
            max_depth: 1,
            max_running_per_tenant: None,
            auth_tokens_file: None,
            tls_cert: None,
            tls_key: None,
            nats: taskwire_bus::NatsOptions::default(),
        }
    }
}
