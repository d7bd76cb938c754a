//! Schedule timing: when a cron or interval schedule ticks, in its time zone, and
//! which due ticks a scheduler pass fires under the catch-up policy. Pure: the caller
//! passes the clock.
//!
//! - A cron schedule is evaluated on the wall clock of its time zone, with croner's
//!   daylight saving rules: in a spring-forward gap a fixed-time job (fixed second,
//!   minute and hour) fires once at the first instant after the gap and a wildcard or
//!   step job skips the ticks inside it; in a fall-back overlap a fixed-time job fires
//!   once, on the first pass, and a wildcard job fires on both passes.
//! - An interval schedule ticks at the whole multiples of its interval since the Unix
//!   epoch, whatever its time zone: `every 15m` ticks at :00, :15, :30 and :45 UTC.
//! - Ticks are whole seconds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds};

/// The most missed ticks [`due`] counts in one pass; [`Due::missed`] stops there.
pub const MISSED_COUNT_CAP: u64 = 100_000;

/// A field-named reason why a schedule's timing is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingError {
    /// The refused field: `cron`, `every`, `time_zone`, `catch_up` or `overlap`.
    pub field: &'static str,
    /// Why, in lowercase words.
    pub reason: String,
}

impl TimingError {
    fn new(field: &'static str, reason: impl Into<String>) -> Self {
        TimingError {
            field,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for TimingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for TimingError {}

/// How often a schedule ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cadence {
    /// A cron expression: 5 fields (minute first, ticking at second 0), 6 fields
    /// (second first), 7 (a year last) or an alias such as `@hourly`.
    Cron {
        /// The expression as given, without surrounding whitespace.
        expr: String,
        /// The parsed expression (boxed: it is hundreds of bytes).
        cron: Box<Cron>,
    },
    /// A fixed interval of whole seconds, at least one.
    Every(Duration),
}

/// A schedule's cadence in its time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    cadence: Cadence,
    tz: Tz,
}

impl Timing {
    /// Parses exactly one of `cron` and `every` (a humantime interval such as `15m`,
    /// `1h30m` or `1s`) and an IANA time zone name (empty means UTC). A blank `cron` or
    /// `every` counts as absent.
    pub fn parse(
        cron: Option<&str>,
        every: Option<&str>,
        time_zone: &str,
    ) -> Result<Timing, TimingError> {
        let cron = given(cron);
        let every = given(every);
        exactly_one(cron.is_some(), every.is_some())?;
        let every = every
            .map(|text| {
                humantime::parse_duration(text).map_err(|error| {
                    TimingError::new("every", format!("invalid interval `{text}`: {error}"))
                })
            })
            .transpose()?;
        Timing::from_parts(cron, every, time_zone)
    }

    /// Like [`Timing::parse`], with the interval already a [`Duration`] (the gRPC path).
    pub fn from_parts(
        cron: Option<&str>,
        every: Option<Duration>,
        time_zone: &str,
    ) -> Result<Timing, TimingError> {
        let cron = given(cron);
        exactly_one(cron.is_some(), every.is_some())?;
        let cadence = match (cron, every) {
            (Some(expr), _) => Cadence::Cron {
                expr: expr.to_owned(),
                cron: Box::new(parse_cron(expr)?),
            },
            (None, Some(interval)) => Cadence::Every(check_interval(interval)?),
            (None, None) => return Err(neither()),
        };
        Ok(Timing {
            cadence,
            tz: parse_time_zone(time_zone)?,
        })
    }

    /// The time zone cron ticks are evaluated in.
    pub fn time_zone(&self) -> Tz {
        self.tz
    }

    /// How often the schedule ticks.
    pub fn cadence(&self) -> &Cadence {
        &self.cadence
    }

