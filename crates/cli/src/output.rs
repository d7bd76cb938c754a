//! What client commands print on stdout: [`json`] for scripts (one JSON value per
//! line), [`text`] for people. Both read the generated API messages directly: the CLI
//! only displays them, and must show what the server sent even when a field holds a
//! value this build does not know.

pub mod json;
pub mod text;

use std::io::Write;

use chrono::SecondsFormat;
use taskwire_protocol::{TaskStatus, pb, time};

/// The `--output` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// Readable text.
    #[default]
    Text,
    /// JSON: one value per line.
    Json,
}

/// Writes `value` as one line of JSON.
pub fn write_json(out: &mut impl Write, value: &serde_json::Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// Writes a task as `get` shows it: a text summary, or one JSON object.
pub fn write_task(out: &mut impl Write, format: OutputFormat, t: &pb::Task) -> std::io::Result<()> {
    match format {
        OutputFormat::Json => write_json(out, &json::task(t)),
        OutputFormat::Text => out.write_all(text::task_summary(t).as_bytes()),
    }
}

/// The lowercase status name (`completed`); `unspecified` for 0, `unknown` for numbers
/// this build does not know.
pub fn status_name(status: i32) -> &'static str {
    match TaskStatus::from_wire("status", status) {
        Ok(s) => s.as_str(),
        Err(_) if status == 0 => "unspecified",
        Err(_) => "unknown",
    }
}

/// A usage in words: `in 1000, out 500 tokens, $0.006`; the cost is `unpriced` when
/// no call counted was priced, and tokens of unpriced models are named apart. Input
/// read from or written to the provider's cache is named when there is some
/// (`in 1000 (800 cached, 100 written to cache)`).
pub fn usage_line(u: &pb::Usage) -> String {
    let cost = match u.cost_usd {
        None => "unpriced".to_owned(),
        Some(usd) if u.unpriced_tokens > 0 => {
            format!("${usd} (+{} tokens unpriced)", u.unpriced_tokens)
        }
        Some(usd) => format!("${usd}"),
    };
    let cache = match (u.cached_input_tokens, u.cache_write_input_tokens) {
        (0, 0) => String::new(),
        (read, 0) => format!(" ({read} cached)"),
        (read, written) => format!(" ({read} cached, {written} written to cache)"),
    };
    format!(
        "in {}{cache}, out {} tokens, {cost}",
        u.input_tokens, u.output_tokens
    )
}

/// Whether a result's status is `completed`: the only successful end.
pub fn is_completed(result: &pb::TaskResult) -> bool {
    TaskStatus::from_wire("status", result.status) == Ok(TaskStatus::Completed)
}

/// A timestamp as RFC 3339 in UTC with milliseconds; `None` when unset or out of range.
pub fn timestamp(t: Option<&prost_types::Timestamp>) -> Option<String> {
    let t = time::from_wire("timestamp", t?).ok()?;
    Some(t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

/// A duration in the notation the flags take (`15m`, `1h30m`); `None` when unset or
/// negative.
pub fn duration(d: Option<&prost_types::Duration>) -> Option<String> {
    std::time::Duration::try_from(*d?)
        .ok()
        .map(crate::duration::format_duration)
}

pub fn tool_call_state_name(state: i32) -> &'static str {
    match pb::ToolCallState::try_from(state) {
        Ok(pb::ToolCallState::Pending) => "pending",
        Ok(pb::ToolCallState::Running) => "running",
        Ok(pb::ToolCallState::Completed) => "completed",
        Ok(pb::ToolCallState::Error) => "error",
        Ok(pb::ToolCallState::Unspecified) => "unspecified",
        Err(_) => "unknown",
    }
}

pub fn agent_mode_name(mode: i32) -> &'static str {
    match pb::AgentMode::try_from(mode) {
        Ok(pb::AgentMode::Primary) => "primary",
        Ok(pb::AgentMode::Subagent) => "subagent",
        Ok(pb::AgentMode::All) => "all",
        Ok(pb::AgentMode::Unspecified) => "unspecified",
        Err(_) => "unknown",
    }
}

