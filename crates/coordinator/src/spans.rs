//! The coordinator's spans, named in one place (see `docs/observability.md`).
//!
//! Each is an exported span ([`taskwire_traces`], built only when the binary exports
//! traces) and, where log lines need the task's fields, a `tracing` span beside it.
//! Parents cross processes as W3C `traceparent` values in the envelopes, so one task
//! tree is one trace:
//!
//! ```text
//! taskwire.v1.TaskService/Submit (server)     ← a caller's traceparent, if it sent one
//! ├── publish <subject> (producer)            the outbox relay's dispatch
//! └── invoke_agent <agent> (worker, per attempt)
//!     ├── chat <model>, execute_tool <tool>, await_approval
//!     ├── execute_tool task → ChildSubmit (server) → the child's spans, alike
//!     └── record_result (the aggregator's fenced write)
//! ```

use taskwire_protocol::{TaskId, TraceId};
use taskwire_traces::{Attribute, Parent, Span, SpanBuilder, SpanKind, Spanned};
use tracing::field::Empty;

/// The server span of a gRPC `Submit`. It joins the caller's trace when `traceparent`
/// (gRPC metadata) names one, unless the submit belongs to another trace (`trace`: the
/// parent task's, or the one the request names), which it joins instead: the task's
/// trace id is always its spans' trace id. `task.id` and `trace.id` are set by
/// [`submitted`] once the task is stored.
pub fn submit(traceparent: &str, trace: Option<TraceId>) -> Spanned {
    let parent = match trace {
        Some(trace) => Parent::RemoteIn(traceparent, trace.as_u128()),
        None => Parent::Remote(traceparent),
    };
    Spanned {
        log: tracing::info_span!("submit", task.id = Empty, trace.id = Empty),
        trace: Span::start(parent, || {
            SpanBuilder::from_name("taskwire.v1.TaskService/Submit")
                .with_kind(SpanKind::Server)
                .with_attributes([
                    Attribute::new("rpc.system", "grpc"),
                    Attribute::new("rpc.service", "taskwire.v1.TaskService"),
                    Attribute::new("rpc.method", "Submit"),
                ])
        }),
    }
}

/// The server span of a worker's child submit (the `task` tool), a child of the
/// parent's `execute_tool task` span (`traceparent`), always in the parent's trace.
pub fn child_submit(traceparent: &str, parent_id: TaskId, trace: TraceId) -> Spanned {
    Spanned {
        log: tracing::info_span!(
            "child_submit",
            task.parent_id = %parent_id,
            task.id = Empty,
            trace.id = Empty,
        ),
        trace: Span::start(Parent::RemoteIn(traceparent, trace.as_u128()), || {
            SpanBuilder::from_name("ChildSubmit")
                .with_kind(SpanKind::Server)
                .with_attributes([
                    Attribute::new("rpc.system", "nats"),
                    Attribute::new("rpc.method", "ChildSubmit"),
                    Attribute::new("task.parent_id", parent_id.to_string()),
                ])
        }),
    }
}

/// Names the task a submit stored, on the current submit spans (log and exported).
pub fn submitted(task_id: TaskId, trace_id: TraceId) {
    let log = tracing::Span::current();
    log.record("task.id", tracing::field::display(task_id));
    log.record("trace.id", tracing::field::display(trace_id));
    Span::current().set_with(|| {
        vec![
            Attribute::new("task.id", task_id.to_string()),
            Attribute::new("trace.id", trace_id.to_string()),
        ]
    });
}

/// The producer span of one dispatch the outbox relay publishes, a child of the
/// submit span (`traceparent`, from the stored task request) in the task's trace.
pub fn publish(subject: &str, msg_id: &str, traceparent: &str, trace: &str) -> Span {
    let parent = match trace.parse::<TraceId>() {
        Ok(trace) => Parent::RemoteIn(traceparent, trace.as_u128()),
        Err(_) => Parent::Remote(traceparent),
    };
    Span::start(parent, || {
        SpanBuilder::from_name(format!("publish {subject}"))
            .with_kind(SpanKind::Producer)
            .with_attributes([
                Attribute::new("messaging.system", "nats"),
                Attribute::new("messaging.operation.type", "send"),
                Attribute::new("messaging.destination.name", subject.to_owned()),
                Attribute::new("messaging.message.id", msg_id.to_owned()),
            ])
    })
}

/// The aggregator's fenced write of one attempt's result, a child of the attempt's
/// span (`traceparent`, from the result).
pub fn record_result(
    task_id: &TaskId,
    trace_id: &TraceId,
    attempt: u32,
    traceparent: &str,
) -> Spanned {
    Spanned {
        log: tracing::info_span!(
            "record_result",
            task.id = %task_id,
            trace.id = %trace_id,
            task.attempt = attempt,
        ),
        trace: Span::start(Parent::RemoteIn(traceparent, trace_id.as_u128()), || {
            SpanBuilder::from_name("record_result").with_attributes([
                Attribute::new("task.id", task_id.to_string()),
                Attribute::new("trace.id", trace_id.to_string()),
                Attribute::new("task.attempt", i64::from(attempt)),
                Attribute::new("db.system.name", "postgresql"),
            ])
        }),
    }
}
