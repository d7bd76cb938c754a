//! JSON shapes of `--output json`. Field names are snake_case and stable; statuses and
//! enum values are lowercase names; times are RFC 3339 strings; an absent id or time is
//! `null`, an absent text is `""`.

use serde_json::{Map, Value, json};
use taskwire_protocol::cost::TaskUsage;
use taskwire_protocol::pb;
use taskwire_protocol::value::struct_to_json;

use super::{
    agent_mode_name, permission_action_name, result_text, status_name, timestamp,
    tool_call_state_name,
};

mod schedules;

pub use schedules::{schedule, schedule_run, schedule_spec, schedule_task};

/// `taskwire get`, `taskwire replay` and each element of `taskwire ls`: `usage` (and
/// `cost_usd`) is the task's own, `subtree` its own and its descendants' ([`TaskUsage`]).
/// `attempts` lists every attempt (`List` answers them too): empty only for a task no
/// worker has claimed.
pub fn task(t: &pb::Task) -> Value {
    let spent = TaskUsage::of_task(t);
    json!({
        "task_id": t.task_id,
        "title": non_empty(&t.title),
        "parent_task_id": non_empty(&t.parent_task_id),
        "trace_id": t.trace_id,
        "tenant": t.tenant,
        "agent": t.agent,
        "prompt": t.prompt,
        "status": status_name(t.status),
        "priority": t.priority,
        "wait": non_empty(&t.wait),
        "wait_until": timestamp(t.wait_until.as_ref()),
        "attempt": t.attempt,
        "max_attempts": t.max_attempts,
        "attempts": t.attempts.iter().map(attempt).collect::<Vec<_>>(),
        "depth": t.depth,
        "created_at": timestamp(t.created_at.as_ref()),
        "updated_at": timestamp(t.updated_at.as_ref()),
        "deadline": timestamp(t.deadline.as_ref()),
        "not_before": timestamp(t.not_before.as_ref()),
        "usage": usage(&spent.own),
        "cost_usd": spent.own.cost_usd,
        "subtree": usage(&spent.subtree),
        "max_cost_usd": t.max_cost_usd,
        "max_tokens": t.max_tokens,
        "text": t.result.as_ref().map_or("", result_text),
        "result": t.result.as_ref().map(result),
        "webhook": t.webhook.as_ref().map(webhook),
    })
}

/// A task's result webhook and its deliveries.
pub fn webhook(w: &pb::Webhook) -> Value {
    let state = taskwire_protocol::status::webhook_state_name(w.state);
    json!({
        "url": w.url,
        "state": state,
        "attempts": w.attempts,
        "next_attempt_at": timestamp(w.next_attempt_at.as_ref()),
        "delivered_at": timestamp(w.delivered_at.as_ref()),
        "deliveries": w.deliveries.iter().map(|d| json!({
            "attempt": d.attempt,
            "started_at": timestamp(d.started_at.as_ref()),
            "status_code": d.status_code,
            "error": d.error,
            "duration_ms": d.duration_ms,
        })).collect::<Vec<_>>(),
    })
}

/// Tokens and cost; `cost_usd` is `null` when no priced call is counted ("unpriced").
pub fn usage(u: &pb::Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cost_usd": u.cost_usd,
        "unpriced_tokens": u.unpriced_tokens,
        "cached_input_tokens": u.cached_input_tokens,
        "cache_write_input_tokens": u.cache_write_input_tokens,
    })
}

/// One claim of a task by a worker, and how it ended.
pub fn attempt(a: &pb::Attempt) -> Value {
    json!({
        "attempt": a.attempt,
        "worker_id": non_empty(&a.worker_id),
        "status": status_name(a.status),
        "error": non_empty(&a.error),
        "retryable": a.retryable,
        "started_at": timestamp(a.started_at.as_ref()),
        "finished_at": timestamp(a.finished_at.as_ref()),
    })
}

