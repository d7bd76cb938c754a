//! Client for the OpenAI Responses API (`POST {base_url}/responses`).
//!
//! - `request`: the request body, and how the neutral conversation is reshaped into
//!   it (system messages as `instructions`, tool calls and results as items);
//! - `response`: decoding an answer (output items, status, token counts);
//! - `stream`: assembling a streamed answer from its typed events.
//!
//! Sending, retries and backoff are the shared `transport` module's, so throttling,
//! server errors, timeouts and broken streams behave exactly as with the other
//! clients.

mod request;
mod response;
mod stream;

use crate::Provider;
use crate::config::HttpConfig;
use crate::error::{LlmError, RequestError};
use crate::transport::Transport;
use crate::types::{ChatRequest, ChatResponse, StreamDelta};
use request::Request;
use stream::StreamAssembler;

/// Settings of a [`ResponsesClient`]: `base_url` is the API base up to and including
/// the version, e.g. `https://api.openai.com/v1` (`/responses` is appended); the key
/// is sent as `Authorization: Bearer <key>`.
pub type ResponsesConfig = HttpConfig;

/// An OpenAI Responses [`Provider`]. Cheap to clone; clones share the connection
/// pool.
#[derive(Debug, Clone)]
pub struct ResponsesClient {
    transport: Transport,
    config: ResponsesConfig,
}

impl ResponsesClient {
    /// Builds a client for `config`.
    ///
    /// As with [`crate::OpenAiClient::new`], the binary must have installed a rustls
    /// crypto provider; without one this returns [`LlmError::Config`].
    pub fn new(config: ResponsesConfig) -> Result<Self, LlmError> {
        let transport = config.bearer_transport("/responses")?;
        Ok(Self { transport, config })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &ResponsesConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        self.transport.endpoint()
    }
}

#[async_trait::async_trait]
impl Provider for ResponsesClient {
    async fn chat(
        &self,
        request: &ChatRequest,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let stream = self.config.stream;
        let encode = || {
            let wire = Request::new(request, stream)?;
            serde_json::to_vec(&wire).map_err(|source| {
                LlmError::from(RequestError::Encode {
                    api: "responses",
                    source,
                })
            })
        };
        self.transport
            .chat_traced::<StreamAssembler>("openai", request, &encode, on_delta)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(config: ResponsesConfig) -> ResponsesClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        ResponsesClient::new(config).expect("client builds")
    }

    #[test]
    fn appends_the_responses_path_to_the_versioned_base() {
        assert_eq!(
            client(ResponsesConfig::new("https://api.openai.com/v1/")).endpoint(),
            "https://api.openai.com/v1/responses"
        );
    }

    #[test]
    fn rejects_a_base_url_that_is_not_http_and_a_key_that_cannot_be_a_header() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let error =
            ResponsesClient::new(ResponsesConfig::new("ftp://models")).expect_err("ftp refused");
        assert!(matches!(error, LlmError::Config(_)), "{error}");
        let config = ResponsesConfig {
            api_key: Some("line\nbreak-secret".into()),
            ..ResponsesConfig::default()
        };
        let error = ResponsesClient::new(config).expect_err("newline refused");
        assert!(matches!(error, LlmError::Config(_)), "{error}");
        assert!(!error.to_string().contains("secret"), "{error}");
    }
}
