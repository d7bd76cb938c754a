//! The table's rows: every figure of a run, with its ratio to the raw servers' rates.

use std::time::Duration;

use crate::load::{Batch, quantile_ms};
use crate::report::Row;

/// What the run was asked to do.
#[derive(Debug)]
pub struct Setup {
    pub tasks: u32,
    pub submitters: u32,
    pub workers: u32,
    pub pg_connections: u32,
}

/// One throughput pass: the batch and the CPU per task (µs) of coordinator, workers,
/// nats-server and Postgres, in that order.
#[derive(Debug)]
pub struct Pass {
    pub batch: Batch,
    pub cpu: Vec<f64>,
}

/// One round of the trace-export phase: the same pass on fresh processes without
/// export and then with it, and the spans received by the end of the second.
#[derive(Debug)]
pub struct TraceRound {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` of the exporting processes.
    pub protocol: &'static str,
    pub without: Pass,
    pub with: Pass,
    /// The same open-loop load on both process sets, after their throughput passes.
    pub paced: Option<PacedCpu>,
    pub spans: usize,
}

/// CPU per task (µs, per meter as in [`Pass`]) under one open-loop load, without
/// export and with it: the export's cost on equal work, where the throughput passes
/// also differ in how much work each batch carries.
#[derive(Debug)]
pub struct PacedCpu {
    /// Tasks per second submitted to both.
    pub rate: f64,
    pub without: Vec<f64>,
    pub with: Vec<f64>,
}

impl PacedCpu {
    /// Orchestration CPU per task with export as a share of the same without.
    pub fn overhead(&self) -> f64 {
        orchestration(&self.with) / orchestration(&self.without) - 1.0
    }
}

/// Orchestration CPU per task, µs, of CPU figures in the order of [`Pass::cpu`]: the
/// coordinators' and the workers'.
pub fn orchestration(cpu: &[f64]) -> f64 {
    cpu[0] + cpu[1]
}

impl Pass {
    /// Orchestration CPU per task, µs: the coordinators' and the workers'.
    pub fn orchestration(&self) -> f64 {
        orchestration(&self.cpu)
    }
}

impl TraceRound {
    /// Orchestration CPU per task with export, as a share of the same without: 0.10 is
    /// 10 % more.
    pub fn overhead(&self) -> f64 {
        self.with.orchestration() / self.without.orchestration() - 1.0
    }
}

/// The worker's resident set before and while `--waiting-sessions` sessions wait.
#[derive(Debug)]
pub struct Memory {
    pub idle: u64,
    pub waiting: u64,
    pub sessions: usize,
}

/// Submit→result under an open-loop load at a share of the measured throughput.
#[derive(Debug)]
pub struct Paced {
    /// Tasks per second submitted.
    pub rate: f64,
    /// Share of the throughput pass's rate.
    pub share: f64,
    pub secs: u64,
    pub submit_to_result: Vec<Duration>,
}

/// The raw servers' figures.
#[derive(Debug)]
pub struct Raw {
    /// JetStream publish→pull→ack, messages per second.
    pub js_rate: f64,
    /// nats-server's CPU per raw message, µs.
    pub js_cpu: f64,
    /// Publish→delivery of single messages.
    pub js_latency: Vec<Duration>,
    /// Single-row commits per second.
    pub pg_rate: f64,
    /// Postgres's CPU per raw commit, µs.
    pub pg_cpu: f64,
}

/// An overhead's median and every round's (`all`, sorted), in %, with the target.
fn median_of_rounds(median: f64, all: &[f64]) -> String {
    let all: Vec<String> = all.iter().map(|o| format!("{:+.1}", o * 100.0)).collect();
    format!(
        "{:+.1}%, the median of {} rounds ({} %; target ≤ +10%)",
        median * 100.0,
        all.len(),
        all.join(", ")
    )
}

/// The rows of the table, in the order of the run.
#[allow(clippy::too_many_arguments)]
pub fn rows(
    args: &Setup,
    plain: &mut Pass,
    mut trace_rounds: Vec<TraceRound>,
    one: &mut [Duration],
    watched: &mut [Duration],
    mut raw: Raw,
    memory: Option<Memory>,
    paced: Option<Paced>,
) -> Vec<Row> {
    let n = args.tasks as f64;
    let rate = n / plain.batch.elapsed.as_secs_f64();
    let x = |v: f64, base: f64| format!("{:.1}×", v / base);
    let lat = |s: &mut [Duration]| (quantile_ms(s, 0.5), quantile_ms(s, 0.99));
    let (js50, js99) = lat(&mut raw.js_latency);
    let mut rows = vec![
        Row::new(
            "raw JetStream publish→pull→ack (file store)",
            format!("{:.0} msgs/s", raw.js_rate),
            "1",
        ),
        Row::new(
            "raw JetStream publish→delivery, one at a time",
            format!("p50 {js50:.2} ms, p99 {js99:.2} ms"),
            "1",
        ),
        Row::new(
            format!(
                "raw Postgres single-row commits ({} connections)",
                args.pg_connections
            ),
            format!("{:.0} commits/s", raw.pg_rate),
            "1",
        ),
        Row::new(
            format!(
                "throughput, {} tasks from {} submitters",
                args.tasks, args.submitters
            ),
            format!("{rate:.0} tasks/s"),
            format!(
                "{:.3} of raw JetStream, {:.2} of raw commits",
                rate / raw.js_rate,
                rate / raw.pg_rate
            ),
        ),
    ];
    let (a, b) = lat(&mut plain.batch.submit_to_start);
    rows.push(Row::new(
        "submit→start under load",
        format!("p50 {a:.1} ms, p99 {b:.1} ms"),
        format!("p50 {} raw delivery", x(a, js50)),
    ));
    let (a, b) = lat(&mut plain.batch.submit_to_result);
    rows.push(Row::new(
        "submit→result under load",
        format!("p50 {a:.1} ms, p99 {b:.1} ms"),
        format!("p50 {} raw delivery", x(a, js50)),
    ));
    if let Some(mut p) = paced {
        let (a, b) = lat(&mut p.submit_to_result);
        rows.push(Row::new(
            format!(
                "submit→result at {:.0} % of that throughput ({:.0} tasks/s for {} s, open loop)",
                p.share * 100.0,
                p.rate,
                p.secs
            ),
            format!("p50 {a:.1} ms, p99 {b:.1} ms"),
            format!("p50 {} raw delivery; target p99 ≤ 100 ms", x(a, js50)),
        ));
    }
    let (a, b) = lat(one);
    rows.push(Row::new(
        "submit→result, one at a time",
        format!("p50 {a:.1} ms, p99 {b:.1} ms"),
        format!("p50 {} raw delivery", x(a, js50)),
    ));
    let (a, b) = lat(watched);
    rows.push(Row::new(
        "`Submit` then `Watch` to the result, one at a time",
        format!("p50 {a:.1} ms, p99 {b:.1} ms"),
        format!("p50 {} raw delivery", x(a, js50)),
    ));
    let c = &plain.cpu;
    let orchestration = plain.orchestration();
    rows.push(Row::new(
        "CPU per task: coordinator",
        format!("{:.0} µs", c[0]),
        "-",
    ));
    rows.push(Row::new(
        format!(
            "CPU per task: worker{}",
            if args.workers > 1 { "s" } else { "" }
        ),
        format!("{:.0} µs", c[1]),
        "-",
    ));
    rows.push(Row::new(
        "CPU per task: orchestration (coordinator + workers)",
        format!("{orchestration:.0} µs"),
        "target ≤ 100 µs",
    ));
    rows.push(Row::new(
        "CPU per task: nats-server",
        format!("{:.0} µs", c[2]),
        format!(
            "{:.1}× its {:.1} µs per raw message",
            c[2] / raw.js_cpu,
            raw.js_cpu
        ),
    ));
    rows.push(Row::new(
        "CPU per task: Postgres",
        format!("{:.0} µs", c[3]),
        format!(
            "{:.1}× its {:.1} µs per raw commit",
            c[3] / raw.pg_cpu,
            raw.pg_cpu
        ),
    ));
    // The round with the median overhead stands for the phase; every round is named.
    trace_rounds.sort_by(|a, b| a.overhead().total_cmp(&b.overhead()));
    let all: Vec<f64> = trace_rounds.iter().map(TraceRound::overhead).collect();
    if let Some(median) = trace_rounds.get(trace_rounds.len() / 2) {
        let rate_of = |p: &Pass| n / p.batch.elapsed.as_secs_f64();
        let (w, e) = (&median.without.cpu, &median.with.cpu);
        rows.push(Row::new(
            "with trace export: throughput",
            format!("{:.0} tasks/s", rate_of(&median.with)),
            format!(
                "{:.2} of the same round without ({:.0} tasks/s)",
                rate_of(&median.with) / rate_of(&median.without),
                rate_of(&median.without)
            ),
        ));
        rows.push(Row::new(
            "with trace export: orchestration CPU per task",
            format!(
                "{:.0} µs against {:.0} µs without (coordinator {:.0}, workers {:.0}; OTLP over {}, {} spans received; \
                 the benchmark's own process {:.0} against {:.0} µs)",
                median.with.orchestration(),
                median.without.orchestration(),
                e[0],
                e[1],
                median.protocol,
                median.spans,
                e.get(4).copied().unwrap_or_default(),
                w.get(4).copied().unwrap_or_default(),
            ),
            median_of_rounds(median.overhead(), &all),
        ));
    }
    // At equal load: the rounds' open-loop passes, their own median.
    let mut paced: Vec<&PacedCpu> = trace_rounds
        .iter()
        .filter_map(|r| r.paced.as_ref())
        .collect();
    paced.sort_by(|a, b| a.overhead().total_cmp(&b.overhead()));
    if let Some(median) = paced.get(paced.len() / 2) {
        let all: Vec<f64> = paced.iter().map(|p| p.overhead()).collect();
        let (w, e) = (&median.without, &median.with);
        rows.push(Row::new(
            format!(
                "with trace export at one load ({:.0} tasks/s, open loop, on both): orchestration CPU per task",
                median.rate
            ),
            format!(
                "{:.0} µs against {:.0} µs without (coordinator {:.0} against {:.0}, workers {:.0} against {:.0}; \
                 the benchmark's own process {:.0} against {:.0} µs)",
                self::orchestration(e),
                self::orchestration(w),
                e[0],
                w[0],
                e[1],
                w[1],
                e.get(4).copied().unwrap_or_default(),
                w.get(4).copied().unwrap_or_default(),
            ),
            median_of_rounds(median.overhead(), &all),
        ));
    }
    if let Some(m) = memory {
        let per = m.waiting.saturating_sub(m.idle) as f64 / m.sessions as f64 / 1024.0;
        rows.push(Row::new(
            format!(
                "worker memory per session waiting on the model ({} sessions)",
                m.sessions
            ),
            format!(
                "{per:.0} KiB (RSS {:.0} → {:.0} MiB)",
                m.idle as f64 / 1048576.0,
                m.waiting as f64 / 1048576.0
            ),
            format!(
                "{:.0} MiB for 10,000 (target < 500 MB)",
                per * 10_000.0 / 1024.0
            ),
        ));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(secs: u64, coordinator: f64, workers: f64) -> Pass {
        Pass {
            batch: Batch {
                elapsed: Duration::from_secs(secs),
                submit_to_start: vec![Duration::from_millis(5)],
                submit_to_result: vec![Duration::from_millis(9)],
                some_task: String::new(),
            },
            cpu: vec![coordinator, workers, 10.0, 20.0, 30.0],
        }
    }

    fn round(with_workers: f64, paced_with_workers: f64) -> TraceRound {
        TraceRound {
            protocol: "http/protobuf",
            without: pass(1, 100.0, 100.0),
            with: pass(1, 100.0, with_workers),
            paced: Some(PacedCpu {
                rate: 500.0,
                without: vec![150.0, 150.0, 0.0, 0.0, 0.0],
                with: vec![150.0, paced_with_workers, 0.0, 0.0, 0.0],
            }),
            spans: 5000,
        }
    }

    #[test]
    fn trace_export_is_shown_at_full_load_and_at_one_load_each_the_median_of_its_rounds() {
        let table = rows(
            &Setup {
                tasks: 1000,
                submitters: 8,
                workers: 1,
                pg_connections: 4,
            },
            &mut pass(1, 100.0, 100.0),
            // Full load: +10, +20, +40 %. One load: +12, +3, +6 %.
            vec![
                round(120.0, 186.0),
                round(140.0, 159.0),
                round(180.0, 168.0),
            ],
            &mut [Duration::from_millis(4)],
            &mut [Duration::from_millis(6)],
            Raw {
                js_rate: 10_000.0,
                js_cpu: 10.0,
                js_latency: vec![Duration::from_micros(100)],
                pg_rate: 5_000.0,
                pg_cpu: 50.0,
            },
            None,
            None,
        );
        let text: Vec<String> = table.iter().map(|r| format!("{r:?}")).collect();
        let full = text
            .iter()
            .find(|r| r.contains("with trace export: orchestration CPU per task"))
            .expect("the full-load row");
        assert!(
            full.contains("+20.0%, the median of 3 rounds (+10.0, +20.0, +40.0 %"),
            "{full}"
        );
        let equal = text
            .iter()
            .find(|r| r.contains("at one load (500 tasks/s"))
            .expect("the equal-load row");
        assert!(
            equal.contains("+6.0%, the median of 3 rounds (+3.0, +6.0, +12.0 %"),
            "{equal}"
        );
        assert!(equal.contains("318 µs against 300 µs without"), "{equal}");
    }
}