/// A finished task's result; `taskwire submit --wait` prints it. Its `usage` is the
/// task's subtree's, `own_usage` the task's own ([`TaskUsage`], as on the task).
pub fn result(r: &pb::TaskResult) -> Value {
    let spent = TaskUsage::of_result(r);
    let metrics = r.metrics.unwrap_or_default();
    json!({
        "task_id": r.task_id,
        "trace_id": r.trace_id,
        "status": status_name(r.status),
        "attempt": r.attempt,
        "text": result_text(r),
        "structured": r.output.as_ref().and_then(|o| o.structured.as_ref()).map(struct_to_json),
        "usage": usage(&spent.subtree),
        "own_usage": usage(&spent.own),
        "steps": metrics.steps,
        "latency_ms": metrics.latency_ms,
        "tool_calls": r.tool_calls.iter().map(|c| json!({
            "call_id": c.call_id,
            "tool": c.tool,
            "title": c.title,
            "state": tool_call_state_name(c.state),
        })).collect::<Vec<_>>(),
        "errors": r.errors.iter().map(|e| json!({
            "code": e.code,
            "message": e.message,
            "retryable": e.retryable,
        })).collect::<Vec<_>>(),
        "attachments": r.attachments.iter().map(|a| json!({
            "name": a.name,
            "media_type": a.media_type,
            "uri": non_empty(&a.uri),
            "size": a.data.len(),
        })).collect::<Vec<_>>(),
        "provenance": r.provenance.iter().map(|p| json!({
            "source": p.source,
            "uri": non_empty(&p.uri),
            "excerpt": p.excerpt,
        })).collect::<Vec<_>>(),
        "patch": non_empty(&r.patch),
        "session_id": non_empty(&r.session_id),
        "worker_id": non_empty(&r.worker_id),
    })
}

