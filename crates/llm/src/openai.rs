//! Client for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp,
//! gateways).
//!
//! - `wire`: the request and response JSON.
//! - `stream`: assembling a streamed answer, tool calls included, from its chunks.
//!
//! Sending, retries and backoff are the shared `transport` module's.

mod stream;
mod wire;

use std::fmt;
use std::time::Duration;

use reqwest::header::{self, HeaderMap};

use crate::Provider;
use crate::error::LlmError;
use crate::transport::{RetryPolicy, Settings, Transport, secret_header};
use crate::types::{ChatRequest, ChatResponse, StreamDelta};
use stream::StreamAssembler;

/// Settings of an [`OpenAiClient`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base up to and including the version, e.g. `http://127.0.0.1:8080/v1`;
    /// `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set. Never logged.
    pub api_key: Option<String>,
    /// Limit for a whole attempt, from sending until the last byte of the answer
    /// (default 300 s: long generations stream for minutes).
    pub request_timeout: Duration,
    /// Limit for establishing the connection (default 10 s).
    pub connect_timeout: Duration,
    /// Stream the answer as server-sent events (default true).
    pub stream: bool,
    /// Retries after the first attempt for retryable failures (default 3).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles per retry (default 500 ms).
    pub initial_backoff: Duration,
    /// Cap on the backoff (default 30 s). A `Retry-After` longer than this is not
    /// waited out here: the error is returned, with the wait in
    /// [`LlmError::retry_after`], so the caller can reschedule the work instead.
    pub max_backoff: Duration,
}

impl OpenAiConfig {
    /// Defaults for a server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            request_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            stream: true,
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl Default for OpenAiConfig {
    /// A local server such as llama.cpp's on its default port.
    fn default() -> Self {
        Self::new("http://127.0.0.1:8080/v1")
    }
}

impl fmt::Debug for OpenAiConfig {
    // Hand-written so the API key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("stream", &self.stream)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .finish()
    }
}

/// An OpenAI-compatible chat-completions [`Provider`]. Cheap to clone; clones share
/// the connection pool.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    transport: Transport,
    config: OpenAiConfig,
}

impl OpenAiClient {
    /// Builds a client for `config`.
    ///
    /// TLS uses rustls with the process-wide crypto provider, which the binary installs
    /// at start-up (`rustls::crypto::ring::default_provider().install_default()`); a
    /// library must not choose it for its host. Without one installed this returns
    /// [`LlmError::Config`] rather than panicking inside the HTTP client.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            headers.insert(
                header::AUTHORIZATION,
                secret_header(&format!("Bearer {key}"))?,
            );
        }
        let transport = Transport::new(Settings {
            base_url: &config.base_url,
            path: "/chat/completions",
            headers,
            request_timeout: config.request_timeout,
            connect_timeout: config.connect_timeout,
            stream: config.stream,
            retry: RetryPolicy {
                max_retries: config.max_retries,
                initial_backoff: config.initial_backoff,
                max_backoff: config.max_backoff,
            },
        })?;
        Ok(Self { transport, config })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        self.transport.endpoint()
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiClient {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let body = serde_json::to_vec(&wire::Request::new(request, self.config.stream))
            .map_err(|e| LlmError::Config(format!("failed to encode the chat request: {e}")))?;
        self.transport
            .chat::<StreamAssembler>(&body, on_delta)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_api_key() {
        let config = OpenAiConfig {
            api_key: Some("sk-secret".into()),
            ..OpenAiConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn rejects_a_base_url_that_is_not_http() {
        let error =
            OpenAiClient::new(OpenAiConfig::new("ftp://models")).expect_err("ftp is refused");
        assert!(matches!(error, LlmError::Config(_)), "{error}");
    }
}
