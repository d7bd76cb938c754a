//! `--only scaling`: the throughput pass for each number of coordinators and workers,
//! and the scaling table written to its own section of `docs/performance.md`.
//!
//! Each row is a fresh set of processes on the same servers and the same database,
//! loaded by the same submitters spread over the coordinators. Its throughput is shown
//! beside the raw JetStream and Postgres rates measured in the same run, and its CPU
//! per task beside the one-coordinator, one-worker row's: where the machine has fewer
//! cores than processes want, throughput cannot grow, and what the table shows is
//! whether a task costs the same whatever the number of processes.

use std::fmt::Write as _;
use std::time::Duration;

use crate::load::quantile_ms;

/// Marks the start of the scaling section.
pub const BEGIN: &str = "<!-- taskwire-bench scaling: begin -->";
/// Marks its end.
pub const END: &str = "<!-- taskwire-bench scaling: end -->";

/// How long the open-loop load every compared process set takes (`--equal-load-share`)
/// lasts.
pub const EQUAL_LOAD: Duration = Duration::from_secs(5);

/// The process counts measured: coordinators, then workers.
pub const SETUPS: [(u32, u32); 7] = [(1, 1), (2, 1), (4, 1), (1, 2), (1, 4), (1, 8), (2, 2)];

/// One row: a setup and what its pass measured.
#[derive(Debug, Clone)]
pub struct Row {
    pub coordinators: u32,
    pub workers: u32,
    pub tasks: usize,
    pub elapsed: Duration,
    pub submit_to_result: Vec<Duration>,
    /// CPU per task in µs: coordinators, workers, nats-server, Postgres.
    pub cpu: [f64; 4],
    /// The same processes under the equal load, after the throughput pass.
    pub equal_load: Option<EqualLoad>,
}

/// CPU per task under the open-loop load every setup takes alike.
#[derive(Debug, Clone, Copy)]
pub struct EqualLoad {
    /// Tasks per second submitted.
    pub rate: f64,
    /// CPU per task in µs, as [`Row::cpu`].
    pub cpu: [f64; 4],
}

impl EqualLoad {
    fn orchestration(&self) -> f64 {
        crate::figures::orchestration(&self.cpu)
    }
}

