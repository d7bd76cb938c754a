//! The worker's spans, named in one place (see `docs/observability.md`).
//!
//! One `invoke_agent <agent>` span per attempt, a child of the span that submitted the
//! task (the `traceparent` in its `TaskRequest`). The session's `chat <model>`,
//! `execute_tool <tool>` and `await_approval` spans (crates `agent` and `llm`) nest
//! under it; the `task` tool's child submit and the result carry its context on.

use taskwire_bus::trace_context;
use taskwire_protocol::{SessionId, TaskRequest, WorkerId};

/// The span of one attempt of `request` (OpenTelemetry GenAI `invoke_agent`).
pub fn invoke_agent(
    request: &TaskRequest,
    attempt: u32,
    worker_id: &WorkerId,
    session_id: SessionId,
) -> tracing::Span {
    let name = trace_context::exporting().then(|| format!("invoke_agent {}", request.agent));
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = name.as_deref(),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %request.agent,
        gen_ai.conversation.id = %session_id,
        task.id = %request.task_id,
        trace.id = %request.trace_id,
        task.attempt = attempt,
        worker.id = %worker_id,
        session.id = %session_id,
    );
    // A task submitted where traces are not exported still keeps its trace id.
    if !trace_context::set_parent(&span, &request.traceparent) {
        trace_context::join_trace(&span, request.trace_id);
    }
    span
}
