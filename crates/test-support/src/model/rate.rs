//! A model server's own rate limit, as providers enforce theirs: at most `per_second`
//! requests accepted in any one-second window; above it, `429` with `Retry-After: 1`
//! and OpenAI's `x-ratelimit-*` headers. Every arrival is logged, so a test measures
//! what the server saw: requests per useful call, the peak rate, and requests that
//! came while a `Retry-After` the server had given was still running.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// One request as the rate-limited server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Since the server started.
    pub at: Duration,
    /// Answered (true) or throttled with a 429 (false).
    pub accepted: bool,
}

/// What a run looked like from the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateReport {
    pub sent: usize,
    pub accepted: usize,
    pub throttled: usize,
    /// Most requests that arrived in any one-second window.
    pub peak_per_second: usize,
    /// Requests that arrived while the `Retry-After` (one second) of a 429 answered at
    /// least [`HEARD_AFTER`] earlier ran, from anyone: a fleet that shares its 429s
    /// sends none. (Requests already on their way as the 429 was answered, a burst's,
    /// are not early.)
    pub early: usize,
    /// From the first arrival to the last.
    pub span: Duration,
}

#[derive(Debug)]
pub(super) struct Limiter {
    per_second: usize,
    started: Instant,
    accepted: VecDeque<Instant>,
    log: Vec<Arrival>,
}

/// The wait a 429 names.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long after a 429 a request counts as sent by a fleet that could have heard it.
pub const HEARD_AFTER: Duration = Duration::from_millis(50);

impl Limiter {
    pub(super) fn new(per_second: usize) -> Self {
        Self {
            per_second,
            started: Instant::now(),
            accepted: VecDeque::new(),
            log: Vec::new(),
        }
    }

    /// Logs an arrival now; the 429 to answer it with when it is over the limit.
    pub(super) fn admit(&mut self) -> Option<Response> {
        let now = Instant::now();
        while self
            .accepted
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            self.accepted.pop_front();
        }
        let accepted = self.accepted.len() < self.per_second;
        self.log.push(Arrival {
            at: now.duration_since(self.started),
            accepted,
        });
        if accepted {
            self.accepted.push_back(now);
            return None;
        }
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            r#"{"error":{"message":"rate limit reached","type":"rate_limit_error"}}"#,
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert("retry-after", HeaderValue::from_static("1"));
        headers.insert(
            "x-ratelimit-limit-requests",
            HeaderValue::from(self.per_second * 60),
        );
        headers.insert(
            "x-ratelimit-remaining-requests",
            HeaderValue::from_static("0"),
        );
        headers.insert("x-ratelimit-reset-requests", HeaderValue::from_static("1s"));
        Some(response)
    }

    pub(super) fn arrivals(&self) -> Vec<Arrival> {
        self.log.clone()
    }
}

impl RateReport {
    /// The report of `arrivals` (in arrival order).
    pub fn of(arrivals: &[Arrival]) -> Self {
        let accepted = arrivals.iter().filter(|a| a.accepted).count();
        let mut peak = 0;
        let mut from = 0;
        for (i, a) in arrivals.iter().enumerate() {
            while a.at - arrivals[from].at >= Duration::from_secs(1) {
                from += 1;
            }
            peak = peak.max(i + 1 - from);
        }
        let early = arrivals
            .iter()
            .enumerate()
            .filter(|(i, a)| {
                arrivals[..*i]
                    .iter()
                    .any(|t| !t.accepted && a.at >= t.at + HEARD_AFTER && a.at < t.at + RETRY_AFTER)
            })
            .count();
        Self {
            sent: arrivals.len(),
            accepted,
            throttled: arrivals.len() - accepted,
            peak_per_second: peak,
            early,
            span: match (arrivals.first(), arrivals.last()) {
                (Some(first), Some(last)) => last.at - first.at,
                _ => Duration::ZERO,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, accepted: bool) -> Arrival {
        Arrival {
            at: Duration::from_millis(ms),
            accepted,
        }
    }

    #[test]
    fn the_report_counts_the_peak_and_the_requests_inside_a_retry_after() {
        let arrivals = [
            at(0, true),
            at(100, true),
            at(200, false),
            at(230, false),
            at(700, true),
            at(1250, true),
            at(2500, true),
        ];
        let r = RateReport::of(&arrivals);
        assert_eq!((r.sent, r.accepted, r.throttled), (7, 5, 2));
        assert_eq!(r.peak_per_second, 5);
        assert_eq!(
            r.early, 1,
            "700 ms came 500 ms after a 429; 230 ms was on its way; 1,250 ms was after"
        );
        assert_eq!(r.span, Duration::from_millis(2500));
    }
}
