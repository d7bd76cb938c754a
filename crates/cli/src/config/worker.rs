//! `[worker]` settings: flags, `TASKWIRE_*` env and file keys of [`WorkerConfig`], each
//! with its place there. Defaults in the help texts are those of `WorkerConfig`.

use std::net::SocketAddr;
use std::path::PathBuf;

use taskwire_llm::ModelCatalogue;
use taskwire_worker::WorkerConfig;

use super::codec::{Codec, Not, Same, Secret, Url};
use crate::duration::HumanDuration;
use crate::errors::ArgError;

settings! {
    /// Worker settings; each one also reads `TASKWIRE_<NAME>`.
    pub struct WorkerSettings for WorkerConfig {
        /// NATS URL [default: nats://127.0.0.1:4222]
        #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
        pub nats_url: Option<String> => nats_url as Url,
        /// Subject prefix of the deployment [default: taskwire]
        #[arg(long, env = "TASKWIRE_PREFIX")]
        pub prefix: Option<String> => prefix,
        /// Queue to serve [default: default]
        #[arg(long, env = "TASKWIRE_QUEUE")]
        pub queue: Option<String> => queue,
        /// Sessions run at once [default: 16]
        #[arg(long, env = "TASKWIRE_CONCURRENCY", value_name = "N")]
        pub concurrency: Option<usize> => concurrency,
        /// Read-only base of every task's workspace: a git checkout of its HEAD when it is a repository's top level, else a copy [default: .]
        #[arg(long, env = "TASKWIRE_WORKSPACE", value_name = "DIR")]
        pub workspace: Option<PathBuf> => workspace,
        /// Where each task attempt gets its own workspace, and the cache of repositories tasks name [default: $TMPDIR/taskwire-workspaces]
        #[arg(long, env = "TASKWIRE_WORKSPACES_DIR", value_name = "DIR")]
        pub workspaces_dir: Option<PathBuf> => workspaces_dir,
        /// Keep each task's workspace after its result is recorded instead of removing it [default: false]
        #[arg(
            long,
            env = "TASKWIRE_KEEP_WORKSPACES",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub keep_workspaces: Option<bool> => keep_workspaces,
        /// This worker's name in logs and results [default: worker-<random>]
        #[arg(long, env = "TASKWIRE_WORKER_ID", value_name = "ID")]
        pub worker_id: Option<String> => worker_id,
        /// OpenAI-compatible model endpoint [default: http://127.0.0.1:8000/v1]
        #[arg(long, env = "TASKWIRE_MODEL_BASE_URL", value_name = "URL")]
        pub model_base_url: Option<String> => model.base_url as Url,
        /// Bearer token of the model endpoint; never printed
        #[arg(
            long,
            env = "TASKWIRE_MODEL_API_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub model_api_key: Option<String> => model.api_key as Secret,
        /// Model used when neither the task nor its agent names one [default: default]
        #[arg(long, env = "TASKWIRE_MODEL", value_name = "NAME")]
        pub model: Option<String> => model.default_model,
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
        pub no_stream: Option<bool> => model.stream as Not,
        /// Timeout of one whole model call [default: 5m]
        #[arg(long, env = "TASKWIRE_MODEL_TIMEOUT", value_name = "DURATION")]
        pub model_timeout: Option<HumanDuration> => model.request_timeout,
        /// Retries of one model call on 429, 5xx or timeouts before the attempt fails [default: 3]
        #[arg(long, env = "TASKWIRE_MODEL_MAX_RETRIES", value_name = "N")]
        pub model_max_retries: Option<u32> => model.max_retries,
        /// Ack wait of the shared consumer: how soon a silent worker's tasks go to another worker; set on the consumer at start, give every worker the same [default: 6s]
        #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
        pub ack_wait: Option<HumanDuration> => ack_wait,
        /// How long a claim may take before the task is retried [default: 10s]
        #[arg(long, env = "TASKWIRE_CLAIM_TIMEOUT", value_name = "DURATION")]
        pub claim_timeout: Option<HumanDuration> => claim_timeout,
        /// On SIGTERM, how long running sessions may finish before their tasks are released to other workers; keep the orchestrator's kill timeout longer [default: 30s]
        #[arg(long, env = "TASKWIRE_DRAIN_GRACE", value_name = "DURATION")]
        pub drain_grace: Option<HumanDuration> => drain_grace,
        /// The former name of drain_grace (--shutdown-grace, TASKWIRE_SHUTDOWN_GRACE); drain_grace wins where both are set
        #[arg(long, env = "TASKWIRE_SHUTDOWN_GRACE", value_name = "DURATION", hide = true)]
        pub shutdown_grace: Option<HumanDuration> => drain_grace as FormerName,
        /// Address to serve /healthz, /readyz and /metrics on over HTTP, e.g. 0.0.0.0:8080 [default: none; TASKWIRE_DEFAULT_LISTEN_IP:8080 when that is set, as in the image]
        #[arg(long, env = "TASKWIRE_HTTP_LISTEN", value_name = "ADDR")]
        pub http_listen: Option<SocketAddr> => http_listen,
        /// Delay before the first retry of a retryable failure; doubles per attempt [default: 1s]
        #[arg(long, env = "TASKWIRE_RETRY_BASE_DELAY", value_name = "DURATION")]
        pub retry_base_delay: Option<HumanDuration> => retry_base_delay,
        /// Longest delay between retries [default: 1m]
        #[arg(long, env = "TASKWIRE_RETRY_MAX_DELAY", value_name = "DURATION")]
        pub retry_max_delay: Option<HumanDuration> => retry_max_delay,
        /// How long an `ask` permission waits for an answer before it counts as a deny [default: 10m]
        #[arg(long, env = "TASKWIRE_APPROVAL_TIMEOUT", value_name = "DURATION")]
        pub approval_timeout: Option<HumanDuration> => approval_timeout,
        /// Anthropic Messages endpoint for models named `anthropic/<model>`, e.g. https://api.anthropic.com
        #[arg(long, env = "TASKWIRE_ANTHROPIC_BASE_URL", value_name = "URL")]
        pub anthropic_base_url: Option<String> => model.anthropic_base_url as Url,
        /// Anthropic API key; never printed
        #[arg(
            long,
            env = "TASKWIRE_ANTHROPIC_API_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub anthropic_api_key: Option<String> => model.anthropic_api_key as Secret,
        /// Instruction files (relative to the workspace) added to every session's system prompt after AGENTS.md; comma-separated or repeated [default: none]
        #[arg(
            long = "instructions",
            env = "TASKWIRE_INSTRUCTIONS",
            value_name = "FILE",
            value_delimiter = ','
        )]
        pub instructions: Option<Vec<String>> => instructions,
        /// URL prefixes HTTP hooks (hooks.json `"type": "http"`) may POST to, e.g. https://hooks.example.com/; comma-separated or repeated. A hook to any other URL fails and is reported [default: none]
        #[arg(
            long = "hook-urls",
            env = "TASKWIRE_HOOK_URLS",
            value_name = "URL",
            value_delimiter = ','
        )]
        pub hook_urls: Option<Vec<String>> => hook_urls,
        /// Run commands that tools start (bash) without the sandbox, with the worker's own powers; without it, a kernel lacking Landlock ABI 4 or seccomp makes the worker refuse them [default: false]
        #[arg(
            long,
            env = "TASKWIRE_UNSAFE_NO_SANDBOX",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub unsafe_no_sandbox: Option<bool> => unsafe_no_sandbox,
        /// The model catalogue as JSON, e.g. {"gpt-4o-mini": {"context_window": 128000, "input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6}}; in the file, a [worker.models."NAME"] table per model. Entries add to (and replace same-named ones of) the file's; models not named get a 128000-token window and no price [default: none]
        #[arg(long, env = "TASKWIRE_MODELS", value_name = "JSON", value_parser = parse_models)]
        pub models: Option<ModelCatalogue> => models,
        /// Share of a model's context window a session's next request may fill before its older turns are summarised; above 0, at most 1 [default: 0.8]
        #[arg(long, env = "TASKWIRE_COMPACTION_THRESHOLD", value_name = "SHARE")]
        pub compaction_threshold: Option<f64> => compaction_threshold as ShareOrDefault,
        /// Never summarise sessions, whatever their size [default: false]
        #[arg(
            long,
            env = "TASKWIRE_NO_COMPACTION",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub no_compaction: Option<bool> => compaction_threshold as Disables,
        /// Do not give new root sessions a title (the hidden title agent's one model call per session) [default: false]
        #[arg(
            long,
            env = "TASKWIRE_NO_TITLES",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub no_titles: Option<bool> => titles as Not,
        /// The model of side calls such as titles, e.g. a small, cheap one; without it they use the session's model [default: none]
        #[arg(long, env = "TASKWIRE_SMALL_MODEL", value_name = "MODEL")]
        pub small_model: Option<String> => small_model,
        /// Write compaction summaries with the small model (the agent's `small_model`, else --small-model) rather than the session's [default: false]
        #[arg(
            long,
            env = "TASKWIRE_COMPACT_WITH_SMALL_MODEL",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub compact_with_small_model: Option<bool> => compact_with_small_model,
        /// Do not ask providers to cache each session's repeated prompt prefix (Anthropic `cache_control`, OpenAI `prompt_cache_key`) [default: false]
        #[arg(
            long,
            env = "TASKWIRE_NO_PROMPT_CACHING",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub no_prompt_caching: Option<bool> => prompt_caching as Not,
        /// Make every workspace a copy, never an overlay of a shared checkout of a git base [default: false]
        #[arg(
            long,
            env = "TASKWIRE_NO_WORKSPACE_OVERLAYS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = clap::builder::BoolishValueParser::new()
        )]
        pub no_workspace_overlays: Option<bool> => workspace_overlays as Not,
    }
}

