//! Readable renderings: progress lines, result summaries, task summaries and tables.

use std::fmt::Write as _;
use std::io::{self, Write};

use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::pb;

use super::{
    agent_mode_name, result_text, status_name, timestamp, tool_call_state_name, usage_line,
};

mod schedules;

pub use schedules::{relative, schedule_summary, schedule_table};

/// Prints progress events one line each. Text deltas, when shown, are written inline as
/// they arrive (so the answer appears as it is generated), and the next line starts on a
/// fresh line.
pub struct ProgressPrinter<W: Write> {
    out: W,
    show_text: bool,
    mid_line: bool,
    attempt: Option<u32>,
}

impl<W: Write> ProgressPrinter<W> {
    pub fn new(out: W, show_text: bool) -> Self {
        Self {
            out,
            show_text,
            mid_line: false,
            attempt: None,
        }
    }

    pub fn event(&mut self, p: &pb::TaskProgress) -> io::Result<()> {
        use pb::task_progress::Event;
        if self.attempt.is_some_and(|a| a != p.attempt) {
            // The task was redelivered: what follows replaces the earlier attempt's work.
            self.line(&format!("attempt {} started", p.attempt))?;
        }
        self.attempt = Some(p.attempt);
        let line = match &p.event {
            Some(Event::StepStarted(e)) => format!("step {} started", e.step),
            Some(Event::StepFinished(e)) => {
                let u = e.usage.unwrap_or_default();
                format!(
                    "step {} finished (in {}, out {} tokens)",
                    e.step, u.input_tokens, u.output_tokens
                )
            }
            // A running call's metadata update (a child's summary) adds no line.
            Some(Event::ToolCall(e))
                if e.metadata.is_some() && e.state == pb::ToolCallState::Running as i32 =>
            {
                return Ok(());
            }
            Some(Event::ToolCall(e)) => {
                let mut line = format!(
                    "tool {} [{}] {}",
                    e.tool,
                    tool_call_state_name(e.state),
                    e.title
                );
                if !e.task_id.is_empty() {
                    let _ = write!(line, " (in task {})", e.task_id);
                }
                if !e.error.is_empty() {
                    let _ = write!(line, ": {}", e.error);
                }
                line.trim_end().to_owned()
            }
            Some(Event::TextDelta(e)) => {
                if self.show_text && !e.text.is_empty() {
                    self.out.write_all(e.text.as_bytes())?;
                    self.mid_line = !e.text.ends_with('\n');
                    self.out.flush()?;
                }
                return Ok(());
            }
            Some(Event::ChildTask(e)) => {
                format!(
                    "child task {} ({}): {}",
                    e.task_id,
                    e.agent,
                    first_line(&e.description)
                )
            }
            Some(Event::ApprovalRequired(e)) => approval_line(&p.task_id, e),
            Some(Event::Compaction(e)) => {
                let u = e.usage.unwrap_or_default();
                format!(
                    "context compacted: about {} tokens summarised to {} (in {}, out {} tokens)",
                    e.tokens_before, e.tokens_after, u.input_tokens, u.output_tokens
                )
            }
            Some(Event::RateLimitWait(w)) => format!(
                "waiting {} ms for a slot in the rate limit of {}",
                w.wait_ms, w.model
            ),
            Some(Event::Hook(h)) => {
                let mut line = format!(
                    "hook {} `{}` on {}: {}",
                    h.event, h.hook, h.subject, h.outcome
                );
                if !h.message.is_empty() && h.outcome != "ok" {
                    let _ = write!(line, ": {}", first_line(&h.message));
                }
                line
            }
            Some(Event::Heartbeat(_)) | None => return Ok(()),
        };
        self.line(&line)
    }

    /// Ends a line left open by text deltas.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.mid_line {
            writeln!(self.out)?;
            self.mid_line = false;
        }
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn line(&mut self, line: &str) -> io::Result<()> {
        self.finish()?;
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }
}

/// `approval required: bash git push (request r1): answer with taskwire approve t1 r1`:
/// the command to run is spelled out, since the task waits until someone does. An ask
/// of a descendant (shown in its ancestors' progress) names the task that asks, and the
/// command answers that task.
fn approval_line(task_id: &str, e: &pb::ApprovalRequired) -> String {
    let mut what = e.permission.clone();
    if !e.patterns.is_empty() {
        what.push(' ');
        what.push_str(&e.patterns.join(", "));
    }
    let asking = if e.task_id.is_empty() {
        task_id
    } else {
        &e.task_id
    };
    let whose = if asking == task_id {
        String::new()
    } else {
        format!(" in task {asking}")
    };
    format!(
        "approval required{whose}: {what} (request {id}): answer with taskwire approve {asking} {id}",
        id = e.request_id
    )
}

