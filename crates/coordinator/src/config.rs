//! Coordinator settings. Every field has a default; the CLI layers env and flags on top.

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
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
    /// HTTP listen address of `/healthz`, `/readyz` and `/metrics`. Default
    /// `127.0.0.1:8080`.
    pub http_listen: SocketAddr,
    /// Subject prefix of this deployment. Default `taskwire`.
    pub prefix: String,
    /// Queue that tasks are dispatched to. Default `default`.
    pub queue: String,
    /// Largest accepted prompt, in bytes. Default 256 KiB.
    pub max_prompt_bytes: usize,
    /// Largest accepted encoded request (prompt, input, attachments), in bytes; must stay
    /// below NATS's `max_payload` (1 MiB by default). Default 768 KiB.
    pub max_request_bytes: usize,
    /// Most tasks waiting in the tasks stream (and, with a dispatch window, in the
    /// outbox). Default 1,000,000.
    pub max_queued_tasks: i64,
    /// Most tasks the fleet may be behind on: dispatches in the outbox, task messages
    /// in the tasks stream (waiting or running) and results not yet recorded, all
    /// together. A submit beyond it is refused `RESOURCE_EXHAUSTED` (retry later), so
    /// that the backlog, and with it the time from submit to result, stays bounded: set
    /// it to the fleet's throughput times the latency you accept. 0: no limit. Default
    /// 100,000.
    pub max_backlog: u64,
    /// Most tasks in the tasks stream that no worker has taken yet; the rest wait in
    /// the outbox and are dispatched by priority, the tenants of a priority taking
    /// turns. 0: no window, every task is published at once (first in, first out).
    /// Default 0.
    pub dispatch_window: u64,
    /// Workers' ack wait (redelivery after a silent worker). Default 6 s.
    pub ack_wait: Duration,
    /// Postgres pool size. Default 16.
    pub db_max_connections: u32,
    /// How often the sweeper looks for overdue tasks. Default 1 s.
    pub sweep_interval: Duration,
    /// Attempts a task gets when its submit does not say. Default 3.
    pub default_max_attempts: u32,
    /// When set, the one directory with `agents/*.md` and `commands/*.md`, in place of
    /// `discovered_config_dirs`. Default: none.
    pub config_dir: Option<PathBuf>,
    /// Directories with `agents/*.md` and `commands/*.md` when `config_dir` is not set,
    /// lowest precedence first (the CLI fills it with [`discover_config_dirs`]).
    /// Default: none (built-in agents only). See [`CoordinatorConfig::config_dirs`].
    pub discovered_config_dirs: Vec<PathBuf>,
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
    /// How long the patch bucket keeps a patch too large for a message (a child's
    /// starting changes, a result's patch before it is recorded, a checkpoint's
    /// changes): a reference older than this is an error naming it. Keep it longer than
    /// any task may run. Default 7 days.
    pub patches_max_age: Duration,
    /// Most bytes the patch bucket holds; beyond it, handing over a large patch fails
    /// with an error naming the bucket. Default 1 GiB.
    pub patches_max_bytes: i64,
    /// Store and dispatch each request with its agent spec inline, as versions before
    /// specs were stored by digest did, instead of naming it by digest: set while
    /// upgrading from such a version, so that its coordinators and workers can read
    /// every task written meanwhile (see docs/deploy.md). Default false.
    pub inline_agent_specs: bool,
    /// NATS connection security (TLS, credentials).
    pub nats: taskwire_bus::NatsOptions,
    /// Each tenant's result-webhook signing secret: a TOML file of `tenant = "secret"`
    /// lines. Default: none, and a submit with a `callback_url` is refused.
    pub webhook_secrets_file: Option<PathBuf>,
    /// Allow `http` webhook URLs (else `https` only). Default false.
    pub webhook_allow_http: bool,
    /// Allow webhooks to loopback, private and link-local addresses. Default false.
    pub webhook_allow_private: bool,
    /// Attempts of a webhook delivery before it is given up (`failed`). Default 10.
    pub webhook_max_attempts: u32,
    /// How long one webhook POST may take. Default 10 s.
    pub webhook_timeout: Duration,
    /// Longest the scheduler waits between passes: it wakes at the earliest tick of
    /// any active schedule, and at least this often (for queued ticks whose previous run
    /// ended, and schedules created meanwhile). Default 250 ms.
    pub schedule_interval: Duration,
    /// How late a schedule's tick may be acted on and still count as on time; a tick
    /// later than this was missed (no coordinator ran) and follows the schedule's
    /// catch-up policy. Default 60 s.
    pub schedule_grace: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        Self {
            database_url: "postgres://postgres@127.0.0.1:5432/taskwire".to_owned(),
            nats_url: "nats://127.0.0.1:4222".to_owned(),
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            http_listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            prefix: "taskwire".to_owned(),
            queue: "default".to_owned(),
            max_prompt_bytes: 256 * 1024,
            max_request_bytes: 768 * 1024,
            max_queued_tasks: 1_000_000,
            max_backlog: 100_000,
            dispatch_window: 0,
            ack_wait: Duration::from_secs(6),
            db_max_connections: 16,
            sweep_interval: Duration::from_secs(1),
            default_max_attempts: 3,
            config_dir: None,
            discovered_config_dirs: Vec::new(),
            default_agent: "build".to_owned(),
            max_depth: 1,
            max_running_per_tenant: None,
            auth_tokens_file: None,
            tls_cert: None,
            tls_key: None,
            patches_max_age: taskwire_bus::patches::BucketLimits::default().max_age,
            patches_max_bytes: taskwire_bus::patches::BucketLimits::default().max_bytes,
            inline_agent_specs: false,
            nats: taskwire_bus::NatsOptions::default(),
            webhook_secrets_file: None,
            webhook_allow_http: false,
            webhook_allow_private: false,
            webhook_max_attempts: 10,
            webhook_timeout: Duration::from_secs(10),
            schedule_interval: Duration::from_millis(250),
            schedule_grace: Duration::from_secs(60),
        }
    }
}

