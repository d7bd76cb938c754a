//! Choosing the model for a task, and the provider that serves it.
//!
//! [`resolve_model`] picks the model id: request override → agent model → parent
//! task's model → configured default. [`ModelRouter`] then sends each request to a
//! provider chosen by that id's prefix:
//!
//! - `anthropic/claude-sonnet-4` → the provider registered as `anthropic`, asked for
//!   `claude-sonnet-4` (the prefix is stripped);
//! - `gpt-4o` (no `/`) → the default provider, asked for `gpt-4o`;
//! - `meta-llama/Llama-3-70B` (a prefix no provider is registered under) → the default
//!   provider, asked for the whole id unchanged, because OpenAI-compatible servers
//!   and gateways (vLLM, OpenRouter) use such ids themselves.
//!
//! Prefixes match exactly (case-sensitive), up to the first `/`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::Provider;
use crate::error::{LlmError, RequestError};
use crate::types::{ChatRequest, ChatResponse, StreamDelta};

/// The conventional prefix for the OpenAI-compatible client.
pub const OPENAI_PREFIX: &str = "openai";
/// The conventional prefix for the Anthropic client.
pub const ANTHROPIC_PREFIX: &str = "anthropic";

/// Picks the model id for a session: the request's override, else the agent's model,
/// else the parent task's model, else `default`. Blank values count as unset, since
/// protobuf strings arrive as `""` when not given; the result is trimmed.
pub fn resolve_model(
    request: Option<&str>,
    agent: Option<&str>,
    parent: Option<&str>,
    default: &str,
) -> String {
    [request, agent, parent]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|model| !model.is_empty())
        .unwrap_or(default.trim())
        .to_owned()
}

/// Settings of a [`ModelRouter`].
#[derive(Clone)]
pub struct RouterConfig {
    /// Prefix of the provider for model ids without a registered prefix; must be a
    /// key of `providers`.
    pub default: String,
    /// Providers by prefix (e.g. [`OPENAI_PREFIX`], [`ANTHROPIC_PREFIX`], or a name
    /// of your own for a second OpenAI-compatible server). A prefix is not empty and
    /// holds no `/`.
    pub providers: HashMap<String, Arc<dyn Provider>>,
}

/// Where a model id goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'r, 'm> {
    /// The prefix of the provider chosen.
    pub provider: &'r str,
    /// The model id that provider is asked for.
    pub model: &'m str,
}

/// A [`Provider`] that hands each request to the provider its model id names.
#[derive(Clone)]
pub struct ModelRouter {
    providers: HashMap<String, Arc<dyn Provider>>,
    default: String,
}

impl ModelRouter {
    /// Builds a router; fails when `default` names no provider or a prefix is invalid.
    pub fn new(config: RouterConfig) -> Result<Self, LlmError> {
        if let Some(prefix) = config
            .providers
            .keys()
            .find(|p| p.is_empty() || p.contains('/'))
        {
            return Err(LlmError::Config(format!(
                "model provider prefix {prefix:?} must be non-empty and hold no '/'"
            )));
        }
        if !config.providers.contains_key(&config.default) {
            return Err(LlmError::Config(format!(
                "default model provider {:?} is not among the configured providers {:?}",
                config.default,
                sorted_prefixes(&config.providers)
            )));
        }
        Ok(Self {
            providers: config.providers,
            default: config.default,
        })
    }

    /// Where `model` goes; see the module docs.
    pub fn route<'m>(&self, model: &'m str) -> Route<'_, 'm> {
        if let Some((prefix, rest)) = model.split_once('/')
            && let Some((prefix, _)) = self.providers.get_key_value(prefix)
        {
            return Route {
                provider: prefix,
                model: rest,
            };
        }
        Route {
            provider: &self.default,
            model,
        }
    }

    fn provider(&self, prefix: &str) -> &Arc<dyn Provider> {
        // `route` only returns registered prefixes, and `new` checked the default.
        self.providers
            .get(prefix)
            .expect("routes name only registered providers")
    }
}

impl fmt::Debug for ModelRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelRouter")
            .field("providers", &sorted_prefixes(&self.providers))
            .field("default", &self.default)
            .finish()
    }
}

fn sorted_prefixes(providers: &HashMap<String, Arc<dyn Provider>>) -> Vec<&str> {
    let mut prefixes: Vec<&str> = providers.keys().map(String::as_str).collect();
    prefixes.sort_unstable();
    prefixes
}

#[async_trait::async_trait]
impl Provider for ModelRouter {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let route = self.route(&request.model);
        if route.model.trim().is_empty() {
            return Err(RequestError::NoModelForProvider {
                model: request.model.clone(),
                provider: route.provider.to_owned(),
            }
            .into());
        }
        let provider = self.provider(route.provider);
        if route.model == request.model {
            return provider.chat(request, on_delta).await;
        }
        // The trait takes the request by reference, so a stripped id needs a copy;
        // it costs a copy of the conversation, small next to the model call itself.
        let mut routed = request.clone();
        routed.model = route.model.to_owned();
        provider.chat(&routed, on_delta).await
    }
}

/// A [`Provider`] that sends the calls of some models to another provider: the
/// models a catalogue declares `api = "responses"` to the Responses client of the
/// same endpoint, the rest on to the router.
pub struct ModelSplit {
    inner: Arc<dyn Provider>,
    other: Arc<dyn Provider>,
    models: std::collections::HashSet<String>,
}

impl ModelSplit {
    /// `models` (as requests name them) go to `other`; an `openai/` prefix is taken
    /// off, as the router does, before `other` is asked.
    pub fn new(
        inner: Arc<dyn Provider>,
        other: Arc<dyn Provider>,
        models: impl IntoIterator<Item = String>,
    ) -> Self {
        Self {
            inner,
            other,
            models: models.into_iter().collect(),
        }
    }
}

