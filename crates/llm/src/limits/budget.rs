//! One model's budget as a value: when the next request and the next token may go,
//! until when the provider asked for silence, the rate learned from its 429s, and the
//! calls running. Every change is a pure function of the value and the time, so the
//! same transitions run on one process's copy ([`LocalBudget`](super::LocalBudget))
//! or on a copy shared by a fleet (a compare-and-set store).
//!
//! Pacing is a generic cell rate algorithm with reservations: a call takes the first
//! free slot (`max(now, next_request_at, next_token_at, blocked_until)`) and moves the
//! next slot on by one request's share of the minute and its tokens' share. Calls are
//! so spaced evenly, never sent in a burst, and a waiting call knows its time at once
//! instead of polling.

use serde::{Deserialize, Serialize};

use super::RateLimits;

/// The lowest rate learning goes down to, in requests per minute.
pub const MIN_LEARNED_RPM: f64 = 1.0;
/// How much a 429 lowers the learned rate.
const LOWER_BY: f64 = 0.5;
/// How much each answered call raises it.
const RAISE_BY: f64 = 1.02;
/// How long a lowering holds before another 429 may lower the rate again: the 429s
/// of calls sent together are one signal, not several.
const LOWER_HOLD_MS: u64 = 1000;

/// A model's shared state. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The earliest time the next request may be sent.
    #[serde(default)]
    pub next_request_ms: u64,
    /// The earliest time the next token may be spent.
    #[serde(default)]
    pub next_token_ms: u64,
    /// Nothing is sent before this: a `Retry-After`, or the reset of an empty window.
    #[serde(default)]
    pub blocked_until_ms: u64,
    /// Requests per minute learned from 429s: a cap under the configured rate, or the
    /// rate of a model with none configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_rpm: Option<f64>,
    /// When the learned rate was last lowered.
    #[serde(default)]
    pub lowered_at_ms: u64,
    /// Calls holding one of `max_concurrent_requests`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leases: Vec<Lease>,
}

/// A running call's hold on a concurrency slot; it lapses at `until_ms` if its holder
/// never gives it back (a worker that died mid-call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: u64,
    pub until_ms: u64,
}

/// A reservation's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserved {
    /// Send at `at_ms` (now or later), holding lease `lease` if one was taken.
    At { at_ms: u64, lease: Option<u64> },
    /// Every concurrency slot is held; ask again at `retry_ms` at the latest (a slot
    /// may free sooner).
    Full { retry_ms: u64 },
    /// The first free slot is further ahead than this call's priority may reserve;
    /// ask again at `retry_ms`, when it would be near enough. Nothing was taken.
    Later { retry_ms: u64 },
}

/// How far ahead a call of `priority` (1 highest to 5 lowest, 0 the default 3) may
/// reserve a slot. A queue of waiting calls longer than that is left to calls of
/// higher priority, which so go first when a model is oversubscribed; priority 1
/// reserves at any distance.
pub fn horizon_ms(priority: u8) -> u64 {
    match priority {
        1 => u64::MAX,
        2 => 60_000,
        0 | 3 => 20_000,
        4 => 5_000,
        _ => 2_000,
    }
}

/// How a call ended, for [`Budget::finish`].
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// Answered: `tokens` used against `estimated` reserved; the provider's word on
    /// its limits, if it said, as (wait until, requests per minute it allows).
    Answered {
        estimated: u64,
        tokens: u64,
        silent_until_ms: Option<u64>,
        limit_rpm: Option<u64>,
    },
    /// Throttled (429, overloaded): nothing more before `silent_until_ms`; `sent_rpm`
    /// is the rate the caller saw sent, a start for learning when nothing else is
    /// known.
    Throttled {
        silent_until_ms: u64,
        limit_rpm: Option<u64>,
        sent_rpm: f64,
    },
    /// Failed otherwise; only the lease is given back.
    Failed,
}

