//! Readable renderings of schedules: the summary that `taskwire schedule get` (and
//! `create`, `update`, `pause`, `resume`) prints, and the `taskwire schedule ls` table.
//! Times are RFC 3339 in UTC, as `taskwire get` prints them; the next fire times also
//! say how far off they are, from a clock passed in.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use taskwire_protocol::{pb, time};

use super::{first_line, table, truncate};
use crate::output::{
    duration, schedule_catch_up_name, schedule_overlap_name, schedule_run_outcome_name,
    status_name, timestamp,
};

/// The summary of a schedule, one labelled field per line as `taskwire get` prints a
/// task, then its recent runs as a table; `now` is the clock the next fire times count
/// from (`in 4m`).
pub fn schedule_summary(s: &pb::Schedule, now: DateTime<Utc>) -> String {
    let spec = s.spec.clone().unwrap_or_default();
    let task = spec.task.clone().unwrap_or_default();
    let time = |t: Option<&prost_types::Timestamp>| timestamp(t).unwrap_or_else(|| "-".to_owned());
    let mut rows: Vec<(&str, String)> = vec![
        ("schedule", format!("{} (id {})", spec.name, s.schedule_id)),
        ("tenant", dash(&spec.tenant)),
        ("cadence", cadence_line(&spec, &s.description)),
        ("time zone", time_zone(&spec)),
        ("overlap", schedule_overlap_name(spec.overlap).to_owned()),
        ("catch-up", catch_up(&spec)),
        ("agent", task.agent.clone()),
        ("prompt", truncate(first_line(&task.prompt), 100)),
    ];
    if let Some(timeout) = duration(spec.task_timeout.as_ref()) {
        rows.push(("deadline", format!("{timeout} after each tick")));
    }
    rows.push(("state", state(&spec).to_owned()));
    if s.next_fires.is_empty() {
        rows.push(("next", "-".to_owned()));
    }
    for next in s.next_fires.iter().take(5) {
        let when = match time::from_wire("next_fires", next) {
            Ok(at) => format!(" ({})", relative(at, now)),
            Err(_) => String::new(),
        };
        rows.push(("next", format!("{}{when}", time(Some(next)))));
    }
    rows.push((
        "fires",
        format!(
            "{}  skipped (overlap) {}  skipped (missed) {}",
            s.fires, s.skipped_overlap, s.skipped_missed
        ),
    ));
    if s.queued_tick.is_some() {
        rows.push(("queued", time(s.queued_tick.as_ref())));
    }
    rows.push(("created", time(s.created_at.as_ref())));
    rows.push(("updated", time(s.updated_at.as_ref())));
    let mut out = String::new();
    for (label, value) in rows {
        let _ = writeln!(out, "{label:<9} {value}");
    }
    if !s.recent_runs.is_empty() {
        out.push_str("\nrecent runs\n");
        let rows: Vec<Vec<String>> = s
            .recent_runs
            .iter()
            .map(|r| {
                vec![
                    time(r.tick.as_ref()),
                    schedule_run_outcome_name(r.outcome).to_owned(),
                    dash(&r.task_id),
                    run_status(r).to_owned(),
                    dash(first_line(&r.reason)),
                ]
            })
            .collect();
        out.push_str(&table(
            &["TICK", "OUTCOME", "TASK", "STATUS", "REASON"],
            &rows,
        ));
    }
    out
}

/// `taskwire schedule ls`: one row per schedule; LAST RUN is the newest run's outcome
/// and its task's status (`started (completed)`).
pub fn schedule_table(schedules: &[pb::Schedule]) -> String {
    let rows = schedules
        .iter()
        .map(|s| {
            let spec = s.spec.clone().unwrap_or_default();
            let last = s.recent_runs.first().map_or_else(
                || "-".to_owned(),
                |r| match run_status(r) {
                    "-" => schedule_run_outcome_name(r.outcome).to_owned(),
                    status => format!("{} ({status})", schedule_run_outcome_name(r.outcome)),
                },
            );
            vec![
                spec.name.clone(),
                cadence(&spec),
                time_zone(&spec),
                state(&spec).to_owned(),
                timestamp(s.next_fires.first()).unwrap_or_else(|| "-".to_owned()),
                last,
                s.fires.to_string(),
            ]
        })
        .collect::<Vec<_>>();
    table(
        &[
            "NAME", "CADENCE", "TZ", "STATE", "NEXT", "LAST RUN", "FIRES",
        ],
        &rows,
    )
}