/// `completed (attempt 1, 3 steps, own 150, subtree 400 tokens)`: the task's usage
/// ([`TaskUsage`]) labelled as `get` and `watch --tree` label it.
pub fn result_status_line(r: &pb::TaskResult) -> String {
    let steps = r.metrics.map_or(0, |m| m.steps);
    format!(
        "{} (attempt {}, {} step{}, {})",
        status_name(r.status),
        r.attempt,
        steps,
        if steps == 1 { "" } else { "s" },
        TaskUsage::of_result(r).tokens_line()
    )
}

/// The result's errors, one `error[code]: message` line each.
pub fn error_lines(r: &pb::TaskResult) -> String {
    r.errors.iter().fold(String::new(), |mut out, e| {
        let _ = writeln!(out, "error[{}]: {}", e.code, e.message);
        out
    })
}

/// The answer, ending with a newline unless empty: the structured answer as indented
/// JSON when the task had an output schema, else the text.
pub fn answer(r: &pb::TaskResult) -> String {
    if let Some(structured) = r.output.as_ref().and_then(|o| o.structured.as_ref()) {
        let value = taskwire_protocol::value::struct_to_json(structured);
        return format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
        );
    }
    let text = result_text(r);
    if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

/// `taskwire get`: one labelled field per line, then the answer. `usage` is the task's
/// own, `subtree` its own and its descendants' ([`TaskUsage`]).
pub fn task_summary(t: &pb::Task) -> String {
    let spent = TaskUsage::of_task(t);
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    let time =
        |ts: Option<&prost_types::Timestamp>| timestamp(ts).unwrap_or_else(|| "-".to_owned());
    let mut rows: Vec<(&str, String)> = vec![
        ("task", t.task_id.clone()),
        ("title", dash(&t.title)),
        ("status", status_name(t.status).to_owned()),
        ("agent", t.agent.clone()),
        ("priority", t.priority.to_string()),
        ("parent", dash(&t.parent_task_id)),
        ("trace", t.trace_id.clone()),
        ("tenant", dash(&t.tenant)),
        ("attempt", attempt_of(t)),
        ("depth", t.depth.to_string()),
        ("created", time(t.created_at.as_ref())),
        ("updated", time(t.updated_at.as_ref())),
        ("deadline", time(t.deadline.as_ref())),
        ("prompt", truncate(first_line(&t.prompt), 100)),
        ("usage", usage_line(&spent.own)),
        ("subtree", usage_line(&spent.subtree)),
    ];
    if !t.wait.is_empty() {
        let until = time(t.wait_until.as_ref());
        rows.insert(3, ("waiting", format!("{} until {until}", t.wait)));
    }
    if t.not_before.is_some() {
        rows.push(("starts", time(t.not_before.as_ref())));
    }
    let budget: Vec<String> = t
        .max_tokens
        .map(|n| format!("max {n} tokens"))
        .into_iter()
        .chain(t.max_cost_usd.map(|usd| format!("max ${usd}")))
        .collect();
    if !budget.is_empty() {
        rows.push(("budget", budget.join(", ")));
    }
    if let Some(r) = &t.result {
        rows.push(("result", result_status_line(r)));
        if let Some(m) = r.metrics.filter(|m| m.latency_ms > 0) {
            rows.push(("latency", format!("{} ms", m.latency_ms)));
        }
        rows.push(("session", dash(&r.session_id)));
        rows.push(("worker", dash(&r.worker_id)));
    }
    let mut out = String::new();
    for (label, value) in rows {
        let _ = writeln!(out, "{label:<9} {value}");
    }
    // The attempt history explains retries: which worker ran each, when, and why it ended.
    for a in &t.attempts {
        let _ = writeln!(out, "{:<9} {}", "attempts", attempt_line(a));
    }
    // The result webhook and each of its deliveries.
    if let Some(w) = &t.webhook {
        let _ = writeln!(out, "{:<9} {} {}", "webhook", w.url, webhook_state(w));
        for d in &w.deliveries {
            let answer = match (d.status_code, d.error.as_str()) {
                (0, e) => e.to_owned(),
                (code, "") => format!("HTTP {code}"),
                (code, e) => format!("HTTP {code}: {e}"),
            };
            let at = timestamp(d.started_at.as_ref()).unwrap_or_default();
            let _ = writeln!(
                out,
                "{:<9} #{} at {at}: {answer} ({} ms)",
                "delivery", d.attempt, d.duration_ms
            );
        }
    }
    if let Some(r) = &t.result {
        for c in &r.tool_calls {
            let _ = writeln!(
                out,
                "{:<9} {} [{}] {}",
                "tool",
                c.tool,
                tool_call_state_name(c.state),
                c.title
            );
        }
        // What the answer drew on: files read, URLs fetched, commands run.
        for p in &r.provenance {
            let _ = writeln!(out, "{:<9} {} {}", "source", p.source, p.uri);
        }
        out.push_str(&error_lines(r));
        let text = answer(r);
        if !text.is_empty() {
            out.push('\n');
            out.push_str(&text);
        }
    }
    out
}