/// `--models` and `TASKWIRE_MODELS`: the catalogue as JSON, each entry checked.
fn parse_models(json: &str) -> Result<ModelCatalogue, ArgError> {
    serde_json::from_str(json).map_err(ArgError::Models)
}

impl WorkerSettings {
    /// `flags` (flags and env) over `file`, layered as every section is (see
    /// `config::layered`), but for two fields. An old name is folded into its new one
    /// within each layer first, so that each layer's value, under whichever name, is
    /// layered as one (`--shutdown-grace` beats a file's `drain_grace`). And the model
    /// catalogues are merged model by model: a higher layer adds models and replaces
    /// same-named ones whole, where figment would merge two entries key by key.
    pub fn layered(file: Self, flags: Self) -> anyhow::Result<Self> {
        let (mut file, mut flags) = (file.with_old_names(), flags.with_old_names());
        let models = match (flags.models.take(), file.models.take()) {
            (Some(upper), Some(lower)) => Some(upper.merged_over(lower)),
            (upper, lower) => upper.or(lower),
        };
        Ok(Self {
            models,
            ..super::layered("worker", file, flags)?
        })
    }

    /// This layer with its old names folded into the new ones; the new name wins.
    fn with_old_names(mut self) -> Self {
        self.drain_grace = self.drain_grace.or(self.shutdown_grace.take());
        self
    }
}