impl Row {
    fn rate(&self) -> f64 {
        self.tasks as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    fn orchestration(&self) -> f64 {
        crate::figures::orchestration(&self.cpu)
    }
}

/// Of one setup's rounds, the one with the median orchestration CPU per task (the
/// lower middle of an even number): a row that was measured, not a mix of rounds. Its
/// equal load is the rounds' median one by the same rule, measured in its own round.
pub fn median_round(mut rounds: Vec<Row>) -> Option<Row> {
    let mut equal: Vec<EqualLoad> = rounds.iter().filter_map(|r| r.equal_load).collect();
    equal.sort_by(|a, b| a.orchestration().total_cmp(&b.orchestration()));
    let equal = equal.get(equal.len().saturating_sub(1) / 2).copied();
    rounds.sort_by(|a, b| a.orchestration().total_cmp(&b.orchestration()));
    let middle = rounds.len().saturating_sub(1) / 2;
    (!rounds.is_empty()).then(|| {
        let mut row = rounds.swap_remove(middle);
        row.equal_load = equal;
        row
    })
}

/// The raw rates of the same run.
#[derive(Debug, Clone, Copy)]
pub struct RawRates {
    pub jetstream: f64,
    pub commits: f64,
}

fn ratio(value: f64, base: f64) -> String {
    if base <= 0.0 {
        return "-".to_owned();
    }
    format!("{:.2}", value / base)
}

/// The section: machine, command, loads, the table and what it says.
pub fn section(
    command: &str,
    machine: &str,
    loads: &[(String, String)],
    raw: RawRates,
    rows: &mut [Row],
    concurrency: u32,
    rounds: u32,
) -> String {
    let mut s = String::new();
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(s, "### Scaling run of {date}\n");
    let _ = writeln!(s, "- machine: {machine}");
    let _ = writeln!(s, "- command: `{command}`");
    for (when, load) in loads {
        let _ = writeln!(s, "- load average {when}: {load}");
    }
    let _ = writeln!(
        s,
        "- raw JetStream publish→pull→ack {:.0} msgs/s, raw Postgres commits {:.0}/s (same run)\n",
        raw.jetstream, raw.commits
    );
    let base = rows.first().map(|r| (r.rate(), r.orchestration()));
    let base_equal = rows
        .first()
        .and_then(|r| r.equal_load)
        .map(|e| e.orchestration());
    let equal_rate = rows.iter().find_map(|r| r.equal_load).map(|e| e.rate);
    let equal_header = match equal_rate {
        Some(rate) => format!(
            " at {rate:.0} tasks/s: CPU/task coordinators | workers | orchestration | × 1+1 | Postgres |"
        ),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "| coordinators | workers | tasks/s | of raw JetStream | of raw commits | × 1+1 | submit→result p50 / p99 | CPU/task coordinators | workers | orchestration | × 1+1 | nats-server | Postgres |{equal_header}"
    );
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|{}",
        if equal_rate.is_some() {
            "---:|---:|---:|---:|---:|"
        } else {
            ""
        }
    );
    for row in rows.iter_mut() {
        let (base_rate, base_cpu) = base.unwrap_or((0.0, 0.0));
        let p50 = quantile_ms(&mut row.submit_to_result, 0.5);
        let p99 = quantile_ms(&mut row.submit_to_result, 0.99);
        let equal = match (equal_rate, row.equal_load) {
            (None, _) => String::new(),
            (Some(_), None) => " - | - | - | - | - |".to_owned(),
            (Some(_), Some(e)) => format!(
                " {:.0} µs | {:.0} µs | {:.0} µs | {} | {:.0} µs |",
                e.cpu[0],
                e.cpu[1],
                e.orchestration(),
                ratio(e.orchestration(), base_equal.unwrap_or(0.0)),
                e.cpu[3]
            ),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {} | {} | {} | {p50:.1} / {p99:.1} ms | {:.0} µs | {:.0} µs | {:.0} µs | {} | {:.0} µs | {:.0} µs |{equal}",
            row.coordinators,
            row.workers,
            row.rate(),
            ratio(row.rate(), raw.jetstream),
            ratio(row.rate(), raw.commits),
            ratio(row.rate(), base_rate),
            row.cpu[0],
            row.cpu[1],
            row.orchestration(),
            ratio(row.orchestration(), base_cpu),
            row.cpu[2],
            row.cpu[3],
        );
    }
    let _ = writeln!(
        s,
        "\nEach row: fresh processes (logs at `warn`, no titles, workers with `--concurrency {concurrency}`), \
         a warm-up, then the measured pass; submitters spread their calls over the coordinators. \
         Every setup ran in each of {rounds} round(s), one after another, and its row is the round with \
         the median orchestration CPU per task. CPU is user+system time from `/proc/<pid>/stat` over the measured pass, divided by its tasks; \
         orchestration is coordinators + workers. \"× 1+1\" compares with the first row.{}",
        match equal_rate {
            Some(rate) => format!(
                " After its throughput pass, each setup took the same open-loop load, {rate:.0} tasks/s \
                 (`--equal-load-rate` where the command gives it, else a share of the first row's first throughput pass) for {} s: its CPU per task there compares \
                 equal work, where throughput passes of different speeds carry different numbers of \
                 tasks per batch; that figure is the rounds' median too.",
                EQUAL_LOAD.as_secs()
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(s, "{END}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(coordinators: u32, workers: u32, secs: u64, cpu: [f64; 4]) -> Row {
        Row {
            coordinators,
            workers,
            tasks: 1000,
            elapsed: Duration::from_secs(secs),
            submit_to_result: vec![Duration::from_millis(10), Duration::from_millis(30)],
            cpu,
            equal_load: None,
        }
    }

    /// The section of `rows` on a 2-core machine, against 10,000 raw messages and 4,000
    /// raw commits per second, 3 rounds.
    fn section_of(rows: &mut [Row]) -> String {
        section(
            "taskwire-bench --only scaling",
            "2 cores",
            &[],
            RawRates {
                jetstream: 10_000.0,
                commits: 4_000.0,
            },
            rows,
            256,
            3,
        )
    }

    #[test]
    fn each_row_is_compared_with_the_raw_rates_and_the_first_row() {
        let mut rows = vec![
            row(1, 1, 1, [100.0, 200.0, 50.0, 80.0]),
            row(2, 1, 1, [110.0, 220.0, 50.0, 80.0]),
        ];
        let section = section_of(&mut rows);
        assert!(section.starts_with(BEGIN) && section.trim_end().ends_with(END));
        assert!(
            section.contains("| 1 | 1 | 1000 | 0.10 | 0.25 | 1.00 |"),
            "{section}"
        );
        assert!(
            section.contains("| 110 µs | 220 µs | 330 µs | 1.10 | 50 µs | 80 µs |"),
            "{section}"
        );
        assert!(section.contains("in each of 3 round(s)"), "{section}");
        assert!(
            !section.contains("open-loop"),
            "no equal-load column without an equal load: {section}"
        );
    }

    #[test]
    fn the_equal_load_columns_compare_each_setup_with_the_first_at_the_same_rate() {
        let equal = |cpu| Some(EqualLoad { rate: 700.0, cpu });
        let mut rows = vec![
            row(1, 1, 1, [100.0, 200.0, 50.0, 80.0]),
            row(2, 1, 1, [150.0, 200.0, 50.0, 80.0]),
            row(4, 1, 1, [200.0, 200.0, 50.0, 80.0]),
        ];
        rows[0].equal_load = equal([150.0, 250.0, 60.0, 90.0]);
        rows[1].equal_load = equal([160.0, 260.0, 60.0, 95.0]);
        let section = section_of(&mut rows);
        assert!(
            section.contains("| at 700 tasks/s: CPU/task coordinators | workers | orchestration | × 1+1 | Postgres |"),
            "{section}"
        );
        assert!(
            section.contains("| 150 µs | 250 µs | 400 µs | 1.00 | 90 µs |"),
            "{section}"
        );
        assert!(
            section.contains("| 160 µs | 260 µs | 420 µs | 1.05 | 95 µs |"),
            "{section}"
        );
        assert!(section.contains("| - | - | - | - | - |"), "{section}");
        assert!(section.contains("open-loop load, 700 tasks/s"), "{section}");
    }

    #[test]
    fn a_setup_shows_its_round_with_the_median_orchestration_cpu() {
        let rounds = vec![
            row(2, 1, 1, [150.0, 200.0, 1.0, 1.0]),
            row(2, 1, 2, [100.0, 200.0, 2.0, 2.0]),
            row(2, 1, 3, [120.0, 200.0, 3.0, 3.0]),
        ];
        let median = median_round(rounds).expect("a round");
        assert_eq!(median.elapsed, Duration::from_secs(3));
        assert_eq!(median.cpu[2], 3.0);
        let two = vec![
            row(1, 1, 1, [300.0, 0.0, 0.0, 0.0]),
            row(1, 1, 2, [100.0, 0.0, 0.0, 0.0]),
        ];
        assert_eq!(median_round(two).map(|r| r.cpu[0]), Some(100.0));
        assert!(median_round(Vec::new()).is_none());
    }

    #[test]
    fn a_setups_equal_load_figure_is_the_median_of_its_rounds_own() {
        let mut rounds = vec![
            row(2, 1, 1, [150.0, 200.0, 1.0, 1.0]),
            row(2, 1, 2, [100.0, 200.0, 2.0, 2.0]),
            row(2, 1, 3, [120.0, 200.0, 3.0, 3.0]),
        ];
        // The throughput passes' median is round 3; the equal loads' is round 1's.
        for (r, cpu) in rounds.iter_mut().zip([300.0, 500.0, 100.0]) {
            r.equal_load = Some(EqualLoad {
                rate: 500.0,
                cpu: [cpu, 0.0, 0.0, 0.0],
            });
        }
        let median = median_round(rounds).expect("a round");
        assert_eq!(median.elapsed, Duration::from_secs(3));
        assert_eq!(median.equal_load.map(|e| e.cpu[0]), Some(300.0));
    }
}
