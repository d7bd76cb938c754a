//! `[worker]` settings: flags, `TASKWIRE_*` env and file keys of [`WorkerConfig`].
//! Defaults in the help texts are those of `WorkerConfig`.

use std::net::SocketAddr;
use std::path::PathBuf;

use taskwire_llm::ModelCatalogue;
use taskwire_worker::WorkerConfig;

use super::{redact_url_password, redacted, set, set_some};
use crate::duration::HumanDuration;

settings! {
    /// Worker settings; each one also reads `TASKWIRE_<NAME>`.
    pub struct WorkerSettings for WorkerConfig {
        /// NATS URL [default: nats://127.0.0.1:4222]
        #[arg(long, env = "TASKWIRE_NATS_URL", value_name = "URL")]
        pub nats_url: Option<String>,
        /// Subject prefix of the deployment [default: taskwire]
        #[arg(long, env = "TASKWIRE_PREFIX")]
        pub prefix: Option<String>,
        /// Queue to serve [default: default]
        #[arg(long, env = "TASKWIRE_QUEUE")]
        pub queue: Option<String>,
        /// Sessions run at once [default: 16]
        #[arg(long, env = "TASKWIRE_CONCURRENCY", value_name = "N")]
        pub concurrency: Option<usize>,
        /// Read-only base of every task's workspace: a git checkout of its HEAD when it is a repository's top level, else a copy [default: .]
        #[arg(long, env = "TASKWIRE_WORKSPACE", value_name = "DIR")]
        pub workspace: Option<PathBuf>,
        /// Where each task attempt gets its own workspace, and the cache of repositories tasks name [default: $TMPDIR/taskwire-workspaces]
        #[arg(long, env = "TASKWIRE_WORKSPACES_DIR", value_name = "DIR")]
        pub workspaces_dir: Option<PathBuf>,
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
        pub keep_workspaces: Option<bool>,
        /// This worker's name in logs and results [default: worker-<random>]
        #[arg(long, env = "TASKWIRE_WORKER_ID", value_name = "ID")]
        pub worker_id: Option<String>,
        /// OpenAI-compatible model endpoint [default: http://127.0.0.1:8000/v1]
        #[arg(long, env = "TASKWIRE_MODEL_BASE_URL", value_name = "URL")]
        pub model_base_url: Option<String>,
        /// Bearer token of the model endpoint; never printed
        #[arg(
            long,
            env = "TASKWIRE_MODEL_API_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub model_api_key: Option<String>,
        /// Model used when neither the task nor its agent names one [default: default]
        #[arg(long, env = "TASKWIRE_MODEL", value_name = "NAME")]
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
        pub no_stream: Option<bool>,
        /// Timeout of one whole model call [default: 5m]
        #[arg(long, env = "TASKWIRE_MODEL_TIMEOUT", value_name = "DURATION")]
        pub model_timeout: Option<HumanDuration>,
        /// Retries of one model call on 429, 5xx or timeouts before the attempt fails [default: 3]
        #[arg(long, env = "TASKWIRE_MODEL_MAX_RETRIES", value_name = "N")]
        pub model_max_retries: Option<u32>,
        /// Ack wait of the shared consumer: how soon a silent worker's tasks go to another worker; set on the consumer at start, give every worker the same [default: 6s]
        #[arg(long, env = "TASKWIRE_ACK_WAIT", value_name = "DURATION")]
        pub ack_wait: Option<HumanDuration>,
        /// How long a claim may take before the task is retried [default: 10s]
        #[arg(long, env = "TASKWIRE_CLAIM_TIMEOUT", value_name = "DURATION")]
        pub claim_timeout: Option<HumanDuration>,
        /// On SIGTERM, how long running sessions may finish before their tasks are released to other workers; keep the orchestrator's kill timeout longer [default: 30s]
        #[arg(long, env = "TASKWIRE_DRAIN_GRACE", value_name = "DURATION")]
        pub drain_grace: Option<HumanDuration>,
        /// The former name of drain_grace (--shutdown-grace, TASKWIRE_SHUTDOWN_GRACE); drain_grace wins where both are set
        #[arg(long, env = "TASKWIRE_SHUTDOWN_GRACE", value_name = "DURATION", hide = true)]
        pub shutdown_grace: Option<HumanDuration>,
        /// Address to serve /healthz, /readyz and /metrics on over HTTP, e.g. 0.0.0.0:8080 [default: none; TASKWIRE_DEFAULT_LISTEN_IP:8080 when that is set, as in the image]
        #[arg(long, env = "TASKWIRE_HTTP_LISTEN", value_name = "ADDR")]
        pub http_listen: Option<SocketAddr>,
        /// Delay before the first retry of a retryable failure; doubles per attempt [default: 1s]
        #[arg(long, env = "TASKWIRE_RETRY_BASE_DELAY", value_name = "DURATION")]
        pub retry_base_delay: Option<HumanDuration>,
        /// Longest delay between retries [default: 1m]
        #[arg(long, env = "TASKWIRE_RETRY_MAX_DELAY", value_name = "DURATION")]
        pub retry_max_delay: Option<HumanDuration>,
        /// How long an `ask` permission waits for an answer before it counts as a deny [default: 10m]
        #[arg(long, env = "TASKWIRE_APPROVAL_TIMEOUT", value_name = "DURATION")]
        pub approval_timeout: Option<HumanDuration>,
        /// Anthropic Messages endpoint for models named `anthropic/<model>`, e.g. https://api.anthropic.com
        #[arg(long, env = "TASKWIRE_ANTHROPIC_BASE_URL", value_name = "URL")]
        pub anthropic_base_url: Option<String>,
        /// Anthropic API key; never printed
        #[arg(
            long,
            env = "TASKWIRE_ANTHROPIC_API_KEY",
            value_name = "KEY",
            hide_env_values = true
        )]
        pub anthropic_api_key: Option<String>,
        /// Instruction files (relative to the workspace) added to every session's system prompt after AGENTS.md; comma-separated or repeated [default: none]
        #[arg(
            long = "instructions",
            env = "TASKWIRE_INSTRUCTIONS",
            value_name = "FILE",
            value_delimiter = ','
        )]
        pub instructions: Option<Vec<String>>,
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
        pub unsafe_no_sandbox: Option<bool>,
        /// The model catalogue as JSON, e.g. {"gpt-4o-mini": {"context_window": 128000, "input_usd_per_mtok": 0.15, "output_usd_per_mtok": 0.6}}; in the file, a [worker.models."NAME"] table per model. Entries add to (and replace same-named ones of) the file's; models not named get a 128000-token window and no price [default: none]
        #[arg(long, env = "TASKWIRE_MODELS", value_name = "JSON", value_parser = parse_models)]
        pub models: Option<ModelCatalogue>,
        /// Share of a model's context window a session's next request may fill before its older turns are summarised; above 0, at most 1 [default: 0.8]
        #[arg(long, env = "TASKWIRE_COMPACTION_THRESHOLD", value_name = "SHARE")]
        pub compaction_threshold: Option<f64>,
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
        pub no_compaction: Option<bool>,
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
        pub no_titles: Option<bool>,
        /// The model of side calls such as titles, e.g. a small, cheap one; without it they use the session's model [default: none]
        #[arg(long, env = "TASKWIRE_SMALL_MODEL", value_name = "MODEL")]
        pub small_model: Option<String>,
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
        pub compact_with_small_model: Option<bool>,
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
        pub no_prompt_caching: Option<bool>,
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
        pub no_workspace_overlays: Option<bool>,
    }
}

