//! `[coordinator]` settings: flags, `TASKWIRE_*` env and file keys of
//! [`CoordinatorConfig`], each with its place there. Defaults in the help texts are
//! those of `CoordinatorConfig`.

use std::net::SocketAddr;
use std::path::PathBuf;

use taskwire_coordinator::CoordinatorConfig;

use super::codec::Url;
use crate::duration::HumanDuration;

settings! {
    /// Coordinator settings; each one also reads `TASKWIRE_<NAME>`.
    pub struct CoordinatorSettings for CoordinatorConfig {
        /// Postgres URL, the source of truth [default: postgres://postgres@127.0.0.1:5432/taskwire]
        #[arg(long, env = "TASKWIRE_DATABASE_URL", value_name = "URL")]
        pub database_url: Option<String> => database_url as Url,
        /// NATS URL [default: nats://127.0.0.1:4222]
        #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
        pub nats_url: Option<String> => nats_url as Url,
        /// gRPC listen address [default: 127.0.0.1:50051; its IP is TASKWIRE_DEFAULT_LISTEN_IP's when set, as in the image]
        #[arg(long, env = "TASKWIRE_LISTEN", value_name = "ADDR")]
        pub listen: Option<SocketAddr> => listen,
        /// HTTP listen address of /healthz, /readyz and /metrics [default: 127.0.0.1:8080; its IP is TASKWIRE_DEFAULT_LISTEN_IP's when set, as in the image]
        #[arg(long, env = "TASKWIRE_HTTP_LISTEN", value_name = "ADDR")]
        pub http_listen: Option<SocketAddr> => http_listen,
        /// Subject prefix of this deployment [default: taskwire]
        #[arg(long, env = "TASKWIRE_PREFIX")]
        pub prefix: Option<String> => prefix,
        /// Queue tasks are dispatched to [default: default]
        #[arg(long, env = "TASKWIRE_QUEUE")]
        pub queue: Option<String> => queue,
        /// Largest accepted prompt, in bytes [default: 262144]
        #[arg(long, env = "TASKWIRE_MAX_PROMPT_BYTES", value_name = "BYTES")]
        pub max_prompt_bytes: Option<usize> => max_prompt_bytes,
        /// Largest accepted encoded request, in bytes; keep it below NATS's max_payload [default: 786432]
        #[arg(long, env = "TASKWIRE_MAX_REQUEST_BYTES", value_name = "BYTES")]
        pub max_request_bytes: Option<usize> => max_request_bytes,
        /// Most tasks waiting in the tasks stream [default: 1000000]
        #[arg(long, env = "TASKWIRE_MAX_QUEUED_TASKS", value_name = "N")]
        pub max_queued_tasks: Option<i64> => max_queued_tasks,
        /// Most tasks the fleet may be behind on (in the outbox, the tasks stream, and results not yet recorded); a submit beyond it is refused RESOURCE_EXHAUSTED, retry later; 0: no limit [default: 100000]
        #[arg(long, env = "TASKWIRE_MAX_BACKLOG", value_name = "N")]
        pub max_backlog: Option<u64> => max_backlog,
        /// Most tasks in the tasks stream no worker has taken yet; the rest wait in Postgres and are dispatched by priority, tenants taking turns within a priority; 0 publishes every task at once, first in first out [default: 0]
        #[arg(long, env = "TASKWIRE_DISPATCH_WINDOW", value_name = "N")]
        pub dispatch_window: Option<u64> => dispatch_window,
        /// Workers' ack wait: redelivery after a silent worker, e.g. 6s [default: 6s]
        #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
        pub ack_wait: Option<HumanDuration> => ack_wait,
        /// Postgres connection pool size [default: 16]
        #[arg(long, env = "TASKWIRE_DB_MAX_CONNECTIONS", value_name = "N")]
        pub db_max_connections: Option<u32> => db_max_connections,
        /// How often overdue tasks are looked for [default: 1s]
        #[arg(long, env = "TASKWIRE_SWEEP_INTERVAL", value_name = "DURATION")]
        pub sweep_interval: Option<HumanDuration> => sweep_interval,
        /// Attempts a task gets when its submit does not say [default: 3]
        #[arg(long, env = "TASKWIRE_DEFAULT_MAX_ATTEMPTS", value_name = "N")]
        pub default_max_attempts: Option<u32> => default_max_attempts,
        /// The one directory with agents/*.md and commands/*.md, in place of the discovered ./.taskwire and $XDG_CONFIG_HOME/taskwire (~/.config/taskwire); reloaded on change [default: discovery]
        #[arg(long, env = "TASKWIRE_CONFIG_DIR", value_name = "DIR")]
        pub config_dir: Option<PathBuf> => config_dir,
        /// The primary agent slash commands run in [default: build]
        #[arg(long, env = "TASKWIRE_DEFAULT_AGENT", value_name = "NAME")]
        pub default_agent: Option<String> => default_agent,
        /// Deepest task tree: a task at this depth may not start children [default: 1]
        #[arg(long, env = "TASKWIRE_MAX_DEPTH", value_name = "N")]
        pub max_depth: Option<u32> => max_depth,
        /// Most tasks one tenant may have running at once; more wait queued [default: no limit]
        #[arg(long, env = "TASKWIRE_MAX_RUNNING_PER_TENANT", value_name = "N")]
        pub max_running_per_tenant: Option<u32> => max_running_per_tenant,
        /// File of bearer tokens with their tenants and scopes [default: none, the API is open]
        #[arg(long, env = "TASKWIRE_AUTH_TOKENS_FILE", value_name = "FILE")]
        pub auth_tokens_file: Option<PathBuf> => auth_tokens_file,
        /// PEM certificate chain for gRPC over TLS, with --tls-key [default: plaintext]
        #[arg(long, env = "TASKWIRE_TLS_CERT", value_name = "FILE")]
        pub tls_cert: Option<PathBuf> => tls_cert,
        /// PEM private key for gRPC over TLS, with --tls-cert
        #[arg(long, env = "TASKWIRE_TLS_KEY", value_name = "FILE")]
        pub tls_key: Option<PathBuf> => tls_key,
        /// How long the patch bucket keeps a patch too large for a message; keep it longer than any task runs [default: 168h]
        #[arg(long, env = "TASKWIRE_PATCHES_MAX_AGE", value_name = "DURATION")]
        pub patches_max_age: Option<HumanDuration> => patches_max_age,
        /// Most bytes the patch bucket holds [default: 1073741824]
        #[arg(long, env = "TASKWIRE_PATCHES_MAX_BYTES", value_name = "BYTES")]
        pub patches_max_bytes: Option<i64> => patches_max_bytes,
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
        pub inline_agent_specs: Option<bool> => inline_agent_specs,
        /// TOML file of each tenant's result-webhook signing secret (tenant = "secret" lines) [default: none, submits with a callback_url are refused]
        #[arg(long, env = "TASKWIRE_WEBHOOK_SECRETS_FILE", value_name = "FILE")]
        pub webhook_secrets_file: Option<PathBuf> => webhook_secrets_file,
        /// Allow http webhook URLs, not only https [default: false]
        #[arg(
            long,
            env = "TASKWIRE_WEBHOOK_ALLOW_HTTP",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub webhook_allow_http: Option<bool> => webhook_allow_http,
        /// Allow webhooks to loopback, private and link-local addresses [default: false]
        #[arg(
            long,
            env = "TASKWIRE_WEBHOOK_ALLOW_PRIVATE",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub webhook_allow_private: Option<bool> => webhook_allow_private,
        /// Attempts of a webhook delivery before it is given up [default: 10]
        #[arg(long, env = "TASKWIRE_WEBHOOK_MAX_ATTEMPTS", value_name = "N")]
        pub webhook_max_attempts: Option<u32> => webhook_max_attempts,
        /// How long one webhook POST may take, e.g. 10s [default: 10s]
        #[arg(long, env = "TASKWIRE_WEBHOOK_TIMEOUT", value_name = "DURATION")]
        pub webhook_timeout: Option<HumanDuration> => webhook_timeout,
        /// Longest the scheduler waits between passes (it wakes at each tick, and at least this often for queued ticks and new schedules), e.g. 250ms [default: 250ms]
        #[arg(long, env = "TASKWIRE_SCHEDULE_INTERVAL", value_name = "DURATION")]
        pub schedule_interval: Option<HumanDuration> => schedule_interval,
        /// How late a schedule's tick may fire and still be on time; later ticks were missed and follow the schedule's catch-up policy [default: 60s]
        #[arg(long, env = "TASKWIRE_SCHEDULE_GRACE", value_name = "DURATION")]
        pub schedule_grace: Option<HumanDuration> => schedule_grace,
    }
}
