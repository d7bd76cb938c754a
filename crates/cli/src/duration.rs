//! Durations and deadlines as people type them.
//!
//! A duration is a whole number of seconds (`30`) or whole numbers with units, optionally
//! compound, as [`humantime`] reads them: `250ms`, `30s`, `5m`, `1h30m`, `2d`, `1h 30m`.
//! A deadline is either such a duration from now or an RFC 3339 time
//! (`2026-01-02T15:04:05Z`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::errors::ArgError;

/// A duration read from a flag, an env variable or the config file, and printed back in
/// the same notation by `--print-config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = ArgError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s).map(Self)
    }
}

impl From<HumanDuration> for Duration {
    fn from(d: HumanDuration) -> Self {
        d.0
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl serde::Serialize for HumanDuration {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for HumanDuration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Accepts `"30s"` as well as a bare `30` (seconds), as the flags do.
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = HumanDuration;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"30s\", \"5m\" or a number of seconds")
            }

            fn visit_u64<E: serde::de::Error>(self, secs: u64) -> Result<Self::Value, E> {
                Ok(HumanDuration(Duration::from_secs(secs)))
            }

            fn visit_i64<E: serde::de::Error>(self, secs: i64) -> Result<Self::Value, E> {
                u64::try_from(secs)
                    .map(|s| HumanDuration(Duration::from_secs(s)))
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
                s.parse().map_err(E::custom)
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// Parses `30` (seconds) or what [`humantime::parse_duration`] reads in whole numbers:
/// `30s`, `5m`, `1h30m`, `250ms`, `2d`, `1h 30m`, `2 days`.
pub fn parse_duration(input: &str) -> Result<Duration, ArgError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(ArgError::EmptyDuration);
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    // humantime reads `1.5s`; taskwire's durations have always been whole numbers.
    if s.contains('.') {
        return Err(ArgError::FractionalDuration {
            input: input.to_owned(),
        });
    }
    humantime::parse_duration(s).map_err(|source| ArgError::Duration {
        input: input.to_owned(),
        source,
    })
}

/// The shortest notation [`parse_duration`] reads back: `30s`, `5m`, `1h30m`, `1500ms`.
/// Hours are the largest unit (a week is `168h`), so the notation stays the one people
/// typed; [`humantime::format_duration`] would write `7days` and `1s 500ms`.
pub fn format_duration(d: Duration) -> String {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{}ns", d.as_nanos());
    }
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    if secs == 0 {
        return "0s".to_owned();
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n != 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

/// When a task must be finished by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// This long after submission.
    After(TimeDelta),
    /// At this time.
    At(DateTime<Utc>),
}

impl FromStr for Deadline {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(at) = DateTime::parse_from_rfc3339(s.trim()) {
            return Ok(Self::At(at.with_timezone(&Utc)));
        }
        let d = parse_duration(s).map_err(|e| {
            format!("{e}; a deadline is a duration from now or an RFC 3339 time such as 2026-01-02T15:04:05Z")
        })?;
        if d.is_zero() {
            return Err(format!("invalid deadline {s:?}: it must be in the future"));
        }
        TimeDelta::from_std(d)
            .map(Self::After)
            .map_err(|_| format!("invalid deadline {s:?}: too far in the future"))
    }
}

impl Deadline {
    /// The absolute time, for a task submitted at `now`.
    pub fn resolve(self, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
        match self {
            Self::At(at) => Ok(at),
            Self::After(delta) => now
                .checked_add_signed(delta)
                .ok_or_else(|| "deadline is too far in the future".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_are_seconds() {
        assert_eq!(parse_duration("30").ok(), Some(Duration::from_secs(30)));
    }

    #[test]
    fn units_and_compounds_parse() {
        assert_eq!(parse_duration("30s").ok(), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m").ok(), Some(Duration::from_secs(300)));
        assert_eq!(
            parse_duration("1h30m").ok(),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("2d").ok(),
            Some(Duration::from_secs(172_800))
        );
        assert_eq!(
            parse_duration(" 1m30s ").ok(),
            Some(Duration::from_secs(90))
        );
    }

    #[test]
    fn bad_durations_are_rejected_with_the_input_named() {
        for bad in ["", "s", "5x", "1.5s", "-3s", "5m3", "99999999999999999999s"] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.to_string().contains("duration"), "{bad}: {err}");
        }
        assert!(
            parse_duration("5x")
                .expect_err("unknown unit")
                .to_string()
                .contains("\"x\"")
        );
    }

    #[test]
    fn humantime_notations_are_read_too() {
        assert_eq!(
            parse_duration("1h 30m").ok(),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            parse_duration("2 days").ok(),
            Some(Duration::from_secs(172_800))
        );
        assert_eq!(
            parse_duration("1500us").ok(),
            Some(Duration::from_micros(1500))
        );
        let d = Duration::from_micros(1500);
        assert_eq!(parse_duration(&format_duration(d)).ok(), Some(d));
        let err = parse_duration("1.5s").expect_err("fractions");
        let err = err.to_string();
        assert!(err.contains("\"1.5s\"") && err.contains("1500ms"), "{err}");
    }

    #[test]
    fn formatted_durations_parse_back() {
        for secs in [0, 1, 30, 60, 90, 300, 3600, 5400, 86_400, 90_061] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_duration(&format_duration(d)).ok(), Some(d), "{secs}s");
        }
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(
            parse_duration("1500ms").ok(),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn relative_deadline_counts_from_submission() {
        let now = DateTime::parse_from_rfc3339("2026-01-02T15:04:05Z")
            .expect("valid time")
            .with_timezone(&Utc);
        let in_30s: Deadline = "30s".parse().expect("duration deadline");
        assert_eq!(in_30s.resolve(now), Ok(now + TimeDelta::seconds(30)));
        let in_5m: Deadline = "5m".parse().expect("duration deadline");
        assert_eq!(in_5m.resolve(now), Ok(now + TimeDelta::minutes(5)));
    }

    #[test]
    fn rfc3339_deadline_is_absolute_and_normalised_to_utc() {
        let d: Deadline = "2026-01-02T17:04:05+02:00"
            .parse()
            .expect("rfc3339 deadline");
        let expected = DateTime::parse_from_rfc3339("2026-01-02T15:04:05Z")
            .expect("valid time")
            .with_timezone(&Utc);
        assert_eq!(d, Deadline::At(expected));
        assert_eq!(d.resolve(Utc::now()), Ok(expected));
    }

    #[test]
    fn zero_or_garbage_deadline_is_rejected() {
        assert!("0s".parse::<Deadline>().is_err());
        let err = "tomorrow".parse::<Deadline>().expect_err("not a deadline");
        assert!(err.contains("RFC 3339"), "{err}");
    }

    #[test]
    fn config_file_durations_accept_strings_and_seconds() {
        #[derive(serde::Deserialize)]
        struct T {
            a: HumanDuration,
            b: HumanDuration,
        }
        let t: T = toml::from_str("a = \"5m\"\nb = 45").expect("valid toml");
        assert_eq!(t.a.0, Duration::from_secs(300));
        assert_eq!(t.b.0, Duration::from_secs(45));
    }
}
