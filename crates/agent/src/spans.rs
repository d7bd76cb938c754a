//! The session's trace spans, named in one place (see `docs/observability.md`):
//! `execute_tool <tool>` per tool call (OpenTelemetry GenAI conventions) and
//! `await_approval` while a call waits for an answer. Tool arguments and results are
//! never recorded.

use tracing::field::Empty;

use crate::error::ToolError;

/// The span of one tool call, from its approval (if asked) to its result.
pub(crate) fn execute_tool(tool: &str, call_id: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        error.type = Empty,
        otel.status_code = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {tool}"));
    }
    span
}

/// Marks the tool call's span failed, with the kind of error as its type.
pub(crate) fn tool_failed(span: &tracing::Span, err: &ToolError) {
    let debug = format!("{err:?}");
    let kind = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or_default();
    span.record("otel.status_code", "ERROR");
    span.record("error.type", kind);
}

/// The span of a wait for an approval answer.
pub(crate) fn await_approval(permission: &str, request_id: &str) -> tracing::Span {
    tracing::info_span!(
        "await_approval",
        otel.kind = "internal",
        approval.permission = permission,
        approval.request_id = request_id,
    )
}
