//! What a running task waits for, read from its last progress event: a
//! `rate_limit_wait` whose time has not passed is the `awaiting_rate_limit` wait (a
//! session that waits for its model's rate budget sends nothing else meanwhile). One
//! direct get on the events stream, no Postgres: the wait is never stored.

use std::time::{Duration, SystemTime};

use taskwire_protocol::{TaskId, pb};

use crate::State;

/// The wait `Task.wait` names while a model call waits for its rate-limit slot.
pub const AWAITING_RATE_LIMIT: &str = "awaiting_rate_limit";

/// Sets `task.wait` and `task.wait_until` from the task's last progress event, when
/// it is a wait that has not ended. A task that is not running waits for nothing
/// here, and an unreadable event only means no wait is shown.
pub async fn set_wait(state: &State, task_id: TaskId, task: &mut pb::Task) {
    if task.status() != pb::TaskStatus::Running {
        return;
    }
    let Some(last) = state.bus.last_progress(task_id).await else {
        return;
    };
    let Ok(events) = last.events() else {
        return;
    };
    if let Some((wait, until)) = events.last().and_then(|e| wait_of(e, SystemTime::now())) {
        task.wait = wait.to_owned();
        task.wait_until = Some(prost_types::Timestamp::from(until));
    }
}

/// The wait an event starts, with its end, if that end is after `now`.
fn wait_of(event: &pb::TaskProgress, now: SystemTime) -> Option<(&'static str, SystemTime)> {
    let Some(pb::task_progress::Event::RateLimitWait(w)) = &event.event else {
        return None;
    };
    let at = SystemTime::try_from(event.at?).ok()?;
    let until = at + Duration::from_millis(w.wait_ms);
    (until > now).then_some((AWAITING_RATE_LIMIT, until))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(at: SystemTime, wait_ms: u64) -> pb::TaskProgress {
        pb::TaskProgress {
            at: Some(prost_types::Timestamp::from(at)),
            event: Some(pb::task_progress::Event::RateLimitWait(pb::RateLimitWait {
                model: "m".into(),
                wait_ms,
            })),
            ..Default::default()
        }
    }

    #[test]
    fn a_rate_limit_wait_lasts_until_its_end_and_other_events_are_no_wait() {
        let now = SystemTime::now();
        let started = now - Duration::from_millis(500);
        assert_eq!(
            wait_of(&wait(started, 2000), now),
            Some((AWAITING_RATE_LIMIT, started + Duration::from_millis(2000)))
        );
        assert_eq!(wait_of(&wait(started, 400), now), None, "it ended");
        let step = pb::TaskProgress {
            event: Some(pb::task_progress::Event::StepStarted(pb::StepStarted {
                step: 2,
            })),
            ..wait(started, 2000)
        };
        assert_eq!(wait_of(&step, now), None);
    }
}
