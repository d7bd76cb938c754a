//! The real-task phase's figures: claim → first model call from the spans, workspace
//! preparation from the worker's log, and the table, one column per repository, as a
//! Markdown section of its own in `docs/performance.md` (between [`BEGIN`] and
//! [`END`]).
//!
//! The claim is the start of the attempt's `invoke_agent` span (the worker opens it as
//! soon as its claim is granted); the model call is the earliest `chat` span below it.
//! A parent's span is told from its child's by the task it names (`task.id`): the
//! benchmark knows its parents' ids from their submits.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::time::Duration;

use taskwire_test_support::otlp::Received;

use crate::load::quantile_ms;
use crate::repos::Prepared;

/// Marks the start of the phase's generated section.
pub const BEGIN: &str = "<!-- taskwire-bench repos: begin -->";
/// Marks its end.
pub const END: &str = "<!-- taskwire-bench repos: end -->";

/// What one repository's runs measured.
#[derive(Debug, Clone)]
pub struct RepoFigures {
    pub repo: Prepared,
    pub runs: usize,
    /// CPU per run (user + system, reaped child processes included).
    pub cpu_coordinator: Duration,
    pub cpu_worker: Duration,
    /// Submit → the parent's result recorded.
    pub run_time: Vec<Duration>,
    /// Claim → first model call, of the parents (`general`) and children (`explore`).
    pub first_call: Split,
    /// `workspace ready … elapsed_ms` of the worker's log.
    pub workspace_ready: Split,
}

/// A figure's samples, for the parents and for the children.
#[derive(Debug, Clone, Default)]
pub struct Split {
    pub parent: Vec<Duration>,
    pub child: Vec<Duration>,
}

/// Claim → first model call of every attempt in the traces of `parents` (task ids),
/// parents and children apart. Attempts without a model call yet are left out.
pub fn first_model_calls(spans: &[Received], parents: &HashSet<String>) -> Split {
    let by_id: HashMap<&[u8], &Received> = spans
        .iter()
        .map(|r| (r.span.span_id.as_slice(), r))
        .collect();
    let attempt_of = |chat: &Received| {
        let mut at = chat;
        // Bounded: a malformed trace cannot loop.
        for _ in 0..64 {
            let up = by_id.get(at.span.parent_span_id.as_slice())?;
            if up.span.name.starts_with("invoke_agent ") {
                return Some(*up);
            }
            at = up;
        }
        None
    };
    let mut first: HashMap<&[u8], u64> = HashMap::new();
    for chat in spans.iter().filter(|r| r.span.name.starts_with("chat ")) {
        if let Some(attempt) = attempt_of(chat) {
            let start = first
                .entry(attempt.span.span_id.as_slice())
                .or_insert(u64::MAX);
            *start = (*start).min(chat.span.start_time_unix_nano);
        }
    }
    let attempts: Vec<&Received> = spans
        .iter()
        .filter(|r| r.span.name.starts_with("invoke_agent "))
        .collect();
    let traces: HashSet<&[u8]> = attempts
        .iter()
        .filter(|r| r.attr("task.id").is_some_and(|t| parents.contains(&t)))
        .map(|r| r.span.trace_id.as_slice())
        .collect();
    let mut split = Split::default();
    for attempt in attempts {
        if !traces.contains(attempt.span.trace_id.as_slice()) {
            continue;
        }
        let Some(chat) = first.get(attempt.span.span_id.as_slice()) else {
            continue;
        };
        let took = Duration::from_nanos(chat.saturating_sub(attempt.span.start_time_unix_nano));
        let is_parent = attempt
            .attr("task.id")
            .is_some_and(|t| parents.contains(&t));
        match is_parent {
            true => split.parent.push(took),
            false => split.child.push(took),
        }
    }
    split
}

/// The `workspace ready` lines of a worker's log (text format, at debug for
/// `taskwire_worker::workspace`): each one's task id and `elapsed_ms`.
pub fn workspace_ready(log: &str) -> Vec<(String, Duration)> {
    let field = |line: &str, name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(|v| v.trim_matches('"').to_owned())
    };
    log.lines()
        .filter(|l| l.contains("workspace ready"))
        .filter_map(|l| {
            let task = field(l, "task.id=")?;
            let ms = field(l, "elapsed_ms=")?.parse().ok()?;
            Some((task, Duration::from_millis(ms)))
        })
        .collect()
}

/// `ready` split by whether the task is one of `parents`.
pub fn split_by_task(ready: Vec<(String, Duration)>, parents: &HashSet<String>) -> Split {
    let mut split = Split::default();
    for (task, took) in ready {
        match parents.contains(&task) {
            true => split.parent.push(took),
            false => split.child.push(took),
        }
    }
    split
}

/// `n` with a comma between thousands: `10,346`.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in ms with as many decimals as it needs.
pub fn ms(d: f64) -> String {
    match d {
        d if d < 10.0 => format!("{d:.2} ms"),
        d if d < 100.0 => format!("{d:.1} ms"),
        d => format!("{d:.0} ms"),
    }
}