    /// The first tick strictly after `t`; `None` only when the cron never matches again
    /// (or the tick is past what the calendar can hold).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.cadence {
            Cadence::Every(interval) => {
                let step = interval_secs(*interval);
                let index = t.timestamp().div_euclid(step).checked_add(1)?;
                DateTime::from_timestamp(index.checked_mul(step)?, 0)
            }
            Cadence::Cron { cron, .. } => {
                // Ticks are whole seconds, so the first one after `t` is the first one
                // after its second.
                let local = t.trunc_subsecs(0).with_timezone(&self.tz);
                let next = cron.find_next_occurrence(&local, false).ok()?;
                Some(next.with_timezone(&Utc))
            }
        }
    }

    /// The latest tick at or before `t`; `None` when there is none.
    pub fn latest_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.cadence {
            Cadence::Every(interval) => {
                let step = interval_secs(*interval);
                let index = t.timestamp().div_euclid(step);
                DateTime::from_timestamp(index.checked_mul(step)?, 0)
            }
            Cadence::Cron { cron, .. } => {
                let local = t.trunc_subsecs(0).with_timezone(&self.tz);
                let latest = cron.find_previous_occurrence(&local, true).ok()?;
                Some(latest.with_timezone(&Utc))
            }
        }
    }

    /// The next `n` ticks strictly after `t`, oldest first (fewer when the cron stops
    /// matching).
    pub fn upcoming(&self, t: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut ticks = Vec::with_capacity(n.min(1024));
        let mut cursor = t;
        while ticks.len() < n {
            let Some(tick) = self.next_after(cursor) else {
                break;
            };
            ticks.push(tick);
            cursor = tick;
        }
        ticks
    }

    /// A short human description: croner's description of the cron (its final period
    /// dropped) with the time zone in parentheses, such as `At 02:30 (Europe/Berlin)`, or
    /// `every 15m` for an interval.
    pub fn describe(&self) -> String {
        match &self.cadence {
            Cadence::Cron { cron, .. } => {
                let described = cron.describe();
                format!("{} ({})", described.trim_end_matches('.'), self.tz.name())
            }
            Cadence::Every(interval) => format!("every {}", humantime::format_duration(*interval)),
        }
    }

    /// The first tick at or after `t`.
    fn first_at_or_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.latest_at_or_before(t) {
            Some(latest) if latest == t => Some(latest),
            _ => self.next_after(t),
        }
    }

    /// The latest tick strictly before `t`.
    fn latest_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.latest_at_or_before(t) {
            // Ticks are whole seconds: the one before a tick is at or before the
            // second before it.
            Some(latest) if latest == t => {
                self.latest_at_or_before(latest.checked_sub_signed(TimeDelta::seconds(1))?)
            }
            other => other,
        }
    }

    /// How many ticks lie in `[from, until)`, counting `from` itself as one (it is the
    /// schedule's stored fire time), at most [`MISSED_COUNT_CAP`].
    fn count_from(&self, from: DateTime<Utc>, until: DateTime<Utc>) -> u64 {
        if from >= until {
            return 0;
        }
        match &self.cadence {
            Cadence::Every(interval) => {
                let step = i128::from(interval_secs(*interval));
                // Multiples strictly after `from`...
                let first = i128::from(from.timestamp()).div_euclid(step) + 1;
                // ...and strictly before `until`.
                let until_secs = i128::from(until.timestamp());
                let last_second = if until.timestamp_subsec_nanos() == 0 {
                    until_secs - 1
                } else {
                    until_secs
                };
                let last = last_second.div_euclid(step);
                let after = u64::try_from((last - first + 1).max(0)).unwrap_or(u64::MAX);
                after.saturating_add(1).min(MISSED_COUNT_CAP)
            }
            Cadence::Cron { .. } => {
                let mut count = 1;
                let mut cursor = from;
                while count < MISSED_COUNT_CAP {
                    match self.next_after(cursor) {
                        Some(tick) if tick < until => {
                            count += 1;
                            cursor = tick;
                        }
                        _ => break,
                    }
                }
                count
            }
        }
    }
}

/// What a schedule does with ticks missed while no coordinator ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// Fire only the ticks still on time; drop the missed ones.
    #[default]
    Skip,
    /// Fire the latest missed tick once (for the whole outage), and the on-time ticks.
    One,
    /// Fire every due tick within the catch-up window.
    All,
}

impl CatchUp {
    /// The policy's name: `skip`, `one` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Skip => "skip",
            CatchUp::One => "one",
            CatchUp::All => "all",
        }
    }
}

impl FromStr for CatchUp {
    type Err = TimingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "skip" => Ok(CatchUp::Skip),
            "one" => Ok(CatchUp::One),
            "all" => Ok(CatchUp::All),
            other => Err(TimingError::new(
                "catch_up",
                format!("unknown catch-up policy `{other}` (one of: skip, one, all)"),
            )),
        }
    }
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ticks one scheduler pass fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Ticks to fire now, oldest first (at most `max_fires`).
    pub fire: Vec<DateTime<Utc>>,
    /// Due ticks the catch-up policy dropped (counted, saturating, counting at most
    /// [`MISSED_COUNT_CAP`]).
    pub missed: u64,
    /// The schedule's next fire time after this pass: the first tick after the last tick
    /// this pass covered (so when `fire` was cut at `max_fires`, the tick after the last
    /// fired one, which is already due, and the next pass continues from there).
    pub next: Option<DateTime<Utc>>,
}