impl Budget {
    /// Whether this state asks nothing of a model with no configured limits: not
    /// learned, not silenced, no lease. Such a model's calls need not consult it.
    pub fn is_free(&self, now_ms: u64) -> bool {
        self.learned_rpm.is_none() && self.blocked_until_ms <= now_ms && self.leases.is_empty()
    }

    /// The requests per minute in force: the configured rate, capped by a learned one.
    pub fn rpm(&self, limits: &RateLimits) -> Option<f64> {
        let configured = limits.requests_per_minute.map(f64::from);
        match (configured, self.learned_rpm) {
            (Some(c), Some(l)) => Some(c.min(l)),
            (c, l) => c.or(l),
        }
    }

    /// Reserves the next slot for a call of about `tokens` tokens, taking lease
    /// `lease_id` for `lease_ms` when concurrency is limited.
    pub fn reserve(
        &mut self,
        limits: &RateLimits,
        now_ms: u64,
        tokens: u64,
        priority: u8,
        lease_id: u64,
        lease_ms: u64,
    ) -> Reserved {
        self.leases.retain(|l| l.until_ms > now_ms);
        if let Some(max) = limits.max_concurrent_requests
            && self.leases.len() >= max as usize
        {
            let retry_ms = self
                .leases
                .iter()
                .map(|l| l.until_ms)
                .min()
                .unwrap_or(now_ms);
            return Reserved::Full { retry_ms };
        }
        let mut at_ms = now_ms.max(self.next_request_ms).max(self.blocked_until_ms);
        if limits.tokens_per_minute.is_some() {
            at_ms = at_ms.max(self.next_token_ms);
        }
        let horizon = horizon_ms(priority);
        if at_ms.saturating_sub(now_ms) > horizon {
            return Reserved::Later {
                retry_ms: at_ms.saturating_sub(horizon),
            };
        }
        if let Some(rpm) = self.rpm(limits) {
            self.next_request_ms = at_ms + ms_per(rpm, 1);
        }
        if let Some(tpm) = limits.tokens_per_minute {
            #[allow(clippy::cast_precision_loss)]
            let tpm = tpm as f64;
            self.next_token_ms = at_ms + ms_per(tpm, tokens);
        }
        let lease = limits.max_concurrent_requests.map(|_| {
            self.leases.push(Lease {
                id: lease_id,
                until_ms: at_ms + lease_ms,
            });
            lease_id
        });
        Reserved::At { at_ms, lease }
    }

    /// Records how a call ended: gives its lease back, corrects its tokens, and learns
    /// from a throttle or the provider's headers.
    pub fn finish(&mut self, limits: &RateLimits, now_ms: u64, lease: Option<u64>, ended: &Ended) {
        if let Some(id) = lease {
            self.leases.retain(|l| l.id != id);
        }
        match *ended {
            Ended::Answered {
                estimated,
                tokens,
                silent_until_ms,
                limit_rpm,
            } => {
                if let Some(tpm) = limits.tokens_per_minute {
                    #[allow(clippy::cast_precision_loss)]
                    let tpm = tpm as f64;
                    if tokens >= estimated {
                        self.next_token_ms += ms_per(tpm, tokens - estimated);
                    } else {
                        self.next_token_ms = self
                            .next_token_ms
                            .saturating_sub(ms_per(tpm, estimated - tokens));
                    }
                }
                if let Some(until) = silent_until_ms {
                    self.blocked_until_ms = self.blocked_until_ms.max(until);
                }
                if let Some(learned) = self.learned_rpm {
                    let raised = learned * RAISE_BY;
                    let configured = limits.requests_per_minute.map(f64::from);
                    #[allow(clippy::cast_precision_loss)]
                    let told = limit_rpm.map(|l| l as f64);
                    self.learned_rpm = match (configured.or(told), configured) {
                        // Back at the configured rate: nothing learned holds.
                        (Some(_), Some(c)) if raised >= c => None,
                        (Some(ceiling), _) => Some(raised.min(ceiling)),
                        (None, _) => Some(raised),
                    };
                }
            }
            Ended::Throttled {
                silent_until_ms,
                limit_rpm,
                sent_rpm,
            } => {
                self.blocked_until_ms = self.blocked_until_ms.max(silent_until_ms);
                if now_ms >= self.lowered_at_ms + LOWER_HOLD_MS {
                    #[allow(clippy::cast_precision_loss)]
                    let from = self
                        .rpm(limits)
                        .or(limit_rpm.map(|l| l as f64))
                        .unwrap_or(sent_rpm);
                    self.learned_rpm = Some((from * LOWER_BY).max(MIN_LEARNED_RPM));
                    self.lowered_at_ms = now_ms;
                }
            }
            Ended::Failed => {}
        }
    }
}

