//! Where one task's time goes: the spans the coordinator and worker export for tasks
//! run one at a time, cut into consecutive segments from the submit to the recorded
//! result. All processes run on this machine, so their span timestamps share a clock.

use std::collections::HashMap;
use std::time::Duration;

use taskwire_test_support::otlp::Received;

use crate::load::quantile_ms;

/// The segments, in the order a task passes through them: each is the time from one
/// span edge to the next.
const SEGMENTS: [&str; 7] = [
    "`Submit` until its insert is committed",
    "commit → the outbox relay publishes the dispatch",
    "publish → the worker's claim is granted (delivery, claim, its commit)",
    "claim → the model is called (history, workspace, inputs, system prompt, tools)",
    "the model call",
    "model answer → the attempt ends (result built, progress stored)",
    "attempt end → the result is recorded (publish, delivery, its commit)",
];

/// The span edges of one task, in nanoseconds since the epoch.
#[derive(Debug, Default)]
struct Edges {
    submit: Option<(u64, u64)>,
    publish: Option<u64>,
    attempt: Option<(u64, u64)>,
    chat: Option<(u64, u64)>,
    recorded: Option<u64>,
}

impl Edges {
    /// The segments' lengths, when every span was received.
    fn segments(&self) -> Option<[u64; 7]> {
        let (submit_start, submit_end) = self.submit?;
        let (attempt_start, attempt_end) = self.attempt?;
        let (chat_start, chat_end) = self.chat?;
        let points = [
            submit_start,
            submit_end,
            self.publish?,
            attempt_start,
            chat_start,
            chat_end,
            attempt_end,
            self.recorded?,
        ];
        let mut out = [0; 7];
        for (i, w) in points.windows(2).enumerate() {
            out[i] = w[1].saturating_sub(w[0]);
        }
        Some(out)
    }
}

/// The tasks whose submit started at or after `since` (ns since the epoch) and whose
/// spans have all been received, each cut into [`SEGMENTS`].
pub fn tasks(spans: &[Received], since: u64) -> Vec<[u64; 7]> {
    let mut traces: HashMap<&[u8], Edges> = HashMap::new();
    for r in spans {
        let s = &r.span;
        let edges = traces.entry(s.trace_id.as_slice()).or_default();
        let (start, end) = (s.start_time_unix_nano, s.end_time_unix_nano);
        let name = s.name.as_str();
        if name == "taskwire.v1.TaskService/Submit" {
            edges.submit = Some((start, end));
        } else if name.starts_with("publish ") {
            edges.publish = Some(start);
        } else if name.starts_with("invoke_agent ") {
            edges.attempt = Some((start, end));
        } else if name.starts_with("chat ") {
            edges.chat = Some((start, end));
        } else if name == "record_result" {
            edges.recorded = Some(end);
        }
    }
    traces
        .values()
        .filter(|e| e.submit.is_some_and(|(start, _)| start >= since))
        .filter_map(Edges::segments)
        .collect()
}

/// A markdown table of each segment's p50 and p90 in ms over `tasks`.
pub fn report(tasks: &[[u64; 7]]) -> String {
    let mut columns: Vec<Vec<Duration>> = vec![Vec::new(); SEGMENTS.len() + 1];
    for segments in tasks {
        for (i, v) in segments.iter().enumerate() {
            columns[i].push(Duration::from_nanos(*v));
        }
        columns[SEGMENTS.len()].push(Duration::from_nanos(segments.iter().sum()));
    }
    let mut out = format!(
        "| segment ({} tasks one at a time, from their spans) | p50 | p90 |\n|---|---:|---:|\n",
        tasks.len()
    );
    let names = SEGMENTS.iter().copied().chain(["submit → result recorded"]);
    for (name, column) in names.zip(columns.iter_mut()) {
        out.push_str(&format!(
            "| {name} | {} | {} |\n",
            ms(column, 0.5),
            ms(column, 0.9)
        ));
    }
    out
}

/// The `q` quantile of `samples` in ms, or `-` without any.
fn ms(samples: &mut [Duration], q: f64) -> String {
    if samples.is_empty() {
        return "-".to_owned();
    }
    format!("{:.2} ms", quantile_ms(samples, q))
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwire_test_support::otlp::Received;

    fn span(trace: u8, name: &str, start: u64, end: u64) -> Received {
        let span = opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: vec![trace; 16],
            name: name.to_owned(),
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            ..Default::default()
        };
        Received {
            span,
            service: String::new(),
            instance: String::new(),
        }
    }

    fn task(trace: u8, at: u64) -> Vec<Received> {
        vec![
            span(trace, "taskwire.v1.TaskService/Submit", at, at + 1_000_000),
            span(
                trace,
                "publish tw.tasks.default",
                at + 1_500_000,
                at + 1_600_000,
            ),
            span(
                trace,
                "invoke_agent general",
                at + 3_000_000,
                at + 6_000_000,
            ),
            span(trace, "chat m", at + 4_000_000, at + 5_000_000),
            span(trace, "record_result", at + 6_500_000, at + 7_000_000),
        ]
    }

    #[test]
    fn a_task_is_cut_at_its_span_edges_and_earlier_traces_are_left_out() {
        let mut spans = task(1, 10_000_000_000);
        spans.extend(task(2, 1));
        let table = report(&tasks(&spans, 10_000_000_000));
        assert!(table.contains("(1 tasks one at a time"), "{table}");
        let row = |name: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("| {name}")))
                .unwrap_or_else(|| panic!("no row {name} in {table}"))
                .to_owned()
        };
        assert_eq!(
            row("`Submit` until"),
            format!("| {} | 1.00 ms | 1.00 ms |", SEGMENTS[0])
        );
        assert!(row("commit →").contains("| 0.50 ms |"), "{table}");
        assert!(row("publish →").contains("| 1.50 ms |"), "{table}");
        assert!(row("claim →").contains("| 1.00 ms |"), "{table}");
        assert!(row("the model call").contains("| 1.00 ms |"), "{table}");
        assert!(row("attempt end").contains("| 1.00 ms |"), "{table}");
        assert!(row("submit → result").contains("| 7.00 ms |"), "{table}");
    }

    #[test]
    fn a_task_missing_a_span_is_not_counted() {
        let mut spans = task(1, 5);
        spans.retain(|r| r.span.name != "record_result");
        let table = report(&tasks(&spans, 0));
        assert!(table.contains("(0 tasks"), "{table}");
        assert!(table.contains("| - | - |"), "{table}");
    }
}
