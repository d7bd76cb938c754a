//! Progress events on the wire: several events of one attempt travel as one message.
//!
//! A worker sends the events that come within a few milliseconds of each other
//! together ([`coalesce`]): the first event carries the others in `following`, without
//! repeating their task, trace and attempt. Every reader goes through [`decode_events`],
//! which gives the events back one by one, in order, each complete. A message of one
//! event is exactly a `TaskProgress` as it always was.

use taskwire_protocol::pb;

use crate::codec::decode;
use crate::consumer::Incoming;
use crate::error::CodecError;

/// The events of one progress message, in order, each complete ([`decode_events`]):
/// what a reader of the events stream or the progress subjects receives.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressEvents(pub Vec<pb::TaskProgress>);

impl Incoming for ProgressEvents {
    fn read(_subject: &str, payload: &[u8]) -> Result<Self, CodecError> {
        decode_events(payload).map(Self)
    }
}

/// One message holding `events` (of one attempt, in order); `None` for no events.
pub fn coalesce(events: Vec<pb::TaskProgress>) -> Option<pb::TaskProgress> {
    let mut events = events.into_iter();
    let mut first = events.next()?;
    first.following = events
        .map(|mut event| {
            event.task_id.clear();
            event.trace_id.clear();
            event.attempt = 0;
            event.following.clear();
            event
        })
        .collect();
    Some(first)
}

/// The events in a progress message's `bytes`, in order, each with its task, trace
/// and attempt.
pub fn decode_events(bytes: &[u8]) -> Result<Vec<pb::TaskProgress>, CodecError> {
    let mut first = decode::<pb::TaskProgress>(bytes)?;
    let following = std::mem::take(&mut first.following);
    let mut events = Vec::with_capacity(1 + following.len());
    for mut event in following {
        event.task_id.clone_from(&first.task_id);
        event.trace_id.clone_from(&first.trace_id);
        event.attempt = first.attempt;
        event.following.clear();
        events.push(event);
    }
    events.insert(0, first);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode;

    fn event(seq: u64, text: &str) -> pb::TaskProgress {
        pb::TaskProgress {
            task_id: "t1".into(),
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            attempt: 2,
            seq,
            status: pb::TaskStatus::Running as i32,
            at: None,
            event: Some(pb::task_progress::Event::TextDelta(pb::TextDelta {
                text: text.into(),
            })),
            following: Vec::new(),
        }
    }

    #[test]
    fn coalesced_events_come_back_complete_and_in_order() {
        let events = vec![event(1, "a"), event(2, "b"), event(3, "c")];
        let message = coalesce(events.clone()).expect("one message");
        assert_eq!(message.following.len(), 2);
        assert!(message.following.iter().all(|e| e.task_id.is_empty()));
        assert_eq!(decode_events(&encode(&message)).expect("decodes"), events);
    }

    #[test]
    fn a_single_event_is_a_plain_task_progress() {
        let one = coalesce(vec![event(1, "a")]).expect("one message");
        assert_eq!(encode(&one), encode(&event(1, "a")));
        assert_eq!(
            decode_events(&encode(&one)).expect("decodes"),
            vec![event(1, "a")]
        );
        assert!(coalesce(Vec::new()).is_none());
    }

    #[test]
    fn a_malformed_message_is_an_error_naming_it() {
        let err = decode_events(b"\xff\xff\xff").expect_err("malformed");
        assert!(err.to_string().contains("task progress"), "{err}");
    }
}