/// `p50 …, p99 …` of `samples` (with their count when `count`), or, without any, `-`
/// (`none made` when counted: no workspace was made).
fn quantiles(samples: &[Duration], count: bool) -> String {
    if samples.is_empty() {
        return if count { "none made" } else { "-" }.to_owned();
    }
    let mut s = samples.to_vec();
    let (p50, p99) = (quantile_ms(&mut s, 0.5), quantile_ms(&mut s, 0.99));
    let n = if count {
        format!(" ({})", s.len())
    } else {
        String::new()
    };
    format!("p50 {}, p99 {}{n}", ms(p50), ms(p99))
}

/// The table: one row per figure, one column per repository, then the target.
pub fn table(figures: &[RepoFigures]) -> String {
    let mut out = String::from("| figure |");
    for f in figures {
        let _ = write!(
            out,
            " {} ({} files) |",
            f.repo.repo.label(),
            count(f.repo.files)
        );
    }
    out.push_str(" target |\n|---|");
    out.push_str(&"---|".repeat(figures.len() + 1));
    out.push('\n');
    let cpu = |d: Duration| ms(d.as_secs_f64() * 1e3);
    let mut row = |what: &str, cell: &dyn Fn(&RepoFigures) -> String, target: &str| {
        let _ = write!(out, "| {what} |");
        for f in figures {
            let _ = write!(out, " {} |", cell(f));
        }
        let _ = writeln!(out, " {target} |");
    };
    row(
        "CPU per run: coordinator, with its child processes",
        &|f| cpu(f.cpu_coordinator),
        "-",
    );
    row(
        "CPU per run: worker, with its child processes",
        &|f| cpu(f.cpu_worker),
        "-",
    );
    row(
        "CPU per run: coordinator + worker",
        &|f| cpu(f.cpu_coordinator + f.cpu_worker),
        "≤ 15 ms (this repository)",
    );
    row(
        "run time, submit → the parent's result",
        &|f| quantiles(&f.run_time, false),
        "p50 ≤ 200 ms (this repository)",
    );
    row(
        "claim → first model call, `general` parent (may write)",
        &|f| quantiles(&f.first_call.parent, false),
        "p50 ≤ 20 ms (10,000-file repository)",
    );
    row(
        "claim → first model call, `explore` child (read-only)",
        &|f| quantiles(&f.first_call.child, false),
        "p50 ≤ 2 ms (10,000-file repository)",
    );
    row(
        "workspace ready (worker's log, whole ms; how many): parent",
        &|f| quantiles(&f.workspace_ready.parent, true),
        "-",
    );
    row(
        "workspace ready (worker's log, whole ms; how many): child",
        &|f| quantiles(&f.workspace_ready.child, true),
        "-",
    );
    out
}