/// `--models` and `TASKWIRE_MODELS`: the catalogue as JSON, each entry checked.
fn parse_models(json: &str) -> Result<ModelCatalogue, String> {
    serde_json::from_str(json).map_err(|e| e.to_string())
}

impl WorkerSettings {
    /// This layer with its old names folded into the new ones, so that each layer's
    /// value, under whichever name, is layered as one (`--shutdown-grace` beats a file's
    /// `drain_grace`).
    pub fn with_old_names(mut self) -> Self {
        self.drain_grace = self.drain_grace.or(self.shutdown_grace.take());
        self
    }

    /// Layers `self` over `lower` like `over`, except that the model catalogues are
    /// merged model by model: a higher layer adds models and replaces same-named ones.
    pub fn merged_over(mut self, mut lower: Self) -> Self {
        let models = match (self.models.take(), lower.models.take()) {
            (Some(upper), Some(lower)) => Some(upper.merged_over(lower)),
            (upper, lower) => upper.or(lower),
        };
        Self {
            models,
            ..self.over(lower)
        }
    }

    /// `config` with every field set here replaced; fields the CLI has no flag for keep
    /// their value.
    pub fn apply(self, mut c: WorkerConfig) -> WorkerConfig {
        self.apply_nats(&mut c);
        set(&mut c.nats_url, self.nats_url);
        set(&mut c.prefix, self.prefix);
        set(&mut c.queue, self.queue);
        set(&mut c.concurrency, self.concurrency);
        set(&mut c.workspace, self.workspace);
        set(&mut c.workspaces_dir, self.workspaces_dir);
        set(&mut c.keep_workspaces, self.keep_workspaces);
        set_some(&mut c.worker_id, self.worker_id);
        set(&mut c.model.base_url, self.model_base_url);
        set_some(&mut c.model.api_key, self.model_api_key);
        set(&mut c.model.default_model, self.model);
        set(&mut c.model.stream, self.no_stream.map(|no| !no));
        set(&mut c.model.request_timeout, self.model_timeout);
        set(&mut c.model.max_retries, self.model_max_retries);
        set(&mut c.ack_wait, self.ack_wait);
        set(&mut c.claim_timeout, self.claim_timeout);
        set(&mut c.drain_grace, self.shutdown_grace);
        set(&mut c.drain_grace, self.drain_grace);
        set_some(&mut c.http_listen, self.http_listen);
        set(&mut c.retry_base_delay, self.retry_base_delay);
        set(&mut c.retry_max_delay, self.retry_max_delay);
        set(&mut c.approval_timeout, self.approval_timeout);
        set_some(&mut c.model.anthropic_base_url, self.anthropic_base_url);
        set_some(&mut c.model.anthropic_api_key, self.anthropic_api_key);
        set(&mut c.instructions, self.instructions);
        set(&mut c.unsafe_no_sandbox, self.unsafe_no_sandbox);
        set(&mut c.models, self.models);
        set_some(&mut c.compaction_threshold, self.compaction_threshold);
        if self.no_compaction == Some(true) {
            c.compaction_threshold = None;
        }
        set(&mut c.titles, self.no_titles.map(|no| !no));
        set_some(&mut c.small_model, self.small_model);
        set(
            &mut c.compact_with_small_model,
            self.compact_with_small_model,
        );
        set(&mut c.prompt_caching, self.no_prompt_caching.map(|no| !no));
        set(
            &mut c.workspace_overlays,
            self.no_workspace_overlays.map(|no| !no),
        );
        c
    }

