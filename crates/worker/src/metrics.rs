//! The worker's metrics, every name in this one file (`docs/metrics.md` lists them):
//! sessions running against capacity, model calls (the OpenTelemetry GenAI names
//! `gen_ai_client_operation_duration_seconds` and `gen_ai_client_token_usage`), model
//! errors by kind, what priced model calls cost by model, and tool calls by tool and
//! outcome.
//!
//! Model calls are measured by [`MeteredProvider`], which wraps the worker's model
//! provider; tool calls by [`MeteredTool`], which wraps each registered tool. Neither
//! changes what it wraps. A model call is one `Provider::chat`, the client's own
//! retries included. Labels stay low in cardinality: tool names are the registry's,
//! and model names (chosen by submitters) are capped at [`MAX_MODELS`] distinct values,
//! the rest reported as `other`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use serde_json::Value;
use taskwire_agent::tools::{Tool, ToolContext, ToolOutput};
use taskwire_agent::workspace::Workspace;
use taskwire_agent::{SessionHost, ToolError};
use taskwire_llm::router::ANTHROPIC_PREFIX;
use taskwire_llm::{ChatRequest, ChatResponse, LlmError, Provider, StreamDelta, ToolDef};
use taskwire_metrics::buckets;

/// Most distinct model names reported; later ones are `other`.
pub const MAX_MODELS: usize = 64;

/// The GenAI operation of every model call a session makes.
const CHAT: &str = "chat";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_provider_name: &'static str,
    gen_ai_request_model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    gen_ai_operation_name: &'static str,
    gen_ai_provider_name: &'static str,
    gen_ai_request_model: String,
    gen_ai_token_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelErrorLabels {
    gen_ai_request_model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    gen_ai_request_model: String,
}

/// A counter of US dollars (fractions of a cent add up).
type CostCounter = Counter<f64, std::sync::atomic::AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: &'static str,
    outcome: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn model_seconds() -> Histogram {
    Histogram::new(buckets::MODEL_CALL_SECONDS)
}
fn tokens() -> Histogram {
    Histogram::new(buckets::TOKENS)
}
fn tool_seconds() -> Histogram {
    Histogram::new(buckets::TOOL_CALL_SECONDS)
}

