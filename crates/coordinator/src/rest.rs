//! The HTTP/JSON API on the coordinator's HTTP listener (`/v1/...`), for curl and every
//! language without a gRPC stack; the dashboard's pages use it too.
//!
//! Every handler calls the gRPC service's own method ([`TaskApi`]) with the caller's
//! [`Principal`]: the same bearer tokens (`Authorization: Bearer <token>`), the same
//! tenants (another tenant's task is 404, exactly like a missing one) and the same
//! checks. Errors are the gRPC code, mapped once ([`ErrorCode::http_status`]), with a
//! body `{"code": "NOT_FOUND", "error": "..."}`.
//!
//! The OpenAPI 3.1 document at `/v1/openapi.json` is generated from the handlers and
//! the types in [`model`] (utoipa): it cannot drift from what is served.
//!
//! - [`model`]: the request bodies and the API's messages as JSON.
//! - [`tasks`]: the task, agent and info endpoints.
//! - [`events`]: the server-sent-event feeds.
//! - [`schedules`]: the schedule endpoints.

pub mod events;
pub mod model;
pub mod schedules;
pub mod tasks;

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::Router;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use taskwire_protocol::ErrorCode;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::TaskApi;
use crate::auth::{Authenticator, Principal};

/// What the HTTP API's handlers share: the API (set once the coordinator is connected)
/// and the authenticator.
#[derive(Clone)]
pub struct HttpApi {
    api: Arc<OnceLock<TaskApi>>,
    auth: Authenticator,
}

impl HttpApi {
    pub fn new(auth: Authenticator) -> Self {
        Self {
            api: Arc::new(OnceLock::new()),
            auth,
        }
    }

    /// The coordinator is connected: the API answers from now on.
    pub fn connected(&self, api: TaskApi) {
        let _ = self.api.set(api);
    }

    /// Whether requests need a bearer token.
    pub fn auth_enabled(&self) -> bool {
        self.auth.is_enabled()
    }

    /// The API and the caller, or the error to answer instead.
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

/// An API error as an HTTP response: the code's HTTP status and
/// `{"code": "NOT_FOUND", "error": message}`; a `RESOURCE_EXHAUSTED` refusal also says
/// when to try again (`Retry-After`, seconds).
#[derive(Debug)]
pub struct ApiError(pub tonic::Status);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = ErrorCode::from(self.0.code());
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = model::ErrorBody {
            code: code.as_wire().to_owned(),
            error: self.0.message().to_owned(),
        };
        let mut response = (status, Json(body)).into_response();
        if code == ErrorCode::ResourceExhausted {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        Self(status)
    }
}

impl From<crate::CoordinatorError> for ApiError {
    fn from(e: crate::CoordinatorError) -> Self {
        Self(e.into())
    }
}

fn invalid(message: String) -> ApiError {
    ApiError(tonic::Status::invalid_argument(message))
}

/// A JSON body; a malformed one is `INVALID_ARGUMENT` with serde's reason.
pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    Json<T>: FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Json::<T>::from_request(req, state)
            .await
            .map(|Json(v)| Body(v))
            .map_err(|e| invalid(format!("body: {}", e.body_text())))
    }
}

/// A query string; a malformed one is `INVALID_ARGUMENT` with the reason.
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e| invalid(format!("query: {}", e.body_text())))
    }
}

/// The document's frame: title, the bearer scheme every operation names.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "taskwire",
        description = "taskwire's HTTP/JSON API: submit agent tasks, follow them, answer their approvals. \
                       The same methods, tokens, tenants and error codes as the gRPC API (taskwire.v1.TaskService). \
                       Without a tokens file the coordinator's API is open and the bearer token is ignored."
    ),
    modifiers(&BearerScheme),
    components(schemas(model::TreeEvent, model::StatusChange, tasks::StatusFilter)),
    tags((name = "tasks"), (name = "agents"), (name = "schedules"))
)]
struct Frame;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The `/v1` routes and the OpenAPI document that describes them (served at
/// `/v1/openapi.json`).
///
/// | route | answer |
/// |---|---|
/// | `POST /v1/tasks` | submit |
/// | `GET /v1/tasks?status&agent&trace_id&parent_task_id&q&limit` | the caller's tasks, newest first |
/// | `GET /v1/tasks/{id}` | a task, with its result once finished |
/// | `POST /v1/tasks/{id}/cancel`, `/replay` | cancel, replay |
/// | `POST /v1/tasks/{id}/approvals/{request_id}` | answer an approval |
/// | `GET /v1/tasks/{id}/tree` | the task and its descendants |
/// | `GET /v1/tasks/{id}/transcript` | a finished task's session transcript |
/// | `GET /v1/tasks/{id}/events` | SSE: the tree's progress and results, from the start |
/// | `GET /v1/events` | SSE: status changes of the caller's tasks |
/// | `POST /v1/commands/{name}` | run a slash command |
/// | `GET /v1/agents` | the agents |
/// | `GET /v1/info` | whether a token is needed; the version |
/// | `GET /v1/schedules?tenant`, `POST /v1/schedules` | the schedules; create one (201) |
/// | `GET`, `PUT`, `DELETE /v1/schedules/{name}?tenant` | read, replace the spec, delete (204) |
/// | `POST /v1/schedules/{name}/pause`, `/resume` | pause, resume |
/// | `POST /v1/schedules/{name}/trigger` | fire it now (201, the task as submit answers it) |
pub fn routes(state: HttpApi) -> Router {
    let (router, document) = api().split_for_parts();
    let document = Arc::new(document_json(document));
    router.with_state(state).route(
        "/v1/openapi.json",
        axum::routing::get(move || {
            let document = document.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    document.as_str().to_owned(),
                )
            }
        }),
    )
}