/// One progress line of `taskwire watch --output json`: the common fields, `event` naming
/// the kind, and the kind's own fields beside them.
pub fn progress(p: &pb::TaskProgress) -> Value {
    use pb::task_progress::Event;
    let (kind, fields) = match &p.event {
        Some(Event::StepStarted(e)) => ("step_started", json!({ "step": e.step })),
        Some(Event::StepFinished(e)) => {
            let usage = self::usage(&e.usage.unwrap_or_default());
            ("step_finished", json!({ "step": e.step, "usage": usage }))
        }
        Some(Event::ToolCall(e)) => (
            "tool_call",
            json!({
                "call_id": e.call_id,
                "tool": e.tool,
                "state": tool_call_state_name(e.state),
                "title": e.title,
                "error": non_empty(&e.error),
                "call_task_id": non_empty(&e.task_id),
                "metadata": e.metadata.as_ref().map(struct_to_json),
            }),
        ),
        Some(Event::TextDelta(e)) => ("text_delta", json!({ "text": e.text })),
        Some(Event::ChildTask(e)) => (
            "child_task",
            json!({
                "child_task_id": e.task_id,
                "agent": e.agent,
                "description": e.description,
                "child_session_id": non_empty(&e.session_id),
                "call_id": non_empty(&e.call_id),
            }),
        ),
        Some(Event::ApprovalRequired(e)) => (
            "approval_required",
            json!({
                "request_id": e.request_id,
                "permission": e.permission,
                "patterns": e.patterns,
                "asking_task_id": if e.task_id.is_empty() { &p.task_id } else { &e.task_id },
            }),
        ),
        Some(Event::RateLimitWait(w)) => (
            "rate_limit_wait",
            json!({ "model": w.model, "wait_ms": w.wait_ms }),
        ),
        Some(Event::Compaction(e)) => {
            let usage = e.usage.unwrap_or_default();
            let usage =
                json!({ "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens });
            (
                "compaction",
                json!({
                    "tokens_before": e.tokens_before,
                    "tokens_after": e.tokens_after,
                    "usage": usage,
                }),
            )
        }
        Some(Event::Hook(h)) => (
            "hook",
            json!({
                "hook_event": h.event,
                "hook": h.hook,
                "source": h.source,
                "subject": h.subject,
                "call_id": non_empty(&h.call_id),
                "outcome": h.outcome,
                "message": non_empty(&h.message),
                "duration_ms": h.duration_ms,
            }),
        ),
        Some(Event::Heartbeat(_)) => ("heartbeat", json!({})),
        None => ("unknown", json!({})),
    };
    let mut out = Map::new();
    out.insert("event".to_owned(), kind.into());
    out.insert("task_id".to_owned(), p.task_id.clone().into());
    out.insert("trace_id".to_owned(), p.trace_id.clone().into());
    out.insert("attempt".to_owned(), p.attempt.into());
    out.insert("seq".to_owned(), p.seq.into());
    out.insert("status".to_owned(), status_name(p.status).into());
    out.insert("at".to_owned(), timestamp(p.at.as_ref()).into());
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}

/// The last line of `taskwire watch --output json`: the result, with `"event": "result"`.
pub fn watch_result(r: &pb::TaskResult) -> Value {
    let mut value = result(r);
    if let Value::Object(map) = &mut value {
        map.insert("event".to_owned(), "result".into());
    }
    value
}

/// `taskwire submit` without `--wait`.
pub fn submitted(s: &pb::SubmitResponse) -> Value {
    json!({
        "task_id": s.task_id,
        "trace_id": s.trace_id,
        "created": s.created,
        "session_id": non_empty(&s.session_id),
    })
}

/// `taskwire cancel`: the task's status after the request.
pub fn cancelled(task_id: &str, c: &pb::CancelResponse) -> Value {
    json!({ "task_id": task_id, "status": status_name(c.status) })
}

/// `taskwire approve`: the task's status after the answer.
pub fn approved(task_id: &str, request_id: &str, a: &pb::ApproveResponse) -> Value {
    json!({ "task_id": task_id, "request_id": request_id, "status": status_name(a.status) })
}

/// Each element of `taskwire agents`.
pub fn agent(a: &pb::AgentSpec) -> Value {
    json!({
        "name": a.name,
        "description": a.description,
        "mode": agent_mode_name(a.mode),
        "hidden": a.hidden,
        "tools": a.tools,
        "permission": a.permission.iter().map(|r| json!({
            "permission": r.permission,
            "pattern": r.pattern,
            "action": permission_action_name(r.action),
        })).collect::<Vec<_>>(),
        "max_steps": a.max_steps,
        "model": a.model,
        "temperature": a.temperature,
        "top_p": a.top_p,
        "color": a.color,
        "prompt": a.prompt,
    })
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished_task() -> pb::Task {
        pb::Task {
            task_id: "0193f1c2-0000-7000-8000-000000000001".to_owned(),
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".to_owned(),
            agent: "build".to_owned(),
            prompt: "fix the bug".to_owned(),
            status: pb::TaskStatus::Completed as i32,
            attempt: 2,
            max_attempts: 3,
            attempts: vec![
                pb::Attempt {
                    attempt: 1,
                    worker_id: "w1".to_owned(),
                    status: pb::TaskStatus::Error as i32,
                    error: "model unavailable".to_owned(),
                    retryable: true,
                    ..Default::default()
                },
                pb::Attempt {
                    attempt: 2,
                    status: pb::TaskStatus::Running as i32,
                    ..Default::default()
                },
            ],
            created_at: Some(prost_types::Timestamp {
                seconds: 1_767_366_245,
                nanos: 0,
            }),
            updated_at: Some(prost_types::Timestamp {
                seconds: 1_767_366_250,
                nanos: 0,
            }),
            result: Some(pb::TaskResult {
                task_id: "0193f1c2-0000-7000-8000-000000000001".to_owned(),
                status: pb::TaskStatus::Completed as i32,
                attempt: 2,
                output: Some(pb::Output {
                    text: "fixed it".to_owned(),
                    structured: None,
                }),
                usage: Some(pb::Usage {
                    input_tokens: 120,
                    output_tokens: 30,
                    ..Default::default()
                }),
                metrics: Some(pb::Metrics {
                    latency_ms: 900,
                    steps: 3,
                }),
                tool_calls: vec![pb::ToolCallSummary {
                    call_id: "c1".to_owned(),
                    tool: "grep".to_owned(),
                    title: "grep TODO in src".to_owned(),
                    state: pb::ToolCallState::Completed as i32,
                }],
                session_id: "s-1".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn task_json_has_status_name_text_and_times() {
        let v = task(&finished_task());
        assert_eq!(v["task_id"], "0193f1c2-0000-7000-8000-000000000001");
        assert_eq!(v["status"], "completed");
        assert_eq!(v["text"], "fixed it");
        assert_eq!(v["attempt"], 2);
        assert_eq!(v["depth"], 0);
        assert_eq!(v["agent"], "build");
        assert_eq!(v["parent_task_id"], Value::Null);
        assert_eq!(v["title"], Value::Null, "no title yet");
        assert_eq!(
            task(&pb::Task {
                title: "Fix the parser".into(),
                ..finished_task()
            })["title"],
            "Fix the parser"
        );
        assert_eq!(v["deadline"], Value::Null);
        assert_eq!(v["created_at"], "2026-01-02T15:04:05.000Z");
        assert_eq!(
            v["result"]["usage"],
            json!({"input_tokens": 120, "output_tokens": 30, "cost_usd": null, "unpriced_tokens": 0,
                   "cached_input_tokens": 0, "cache_write_input_tokens": 0})
        );
        assert_eq!(v["result"]["steps"], 3);
        assert_eq!(v["result"]["tool_calls"][0]["state"], "completed");
        assert_eq!(v["result"]["session_id"], "s-1");
        assert_eq!(v["max_attempts"], 3);
        assert_eq!(v["attempts"][0]["status"], "error");
        assert_eq!(v["attempts"][0]["error"], "model unavailable");
        assert_eq!(v["attempts"][1]["finished_at"], Value::Null);
    }

    #[test]
    fn task_json_has_its_own_cost_and_its_subtrees() {
        let v = task(&pb::Task {
            usage: Some(pb::Usage {
                input_tokens: 300,
                output_tokens: 30,
                cost_usd: Some(0.00084),
                unpriced_tokens: 0,
                cache_write_input_tokens: 0,
                cached_input_tokens: 0,
            }),
            subtree_usage: Some(pb::Usage {
                input_tokens: 1300,
                output_tokens: 530,
                cost_usd: Some(0.00684),
                unpriced_tokens: 0,
                cache_write_input_tokens: 0,
                cached_input_tokens: 0,
            }),
            max_tokens: Some(5000),
            ..finished_task()
        });
        assert_eq!(v["cost_usd"], 0.00084);
        assert_eq!(v["subtree"]["cost_usd"], 0.00684);
        assert_eq!(v["subtree"]["input_tokens"], 1300);
        assert_eq!(v["max_tokens"], 5000);
        assert_eq!(v["max_cost_usd"], Value::Null);
        let unpriced = task(&pb::Task {
            usage: Some(pb::Usage {
                input_tokens: 3,
                output_tokens: 1,
                cost_usd: None,
                unpriced_tokens: 4,
                cache_write_input_tokens: 0,
                cached_input_tokens: 0,
            }),
            ..finished_task()
        });
        assert_eq!(unpriced["cost_usd"], Value::Null, "unpriced, not zero");
    }

    #[test]
    fn unfinished_task_json_has_empty_text_and_null_result() {
        let t = pb::Task {
            status: pb::TaskStatus::Running as i32,
            ..finished_task()
        };
        let t = pb::Task { result: None, ..t };
        let v = task(&t);
        assert_eq!(v["status"], "running");
        assert_eq!(v["text"], "");
        assert_eq!(v["result"], Value::Null);
    }

    #[test]
    fn result_json_carries_what_submit_wait_promises() {
        let r = finished_task().result.expect("finished");
        let v = result(&r);
        for key in [
            "task_id",
            "status",
            "text",
            "attempt",
            "usage",
            "own_usage",
            "steps",
            "tool_calls",
            "errors",
            "session_id",
        ] {
            assert!(v.get(key).is_some(), "missing {key}: {v}");
        }
        assert_eq!(v["errors"], json!([]));
    }

    #[test]
    fn progress_json_flattens_the_event_beside_common_fields() {
        let p = pb::TaskProgress {
            task_id: "t".to_owned(),
            attempt: 1,
            seq: 7,
            status: pb::TaskStatus::Running as i32,
            event: Some(pb::task_progress::Event::ToolCall(pb::ToolCallEvent {
                call_id: "c1".to_owned(),
                tool: "grep".to_owned(),
                state: pb::ToolCallState::Running as i32,
                title: "grep TODO in src".to_owned(),
                error: String::new(),
                task_id: "child".to_owned(),
                metadata: Some(taskwire_protocol::value::json_to_struct(
                    &serde_json::json!({"matches": 3}),
                )),
            })),
            ..Default::default()
        };
        let v = progress(&p);
        assert_eq!(v["event"], "tool_call");
        assert_eq!(v["seq"], 7);
        assert_eq!(v["status"], "running");
        assert_eq!(v["tool"], "grep");
        assert_eq!(v["state"], "running");
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["call_task_id"], "child", "whose call it is");
        assert_eq!(v["metadata"]["matches"], 3.0);
    }

    #[test]
    fn child_task_progress_does_not_shadow_the_task_id() {
        let p = pb::TaskProgress {
            task_id: "parent".to_owned(),
            event: Some(pb::task_progress::Event::ChildTask(pb::ChildTask {
                task_id: "child".to_owned(),
                agent: "explore".to_owned(),
                description: "look around".to_owned(),
                session_id: "ses-child".to_owned(),
                call_id: "t1".to_owned(),
            })),
            ..Default::default()
        };
        let v = progress(&p);
        assert_eq!(v["task_id"], "parent");
        assert_eq!(v["child_task_id"], "child");
        assert_eq!(v["child_session_id"], "ses-child");
    }

    #[test]
    fn approved_names_the_request_and_the_status() {
        let v = approved(
            "t1",
            "r1",
            &pb::ApproveResponse {
                status: pb::TaskStatus::Running as i32,
            },
        );
        assert_eq!(
            v,
            json!({"task_id": "t1", "request_id": "r1", "status": "running"})
        );
    }

    #[test]
    fn watch_result_is_marked_as_the_result_event() {
        let v = watch_result(&finished_task().result.expect("finished"));
        assert_eq!(v["event"], "result");
        assert_eq!(v["text"], "fixed it");
    }
}
