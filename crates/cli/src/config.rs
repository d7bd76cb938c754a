//! Settings of `taskwire coordinator` and `taskwire worker`, in layers:
//! defaults → TOML file → `TASKWIRE_*` env → flags.
//!
//! Each section is one struct of `Option`s that serves twice: clap fills it from flags
//! and env (a flag beats its env variable), and serde fills it from the file's
//! `[coordinator]` or `[worker]` table, whose keys are the flag names in snake_case. The
//! layers are merged with [`CoordinatorSettings::over`] and put on the library's
//! defaults with `apply`, so the defaults live in one place: the library config types.
//!
//! ```toml
//! [coordinator]
//! database_url = "postgres://postgres@127.0.0.1:5432/taskwire"
//! ack_wait = "30s"
//!
//! [worker]
//! concurrency = 8
//! model = "qwen3-coder"
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use taskwire_coordinator::CoordinatorConfig;
use taskwire_worker::WorkerConfig;

use crate::duration::HumanDuration;

/// What `--print-config` shows instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// The config file.
#[derive(Debug, Default, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<CoordinatorSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<WorkerSettings>,
}

impl FileConfig {
    /// Reads `path`, or returns an empty file config when there is none.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Self> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("failed to read config file {}", path.display()))?;
        Self::parse(&text)
            .with_context(|| format!("failed to parse config file {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// Coordinator settings; each one also reads `TASKWIRE_<NAME>`.
#[derive(Debug, Default, Clone, PartialEq, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorSettings {
    /// Postgres URL, the source of truth [default: postgres://postgres@127.0.0.1:5432/taskwire]
    #[arg(long, env = "TASKWIRE_DATABASE_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    /// NATS URL [default: nats://127.0.0.1:4222]
    #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_url: Option<String>,
    /// gRPC listen address [default: 127.0.0.1:50051]
    #[arg(long, env = "TASKWIRE_LISTEN", value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Subject prefix of this deployment [default: taskwire]
    #[arg(long, env = "TASKWIRE_PREFIX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Queue tasks are dispatched to [default: default]
    #[arg(long, env = "TASKWIRE_QUEUE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Largest accepted prompt, in bytes [default: 262144]
    #[arg(long, env = "TASKWIRE_MAX_PROMPT_BYTES", value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_prompt_bytes: Option<usize>,
    /// Largest accepted encoded request, in bytes; keep it below NATS's max_payload [default: 786432]
    #[arg(long, env = "TASKWIRE_MAX_REQUEST_BYTES", value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_request_bytes: Option<usize>,
    /// Most tasks waiting in the tasks stream [default: 1000000]
    #[arg(long, env = "TASKWIRE_MAX_QUEUED_TASKS", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_queued_tasks: Option<i64>,
    /// Workers' ack wait: redelivery after a silent worker, e.g. 30s [default: 30s]
    #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_wait: Option<HumanDuration>,
    /// Postgres connection pool size [default: 16]
    #[arg(long, env = "TASKWIRE_DB_MAX_CONNECTIONS", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub db_max_connections: Option<u32>,
    /// How often overdue tasks are looked for [default: 1s]
    #[arg(long, env = "TASKWIRE_SWEEP_INTERVAL", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_interval: Option<HumanDuration>,
}

impl CoordinatorSettings {
    /// Layers `self` over `lower`: a field set in `self` wins.
    pub fn over(self, lower: Self) -> Self {
        Self {
            database_url: self.database_url.or(lower.database_url),
            nats_url: self.nats_url.or(lower.nats_url),
            listen: self.listen.or(lower.listen),
            prefix: self.prefix.or(lower.prefix),
            queue: self.queue.or(lower.queue),
            max_prompt_bytes: self.max_prompt_bytes.or(lower.max_prompt_bytes),
            max_request_bytes: self.max_request_bytes.or(lower.max_request_bytes),
            max_queued_tasks: self.max_queued_tasks.or(lower.max_queued_tasks),
            ack_wait: self.ack_wait.or(lower.ack_wait),
            db_max_connections: self.db_max_connections.or(lower.db_max_connections),
            sweep_interval: self.sweep_interval.or(lower.sweep_interval),
        }
    }

    /// `base` with every field set here replaced.
    pub fn apply(self, base: CoordinatorConfig) -> CoordinatorConfig {
        CoordinatorConfig {
            database_url: self.database_url.unwrap_or(base.database_url),
            nats_url: self.nats_url.unwrap_or(base.nats_url),
            listen: self.listen.unwrap_or(base.listen),
            prefix: self.prefix.unwrap_or(base.prefix),
            queue: self.queue.unwrap_or(base.queue),
            max_prompt_bytes: self.max_prompt_bytes.unwrap_or(base.max_prompt_bytes),
            max_request_bytes: self.max_request_bytes.unwrap_or(base.max_request_bytes),
            max_queued_tasks: self.max_queued_tasks.unwrap_or(base.max_queued_tasks),
            ack_wait: self.ack_wait.map_or(base.ack_wait, |d| d.0),
            db_max_connections: self.db_max_connections.unwrap_or(base.db_max_connections),
            sweep_interval: self.sweep_interval.map_or(base.sweep_interval, |d| d.0),
        }
    }

    /// Every field of `config`, with the passwords in URLs redacted, for `--print-config`.
    pub fn printable(config: &CoordinatorConfig) -> Self {
        Self {
            database_url: Some(redact_url_password(&config.database_url)),
            nats_url: Some(redact_url_password(&config.nats_url)),
            listen: Some(config.listen),
            prefix: Some(config.prefix.clone()),
            queue: Some(config.queue.clone()),
            max_prompt_bytes: Some(config.max_prompt_bytes),
            max_request_bytes: Some(config.max_request_bytes),
            max_queued_tasks: Some(config.max_queued_tasks),
            ack_wait: Some(HumanDuration(config.ack_wait)),
            db_max_connections: Some(config.db_max_connections),
            sweep_interval: Some(HumanDuration(config.sweep_interval)),
        }
    }
}

/// Worker settings; each one also reads `TASKWIRE_<NAME>`.
#[derive(Debug, Default, Clone, PartialEq, clap::Args, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    /// NATS URL [default: nats://127.0.0.1:4222]
    #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats_url: Option<String>,
    /// Subject prefix of the deployment [default: taskwire]
    #[arg(long, env = "TASKWIRE_PREFIX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Queue to serve [default: default]
    #[arg(long, env = "TASKWIRE_QUEUE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Sessions run at once [default: 16]
    #[arg(long, env = "TASKWIRE_CONCURRENCY", value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Root directory the file tools are confined to [default: .]
    #[arg(long, env = "TASKWIRE_WORKSPACE", value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// This worker's name in logs and results [default: worker-<random>]
    #[arg(long, env = "TASKWIRE_WORKER_ID", value_name = "ID")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// OpenAI-compatible model endpoint [default: http://127.0.0.1:8000/v1]
    #[arg(long, env = "TASKWIRE_MODEL_BASE_URL", value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_base_url: Option<String>,
    /// Bearer token of the model endpoint; never printed
    #[arg(
        long,
        env = "TASKWIRE_MODEL_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_api_key: Option<String>,
    /// Model used when neither the task nor its agent names one [default: default]
    #[arg(long, env = "TASKWIRE_MODEL", value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Ask for whole answers instead of streamed ones (watchers then see no text deltas) [default: false]
    #[arg(
        long,
        env = "TASKWIRE_NO_STREAM",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_stream: Option<bool>,
    /// Timeout of one whole model call [default: 5m]
    #[arg(long, env = "TASKWIRE_MODEL_TIMEOUT", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_timeout: Option<HumanDuration>,
    /// Ack wait of the shared consumer, set when it is first created; match the coordinator's [default: 30s]
    #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_wait: Option<HumanDuration>,
    /// How long a claim may take before the task is retried [default: 5s]
    #[arg(long, env = "TASKWIRE_CLAIM_TIMEOUT", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_timeout: Option<HumanDuration>,
    /// On shutdown, how long running sessions may finish before their tasks are released [default: 30s]
    #[arg(long, env = "TASKWIRE_SHUTDOWN_GRACE", value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace: Option<HumanDuration>,
}

impl WorkerSettings {
    /// Layers `self` over `lower`: a field set in `self` wins.
    pub fn over(self, lower: Self) -> Self {
        Self {
            nats_url: self.nats_url.or(lower.nats_url),
            prefix: self.prefix.or(lower.prefix),
            queue: self.queue.or(lower.queue),
            concurrency: self.concurrency.or(lower.concurrency),
            workspace: self.workspace.or(lower.workspace),
            worker_id: self.worker_id.or(lower.worker_id),
            model_base_url: self.model_base_url.or(lower.model_base_url),
            model_api_key: self.model_api_key.or(lower.model_api_key),
            model: self.model.or(lower.model),
            no_stream: self.no_stream.or(lower.no_stream),
            model_timeout: self.model_timeout.or(lower.model_timeout),
            ack_wait: self.ack_wait.or(lower.ack_wait),
            claim_timeout: self.claim_timeout.or(lower.claim_timeout),
            shutdown_grace: self.shutdown_grace.or(lower.shutdown_grace),
        }
    }

