//! Model providers for taskwire agent sessions.
//!
//! The session loop talks to a model through the [`Provider`] trait only; this crate
//! holds the trait, the provider-neutral request/response types, and the clients:
//!
//! - [`catalogue`]: [`ModelCatalogue`], each model's context window and prices.
//! - [`types`]: messages, tool definitions, tool calls, token usage, stream deltas.
//! - [`error`]: [`LlmError`], with a `retryable` verdict per variant, and its causes
//!   [`RequestError`] (a request that cannot be sent) and [`DecodeError`] (an answer
//!   that cannot be read).
//! - [`openai`]: OpenAI-compatible chat completions (vLLM, Ollama, llama.cpp, gateways),
//!   streaming SSE with tool-call chunk assembly.
//! - [`config`]: [`HttpConfig`], the endpoint, timeout and retry settings both clients share.
//! - [`anthropic`]: Anthropic Messages, streaming SSE with `tool_use` input assembly.
//! - [`responses`]: the OpenAI Responses API, streaming typed SSE events with
//!   function-call argument assembly.
//! - [`priced`]: [`PricedProvider`], each call's cost from the catalogue's prices.
//! - [`limits`]: [`LimitedProvider`], each call kept to its model's rate limits, which
//!   a fleet shares, and throttling handled once for all.
//! - [`router`]: [`resolve_model`] (which model a session uses) and [`ModelRouter`]
//!   (which provider serves a model id, by its prefix).
//! - [`spans`]: the `chat <model>` trace span of each call; prompt capture opt-in.
//! - `transport` (private): the HTTP attempt, retry and backoff logic both clients
//!   share.

pub mod anthropic;
pub mod catalogue;
pub mod config;
pub mod error;
pub mod limits;
pub mod openai;
pub mod priced;
pub mod responses;
pub mod router;
pub mod spans;
mod transport;
pub mod types;

pub use anthropic::{AnthropicClient, AnthropicConfig};
pub use catalogue::{
    CatalogueError, DEFAULT_CONTEXT_WINDOW, ModelApi, ModelCatalogue, ModelEntry, ModelLimits,
    Prices,
};
pub use config::HttpConfig;
pub use error::{DecodeError, LlmError, RequestError};
pub use limits::{LimitedProvider, RateLimits};
pub use openai::{OpenAiClient, OpenAiConfig};
pub use priced::PricedProvider;
pub use responses::{ResponsesClient, ResponsesConfig};
pub use router::{ModelRouter, ModelSplit, RouterConfig, resolve_model};
pub use types::*;

/// A model endpoint that answers one chat turn.
///
/// `on_delta` is called for each streamed piece of assistant text as it arrives, so the
/// caller can forward it as progress; the returned [`ChatResponse`] holds the whole turn.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Sends one chat turn and waits for the complete answer.
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError>;
}
