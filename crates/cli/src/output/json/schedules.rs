//! JSON shapes of schedules (`taskwire schedule ... --output json`): the API's messages
//! with their field names, enum values as the flags spell them (`cancel_previous`),
//! times as RFC 3339 and durations as the flags take them (`15m`, `1h30m`).

use serde_json::{Value, json};
use taskwire_protocol::pb;
use taskwire_protocol::value::struct_to_json;

use super::non_empty;
use crate::output::{
    duration, schedule_catch_up_name, schedule_overlap_name, schedule_run_outcome_name,
    status_name, timestamp,
};

/// `taskwire schedule create|update|get|pause|resume` and each element of `taskwire
/// schedule ls`.
pub fn schedule(s: &pb::Schedule) -> Value {
    json!({
        "schedule_id": s.schedule_id,
        "spec": s.spec.as_ref().map(schedule_spec),
        "created_at": timestamp(s.created_at.as_ref()),
        "updated_at": timestamp(s.updated_at.as_ref()),
        "description": s.description,
        "next_fires": s.next_fires.iter().map(|t| timestamp(Some(t))).collect::<Vec<_>>(),
        "recent_runs": s.recent_runs.iter().map(schedule_run).collect::<Vec<_>>(),
        "fires": s.fires,
        "skipped_overlap": s.skipped_overlap,
        "skipped_missed": s.skipped_missed,
        "queued_tick": timestamp(s.queued_tick.as_ref()),
    })
}

/// A schedule's spec: one of `cron` and `every` is set, the other `null`.
pub fn schedule_spec(spec: &pb::ScheduleSpec) -> Value {
    use pb::schedule_spec::Cadence;
    let (cron, every) = match &spec.cadence {
        Some(Cadence::Cron(cron)) => (Some(cron.as_str()), None),
        Some(Cadence::Every(every)) => (None, duration(Some(every))),
        None => (None, None),
    };
    json!({
        "name": spec.name,
        "cron": cron,
        "every": every,
        "time_zone": spec.time_zone,
        "overlap": schedule_overlap_name(spec.overlap),
        "catch_up": schedule_catch_up_name(spec.catch_up),
        "catch_up_window": duration(spec.catch_up_window.as_ref()),
        "task": spec.task.as_ref().map(schedule_task),
        "task_timeout": duration(spec.task_timeout.as_ref()),
        "tenant": spec.tenant,
        "paused": spec.paused,
    })
}

/// The task each tick submits: the fields of the submit request a schedule may set.
pub fn schedule_task(t: &pb::SubmitRequest) -> Value {
    json!({
        "agent": t.agent,
        "prompt": t.prompt,
        "tenant": t.tenant,
        "command": t.command,
        "model": t.model,
        "max_steps": t.max_steps,
        "max_attempts": t.max_attempts,
        "max_cost_usd": t.max_cost_usd,
        "max_tokens": t.max_tokens,
        "priority": t.priority,
        "auth_scope": t.auth_scope,
        "input": t.input.as_ref().map(struct_to_json),
        "output_schema": t.output_schema,
        "callback_url": t.callback_url,
        "context_refs": t.context_refs.iter().map(|r| json!({
            "type": r.r#type,
            "id": r.id,
            "uri": r.uri,
        })).collect::<Vec<_>>(),
    })
}

