//! The coordinator's spans, named in one place (see `docs/observability.md`).
//!
//! They are `tracing` spans; the binary exports them over OTLP only when an endpoint is
//! configured. Parents cross processes as W3C `traceparent` values in the envelopes
//! ([`taskwire_bus::trace_context`]), so one task tree is one trace:
//!
//! ```text
//! taskwire.v1.TaskService/Submit (server)     ← a caller's traceparent, if it sent one
//! ├── publish <subject> (producer)            the outbox relay's dispatch
//! └── invoke_agent <agent> (worker, per attempt)
//!     ├── chat <model>, execute_tool <tool>, await_approval
//!     ├── execute_tool task → ChildSubmit (server) → the child's spans, alike
//!     └── record_result (the aggregator's fenced write)
//! ```

use taskwire_bus::trace_context;
use taskwire_protocol::TraceId;
use tracing::field::Empty;

/// The server span of a gRPC `Submit`. It joins the caller's trace when `traceparent`
/// (gRPC metadata) names one, unless the submit belongs to another trace (`trace`: the
/// parent task's, or the one the request names), which it joins instead: the task's
/// trace id is always its spans' trace id.
pub fn submit(traceparent: &str, trace: Option<TraceId>) -> tracing::Span {
    let span = tracing::info_span!(
        "submit",
        otel.name = "taskwire.v1.TaskService/Submit",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = "taskwire.v1.TaskService",
        rpc.method = "Submit",
        task.id = Empty,
        trace.id = Empty,
        otel.status_code = Empty,
        error.type = Empty,
    );
    match trace {
        Some(trace) => {
            trace_context::set_parent_in(&span, traceparent, trace);
        }
        None => {
            trace_context::set_parent(&span, traceparent);
        }
    }
    span
}

/// The server span of a worker's child submit (the `task` tool), a child of the
/// parent's `execute_tool task` span (`traceparent`), always in the parent's trace.
pub fn child_submit(
    traceparent: &str,
    parent_id: taskwire_protocol::TaskId,
    trace: TraceId,
) -> tracing::Span {
    let span = tracing::info_span!(
        "child_submit",
        otel.name = "ChildSubmit",
        otel.kind = "server",
        rpc.system = "nats",
        rpc.method = "ChildSubmit",
        task.parent_id = %parent_id,
        task.id = Empty,
        trace.id = Empty,
        otel.status_code = Empty,
        error.type = Empty,
    );
    trace_context::set_parent_in(&span, traceparent, trace);
    span
}

/// Marks `span` failed with `error_type` (a gRPC code name).
pub fn fail(span: &tracing::Span, error_type: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error_type);
}

/// The producer span of one dispatch the outbox relay publishes, a child of the
/// submit span (`traceparent`, from the stored task request) in the task's trace.
pub fn publish(subject: &str, msg_id: &str, traceparent: &str, trace: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "publish",
        otel.name = format!("publish {subject}"),
        otel.kind = "producer",
        messaging.system = "nats",
        messaging.operation.type = "send",
        messaging.destination.name = subject,
        messaging.message.id = msg_id,
    );
    match trace.parse() {
        Ok(trace) => {
            trace_context::set_parent_in(&span, traceparent, trace);
        }
        Err(_) => {
            trace_context::set_parent(&span, traceparent);
        }
    }
    span
}

/// The aggregator's fenced write of one attempt's result, a child of the attempt's
/// span (`traceparent`, from the result).
pub fn record_result(
    task_id: &taskwire_protocol::TaskId,
    trace_id: &TraceId,
    attempt: u32,
    traceparent: &str,
) -> tracing::Span {
    let span = tracing::info_span!(
        "record_result",
        otel.name = "record_result",
        task.id = %task_id,
        trace.id = %trace_id,
        task.attempt = attempt,
        db.system.name = "postgresql",
        task.recorded = Empty,
    );
    trace_context::set_parent_in(&span, traceparent, *trace_id);
    span
}