/// The ticks due at `now` for a schedule whose next fire time is `next_fire_at` (itself
/// a tick, and counted as one even if the timing changed since).
///
/// A tick is on time when `now - tick <= grace`; a later one is missed:
/// - [`CatchUp::Skip`]: fire the on-time ticks, drop the missed ones;
/// - [`CatchUp::One`]: fire the latest missed tick (once, for the whole outage) and
///   the on-time ticks; drop the other missed ones;
/// - [`CatchUp::All`]: fire every due tick within `window`
///   (`now - tick <= max(window, grace)`), drop older ones.
///
/// If `next_fire_at > now`, nothing is due. A long outage costs one search to jump over
/// it and at most [`MISSED_COUNT_CAP`] steps to count what it dropped; the ticks fired
/// are at most `max_fires` (with `max_fires == 0` nothing fires and `next` stays on the
/// first tick that would have).
pub fn due(
    timing: &Timing,
    next_fire_at: DateTime<Utc>,
    now: DateTime<Utc>,
    catch_up: CatchUp,
    window: Duration,
    grace: Duration,
    max_fires: usize,
) -> Due {
    if next_fire_at > now {
        return Due {
            fire: Vec::new(),
            missed: 0,
            next: Some(next_fire_at),
        };
    }
    let keep = match catch_up {
        CatchUp::All => window.max(grace),
        CatchUp::Skip | CatchUp::One => grace,
    };
    let cutoff = saturating_before(now, keep);
    // The first tick kept (it may lie after `now`, when none is on time) and the end of
    // the dropped range `[next_fire_at, dropped_until)`.
    let (mut first, mut dropped_until) = if next_fire_at >= cutoff {
        (Some(next_fire_at), next_fire_at)
    } else {
        (timing.first_at_or_after(cutoff), cutoff)
    };
    if catch_up == CatchUp::One && next_fire_at < cutoff {
        let latest_missed = timing
            .latest_before(cutoff)
            .filter(|tick| *tick >= next_fire_at)
            .unwrap_or(next_fire_at);
        first = Some(latest_missed);
        dropped_until = latest_missed;
    }
    let missed = timing.count_from(next_fire_at, dropped_until);

    let mut fire = Vec::new();
    let mut cursor = first;
    while let Some(tick) = cursor {
        if tick > now || fire.len() >= max_fires {
            break;
        }
        fire.push(tick);
        cursor = timing.next_after(tick);
    }
    Due {
        fire,
        missed,
        next: cursor,
    }
}

/// What a schedule does at a tick while its previous run is still going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Start another run alongside.
    Allow,
    /// Drop the tick.
    #[default]
    Skip,
    /// Cancel the running one, then start.
    CancelPrevious,
    /// Keep one tick waiting until the running one ends; drop any further ones.
    QueueOne,
}

impl Overlap {
    /// The policy's name: `allow`, `skip`, `cancel_previous` or `queue_one`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
            Overlap::CancelPrevious => "cancel_previous",
            Overlap::QueueOne => "queue_one",
        }
    }
}

impl FromStr for Overlap {
    type Err = TimingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "allow" => Ok(Overlap::Allow),
            "skip" => Ok(Overlap::Skip),
            "cancel_previous" => Ok(Overlap::CancelPrevious),
            "queue_one" => Ok(Overlap::QueueOne),
            other => Err(TimingError::new(
                "overlap",
                format!(
                    "unknown overlap policy `{other}` (one of: allow, skip, cancel_previous, queue_one)"
                ),
            )),
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision at one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtTick {
    /// Start a run.
    Start,
    /// Drop the tick.
    Skip,
    /// Cancel the running one, then start a run.
    CancelPreviousThenStart,
    /// Keep the tick waiting until the running one ends.
    Queue,
}

/// Decides a tick: `running` means the previous run is unfinished; `queued` means a
/// tick already waits (for [`Overlap::QueueOne`]). With nothing running every policy
/// starts.
pub fn at_tick(policy: Overlap, running: bool, queued: bool) -> AtTick {
    match (policy, running, queued) {
        (Overlap::Allow, _, _) | (_, false, _) => AtTick::Start,
        (Overlap::Skip, true, _) => AtTick::Skip,
        (Overlap::CancelPrevious, true, _) => AtTick::CancelPreviousThenStart,
        (Overlap::QueueOne, true, false) => AtTick::Queue,
        (Overlap::QueueOne, true, true) => AtTick::Skip,
    }
}

/// `text` without surrounding whitespace, or `None` when blank.
fn given(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|text| !text.is_empty())
}

/// Refuses both or neither of a cron expression and an interval.
fn exactly_one(cron: bool, every: bool) -> Result<(), TimingError> {
    match (cron, every) {
        (true, true) => Err(TimingError::new(
            "cron",
            "give either a cron expression or an interval (`every`), not both",
        )),
        (false, false) => Err(neither()),
        _ => Ok(()),
    }
}

fn neither() -> TimingError {
    TimingError::new("cron", "give a cron expression or an interval (`every`)")
}

/// Parses 5-field, 6-field (seconds first) and alias expressions.
fn parse_cron(expr: &str) -> Result<Cron, TimingError> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(expr)
        .map_err(|error| TimingError::new("cron", lowercase_first(&error.to_string())))
}

