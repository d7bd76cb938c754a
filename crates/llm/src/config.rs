//! Settings every HTTP model client shares: where, how long, how often to retry.

use std::fmt;
use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::error::LlmError;
use crate::transport::{RetryPolicy, Settings, Transport};

/// Connection, timeout and retry settings of a model endpoint.
#[derive(Clone)]
pub struct HttpConfig {
    /// The API base; each client documents what it appends.
    pub base_url: String,
    /// The credential, sent the way the API wants it. Never logged.
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
    /// Whether throttled answers (429, Anthropic's 529) are retried by the client
    /// (default true). Off under a [`LimitedProvider`](crate::limits::LimitedProvider),
    /// which retries them for every worker sharing the model's budget.
    pub retry_throttled: bool,
}

impl HttpConfig {
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
            retry_throttled: true,
        }
    }

    /// The transport for `path` under the base, with the API key (if any) as a bearer
    /// token, as OpenAI's APIs take it.
    pub(crate) fn bearer_transport(&self, path: &str) -> Result<Transport, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                crate::transport::secret_header(&format!("Bearer {key}"))?,
            );
        }
        self.transport(path, headers)
    }

    /// The transport for `path` under the base, sending `headers` with every request.
    pub(crate) fn transport(&self, path: &str, headers: HeaderMap) -> Result<Transport, LlmError> {
        Transport::new(Settings {
            base_url: &self.base_url,
            path,
            headers,
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            stream: self.stream,
            retry: RetryPolicy {
                max_retries: self.max_retries,
                initial_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
                throttled: self.retry_throttled,
            },
        })
    }
}

impl fmt::Debug for HttpConfig {
    // Hand-written so the API key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("stream", &self.stream)
            .field("max_retries", &self.max_retries)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("retry_throttled", &self.retry_throttled)
            .finish()
    }
}