    /// Every field of `config`, secrets redacted, for `--print-config`.
    pub fn printable(c: &WorkerConfig) -> Self {
        Self {
            nats_url: Some(redact_url_password(&c.nats_url)),
            prefix: Some(c.prefix.clone()),
            queue: Some(c.queue.clone()),
            concurrency: Some(c.concurrency),
            workspace: Some(c.workspace.clone()),
            workspaces_dir: Some(c.workspaces_dir.clone()),
            keep_workspaces: Some(c.keep_workspaces),
            worker_id: c.worker_id.clone(),
            model_base_url: Some(redact_url_password(&c.model.base_url)),
            model_api_key: redacted(c.model.api_key.as_deref()),
            model: Some(c.model.default_model.clone()),
            no_stream: Some(!c.model.stream),
            model_timeout: Some(HumanDuration(c.model.request_timeout)),
            model_max_retries: Some(c.model.max_retries),
            ack_wait: Some(HumanDuration(c.ack_wait)),
            claim_timeout: Some(HumanDuration(c.claim_timeout)),
            drain_grace: Some(HumanDuration(c.drain_grace)),
            http_listen: c.http_listen,
            retry_base_delay: Some(HumanDuration(c.retry_base_delay)),
            retry_max_delay: Some(HumanDuration(c.retry_max_delay)),
            approval_timeout: Some(HumanDuration(c.approval_timeout)),
            anthropic_base_url: c
                .model
                .anthropic_base_url
                .as_deref()
                .map(redact_url_password),
            anthropic_api_key: redacted(c.model.anthropic_api_key.as_deref()),
            instructions: Some(c.instructions.clone()),
            unsafe_no_sandbox: Some(c.unsafe_no_sandbox),
            models: Some(c.models.clone()),
            // Off prints the default share beside `no_compaction = true`, so that the
            // printed file reads back as the same config.
            compaction_threshold: Some(
                c.compaction_threshold
                    .unwrap_or(taskwire_worker::config::DEFAULT_COMPACTION_THRESHOLD),
            ),
            no_compaction: Some(c.compaction_threshold.is_none()),
            no_titles: Some(!c.titles),
            small_model: c.small_model.clone(),
            compact_with_small_model: Some(c.compact_with_small_model),
            no_prompt_caching: Some(!c.prompt_caching),
            no_workspace_overlays: Some(!c.workspace_overlays),
            ..Self::printable_nats(c)
        }
    }
}
