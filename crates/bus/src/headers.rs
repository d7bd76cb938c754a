//! NATS headers: their names, and [`build`], the one place any message's headers are
//! made. Whatever a message carries besides its payload (deduplication id, trace
//! context, task id) is set here, so trace propagation is added and read in one place.

use async_nats::HeaderMap;

/// JetStream's deduplication id: a relay retry of the same outbox row is dropped.
pub const MSG_ID: &str = "Nats-Msg-Id";
/// W3C trace context of the task.
pub use taskwire_traces::TRACEPARENT;
/// The task id, so tools can route without decoding the payload.
pub const TASK_ID: &str = "Taskwire-Task-Id";

/// What an outgoing message says about itself besides its payload.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outgoing<'a> {
    /// JetStream deduplication id.
    pub msg_id: Option<&'a str>,
    /// The task's W3C trace id (32 hex digits); sent as a `traceparent`.
    pub trace_id: Option<&'a str>,
    /// The task the message is about.
    pub task: Option<&'a str>,
}

/// The headers of a message, or `None` when it has none (most have none: a message
/// without headers is smaller and cheaper to publish).
pub fn build(out: &Outgoing<'_>) -> Option<HeaderMap> {
    if out.msg_id.is_none() && out.trace_id.is_none() && out.task.is_none() {
        return None;
    }
    let mut headers = HeaderMap::new();
    if let Some(id) = out.msg_id {
        headers.insert(MSG_ID, id);
    }
    if let Some(trace) = out.trace_id {
        // The current exported span's context (a dispatch's producer span) when traces
        // are exported, so the receiver's spans hang under it; otherwise one of the trace.
        let current = taskwire_traces::Span::current().traceparent();
        let value = if current.is_empty() {
            traceparent(trace)
        } else {
            current
        };
        headers.insert(TRACEPARENT, value.as_str());
    }
    if let Some(task) = out.task {
        headers.insert(TASK_ID, task);
    }
    Some(headers)
}

/// A W3C `traceparent` for a message of trace `trace_id`.
fn traceparent(trace_id: &str) -> String {
    format!("00-{trace_id}-{:016x}-01", span_id())
}

fn span_id() -> u64 {
    // Any non-zero 64-bit value is a valid parent span id.
    (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64))
        | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_with_nothing_to_say_has_no_headers() {
        assert!(build(&Outgoing::default()).is_none());
    }

    #[test]
    fn a_dispatch_carries_its_dedup_id_trace_and_task() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let h = build(&Outgoing {
            msg_id: Some("t1"),
            trace_id: Some(trace),
            task: Some("t1"),
        })
        .expect("headers");
        assert_eq!(h.get(MSG_ID).map(|v| v.as_str()), Some("t1"));
        assert_eq!(h.get(TASK_ID).map(|v| v.as_str()), Some("t1"));
        let tp = h.get(TRACEPARENT).expect("a traceparent").as_str();
        let parts: Vec<_> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[1], parts[3]), ("00", trace, "01"));
        assert_eq!(parts[2].len(), 16);
        assert_ne!(parts[2], "0000000000000000");
    }
}
