//! Client for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp,
//! gateways).
//!
//! - `wire`: the request and response JSON.
//! - `stream`: assembling a streamed answer, tool calls included, from its chunks.
//!
//! Failed attempts are retried with jittered exponential backoff while
//! [`LlmError::retryable`] says so, honouring `Retry-After`; a streamed answer that has
//! already delivered text to the caller is never retried, since the caller cannot take
//! that text back.

mod stream;
mod wire;

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{self, HeaderMap, HeaderValue};

use crate::Provider;
use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse, StreamDelta};
use stream::StreamAssembler;

/// Error bodies are kept for the message, but a proxy's HTML page need not be whole.
const MAX_ERROR_BODY_BYTES: usize = 4096;

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
    http: reqwest::Client,
    endpoint: String,
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
        let base = reqwest::Url::parse(&config.base_url).map_err(|e| {
            LlmError::Config(format!("base url {:?} is not a url: {e}", config.base_url))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(LlmError::Config(format!(
                "base url {:?} must be http or https",
                config.base_url
            )));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(LlmError::Config(
                "no rustls crypto provider is installed; the binary must install one before building model clients"
                    .into(),
            ));
        }
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            // The key itself stays out of the message.
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                LlmError::Config("api key contains characters not allowed in a header".into())
            })?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| {
                LlmError::Config(format!(
                    "failed to build the http client: {}",
                    error_chain(&e)
                ))
            })?;
        let endpoint = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(Self {
            http,
            endpoint,
            config,
        })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One attempt. Sets `delivered` once text has been handed to `on_delta`, after
    /// which the attempt must not be repeated.
    async fn attempt(
        &self,
        body: &[u8],
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        delivered: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let accept = if self.config.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let response = self
            .http
            .post(&self.endpoint)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| self.request_error(e))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = match response.text().await {
                Ok(body) => truncate(body, MAX_ERROR_BODY_BYTES),
                Err(e) => format!("<body unreadable: {}>", error_chain(&e)),
            };
            return Err(LlmError::Http {
                url: self.endpoint.clone(),
                status: status.as_u16(),
                body,
                retry_after,
            });
        }
        if self.config.stream {
            self.read_stream(response, on_delta, delivered).await
        } else {
            let bytes = response.bytes().await.map_err(|e| self.request_error(e))?;
            let answer = serde_json::from_slice::<wire::Response>(&bytes)
                .map_err(|e| e.to_string())
                .and_then(wire::Response::into_chat_response)
                .map_err(|message| self.decode_error(message))?;
            // The whole text arrives at once; callers still see it as progress.
            if !answer.text.is_empty() {
                *delivered = true;
                on_delta(StreamDelta::Text(answer.text.clone()));
            }
            Ok(answer)
        }
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        delivered: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let mut events = response.bytes_stream().eventsource();
        let mut assembler = StreamAssembler::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| match e {
                EventStreamError::Transport(e) => self.request_error(e),
                other => self.decode_error(format!("invalid event stream: {other}")),
            })?;
            let data = event.data.trim();
            if data == "[DONE]" {
                assembler.mark_done();
                break;
            }
            if data.is_empty() {
                continue;
            }
            let chunk: wire::Chunk = serde_json::from_str(data)
                .map_err(|e| self.decode_error(format!("invalid chunk {data:?}: {e}")))?;
            if let Some(error) = &chunk.error {
                return Err(LlmError::Remote {
                    url: self.endpoint.clone(),
                    message: error.to_string(),
                });
            }
            if let Some(text) = assembler.push(chunk) {
                *delivered = true;
                on_delta(StreamDelta::Text(text));
            }
        }
        if !assembler.is_complete() {
            return Err(LlmError::Transport {
                url: self.endpoint.clone(),
                message: "the answer stream ended before the answer was complete".into(),
            });
        }
        assembler
            .finish()
            .map_err(|message| self.decode_error(message))
    }

    fn request_error(&self, error: reqwest::Error) -> LlmError {
        let url = self.endpoint.clone();
        if error.is_timeout() {
            let limit = if error.is_connect() {
                self.config.connect_timeout
            } else {
                self.config.request_timeout
            };
            LlmError::Timeout { url, limit }
        } else if error.is_builder() {
            LlmError::Config(format!(
                "failed to build the request to {url}: {}",
                error_chain(&error)
            ))
        } else {
            LlmError::Transport {
                url,
                message: error_chain(&error.without_url()),
            }
        }
    }

    fn decode_error(&self, message: String) -> LlmError {
        LlmError::Decode {
            url: self.endpoint.clone(),
            message,
        }
    }

    /// Exponential backoff with jitter in [50 %, 100 %], so that sessions which failed
    /// together (a server restart) do not all retry in the same instant.
    fn backoff(&self, retry: u32) -> Duration {
        let full = self
            .config
            .initial_backoff
            .saturating_mul(1 << retry.min(16))
            .min(self.config.max_backoff);
        // A randomly keyed hasher is a dependency-free source of jitter.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        full.mul_f64(0.5 + (random % 1024) as f64 / 2048.0)
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
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let error = match self.attempt(&body, on_delta, &mut delivered).await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            if delivered || !error.retryable() || retry >= self.config.max_retries {
                return Err(error);
            }
            let delay = match error.retry_after() {
                Some(wait) if wait > self.config.max_backoff => return Err(error),
                Some(wait) => wait,
                None => self.backoff(retry),
            };
            retry += 1;
            tracing::warn!(
                model.url = %self.endpoint,
                retry,
                max_retries = self.config.max_retries,
                delay_ms = delay.as_millis() as u64,
                %error,
                "model request failed, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// `Retry-After` in seconds; the HTTP-date form is rare from model servers and ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The error and its causes, joined; reqwest's top-level message alone ("error
/// sending request") hides whether the connection was refused or reset.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

fn truncate(mut text: String, max_bytes: usize) -> String {
    if text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
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

    #[test]
    fn reads_retry_after_seconds_only() {
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn truncates_long_bodies_on_a_char_boundary() {
        assert_eq!(truncate("ééé".into(), 3), "é...");
        assert_eq!(truncate("short".into(), 10), "short");
    }

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = OpenAiClient::new(OpenAiConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..OpenAiConfig::default()
        })
        .expect("client builds");
        for _ in 0..20 {
            let first = client.backoff(0);
            assert!(
                first >= Duration::from_millis(50) && first <= Duration::from_millis(100),
                "{first:?}"
            );
            let second = client.backoff(1);
            assert!(
                second >= Duration::from_millis(100) && second <= Duration::from_millis(200),
                "{second:?}"
            );
            assert!(client.backoff(10) <= Duration::from_millis(350));
        }
    }
}