/// The OpenAPI document of [`routes`], as JSON (what `/v1/openapi.json` serves).
pub fn openapi_json() -> String {
    document_json(api().split_for_parts().1)
}

fn api() -> OpenApiRouter<HttpApi> {
    OpenApiRouter::with_openapi(Frame::openapi())
        .routes(routes!(tasks::submit, tasks::list))
        .routes(routes!(tasks::get))
        .routes(routes!(tasks::cancel))
        .routes(routes!(tasks::replay))
        .routes(routes!(tasks::approve))
        .routes(routes!(tasks::tree))
        .routes(routes!(tasks::transcript))
        .routes(routes!(events::tree_events))
        .routes(routes!(events::status_changes))
        .routes(routes!(tasks::run_command))
        .routes(routes!(tasks::agents))
        .routes(routes!(tasks::info))
        .routes(routes!(schedules::create, schedules::list))
        .routes(routes!(
            schedules::get,
            schedules::update,
            schedules::delete
        ))
        .routes(routes!(schedules::pause))
        .routes(routes!(schedules::resume))
        .routes(routes!(schedules::trigger))
}

/// The document as served: the crate's version in `info`.
fn document_json(mut document: utoipa::openapi::OpenApi) -> String {
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    document.to_pretty_json().unwrap_or_else(|e| {
        format!("{{\"error\": \"the OpenAPI document did not serialize: {e}\"}}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_openapi_3_1_and_names_every_route_with_its_errors() {
        let doc: serde_json::Value = serde_json::from_str(&openapi_json()).expect("json");
        assert!(
            doc["openapi"]
                .as_str()
                .is_some_and(|v| v.starts_with("3.1")),
            "{}",
            doc["openapi"]
        );
        let paths = doc["paths"].as_object().expect("paths");
        for (path, method) in [
            ("/v1/tasks", "post"),
            ("/v1/tasks", "get"),
            ("/v1/tasks/{id}", "get"),
            ("/v1/tasks/{id}/cancel", "post"),
            ("/v1/tasks/{id}/approvals/{request_id}", "post"),
            ("/v1/tasks/{id}/events", "get"),
            ("/v1/commands/{name}", "post"),
            ("/v1/agents", "get"),
            ("/v1/schedules", "get"),
            ("/v1/schedules", "post"),
            ("/v1/schedules/{name}", "get"),
            ("/v1/schedules/{name}", "put"),
            ("/v1/schedules/{name}", "delete"),
            ("/v1/schedules/{name}/pause", "post"),
            ("/v1/schedules/{name}/resume", "post"),
            ("/v1/schedules/{name}/trigger", "post"),
        ] {
            let op = &paths[path][method];
            assert!(op.is_object(), "{method} {path} is documented");
            assert!(
                op["responses"]["401"].is_object(),
                "{method} {path} documents 401"
            );
            assert_eq!(
                op["security"],
                serde_json::json!([{"bearer": []}]),
                "{method} {path} names the bearer scheme"
            );
        }
        // The schedule routes: their success statuses, and a name as the service
        // checks it (so that a fuzzer's name outside it is a documented 400).
        for (path, method, ok) in [
            ("/v1/schedules", "post", "201"),
            ("/v1/schedules/{name}", "delete", "204"),
            ("/v1/schedules/{name}/trigger", "post", "201"),
            ("/v1/schedules/{name}/pause", "post", "200"),
        ] {
            assert!(
                paths[path][method]["responses"][ok].is_object(),
                "{method} {path} answers {ok}"
            );
        }
        for (path, method) in [
            ("/v1/schedules/{name}", "get"),
            ("/v1/schedules/{name}", "put"),
            ("/v1/schedules/{name}/trigger", "post"),
        ] {
            let name = paths[path][method]["parameters"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == "name"))
                .unwrap_or_else(|| panic!("{method} {path} names its schedule"));
            assert_eq!(name["schema"]["pattern"], "^[A-Za-z0-9._-]{1,128}$");
        }
        for schema in [
            "ScheduleSpecBody",
            "Schedule",
            "ScheduleRun",
            "ScheduleList",
        ] {
            assert!(
                doc["components"]["schemas"][schema].is_object(),
                "{schema} is in the components"
            );
        }
        assert_eq!(
            doc["components"]["schemas"]["ScheduleSpecBody"]["additionalProperties"],
            false
        );
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        assert!(
            doc["components"]["schemas"]["SubmitBody"]["properties"]["callback_url"].is_object()
        );
    }

    #[test]
    fn an_error_is_its_codes_http_status_and_a_json_body() {
        let r = ApiError(tonic::Status::not_found("task x not found")).into_response();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = ApiError(tonic::Status::resource_exhausted("full")).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let r = ApiError(tonic::Status::unknown("?")).into_response();
        assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
