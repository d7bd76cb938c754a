//! Client for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp,
//! gateways).
//!
//! - `wire`: the request and response JSON.
//! - `stream`: assembling a streamed answer, tool calls included, from its chunks.
//!
//! Sending, retries and backoff are the shared `transport` module's.

mod stream;
mod wire;

use crate::Provider;
use crate::config::HttpConfig;
use crate::error::LlmError;
use crate::transport::Transport;
use crate::types::{ChatRequest, ChatResponse, StreamDelta};
use stream::StreamAssembler;

/// Settings of an [`OpenAiClient`]: `base_url` is the API base up to and including the
/// version, e.g. `http://127.0.0.1:8080/v1` (`/chat/completions` is appended); the key
/// is sent as `Authorization: Bearer <key>`.
pub type OpenAiConfig = HttpConfig;

/// A local server such as llama.cpp's on its default port.
impl Default for HttpConfig {
    fn default() -> Self {
        Self::new("http://127.0.0.1:8080/v1")
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
        let transport = config.bearer_transport("/chat/completions")?;
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
        let stream = self.config.stream;
        let encode = || {
            serde_json::to_vec(&wire::Request::new(request, stream))
                .map_err(|e| LlmError::Config(format!("failed to encode the chat request: {e}")))
        };
        self.transport
            .chat_traced::<StreamAssembler>("openai", request, &encode, on_delta)
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
