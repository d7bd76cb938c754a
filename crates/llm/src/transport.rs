//! The HTTP side shared by the provider clients: one `POST` per attempt, statuses and
//! connection failures mapped to [`LlmError`], server-sent events fed to a
//! [`Decoder`], and retries with jittered exponential backoff.
//!
//! A wire format only says how its answers decode; when to retry and how long to wait
//! is decided here once, so the clients cannot drift apart.
//!
//! Failed attempts are retried while [`LlmError::retryable`] says so, honouring
//! `Retry-After`; a streamed answer that has already delivered text to the caller is
//! never retried, since the caller cannot take that text back.

use backon::BackoffBuilder as _;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{self, HeaderMap, HeaderValue};

use crate::error::{DecodeError, LlmError};
use crate::limits::RateHints;
use crate::types::{ChatResponse, StreamDelta};

/// Error bodies are kept for the message, but a proxy's HTML page need not be whole.
const MAX_ERROR_BODY_BYTES: usize = 4096;

/// How one wire format's answers are read. A fresh value assembles each streamed
/// attempt, so a retry never sees the pieces of the one before.
pub(crate) trait Decoder: Default + Send {
    /// Decodes a whole answer sent as one JSON body.
    fn decode_body(body: &[u8]) -> Result<ChatResponse, DecodeError>;

    /// Folds in one server-sent event: `event` is its `event:` field (`message` when
    /// the server sent none), `data` its data, trimmed.
    fn push_event(&mut self, event: &str, data: &str) -> Result<Pushed, EventError>;

    /// Whether the stream ended the way the format says a whole answer ends; a closed
    /// connection before that is a broken answer, not a short one.
    fn is_complete(&self) -> bool;

    /// The whole answer, once the stream has ended.
    fn finish(self) -> Result<ChatResponse, DecodeError>;
}

/// What an event meant to the reader.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Nothing to forward (metadata, tool-call pieces, keep-alives).
    Nothing,
    /// Assistant text to forward to the caller as progress.
    Text(String),
    /// The last event of the answer; anything after it is not read.
    End,
}

/// Why an event could not be folded in.
#[derive(Debug)]
pub(crate) enum EventError {
    /// The server reported an error inside the stream; its message, as the server
    /// worded it.
    Remote(String),
    /// The event was not the format expected.
    Decode(DecodeError),
}

impl From<DecodeError> for EventError {
    fn from(error: DecodeError) -> Self {
        Self::Decode(error)
    }
}

/// Retries after the first attempt and the backoff between them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    pub(crate) max_retries: u32,
    pub(crate) initial_backoff: Duration,
    /// Also the longest `Retry-After` waited out; a longer one is returned to the
    /// caller, who can reschedule the work instead of holding a session open.
    pub(crate) max_backoff: Duration,
    /// Whether throttled answers (429, 529) are retried here; off when a
    /// [`LimitedProvider`](crate::limits::LimitedProvider) retries them for the fleet.
    pub(crate) throttled: bool,
}

impl RetryPolicy {
    /// Exponential backoff with jitter in [50 %, 100 %], so that sessions which failed
    /// together (a server restart) do not all retry in the same instant.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        // backon's jitter adds up to the delay again: halving the schedule makes it
        // equal jitter of the whole one.
        backon::ExponentialBuilder::new()
            .with_min_delay(self.initial_backoff / 2)
            .with_max_delay(self.max_backoff / 2)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
            .nth(retry as usize)
            .unwrap_or(self.max_backoff)
    }
}

/// What a client tells the transport about its endpoint.
pub(crate) struct Settings<'a> {
    /// Checked to be an http(s) URL; `path` is appended after its trailing slashes are
    /// trimmed.
    pub(crate) base_url: &'a str,
    pub(crate) path: &'a str,
    /// Sent with every request (authentication, API version).
    pub(crate) headers: HeaderMap,
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) stream: bool,
    pub(crate) retry: RetryPolicy,
}

