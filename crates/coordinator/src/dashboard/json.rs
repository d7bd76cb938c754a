//! API messages as the JSON the dashboard's pages read.
//!
//! Hand-written rather than derived: the generated prost types carry no serde, and the
//! pages want lowercase status names and RFC 3339 times rather than the wire's enums
//! and timestamps. Only what the pages show is converted.

use serde_json::{Value, json};
use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::{TaskStatus, pb};

/// A wire status as the lowercase name the CLI and the store use (`completed`).
pub fn status(value: i32) -> &'static str {
    TaskStatus::from_wire("status", value).map_or("unknown", TaskStatus::as_str)
}

fn time(t: Option<&prost_types::Timestamp>) -> Value {
    t.and_then(|t| chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
        .map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
}

fn usage(u: Option<&pb::Usage>) -> Value {
    let u = u.cloned().unwrap_or_default();
    // `cost_usd` is null for calls to models the catalogue has no price for.
    json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "cost_usd": u.cost_usd})
}

/// A task, with its usage ([`TaskUsage`]: `usage` its own, `subtree` with its
/// descendants', recorded results only) and its result once finished.
pub fn task(t: &pb::Task) -> Value {
    let spent = TaskUsage::of_task(t);
    // The worker of the latest attempt; empty while queued.
    let worker = t
        .attempts
        .last()
        .map(|a| a.worker_id.as_str())
        .unwrap_or("");
    json!({
        "task_id": t.task_id,
        "parent_task_id": t.parent_task_id,
        "trace_id": t.trace_id,
        "tenant": t.tenant,
        "agent": t.agent,
        "prompt": t.prompt,
        "title": t.title,
        "status": status(t.status),
        "priority": t.priority,
        "wait": t.wait,
        "wait_until": time(t.wait_until.as_ref()),
        "attempt": t.attempt,
        "depth": t.depth,
        "worker": worker,
        "created_at": time(t.created_at.as_ref()),
        "updated_at": time(t.updated_at.as_ref()),
        "started_at": time(t.attempts.first().and_then(|a| a.started_at.as_ref())),
        "finished_at": time(t.attempts.last().and_then(|a| a.finished_at.as_ref())),
        "usage": usage(Some(&spent.own)),
        "subtree": usage(Some(&spent.subtree)),
        "result": t.result.as_ref().map_or(Value::Null, result),
    })
}

/// A task's result: output, patch, errors, and the task's usage ([`TaskUsage`]:
/// `own_usage` its own, `usage` its subtree's).
pub fn result(r: &pb::TaskResult) -> Value {
    let spent = TaskUsage::of_result(r);
    json!({
        "task_id": r.task_id,
        "status": status(r.status),
        "text": r.output.as_ref().map(|o| o.text.as_str()).unwrap_or(""),
        "patch": r.patch,
        "errors": r.errors.iter().map(|e| json!({"code": e.code, "message": e.message})).collect::<Vec<_>>(),
        "own_usage": usage(Some(&spent.own)),
        "usage": usage(Some(&spent.subtree)),
        "latency_ms": r.metrics.as_ref().map_or(0, |m| m.latency_ms),
        "steps": r.metrics.as_ref().map_or(0, |m| m.steps),
        "session_id": r.session_id,
        "worker": r.worker_id,
    })
}

/// One progress event; `event` names its kind.
pub fn progress(p: &pb::TaskProgress) -> Value {
    use pb::task_progress::Event;
    let event = match &p.event {
        Some(Event::StepStarted(s)) => json!({"kind": "step_started", "step": s.step}),
        Some(Event::StepFinished(s)) => {
            json!({"kind": "step_finished", "step": s.step, "usage": usage(s.usage.as_ref())})
        }
        Some(Event::ToolCall(c)) => json!({
            "kind": "tool_call",
            "call_id": c.call_id,
            "tool": c.tool,
            "state": tool_state(c.state),
            "title": c.title,
            "error": c.error,
            "task_id": c.task_id,
        }),
        Some(Event::TextDelta(t)) => json!({"kind": "text", "text": t.text}),
        Some(Event::ChildTask(c)) => json!({
            "kind": "child_task",
            "task_id": c.task_id,
            "agent": c.agent,
            "description": c.description,
            "call_id": c.call_id,
        }),
        Some(Event::ApprovalRequired(a)) => json!({
            "kind": "approval_required",
            "request_id": a.request_id,
            "permission": a.permission,
            "patterns": a.patterns,
            "task_id": if a.task_id.is_empty() { &p.task_id } else { &a.task_id },
        }),
        Some(Event::Compaction(c)) => json!({
            "kind": "compaction",
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
        }),
        Some(Event::RateLimitWait(w)) => json!({
            "kind": "rate_limit_wait",
            "model": w.model,
            "wait_ms": w.wait_ms,
        }),
        Some(Event::Heartbeat(_)) | None => json!({"kind": "heartbeat"}),
    };
    json!({
        "task_id": p.task_id,
        "attempt": p.attempt,
        "seq": p.seq,
        "status": status(p.status),
        "at": time(p.at.as_ref()),
        "event": event,
    })
}

fn tool_state(value: i32) -> &'static str {
    match pb::ToolCallState::try_from(value) {
        Ok(pb::ToolCallState::Pending) => "pending",
        Ok(pb::ToolCallState::Running) => "running",
        Ok(pb::ToolCallState::Completed) => "completed",
        Ok(pb::ToolCallState::Error) => "error",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_lowercase_names_and_unknown_values_say_so() {
        assert_eq!(status(pb::TaskStatus::Completed as i32), "completed");
        assert_eq!(
            status(pb::TaskStatus::AwaitingApproval as i32),
            "awaiting_approval"
        );
        assert_eq!(status(999), "unknown");
    }

    #[test]
    fn a_task_shows_its_own_and_subtree_usage_on_itself_and_its_result() {
        let usage = |tokens| {
            Some(pb::Usage {
                input_tokens: tokens,
                ..Default::default()
            })
        };
        let t = pb::Task {
            usage: usage(330),
            subtree_usage: usage(770),
            result: Some(pb::TaskResult {
                own_usage: usage(330),
                usage: usage(770),
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = task(&t);
        assert_eq!(v["usage"]["input_tokens"], 330);
        assert_eq!(v["subtree"]["input_tokens"], 770);
        assert_eq!(v["result"]["own_usage"], v["usage"]);
        assert_eq!(v["result"]["usage"], v["subtree"]);
    }

    #[test]
    fn a_descendants_approval_names_the_asking_task() {
        let p = pb::TaskProgress {
            task_id: "root".into(),
            event: Some(pb::task_progress::Event::ApprovalRequired(
                pb::ApprovalRequired {
                    request_id: "r1".into(),
                    task_id: "child".into(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        };
        assert_eq!(progress(&p)["event"]["task_id"], "child");
        let own = pb::TaskProgress {
            task_id: "root".into(),
            event: Some(pb::task_progress::Event::ApprovalRequired(
                Default::default(),
            )),
            ..Default::default()
        };
        assert_eq!(progress(&own)["event"]["task_id"], "root");
    }
}
