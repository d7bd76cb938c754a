//! The `chat <model>` span of one model call (OpenTelemetry GenAI conventions) and the
//! `rate_limit_wait` span of a wait for the model's budget, named in one place (see
//! `docs/observability.md`). Each is a child of the span current where it starts.
//!
//! Token counts, models, finish reasons, the server's address and, on failure, the
//! error's type. Prompt and completion text are recorded (`gen_ai.input.messages`,
//! `gen_ai.output.messages`) only when the process opted in with
//! [`set_capture_content`] (`TASKWIRE_OTEL_CAPTURE_CONTENT=true`); never otherwise.

use std::sync::atomic::{AtomicBool, Ordering};

use taskwire_traces::{Array, Attribute, Parent, Span, SpanBuilder, SpanKind, StringValue, Value};

use crate::{ChatRequest, ChatResponse, FinishReason, LlmError, Message};

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Records prompt and completion text on `chat` spans from now on (off by default:
/// prompts and answers may hold anything a task touched).
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

fn capturing() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// The span of one chat call to `provider` (`openai`, `anthropic`) at `endpoint`.
pub(crate) fn chat(provider: &'static str, request: &ChatRequest, endpoint: &reqwest::Url) -> Span {
    Span::start(Parent::Current, || {
        let model = request.model.as_str();
        let mut attributes = vec![
            Attribute::new("gen_ai.operation.name", "chat"),
            Attribute::new("gen_ai.provider.name", provider),
            Attribute::new("gen_ai.request.model", model.to_owned()),
        ];
        if let Some(host) = endpoint.host_str() {
            attributes.push(Attribute::new("server.address", host.to_owned()));
        }
        if let Some(port) = endpoint.port_or_known_default() {
            attributes.push(Attribute::new("server.port", i64::from(port)));
        }
        if capturing() {
            let input = serde_json::to_string(&request.messages).unwrap_or_default();
            attributes.push(Attribute::new("gen_ai.input.messages", input));
        }
        SpanBuilder::from_name(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
    })
}

/// Records the model the server says answered, on the current (`chat`) span.
pub(crate) fn response_model(model: &str) {
    Span::current().set_with(|| vec![Attribute::new("gen_ai.response.model", model.to_owned())]);
}

/// Records how the call ended on `span`.
pub(crate) fn end(span: &Span, answer: &Result<ChatResponse, LlmError>) {
    match answer {
        Ok(r) => span.set_with(|| {
            // One answer is asked for (n = 1), so one finish reason.
            let reasons = vec![StringValue::from(
                finish_reason(&r.finish_reason).to_owned(),
            )];
            let mut attributes = vec![
                Attribute::new("gen_ai.usage.input_tokens", int(r.usage.input_tokens)),
                Attribute::new("gen_ai.usage.output_tokens", int(r.usage.output_tokens)),
                Attribute::new(
                    "gen_ai.response.finish_reasons",
                    Value::Array(Array::String(reasons)),
                ),
            ];
            if capturing() {
                let output = Message::assistant(r.text.clone(), r.tool_calls.clone());
                let output = serde_json::to_string(&[output]).unwrap_or_default();
                attributes.push(Attribute::new("gen_ai.output.messages", output));
            }
            attributes
        }),
        Err(e) => {
            if span.is_recording() {
                span.fail(error_type(e));
            }
        }
    }
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The span of a wait of `wait_ms` for `model`'s rate budget.
pub(crate) fn rate_limit_wait(model: &str, wait_ms: u64) -> Span {
    Span::start(Parent::Current, || {
        SpanBuilder::from_name("rate_limit_wait").with_attributes([
            Attribute::new("model", model.to_owned()),
            Attribute::new("wait_ms", int(wait_ms)),
        ])
    })
}

/// The GenAI convention's finish reason names.
fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

/// A low-cardinality name for the failure: the HTTP status, else the kind of error.
fn error_type(e: &LlmError) -> String {
    match e {
        LlmError::Http { status, .. } => status.to_string(),
        LlmError::Timeout { .. } => "timeout".into(),
        LlmError::Transport { .. } => "transport".into(),
        LlmError::Remote { .. } => "remote".into(),
        LlmError::Decode { .. } => "decode".into(),
        LlmError::Config(_) => "config".into(),
        LlmError::InvalidRequest(_) => "invalid_request".into(),
    }
}