/// Posts chat requests to one endpoint. Cheap to clone; clones share the connection
/// pool.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    http: reqwest::Client,
    endpoint: String,
    /// `endpoint`, parsed once: a request given the text would parse it again.
    url: reqwest::Url,
    stream: bool,
    retry: RetryPolicy,
    request_timeout: Duration,
    connect_timeout: Duration,
}

impl Transport {
    /// Builds the HTTP client.
    ///
    /// TLS uses rustls with the process-wide crypto provider, which the binary installs
    /// at start-up (`rustls::crypto::ring::default_provider().install_default()`); a
    /// library must not choose it for its host. Without one installed this returns
    /// [`LlmError::Config`] rather than panicking inside the HTTP client.
    pub(crate) fn new(settings: Settings<'_>) -> Result<Self, LlmError> {
        let base = reqwest::Url::parse(settings.base_url).map_err(|e| {
            LlmError::Config(format!(
                "base url {:?} is not a url: {e}",
                settings.base_url
            ))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(LlmError::Config(format!(
                "base url {:?} must be http or https",
                settings.base_url
            )));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(LlmError::Config(
                "no rustls crypto provider is installed; the binary must install one before building model clients"
                    .into(),
            ));
        }
        let http = reqwest::Client::builder()
            .default_headers(settings.headers)
            .timeout(settings.request_timeout)
            .connect_timeout(settings.connect_timeout)
            .build()
            .map_err(|e| {
                LlmError::Config(format!(
                    "failed to build the http client: {}",
                    error_chain(&e)
                ))
            })?;
        let endpoint = format!(
            "{}{}",
            settings.base_url.trim_end_matches('/'),
            settings.path
        );
        let url = reqwest::Url::parse(&endpoint)
            .map_err(|e| LlmError::Config(format!("endpoint {endpoint:?} is not a url: {e}")))?;
        Ok(Self {
            http,
            endpoint,
            url,
            stream: settings.stream,
            retry: settings.retry,
            request_timeout: settings.request_timeout,
            connect_timeout: settings.connect_timeout,
        })
    }

    /// The URL requests are posted to.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The same, parsed.
    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Posts the request `encode` gives until an attempt succeeds, fails for good, or
    /// the retries run out.
    ///
    /// Each attempt encodes the request again rather than keeping the encoded body: a
    /// request waits on the model for as long as the model takes, and the body (mostly
    /// the tools' schemas) is then the largest thing it would hold. Sent as a body that
    /// cannot be cloned, it is freed once written; reqwest would otherwise keep copies
    /// for its own redirects and retries, which are not used here.
    pub(crate) async fn chat<D: Decoder>(
        &self,
        encode: &(dyn Fn() -> Result<Vec<u8>, LlmError> + Sync),
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let error = match self.attempt::<D>(encode()?, on_delta, &mut delivered).await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            if delivered
                || !error.retryable()
                || retry >= self.retry.max_retries
                || (error.throttled() && !self.retry.throttled)
            {
                return Err(error);
            }
            let delay = match error.retry_after() {
                Some(wait) if wait > self.retry.max_backoff => return Err(error),
                Some(wait) => wait,
                None => self.retry.backoff(retry),
            };
            retry += 1;
            tracing::warn!(
                model.url = %self.endpoint,
                retry,
                max_retries = self.retry.max_retries,
                delay_ms = delay.as_millis() as u64,
                %error,
                "model request failed, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// [`Transport::chat`] inside the `chat <model>` span of `provider` (see
    /// [`crate::spans`]), which ends with the answer: the one way every client sends a
    /// call.
    pub(crate) async fn chat_traced<D: Decoder>(
        &self,
        provider: &'static str,
        request: &crate::types::ChatRequest,
        encode: &(dyn Fn() -> Result<Vec<u8>, LlmError> + Sync),
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<ChatResponse, LlmError> {
        let span = crate::spans::chat(provider, request, self.url());
        let answer = span.instrument(self.chat::<D>(encode, on_delta)).await;
        crate::spans::end(&span, &answer);
        answer
    }

    /// One attempt. Sets `delivered` once text has been handed to `on_delta`, after
    /// which the attempt must not be repeated.
    async fn attempt<D: Decoder>(
        &self,
        body: Vec<u8>,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        delivered: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let accept = if self.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let response = self
            .http
            .post(self.url.clone())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(once(body))
            .send()
            .await
            .map_err(|e| self.request_error(e))?;
        let status = response.status();
        let hints = RateHints::from_headers(response.headers(), std::time::SystemTime::now());
        let retry_after = hints.retry_after;
        if !hints.is_empty() {
            on_delta(StreamDelta::RateHints(hints));
        }
        if !status.is_success() {
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
        if self.stream {
            return self.read_stream::<D>(response, on_delta, delivered).await;
        }
        let bytes = response.bytes().await.map_err(|e| self.request_error(e))?;
        let answer = D::decode_body(&bytes).map_err(|e| self.decode_error(e))?;
        // The whole text arrives at once; callers still see it as progress.
        if !answer.text.is_empty() {
            *delivered = true;
            on_delta(StreamDelta::Text(answer.text.clone()));
        }
        Ok(answer)
    }

    async fn read_stream<D: Decoder>(
        &self,
        response: reqwest::Response,
        on_delta: &mut (dyn FnMut(StreamDelta) + Send),
        delivered: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let mut events = response.bytes_stream().eventsource();
        let mut decoder = D::default();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| match e {
                EventStreamError::Transport(e) => self.request_error(e),
                other => self.decode_error(DecodeError::EventStream(Box::new(other))),
            })?;
            let pushed = decoder
                .push_event(&event.event, event.data.trim())
                .map_err(|e| match e {
                    EventError::Remote(message) => LlmError::Remote {
                        url: self.endpoint.clone(),
                        message,
                    },
                    EventError::Decode(error) => self.decode_error(error),
                })?;
            match pushed {
                Pushed::Nothing => {}
                Pushed::Text(text) => {
                    *delivered = true;
                    on_delta(StreamDelta::Text(text));
                }
                Pushed::End => break,
            }
        }
        if !decoder.is_complete() {
            return Err(LlmError::Transport {
                url: self.endpoint.clone(),
                message: "the answer stream ended before the answer was complete".into(),
            });
        }
        decoder.finish().map_err(|e| self.decode_error(e))
    }

    fn request_error(&self, error: reqwest::Error) -> LlmError {
        let url = self.endpoint.clone();
        if error.is_timeout() {
            let limit = if error.is_connect() {
                self.connect_timeout
            } else {
                self.request_timeout
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

    fn decode_error(&self, source: DecodeError) -> LlmError {
        LlmError::Decode {
            url: self.endpoint.clone(),
            source,
        }
    }
}

/// An encoded request as a body sent once: its length is known (so it goes with a
/// `Content-Length`), and it cannot be cloned, so nothing keeps it after it is written.
fn once(encoded: Vec<u8>) -> reqwest::Body {
    reqwest::Body::wrap(http_body_util::Full::new(Bytes::from(encoded)))
}

/// A header value carrying a secret, marked sensitive so HTTP-level debug output hides
/// it; the error does not quote it.
pub(crate) fn secret_header(secret: &str) -> Result<HeaderValue, LlmError> {
    let mut value = HeaderValue::from_str(secret).map_err(|_| {
        LlmError::Config("api key contains characters not allowed in a header".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The error and its causes, joined; reqwest's top-level message alone ("error
/// sending request") hides whether the connection was refused or reset.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
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
    fn truncates_long_bodies_on_a_char_boundary() {
        assert_eq!(truncate("ééé".into(), 3), "é...");
        assert_eq!(truncate("short".into(), 10), "short");
    }

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            throttled: true,
        };
        for _ in 0..20 {
            let first = policy.backoff(0);
            assert!(
                first >= Duration::from_millis(50) && first <= Duration::from_millis(100),
                "{first:?}"
            );
            let second = policy.backoff(1);
            assert!(
                second >= Duration::from_millis(100) && second <= Duration::from_millis(200),
                "{second:?}"
            );
            assert!(policy.backoff(10) <= Duration::from_millis(350));
        }
    }
}