/// The section: heading, machine, command, loads, repositories, table and how.
pub fn section(
    command: &str,
    loads: &[(String, String)],
    figures: &[RepoFigures],
    at_once: usize,
) -> String {
    let mut s = String::new();
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(s, "### Real tasks: run of {date}\n");
    let _ = writeln!(s, "- machine: {}", crate::report::machine());
    let _ = writeln!(s, "- command: `{command}`");
    for (when, load) in loads {
        let _ = writeln!(s, "- load average {when}: {load}");
    }
    for f in figures {
        let lookup = f.repo.repo.lookup();
        let _ = writeln!(
            s,
            "- {}: commit `{}`, {} files; the child greps `{}` and reads `{}`",
            f.repo.repo.label(),
            &f.repo.commit[..f.repo.commit.len().min(12)],
            count(f.repo.files),
            lookup.grep,
            lookup.read
        );
    }
    let runs = figures.first().map_or(0, |f| f.runs);
    let _ = writeln!(
        s,
        "\n{runs} runs per repository, {at_once} at a time, on one worker with `--concurrency {}`:\n",
        at_once * 2
    );
    s.push_str(&table(figures));
    let _ = writeln!(s, "{END}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::Span;

    fn span(trace: u8, id: u8, parent: u8, name: &str, start_ms: u64, task: &str) -> Received {
        let attributes = (!task.is_empty())
            .then(|| KeyValue {
                key: "task.id".to_owned(),
                value: Some(AnyValue {
                    value: Some(any_value::Value::StringValue(task.to_owned())),
                }),
                ..Default::default()
            })
            .into_iter()
            .collect();
        Received {
            span: Span {
                trace_id: vec![trace; 16],
                span_id: vec![id; 8],
                parent_span_id: if parent == 0 { vec![] } else { vec![parent; 8] },
                name: name.to_owned(),
                start_time_unix_nano: start_ms * 1_000_000,
                end_time_unix_nano: start_ms * 1_000_000 + 1,
                attributes,
                ..Default::default()
            },
            service: String::new(),
            instance: String::new(),
        }
    }

    /// A run: parent attempt 1 (chats at +5 and +90 ms), its tool span 2, the child's
    /// attempt 3 below it (a chat at +40 ms, under a tool span 6 at +45).
    fn run(trace: u8, at: u64, parent: &str) -> Vec<Received> {
        let id = |n: u8| trace * 10 + n;
        vec![
            span(trace, id(1), 0, "invoke_agent general", at, parent),
            span(trace, id(4), id(1), "chat scripted", at + 90, ""),
            span(trace, id(5), id(1), "chat scripted", at + 5, ""),
            span(trace, id(2), id(1), "execute_tool task", at + 6, ""),
            span(
                trace,
                id(3),
                id(2),
                "invoke_agent explore",
                at + 20,
                "child",
            ),
            span(trace, id(6), id(3), "execute_tool grep", at + 45, ""),
            span(trace, id(7), id(6), "chat nested", at + 60, ""),
            span(trace, id(8), id(3), "chat scripted", at + 40, ""),
        ]
    }

    #[test]
    fn claim_to_first_model_call_is_per_attempt_and_parents_are_told_from_children() {
        let mut spans = run(1, 1000, "p1");
        spans.extend(run(2, 2000, "p2"));
        spans.extend(run(3, 3000, "not-ours"));
        let parents: HashSet<String> = ["p1".to_owned(), "p2".to_owned()].into();
        let split = first_model_calls(&spans, &parents);
        assert_eq!(split.parent, vec![Duration::from_millis(5); 2]);
        assert_eq!(split.child, vec![Duration::from_millis(20); 2]);
    }

    #[test]
    fn an_attempt_without_a_model_call_is_left_out() {
        let mut spans = run(1, 1000, "p1");
        spans.retain(|r| !(r.span.name.starts_with("chat") && r.span.span_id[0] != 15));
        let split = first_model_calls(&spans, &["p1".to_owned()].into());
        assert_eq!(split.parent, vec![Duration::from_millis(5)]);
        assert!(split.child.is_empty(), "{split:?}");
    }

    #[test]
    fn workspace_ready_lines_give_their_task_and_time() {
        let log = "\
2026-11-27T17:00:00.000001Z DEBUG taskwire_worker::workspace: workspace ready task.id=0193a workspace=/tmp/w/0193a-1 elapsed_ms=341
2026-11-27T17:00:00.000002Z  WARN taskwire_worker: something else task.id=x elapsed_ms=9
2026-11-27T17:00:00.000003Z DEBUG invoke_agent{task.id=0193b}: taskwire_worker::workspace: workspace ready task.id=0193b workspace=/tmp/w/0193b-1 elapsed_ms=7
";
        let ready = workspace_ready(log);
        assert_eq!(
            ready,
            vec![
                ("0193a".to_owned(), Duration::from_millis(341)),
                ("0193b".to_owned(), Duration::from_millis(7)),
            ]
        );
        let split = split_by_task(ready, &["0193a".to_owned()].into());
        assert_eq!(split.parent, vec![Duration::from_millis(341)]);
        assert_eq!(split.child, vec![Duration::from_millis(7)]);
    }

    #[test]
    fn figures_keep_the_digits_that_matter_and_counts_their_commas() {
        assert_eq!(ms(0.1234), "0.12 ms");
        assert_eq!(ms(14.56), "14.6 ms");
        assert_eq!(ms(1360.4), "1360 ms");
        assert_eq!(count(420), "420");
        assert_eq!(count(10_346), "10,346");
        assert_eq!(count(1_000_000), "1,000,000");
    }

    #[test]
    fn the_table_has_a_column_per_repository_and_quantiles_per_figure() {
        let prepared = |repo| Prepared {
            repo,
            path: "/r".into(),
            commit: "83e2729abcdef0123".to_owned(),
            files: 1400,
        };
        let figures = |repo| RepoFigures {
            repo: prepared(repo),
            runs: 2,
            cpu_coordinator: Duration::from_micros(2500),
            cpu_worker: Duration::from_micros(12_500),
            run_time: vec![Duration::from_millis(100), Duration::from_millis(300)],
            first_call: Split {
                parent: vec![Duration::from_micros(1500)],
                child: Vec::new(),
            },
            workspace_ready: Split::default(),
        };
        let table = table(&[
            figures(crate::repos::Repo::This),
            figures(crate::repos::Repo::Tabler),
        ]);
        let line = |start: &str| {
            table
                .lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start} in {table}"))
                .to_owned()
        };
        assert!(line("| figure |").contains("| this repository (1,400 files) |"));
        assert_eq!(line("|---").matches("---").count(), 4);
        assert_eq!(
            line("| CPU per run: coordinator + worker"),
            "| CPU per run: coordinator + worker | 15.0 ms | 15.0 ms | ≤ 15 ms (this repository) |"
        );
        assert!(line("| run time").contains("| p50 300 ms, p99 300 ms |"));
        assert!(line("| claim → first model call, `general`").contains("p50 1.50 ms"));
        assert!(line("| claim → first model call, `explore`").contains("| - | - |"));
        assert!(line("| workspace ready").contains("| none made | none made |"));
        let s = section(
            "taskwire-bench --only repos",
            &[],
            &[figures(crate::repos::Repo::This)],
            8,
        );
        assert!(s.starts_with(BEGIN) && s.trim_end().ends_with(END), "{s}");
        assert!(s.contains("commit `83e2729abcde`, 1,400 files"), "{s}");
        assert!(s.contains("2 runs per repository, 8 at a time"), "{s}");
    }
}