/// The worker's metrics and the registry that exposes them. Cheap to clone.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Arc<Registry>,
    sessions_running: Gauge,
    sessions_capacity: Gauge,
    model_duration: HistogramFamily<ModelLabels>,
    token_usage: HistogramFamily<TokenLabels>,
    model_errors: Family<ModelErrorLabels, Counter>,
    model_cost: Family<CostLabels, CostCounter>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_duration: HistogramFamily<ToolLabels>,
    rate_wait: HistogramFamily<CostLabels>,
    rate_permits: Family<CostLabels, Counter>,
    rate_throttled: Family<CostLabels, Counter>,
    models: Mutex<HashSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut r = Registry::default();
        let sessions_running = Gauge::default();
        r.register(
            "taskwire_worker_sessions_running",
            "Tasks this worker holds: claimed and not yet settled",
            sessions_running.clone(),
        );
        let sessions_capacity = Gauge::default();
        r.register(
            "taskwire_worker_sessions_capacity",
            "Tasks this worker runs at once at most (--concurrency)",
            sessions_capacity.clone(),
        );
        let model_duration = HistogramFamily::<ModelLabels>::new_with_constructor(model_seconds);
        r.register_with_unit(
            "gen_ai_client_operation_duration",
            "Duration of model calls, the client's retries included",
            Unit::Seconds,
            model_duration.clone(),
        );
        let token_usage = HistogramFamily::<TokenLabels>::new_with_constructor(tokens);
        r.register(
            "gen_ai_client_token_usage",
            "Tokens used per model call, by token type (input, output; cache_read and cache_write: the parts of the input read from and written to the provider's prompt cache)",
            token_usage.clone(),
        );
        let model_errors = Family::<ModelErrorLabels, Counter>::default();
        r.register(
            "taskwire_worker_model_errors",
            "Model calls that failed, after the client's retries, by kind",
            model_errors.clone(),
        );
        let model_cost = Family::<CostLabels, CostCounter>::default();
        r.register_with_unit(
            "taskwire_worker_model_cost",
            "What model calls cost, in US dollars at the model catalogue's prices; calls of unpriced models are not counted",
            Unit::Other("usd".to_owned()),
            model_cost.clone(),
        );
        let tool_calls = Family::<ToolLabels, Counter>::default();
        r.register(
            "taskwire_worker_tool_calls",
            "Tool calls executed, by tool and outcome (ok, error, cancelled)",
            tool_calls.clone(),
        );
        let tool_duration = HistogramFamily::<ToolLabels>::new_with_constructor(tool_seconds);
        r.register_with_unit(
            "taskwire_worker_tool_call_duration",
            "Duration of tool calls, by tool and outcome",
            Unit::Seconds,
            tool_duration.clone(),
        );
        let rate_wait = HistogramFamily::<CostLabels>::new_with_constructor(model_seconds);
        r.register_with_unit(
            "taskwire_worker_model_rate_limit_wait",
            "Time model calls waited for their slot in the model's rate budget, calls that waited only",
            Unit::Seconds,
            rate_wait.clone(),
        );
        let rate_permits = Family::<CostLabels, Counter>::default();
        r.register(
            "taskwire_worker_model_rate_limit_permits",
            "Model calls given their slot in a rate budget (a limited model's, or one the provider throttled)",
            rate_permits.clone(),
        );
        let rate_throttled = Family::<CostLabels, Counter>::default();
        r.register(
            "taskwire_worker_model_throttled",
            "Model calls the provider throttled (429, or Anthropic's 529 overloaded), each try counted",
            rate_throttled.clone(),
        );
        Self(Arc::new(Inner {
            registry: Arc::new(r),
            rate_wait,
            rate_permits,
            rate_throttled,
            sessions_running,
            sessions_capacity,
            model_duration,
            token_usage,
            model_errors,
            model_cost,
            tool_calls,
            tool_duration,
            models: Mutex::new(HashSet::new()),
        }))
    }

    fn model(&self, model: &str) -> CostLabels {
        CostLabels {
            gen_ai_request_model: self.model_label(model),
        }
    }

    /// The registry `/metrics` encodes.
    pub fn registry(&self) -> Arc<Registry> {
        self.0.registry.clone()
    }

    pub fn set_capacity(&self, sessions: usize) {
        self.0
            .sessions_capacity
            .set(i64::try_from(sessions).unwrap_or(i64::MAX));
    }

    /// Counts a held task until the guard drops.
    pub fn session_started(&self) -> SessionGuard {
        self.0.sessions_running.inc();
        SessionGuard(self.clone())
    }

    /// `model`, or `other` once [`MAX_MODELS`] other names were seen.
    fn model_label(&self, model: &str) -> String {
        let mut models = self
            .0
            .models
            .lock()
            .expect("model set lock is never poisoned");
        if models.contains(model) || models.len() < MAX_MODELS && models.insert(model.to_owned()) {
            model.to_owned()
        } else {
            "other".to_owned()
        }
    }

    fn model_call(&self, model: &str, seconds: f64, outcome: &Result<ChatResponse, LlmError>) {
        let provider = match model.split_once('/') {
            Some((ANTHROPIC_PREFIX, _)) => "anthropic",
            _ => "openai",
        };
        let model = self.model_label(model);
        let labels = ModelLabels {
            gen_ai_operation_name: CHAT,
            gen_ai_provider_name: provider,
            gen_ai_request_model: model.clone(),
        };
        self.0
            .model_duration
            .get_or_create(&labels)
            .observe(seconds);
        match outcome {
            Ok(response) => {
                // The cached parts of the input are observed apart too (they are in
                // `input` as well), only for calls that had some.
                let cache = [
                    ("cache_read", response.usage.cached_input_tokens),
                    ("cache_write", response.usage.cache_write_input_tokens),
                ];
                for (token_type, n) in [
                    ("input", response.usage.input_tokens),
                    ("output", response.usage.output_tokens),
                ]
                .into_iter()
                .chain(cache.into_iter().filter(|(_, n)| *n > 0))
                {
                    let labels = TokenLabels {
                        gen_ai_operation_name: CHAT,
                        gen_ai_provider_name: provider,
                        gen_ai_request_model: model.clone(),
                        gen_ai_token_type: token_type,
                    };
                    // Token counts stay far below 2^53: exact as f64.
                    #[allow(clippy::cast_precision_loss)]
                    self.0.token_usage.get_or_create(&labels).observe(n as f64);
                }
                // Set by the pricing provider this one wraps; unpriced calls add nothing.
                let usage = response.usage;
                if usage.unpriced_tokens == 0
                    && usage.input_tokens.saturating_add(usage.output_tokens) > 0
                {
                    #[allow(clippy::cast_precision_loss)]
                    let usd = usage.cost_picousd as f64 / 1e12;
                    self.0
                        .model_cost
                        .get_or_create(&CostLabels {
                            gen_ai_request_model: model.clone(),
                        })
                        .inc_by(usd);
                }
            }
            Err(error) => {
                self.0
                    .model_errors
                    .get_or_create(&ModelErrorLabels {
                        gen_ai_request_model: model,
                        kind: error.kind(),
                    })
                    .inc();
            }
        }
    }

    fn tool_call(&self, tool: &'static str, outcome: &'static str, seconds: f64) {
        let labels = ToolLabels { tool, outcome };
        self.0.tool_calls.get_or_create(&labels).inc();
        self.0.tool_duration.get_or_create(&labels).observe(seconds);
    }
}