/// How far `t` is from `now` in its two largest units: `in 4m`, `in 1h30m`, `in 2d3h`;
/// `due now` when it is not after `now` (a tick waiting to be acted on).
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let millis = (t - now).num_milliseconds();
    if millis <= 0 {
        return "due now".to_owned();
    }
    // Rounded up: a tick 0.4s away is `in 1s`, not `in 0s`.
    let mut secs = millis.div_euclid(1000) + i64::from(millis % 1000 != 0);
    let mut parts = Vec::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let n = secs / size;
        secs %= size;
        if n > 0 || !parts.is_empty() {
            parts.push((n, unit));
        }
    }
    let shown: String = parts
        .iter()
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    format!("in {shown}")
}

/// The cron expression or `every 15m`.
fn cadence(spec: &pb::ScheduleSpec) -> String {
    use pb::schedule_spec::Cadence;
    match &spec.cadence {
        Some(Cadence::Cron(cron)) => cron.clone(),
        Some(Cadence::Every(every)) => match duration(Some(every)) {
            Some(every) => format!("every {every}"),
            None => "-".to_owned(),
        },
        None => "-".to_owned(),
    }
}

/// The cadence with the coordinator's words for a cron expression:
/// `0 3 * * * (At 03:00 (Europe/Berlin))`.
fn cadence_line(spec: &pb::ScheduleSpec, description: &str) -> String {
    let cadence = cadence(spec);
    match &spec.cadence {
        Some(pb::schedule_spec::Cadence::Cron(_)) if !description.is_empty() => {
            format!("{cadence} ({description})")
        }
        _ => cadence,
    }
}

/// The time zone a cron expression is read in; UTC when the spec names none.
fn time_zone(spec: &pb::ScheduleSpec) -> String {
    if spec.time_zone.is_empty() {
        "UTC".to_owned()
    } else {
        spec.time_zone.clone()
    }
}

/// `skip`, or `all (window 1h)`: the window matters only to `all`.
fn catch_up(spec: &pb::ScheduleSpec) -> String {
    let name = schedule_catch_up_name(spec.catch_up);
    match duration(spec.catch_up_window.as_ref()) {
        Some(window) if spec.catch_up == pb::ScheduleCatchUp::All as i32 => {
            format!("{name} (window {window})")
        }
        _ => name.to_owned(),
    }
}

fn state(spec: &pb::ScheduleSpec) -> &'static str {
    if spec.paused { "paused" } else { "active" }
}

/// The status of the run's task now; `-` when the run started none.
fn run_status(r: &pb::ScheduleRun) -> &'static str {
    if r.status == pb::TaskStatus::Unspecified as i32 {
        "-"
    } else {
        status_name(r.status)
    }
}