    /// `base` with every field set here replaced.
    pub fn apply(self, base: WorkerConfig) -> WorkerConfig {
        let mut model = base.model;
        model.base_url = self.model_base_url.unwrap_or(model.base_url);
        model.api_key = self.model_api_key.or(model.api_key);
        model.default_model = self.model.unwrap_or(model.default_model);
        model.stream = self.no_stream.map_or(model.stream, |no| !no);
        model.request_timeout = self.model_timeout.map_or(model.request_timeout, |d| d.0);
        WorkerConfig {
            nats_url: self.nats_url.unwrap_or(base.nats_url),
            prefix: self.prefix.unwrap_or(base.prefix),
            queue: self.queue.unwrap_or(base.queue),
            concurrency: self.concurrency.unwrap_or(base.concurrency),
            workspace: self.workspace.unwrap_or(base.workspace),
            worker_id: self.worker_id.or(base.worker_id),
            model,
            ack_wait: self.ack_wait.map_or(base.ack_wait, |d| d.0),
            claim_timeout: self.claim_timeout.map_or(base.claim_timeout, |d| d.0),
            shutdown_grace: self.shutdown_grace.map_or(base.shutdown_grace, |d| d.0),
        }
    }

    /// Every field of `config`, with secrets redacted, for `--print-config`.
    pub fn printable(config: &WorkerConfig) -> Self {
        Self {
            nats_url: Some(redact_url_password(&config.nats_url)),
            prefix: Some(config.prefix.clone()),
            queue: Some(config.queue.clone()),
            concurrency: Some(config.concurrency),
            workspace: Some(config.workspace.clone()),
            worker_id: config.worker_id.clone(),
            model_base_url: Some(redact_url_password(&config.model.base_url)),
            model_api_key: config.model.api_key.as_ref().map(|_| REDACTED.to_owned()),
            model: Some(config.model.default_model.clone()),
            no_stream: Some(!config.model.stream),
            model_timeout: Some(HumanDuration(config.model.request_timeout)),
            ack_wait: Some(HumanDuration(config.ack_wait)),
            claim_timeout: Some(HumanDuration(config.claim_timeout)),
            shutdown_grace: Some(HumanDuration(config.shutdown_grace)),
        }
    }
}

/// The effective coordinator config: `flags` (flags and env, as clap read them) over the
/// file's `[coordinator]` table over the defaults.
pub fn coordinator_config(
    flags: CoordinatorSettings,
    file: &FileConfig,
) -> anyhow::Result<CoordinatorConfig> {
    let file = file.coordinator.clone().unwrap_or_default();
    let config = flags.over(file).apply(CoordinatorConfig::default());
    if config.ack_wait.is_zero() {
        bail!("invalid coordinator config: ack_wait must be more than zero");
    }
    if config.sweep_interval.is_zero() {
        bail!("invalid coordinator config: sweep_interval must be more than zero");
    }
    Ok(config)
}

/// The effective worker config: `flags` (flags and env) over the file's `[worker]` table
/// over the defaults.
pub fn worker_config(flags: WorkerSettings, file: &FileConfig) -> anyhow::Result<WorkerConfig> {
    let file = file.worker.clone().unwrap_or_default();
    let config = flags.over(file).apply(WorkerConfig::default());
    if config.concurrency == 0 {
        bail!("invalid worker config: concurrency must be at least 1");
    }
    if config.ack_wait.is_zero() {
        bail!("invalid worker config: ack_wait must be more than zero");
    }
    if config.model.base_url.is_empty() {
        bail!("invalid worker config: model_base_url is empty");
    }
    Ok(config)
}

/// The effective coordinator config as a config file.
pub fn render_coordinator(config: &CoordinatorConfig) -> anyhow::Result<String> {
    let file = FileConfig {
        coordinator: Some(CoordinatorSettings::printable(config)),
        worker: None,
    };
    toml::to_string(&file).context("failed to render the coordinator config")
}

/// The effective worker config as a config file, the API key redacted.
pub fn render_worker(config: &WorkerConfig) -> anyhow::Result<String> {
    let file = FileConfig {
        coordinator: None,
        worker: Some(WorkerSettings::printable(config)),
    };
    toml::to_string(&file).context("failed to render the worker config")
}

/// `scheme://user:secret@host/...` → `scheme://user:<redacted>@host/...`; other strings
/// are returned unchanged. Database and NATS URLs may carry passwords.
pub fn redact_url_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    let Some(colon) = rest[..at].find(':') else {
        return url.to_owned();
    };
    format!(
        "{}{}:{REDACTED}{}",
        &url[..scheme_end],
        &rest[..colon],
        &rest[at..]
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn worker(concurrency: Option<usize>, model: Option<&str>) -> WorkerSettings {
        WorkerSettings {
            concurrency,
            model: model.map(str::to_owned),
            ..WorkerSettings::default()
        }
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let config =
            worker_config(WorkerSettings::default(), &FileConfig::default()).expect("valid");
        assert_eq!(config.concurrency, 16);
        assert_eq!(config.workspace, PathBuf::from("."));
        assert!(config.model.stream);
        let config = coordinator_config(CoordinatorSettings::default(), &FileConfig::default())
            .expect("valid");
        assert_eq!(config.listen, SocketAddr::from(([127, 0, 0, 1], 50051)));
        assert_eq!(config.prefix, "taskwire");
    }

    #[test]
    fn file_beats_defaults() {
        let file =
            FileConfig::parse("[worker]\nconcurrency = 2\nno_stream = true\n").expect("valid toml");
        let config = worker_config(WorkerSettings::default(), &file).expect("valid");
        assert_eq!(config.concurrency, 2);
        assert!(!config.model.stream);
        assert_eq!(config.model.default_model, "default");
    }

    #[test]
    fn env_and_flags_beat_the_file_field_by_field() {
        // Clap fills one struct from env and flags (flag first), so this layer is one value.
        let file = FileConfig::parse("[worker]\nconcurrency = 2\nmodel = \"from-file\"\n")
            .expect("valid toml");
        let config = worker_config(worker(Some(8), None), &file).expect("valid");
        assert_eq!(config.concurrency, 8);
        assert_eq!(config.model.default_model, "from-file");
    }

    #[test]
    fn parsed_flags_beat_the_file_which_beats_defaults() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Probe {
            #[command(flatten)]
            settings: CoordinatorSettings,
        }
        let file = FileConfig::parse(
            "[coordinator]\nqueue = \"file\"\nprefix = \"file\"\nack_wait = \"1m\"\n",
        )
        .expect("valid toml");
        let flags = Probe::try_parse_from(["probe", "--queue", "flag", "--ack-wait", "2m"])
            .expect("valid flags");
        let config = coordinator_config(flags.settings, &file).expect("valid");
        assert_eq!(config.queue, "flag");
        assert_eq!(config.ack_wait, Duration::from_secs(120));
        assert_eq!(config.prefix, "file");
        assert_eq!(config.nats_url, "nats://127.0.0.1:4222");
    }