/// `#1 error on w1 from <started> to <finished>: model unavailable (retryable)`; the
/// parts the server left unset are left out.
fn attempt_line(a: &pb::Attempt) -> String {
    let mut line = format!("#{} {}", a.attempt, status_name(a.status));
    if !a.worker_id.is_empty() {
        let _ = write!(line, " on {}", a.worker_id);
    }
    if let Some(started) = timestamp(a.started_at.as_ref()) {
        let _ = write!(line, " from {started}");
    }
    if let Some(finished) = timestamp(a.finished_at.as_ref()) {
        let _ = write!(line, " to {finished}");
    }
    if !a.error.is_empty() {
        let retry = if a.retryable { " (retryable)" } else { "" };
        let _ = write!(line, ": {}{retry}", first_line(&a.error));
    }
    line
}

/// `delivered (2 attempts)`, `pending (1 attempt, next at ...)`.
fn webhook_state(w: &pb::Webhook) -> String {
    let state = taskwire_protocol::status::webhook_state_name(w.state);
    let plural = if w.attempts == 1 { "" } else { "s" };
    match timestamp(w.next_attempt_at.as_ref()) {
        Some(next) => format!("{state} ({} attempt{plural}, next at {next})", w.attempts),
        None => format!("{state} ({} attempt{plural})", w.attempts),
    }
}

/// `2`, or `2 of 3` when the attempt budget is known.
fn attempt_of(t: &pb::Task) -> String {
    match t.max_attempts {
        0 => t.attempt.to_string(),
        max => format!("{} of {max}", t.attempt),
    }
}

/// `taskwire ls`.
pub fn task_table(tasks: &[pb::Task]) -> String {
    let rows = tasks
        .iter()
        .map(|t| {
            vec![
                t.task_id.clone(),
                if t.parent_task_id.is_empty() {
                    "-".to_owned()
                } else {
                    t.parent_task_id.clone()
                },
                t.agent.clone(),
                status_name(t.status).to_owned(),
                t.priority.to_string(),
                t.attempt.to_string(),
                timestamp(t.created_at.as_ref()).unwrap_or_else(|| "-".to_owned()),
                if t.title.is_empty() {
                    "-".to_owned()
                } else {
                    t.title.clone()
                },
            ]
        })
        .collect::<Vec<_>>();
    table(
        &[
            "ID", "PARENT", "AGENT", "STATUS", "PRI", "ATTEMPT", "CREATED", "TITLE",
        ],
        &rows,
    )
}

/// `taskwire agents`.
pub fn agent_table(agents: &[pb::AgentSpec]) -> String {
    let rows = agents
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                agent_mode_name(a.mode).to_owned(),
                if a.hidden { "yes" } else { "no" }.to_owned(),
                truncate(first_line(&a.description), 80),
            ]
        })
        .collect::<Vec<_>>();
    table(&["NAME", "MODE", "HIDDEN", "DESCRIPTION"], &rows)
}

