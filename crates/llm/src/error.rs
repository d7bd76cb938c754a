//! Errors of model calls, each with a verdict on whether trying again can help.

use std::time::Duration;

/// Why a model call failed.
///
/// [`LlmError::retryable`] is the one place that decides whether the same request may
/// succeed later; the client retries on it, and callers that give up can map it to a
/// redelivery or a terminal failure.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The server answered with a non-success status.
    #[error("model request to {url} failed with status {status}: {body}")]
    Http {
        url: String,
        status: u16,
        /// The response body, truncated.
        body: String,
        /// The server's `Retry-After` (seconds, or an HTTP date from now).
        retry_after: Option<Duration>,
    },
    /// The connection or the whole request took longer than allowed.
    #[error("model request to {url} timed out after {limit:?}")]
    Timeout { url: String, limit: Duration },
    /// The connection could not be made or broke before the answer was complete.
    #[error("model request to {url} failed: {message}")]
    Transport { url: String, message: String },
    /// The server reported an error inside a response that had started successfully
    /// (servers do this mid-stream, after the 200 status was sent).
    #[error("model at {url} reported an error mid-response: {message}")]
    Remote { url: String, message: String },
    /// The response was not the wire format expected.
    #[error("failed to decode model response from {url}: {message}")]
    Decode { url: String, message: String },
    /// The client was configured wrongly; no request was sent.
    #[error("invalid model client configuration: {0}")]
    Config(String),
    /// The chat request cannot be expressed in the provider's wire format (a tool
    /// result that names no call, say); no request was sent.
    #[error("invalid chat request: {0}")]
    InvalidRequest(String),
}

impl LlmError {
    /// Whether the same request may succeed if sent again: throttling (429), request
    /// timeouts (408), server errors (5xx, Anthropic's 529 "overloaded" included),
    /// timeouts and broken connections. Other client errors, undecodable answers,
    /// configuration errors and invalid requests will fail again.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Http { status, .. } => matches!(status, 408 | 429 | 500..=599),
            Self::Timeout { .. } | Self::Transport { .. } | Self::Remote { .. } => true,
            Self::Decode { .. } | Self::Config(_) | Self::InvalidRequest(_) => false,
        }
    }

    /// Whether the provider refused the call for its load: throttled (429) or
    /// overloaded (Anthropic's 529). A fleet slows down for these rather than retrying
    /// each on its own.
    pub fn throttled(&self) -> bool {
        matches!(
            self,
            Self::Http {
                status: 429 | 529,
                ..
            }
        )
    }

    /// How long the server asked to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error's kind, a fixed word for metrics and logs: `rate_limited` (429),
    /// `server_error` (5xx), `client_error` (other statuses), `timeout` (a timeout or
    /// 408), `transport`, `remote`, `decode`, `config` or `invalid_request`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http { status: 429, .. } => "rate_limited",
            Self::Http { status: 408, .. } | Self::Timeout { .. } => "timeout",
            Self::Http {
                status: 500..=599, ..
            } => "server_error",
            Self::Http { .. } => "client_error",
            Self::Transport { .. } => "transport",
            Self::Remote { .. } => "remote",
            Self::Decode { .. } => "decode",
            Self::Config(_) => "config",
            Self::InvalidRequest(_) => "invalid_request",
        }
    }

    /// The HTTP status, for errors the server answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            url: "http://m/v1/chat/completions".into(),
            status,
            body: "b".into(),
            retry_after: None,
        }
    }

    #[test]
    fn throttling_timeouts_and_server_errors_are_retryable() {
        for status in [408, 429, 500, 502, 503, 529, 599] {
            assert!(http(status).retryable(), "status {status}");
        }
        assert!(
            LlmError::Timeout {
                url: "u".into(),
                limit: Duration::from_secs(1)
            }
            .retryable()
        );
        assert!(
            LlmError::Transport {
                url: "u".into(),
                message: "reset".into()
            }
            .retryable()
        );
    }

    #[test]
    fn client_errors_and_decode_errors_are_not_retryable() {
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!http(status).retryable(), "status {status}");
        }
        assert!(
            !LlmError::Decode {
                url: "u".into(),
                message: "eof".into()
            }
            .retryable()
        );
        assert!(!LlmError::Config("no url".into()).retryable());
        assert!(!LlmError::InvalidRequest("tool result without a call id".into()).retryable());
    }

    #[test]
    fn each_error_has_one_kind() {
        assert_eq!(http(429).kind(), "rate_limited");
        assert_eq!(http(408).kind(), "timeout");
        assert_eq!(http(529).kind(), "server_error");
        assert_eq!(http(401).kind(), "client_error");
        assert_eq!(LlmError::Config("x".into()).kind(), "config");
    }

    #[test]
    fn http_error_message_names_url_and_status() {
        assert_eq!(
            http(400).to_string(),
            "model request to http://m/v1/chat/completions failed with status 400: b"
        );
    }
}
