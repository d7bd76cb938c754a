//! What the scripted model answers, and how a reply becomes an HTTP response.
//!
//! The wire renderers ([`super::openai`], [`super::anthropic`], [`super::responses`])
//! turn an [`Answer`] into a JSON body or a list of [`Frame`]s; this module adds
//! status, headers, the delay and the broken-stream behaviour that are the same for
//! every format.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use super::{SeenRequest, WireFormat, anthropic, openai, responses};

/// Usage reported when a reply does not set one.
const DEFAULT_USAGE: (u64, u64) = (10, 5);

/// What the scripted model answers, built with the constructors and `with_*` methods.
#[derive(Debug, Clone)]
pub struct ScriptedReply {
    kind: ReplyKind,
    usage: Option<(u64, u64)>,
    /// Input tokens read from and written to the prompt cache.
    cache: (u64, u64),
    /// Extended thinking before the answer (Anthropic only).
    thinking: Option<String>,
    retry_after: Option<u64>,
    delay: Duration,
    gate: Option<Gate>,
    finish_reason: Option<String>,
    break_stream: bool,
    stream_error: Option<String>,
}

/// Holds back the replies given it until a test opens it: a model that is "thinking"
/// for exactly as long as the test needs. Clones share one gate.
#[derive(Debug, Clone)]
pub struct Gate(std::sync::Arc<tokio::sync::watch::Sender<bool>>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self(std::sync::Arc::new(tokio::sync::watch::Sender::new(false)))
    }

    /// Lets every held and every later reply through.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Waits until the gate is open.
    pub(super) async fn passed(&self) {
        let mut open = self.0.subscribe();
        // The sender lives in `self`, so the wait ends only by opening.
        let _ = open.wait_for(|open| *open).await;
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Clone)]
enum ReplyKind {
    Answer {
        text: String,
        tool_calls: Vec<ScriptedToolCall>,
    },
    Status {
        status: StatusCode,
        body: String,
    },
}

#[derive(Debug, Clone)]
pub(super) struct ScriptedToolCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: Value,
}

/// A successful answer, as the wire renderers see it.
pub(super) struct Answer<'a> {
    pub(super) text: &'a str,
    pub(super) tool_calls: &'a [ScriptedToolCall],
    pub(super) usage: (u64, u64),
    /// Of the input: tokens read from and written to the prompt cache.
    pub(super) cache: (u64, u64),
    /// Thinking before the answer, rendered by the Anthropic format only.
    pub(super) thinking: Option<&'a str>,
    /// In OpenAI vocabulary (`stop`, `tool_calls`, `length`, ...).
    pub(super) finish_reason: &'a str,
}

impl ScriptedReply {
    /// An assistant answer with this text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::answer(text.into(), Vec::new())
    }

    /// An assistant turn that calls tools, given as `(id, name, arguments)`.
    pub fn tool_calls<I, S, N>(calls: I) -> Self
    where
        I: IntoIterator<Item = (S, N, Value)>,
        S: Into<String>,
        N: Into<String>,
    {
        let calls = calls
            .into_iter()
            .map(|(id, name, arguments)| ScriptedToolCall {
                id: id.into(),
                name: name.into(),
                arguments,
            })
            .collect();
        Self::answer(String::new(), calls)
    }

    /// An error answer: this status with this body (served as JSON when it parses as
    /// JSON, as text otherwise). A 200 with a malformed body tests decode errors.
    ///
    /// # Panics
    /// If `status` is not a valid HTTP status code; the script is wrong.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        let status =
            StatusCode::from_u16(status).expect("scripted status must be a valid http status code");
        Self::with_kind(ReplyKind::Status {
            status,
            body: body.into(),
        })
    }

    /// Adds assistant text to a reply (e.g. text before tool calls); ignored on
    /// [`ScriptedReply::status`] replies.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let ReplyKind::Answer { text: t, .. } = &mut self.kind {
            *t = text.into();
        }
        self
    }

    /// Of the input tokens, those to report as read from and written to the prompt
    /// cache (a caching server sets them from its cache; default none).
    pub fn with_cache(mut self, read: u64, written: u64) -> Self {
        self.cache = (read, written);
        self
    }

    /// Thinks `text` before the answer: an Anthropic answer starts with a `thinking`
    /// block signed with [`thinking_signature`](super::thinking_signature) (other formats
    /// leave it out).
    pub fn with_thinking(mut self, text: impl Into<String>) -> Self {
        self.thinking = Some(text.into());
        self
    }

    /// Token usage to report (default 10 in, 5 out).
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// Sends a `Retry-After: secs` header.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// Waits this long before answering (slow models, timeouts).
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Holds the answer back until `gate` opens (after any delay).
    pub fn with_gate(mut self, gate: &Gate) -> Self {
        self.gate = Some(gate.clone());
        self
    }

    /// Overrides the finish reason, in OpenAI vocabulary (`length`, `content_filter`,
    /// ...); the Anthropic endpoint maps it to its `stop_reason`, the Responses
    /// endpoint `length` and `content_filter` to an `incomplete` status.
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// For streamed answers: abort the connection right after the first content event,
    /// as a server that crashes mid-answer does.
    pub fn with_broken_stream(mut self) -> Self {
        self.break_stream = true;
        self
    }

    /// For streamed answers: open the stream, then send the format's in-stream error
    /// event (OpenAI: a chunk with an `error` object; Anthropic: an `error` event of
    /// type `overloaded_error`; Responses: `response.failed` with a `server_error`)
    /// with this message instead of any content, and end it,
    /// as servers do when they fail after sending the 200. Non-streamed requests get
    /// the answer as if this were not set; script a [`ScriptedReply::status`] for them.
    pub fn with_stream_error(mut self, message: impl Into<String>) -> Self {
        self.stream_error = Some(message.into());
        self
    }

    /// How long the server waits before answering.
    pub(super) fn usage(&self) -> Option<(u64, u64)> {
        self.usage
    }

    pub(super) fn delay(&self) -> Duration {
        self.delay
    }

    /// The gate the answer waits for, if any.
    pub(super) fn gate(&self) -> Option<&Gate> {
        self.gate.as_ref()
    }

    fn answer(text: String, tool_calls: Vec<ScriptedToolCall>) -> Self {
        Self::with_kind(ReplyKind::Answer { text, tool_calls })
    }

    fn with_kind(kind: ReplyKind) -> Self {
        Self {
            kind,
            usage: None,
            cache: (0, 0),
            thinking: None,
            retry_after: None,
            delay: Duration::ZERO,
            gate: None,
            finish_reason: None,
            break_stream: false,
            stream_error: None,
        }
    }
}

