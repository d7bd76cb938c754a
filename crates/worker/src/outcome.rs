//! How a task message is settled. Every path through the handler ends in one
//! [`Disposition`], and this file alone maps it onto the bus's [`Settlement`].

use backon::BackoffBuilder as _;
use std::time::Duration;

use backon::ExponentialBuilder;

use taskwire_bus::Settlement;

/// What to tell JetStream about a task message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// The attempt's result is stored in the RESULTS stream, or there is nothing to do
    /// (the task is already finished): remove the message. A plain ack, not awaited by
    /// the server's reply: should it be lost, JetStream offers the message again after
    /// the ack wait, and that delivery's claim finds the task finished and acks it
    /// without starting anything.
    Done,
    /// Could not run now (coordinator unreachable, worker shutting down): redeliver,
    /// to any worker, after `delay`.
    Retry { delay: Option<Duration> },
    /// Can never run (malformed, unknown task); already recorded as a dead letter.
    Reject { reason: String },
}

impl Disposition {
    /// How the task message is settled. A failure to settle is logged by the bus:
    /// JetStream redelivers an unacknowledged message after the ack wait, and the
    /// fenced result write makes that safe.
    pub fn settlement(&self) -> Settlement {
        match self {
            Self::Done => Settlement::Ack,
            Self::Retry { delay } => Settlement::Nak(*delay),
            Self::Reject { .. } => Settlement::Term,
        }
    }
}

/// Backoff before retry `attempt + 1`: `base * 2^(attempt - 1)`, capped at `max`, with
/// equal jitter (a delay in `[d/2, d)`) so that tasks failing together do not retry
/// together.
pub fn retry_delay(attempt: u32, base: Duration, max: Duration) -> Duration {
    // backon's jitter adds up to the delay again: halving the schedule makes it equal
    // jitter of the whole one.
    ExponentialBuilder::new()
        .with_min_delay(base / 2)
        .with_max_delay(max / 2)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
        .nth(attempt.saturating_sub(1) as usize)
        .unwrap_or(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_disposition_has_its_settlement() {
        assert_eq!(Disposition::Done.settlement(), Settlement::Ack);
        let delay = Some(Duration::from_secs(3));
        assert_eq!(
            Disposition::Retry { delay }.settlement(),
            Settlement::Nak(delay)
        );
        let reason = "malformed".to_owned();
        assert_eq!(
            Disposition::Reject { reason }.settlement(),
            Settlement::Term
        );
    }

    #[test]
    fn retry_delay_doubles_is_capped_and_jitter_at_most_halves_it() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(10));
        for (attempt, full) in [(1, 1), (2, 2), (3, 4), (9, 10), (40, 10)] {
            let full = Duration::from_secs(full);
            for _ in 0..50 {
                let delay = retry_delay(attempt, base, max);
                assert!(
                    delay >= full / 2 && delay <= full,
                    "attempt {attempt}: {delay:?} is not within [{:?}, {full:?}]",
                    full / 2
                );
            }
        }
    }
}