/// Left-aligned columns two spaces apart; the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(attempt: u32, event: pb::task_progress::Event) -> pb::TaskProgress {
        pb::TaskProgress {
            attempt,
            event: Some(event),
            ..Default::default()
        }
    }

    #[test]
    fn progress_prints_one_line_per_event_with_text_inline() {
        use pb::task_progress::Event;
        let mut p = ProgressPrinter::new(Vec::new(), true);
        let events = [
            Event::StepStarted(pb::StepStarted { step: 1 }),
            Event::ToolCall(pb::ToolCallEvent {
                tool: "grep".to_owned(),
                state: pb::ToolCallState::Running as i32,
                title: "grep TODO in src".to_owned(),
                ..Default::default()
            }),
            Event::Heartbeat(pb::Heartbeat {}),
            Event::TextDelta(pb::TextDelta {
                text: "Found ".to_owned(),
            }),
            Event::TextDelta(pb::TextDelta {
                text: "two".to_owned(),
            }),
            Event::StepFinished(pb::StepFinished {
                step: 1,
                usage: Some(pb::Usage {
                    input_tokens: 120,
                    output_tokens: 30,
                    ..Default::default()
                }),
            }),
        ];
        for e in events {
            p.event(&progress(1, e)).expect("write to vec");
        }
        p.event(&progress(
            2,
            Event::StepStarted(pb::StepStarted { step: 1 }),
        ))
        .expect("write to vec");
        p.finish().expect("write to vec");
        let out = String::from_utf8(p.into_inner()).expect("utf-8");
        assert_eq!(
            out,
            "step 1 started\ntool grep [running] grep TODO in src\nFound two\n\
             step 1 finished (in 120, out 30 tokens)\nattempt 2 started\nstep 1 started\n"
        );
    }

    #[test]
    fn progress_without_text_skips_deltas() {
        let mut p = ProgressPrinter::new(Vec::new(), false);
        let delta = pb::task_progress::Event::TextDelta(pb::TextDelta {
            text: "hi".to_owned(),
        });
        p.event(&progress(1, delta)).expect("write to vec");
        p.finish().expect("write to vec");
        assert!(p.into_inner().is_empty());
    }

    #[test]
    fn tool_errors_follow_the_title() {
        let mut p = ProgressPrinter::new(Vec::new(), false);
        let call = pb::task_progress::Event::ToolCall(pb::ToolCallEvent {
            tool: "bash".to_owned(),
            state: pb::ToolCallState::Error as i32,
            title: "cargo test".to_owned(),
            error: "exit status 101".to_owned(),
            ..Default::default()
        });
        p.event(&progress(1, call)).expect("write to vec");
        assert_eq!(
            String::from_utf8(p.into_inner()).expect("utf-8"),
            "tool bash [error] cargo test: exit status 101\n"
        );
    }

    #[test]
    fn approval_requests_say_how_to_answer_them() {
        let mut p = ProgressPrinter::new(Vec::new(), false);
        let ask = pb::task_progress::Event::ApprovalRequired(pb::ApprovalRequired {
            request_id: "r1".to_owned(),
            permission: "bash".to_owned(),
            patterns: vec!["git push".to_owned(), "git push *".to_owned()],
            task_id: "t1".to_owned(),
        });
        p.event(&pb::TaskProgress {
            task_id: "t1".to_owned(),
            ..progress(1, ask)
        })
        .expect("write to vec");
        assert_eq!(
            String::from_utf8(p.into_inner()).expect("utf-8"),
            "approval required: bash git push, git push * (request r1): \
             answer with taskwire approve t1 r1\n"
        );
    }

    #[test]
    fn a_descendants_approval_names_the_task_that_asks_and_how_to_answer_it() {
        let mut p = ProgressPrinter::new(Vec::new(), false);
        let ask = pb::task_progress::Event::ApprovalRequired(pb::ApprovalRequired {
            request_id: "r1".to_owned(),
            permission: "bash".to_owned(),
            patterns: vec!["touch x".to_owned()],
            task_id: "child7".to_owned(),
        });
        p.event(&pb::TaskProgress {
            task_id: "root1".to_owned(),
            ..progress(1, ask)
        })
        .expect("write to vec");
        assert_eq!(
            String::from_utf8(p.into_inner()).expect("utf-8"),
            "approval required in task child7: bash touch x (request r1): \
             answer with taskwire approve child7 r1\n"
        );
    }

    #[test]
    fn child_tasks_name_their_agent_and_description() {
        let mut p = ProgressPrinter::new(Vec::new(), false);
        let child = pb::task_progress::Event::ChildTask(pb::ChildTask {
            task_id: "c1".to_owned(),
            agent: "explore".to_owned(),
            description: "find the parser\nand its tests".to_owned(),
            session_id: "s1".to_owned(),
            call_id: "t1".to_owned(),
        });
        p.event(&progress(1, child)).expect("write to vec");
        let call = |state: pb::ToolCallState, task_id: &str, metadata| {
            pb::task_progress::Event::ToolCall(pb::ToolCallEvent {
                call_id: "r1".to_owned(),
                tool: "read".to_owned(),
                state: state as i32,
                title: "read a.rs".to_owned(),
                error: String::new(),
                task_id: task_id.to_owned(),
                metadata,
            })
        };
        // The child's call names its task; a metadata update adds no line.
        p.event(&progress(1, call(pb::ToolCallState::Completed, "c1", None)))
            .expect("write to vec");
        let update = Some(prost_types::Struct::default());
        p.event(&progress(1, call(pb::ToolCallState::Running, "", update)))
            .expect("write to vec");
        assert_eq!(
            String::from_utf8(p.into_inner()).expect("utf-8"),
            "child task c1 (explore): find the parser\ntool read [completed] read a.rs (in task c1)\n"
        );
    }

    #[test]
    fn summary_lists_every_attempt_with_worker_times_and_error() {
        let at = |seconds| Some(prost_types::Timestamp { seconds, nanos: 0 });
        let t = pb::Task {
            task_id: "t1".to_owned(),
            status: pb::TaskStatus::Running as i32,
            attempt: 2,
            max_attempts: 3,
            attempts: vec![
                pb::Attempt {
                    attempt: 1,
                    worker_id: "w1".to_owned(),
                    status: pb::TaskStatus::Queued as i32,
                    error: "model unavailable\nretry later".to_owned(),
                    retryable: true,
                    started_at: at(1_767_366_245),
                    finished_at: at(1_767_366_250),
                },
                pb::Attempt {
                    attempt: 2,
                    worker_id: "w2".to_owned(),
                    status: pb::TaskStatus::Running as i32,
                    started_at: at(1_767_366_260),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let s = task_summary(&t);
        assert!(s.contains("attempt   2 of 3\n"), "{s}");
        assert!(
            s.contains(
                "attempts  #1 queued on w1 from 2026-01-02T15:04:05.000Z \
                 to 2026-01-02T15:04:10.000Z: model unavailable (retryable)\n\
                 attempts  #2 running on w2 from 2026-01-02T15:04:20.000Z\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn result_status_line_names_status_attempt_steps_and_own_and_subtree_tokens() {
        let r = pb::TaskResult {
            status: pb::TaskStatus::MaxSteps as i32,
            attempt: 1,
            usage: Some(pb::Usage {
                input_tokens: 5,
                output_tokens: 6,
                ..Default::default()
            }),
            own_usage: Some(pb::Usage {
                input_tokens: 2,
                output_tokens: 1,
                ..Default::default()
            }),
            metrics: Some(pb::Metrics {
                latency_ms: 1,
                steps: 1,
            }),
            ..Default::default()
        };
        assert_eq!(
            result_status_line(&r),
            "max_steps (attempt 1, 1 step, own 3, subtree 11 tokens)"
        );
    }

    #[test]
    fn tables_align_columns_and_leave_the_last_unpadded() {
        let rows = vec![vec![
            "a".to_owned(),
            "long value".to_owned(),
            "x".to_owned(),
        ]];
        assert_eq!(
            table(&["ID", "NAME", "LAST"], &rows),
            "ID  NAME        LAST\na   long value  x\n"
        );
    }

    #[test]
    fn summary_ends_with_the_answer() {
        let t = pb::Task {
            task_id: "t1".to_owned(),
            title: "Fix the parser".to_owned(),
            status: pb::TaskStatus::Completed as i32,
            result: Some(pb::TaskResult {
                status: pb::TaskStatus::Completed as i32,
                output: Some(pb::Output {
                    text: "done".to_owned(),
                    structured: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = task_summary(&t);
        assert!(
            s.starts_with("task      t1\ntitle     Fix the parser\nstatus    completed\n"),
            "{s}"
        );
        assert!(s.ends_with("\n\ndone\n"), "{s}");
    }

    #[test]
    fn summary_lists_the_provenance_and_a_structured_answer_as_json() {
        let structured = taskwire_protocol::value::json_to_struct(&serde_json::json!({"count": 2}));
        let t = pb::Task {
            task_id: "t1".to_owned(),
            status: pb::TaskStatus::Completed as i32,
            result: Some(pb::TaskResult {
                status: pb::TaskStatus::Completed as i32,
                output: Some(pb::Output {
                    text: "```json\n{\"count\": 2}\n```".to_owned(),
                    structured: Some(structured),
                }),
                provenance: vec![
                    pb::Provenance {
                        source: "read".to_owned(),
                        uri: "src/lib.rs".to_owned(),
                        excerpt: "pub fn run() {}".to_owned(),
                    },
                    pb::Provenance {
                        source: "bash".to_owned(),
                        uri: "git log -1".to_owned(),
                        excerpt: String::new(),
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = task_summary(&t);
        assert!(
            s.contains("source    read src/lib.rs\nsource    bash git log -1\n"),
            "{s}"
        );
        assert!(
            s.ends_with("\n\n{\n  \"count\": 2.0\n}\n")
                || s.ends_with("\n\n{\n  \"count\": 2\n}\n"),
            "{s}"
        );
    }
}