/// One event of a streamed answer. `content` marks events that carry text or
/// arguments, where a broken stream is cut.
pub(super) struct Frame {
    pub(super) text: String,
    pub(super) content: bool,
}

impl Frame {
    pub(super) fn data(value: &Value, content: bool) -> Self {
        Self {
            text: format!("data: {value}\n\n"),
            content,
        }
    }

    pub(super) fn event(name: &str, value: &Value, content: bool) -> Self {
        Self {
            text: format!("event: {name}\ndata: {value}\n\n"),
            content,
        }
    }
}

/// Splits `s` into up to `pieces` parts of nearly equal length on char boundaries, so
/// streamed text and arguments arrive in several events.
pub(super) fn split_pieces(s: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(pieces.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

pub(super) fn respond(reply: &ScriptedReply, request: &SeenRequest) -> Response {
    let mut response = match &reply.kind {
        ReplyKind::Status { status, body } => {
            let content_type = if serde_json::from_str::<Value>(body).is_ok() {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            build(*status, content_type, Body::from(body.clone()))
        }
        ReplyKind::Answer { text, tool_calls } => {
            let answer = Answer {
                text,
                tool_calls,
                usage: reply.usage.unwrap_or(DEFAULT_USAGE),
                cache: reply.cache,
                thinking: reply.thinking.as_deref(),
                finish_reason: reply
                    .finish_reason
                    .as_deref()
                    .unwrap_or(if tool_calls.is_empty() {
                        "stop"
                    } else {
                        "tool_calls"
                    }),
            };
            if request.stream {
                let frames = match (request.format, &reply.stream_error) {
                    (WireFormat::OpenAi, None) => openai::stream_frames(&answer, request),
                    (WireFormat::OpenAi, Some(message)) => openai::error_frames(message),
                    (WireFormat::Anthropic, None) => anthropic::stream_frames(&answer, request),
                    (WireFormat::Anthropic, Some(message)) => {
                        anthropic::error_frames(message, &answer, request)
                    }
                    (WireFormat::Responses, None) => responses::stream_frames(&answer, request),
                    (WireFormat::Responses, Some(message)) => {
                        responses::error_frames(message, request)
                    }
                };
                build(
                    StatusCode::OK,
                    "text/event-stream",
                    sse_body(frames, reply.break_stream),
                )
            } else {
                let json = match request.format {
                    WireFormat::OpenAi => openai::response_json(&answer, request),
                    WireFormat::Anthropic => anthropic::response_json(&answer, request),
                    WireFormat::Responses => responses::response_json(&answer, request),
                };
                build(
                    StatusCode::OK,
                    "application/json",
                    Body::from(json.to_string()),
                )
            }
        }
    };
    if let Some(secs) = reply.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, secs.into());
    }
    response
}

fn sse_body(frames: Vec<Frame>, break_stream: bool) -> Body {
    let cut = if break_stream {
        frames
            .iter()
            .position(|f| f.content)
            .map_or(frames.len(), |i| i + 1)
    } else {
        frames.len()
    };
    let events: Vec<Result<Bytes, std::io::Error>> = frames
        .into_iter()
        .take(cut)
        .map(|f| Ok(Bytes::from(f.text)))
        .collect();
    let events = futures::stream::iter(events);
    if !break_stream {
        return Body::from_stream(events);
    }
    // The pause lets the events written so far reach the client before the abort, so
    // it sees the answer start and then break, as with a crashed server.
    let abort = futures::stream::once(async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::other("scripted model broke the stream"))
    });
    Body::from_stream(events.chain(abort))
}

pub(super) fn plain(status: StatusCode, message: String) -> Response {
    build(status, "text/plain; charset=utf-8", Body::from(message))
}

fn build(status: StatusCode, content_type: &'static str, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    if content_type == "text/event-stream" {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn split_pieces_keeps_every_char_in_order() {
        let pieces = split_pieces("héllo wörld", 3);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), "héllo wörld");
    }

    #[test]
    fn split_pieces_of_short_text_gives_fewer_pieces() {
        assert_eq!(split_pieces("ab", 3), vec!["a", "b"]);
        assert!(split_pieces("", 3).is_empty());
    }

    #[test]
    fn reply_status_with_retry_after_sets_the_header() {
        let request = openai::parse(
            serde_json::json!({"model": "m", "messages": []}),
            BTreeMap::new(),
        )
        .expect("minimal request parses");
        let response = respond(
            &ScriptedReply::status(429, "slow down").with_retry_after(2),
            &request,
        );
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
    }
}
