//! `/v1/tasks`, `/v1/agents` and `/v1/info`: each handler is one call of the gRPC
//! service's method as the caller ([`super::request`]).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_server::TaskService;
use utoipa::IntoParams;

use super::model::{
    AgentList, ApprovalAnswer, ApprovalBody, CancelBody, ErrorBody, RunCommandBody, ServerInfo,
    StatusReply, SubmitBody, Submitted, Task, TaskList, Transcript,
};
use super::{ApiError, Body, HttpApi, Query, invalid, request};
use crate::api::TaskApi;
use crate::auth::Principal;

/// The most tasks the tree endpoint returns (it walks the tree breadth first).
const MAX_TREE_TASKS: usize = 2000;

/// Submits a task.
///
/// Answers the new task's id, or the existing task's when `idempotency_key` was seen
/// before (`created: false`).
#[utoipa::path(
    post, path = "/v1/tasks", tag = "tasks", operation_id = "submit",
    request_body = SubmitBody,
    responses(
        (status = 200, description = "Submitted", body = Submitted),
        (status = 400, description = "A field is invalid (named in `error`)", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant or grant the scope asked for", body = ErrorBody),
        (status = 404, description = "The agent, the parent task or the resumed session does not exist", body = ErrorBody),
        (status = 409, description = "The idempotency key names another request", body = ErrorBody),
        (status = 429, description = "The queue is full: try again after `Retry-After` seconds", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn submit(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Body(body): Body<SubmitBody>,
) -> Result<Json<Submitted>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let req = submit_request(body)?;
    let r = api.submit(request(&caller, req)).await?.into_inner();
    Ok(Json(Submitted::from(r)))
}

/// An RFC 3339 time named `field` as a wire timestamp.
fn rfc3339(field: &str, d: Option<&str>) -> Result<Option<prost_types::Timestamp>, ApiError> {
    d.map(|d| {
        chrono::DateTime::parse_from_rfc3339(d)
            .map(|t| prost_types::Timestamp {
                seconds: t.timestamp(),
                nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0),
            })
            .map_err(|e| {
                invalid(format!(
                    "invalid {field}: `{d}` is not an RFC 3339 time: {e}"
                ))
            })
    })
    .transpose()
}

/// An `output_schema` (a JSON Schema object, or its text) as the wire's JSON text.
fn schema_text(schema: Option<serde_json::Value>) -> String {
    match schema {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

/// The body as the gRPC request.
pub(super) fn submit_request(b: SubmitBody) -> Result<pb::SubmitRequest, ApiError> {
    let deadline = rfc3339("deadline", b.deadline.as_deref())?;
    let not_before = rfc3339("not_before", b.not_before.as_deref())?;
    let output_schema = schema_text(b.output_schema);
    Ok(pb::SubmitRequest {
        agent: b.agent,
        prompt: b.prompt,
        tenant: b.tenant.unwrap_or_default(),
        sender: b.sender.unwrap_or_default(),
        intent: b.intent.unwrap_or_default(),
        input: b
            .input
            .map(|m| taskwire_protocol::value::json_to_struct(&serde_json::Value::Object(m))),
        context_refs: b
            .context_refs
            .unwrap_or_default()
            .into_iter()
            .map(|c| pb::ContextRef {
                r#type: c.kind,
                id: c.id,
                uri: c.uri,
            })
            .collect(),
        auth_scope: b.auth_scope.unwrap_or_default(),
        idempotency_key: b.idempotency_key.unwrap_or_default(),
        deadline,
        resume_token: b.resume_token.unwrap_or_default(),
        model: b.model,
        max_steps: b.max_steps,
        parent_task_id: b.parent_task_id.unwrap_or_default(),
        trace_id: b.trace_id.unwrap_or_default(),
        max_attempts: b.max_attempts,
        workspace_patch: b.workspace_patch.unwrap_or_default(),
        output_schema,
        max_cost_usd: b.max_cost_usd,
        max_tokens: b.max_tokens,
        priority: b.priority.unwrap_or(0),
        callback_url: b.callback_url.unwrap_or_default(),
        not_before,
        ..Default::default()
    })
}

/// Runs a slash command (`commands/NAME.md`): a subtask started without a model's
/// decision, or a prompt to its agent.
#[utoipa::path(
    post, path = "/v1/commands/{name}", tag = "tasks", operation_id = "run_command",
    params(("name" = String, Path, description = "The command, with or without its leading `/`")),
    request_body = RunCommandBody,
    responses(
        (status = 200, description = "The task that runs it", body = Submitted),
        (status = 400, description = "A field is invalid (named in `error`)", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 403, description = "The token may not act for the tenant", body = ErrorBody),
        (status = 404, description = "No such command, agent, parent task or session", body = ErrorBody),
        (status = 409, description = "The idempotency key names another request", body = ErrorBody),
        (status = 429, description = "The queue is full: try again after `Retry-After` seconds", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn run_command(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Body(body): Body<RunCommandBody>,
) -> Result<Json<Submitted>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let req = pb::RunCommandRequest {
        command: name,
        arguments: body.arguments.unwrap_or_default(),
        tenant: body.tenant.unwrap_or_default(),
        parent_task_id: body.parent_task_id.unwrap_or_default(),
        session_id: body.session_id.unwrap_or_default(),
        model: body.model,
        deadline: rfc3339("deadline", body.deadline.as_deref())?,
        idempotency_key: body.idempotency_key.unwrap_or_default(),
        output_schema: schema_text(body.output_schema),
    };
    let r = api.run_command(request(&caller, req)).await?.into_inner();
    Ok(Json(Submitted::from(r)))
}

/// `GET /v1/tasks`'s filters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only tasks in this status.
    status: Option<StatusFilter>,
    /// Only tasks of this agent.
    agent: Option<String>,
    /// Only tasks of this trace (32 lowercase hex digits).
    #[param(pattern = "^([0-9a-f]{32})?$")]
    trace_id: Option<String>,
    /// Only the children of this task (its id).
    #[param(pattern = "^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})?$")]
    parent_task_id: Option<String>,
    /// Only tasks whose id, title, prompt or agent contains this text (any case).
    q: Option<String>,
    /// At most this many (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// A task status, as `GET /v1/tasks` filters by it.
#[derive(Debug, Clone, Copy, serde::Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    Queued,
    Running,
    AwaitingApproval,
    Completed,
    Error,
    Cancelled,
    DeadlineExceeded,
    MaxSteps,
    Rejected,
    DeadLettered,
    BudgetExceeded,
    Scheduled,
}

impl StatusFilter {
    fn status(self) -> Result<taskwire_protocol::TaskStatus, ApiError> {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        name.parse()
            .map_err(|_| invalid(format!("invalid status: unknown status `{name}`")))
    }
}

/// Lists the caller's tasks, newest first.
#[utoipa::path(
    get, path = "/v1/tasks", tag = "tasks", operation_id = "list",
    params(ListQuery),
    responses(
        (status = 200, description = "The tasks, each as `GET /v1/tasks/{id}` answers it", body = TaskList),
        (status = 400, description = "A filter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "The trace or the parent task does not exist (or is another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<Json<TaskList>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let status = match q.status {
        None => 0,
        Some(s) => pb::TaskStatus::from(s.status()?) as i32,
    };
    let text = q.q.as_deref().unwrap_or("").trim().to_lowercase();
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(invalid(format!(
            "invalid limit: {limit} is not between 1 and 1000"
        )));
    }
    let response = api
        .list(request(
            &caller,
            pb::ListRequest {
                trace_id: q.trace_id.as_deref().unwrap_or("").trim().to_owned(),
                parent_task_id: q.parent_task_id.as_deref().unwrap_or("").trim().to_owned(),
                status,
                agent: q.agent.as_deref().unwrap_or("").trim().to_owned(),
                // A text filter is applied here, over a wider page of the list.
                limit: if text.is_empty() { limit } else { 1000 },
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let tasks = response
        .tasks
        .iter()
        .filter(|t| {
            text.is_empty()
                || [&t.task_id, &t.title, &t.prompt, &t.agent]
                    .iter()
                    .any(|f| f.to_lowercase().contains(&text))
        })
        .take(limit as usize)
        .map(Task::from)
        .collect();
    Ok(Json(TaskList { tasks }))
}

/// `Get` of `task_id` as the caller (another tenant's task is not found).
pub(crate) async fn get_task(
    api: &TaskApi,
    caller: &Principal,
    task_id: String,
) -> Result<pb::Task, ApiError> {
    Ok(api
        .get(request(caller, pb::GetRequest { task_id }))
        .await?
        .into_inner())
}

/// Reads a task: its state, usage, webhook and, once finished, its result.
#[utoipa::path(
    get, path = "/v1/tasks/{id}", tag = "tasks", operation_id = "get",
    params(("id" = uuid::Uuid, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The task", body = Task),
        (status = 400, description = "The id is not a task id", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Task>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    Ok(Json(Task::from(&get_task(api, &caller, id).await?)))
}

/// Cancels a task and its descendants.
///
/// The body is optional: `{"reason": "..."}`.
#[utoipa::path(
    post, path = "/v1/tasks/{id}/cancel", tag = "tasks", operation_id = "cancel",
    params(("id" = uuid::Uuid, Path, description = "The task's id")),
    request_body(content = CancelBody, description = "Optional"),
    responses(
        (status = 200, description = "The task's status now", body = StatusReply),
        (status = 400, description = "The id or the body is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<StatusReply>, ApiError> {
    let body: CancelBody = if body.iter().all(u8::is_ascii_whitespace) {
        CancelBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| invalid(format!("body: {e}")))?
    };
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .cancel(request(
            &caller,
            pb::CancelRequest {
                task_id: id,
                reason: body
                    .reason
                    .unwrap_or_else(|| "cancelled over the HTTP API".to_owned()),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(StatusReply {
        status: super::model::status(r.status).to_owned(),
    }))
}

/// Runs a dead-lettered or failed task again, with a fresh attempt budget.
#[utoipa::path(
    post, path = "/v1/tasks/{id}/replay", tag = "tasks", operation_id = "replay",
    params(("id" = uuid::Uuid, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The task, queued again", body = Task),
        (status = 400, description = "The id is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 409, description = "The task is not dead-lettered or failed", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn replay(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Task>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let task = api
        .replay(request(&caller, pb::ReplayRequest { task_id: id }))
        .await?
        .into_inner();
    Ok(Json(Task::from(&task)))
}

/// Answers an approval a task asked for (an `approval_required` event).
///
/// `{id}` is the task that asks: the event's `task_id`.
#[utoipa::path(
    post, path = "/v1/tasks/{id}/approvals/{request_id}", tag = "tasks", operation_id = "approve",
    params(
        ("id" = uuid::Uuid, Path, description = "The task that asks"),
        ("request_id" = String, Path, description = "The event's `request_id`"),
    ),
    request_body = ApprovalBody,
    responses(
        (status = 200, description = "The task's status now", body = StatusReply),
        (status = 400, description = "The answer is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task or approval", body = ErrorBody),
        (status = 409, description = "The approval is no longer open", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn approve(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path((id, request_id)): Path<(String, String)>,
    Body(body): Body<ApprovalBody>,
) -> Result<Json<StatusReply>, ApiError> {
    let answer = match body.answer {
        ApprovalAnswer::Once => pb::ApprovalAnswer::Once,
        ApprovalAnswer::Always => pb::ApprovalAnswer::Always,
        ApprovalAnswer::Reject => pb::ApprovalAnswer::Reject,
    };
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .approve(request(
            &caller,
            pb::ApproveRequest {
                task_id: id,
                request_id,
                answer: answer as i32,
                message: body.message.unwrap_or_default(),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(StatusReply {
        status: super::model::status(r.status).to_owned(),
    }))
}

/// A task and its descendants, breadth first (at most 2000 tasks).
#[utoipa::path(
    get, path = "/v1/tasks/{id}/tree", tag = "tasks", operation_id = "tree",
    params(("id" = uuid::Uuid, Path, description = "The root task's id")),
    responses(
        (status = 200, description = "The root first, then its descendants", body = TaskList),
        (status = 400, description = "The id is not a task id", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn tree(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<TaskList>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let root = get_task(api, &caller, id).await?;
    let mut tasks = vec![root];
    let mut next = 0;
    while next < tasks.len() && tasks.len() < MAX_TREE_TASKS {
        let parent = tasks[next].task_id.clone();
        next += 1;
        let children = api
            .list(request(
                &caller,
                pb::ListRequest {
                    parent_task_id: parent,
                    limit: 1000,
                    ..Default::default()
                },
            ))
            .await?
            .into_inner()
            .tasks;
        // `List` answers each child as `Get` would: attempts, usage and result.
        tasks.extend(children.into_iter().rev());
    }
    Ok(Json(TaskList {
        tasks: tasks.iter().map(Task::from).collect(),
    }))
}

/// A finished task's session transcript.
#[utoipa::path(
    get, path = "/v1/tasks/{id}/transcript", tag = "tasks", operation_id = "transcript",
    params(("id" = uuid::Uuid, Path, description = "The task's id")),
    responses(
        (status = 200, description = "The transcript; null when none was kept", body = Transcript),
        (status = 400, description = "The id is not a task id", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 404, description = "No such task (or another tenant's)", body = ErrorBody),
        (status = 503, description = "The coordinator is starting, or Postgres or NATS is down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn transcript(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Transcript>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let task = get_task(api, &caller, id).await?;
    let transcript = api.transcript(&task).await?;
    Ok(Json(Transcript { transcript }))
}

/// `GET /v1/agents`'s options.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AgentsQuery {
    /// Also the hidden agents (`title`, `compaction`, ...).
    include_hidden: Option<bool>,
}

/// The agents tasks can be sent to.
#[utoipa::path(
    get, path = "/v1/agents", tag = "agents", operation_id = "agents",
    params(AgentsQuery),
    responses(
        (status = 200, description = "The agents", body = AgentList),
        (status = 400, description = "A parameter is invalid", body = ErrorBody),
        (status = 401, description = "No valid bearer token", body = ErrorBody),
        (status = 503, description = "The coordinator is starting", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub async fn agents(
    State(d): State<HttpApi>,
    headers: HeaderMap,
    Query(q): Query<AgentsQuery>,
) -> Result<Json<AgentList>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .list_agents(request(
            &caller,
            pb::ListAgentsRequest {
                include_hidden: q.include_hidden.unwrap_or(false),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(AgentList {
        agents: r.agents.iter().map(super::model::Agent::from).collect(),
    }))
}

/// Whether requests need a bearer token, and the coordinator's version.
#[utoipa::path(
    get, path = "/v1/info", tag = "agents", operation_id = "info",
    responses((status = 200, description = "The server", body = ServerInfo)),
    security(())
)]
pub async fn info(State(d): State<HttpApi>) -> Json<ServerInfo> {
    Json(ServerInfo {
        auth: d.auth_enabled(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_filter_names_a_status_and_every_status_has_one() {
        for status in taskwire_protocol::TaskStatus::ALL {
            let filter: StatusFilter =
                serde_json::from_value(serde_json::json!(status.as_str())).expect("a filter");
            assert_eq!(filter.status().expect("a status"), status);
        }
    }

    #[test]
    fn a_submit_body_becomes_the_grpc_request() {
        let body: SubmitBody = serde_json::from_value(serde_json::json!({
            "agent": "general",
            "prompt": "hi",
            "input": {"n": 1},
            "deadline": "2030-01-01T00:00:00Z",
            "output_schema": {"type": "object"},
            "priority": 2,
            "context_refs": [{"type": "git", "uri": "/repo"}],
            "callback_url": "https://example.com/hook",
        }))
        .expect("body");
        let req = submit_request(body).expect("request");
        assert_eq!(req.agent, "general");
        assert_eq!(req.deadline.map(|d| d.seconds), Some(1_893_456_000));
        assert_eq!(req.output_schema, r#"{"type":"object"}"#);
        assert_eq!(req.priority, 2);
        assert_eq!(req.context_refs[0].r#type, "git");
        assert_eq!(req.callback_url, "https://example.com/hook");
        assert!(req.input.is_some_and(|i| i.fields.contains_key("n")));
    }

    #[test]
    fn a_bad_deadline_and_an_unknown_field_are_refused_with_their_names() {
        let body = SubmitBody {
            deadline: Some("tomorrow".to_owned()),
            ..Default::default()
        };
        let err = submit_request(body).expect_err("bad deadline");
        assert!(err.0.message().contains("deadline"), "{}", err.0.message());
        let unknown = serde_json::from_value::<SubmitBody>(
            serde_json::json!({"agent": "a", "prompt": "p", "max_cost": 1}),
        )
        .expect_err("unknown field");
        assert!(unknown.to_string().contains("max_cost"), "{unknown}");
    }
}