/// One tick a schedule acted on; `task_id` and `status` are `null` when it started no
/// task (`skipped_overlap`, `queued`, `refused`).
pub fn schedule_run(r: &pb::ScheduleRun) -> Value {
    json!({
        "tick": timestamp(r.tick.as_ref()),
        "outcome": schedule_run_outcome_name(r.outcome),
        "task_id": non_empty(&r.task_id),
        "status": (r.status != pb::TaskStatus::Unspecified as i32).then(|| status_name(r.status)),
        "fired_at": timestamp(r.fired_at.as_ref()),
        "reason": r.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Option<prost_types::Timestamp> {
        Some(prost_types::Timestamp { seconds, nanos: 0 })
    }

    #[test]
    fn schedule_json_keeps_the_api_field_names_with_names_times_and_durations() {
        let s = pb::Schedule {
            schedule_id: "0193f1c2-0000-7000-8000-0000000000aa".to_owned(),
            spec: Some(pb::ScheduleSpec {
                name: "nightly".to_owned(),
                cadence: Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
                    seconds: 900,
                    nanos: 0,
                })),
                time_zone: "UTC".to_owned(),
                overlap: pb::ScheduleOverlap::CancelPrevious as i32,
                catch_up: pb::ScheduleCatchUp::All as i32,
                catch_up_window: Some(prost_types::Duration {
                    seconds: 5400,
                    nanos: 0,
                }),
                task: Some(pb::SubmitRequest {
                    agent: "general".to_owned(),
                    prompt: "summarise the day".to_owned(),
                    tenant: "acme".to_owned(),
                    max_steps: Some(4),
                    auth_scope: vec!["read".to_owned()],
                    ..Default::default()
                }),
                task_timeout: None,
                tenant: "acme".to_owned(),
                paused: false,
            }),
            created_at: at(1_767_366_245),
            next_fires: vec![at(1_767_367_200).expect("set")],
            recent_runs: vec![
                pb::ScheduleRun {
                    tick: at(1_767_366_300),
                    outcome: pb::ScheduleRunOutcome::Started as i32,
                    task_id: "t1".to_owned(),
                    status: pb::TaskStatus::Running as i32,
                    fired_at: at(1_767_366_301),
                    reason: String::new(),
                },
                pb::ScheduleRun {
                    tick: at(1_767_365_400),
                    outcome: pb::ScheduleRunOutcome::SkippedOverlap as i32,
                    ..Default::default()
                },
            ],
            fires: 3,
            skipped_overlap: 1,
            ..Default::default()
        };
        let v = schedule(&s);
        assert_eq!(v["schedule_id"], "0193f1c2-0000-7000-8000-0000000000aa");
        assert_eq!(v["spec"]["name"], "nightly");
        assert_eq!(v["spec"]["cron"], Value::Null);
        assert_eq!(v["spec"]["every"], "15m");
        assert_eq!(v["spec"]["overlap"], "cancel_previous");
        assert_eq!(v["spec"]["catch_up"], "all");
        assert_eq!(v["spec"]["catch_up_window"], "1h30m");
        assert_eq!(v["spec"]["task_timeout"], Value::Null);
        assert_eq!(v["spec"]["paused"], false);
        assert_eq!(v["spec"]["task"]["agent"], "general");
        assert_eq!(v["spec"]["task"]["max_steps"], 4);
        assert_eq!(v["spec"]["task"]["auth_scope"], json!(["read"]));
        assert_eq!(v["created_at"], "2026-01-02T15:04:05.000Z");
        assert_eq!(v["updated_at"], Value::Null);
        assert_eq!(v["next_fires"], json!(["2026-01-02T15:20:00.000Z"]));
        assert_eq!(v["recent_runs"][0]["outcome"], "started");
        assert_eq!(v["recent_runs"][0]["status"], "running");
        assert_eq!(v["recent_runs"][1]["outcome"], "skipped_overlap");
        assert_eq!(v["recent_runs"][1]["task_id"], Value::Null);
        assert_eq!(v["recent_runs"][1]["status"], Value::Null);
        assert_eq!(v["fires"], 3);
        assert_eq!(v["skipped_overlap"], 1);
        assert_eq!(v["skipped_missed"], 0);
        assert_eq!(v["queued_tick"], Value::Null);
    }

    #[test]
    fn a_cron_schedule_has_no_interval() {
        let spec = pb::ScheduleSpec {
            cadence: Some(pb::schedule_spec::Cadence::Cron("0 3 * * *".to_owned())),
            ..Default::default()
        };
        let v = schedule_spec(&spec);
        assert_eq!(v["cron"], "0 3 * * *");
        assert_eq!(v["every"], Value::Null);
        assert_eq!(v["overlap"], "skip", "unspecified reads as skip");
        assert_eq!(v["task"], Value::Null);
    }
}