pub fn permission_action_name(action: i32) -> &'static str {
    match pb::PermissionAction::try_from(action) {
        Ok(pb::PermissionAction::Allow) => "allow",
        Ok(pb::PermissionAction::Ask) => "ask",
        Ok(pb::PermissionAction::Deny) => "deny",
        Ok(pb::PermissionAction::Unspecified) => "unspecified",
        Err(_) => "unknown",
    }
}

/// A schedule's overlap policy as `--overlap` takes it (`cancel_previous`); 0 means
/// `skip`, as the API reads it.
pub fn schedule_overlap_name(overlap: i32) -> &'static str {
    match pb::ScheduleOverlap::try_from(overlap) {
        Ok(pb::ScheduleOverlap::Allow) => "allow",
        Ok(pb::ScheduleOverlap::Skip | pb::ScheduleOverlap::Unspecified) => "skip",
        Ok(pb::ScheduleOverlap::CancelPrevious) => "cancel_previous",
        Ok(pb::ScheduleOverlap::QueueOne) => "queue_one",
        Err(_) => "unknown",
    }
}

/// A schedule's catch-up policy as `--catch-up` takes it (`all`); 0 means `skip`, as
/// the API reads it.
pub fn schedule_catch_up_name(catch_up: i32) -> &'static str {
    match pb::ScheduleCatchUp::try_from(catch_up) {
        Ok(pb::ScheduleCatchUp::Skip | pb::ScheduleCatchUp::Unspecified) => "skip",
        Ok(pb::ScheduleCatchUp::One) => "one",
        Ok(pb::ScheduleCatchUp::All) => "all",
        Err(_) => "unknown",
    }
}

/// What a schedule did at a tick (`skipped_overlap`).
pub fn schedule_run_outcome_name(outcome: i32) -> &'static str {
    match pb::ScheduleRunOutcome::try_from(outcome) {
        Ok(pb::ScheduleRunOutcome::Started) => "started",
        Ok(pb::ScheduleRunOutcome::SkippedOverlap) => "skipped_overlap",
        Ok(pb::ScheduleRunOutcome::Queued) => "queued",
        Ok(pb::ScheduleRunOutcome::Triggered) => "triggered",
        Ok(pb::ScheduleRunOutcome::Refused) => "refused",
        Ok(pb::ScheduleRunOutcome::Unspecified) => "unspecified",
        Err(_) => "unknown",
    }
}

/// The result's answer text, empty when there is none.
pub fn result_text(result: &pb::TaskResult) -> &str {
    result.output.as_ref().map_or("", |o| o.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_are_lowercase_and_tolerate_unknown_numbers() {
        assert_eq!(status_name(pb::TaskStatus::Completed as i32), "completed");
        assert_eq!(
            status_name(pb::TaskStatus::DeadlineExceeded as i32),
            "deadline_exceeded"
        );
        assert_eq!(status_name(0), "unspecified");
        assert_eq!(status_name(999), "unknown");
    }

    #[test]
    fn usage_lines_name_the_cost_or_say_unpriced() {
        let mut u = pb::Usage {
            input_tokens: 1000,
            output_tokens: 500,
            cost_usd: Some(0.006),
            unpriced_tokens: 0,
            cache_write_input_tokens: 0,
            cached_input_tokens: 0,
        };
        assert_eq!(usage_line(&u), "in 1000, out 500 tokens, $0.006");
        u.unpriced_tokens = 20;
        assert_eq!(
            usage_line(&u),
            "in 1000, out 500 tokens, $0.006 (+20 tokens unpriced)"
        );
        u.cost_usd = None;
        assert_eq!(usage_line(&u), "in 1000, out 500 tokens, unpriced");
        u.cached_input_tokens = 800;
        assert_eq!(
            usage_line(&u),
            "in 1000 (800 cached), out 500 tokens, unpriced"
        );
        u.cache_write_input_tokens = 100;
        assert_eq!(
            usage_line(&u),
            "in 1000 (800 cached, 100 written to cache), out 500 tokens, unpriced"
        );
    }

    #[test]
    fn timestamps_print_as_utc_rfc3339() {
        let t = prost_types::Timestamp {
            seconds: 1_767_366_245,
            nanos: 120_000_000,
        };
        assert_eq!(
            timestamp(Some(&t)).as_deref(),
            Some("2026-01-02T15:04:05.120Z")
        );
        assert_eq!(timestamp(None), None);
    }
}