/// Milliseconds that `units` take at `per_minute` units a minute, rounded up.
fn ms_per(per_minute: f64, units: u64) -> u64 {
    if per_minute <= 0.0 {
        return 0;
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let ms = (units as f64 * 60_000.0 / per_minute).ceil() as u64;
    ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpm(n: u32) -> RateLimits {
        RateLimits {
            requests_per_minute: Some(n),
            ..RateLimits::default()
        }
    }

    fn at(r: Reserved) -> u64 {
        match r {
            Reserved::At { at_ms, .. } => at_ms,
            Reserved::Full { .. } | Reserved::Later { .. } => panic!("not reserved: {r:?}"),
        }
    }

    #[test]
    fn calls_asked_together_are_spaced_by_the_rate_and_an_idle_model_sends_at_once() {
        let limits = rpm(600);
        let mut b = Budget::default();
        let slots: Vec<u64> = (0..5)
            .map(|i| at(b.reserve(&limits, 1000, 10, 3, i, 0)))
            .collect();
        assert_eq!(slots, [1000, 1100, 1200, 1300, 1400]);
        assert_eq!(at(b.reserve(&limits, 9000, 10, 3, 9, 0)), 9000);
    }

    #[test]
    fn tokens_space_calls_by_their_share_and_are_corrected_by_the_usage() {
        let limits = RateLimits {
            tokens_per_minute: Some(60_000),
            ..RateLimits::default()
        };
        let mut b = Budget::default();
        assert_eq!(at(b.reserve(&limits, 0, 2000, 3, 1, 0)), 0);
        // 2,000 tokens at 1,000 a second: the next call waits 2 s...
        assert_eq!(b.next_token_ms, 2000);
        // ... unless the call used fewer.
        b.finish(
            &limits,
            10,
            None,
            &Ended::Answered {
                estimated: 2000,
                tokens: 500,
                silent_until_ms: None,
                limit_rpm: None,
            },
        );
        assert_eq!(at(b.reserve(&limits, 100, 100, 3, 2, 0)), 500);
    }

    #[test]
    fn concurrency_is_held_by_leases_that_are_given_back_or_lapse() {
        let limits = RateLimits {
            max_concurrent_requests: Some(2),
            ..RateLimits::default()
        };
        let mut b = Budget::default();
        assert!(matches!(
            b.reserve(&limits, 0, 1, 3, 1, 5000),
            Reserved::At { lease: Some(1), .. }
        ));
        assert!(matches!(
            b.reserve(&limits, 0, 1, 3, 2, 8000),
            Reserved::At { .. }
        ));
        assert_eq!(
            b.reserve(&limits, 10, 1, 3, 3, 5000),
            Reserved::Full { retry_ms: 5000 }
        );
        b.finish(&limits, 20, Some(1), &Ended::Failed);
        assert!(matches!(
            b.reserve(&limits, 20, 1, 3, 3, 5000),
            Reserved::At { .. }
        ));
        assert!(matches!(
            b.reserve(&limits, 5019, 1, 3, 4, 5000),
            Reserved::Full { retry_ms: 5020 }
        ));
        // Leases lapse if never given back: lease 3 at 5,020, lease 2 at 8,000.
        assert!(matches!(
            b.reserve(&limits, 5021, 1, 3, 4, 5000),
            Reserved::At { .. }
        ));
        assert!(matches!(
            b.reserve(&limits, 5022, 1, 3, 5, 5000),
            Reserved::Full { retry_ms: 8000 }
        ));
        assert!(matches!(
            b.reserve(&limits, 8001, 1, 3, 5, 5000),
            Reserved::At { .. }
        ));
    }

    #[test]
    fn a_throttle_silences_the_model_and_halves_the_rate_once_per_burst_of_429s() {
        let limits = RateLimits::default();
        let mut b = Budget::default();
        assert!(b.is_free(0));
        let throttled = Ended::Throttled {
            silent_until_ms: 2000,
            limit_rpm: None,
            sent_rpm: 1200.0,
        };
        b.finish(&limits, 1000, None, &throttled);
        b.finish(&limits, 1001, None, &throttled);
        assert_eq!(
            b.learned_rpm,
            Some(600.0),
            "lowered once for calls sent together"
        );
        assert!(!b.is_free(1500));
        assert_eq!(
            at(b.reserve(&limits, 1500, 1, 3, 1, 0)),
            2000,
            "nothing before Retry-After"
        );
        assert_eq!(
            at(b.reserve(&limits, 1500, 1, 3, 2, 0)),
            2100,
            "then at the learned rate"
        );
        b.finish(&limits, 2500, None, &throttled);
        assert_eq!(b.learned_rpm, Some(300.0));
    }

    #[test]
    fn answered_calls_raise_the_learned_rate_back_to_the_configured_one() {
        let limits = rpm(100);
        let mut b = Budget {
            learned_rpm: Some(90.0),
            ..Budget::default()
        };
        let answered = Ended::Answered {
            estimated: 1,
            tokens: 1,
            silent_until_ms: None,
            limit_rpm: None,
        };
        for _ in 0..3 {
            b.finish(&limits, 0, None, &answered);
        }
        assert!(
            b.learned_rpm.is_some_and(|l| l > 95.0 && l < 100.0),
            "{b:?}"
        );
        for _ in 0..3 {
            b.finish(&limits, 0, None, &answered);
        }
        assert_eq!(b.learned_rpm, None, "back to the configured rate");
    }

    #[test]
    fn a_long_queue_is_left_to_higher_priorities() {
        let limits = rpm(60); // a call a second
        let mut b = Budget::default();
        for i in 0..10 {
            b.reserve(&limits, 0, 1, 1, i, 0);
        }
        // The next slot is 10 s ahead: too far for priority 5 (2 s) and 4 (5 s), near
        // enough for the default 3 (20 s) and for 1.
        assert_eq!(
            b.reserve(&limits, 0, 1, 5, 20, 0),
            Reserved::Later { retry_ms: 8_000 }
        );
        assert!(matches!(
            b.reserve(&limits, 0, 1, 4, 21, 0),
            Reserved::Later { .. }
        ));
        assert_eq!(at(b.reserve(&limits, 0, 1, 3, 22, 0)), 10_000);
        assert_eq!(at(b.reserve(&limits, 0, 1, 1, 23, 0)), 11_000);
        // Near its time, the low-priority call gets the slot after them.
        assert_eq!(at(b.reserve(&limits, 10_500, 1, 5, 24, 0)), 12_000);
    }

    #[test]
    fn an_empty_window_in_an_answer_silences_until_its_reset() {
        let limits = RateLimits::default();
        let mut b = Budget::default();
        b.finish(
            &limits,
            0,
            None,
            &Ended::Answered {
                estimated: 1,
                tokens: 1,
                silent_until_ms: Some(3000),
                limit_rpm: Some(60),
            },
        );
        assert_eq!(at(b.reserve(&limits, 10, 1, 3, 1, 0)), 3000);
    }
}