/// Croner's messages start with a capital; the house style is lowercase.
fn lowercase_first(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn check_interval(interval: Duration) -> Result<Duration, TimingError> {
    if interval < Duration::from_secs(1) {
        return Err(TimingError::new("every", "must be at least 1s"));
    }
    if interval.subsec_nanos() != 0 {
        return Err(TimingError::new(
            "every",
            "must be a whole number of seconds",
        ));
    }
    if i64::try_from(interval.as_secs()).is_err() {
        return Err(TimingError::new("every", "is too long"));
    }
    Ok(interval)
}

/// An interval's seconds; [`check_interval`] keeps them in `1..=i64::MAX`.
fn interval_secs(interval: Duration) -> i64 {
    i64::try_from(interval.as_secs()).unwrap_or(i64::MAX).max(1)
}

fn parse_time_zone(name: &str) -> Result<Tz, TimingError> {
    if name.is_empty() {
        return Ok(Tz::UTC);
    }
    name.parse::<Tz>().map_err(|_| {
        TimingError::new(
            "time_zone",
            format!("unknown time zone `{name}` (an IANA name such as Europe/Berlin)"),
        )
    })
}

/// `t - span`, or the earliest representable time when that is out of range.
fn saturating_before(t: DateTime<Utc>, span: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(span)
        .ok()
        .and_then(|span| t.checked_sub_signed(span))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("an rfc 3339 time")
            .with_timezone(&Utc)
    }

    fn ats(texts: &[&str]) -> Vec<DateTime<Utc>> {
        texts.iter().map(|text| at(text)).collect()
    }

    fn cron(expr: &str, tz: &str) -> Timing {
        Timing::parse(Some(expr), None, tz).expect("a valid cron")
    }

    fn every(interval: &str) -> Timing {
        Timing::parse(None, Some(interval), "").expect("a valid interval")
    }

    fn refused(cron: Option<&str>, every: Option<&str>, tz: &str) -> TimingError {
        Timing::parse(cron, every, tz).expect_err("refused")
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_six_field_cron_ticks_every_second() {
        let timing = cron("* * * * * *", "UTC");
        assert_eq!(
            timing.upcoming(at("2026-01-01T10:00:00.250Z"), 3),
            ats(&[
                "2026-01-01T10:00:01Z",
                "2026-01-01T10:00:02Z",
                "2026-01-01T10:00:03Z"
            ])
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-01-01T10:00:00.250Z")),
            Some(at("2026-01-01T10:00:00Z"))
        );
    }

    #[test]
    fn a_five_field_cron_ticks_at_second_zero_of_its_minutes() {
        let timing = cron("*/15 * * * *", "UTC");
        assert_eq!(
            timing.upcoming(at("2026-01-01T10:00:00Z"), 3),
            ats(&[
                "2026-01-01T10:15:00Z",
                "2026-01-01T10:30:00Z",
                "2026-01-01T10:45:00Z"
            ])
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-01-01T10:29:59Z")),
            Some(at("2026-01-01T10:15:00Z"))
        );
    }

    #[test]
    fn the_hourly_alias_ticks_on_the_hour() {
        let timing = cron("@hourly", "Europe/Berlin");
        assert_eq!(
            timing.upcoming(at("2026-01-01T10:00:00Z"), 2),
            ats(&["2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"])
        );
    }

    #[test]
    fn a_cron_ticks_on_the_wall_clock_of_its_time_zone() {
        // 09:00 in Berlin is 08:00Z in winter and 07:00Z in summer.
        let timing = cron("0 9 * * *", "Europe/Berlin");
        assert_eq!(
            timing.next_after(at("2026-01-15T00:00:00Z")),
            Some(at("2026-01-15T08:00:00Z"))
        );
        assert_eq!(
            timing.next_after(at("2026-07-15T00:00:00Z")),
            Some(at("2026-07-15T07:00:00Z"))
        );
    }

    #[test]
    fn a_daily_job_in_the_spring_gap_fires_once_right_after_it() {
        // New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
        let timing = cron("0 30 2 * * *", "America/New_York");
        assert_eq!(
            timing.upcoming(at("2026-03-07T00:00:00Z"), 3),
            ats(&[
                "2026-03-07T07:30:00Z", // 02:30 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT, right after the gap
                "2026-03-09T06:30:00Z", // 02:30 EDT
            ])
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-03-08T12:00:00Z")),
            Some(at("2026-03-08T07:00:00Z"))
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-03-08T06:59:59Z")),
            Some(at("2026-03-07T07:30:00Z"))
        );
    }

    #[test]
    fn a_daily_job_in_the_berlin_spring_gap_fires_once_right_after_it() {
        // Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
        let timing = cron("0 30 2 * * *", "Europe/Berlin");
        assert_eq!(
            timing.upcoming(at("2026-03-28T00:00:00Z"), 3),
            ats(&[
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST, right after the gap
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ])
        );
    }

    #[test]
    fn a_wildcard_job_skips_its_ticks_inside_the_berlin_spring_gap() {
        let timing = cron("*/30 * * * *", "Europe/Berlin");
        assert_eq!(
            timing.upcoming(at("2026-03-29T00:00:00Z"), 4),
            ats(&[
                "2026-03-29T00:30:00Z", // 01:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST: 02:00 and 02:30 never happen
                "2026-03-29T01:30:00Z", // 03:30 CEST
                "2026-03-29T02:00:00Z",
            ])
        );
    }

    #[test]
    fn a_daily_job_after_the_repeated_hour_fires_once_on_fall_back_day() {
        // New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST; 02:30 happens once.
        let timing = cron("0 30 2 * * *", "America/New_York");
        assert_eq!(
            timing.upcoming(at("2026-10-31T00:00:00Z"), 3),
            ats(&[
                "2026-10-31T06:30:00Z", // 02:30 EDT
                "2026-11-01T07:30:00Z", // 02:30 EST
                "2026-11-02T07:30:00Z",
            ])
        );
    }

    #[test]
    fn a_daily_job_inside_the_repeated_hour_fires_once_on_the_first_pass() {
        let timing = cron("0 30 1 * * *", "America/New_York");
        assert_eq!(
            timing.upcoming(at("2026-10-31T00:00:00Z"), 3),
            ats(&[
                "2026-10-31T05:30:00Z", // 01:30 EDT
                "2026-11-01T05:30:00Z", // 01:30 EDT, the first pass; not again at 06:30Z
                "2026-11-02T06:30:00Z", // 01:30 EST
            ])
        );
        // From inside the second pass the latest tick is still the first pass's.
        assert_eq!(
            timing.latest_at_or_before(at("2026-11-01T06:45:00Z")),
            Some(at("2026-11-01T05:30:00Z"))
        );
        assert_eq!(
            timing.next_after(at("2026-11-01T05:30:00Z")),
            Some(at("2026-11-02T06:30:00Z"))
        );
    }

    #[test]
    fn an_hourly_wildcard_job_fires_on_both_passes_of_the_repeated_hour() {
        let timing = cron("0 0 * * * *", "America/New_York");
        assert_eq!(
            timing.upcoming(at("2026-11-01T03:30:00Z"), 4),
            ats(&[
                "2026-11-01T04:00:00Z", // 00:00 EDT
                "2026-11-01T05:00:00Z", // 01:00 EDT
                "2026-11-01T06:00:00Z", // 01:00 EST
                "2026-11-01T07:00:00Z", // 02:00 EST
            ])
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-11-01T06:30:00Z")),
            Some(at("2026-11-01T06:00:00Z"))
        );
        // Local midnight to local midnight: 25 hours, 25 ticks.
        let day = timing.upcoming(at("2026-11-01T03:59:59Z"), 26);
        assert_eq!(day[25], at("2026-11-02T05:00:00Z"));
    }

    #[test]
    fn an_hourly_wildcard_job_has_no_tick_in_the_spring_gap() {
        let timing = cron("0 0 * * * *", "America/New_York");
        assert_eq!(
            timing.upcoming(at("2026-03-08T05:30:00Z"), 3),
            ats(&[
                "2026-03-08T06:00:00Z", // 01:00 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT: no 02:00
                "2026-03-08T08:00:00Z", // 04:00 EDT
            ])
        );
        // Local midnight to local midnight: 23 hours, 23 ticks.
        let day = timing.upcoming(at("2026-03-08T04:59:59Z"), 24);
        assert_eq!(day[23], at("2026-03-09T04:00:00Z"));
    }

    #[test]
    fn an_interval_ticks_at_multiples_since_the_epoch() {
        let timing = every("15m");
        assert_eq!(
            timing.upcoming(at("2026-01-01T10:07:12Z"), 4),
            ats(&[
                "2026-01-01T10:15:00Z",
                "2026-01-01T10:30:00Z",
                "2026-01-01T10:45:00Z",
                "2026-01-01T11:00:00Z"
            ])
        );
        assert_eq!(
            timing.next_after(at("2026-01-01T10:15:00Z")),
            Some(at("2026-01-01T10:30:00Z"))
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-01-01T10:15:00Z")),
            Some(at("2026-01-01T10:15:00Z"))
        );
        assert_eq!(
            timing.latest_at_or_before(at("2026-01-01T10:14:59.999Z")),
            Some(at("2026-01-01T10:00:00Z"))
        );
    }

    #[test]
    fn a_time_zone_does_not_move_interval_ticks() {
        let zoned = Timing::parse(None, Some("15m"), "Asia/Kolkata").expect("valid");
        assert_eq!(zoned.time_zone(), Tz::Asia__Kolkata);
        let t = at("2026-01-01T10:07:12Z");
        assert_eq!(zoned.upcoming(t, 4), every("15m").upcoming(t, 4));
    }

    #[test]
    fn an_every_second_interval_ticks_on_each_whole_second() {
        let timing = every("1s");
        assert_eq!(
            timing.upcoming(at("2026-01-01T10:00:00.5Z"), 2),
            ats(&["2026-01-01T10:00:01Z", "2026-01-01T10:00:02Z"])
        );
        assert_eq!(
            timing.upcoming(at("1969-12-31T23:59:58.5Z"), 2),
            ats(&["1969-12-31T23:59:59Z", "1970-01-01T00:00:00Z"])
        );
    }

    #[test]
    fn humantime_intervals_parse_and_a_duration_takes_the_grpc_path() {
        assert_eq!(
            every("1h30m").cadence(),
            &Cadence::Every(Duration::from_secs(5400))
        );
        let timing = Timing::from_parts(None, Some(Duration::from_secs(900)), "").expect("valid");
        assert_eq!(timing, every("15m"));
        assert_eq!(timing.time_zone(), Tz::UTC);
    }

    #[test]
    fn sub_second_and_fractional_intervals_are_refused() {
        for text in ["500ms", "0s"] {
            let error = refused(None, Some(text), "");
            assert_eq!(error.field, "every", "{text}");
            assert_eq!(error.reason, "must be at least 1s", "{text}");
        }
        let error = refused(None, Some("1500ms"), "");
        assert_eq!(
            error.to_string(),
            "every: must be a whole number of seconds"
        );
        assert_eq!(refused(None, Some("often"), "").field, "every");
    }

    #[test]
    fn an_unknown_time_zone_is_refused() {
        let error = refused(Some("* * * * *"), None, "Mars/Olympus_Mons");
        assert_eq!(error.field, "time_zone");
        assert_eq!(
            error.reason,
            "unknown time zone `Mars/Olympus_Mons` (an IANA name such as Europe/Berlin)"
        );
    }

    #[test]
    fn an_invalid_cron_is_refused_with_the_parsers_reason() {
        for expr in ["61 * * * *", "* * *", "not a cron"] {
            let error = refused(Some(expr), None, "UTC");
            assert_eq!(error.field, "cron", "{expr}");
            assert!(!error.reason.is_empty(), "{expr}");
            assert!(
                error.reason.starts_with(|c: char| !c.is_uppercase()),
                "{}",
                error.reason
            );
        }
    }

    #[test]
    fn both_or_neither_cadence_is_refused() {
        assert_eq!(refused(Some("* * * * *"), Some("15m"), "").field, "cron");
        assert_eq!(refused(None, None, "").field, "cron");
        assert_eq!(refused(Some("  "), Some(""), "").field, "cron");
        let error = Timing::from_parts(Some("* * * * *"), Some(SECOND), "").expect_err("both");
        assert_eq!(error.field, "cron");
    }

    #[test]
    fn descriptions_name_the_interval_or_the_time_zone() {
        assert_eq!(every("15m").describe(), "every 15m");
        assert_eq!(every("1h30m").describe(), "every 1h 30m");
        assert_eq!(
            cron("0 30 2 * * *", "Europe/Berlin").describe(),
            "At 02:30 (Europe/Berlin)"
        );
        assert_eq!(
            cron("@hourly", "UTC").describe(),
            "At minute 0 past every hour (UTC)"
        );
    }

    #[test]
    fn a_tick_on_time_fires() {
        let timing = every("1m");
        let due = due(
            &timing,
            at("2026-01-01T10:00:00Z"),
            at("2026-01-01T10:00:02Z"),
            CatchUp::Skip,
            Duration::ZERO,
            Duration::from_secs(30),
            10,
        );
        assert_eq!(
            due,
            Due {
                fire: ats(&["2026-01-01T10:00:00Z"]),
                missed: 0,
                next: Some(at("2026-01-01T10:01:00Z")),
            }
        );
    }

    #[test]
    fn a_next_fire_time_in_the_future_fires_nothing() {
        let due = due(
            &every("1m"),
            at("2026-01-01T10:01:00Z"),
            at("2026-01-01T10:00:59Z"),
            CatchUp::All,
            Duration::from_secs(3600),
            SECOND,
            10,
        );
        assert_eq!(
            due,
            Due {
                fire: Vec::new(),
                missed: 0,
                next: Some(at("2026-01-01T10:01:00Z")),
            }
        );
    }

    /// Ten one-minute ticks, 10:00 to 10:09, all late by more than a 10 s grace at 10:09:30.
    fn after_an_outage(catch_up: CatchUp, now: &str, window: Duration, max_fires: usize) -> Due {
        due(
            &every("1m"),
            at("2026-01-01T10:00:00Z"),
            at(now),
            catch_up,
            window,
            Duration::from_secs(10),
            max_fires,
        )
    }

    #[test]
    fn skip_drops_every_tick_missed_in_an_outage() {
        let due = after_an_outage(CatchUp::Skip, "2026-01-01T10:09:30Z", Duration::ZERO, 10);
        assert_eq!(
            due,
            Due {
                fire: Vec::new(),
                missed: 10,
                next: Some(at("2026-01-01T10:10:00Z")),
            }
        );
    }

    #[test]
    fn skip_still_fires_the_tick_on_time_after_an_outage() {
        let due = after_an_outage(CatchUp::Skip, "2026-01-01T10:10:05Z", Duration::ZERO, 10);
        assert_eq!(
            due,
            Due {
                fire: ats(&["2026-01-01T10:10:00Z"]),
                missed: 10,
                next: Some(at("2026-01-01T10:11:00Z")),
            }
        );
    }

    #[test]
    fn one_fires_only_the_latest_missed_tick() {
        let due = after_an_outage(CatchUp::One, "2026-01-01T10:09:30Z", Duration::ZERO, 10);
        assert_eq!(
            due,
            Due {
                fire: ats(&["2026-01-01T10:09:00Z"]),
                missed: 9,
                next: Some(at("2026-01-01T10:10:00Z")),
            }
        );
    }

    #[test]
    fn one_fires_the_latest_missed_tick_and_the_tick_on_time() {
        let due = after_an_outage(CatchUp::One, "2026-01-01T10:10:05Z", Duration::ZERO, 10);
        assert_eq!(
            due,
            Due {
                fire: ats(&["2026-01-01T10:09:00Z", "2026-01-01T10:10:00Z"]),
                missed: 9,
                next: Some(at("2026-01-01T10:11:00Z")),
            }
        );
    }

    #[test]
    fn one_with_no_room_to_fire_keeps_the_latest_missed_tick_for_later() {
        let due = after_an_outage(CatchUp::One, "2026-01-01T10:09:30Z", Duration::ZERO, 0);
        assert_eq!(
            due,
            Due {
                fire: Vec::new(),
                missed: 9,
                next: Some(at("2026-01-01T10:09:00Z")),
            }
        );
    }

    #[test]
    fn all_fires_the_ticks_within_the_window_in_order() {
        let window = Duration::from_secs(300);
        let due = after_an_outage(CatchUp::All, "2026-01-01T10:09:30Z", window, 10);
        assert_eq!(
            due,
            Due {
                fire: ats(&[
                    "2026-01-01T10:05:00Z",
                    "2026-01-01T10:06:00Z",
                    "2026-01-01T10:07:00Z",
                    "2026-01-01T10:08:00Z",
                    "2026-01-01T10:09:00Z",
                ]),
                missed: 5,
                next: Some(at("2026-01-01T10:10:00Z")),
            }
        );
    }

    #[test]
    fn all_with_a_window_under_the_grace_keeps_what_is_on_time() {
        let due = after_an_outage(CatchUp::All, "2026-01-01T10:10:05Z", Duration::ZERO, 10);
        assert_eq!(due.fire, ats(&["2026-01-01T10:10:00Z"]));
        assert_eq!(due.missed, 10);
    }

    #[test]
    fn max_fires_cuts_a_pass_and_the_next_pass_continues_from_the_cut() {
        let window = Duration::from_secs(3600);
        let now = "2026-01-01T10:09:30Z";
        let first = after_an_outage(CatchUp::All, now, window, 3);
        assert_eq!(
            first,
            Due {
                fire: ats(&[
                    "2026-01-01T10:00:00Z",
                    "2026-01-01T10:01:00Z",
                    "2026-01-01T10:02:00Z",
                ]),
                missed: 0,
                next: Some(at("2026-01-01T10:03:00Z")),
            }
        );
        let next = first.next.expect("a next tick");
        let second = due(
            &every("1m"),
            next,
            at(now),
            CatchUp::All,
            window,
            Duration::from_secs(10),
            3,
        );
        assert_eq!(
            second.fire,
            ats(&[
                "2026-01-01T10:03:00Z",
                "2026-01-01T10:04:00Z",
                "2026-01-01T10:05:00Z",
            ])
        );
        assert_eq!(second.next, Some(at("2026-01-01T10:06:00Z")));
    }

    #[test]
    fn a_day_long_outage_of_an_every_second_schedule_jumps_and_counts_what_it_missed() {
        // 86_401 due ticks from 00:00:00 to the next 00:00:00; the last 6 are on time.
        let next_fire_at = at("2026-01-01T00:00:00Z");
        let now = at("2026-01-02T00:00:00Z");
        let grace = Duration::from_secs(5);
        let started = std::time::Instant::now();
        let due = due(
            &every("1s"),
            next_fire_at,
            now,
            CatchUp::Skip,
            Duration::ZERO,
            grace,
            100,
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(due.fire.len(), 6);
        assert_eq!(due.fire[0], at("2026-01-01T23:59:55Z"));
        assert_eq!(due.missed, 86_395);
        assert_eq!(due.next, Some(at("2026-01-02T00:00:01Z")));
    }

    #[test]
    fn a_day_long_outage_of_an_every_second_cron_counts_the_same() {
        let due = due(
            &cron("* * * * * *", "UTC"),
            at("2026-01-01T00:00:00Z"),
            at("2026-01-02T00:00:00Z"),
            CatchUp::One,
            Duration::ZERO,
            Duration::ZERO,
            100,
        );
        // The latest missed tick, then the one on time.
        assert_eq!(
            due.fire,
            ats(&["2026-01-01T23:59:59Z", "2026-01-02T00:00:00Z"])
        );
        assert_eq!(due.missed, 86_399);
    }

    #[test]
    fn missed_ticks_are_counted_up_to_the_cap() {
        let year_later = at("2027-01-01T00:00:00Z");
        for timing in [every("1s"), cron("* * * * * *", "UTC")] {
            let due = due(
                &timing,
                at("2026-01-01T00:00:00Z"),
                year_later,
                CatchUp::One,
                Duration::ZERO,
                Duration::ZERO,
                100,
            );
            assert_eq!(
                due.fire,
                ats(&["2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"])
            );
            assert_eq!(due.missed, MISSED_COUNT_CAP);
            assert_eq!(due.next, Some(at("2027-01-01T00:00:01Z")));
        }
    }

    #[test]
    fn all_over_a_year_long_window_fires_at_most_max_fires() {
        let due = due(
            &every("1s"),
            at("2026-01-01T00:00:00Z"),
            at("2027-01-01T00:00:00Z"),
            CatchUp::All,
            Duration::from_secs(400 * 86_400),
            Duration::ZERO,
            2,
        );
        assert_eq!(
            due,
            Due {
                fire: ats(&["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"]),
                missed: 0,
                next: Some(at("2026-01-01T00:00:02Z")),
            }
        );
    }

    #[test]
    fn a_daily_job_due_right_after_the_spring_gap_fires_there() {
        let timing = cron("0 30 2 * * *", "America/New_York");
        let due = due(
            &timing,
            at("2026-03-08T07:00:00Z"),
            at("2026-03-08T07:00:01Z"),
            CatchUp::Skip,
            Duration::ZERO,
            Duration::from_secs(60),
            10,
        );
        assert_eq!(due.fire, ats(&["2026-03-08T07:00:00Z"]));
        assert_eq!(due.next, Some(at("2026-03-09T06:30:00Z")));
    }

    #[test]
    fn policies_round_trip_through_their_names() {
        for policy in [CatchUp::Skip, CatchUp::One, CatchUp::All] {
            assert_eq!(policy.as_str().parse::<CatchUp>(), Ok(policy));
        }
        for policy in [
            Overlap::Allow,
            Overlap::Skip,
            Overlap::CancelPrevious,
            Overlap::QueueOne,
        ] {
            assert_eq!(policy.as_str().parse::<Overlap>(), Ok(policy));
        }
        assert_eq!(CatchUp::default(), CatchUp::Skip);
        assert_eq!(Overlap::default(), Overlap::Skip);
        let error = "latest".parse::<CatchUp>().expect_err("unknown");
        assert_eq!(error.field, "catch_up");
        assert!(error.reason.contains("skip, one, all"), "{}", error.reason);
        let error = "queue".parse::<Overlap>().expect_err("unknown");
        assert_eq!(error.field, "overlap");
        assert!(error.reason.contains("queue_one"), "{}", error.reason);
    }

    #[test]
    fn each_overlap_policy_decides_a_tick_by_what_is_running_and_queued() {
        use AtTick::{CancelPreviousThenStart as Cancel, Queue, Skip, Start};
        let table = [
            // (policy, running, queued, decision)
            (Overlap::Allow, false, false, Start),
            (Overlap::Allow, false, true, Start),
            (Overlap::Allow, true, false, Start),
            (Overlap::Allow, true, true, Start),
            (Overlap::Skip, false, false, Start),
            (Overlap::Skip, false, true, Start),
            (Overlap::Skip, true, false, Skip),
            (Overlap::Skip, true, true, Skip),
            (Overlap::CancelPrevious, false, false, Start),
            (Overlap::CancelPrevious, false, true, Start),
            (Overlap::CancelPrevious, true, false, Cancel),
            (Overlap::CancelPrevious, true, true, Cancel),
            (Overlap::QueueOne, false, false, Start),
            (Overlap::QueueOne, false, true, Start),
            (Overlap::QueueOne, true, false, Queue),
            (Overlap::QueueOne, true, true, Skip),
        ];
        for (policy, running, queued, decision) in table {
            assert_eq!(
                at_tick(policy, running, queued),
                decision,
                "{policy} running={running} queued={queued}"
            );
        }
    }
}
