//! Client for the Anthropic Messages API (`POST {base_url}/v1/messages`).
//!
//! - `request`: the request body, and how the neutral conversation is reshaped into
//!   it (system hoisting, tool blocks, merged tool results);
//! - `response`: decoding an answer (content blocks, stop reasons, token counts);
//! - `stream`: assembling a streamed answer from its events.
//!
//! Sending, retries and backoff are the shared `transport` module's, so throttling
//! (429 with `Retry-After`), overload (529) and server errors behave exactly as with
//! the OpenAI-compatible client.

mod request;
mod response;
mod stream;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::Provider;
use crate::config::HttpConfig;
use crate::error::{LlmError, RequestError};
use crate::transport::{Transport, secret_header};
use crate::types::{ChatRequest, ChatResponse, StreamDelta};
use request::MessagesRequest;
use stream::StreamAssembler;

/// The API version this client speaks; later versions are opt-in per request.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

/// Settings of an [`AnthropicClient`]. `http.base_url` is the API base without the
/// version, e.g. `https://api.anthropic.com` (the default); `/v1/messages` is appended,
/// or only `/messages` when the base already ends in `/v1`. The key is sent as
/// `x-api-key` (the API needs it; some gateways do not).
#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    pub http: HttpConfig,
    /// Sent as `anthropic-version` (default [`DEFAULT_ANTHROPIC_VERSION`]).
    pub anthropic_version: String,
    /// `max_tokens` for requests that set none; the API requires one (default 4096).
    pub max_tokens: u32,
}

impl AnthropicConfig {
    /// Defaults for a server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            http: HttpConfig::new(base_url),
            anthropic_version: DEFAULT_ANTHROPIC_VERSION.to_owned(),
            max_tokens: 4096,
        }
    }
}

impl Default for AnthropicConfig {
    /// The public API.
    fn default() -> Self {
        Self::new("https://api.anthropic.com")
    }
}

/// An Anthropic Messages [`Provider`]. Cheap to clone; clones share the connection
/// pool.
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    transport: Transport,
    config: AnthropicConfig,
}

impl AnthropicClient {
    /// Builds a client for `config`.
    ///
    /// As with [`crate::OpenAiClient::new`], the binary must have installed a rustls
    /// crypto provider; without one this returns [`LlmError::Config`].
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.http.api_key {
            headers.insert(HeaderName::from_static("x-api-key"), secret_header(key)?);
        }
        let version = HeaderValue::from_str(&config.anthropic_version).map_err(|_| {
            LlmError::Config(format!(
                "anthropic version {:?} contains characters not allowed in a header",
                config.anthropic_version
            ))
        })?;
        headers.insert(HeaderName::from_static("anthropic-version"), version);
        let path = if config.http.base_url.trim_end_matches('/').ends_with("/v1") {
            "/messages"
        } else {
            "/v1/messages"
        };
        let transport = config.http.transport(path, headers)?;
        Ok(Self { transport, config })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        self.transport.endpoint()
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicClient {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let encode = || {
            let wire =
                MessagesRequest::new(request, self.config.max_tokens, self.config.http.stream)?;
            serde_json::to_vec(&wire).map_err(|source| {
                LlmError::from(RequestError::Encode {
                    api: "messages",
                    source,
                })
            })
        };
        self.transport
            .chat_traced::<StreamAssembler>("anthropic", request, &encode, on_delta)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(config: AnthropicConfig) -> AnthropicClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        AnthropicClient::new(config).expect("client builds")
    }

    #[test]
    fn debug_output_hides_the_api_key() {
        let mut config = AnthropicConfig::default();
        config.http.api_key = Some("sk-ant-secret".into());
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-ant-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn appends_the_versioned_path_once() {
        assert_eq!(
            client(AnthropicConfig::default()).endpoint(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            client(AnthropicConfig::new("http://gateway/anthropic/v1/")).endpoint(),
            "http://gateway/anthropic/v1/messages"
        );
    }

    #[test]
    fn rejects_a_key_that_cannot_be_a_header() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = AnthropicConfig::default();
        config.http.api_key = Some("line\nbreak-secret".into());
        let error = AnthropicClient::new(config).expect_err("newline refused");
        assert!(matches!(error, LlmError::Config(_)), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