#[async_trait::async_trait]
impl Provider for ModelSplit {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        if !self.models.contains(&request.model) {
            return self.inner.chat(request, on_delta).await;
        }
        match request.model.strip_prefix(&format!("{OPENAI_PREFIX}/")) {
            Some(model) => {
                let request = ChatRequest {
                    model: model.to_owned(),
                    ..request.clone()
                };
                self.other.chat(&request, on_delta).await
            }
            None => self.other.chat(request, on_delta).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::types::{FinishReason, Usage};

    #[test]
    fn the_request_override_wins() {
        assert_eq!(
            resolve_model(Some("req"), Some("agent"), Some("parent"), "default"),
            "req"
        );
    }

    #[test]
    fn the_agent_model_comes_before_the_parent_model() {
        assert_eq!(
            resolve_model(None, Some("agent"), Some("parent"), "default"),
            "agent"
        );
    }

    #[test]
    fn the_parent_model_comes_before_the_default() {
        assert_eq!(
            resolve_model(None, None, Some("parent"), "default"),
            "parent"
        );
    }

    #[test]
    fn the_default_applies_when_nothing_is_set() {
        assert_eq!(resolve_model(None, None, None, "default"), "default");
    }

    #[test]
    fn blank_values_count_as_unset_and_values_are_trimmed() {
        assert_eq!(
            resolve_model(Some(""), Some("  "), Some(" parent "), "default"),
            "parent"
        );
        assert_eq!(
            resolve_model(Some(""), None, Some(""), "default"),
            "default"
        );
    }

    /// Records the model ids it was asked for.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    #[async_trait::async_trait]
    impl Provider for Recorder {
        async fn chat(
            &self,
            request: &ChatRequest,
            _on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        ) -> Result<ChatResponse, LlmError> {
            self.0.lock().expect("lock").push(request.model.clone());
            Ok(ChatResponse {
                text: String::new(),
                tool_calls: Vec::new(),
                usage: Usage::default(),
                finish_reason: FinishReason::Stop,
                reasoning: Vec::new(),
            })
        }
    }

    fn router() -> (ModelRouter, Arc<Recorder>, Arc<Recorder>) {
        let (openai, anthropic) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        let router = ModelRouter::new(RouterConfig {
            default: OPENAI_PREFIX.into(),
            providers: HashMap::from([
                (
                    OPENAI_PREFIX.to_owned(),
                    openai.clone() as Arc<dyn Provider>,
                ),
                (
                    ANTHROPIC_PREFIX.to_owned(),
                    anthropic.clone() as Arc<dyn Provider>,
                ),
            ]),
        })
        .expect("router builds");
        (router, openai, anthropic)
    }

    #[test]
    fn routes_by_registered_prefix_and_passes_other_ids_whole() {
        let (router, _, _) = router();
        let route = |model| {
            let r = router.route(model);
            (r.provider.to_owned(), r.model.to_owned())
        };
        assert_eq!(
            route("anthropic/claude-sonnet-4"),
            ("anthropic".into(), "claude-sonnet-4".into())
        );
        assert_eq!(route("openai/gpt-4o"), ("openai".into(), "gpt-4o".into()));
        assert_eq!(route("gpt-4o"), ("openai".into(), "gpt-4o".into()));
        assert_eq!(
            route("meta-llama/Llama-3-70B"),
            ("openai".into(), "meta-llama/Llama-3-70B".into())
        );
        assert_eq!(
            route("Anthropic/x"),
            ("openai".into(), "Anthropic/x".into()),
            "prefixes are case-sensitive"
        );
    }

    #[tokio::test]
    async fn sends_the_stripped_id_to_the_chosen_provider() {
        let (router, openai, anthropic) = router();
        for model in ["anthropic/claude-x", "qwen", "openai/gpt-4o"] {
            let request = ChatRequest {
                model: model.into(),
                ..Default::default()
            };
            router.chat(&request, &mut |_| {}).await.expect("answer");
        }
        assert_eq!(*anthropic.0.lock().expect("lock"), ["claude-x"]);
        assert_eq!(*openai.0.lock().expect("lock"), ["qwen", "gpt-4o"]);
    }

    #[tokio::test]
    async fn a_prefix_without_a_model_is_refused() {
        let (router, _, anthropic) = router();
        let request = ChatRequest {
            model: "anthropic/".into(),
            ..Default::default()
        };
        let error = router
            .chat(&request, &mut |_| {})
            .await
            .expect_err("no model");
        assert!(matches!(error, LlmError::InvalidRequest(_)), "{error}");
        assert!(anthropic.0.lock().expect("lock").is_empty());
    }

    #[test]
    fn the_default_must_be_a_configured_provider() {
        let error = ModelRouter::new(RouterConfig {
            default: "anthropic".into(),
            providers: HashMap::from([(
                "openai".to_owned(),
                Arc::new(Recorder::default()) as Arc<dyn Provider>,
            )]),
        })
        .expect_err("unknown default");
        assert!(error.to_string().contains("\"anthropic\""), "{error}");
    }

    #[test]
    fn a_prefix_with_a_slash_is_refused() {
        let error = ModelRouter::new(RouterConfig {
            default: "a/b".into(),
            providers: HashMap::from([(
                "a/b".to_owned(),
                Arc::new(Recorder::default()) as Arc<dyn Provider>,
            )]),
        })
        .expect_err("slash in prefix");
        assert!(matches!(error, LlmError::Config(_)), "{error}");
    }
}
