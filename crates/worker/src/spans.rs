//! The worker's spans, named in one place (see `docs/observability.md`).
//!
//! One `invoke_agent <agent>` span per attempt, a child of the span that submitted the
//! task (the `traceparent` in its `TaskRequest`), in the task's trace. The session's
//! `chat <model>`, `execute_tool <tool>` and `await_approval` spans (crates `agent` and
//! `llm`) nest under it; the `task` tool's child submit and the result carry its
//! context on.

use taskwire_protocol::{SessionId, TaskRequest, WorkerId};
use taskwire_traces::{Attribute, Parent, Span, SpanBuilder, Spanned};

/// The spans of one attempt of `request` (OpenTelemetry GenAI `invoke_agent`).
pub fn invoke_agent(
    request: &TaskRequest,
    attempt: u32,
    worker_id: &WorkerId,
    session_id: SessionId,
) -> Spanned {
    let parent = Parent::RemoteIn(&request.traceparent, request.trace_id.as_u128());
    Spanned {
        log: tracing::info_span!(
            "invoke_agent",
            gen_ai.agent.name = %request.agent,
            task.id = %request.task_id,
            trace.id = %request.trace_id,
            task.attempt = attempt,
            worker.id = %worker_id,
            session.id = %session_id,
        ),
        trace: Span::start(parent, || {
            let session = session_id.to_string();
            SpanBuilder::from_name(format!("invoke_agent {}", request.agent)).with_attributes([
                Attribute::new("gen_ai.operation.name", "invoke_agent"),
                Attribute::new("gen_ai.agent.name", request.agent.to_string()),
                Attribute::new("gen_ai.conversation.id", session.clone()),
                Attribute::new("task.id", request.task_id.to_string()),
                Attribute::new("trace.id", request.trace_id.to_string()),
                Attribute::new("task.attempt", i64::from(attempt)),
                Attribute::new("worker.id", worker_id.to_string()),
                Attribute::new("session.id", session),
            ])
        }),
    }
}