fn dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-01-02T01:56:00Z: 02:56 in Berlin, 4 minutes before the nightly tick.
    const NOW: i64 = 1_767_318_960;

    fn at(seconds: i64) -> Option<prost_types::Timestamp> {
        Some(prost_types::Timestamp { seconds, nanos: 0 })
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(NOW, 0).expect("valid time")
    }

    fn nightly() -> pb::Schedule {
        pb::Schedule {
            schedule_id: "0193f1c2-0000-7000-8000-0000000000aa".to_owned(),
            spec: Some(pb::ScheduleSpec {
                name: "nightly".to_owned(),
                cadence: Some(pb::schedule_spec::Cadence::Cron("0 3 * * *".to_owned())),
                time_zone: "Europe/Berlin".to_owned(),
                overlap: pb::ScheduleOverlap::Skip as i32,
                catch_up: pb::ScheduleCatchUp::All as i32,
                catch_up_window: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                }),
                task: Some(pb::SubmitRequest {
                    agent: "general".to_owned(),
                    prompt: "summarise yesterday's merged pull requests\nand post them".to_owned(),
                    ..Default::default()
                }),
                task_timeout: Some(prost_types::Duration {
                    seconds: 1800,
                    nanos: 0,
                }),
                tenant: "default".to_owned(),
                paused: false,
            }),
            created_at: at(1_767_225_600),
            updated_at: at(1_767_225_600),
            description: "At 03:00 (Europe/Berlin)".to_owned(),
            // 4m from now, then a day later.
            next_fires: vec![
                at(NOW + 240).expect("set"),
                at(NOW + 240 + 86_400).expect("set"),
            ],
            recent_runs: vec![
                pb::ScheduleRun {
                    tick: at(NOW + 240 - 86_400),
                    outcome: pb::ScheduleRunOutcome::Started as i32,
                    task_id: "t2".to_owned(),
                    status: pb::TaskStatus::Completed as i32,
                    fired_at: at(NOW + 241 - 86_400),
                    reason: String::new(),
                },
                pb::ScheduleRun {
                    tick: at(NOW + 240 - 2 * 86_400),
                    outcome: pb::ScheduleRunOutcome::SkippedOverlap as i32,
                    reason: "task t1 was still running".to_owned(),
                    ..Default::default()
                },
            ],
            fires: 1,
            skipped_overlap: 1,
            skipped_missed: 0,
            queued_tick: None,
        }
    }

    #[test]
    fn summary_shows_the_spec_state_next_fires_counts_and_recent_runs() {
        assert_eq!(
            schedule_summary(&nightly(), now()),
            "\
schedule  nightly (id 0193f1c2-0000-7000-8000-0000000000aa)
tenant    default
cadence   0 3 * * * (At 03:00 (Europe/Berlin))
time zone Europe/Berlin
overlap   skip
catch-up  all (window 1h)
agent     general
prompt    summarise yesterday's merged pull requests
deadline  30m after each tick
state     active
next      2026-01-02T02:00:00.000Z (in 4m)
next      2026-01-03T02:00:00.000Z (in 1d)
fires     1  skipped (overlap) 1  skipped (missed) 0
created   2026-01-01T00:00:00.000Z
updated   2026-01-01T00:00:00.000Z

recent runs
TICK                      OUTCOME          TASK  STATUS     REASON
2026-01-01T02:00:00.000Z  started          t2    completed  -
2025-12-31T02:00:00.000Z  skipped_overlap  -     -          task t1 was still running
"
        );
    }

    #[test]
    fn a_paused_interval_schedule_shows_every_and_no_next_fire() {
        let mut s = nightly();
        let spec = s.spec.as_mut().expect("spec");
        spec.cadence = Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
            seconds: 900,
            nanos: 0,
        }));
        spec.time_zone = String::new();
        spec.catch_up = pb::ScheduleCatchUp::Skip as i32;
        spec.task_timeout = None;
        spec.paused = true;
        s.description = "every 15m".to_owned();
        s.next_fires.clear();
        s.recent_runs.clear();
        s.queued_tick = at(NOW - 60);
        let out = schedule_summary(&s, now());
        assert!(out.contains("cadence   every 15m\n"), "{out}");
        assert!(out.contains("time zone UTC\n"), "{out}");
        assert!(out.contains("catch-up  skip\n"), "{out}");
        assert!(out.contains("state     paused\nnext      -\n"), "{out}");
        assert!(
            out.contains("queued    2026-01-02T01:55:00.000Z\n"),
            "{out}"
        );
        assert!(
            !out.contains("deadline") && !out.contains("recent runs"),
            "{out}"
        );
    }

    #[test]
    fn relative_times_show_their_two_largest_units_rounded_up() {
        let from_now =
            |millis: i64| relative(now() + chrono::TimeDelta::milliseconds(millis), now());
        assert_eq!(from_now(240_000), "in 4m");
        assert_eq!(from_now(239_500), "in 4m");
        assert_eq!(from_now(400), "in 1s");
        assert_eq!(from_now(252_000), "in 4m12s");
        assert_eq!(from_now(5_400_000 + 7_000), "in 1h30m");
        assert_eq!(from_now(86_400_000 + 3_600_000 * 3 + 60_000), "in 1d3h");
        assert_eq!(from_now(86_400_000 + 60_000), "in 1d");
        assert_eq!(from_now(0), "due now");
        assert_eq!(from_now(-5_000), "due now");
    }

    #[test]
    fn table_lists_cadence_zone_state_next_fire_last_run_and_fires() {
        let mut every = nightly();
        let spec = every.spec.as_mut().expect("spec");
        spec.name = "poll".to_owned();
        spec.cadence = Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
            seconds: 30,
            nanos: 0,
        }));
        spec.time_zone = "UTC".to_owned();
        spec.paused = true;
        every.next_fires.clear();
        every.recent_runs.reverse();
        every.fires = 12;
        let mut fresh = nightly();
        fresh.spec.as_mut().expect("spec").name = "fresh".to_owned();
        fresh.recent_runs.clear();
        fresh.fires = 0;
        assert_eq!(
            schedule_table(&[nightly(), every, fresh]),
            "\
NAME     CADENCE    TZ             STATE   NEXT                      LAST RUN             FIRES
nightly  0 3 * * *  Europe/Berlin  active  2026-01-02T02:00:00.000Z  started (completed)  1
poll     every 30s  UTC            paused  -                         skipped_overlap      12
fresh    0 3 * * *  Europe/Berlin  active  2026-01-02T02:00:00.000Z  -                    0
"
        );
    }
}
