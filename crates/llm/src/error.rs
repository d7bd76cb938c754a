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
    #[error("failed to decode model response from {url}: {source}")]
    Decode {
        url: String,
        #[source]
        source: DecodeError,
    },
    /// The client was configured wrongly; no request was sent.
    #[error("invalid model client configuration: {0}")]
    Config(String),
    /// The chat request cannot be expressed in the provider's wire format (a tool
    /// result that names no call, say); no request was sent.
    #[error("invalid chat request: {0}")]
    InvalidRequest(#[from] RequestError),
}

/// Why a chat request cannot be sent in a provider's wire format.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A tool result (Messages API) has no id, or an empty one, to pair it with its
    /// call.
    #[error("tool result in message {message} names no tool call")]
    ToolResultNamesNoCall { message: usize },
    /// A tool result (Responses API) has no id to pair it with its call.
    #[error("message {message}: a tool result has no tool_call_id")]
    ToolResultWithoutCallId { message: usize },
    /// The model id names a provider (its prefix) but no model after it.
    #[error("model id {model:?} names no model for provider {provider:?}")]
    NoModelForProvider { model: String, provider: String },
    /// The request body could not be serialised; `api` names the request (`messages`,
    /// `responses`).
    #[error("failed to encode the {api} request: {source}")]
    Encode {
        api: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// Why a model's answer could not be read: its body or one of its events was not the
/// format expected, or it was incomplete.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A whole (non-streamed) answer's body is not the JSON expected.
    #[error("{0}")]
    Body(#[source] serde_json::Error),
    /// The event stream itself is broken (not UTF-8, not server-sent events). Boxed so
    /// that the event-stream parser's types stay out of this crate's interface.
    #[error("invalid event stream: {0}")]
    EventStream(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A chat-completions chunk is not the JSON expected.
    #[error("invalid chunk {data:?}: {source}")]
    Chunk {
        data: String,
        #[source]
        source: serde_json::Error,
    },
    /// An event (told apart by the `type` in its data) is not the JSON expected.
    #[error("invalid event {data:?}: {source}")]
    Event {
        data: String,
        #[source]
        source: serde_json::Error,
    },
    /// An event of a known kind (a Responses API event name) is not the JSON expected.
    #[error("invalid {kind} event: {source}")]
    EventOfKind {
        kind: String,
        #[source]
        source: serde_json::Error,
    },
    /// A chat completion has no choice to take the answer from.
    #[error("the response has no choices")]
    NoChoices,
    /// A Responses API answer reports that it failed; `message` is the server's.
    #[error("the response failed: {message}")]
    ResponseFailed { message: String },
    /// A function call of a whole Responses API answer has no name.
    #[error("function call {index} has no name")]
    NamelessFunctionCall { index: usize },
    /// A streamed Responses API function call never got a name.
    #[error("streamed function call {index} has no name")]
    NamelessStreamedFunctionCall { index: usize },
    /// A streamed chat-completions tool call never got a function name.
    #[error("streamed tool call {index} has no function name")]
    NamelessStreamedToolCall { index: usize },
    /// Tool input arrived for a content block that is not a started `tool_use` block.
    #[error("input_json_delta for content block {index}, which is not a started tool_use block")]
    InputForUnknownBlock { index: usize },
    /// Function-call arguments arrived for no output item the stream announced.
    #[error("{kind} event names no output index and no known item")]
    ArgumentsForUnknownItem { kind: String },
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

    /// Whether the provider refused the request for its size: the prompt does not fit
    /// the model's context window. Told by the status (400 or 413) and the provider's
    /// words: OpenAI's `context_length_exceeded` ("maximum context length"),
    /// Anthropic's "prompt is too long", and the "context window"/"too many tokens"
    /// of OpenAI-compatible servers; or the same words in an error reported
    /// mid-response. Not retryable as is: the session compacts and sends it again.
    pub fn context_overflow(&self) -> bool {
        const SIGNS: [&str; 7] = [
            "context_length_exceeded",
            "maximum context length",
            "prompt is too long",
            "context window",
            "context length",
            "too many tokens",
            "input is too long",
        ];
        let says = |text: &str| {
            let text = text.to_ascii_lowercase();
            SIGNS.iter().any(|sign| text.contains(sign))
        };
        match self {
            Self::Http {
                status: 400 | 413,
                body,
                ..
            } => says(body),
            Self::Remote { message, .. } => says(message),
            _ => false,
        }
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
    fn context_overflows_are_told_by_status_and_the_providers_words() {
        let with = |status: u16, body: &str| LlmError::Http {
            url: "u".into(),
            status,
            body: body.into(),
            retry_after: None,
        };
        for (status, body) in [
            (
                400,
                r#"{"error": {"message": "This model's maximum context length is 128000 tokens.", "code": "context_length_exceeded"}}"#,
            ),
            (
                400,
                r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            ),
            (413, "Request exceeds the model's context window"),
        ] {
            assert!(with(status, body).context_overflow(), "{status} {body}");
        }
        assert!(!with(400, "invalid tool schema").context_overflow());
        assert!(!with(500, "maximum context length").context_overflow());
        assert!(
            LlmError::Remote {
                url: "u".into(),
                message: "Prompt is too long".into()
            }
            .context_overflow()
        );
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
                source: DecodeError::NoChoices
            }
            .retryable()
        );
        assert!(!LlmError::Config("no url".into()).retryable());
        assert!(!LlmError::from(RequestError::ToolResultWithoutCallId { message: 1 }).retryable());
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
    fn decode_and_request_errors_keep_their_messages() {
        let decode = LlmError::Decode {
            url: "http://m/v1/messages".into(),
            source: DecodeError::NamelessStreamedToolCall { index: 3 },
        };
        assert_eq!(
            decode.to_string(),
            "failed to decode model response from http://m/v1/messages: \
             streamed tool call 3 has no function name"
        );
        assert_eq!(
            LlmError::from(RequestError::ToolResultNamesNoCall { message: 2 }).to_string(),
            "invalid chat request: tool result in message 2 names no tool call"
        );
        assert_eq!(decode.kind(), "decode");
    }

    #[test]
    fn http_error_message_names_url_and_status() {
        assert_eq!(
            http(400).to_string(),
            "model request to http://m/v1/chat/completions failed with status 400: b"
        );
    }
}