impl CoordinatorConfig {
    /// How result webhooks are delivered.
    pub fn webhook_policy(&self) -> crate::webhooks::WebhookPolicy {
        crate::webhooks::WebhookPolicy {
            allow_http: self.webhook_allow_http,
            allow_private: self.webhook_allow_private,
            max_attempts: self.webhook_max_attempts.max(1),
            timeout: self.webhook_timeout,
        }
    }

    /// The directories agents and commands are read from (and reloaded from on change),
    /// lowest precedence first: `config_dir` alone when it is set, else the discovered
    /// ones. A definition overrides one of the same name from an earlier directory or the
    /// built-ins, and `disable: true` removes it; a missing directory has no definitions.
    pub fn config_dirs(&self) -> Vec<PathBuf> {
        match &self.config_dir {
            Some(dir) => vec![dir.clone()],
            None => self.discovered_config_dirs.clone(),
        }
    }
}

/// The directory of project definitions under a working directory.
pub const PROJECT_CONFIG_DIR: &str = ".taskwire";

/// Where a coordinator looks for agents and commands when no directory is configured,
/// lowest precedence first, as OpenCode does with `.opencode/`: the user's
/// (`$XDG_CONFIG_HOME/taskwire`, else `$HOME/.config/taskwire`; relative or empty values
/// are ignored, as the XDG spec asks), then the project's (`<cwd>/.taskwire`). Pure:
/// the binary passes the process's working directory and environment.
pub fn discover_config_dirs(
    cwd: &Path,
    xdg_config_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Vec<PathBuf> {
    fn absolute(value: Option<&OsStr>) -> Option<&Path> {
        value.map(Path::new).filter(|p| p.is_absolute())
    }
    let user = absolute(xdg_config_home)
        .map(Path::to_path_buf)
        .or_else(|| absolute(home).map(|home| home.join(".config")))
        .map(|config| config.join("taskwire"));
    let project = cwd.join(PROJECT_CONFIG_DIR);
    let mut dirs: Vec<PathBuf> = user.into_iter().filter(|user| *user != project).collect();
    dirs.push(project);
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discover(xdg: Option<&str>, home: Option<&str>) -> Vec<PathBuf> {
        discover_config_dirs(
            Path::new("/work/project"),
            xdg.map(OsStr::new),
            home.map(OsStr::new),
        )
    }

    #[test]
    fn the_user_directory_comes_before_the_project_one() {
        assert_eq!(
            discover(None, Some("/home/ada")),
            [
                PathBuf::from("/home/ada/.config/taskwire"),
                PathBuf::from("/work/project/.taskwire"),
            ]
        );
    }

    #[test]
    fn xdg_config_home_beats_home() {
        assert_eq!(
            discover(Some("/xdg"), Some("/home/ada")),
            [
                PathBuf::from("/xdg/taskwire"),
                PathBuf::from("/work/project/.taskwire"),
            ]
        );
    }

    #[test]
    fn relative_or_empty_xdg_and_home_values_are_ignored() {
        assert_eq!(
            discover(Some("relative"), Some("/home/ada"))[0],
            PathBuf::from("/home/ada/.config/taskwire")
        );
        assert_eq!(
            discover(Some(""), Some("")),
            [PathBuf::from("/work/project/.taskwire")]
        );
        assert_eq!(
            discover(None, None),
            [PathBuf::from("/work/project/.taskwire")]
        );
    }

    #[test]
    fn a_configured_directory_replaces_the_discovered_ones() {
        let mut config = CoordinatorConfig {
            discovered_config_dirs: discover(None, Some("/home/ada")),
            ..CoordinatorConfig::default()
        };
        assert_eq!(config.config_dirs().len(), 2);
        config.config_dir = Some(PathBuf::from("/etc/taskwire"));
        assert_eq!(config.config_dirs(), [PathBuf::from("/etc/taskwire")]);
    }

    #[test]
    fn by_default_no_directory_is_read() {
        assert!(CoordinatorConfig::default().config_dirs().is_empty());
    }
}