/// `shutdown_grace`, the former name of `drain_grace`: [`WorkerSettings::layered`] folds
/// it into the new name in each layer, so it puts nothing, and it is never printed.
struct FormerName;

impl<S, T> Codec<S, T> for FormerName {
    fn put(_: &mut T, _: Option<S>) {}

    fn show(_: &T) -> Option<S> {
        None
    }
}

/// `compaction_threshold`: off (`None`) prints the default share beside
/// `no_compaction = true`, so that the printed file reads back as the same config.
struct ShareOrDefault;

impl Codec<f64, Option<f64>> for ShareOrDefault {
    fn put(slot: &mut Option<f64>, value: Option<f64>) {
        Same::put(slot, value);
    }

    fn show(slot: &Option<f64>) -> Option<f64> {
        Some(slot.unwrap_or(taskwire_worker::config::DEFAULT_COMPACTION_THRESHOLD))
    }
}

/// A `no_*` switch that turns an optional setting off (`no_compaction`): `true` empties
/// the slot, whatever a share set beside it; `false` leaves it as it is.
struct Disables;

impl<T> Codec<bool, Option<T>> for Disables {
    fn put(slot: &mut Option<T>, value: Option<bool>) {
        if value == Some(true) {
            *slot = None;
        }
    }

    fn show(slot: &Option<T>) -> Option<bool> {
        Some(slot.is_none())
    }
}
