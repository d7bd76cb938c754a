//! Publishes a session's events as `TaskProgress` on the task's subject, in order.
//!
//! The session loop reports events synchronously; they go through a channel to one
//! publisher task per attempt, which numbers them (`seq`, monotonic per attempt) and
//! publishes them, each message once the one before is stored. Events that come
//! within [`COALESCE_WINDOW`] of the first one not yet sent, or while the message
//! before is being stored, go together in one message ([`taskwire_bus::progress`]): a
//! step's start, its text and its end usually make one message, not three.
//! [`ProgressPublisher::finish`] waits until every event is stored, so the result is
//! never published before the progress it summarises.

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
            while let Some(first) = rx.recv().await {
                let events = gather(&mut rx, first).await;
                let batch = events
                    .into_iter()
                    .map(|event| {
                        seq += 1;
                        progress_message(task_id, trace_id, attempt, seq, *event)
                    })
                    .collect();
                let Some(msg) = taskwire_bus::progress::coalesce(batch) else {
                    continue;
                };
                // Each message's ack is awaited before the next is sent: an ack not
                // awaited holds one of the connection's in-flight publish permits
                // (5,000, shared by every session of the worker), so sessions waiting
                // with unawaited acks would leave none for the others. Events that come
                // meanwhile wait in the channel and go in the next message.
                let stored = Box::pin(async {
                    match bus.send_progress(task_id, &msg).await {
                        Ok(ack) => ack.await.map(drop).map_err(|e| e.to_string()),
                        Err(e) => Err(e.to_string()),
                    }
                })
                .await;
                if let Err(error) = stored {
                    tracing::warn!(task.id = %task_id, error = %error, "progress event not stored");
                }
            }
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

/// How long the first event not yet sent waits for others to go with it: long enough
/// for a quick step's start, text and end to make one message, short enough that a
/// watcher sees a streamed text in pieces at most a fiftieth of a second apart. The
/// session's end sends what is gathered at once, so the window never delays a result.
pub const COALESCE_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);
/// Most events in one message (a fast text stream goes out sooner than the window,
/// in messages well under NATS's payload limit).
const MAX_COALESCED: usize = 64;

/// `first` and the events that follow it within [`COALESCE_WINDOW`] (at most
/// [`MAX_COALESCED`]); sooner when the session ends (the channel closes).
async fn gather(
    rx: &mut mpsc::UnboundedReceiver<Box<SessionEvent>>,
    first: Box<SessionEvent>,
) -> Vec<Box<SessionEvent>> {
    let mut events = vec![first];
    let until = tokio::time::Instant::now() + COALESCE_WINDOW;
    while events.len() < MAX_COALESCED {
        match rx.try_recv() {
            Ok(event) => events.push(event),
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(event)) => events.push(event),
                    Ok(None) | Err(_) => break,
                }
            }
        }
    }
    events
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
        SessionEvent::Hook {
            event,
            hook,
            source,
            subject,
            call_id,
            outcome,
            message,
            duration_ms,
        } => Event::Hook(pb::HookRun {
            event,
            hook,
            source,
            subject,
            call_id,
            outcome,
            message: message.unwrap_or_default(),
            duration_ms,
        }),
        SessionEvent::RateLimited { model, wait_ms } => {
            Event::RateLimitWait(pb::RateLimitWait { model, wait_ms })
        }
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
        following: Vec::new(),
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

fn wire_state(state: ToolCallState) -> pb::ToolCallState {
    match state {
        ToolCallState::Pending => pb::ToolCallState::Pending,
        ToolCallState::Running => pb::ToolCallState::Running,
        ToolCallState::Completed => pb::ToolCallState::Completed,
        ToolCallState::Error => pb::ToolCallState::Error,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use taskwire_bus::{Bus, BusConfig, NatsOptions, Subjects};
    use taskwire_protocol::{TaskId, TraceId};
    use taskwire_test_support::NatsServer;

    use super::*;

    /// A bus on `nats` with the streams made.
    async fn bus_with_streams(nats: &NatsServer) -> (Bus, Subjects) {
        let subjects = Subjects::new("progresstest");
        let bus = Bus::connect(
            &nats.url(),
            "progress-test",
            &NatsOptions::default(),
            subjects.clone(),
        )
        .await
        .expect("connects");
        let config = BusConfig {
            subjects: subjects.clone(),
            ..BusConfig::default()
        };
        bus.ensure_streams(&config).await.expect("streams");
        (bus, subjects)
    }

    /// More sessions than the connection's 5,000 in-flight publish acks, each with an
    /// event stored before its model call and more after it: every one finishes.
    #[tokio::test]
    async fn more_waiting_sessions_than_in_flight_acks_all_finish() {
        let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
        let (bus, _) = bus_with_streams(&nats).await;
        let sessions: Vec<_> = (0..5_100)
            .map(|_| {
                let (sink, publisher) = ProgressPublisher::start(
                    bus.clone(),
                    TaskId::generate(),
                    TraceId::generate(),
                    1,
                );
                sink.on_event(SessionEvent::StepStarted { step: 1 });
                (sink, publisher)
            })
            .collect();
        // All of them wait on their model, then answer.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let finished = futures::future::join_all(sessions.into_iter().map(|(sink, publisher)| {
            sink.on_event(SessionEvent::TextDelta {
                text: "done".into(),
            });
            publisher.finish(sink)
        }));
        let published = tokio::time::timeout(Duration::from_secs(60), finished)
            .await
            .expect("every session's progress is stored");
        assert!(published.iter().all(|&n| n == 2), "two events each");
    }

    /// A step whose model answers within the window (here 5 ms, more than the window
    /// used to be) is stored as one message: its start, its text and its end, in order.
    #[tokio::test]
    async fn a_quick_steps_events_are_stored_as_one_message() {
        let nats = NatsServer::start().expect("nats-server starts (apt-get install nats-server)");
        let (bus, subjects) = bus_with_streams(&nats).await;
        let task = TaskId::generate();
        let (sink, publisher) = ProgressPublisher::start(bus.clone(), task, TraceId::generate(), 1);
        sink.on_event(SessionEvent::StepStarted { step: 1 });
        tokio::time::sleep(Duration::from_millis(5)).await;
        sink.on_event(SessionEvent::TextDelta {
            text: "done".into(),
        });
        sink.on_event(SessionEvent::StepFinished {
            step: 1,
            usage: Default::default(),
        });
        assert_eq!(publisher.finish(sink).await, 3, "three events published");

        let mut stream = bus
            .js()
            .get_stream(subjects.events_stream())
            .await
            .expect("events stream");
        let stored = stream.info().await.expect("stream info").state.messages;
        assert_eq!(stored, 1, "the step's events go as one message");
        let message = stream
            .get_last_raw_message_by_subject(&subjects.progress(task))
            .await
            .expect("the task's message");
        let events = taskwire_bus::progress::decode_events(&message.payload).expect("decodes");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        use pb::task_progress::Event;
        assert!(matches!(events[0].event, Some(Event::StepStarted(_))));
        assert!(matches!(events[1].event, Some(Event::TextDelta(_))));
        assert!(matches!(events[2].event, Some(Event::StepFinished(_))));
    }
}
