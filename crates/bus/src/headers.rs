//! NATS header names used by taskwire.

/// JetStream's deduplication id: a relay retry of the same outbox row is dropped.
pub const MSG_ID: &str = "Nats-Msg-Id";
/// W3C trace context of the task.
pub const TRACEPARENT: &str = "traceparent";
/// The task id, so tools can route without decoding the payload.
pub const TASK_ID: &str = "Taskwire-Task-Id";