/// Decrements the running-sessions gauge when dropped.
pub struct SessionGuard(Metrics);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0.0.sessions_running.dec();
    }
}

/// A model provider whose calls are measured.
pub struct MeteredProvider {
    inner: Arc<dyn Provider>,
    metrics: Metrics,
}

impl MeteredProvider {
    pub fn new(inner: Arc<dyn Provider>, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }
}

#[async_trait]
impl Provider for MeteredProvider {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let started = Instant::now();
        let outcome = self.inner.chat(request, on_delta).await;
        self.metrics
            .model_call(&request.model, started.elapsed().as_secs_f64(), &outcome);
        outcome
    }
}

/// A tool whose executions are measured; everything else is the wrapped tool's.
pub struct MeteredTool {
    inner: Box<dyn Tool>,
    metrics: Metrics,
}

impl MeteredTool {
    pub fn wrap(inner: Box<dyn Tool>, metrics: Metrics) -> Box<dyn Tool> {
        Box::new(Self { inner, metrics })
    }
}

#[async_trait]
impl Tool for MeteredTool {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    fn permission(&self) -> &'static str {
        self.inner.permission()
    }
    fn subject(&self, args: &Value, workspace: &Workspace) -> String {
        self.inner.subject(args, workspace)
    }
    fn patterns(&self, args: &Value, workspace: &Workspace) -> Vec<String> {
        self.inner.patterns(args, workspace)
    }
    fn title(&self, args: &Value) -> String {
        self.inner.title(args)
    }
    fn listed_with(&self) -> Option<&'static str> {
        self.inner.listed_with()
    }
    fn available(&self, host: &dyn SessionHost) -> bool {
        self.inner.available(host)
    }
    fn changes_files(&self) -> bool {
        self.inner.changes_files()
    }
    fn uses_files(&self) -> bool {
        self.inner.uses_files()
    }
    fn definition(&self) -> ToolDef {
        self.inner.definition()
    }
    fn definition_for(&self, definition: &ToolDef, host: &dyn SessionHost) -> ToolDef {
        self.inner.definition_for(definition, host)
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let started = Instant::now();
        let outcome = self.inner.execute(args, ctx).await;
        let label = match &outcome {
            Ok(_) => "ok",
            Err(_) if ctx.cancel.is_cancelled() => "cancelled",
            Err(_) => "error",
        };
        self.metrics
            .tool_call(self.inner.name(), label, started.elapsed().as_secs_f64());
        outcome
    }
}

impl taskwire_llm::limits::LimitEvents for Metrics {
    fn waited(&self, model: &str, wait: std::time::Duration) {
        self.0
            .rate_wait
            .get_or_create(&self.model(model))
            .observe(wait.as_secs_f64());
    }

    fn permitted(&self, model: &str) {
        self.0.rate_permits.get_or_create(&self.model(model)).inc();
    }

    fn throttled(&self, model: &str) {
        self.0
            .rate_throttled
            .get_or_create(&self.model(model))
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_past_the_cap_are_reported_as_other() {
        let metrics = Metrics::new();
        for i in 0..MAX_MODELS {
            assert_eq!(metrics.model_label(&format!("m{i}")), format!("m{i}"));
        }
        assert_eq!(metrics.model_label("one-too-many"), "other");
        assert_eq!(metrics.model_label("m0"), "m0", "known names stay");
    }

    #[test]
    fn a_failed_model_call_counts_an_error_of_its_kind_and_no_tokens() {
        let metrics = Metrics::new();
        let error = LlmError::Http {
            url: "u".into(),
            status: 429,
            body: String::new(),
            retry_after: None,
        };
        metrics.model_call("anthropic/claude", 0.5, &Err(error));
        let (_, text) = taskwire_metrics::render(&metrics.registry(), false).expect("encodes");
        assert!(
            text.contains(
                "taskwire_worker_model_errors_total{gen_ai_request_model=\"anthropic/claude\",kind=\"rate_limited\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("gen_ai_provider_name=\"anthropic\""),
            "{text}"
        );
        assert!(!text.contains("gen_ai_token_type"), "{text}");
    }
}
