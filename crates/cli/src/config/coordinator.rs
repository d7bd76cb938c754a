//! `[coordinator]` settings: flags, `TASKWIRE_*` env and file keys of
//! [`CoordinatorConfig`]. Defaults in the help texts are those of `CoordinatorConfig`.

use std::net::SocketAddr;
use std::path::PathBuf;

use taskwire_coordinator::CoordinatorConfig;

use super::{redact_url_password, set, set_some};
use crate::duration::HumanDuration;

settings! {
    /// Coordinator settings; each one also reads `TASKWIRE_<NAME>`.
    pub struct CoordinatorSettings for CoordinatorConfig {
        /// Postgres URL, the source of truth [default: postgres://postgres@127.0.0.1:5432/taskwire]
        #[arg(long, env = "TASKWIRE_DATABASE_URL", value_name = "URL")]
        pub database_url: Option<String>,
        /// NATS URL [default: nats://127.0.0.1:4222]
        #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
        pub nats_url: Option<String>,
        /// gRPC listen address [default: 127.0.0.1:50051; its IP is TASKWIRE_DEFAULT_LISTEN_IP's when set, as in the image]
        #[arg(long, env = "TASKWIRE_LISTEN", value_name = "ADDR")]
        pub listen: Option<SocketAddr>,
        /// HTTP listen address of /healthz, /readyz and /metrics [default: 127.0.0.1:8080; its IP is TASKWIRE_DEFAULT_LISTEN_IP's when set, as in the image]
        #[arg(long, env = "TASKWIRE_HTTP_LISTEN", value_name = "ADDR")]
        pub http_listen: Option<SocketAddr>,
        /// Subject prefix of this deployment [default: taskwire]
        #[arg(long, env = "TASKWIRE_PREFIX")]
        pub prefix: Option<String>,
        /// Queue tasks are dispatched to [default: default]
        #[arg(long, env = "TASKWIRE_QUEUE")]
        pub queue: Option<String>,
        /// Largest accepted prompt, in bytes [default: 262144]
        #[arg(long, env = "TASKWIRE_MAX_PROMPT_BYTES", value_name = "BYTES")]
        pub max_prompt_bytes: Option<usize>,
        /// Largest accepted encoded request, in bytes; keep it below NATS's max_payload [default: 786432]
        #[arg(long, env = "TASKWIRE_MAX_REQUEST_BYTES", value_name = "BYTES")]
        pub max_request_bytes: Option<usize>,
        /// Most tasks waiting in the tasks stream [default: 1000000]
        #[arg(long, env = "TASKWIRE_MAX_QUEUED_TASKS", value_name = "N")]
        pub max_queued_tasks: Option<i64>,
        /// Most tasks in the tasks stream no worker has taken yet; the rest wait in Postgres and are dispatched by priority, tenants taking turns within a priority; 0 publishes every task at once, first in first out [default: 0]
        #[arg(long, env = "TASKWIRE_DISPATCH_WINDOW", value_name = "N")]
        pub dispatch_window: Option<u64>,
        /// Workers' ack wait: redelivery after a silent worker, e.g. 6s [default: 6s]
        #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
        pub ack_wait: Option<HumanDuration>,
        /// Postgres connection pool size [default: 16]
        #[arg(long, env = "TASKWIRE_DB_MAX_CONNECTIONS", value_name = "N")]
        pub db_max_connections: Option<u32>,
        /// How often overdue tasks are looked for [default: 1s]
        #[arg(long, env = "TASKWIRE_SWEEP_INTERVAL", value_name = "DURATION")]
        pub sweep_interval: Option<HumanDuration>,
        /// Attempts a task gets when its submit does not say [default: 3]
        #[arg(long, env = "TASKWIRE_DEFAULT_MAX_ATTEMPTS", value_name = "N")]
        pub default_max_attempts: Option<u32>,
        /// The one directory with agents/*.md and commands/*.md, in place of the discovered ./.taskwire and $XDG_CONFIG_HOME/taskwire (~/.config/taskwire); reloaded on change [default: discovery]
        #[arg(long, env = "TASKWIRE_CONFIG_DIR", value_name = "DIR")]
        pub config_dir: Option<PathBuf>,
        /// The primary agent slash commands run in [default: build]
        #[arg(long, env = "TASKWIRE_DEFAULT_AGENT", value_name = "NAME")]
        pub default_agent: Option<String>,
        /// Deepest task tree: a task at this depth may not start children [default: 1]
        #[arg(long, env = "TASKWIRE_MAX_DEPTH", value_name = "N")]
        pub max_depth: Option<u32>,
        /// Most tasks one tenant may have running at once; more wait queued [default: no limit]
        #[arg(long, env = "TASKWIRE_MAX_RUNNING_PER_TENANT", value_name = "N")]
        pub max_running_per_tenant: Option<u32>,
        /// File of bearer tokens with their tenants and scopes [default: none, the API is open]
        #[arg(long, env = "TASKWIRE_AUTH_TOKENS_FILE", value_name = "FILE")]
        pub auth_tokens_file: Option<PathBuf>,
        /// PEM certificate chain for gRPC over TLS, with --tls-key [default: plaintext]
        #[arg(long, env = "TASKWIRE_TLS_CERT", value_name = "FILE")]
        pub tls_cert: Option<PathBuf>,
        /// PEM private key for gRPC over TLS, with --tls-cert
        #[arg(long, env = "TASKWIRE_TLS_KEY", value_name = "FILE")]
        pub tls_key: Option<PathBuf>,
        /// How long the patch bucket keeps a patch too large for a message; keep it longer than any task runs [default: 168h]
        #[arg(long, env = "TASKWIRE_PATCHES_MAX_AGE", value_name = "DURATION")]
        pub patches_max_age: Option<HumanDuration>,
        /// Most bytes the patch bucket holds [default: 1073741824]
        #[arg(long, env = "TASKWIRE_PATCHES_MAX_BYTES", value_name = "BYTES")]
        pub patches_max_bytes: Option<i64>,
        /// Store and dispatch each request with its agent spec inline instead of by digest, as versions before 0009_agent_specs did; only while upgrading from one [default: false]
        #[arg(
            long,
            env = "TASKWIRE_INLINE_AGENT_SPECS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub inline_agent_specs: Option<bool>,
    }
}