    #[test]
    fn coordinator_sections_round_trip_through_print_config() {
        let config = CoordinatorConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 6000)),
            ack_wait: Duration::from_secs(90),
            ..CoordinatorConfig::default()
        };
        let printed = render_coordinator(&config).expect("renders");
        assert!(printed.starts_with("[coordinator]"), "{printed}");
        assert!(printed.contains("ack_wait = \"1m30s\""), "{printed}");
        let reread = coordinator_config(
            CoordinatorSettings::default(),
            &FileConfig::parse(&printed).expect("parses"),
        )
        .expect("valid");
        assert_eq!(reread.listen, config.listen);
        assert_eq!(reread.ack_wait, config.ack_wait);
    }

    #[test]
    fn print_config_redacts_the_api_key_and_url_passwords() {
        let flags = WorkerSettings {
            model_api_key: Some("sk-secret".to_owned()),
            nats_url: Some("nats://app:hunter2@nats:4222".to_owned()),
            ..WorkerSettings::default()
        };
        let config = worker_config(flags, &FileConfig::default()).expect("valid");
        assert_eq!(config.model.api_key.as_deref(), Some("sk-secret"));
        let printed = render_worker(&config).expect("renders");
        assert!(
            !printed.contains("sk-secret") && !printed.contains("hunter2"),
            "{printed}"
        );
        assert!(
            printed.contains("model_api_key = \"<redacted>\""),
            "{printed}"
        );
        assert!(
            printed.contains("nats://app:<redacted>@nats:4222"),
            "{printed}"
        );
    }

    #[test]
    fn url_passwords_are_redacted_and_other_urls_kept() {
        assert_eq!(
            redact_url_password("postgres://u:p@h:5432/db?x=1"),
            "postgres://u:<redacted>@h:5432/db?x=1"
        );
        assert_eq!(
            redact_url_password("postgres://u@h/db"),
            "postgres://u@h/db"
        );
        assert_eq!(
            redact_url_password("nats://127.0.0.1:4222"),
            "nats://127.0.0.1:4222"
        );
        assert_eq!(redact_url_password("http://h/p@x:y"), "http://h/p@x:y");
        assert_eq!(redact_url_password("not a url"), "not a url");
    }

    #[test]
    fn unknown_keys_in_the_file_are_errors() {
        let err = FileConfig::parse("[worker]\nconcurency = 2\n").expect_err("typo");
        assert!(err.to_string().contains("concurency"), "{err}");
        assert!(FileConfig::parse("[cordinator]\n").is_err());
    }

    #[test]
    fn zero_concurrency_is_rejected() {
        let err =
            worker_config(worker(Some(0), None), &FileConfig::default()).expect_err("invalid");
        assert!(err.to_string().contains("concurrency"), "{err}");
    }
}
