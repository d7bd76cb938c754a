//! Publishes a session's events as `TaskProgress` on the task's subject, in order.
//!
//! The session loop reports events synchronously; they go through a channel to one
//! publisher task per attempt, which numbers them (`seq`, monotonic per attempt) and
//! publishes them pipelined. [`ProgressPublisher::finish`] waits until every event is
//! stored, so the result is never published before the progress it summarises.

use taskwire_agent::{SessionEvent, SessionObserver, ToolCallState};
use taskwire_bus::Bus;
use taskwire_protocol::value::json_to_struct;
use taskwire_protocol::{TaskId, TraceId, pb, time};
use tokio::sync::mpsc;

/// The observer handed to the session loop.
pub struct ProgressSink {
    /// Boxed: a channel allocates room for a block of its items when it is made, and
    /// the session holds it for its whole life, mostly waiting on the model.
    tx: mpsc::UnboundedSender<Box<SessionEvent>>,
}

impl SessionObserver for ProgressSink {
    fn on_event(&self, event: SessionEvent) {
        // A closed channel means the attempt is over; late events are dropped.
        let _ = self.tx.send(Box::new(event));
    }
}

/// The publishing half.
pub struct ProgressPublisher {
    handle: tokio::task::JoinHandle<u64>,
}

impl ProgressPublisher {
    /// Starts publishing events of one attempt of `task_id`.
    pub fn start(
        bus: Bus,
        task_id: TaskId,
        trace_id: TraceId,
        attempt: u32,
    ) -> (ProgressSink, Self) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Box<SessionEvent>>();
        // The task waits on the channel for most of its life: a publish and the wait
        // for acks are boxed, so that it holds room for them only while they run.
        let handle = tokio::spawn(async move {
            let mut seq = 0u64;
            let mut acks = Vec::new();
            while let Some(event) = rx.recv().await {
                seq += 1;
                let msg = progress_message(task_id, trace_id, attempt, seq, *event);
                match Box::pin(bus.send_progress(task_id, &msg)).await {
                    Ok(ack) => acks.push(ack),
                    Err(e) => {
                        tracing::warn!(task.id = %task_id, error = %e, "failed to publish progress")
                    }
                }
                // Bound the acks held in memory for chatty sessions.
                if acks.len() >= 256 {
                    Box::pin(await_acks(task_id, std::mem::take(&mut acks))).await;
                }
            }
            Box::pin(await_acks(task_id, acks)).await;
            seq
        });
        (ProgressSink { tx }, Self { handle })
    }

    /// Waits until every event sent before `sink` was dropped is stored; returns how
    /// many events were published.
    pub async fn finish(self, sink: ProgressSink) -> u64 {
        drop(sink);
        self.handle.await.unwrap_or_default()
    }
}

fn progress_message(
    task_id: TaskId,
    trace_id: TraceId,
    attempt: u32,
    seq: u64,
    event: SessionEvent,
) -> pb::TaskProgress {
    use pb::task_progress::Event;
    let event = match event {
        SessionEvent::StepStarted { step } => Event::StepStarted(pb::StepStarted { step }),
        SessionEvent::StepFinished { step, usage } => Event::StepFinished(pb::StepFinished {
            step,
            usage: Some(crate::cost::to_wire(usage)),
        }),
        SessionEvent::TextDelta { text } => Event::TextDelta(pb::TextDelta { text }),
        SessionEvent::ToolCall {
            call_id,
            tool,
            state,
            title,
            error,
            metadata,
        } => Event::ToolCall(pb::ToolCallEvent {
            call_id,
            tool,
            state: wire_state(state) as i32,
            title,
            error: error.unwrap_or_default(),
            task_id: String::new(),
            metadata: metadata.as_ref().map(json_to_struct),
        }),
        SessionEvent::ApprovalRequired {
            request_id,
            permission,
            patterns,
        } => approval(task_id.to_string(), request_id, permission, patterns),
        // A descendant's ask, shown here so that the root's watchers see it; this
        // task waits on it.
        SessionEvent::ChildApprovalRequired {
            task_id: asking,
            request_id,
            permission,
            patterns,
        } => approval(asking, request_id, permission, patterns),
        SessionEvent::ChildTask {
            task_id,
            agent,
            description,
            session_id,
            call_id,
        } => Event::ChildTask(pb::ChildTask {
            task_id,
            agent,
            description,
            session_id,
            call_id,
        }),
        SessionEvent::Compacted {
            tokens_before,
            tokens_after,
            usage,
        } => Event::Compaction(pb::Compaction {
            tokens_before,
            tokens_after,
            usage: Some(crate::cost::to_wire(usage)),
        }),
        // A child's tool call, shown in the parent's progress with the child's own
        // call id and the child's task id (seed 001, step 5).
        SessionEvent::ChildToolCall {
            task_id: child,
            call_id,
            tool,
            title,
            state,
        } => Event::ToolCall(pb::ToolCallEvent {
            call_id,
            tool,
            state: wire_state(state) as i32,
            title,
            error: String::new(),
            task_id: child,
            metadata: None,
        }),
    };
    let status = match &event {
        Event::ApprovalRequired(_) => pb::TaskStatus::AwaitingApproval,
        _ => pb::TaskStatus::Running,
    };
    pb::TaskProgress {
        status: status as i32,
        task_id: task_id.to_string(),
        trace_id: trace_id.to_string(),
        attempt,
        seq,
        at: Some(time::to_wire(chrono::Utc::now())),
        event: Some(event),
    }
}

/// An `approval_required` event asked by `asking` (this task or a descendant).
fn approval(
    asking: String,
    request_id: String,
    permission: String,
    patterns: Vec<String>,
) -> pb::task_progress::Event {
    pb::task_progress::Event::ApprovalRequired(pb::ApprovalRequired {
        request_id,
        permission,
        patterns,
        task_id: asking,
    })
}

/// Waits for publish acks together: when a connection drop lost some, the wait is one
/// ack timeout, not one per event.
async fn await_acks(task_id: TaskId, acks: Vec<async_nats::jetstream::context::PublishAckFuture>) {
    for result in futures::future::join_all(acks.into_iter().map(|a| a.into_future())).await {
        if let Err(e) = result {
            tracing::warn!(task.id = %task_id, error = %e, "progress event not stored");
        }
    }
}

fn wire_state(state: ToolCallState) -> pb::ToolCallState {
    match state {
        ToolCallState::Pending => pb::ToolCallState::Pending,
        ToolCallState::Running => pb::ToolCallState::Running,
        ToolCallState::Completed => pb::ToolCallState::Completed,
        ToolCallState::Error => pb::ToolCallState::Error,
    }
}