impl CoordinatorSettings {
    /// `config` with every field set here replaced; fields the CLI has no flag for keep
    /// their value.
    pub fn apply(self, mut c: CoordinatorConfig) -> CoordinatorConfig {
        self.apply_nats(&mut c);
        set(&mut c.database_url, self.database_url);
        set(&mut c.nats_url, self.nats_url);
        set(&mut c.listen, self.listen);
        set(&mut c.http_listen, self.http_listen);
        set(&mut c.prefix, self.prefix);
        set(&mut c.queue, self.queue);
        set(&mut c.max_prompt_bytes, self.max_prompt_bytes);
        set(&mut c.max_request_bytes, self.max_request_bytes);
        set(&mut c.max_queued_tasks, self.max_queued_tasks);
        set(&mut c.dispatch_window, self.dispatch_window);
        set(&mut c.ack_wait, self.ack_wait);
        set(&mut c.db_max_connections, self.db_max_connections);
        set(&mut c.sweep_interval, self.sweep_interval);
        set(&mut c.default_max_attempts, self.default_max_attempts);
        set_some(&mut c.config_dir, self.config_dir);
        set(&mut c.default_agent, self.default_agent);
        set(&mut c.max_depth, self.max_depth);
        set_some(&mut c.max_running_per_tenant, self.max_running_per_tenant);
        set_some(&mut c.auth_tokens_file, self.auth_tokens_file);
        set_some(&mut c.tls_cert, self.tls_cert);
        set_some(&mut c.tls_key, self.tls_key);
        set(&mut c.patches_max_age, self.patches_max_age);
        set(&mut c.patches_max_bytes, self.patches_max_bytes);
        set(&mut c.inline_agent_specs, self.inline_agent_specs);
        c
    }

    /// Every field of `config`, secrets redacted, for `--print-config`. Unset optional
    /// fields are left out (TOML has no null).
    pub fn printable(c: &CoordinatorConfig) -> Self {
        Self {
            database_url: Some(redact_url_password(&c.database_url)),
            nats_url: Some(redact_url_password(&c.nats_url)),
            listen: Some(c.listen),
            http_listen: Some(c.http_listen),
            prefix: Some(c.prefix.clone()),
            queue: Some(c.queue.clone()),
            max_prompt_bytes: Some(c.max_prompt_bytes),
            max_request_bytes: Some(c.max_request_bytes),
            max_queued_tasks: Some(c.max_queued_tasks),
            dispatch_window: Some(c.dispatch_window),
            ack_wait: Some(HumanDuration(c.ack_wait)),
            db_max_connections: Some(c.db_max_connections),
            sweep_interval: Some(HumanDuration(c.sweep_interval)),
            default_max_attempts: Some(c.default_max_attempts),
            config_dir: c.config_dir.clone(),
            default_agent: Some(c.default_agent.clone()),
            max_depth: Some(c.max_depth),
            max_running_per_tenant: c.max_running_per_tenant,
            auth_tokens_file: c.auth_tokens_file.clone(),
            tls_cert: c.tls_cert.clone(),
            tls_key: c.tls_key.clone(),
            patches_max_age: Some(HumanDuration(c.patches_max_age)),
            patches_max_bytes: Some(c.patches_max_bytes),
            inline_agent_specs: Some(c.inline_agent_specs),
            ..Self::printable_nats(c)
        }
    }
}
