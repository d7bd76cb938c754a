//! What a provider's answer says about its limits: `Retry-After` (seconds or an HTTP
//! date) and the rate-limit headers of OpenAI (`x-ratelimit-*`, resets as Go
//! durations such as `6m0s`) and Anthropic (`anthropic-ratelimit-*`, resets as RFC 3339
//! times).

use std::time::{Duration, SystemTime};

use reqwest::header::{self, HeaderMap};

/// A provider's word on its limits, read from one answer's headers. Every field is
/// what the provider said, when it said it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateHints {
    /// `Retry-After`: wait this long before sending again.
    pub retry_after: Option<Duration>,
    /// Requests allowed per minute (`x-ratelimit-limit-requests`,
    /// `anthropic-ratelimit-requests-limit`).
    pub limit_requests: Option<u64>,
    /// Requests left in the current window.
    pub remaining_requests: Option<u64>,
    /// When the request window is full again.
    pub reset_requests: Option<Duration>,
    /// Tokens left in the current window.
    pub remaining_tokens: Option<u64>,
    /// When the token window is full again.
    pub reset_tokens: Option<Duration>,
}

impl RateHints {
    /// The hints among `headers`, with times relative to `now`.
    pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Self {
        // Most answers of a server without limits carry none of these: one pass over
        // the names spares a dozen lookups.
        let limits_named = headers.keys().any(|name| {
            let name = name.as_str();
            name == header::RETRY_AFTER
                || name.starts_with("x-ratelimit-")
                || name.starts_with("anthropic-ratelimit-")
        });
        if !limits_named {
            return Self::default();
        }
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let number = |names: &[&str]| {
            names
                .iter()
                .find_map(|name| text(name).and_then(|v| v.parse::<u64>().ok()))
        };
        let reset = |openai: &str, anthropic: &[&str]| {
            text(openai).and_then(go_duration).or_else(|| {
                anthropic
                    .iter()
                    .find_map(|name| text(name).and_then(|v| until(v, now)))
            })
        };
        Self {
            retry_after: text(header::RETRY_AFTER.as_str()).and_then(|v| retry_after(v, now)),
            limit_requests: number(&[
                "x-ratelimit-limit-requests",
                "anthropic-ratelimit-requests-limit",
            ]),
            remaining_requests: number(&[
                "x-ratelimit-remaining-requests",
                "anthropic-ratelimit-requests-remaining",
            ]),
            reset_requests: reset(
                "x-ratelimit-reset-requests",
                &["anthropic-ratelimit-requests-reset"],
            ),
            remaining_tokens: number(&[
                "x-ratelimit-remaining-tokens",
                "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-input-tokens-remaining",
            ]),
            reset_tokens: reset(
                "x-ratelimit-reset-tokens",
                &[
                    "anthropic-ratelimit-tokens-reset",
                    "anthropic-ratelimit-input-tokens-reset",
                ],
            ),
        }
    }

    /// Whether the provider said nothing about its limits.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// How long nothing more may be sent: the `Retry-After`, or the reset of a window
    /// that has nothing left.
    pub fn exhausted_for(&self) -> Option<Duration> {
        let requests = self
            .reset_requests
            .filter(|_| self.remaining_requests == Some(0));
        let tokens = self
            .reset_tokens
            .filter(|_| self.remaining_tokens == Some(0));
        [self.retry_after, requests, tokens]
            .into_iter()
            .flatten()
            .max()
    }
}

/// `Retry-After`: whole seconds, or an HTTP date (a date past is no wait).
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// An RFC 3339 time as the wait until it (none if past).
fn until(value: &str, now: SystemTime) -> Option<Duration> {
    let at = humantime::parse_rfc3339_weak(value).ok()?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A Go duration (`1s`, `6m0s`, `1.5s`, `20ms`, `1h2m3.5s`), as OpenAI writes resets.
fn go_duration(value: &str) -> Option<Duration> {
    let mut rest = value;
    let mut total = 0.0_f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).expect("test value"));
        }
        map
    }

    #[test]
    fn an_answer_naming_no_limit_says_nothing_and_retry_after_alone_is_read() {
        let now = SystemTime::now();
        let plain = [
            ("content-type", "application/json"),
            ("x-request-id", "req_1"),
        ];
        assert!(RateHints::from_headers(&headers(&plain), now).is_empty());
        let hints = RateHints::from_headers(&headers(&[plain[0], ("retry-after", "7")]), now);
        assert_eq!(hints.retry_after, Some(Duration::from_secs(7)));
        let anthropic = headers(&[("anthropic-ratelimit-requests-remaining", "3")]);
        assert_eq!(
            RateHints::from_headers(&anthropic, now).remaining_requests,
            Some(3)
        );
    }

    #[test]
    fn go_durations_as_openai_writes_resets() {
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(go_duration("soon"), None);
        assert_eq!(go_duration(""), None);
    }

    #[test]
    fn openai_headers_and_retry_after_in_seconds() {
        let now = SystemTime::now();
        let hints = RateHints::from_headers(
            &headers(&[
                ("retry-after", "2"),
                ("x-ratelimit-limit-requests", "600"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "6m0s"),
                ("x-ratelimit-remaining-tokens", "1000"),
                ("x-ratelimit-reset-tokens", "20ms"),
            ]),
            now,
        );
        assert_eq!(hints.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(hints.limit_requests, Some(600));
        assert_eq!(hints.remaining_requests, Some(0));
        assert_eq!(hints.reset_requests, Some(Duration::from_secs(360)));
        assert_eq!(hints.remaining_tokens, Some(1000));
        assert_eq!(
            hints.exhausted_for(),
            Some(Duration::from_secs(360)),
            "the request window is empty until its reset; the tokens are not"
        );
    }

    #[test]
    fn anthropic_headers_and_retry_after_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let in_30s = humantime::format_rfc3339(now + Duration::from_secs(30)).to_string();
        let in_5s = httpdate::fmt_http_date(now + Duration::from_secs(5));
        let hints = RateHints::from_headers(
            &headers(&[
                ("retry-after", &in_5s),
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", &in_30s),
            ]),
            now,
        );
        assert_eq!(hints.retry_after, Some(Duration::from_secs(5)));
        assert_eq!(hints.limit_requests, Some(50));
        assert_eq!(hints.reset_requests, Some(Duration::from_secs(30)));
        assert_eq!(hints.exhausted_for(), Some(Duration::from_secs(30)));
        assert!(RateHints::from_headers(&HeaderMap::new(), now).is_empty());
    }
}
