//! `/v1/schedules`: each handler is one call of the gRPC service's schedule method as
//! the caller ([`super::request`]), the spec read from JSON (durations as humantime
//! writes them: `15m`, `1h 30m`) and the schedule written back as JSON.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_server::TaskService;
use utoipa::IntoParams;

use super::model::{ErrorBody, Schedule, ScheduleList, ScheduleSpecBody, Submitted};
use super::{ApiError, Body, HttpApi, Query, invalid, request};
use crate::CoordinatorError;
use crate::schedules::timing::Timing;

/// The optional `tenant` of the schedule routes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    /// The schedule's tenant; none: the caller's (with authentication off and none
    /// named, the list shows every tenant's).
    tenant: Option<String>,
}

impl TenantQuery {
    fn tenant(self) -> String {
        self.tenant.unwrap_or_default()
    }
}

/// A humantime duration named `field` as a wire duration.
fn humantime_field(
    field: &str,
    d: Option<&str>,
) -> Result<Option<prost_types::Duration>, ApiError> {
    let Some(text) = d else {
        return Ok(None);
    };
    let parsed: Duration = humantime::parse_duration(text.trim()).map_err(|e| {
        invalid(format!(
            "invalid {field}: `{text}` is not a duration (such as `15m` or `1h 30m`): {e}"
        ))
    })?;
    prost_types::Duration::try_from(parsed)
        .map(Some)
        .map_err(|_| invalid(format!("invalid {field}: `{text}` is too long")))
}

/// The body as the gRPC spec.
fn spec_request(b: ScheduleSpecBody) -> Result<pb::ScheduleSpec, ApiError> {
    let every = humantime_field("every", b.every.as_deref())?;
    let cron = b.cron;
    let cadence = match (cron, every) {
        (Some(cron), Some(every)) => {
            // Both named: refused as the service refuses it, unless the cron is blank
            // (no cron at all).
            let interval = Duration::try_from(every).unwrap_or_default();
            Timing::from_parts(Some(&cron), Some(interval), "").map_err(CoordinatorError::from)?;
            Some(pb::schedule_spec::Cadence::Every(every))
        }
        (Some(cron), None) => Some(pb::schedule_spec::Cadence::Cron(cron)),
        (None, Some(every)) => Some(pb::schedule_spec::Cadence::Every(every)),
        (None, None) => None,
    };
    Ok(pb::ScheduleSpec {
        name: b.name,
        cadence,
        time_zone: b.time_zone.unwrap_or_default(),
        overlap: b
            .overlap
            .map_or(pb::ScheduleOverlap::Unspecified, pb::ScheduleOverlap::from)
            as i32,
        catch_up: b
            .catch_up
            .map_or(pb::ScheduleCatchUp::Unspecified, pb::ScheduleCatchUp::from)
            as i32,
        catch_up_window: humantime_field("catch_up_window", b.catch_up_window.as_deref())?,
        task: Some(super::tasks::submit_request(b.task)?),
        task_timeout: humantime_field("task_timeout", b.task_timeout.as_deref())?,
        tenant: b.tenant.unwrap_or_default(),
        paused: b.paused.unwrap_or(false),
    })
}

/// A `PUT`'s body under the path's name: a body without a name takes it; one with
/// another name is refused.
fn named(name: String, mut body: ScheduleSpecBody) -> Result<ScheduleSpecBody, ApiError> {
    if body.name.is_empty() {
        body.name = name;
    } else if body.name != name {
        return Err(invalid(format!(
            "invalid name: `{}` is not the schedule's name `{name}` (a schedule keeps its name: delete it and create another)",
            body.name
        )));
    }
    Ok(body)
}

/// Lists the caller's tenant's schedules by name, each with its next fire times and its
/// three most recent runs.
#[utoipa::path(
    get, path = "/v1/schedules", tag = "schedules", operation_id = "list_schedules",
    params(TenantQuery),
    responses(
        (status = 200, description = "The schedules, by name", body = ScheduleList),
        (status = 400, description = "A parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Query(q): Query<TenantQuery>,
) -> Result<Json<ScheduleList>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .list_schedules(request(
            &caller,
            pb::ListSchedulesRequest { tenant: q.tenant() },
        ))
        .await?
        .into_inner();
    Ok(Json(ScheduleList {
        schedules: r.schedules.iter().map(Schedule::from).collect(),
    }))
}

