//! Worker settings. Every field has a default; the CLI layers env and flags on top.
//! A worker needs a NATS URL and a model endpoint, never database credentials.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use taskwire_agent::DEFAULT_COMPACTION_THRESHOLD;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// NATS URL. Default `nats://127.0.0.1:4222`.
    pub nats_url: String,
    /// NATS connection security (TLS, credentials).
    pub nats: taskwire_bus::NatsOptions,
    /// Subject prefix of the deployment. Default `taskwire`.
    pub prefix: String,
    /// Queue to serve. Default `default`.
    pub queue: String,
    /// Sessions run at once. Default 16.
    pub concurrency: usize,
    /// The read-only base every task's workspace is made from: a checkout of its `HEAD`
    /// (plus its uncommitted changes to tracked files) when it is the top of a git
    /// repository, a plain copy otherwise. Default: the current directory.
    pub workspace: PathBuf,
    /// Where each task attempt gets its own workspace, and where the cache of
    /// repositories tasks name in `context_refs` lives. Default: `taskwire-workspaces`
    /// in the system's temp directory.
    pub workspaces_dir: PathBuf,
    /// Keep each task's workspace after its result is recorded (for inspection)
    /// instead of removing it. Default false.
    pub keep_workspaces: bool,
    /// Make a git base's workspaces as overlays of one shared checkout, where the
    /// process has a mount namespace of its own (the binary enters one at start);
    /// copies otherwise. Default true.
    pub workspace_overlays: bool,
    /// This worker's name in logs and results. Default `worker-<random>`.
    pub worker_id: Option<String>,
    /// The model endpoint.
    pub model: ModelConfig,
    /// Ack wait of the shared consumer: how long a task of a worker that went silent
    /// (killed, cut off) waits before another worker takes it. The worker sets it on
    /// the consumer at start, and its liveness thread sends an in-progress ack for
    /// every held task every quarter of it. Default 6 s.
    pub ack_wait: Duration,
    /// How long a claim request may take before the message is retried. Default 10 s:
    /// longer than the coordinator waits for a database connection (5 s), so a claim it
    /// grants late is still received (a reply after the worker gave up strands the claim
    /// until the message comes back).
    pub claim_timeout: Duration,
    /// On shutdown (drain), how long running sessions may take to finish before they
    /// are stopped and their tasks released (nak) for another worker. Default 30 s.
    /// An orchestrator's kill timeout should be longer.
    pub drain_grace: Duration,
    /// Where `/healthz` and `/readyz` are served over HTTP. Default: nowhere.
    pub http_listen: Option<SocketAddr>,
    /// Delay before the first retry of a retryable failure; doubles per attempt, with
    /// jitter. Default 1 s.
    pub retry_base_delay: Duration,
    /// Longest delay between retries. Default 60 s.
    pub retry_max_delay: Duration,
    /// How long an `ask` waits for an answer before it counts as a deny. Default 10 min.
    pub approval_timeout: Duration,
    /// Instruction files added to every session's system prompt after the project's
    /// `AGENTS.md` (or `CLAUDE.md`), as paths relative to the workspace. Default none.
    pub instructions: Vec<String>,
    /// Run the commands tools start (`bash`) without the sandbox, with the worker's
    /// own powers. Without it, a worker on a kernel that lacks a mechanism the sandbox
    /// needs refuses those commands. Default false.
    pub unsafe_no_sandbox: bool,
    /// Files no command may read even inside a readable system tree, besides the NATS
    /// credentials file (always hidden); the CLI adds its config file. Default empty.
    pub hidden_paths: Vec<PathBuf>,
    /// What the worker knows about each model, by the name tasks and agents use: its
    /// context window (for compaction) and prices. A model not named gets a 128,000
    /// token window and no price. Default empty.
    pub models: taskwire_llm::ModelCatalogue,
    /// The share of a model's context window a session's next request may fill before
    /// its older turns are summarised (above 0, at most 1); `None` never compacts.
    /// Default 0.8.
    pub compaction_threshold: Option<f64>,
    /// Give each new root session a short title with the hidden `title` agent (one
    /// more model call, beside the first step). Default true.
    pub titles: bool,
    /// The model of side calls: titles are written with it when set (unless the agent
    /// names its own `small_model`), else with the session's own model. Default none.
    pub small_model: Option<String>,
    /// Summaries of compacted sessions are written by the small model (the agent's,
    /// else `small_model`) rather than the session's. Default false.
    pub compact_with_small_model: bool,
    /// Ask providers to cache each session's repeated prompt prefix (Anthropic's
    /// `cache_control` breakpoints, OpenAI's `prompt_cache_key`). Default true.
    pub prompt_caching: bool,
    /// URL prefixes HTTP hooks may POST to; none by default (every HTTP hook fails).
    pub hook_urls: Vec<String>,
}

/// The OpenAI-compatible model endpoint.
#[derive(Clone)]
pub struct ModelConfig {
    /// e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// Bearer token; never logged.
    pub api_key: Option<String>,
    /// Model used when neither the request nor the agent names one.
    pub default_model: String,
    /// Stream answers (SSE) so text deltas reach watchers as they are written. Default true.
    pub stream: bool,
    /// Whole-request timeout of one model call. Default 300 s.
    pub request_timeout: Duration,
    /// Retries of one model call on 429/5xx/timeouts before the attempt fails
    /// (and the task-level retry takes over). Default 3.
    pub max_retries: u32,
    /// Anthropic Messages endpoint for models named `anthropic/<model>`. Default: none.
    pub anthropic_base_url: Option<String>,
    /// Anthropic API key; never logged.
    pub anthropic_api_key: Option<String>,
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("default_model", &self.default_model)
            .field("stream", &self.stream)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("anthropic_base_url", &self.anthropic_base_url)
            .field(
                "anthropic_api_key",
                &self.anthropic_api_key.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            nats_url: "nats://127.0.0.1:4222".to_owned(),
            nats: taskwire_bus::NatsOptions::default(),
            prefix: "taskwire".to_owned(),
            queue: "default".to_owned(),
            concurrency: 16,
            workspace: PathBuf::from("."),
            workspaces_dir: std::env::temp_dir().join("taskwire-workspaces"),
            keep_workspaces: false,
            workspace_overlays: true,
            worker_id: None,
            model: ModelConfig {
                base_url: "http://127.0.0.1:8000/v1".to_owned(),
                api_key: None,
                default_model: "default".to_owned(),
                stream: true,
                request_timeout: Duration::from_secs(300),
                max_retries: 3,
                anthropic_base_url: None,
                anthropic_api_key: None,
            },
            ack_wait: Duration::from_secs(6),
            claim_timeout: Duration::from_secs(10),
            drain_grace: Duration::from_secs(30),
            http_listen: None,
            retry_base_delay: Duration::from_secs(1),
            retry_max_delay: Duration::from_secs(60),
            approval_timeout: Duration::from_secs(600),
            instructions: Vec::new(),
            unsafe_no_sandbox: false,
            hidden_paths: Vec::new(),
            models: taskwire_llm::ModelCatalogue::default(),
            compaction_threshold: Some(DEFAULT_COMPACTION_THRESHOLD),
            titles: true,
            small_model: None,
            compact_with_small_model: false,
            prompt_caching: true,
            hook_urls: Vec::new(),
        }
    }
}
