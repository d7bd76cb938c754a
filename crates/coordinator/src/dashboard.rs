//! The web dashboard, served on the coordinator's HTTP listener.
//!
//! - `/`: the tasks, newest first, filterable by status, agent, trace and text.
//! - `/tasks/<task_id>`: a task's tree, live: each node's timeline of steps, tool calls
//!   and text, its transcript and result (the patch as a diff), and buttons to cancel,
//!   replay and answer approvals (the tree's descendants' too).
//! - `/api/...`: the JSON and server-sent-event endpoints the pages read (see
//!   [`routes`]).
//!
//! Every endpoint calls the gRPC service's own methods ([`TaskApi`]) with the caller's
//! [`Principal`], so the tenant checks are the API's: another tenant's task is 404,
//! exactly like a missing one. With a tokens file, requests carry
//! `Authorization: Bearer <token>` (the page asks for it and keeps it in the browser's
//! session storage); without one the page says the API is open. The pages are plain
//! HTML, CSS and JavaScript embedded in the binary (`dashboard/assets/`): no CDN, no
//! build step.
//!
//! - [`json`]: API messages as the pages' JSON.
//! - [`live`]: the live feeds (a task tree's events; the list's status changes).

pub mod json;
pub mod live;

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use taskwire_protocol::pb;
use taskwire_protocol::pb::task_service_server::TaskService;

use crate::api::TaskApi;
use crate::auth::{Authenticator, Principal};

/// The most tasks the tree endpoint returns (it walks the tree breadth first).
const MAX_TREE_TASKS: usize = 2000;

/// What the dashboard's handlers share: the API (set once the coordinator is
/// connected) and the authenticator.
#[derive(Clone)]
pub struct Dashboard {
    api: Arc<OnceLock<TaskApi>>,
    auth: Authenticator,
}

impl Dashboard {
    pub fn new(auth: Authenticator) -> Self {
        Self {
            api: Arc::new(OnceLock::new()),
            auth,
        }
    }

    /// The coordinator is connected: the API endpoints answer from now on.
    pub fn connected(&self, api: TaskApi) {
        let _ = self.api.set(api);
    }

    /// The API and the caller, or the error response to send instead.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<(&TaskApi, Principal), ApiError> {
        let metadata = tonic::metadata::MetadataMap::from_headers(headers.clone());
        let principal = self.auth.authenticate(&metadata).map_err(ApiError)?;
        let api = self
            .api
            .get()
            .ok_or_else(|| ApiError(tonic::Status::unavailable("the coordinator is starting")))?;
        Ok((api, principal))
    }
}

/// A request to the API as the caller, as the gRPC interceptor would hand it over.
pub(crate) fn request<T>(principal: &Principal, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(principal.clone());
    request
}

/// `Get` of `task_id` as the caller (another tenant's task is not found).
async fn get_task(
    api: &TaskApi,
    caller: &Principal,
    task_id: String,
) -> Result<pb::Task, ApiError> {
    Ok(api
        .get(request(caller, pb::GetRequest { task_id }))
        .await?
        .into_inner())
}

/// An API error as an HTTP response: the gRPC code's HTTP equivalent and
/// `{"error": message}`.
pub struct ApiError(pub tonic::Status);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        use tonic::Code;
        let code = match self.0.code() {
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
            Code::Unavailable | Code::ResourceExhausted => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (code, Json(json!({"error": self.0.message()}))).into_response()
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        Self(status)
    }
}

/// The pages, their assets and the API.
///
/// | route | answer |
/// |---|---|
/// | `GET /`, `GET /tasks/{id}` | the list and tree pages |
/// | `GET /assets/{file}` | the pages' scripts and styles |
/// | `GET /api/config` | `{"auth": bool}`: whether a bearer token is needed |
/// | `GET /api/tasks?status&agent&trace&q&limit` | the caller's tasks, newest first |
/// | `GET /api/tasks/{id}/tree` | the task and its descendants |
/// | `GET /api/tasks/{id}/events` | SSE: the tree's progress and results, replayed from the start |
/// | `GET /api/tasks/{id}/transcript` | the session transcript of a finished task |
/// | `GET /api/live` | SSE: status changes of the caller's tasks |
/// | `POST /api/tasks/{id}/cancel`, `/replay`, `/approve` | the API's `Cancel`, `Replay`, `Approve` |
pub fn routes(dashboard: Dashboard) -> Router {
    Router::new()
        .route("/", get(|| async { page(LIST_HTML) }))
        .route("/tasks/{id}", get(|| async { page(TASK_HTML) }))
        .route("/assets/{file}", get(asset))
        .route("/api/config", get(config))
        .route("/api/tasks", get(list))
        .route("/api/tasks/{id}/tree", get(tree))
        .route("/api/tasks/{id}/events", get(live::tree_events))
        .route("/api/tasks/{id}/transcript", get(transcript))
        .route("/api/live", get(live::list_events))
        .route("/api/tasks/{id}/cancel", post(cancel))
        .route("/api/tasks/{id}/replay", post(replay))
        .route("/api/tasks/{id}/approve", post(approve))
        .with_state(dashboard)
}