/// Creates a schedule; its first tick is the first one after now.
///
/// The task is checked as a submit would check it (its agent, budget, scopes, webhook),
/// a refused field named `task.FIELD`.
#[utoipa::path(
    post, path = "/v1/schedules", tag = "schedules", operation_id = "create_schedule",
    request_body = ScheduleSpecBody,
    responses(
        (status = 201, description = "Created", body = Schedule),
        (status = 400, description = "A field is invalid (named in `error`)", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant or grant the scope asked for", body = ErrorBody),
        (status = 404, description = "The task's agent does not exist", body = ErrorBody),
        (status = 409, description = "The tenant has a schedule of that name, or the task's webhook has no secret", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn create(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Body(body): Body<ScheduleSpecBody>,
) -> Result<(StatusCode, Json<Schedule>), ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let spec = spec_request(body)?;
    let s = api
        .create_schedule(request(
            &caller,
            pb::CreateScheduleRequest { spec: Some(spec) },
        ))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, Json(Schedule::from(&s))))
}

/// Reads a schedule: its spec, next fire times, twenty most recent runs and counters.
#[utoipa::path(
    get, path = "/v1/schedules/{name}", tag = "schedules", operation_id = "get_schedule",
    params(
        ("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$"),
        TenantQuery,
    ),
    responses(
        (status = 200, description = "The schedule", body = Schedule),
        (status = 400, description = "The name or a parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Result<Json<Schedule>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let s = api
        .get_schedule(request(
            &caller,
            pb::GetScheduleRequest {
                name,
                tenant: q.tenant(),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(Schedule::from(&s)))
}

/// Replaces a schedule's spec; its next tick is computed anew from now.
///
/// The path names the schedule: the body's `name` may be left out, and another one is
/// refused. The tenant is the body's `tenant` (none: the caller's).
#[utoipa::path(
    put, path = "/v1/schedules/{name}", tag = "schedules", operation_id = "update_schedule",
    params(("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$")),
    request_body = ScheduleSpecBody,
    responses(
        (status = 200, description = "The schedule as it is now", body = Schedule),
        (status = 400, description = "A field is invalid (named in `error`), or the body names another schedule", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant or grant the scope asked for", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant, or the task's agent does not exist", body = ErrorBody),
        (status = 409, description = "The task's webhook has no secret", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn update(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Body(body): Body<ScheduleSpecBody>,
) -> Result<Json<Schedule>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let spec = spec_request(named(name, body)?)?;
    let s = api
        .update_schedule(request(
            &caller,
            pb::UpdateScheduleRequest { spec: Some(spec) },
        ))
        .await?
        .into_inner();
    Ok(Json(Schedule::from(&s)))
}

/// Deletes a schedule; the tasks it started are left as they are.
#[utoipa::path(
    delete, path = "/v1/schedules/{name}", tag = "schedules", operation_id = "delete_schedule",
    params(
        ("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$"),
        TenantQuery,
    ),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "The name or a parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Result<StatusCode, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    api.delete_schedule(request(
        &caller,
        pb::DeleteScheduleRequest {
            name,
            tenant: q.tenant(),
        },
    ))
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pauses a schedule: no tick fires until it is resumed (ticks while paused never do).
#[utoipa::path(
    post, path = "/v1/schedules/{name}/pause", tag = "schedules", operation_id = "pause_schedule",
    params(
        ("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$"),
        TenantQuery,
    ),
    responses(
        (status = 200, description = "The schedule, paused", body = Schedule),
        (status = 400, description = "The name or a parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn pause(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Result<Json<Schedule>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let s = api
        .pause_schedule(request(
            &caller,
            pb::PauseScheduleRequest {
                name,
                tenant: q.tenant(),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(Schedule::from(&s)))
}

/// Resumes a schedule from its first tick after now.
#[utoipa::path(
    post, path = "/v1/schedules/{name}/resume", tag = "schedules", operation_id = "resume_schedule",
    params(
        ("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$"),
        TenantQuery,
    ),
    responses(
        (status = 200, description = "The schedule, active", body = Schedule),
        (status = 400, description = "The name or a parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn resume(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Result<Json<Schedule>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let s = api
        .resume_schedule(request(
            &caller,
            pb::ResumeScheduleRequest {
                name,
                tenant: q.tenant(),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(Schedule::from(&s)))
}

/// Fires a schedule now, outside its cadence: paused or not, whatever its overlap
/// policy. Answers the task as `POST /v1/tasks` does.
#[utoipa::path(
    post, path = "/v1/schedules/{name}/trigger", tag = "schedules", operation_id = "trigger_schedule",
    params(
        ("name" = String, Path, description = "The schedule's name", pattern = "^[A-Za-z0-9._-]{1,128}$"),
        TenantQuery,
    ),
    responses(
        (status = 201, description = "The task it started", body = Submitted),
        (status = 400, description = "The name or a parameter is invalid, or the task was refused (named in `error`)", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such schedule in the tenant, or its task's agent no longer exists", body = ErrorBody),
        (status = 409, description = "The task was refused: its webhook has no secret", body = ErrorBody),
        (status = 429, description = "The queue is full: try again after `Retry-After` seconds", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn trigger(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TenantQuery>,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .trigger_schedule(request(
            &caller,
            pb::TriggerScheduleRequest {
                name,
                tenant: q.tenant(),
            },
        ))
        .await?
        .into_inner();
    Ok((StatusCode::CREATED, Json(Submitted::from(r))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: serde_json::Value) -> ScheduleSpecBody {
        serde_json::from_value(v).expect("a spec body")
    }

    #[test]
    fn a_spec_body_becomes_the_grpc_spec_with_its_durations() {
        let spec = spec_request(body(serde_json::json!({
            "name": "nightly",
            "every": "15m",
            "time_zone": "Europe/Berlin",
            "overlap": "queue_one",
            "catch_up": "all",
            "catch_up_window": "2h",
            "task_timeout": "1h 30m",
            "paused": true,
            "tenant": "acme",
            "task": {"agent": "general", "prompt": "report", "input": {"n": 1}, "priority": 2,
                     "output_schema": {"type": "object"}},
        })))
        .expect("spec");
        assert_eq!(spec.name, "nightly");
        assert_eq!(
            spec.cadence,
            Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
                seconds: 900,
                nanos: 0
            }))
        );
        assert_eq!(spec.time_zone, "Europe/Berlin");
        assert_eq!(spec.overlap, pb::ScheduleOverlap::QueueOne as i32);
        assert_eq!(spec.catch_up, pb::ScheduleCatchUp::All as i32);
        assert_eq!(spec.catch_up_window.map(|d| d.seconds), Some(7200));
        assert_eq!(spec.task_timeout.map(|d| d.seconds), Some(5400));
        assert!(spec.paused);
        assert_eq!(spec.tenant, "acme");
        let task = spec.task.expect("task");
        assert_eq!((task.agent.as_str(), task.priority), ("general", 2));
        assert_eq!(task.output_schema, r#"{"type":"object"}"#);
        assert!(task.input.is_some_and(|i| i.fields.contains_key("n")));

        let cron = spec_request(body(serde_json::json!({
            "name": "n", "cron": "0 3 * * *", "task": {"agent": "general", "prompt": "p"},
        })))
        .expect("spec");
        assert_eq!(
            cron.cadence,
            Some(pb::schedule_spec::Cadence::Cron("0 3 * * *".into()))
        );
        assert_eq!(cron.overlap, pb::ScheduleOverlap::Unspecified as i32);
        assert_eq!(cron.catch_up_window, None);
    }

    #[test]
    fn bad_durations_both_cadences_and_unknown_fields_are_refused_with_their_names() {
        let err = spec_request(body(serde_json::json!({
            "name": "n", "every": "soon", "task": {"agent": "general", "prompt": "p"},
        })))
        .expect_err("bad every");
        assert!(
            err.0.message().contains("invalid every"),
            "{}",
            err.0.message()
        );
        assert_eq!(err.0.code(), tonic::Code::InvalidArgument);
        let err = spec_request(body(serde_json::json!({
            "name": "n", "every": "1h", "task_timeout": "1 fortnight",
            "task": {"agent": "general", "prompt": "p"},
        })))
        .expect_err("bad timeout");
        assert!(
            err.0.message().contains("task_timeout"),
            "{}",
            err.0.message()
        );
        let err = spec_request(body(serde_json::json!({
            "name": "n", "every": "1h", "cron": "0 3 * * *",
            "task": {"agent": "general", "prompt": "p"},
        })))
        .expect_err("both cadences");
        assert_eq!(err.0.code(), tonic::Code::InvalidArgument);
        let err = spec_request(body(serde_json::json!({
            "name": "n", "every": "1h",
            "task": {"agent": "general", "prompt": "p", "deadline": "tomorrow"},
        })))
        .expect_err("bad deadline");
        assert!(err.0.message().contains("deadline"), "{}", err.0.message());
        let unknown = serde_json::from_value::<ScheduleSpecBody>(serde_json::json!({
            "name": "n", "every": "1h", "jitter": "5s", "task": {"agent": "a", "prompt": "p"},
        }))
        .expect_err("unknown field");
        assert!(unknown.to_string().contains("jitter"), "{unknown}");
        let overlap = serde_json::from_value::<ScheduleSpecBody>(serde_json::json!({
            "name": "n", "every": "1h", "overlap": "sometimes", "task": {"agent": "a", "prompt": "p"},
        }))
        .expect_err("unknown overlap");
        assert!(overlap.to_string().contains("sometimes"), "{overlap}");
    }

    #[test]
    fn a_put_takes_the_paths_name_and_refuses_another() {
        let spec = |name: &str| {
            body(
                serde_json::json!({"name": name, "every": "1h", "task": {"agent": "a", "prompt": "p"}}),
            )
        };
        assert_eq!(
            named("daily".into(), spec("")).expect("named").name,
            "daily"
        );
        assert_eq!(
            named("daily".into(), spec("daily")).expect("same").name,
            "daily"
        );
        let err = named("daily".into(), spec("weekly")).expect_err("another name");
        assert_eq!(err.0.code(), tonic::Code::InvalidArgument);
        assert!(
            err.0.message().starts_with("invalid name:"),
            "{}",
            err.0.message()
        );
    }

    #[test]
    fn a_schedule_is_json_with_humantime_durations_and_rfc3339_times() {
        let ts = |seconds| prost_types::Timestamp { seconds, nanos: 0 };
        let s = pb::Schedule {
            schedule_id: "s1".into(),
            spec: Some(pb::ScheduleSpec {
                name: "nightly".into(),
                cadence: Some(pb::schedule_spec::Cadence::Every(prost_types::Duration {
                    seconds: 3600,
                    nanos: 0,
                })),
                time_zone: "UTC".into(),
                overlap: pb::ScheduleOverlap::CancelPrevious as i32,
                catch_up: pb::ScheduleCatchUp::One as i32,
                catch_up_window: Some(prost_types::Duration {
                    seconds: 5400,
                    nanos: 0,
                }),
                task: Some(pb::SubmitRequest {
                    agent: "general".into(),
                    prompt: "report".into(),
                    output_schema: r#"{"type":"object"}"#.into(),
                    ..Default::default()
                }),
                task_timeout: None,
                tenant: "acme".into(),
                paused: false,
            }),
            created_at: Some(ts(1_893_456_000)),
            description: "every 1h".into(),
            next_fires: vec![ts(1_893_459_600), ts(1_893_463_200)],
            recent_runs: vec![
                pb::ScheduleRun {
                    tick: Some(ts(1_893_456_000)),
                    outcome: pb::ScheduleRunOutcome::Triggered as i32,
                    task_id: "t1".into(),
                    status: pb::TaskStatus::Completed as i32,
                    fired_at: Some(ts(1_893_456_001)),
                    reason: String::new(),
                },
                pb::ScheduleRun {
                    outcome: pb::ScheduleRunOutcome::SkippedOverlap as i32,
                    ..Default::default()
                },
            ],
            fires: 3,
            skipped_overlap: 1,
            ..Default::default()
        };
        let v = serde_json::to_value(Schedule::from(&s)).expect("json");
        assert_eq!(v["name"], "nightly");
        assert_eq!(v["every"], "1h");
        assert_eq!(v["cron"], serde_json::Value::Null);
        assert_eq!(v["overlap"], "cancel_previous");
        assert_eq!(v["catch_up"], "one");
        assert_eq!(v["catch_up_window"], "1h 30m");
        assert_eq!(v["task_timeout"], serde_json::Value::Null);
        assert_eq!(v["task"]["agent"], "general");
        assert_eq!(v["task"]["output_schema"]["type"], "object");
        assert_eq!(v["next_fires"][0], "2030-01-01T01:00:00+00:00");
        assert_eq!(v["created_at"], "2030-01-01T00:00:00+00:00");
        assert_eq!(v["recent_runs"][0]["outcome"], "triggered");
        assert_eq!(v["recent_runs"][0]["status"], "completed");
        assert_eq!(v["recent_runs"][0]["task_id"], "t1");
        assert_eq!(v["recent_runs"][1]["outcome"], "skipped_overlap");
        assert_eq!(v["recent_runs"][1]["task_id"], serde_json::Value::Null);
        assert_eq!(v["recent_runs"][1]["status"], serde_json::Value::Null);
        assert_eq!(
            (v["fires"].as_u64(), v["skipped_overlap"].as_u64()),
            (Some(3), Some(1))
        );
    }
}
