//! How a task message is settled. Every path through the handler ends in one
//! [`Disposition`], and this file alone maps it onto the bus's [`Settlement`].

use std::time::Duration;

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

/// Backoff before retry `attempt + 1`: `base * 2^(attempt - 1)`, capped at `max`, scaled by
/// `jitter` in `[0.5, 1.0]` so that tasks failing together do not retry together.
pub fn retry_delay(attempt: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exp = base.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
    exp.min(max).mul_f64(jitter.clamp(0.5, 1.0))
}

/// A jitter factor in `[0.5, 1.0]` from the clock's low bits (no RNG needed for this).
pub fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    0.5 + f64::from(nanos % 1000) / 2000.0
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
    fn retry_delay_doubles_and_is_capped() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(retry_delay(1, base, max, 1.0), Duration::from_secs(1));
        assert_eq!(retry_delay(2, base, max, 1.0), Duration::from_secs(2));
        assert_eq!(retry_delay(3, base, max, 1.0), Duration::from_secs(4));
        assert_eq!(retry_delay(9, base, max, 1.0), Duration::from_secs(10));
        assert_eq!(retry_delay(40, base, max, 1.0), Duration::from_secs(10));
    }

    #[test]
    fn jitter_only_shortens_and_at_most_halves() {
        let (base, max) = (Duration::from_secs(4), Duration::from_secs(60));
        assert_eq!(retry_delay(1, base, max, 0.5), Duration::from_secs(2));
        assert_eq!(retry_delay(1, base, max, 7.0), Duration::from_secs(4));
        for _ in 0..100 {
            let j = jitter();
            assert!((0.5..=1.0).contains(&j), "{j}");
        }
    }
}
