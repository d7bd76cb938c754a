//! The `chat <model>` span of one model call (OpenTelemetry GenAI conventions), named in
//! one place (see `docs/observability.md`).
//!
//! Token counts, models, finish reasons, the server's address and, on failure, the
//! error's type. Prompt and completion text are recorded (`gen_ai.input.messages`,
//! `gen_ai.output.messages`) only when the process opted in with
//! [`set_capture_content`] (`TASKWIRE_OTEL_CAPTURE_CONTENT=true`); never otherwise.

use opentelemetry::{Array, StringValue, Value};
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use std::sync::atomic::{AtomicBool, Ordering};

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
pub(crate) fn chat(
    provider: &'static str,
    request: &ChatRequest,
    endpoint: &reqwest::Url,
) -> tracing::Span {
    let model = request.model.as_str();
    let span = tracing::info_span!(
        "chat",
        otel.name = Empty,
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        server.address = Empty,
        server.port = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("chat {model}"));
        if let Some(host) = endpoint.host_str() {
            span.record("server.address", host);
        }
        if let Some(port) = endpoint.port_or_known_default() {
            span.record("server.port", port);
        }
        if capturing() {
            let input = serde_json::to_string(&request.messages).unwrap_or_default();
            span.record("gen_ai.input.messages", input);
        }
    }
    span
}

/// Records the model the server says answered, on the current (`chat`) span.
pub(crate) fn response_model(model: &str) {
    tracing::Span::current().record("gen_ai.response.model", model);
}

/// Records how the call ended on `span`.
pub(crate) fn end(span: &tracing::Span, answer: &Result<ChatResponse, LlmError>) {
    match answer {
        Ok(r) => {
            span.record("gen_ai.usage.input_tokens", r.usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", r.usage.output_tokens);
            // A list attribute, which `tracing` fields cannot hold; one answer is asked
            // for (n = 1), so one reason.
            let reasons = vec![StringValue::from(
                finish_reason(&r.finish_reason).to_owned(),
            )];
            span.set_attribute(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            );
            if capturing() && !span.is_disabled() {
                let output = Message::assistant(r.text.clone(), r.tool_calls.clone());
                let output = serde_json::to_string(&[output]).unwrap_or_default();
                span.record("gen_ai.output.messages", output);
            }
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", error_type(e));
        }
    }
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
