//! The web dashboard, served on the coordinator's HTTP listener.
//!
//! - `/`: the tasks, newest first, filterable by status, agent, trace and text.
//! - `/tasks/<task_id>`: a task's tree, live: each node's timeline of steps, tool calls
//!   and text, its transcript and result (the patch as a diff), and buttons to cancel,
//!   replay and answer approvals (the tree's descendants' too).
//! - `/schedules`: the schedules, refreshed every few seconds: each one's cadence,
//!   time zone, state, next fire times, last runs (linked to their tasks) and
//!   counters, with buttons to pause, resume and trigger it.
//!
//! The pages read and act through the HTTP/JSON API ([`crate::rest`], `/v1/...`), so
//! the tenant checks are the API's: another tenant's task is 404, exactly like a
//! missing one. With a tokens file, requests carry `Authorization: Bearer <token>` (the
//! page asks for it and keeps it in the browser's session storage); without one the
//! page says the API is open. The pages are plain HTML, CSS and JavaScript embedded in
//! the binary (`dashboard/assets/`): no CDN, no build step.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The pages and their assets.
///
/// | route | answer |
/// |---|---|
/// | `GET /`, `GET /tasks/{id}` | the list and tree pages |
/// | `GET /schedules` | the schedules page |
/// | `GET /assets/{file}` | the pages' scripts and styles |
pub fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { page(LIST_HTML) }))
        .route("/tasks/{id}", get(|| async { page(TASK_HTML) }))
        .route("/schedules", get(|| async { page(SCHEDULES_HTML) }))
        .route("/assets/{file}", get(asset))
}

const LIST_HTML: &str = include_str!("dashboard/assets/index.html");
const TASK_HTML: &str = include_str!("dashboard/assets/task.html");
const SCHEDULES_HTML: &str = include_str!("dashboard/assets/schedules.html");

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
        "schedules.js" => (
            include_str!("dashboard/assets/schedules.js"),
            "text/javascript",
        ),
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