const LIST_HTML: &str = include_str!("dashboard/assets/index.html");
const TASK_HTML: &str = include_str!("dashboard/assets/task.html");

fn page(html: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "app.css" => (include_str!("dashboard/assets/app.css"), "text/css"),
        "common.js" => (
            include_str!("dashboard/assets/common.js"),
            "text/javascript",
        ),
        "list.js" => (include_str!("dashboard/assets/list.js"), "text/javascript"),
        "task.js" => (include_str!("dashboard/assets/task.js"), "text/javascript"),
        _ => return (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn config(AxumState(d): AxumState<Dashboard>) -> Json<Value> {
    Json(json!({"auth": d.auth.is_enabled()}))
}

/// `/api/tasks`'s filters; `q` matches the id, title, prompt or agent, case-insensitively.
#[derive(serde::Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    status: String,
    #[serde(default)]
    agent: String,
    #[serde(default)]
    trace: String,
    #[serde(default)]
    q: String,
    limit: Option<u32>,
}

async fn list(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let status = match q.status.as_str() {
        "" => 0,
        s => pb::TaskStatus::from(s.parse::<taskwire_protocol::TaskStatus>().map_err(|_| {
            tonic::Status::invalid_argument(format!("status: unknown status `{s}`"))
        })?) as i32,
    };
    let text = q.q.trim().to_lowercase();
    let limit = q.limit.unwrap_or(100).min(1000);
    let response = api
        .list(request(
            &caller,
            pb::ListRequest {
                trace_id: q.trace.trim().to_owned(),
                status,
                agent: q.agent.trim().to_owned(),
                // A text filter is applied here, over a wider page of the list.
                limit: if text.is_empty() { limit } else { 1000 },
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let tasks: Vec<Value> = response
        .tasks
        .iter()
        .filter(|t| {
            text.is_empty()
                || [&t.task_id, &t.title, &t.prompt, &t.agent]
                    .iter()
                    .any(|f| f.to_lowercase().contains(&text))
        })
        .take(limit as usize)
        .map(json::task)
        .collect();
    Ok(Json(json!({ "tasks": tasks })))
}

async fn tree(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(json!({
        "tasks": tasks.iter().map(json::task).collect::<Vec<_>>(),
    })))
}

async fn transcript(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let task = get_task(api, &caller, id).await?;
    let transcript = api.transcript(&task).await?;
    Ok(Json(json!({ "transcript": transcript })))
}

async fn cancel(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let r = api
        .cancel(request(
            &caller,
            pb::CancelRequest {
                task_id: id,
                reason: "cancelled from the dashboard".to_owned(),
            },
        ))
        .await?
        .into_inner();
    Ok(Json(json!({"status": json::status(r.status)})))
}

async fn replay(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (api, caller) = d.caller(&headers)?;
    let task = api
        .replay(request(&caller, pb::ReplayRequest { task_id: id }))
        .await?
        .into_inner();
    Ok(Json(json::task(&task)))
}

/// `POST /api/tasks/{id}/approve`'s body: `{"request_id", "answer": "once" | "always" |
/// "reject", "message"}`; `{id}` is the task that asks.
#[derive(serde::Deserialize)]
pub struct ApproveBody {
    request_id: String,
    answer: String,
    #[serde(default)]
    message: String,
}

async fn approve(
    AxumState(d): AxumState<Dashboard>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Result<Json<ApproveBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(|e| tonic::Status::invalid_argument(e.body_text()))?;
    let (api, caller) = d.caller(&headers)?;
    let answer = match body.answer.as_str() {
        "once" => pb::ApprovalAnswer::Once,
        "always" => pb::ApprovalAnswer::Always,
        "reject" => pb::ApprovalAnswer::Reject,
        other => {
            return Err(tonic::Status::invalid_argument(format!(
                "answer: must be once, always or reject, not `{other}`"
            ))
            .into());
        }
    };
    let r = api
        .approve(request(
            &caller,
            pb::ApproveRequest {
                task_id: id,
                request_id: body.request_id,
                answer: answer as i32,
                message: body.message,
            },
        ))
        .await?
        .into_inner();
    Ok(Json(json!({"status": json::status(r.status)})))
}
