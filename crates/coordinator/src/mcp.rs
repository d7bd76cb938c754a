//! taskwire as an MCP server: a harness (Claude Code, OpenCode, Codex, ...) sends work to
//! the fleet and reads the result with tools, over the official SDK (`rmcp`).
//!
//! Tools: `submit_task` (agent, prompt, optional wait), `get_task`, `list_agents`,
//! `cancel_task`, `answer_approval`. Each is one call of the gRPC service's methods,
//! made by a [`Fleet`]: the coordinator's own API for `/mcp` on its HTTP listener
//! ([`routes`], Streamable HTTP, the caller's bearer token and tenant as for gRPC), or a
//! gRPC client for `taskwire mcp` (stdio, in the CLI).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::http::HeaderMap;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use taskwire_protocol::pb;
use tonic::Status;

use pb::task_service_server::TaskService;

use crate::api::TaskApi;
use crate::auth::Principal;
use crate::error::McpToolError;
use crate::rest::{HttpApi, request};

/// The gRPC service's methods, as the MCP tools call them. `headers` are the HTTP
/// request's (`/mcp`), for the caller's token; `None` over stdio.
#[async_trait]
pub trait Fleet: Send + Sync + 'static {
    async fn submit(
        &self,
        headers: Option<&HeaderMap>,
        r: pb::SubmitRequest,
    ) -> Result<pb::SubmitResponse, Status>;
    async fn get(&self, headers: Option<&HeaderMap>, task_id: String) -> Result<pb::Task, Status>;
    /// The task's events, ending with its result (`Watch`).
    async fn watch(&self, headers: Option<&HeaderMap>, task_id: String) -> Result<Events, Status>;
    async fn list_agents(&self, headers: Option<&HeaderMap>) -> Result<Vec<pb::AgentSpec>, Status>;
    async fn cancel(
        &self,
        headers: Option<&HeaderMap>,
        r: pb::CancelRequest,
    ) -> Result<pb::CancelResponse, Status>;
    async fn approve(
        &self,
        headers: Option<&HeaderMap>,
        r: pb::ApproveRequest,
    ) -> Result<pb::ApproveResponse, Status>;
}

/// A task's watch stream.
pub type Events = futures::stream::BoxStream<'static, Result<pb::WatchEvent, Status>>;

/// How long `submit_task` with `wait` waits at most, and by default.
const MAX_WAIT: Duration = Duration::from_secs(3600);
const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// The MCP server over a [`Fleet`].
#[derive(Clone)]
pub struct FleetServer {
    fleet: Arc<dyn Fleet>,
}

impl FleetServer {
    pub fn new(fleet: Arc<dyn Fleet>) -> Self {
        Self { fleet }
    }

    async fn run(
        &self,
        name: &str,
        args: &Value,
        headers: Option<&HeaderMap>,
    ) -> Result<Value, McpToolError> {
        let s = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let status = |e: Status| McpToolError::Status(Box::new(e));
        match name {
            "submit_task" => {
                let submitted = self
                    .fleet
                    .submit(
                        headers,
                        pb::SubmitRequest {
                            agent: s("agent"),
                            prompt: s("prompt"),
                            tenant: s("tenant"),
                            sender: "mcp".into(),
                            idempotency_key: s("idempotency_key"),
                            ..Default::default()
                        },
                    )
                    .await
                    .map_err(status)?;
                if args.get("wait").and_then(Value::as_bool) != Some(true) {
                    return Ok(json!({"task_id": submitted.task_id, "session_id": submitted.session_id, "created": submitted.created, "status": "queued"}));
                }
                let wait = args
                    .get("wait_seconds")
                    .and_then(Value::as_f64)
                    .map_or(DEFAULT_WAIT, |s| Duration::from_secs_f64(s.max(0.0)))
                    .min(MAX_WAIT);
                // The task's own events until its result (or the wait's end), then
                // the task as it is.
                let mut events = self
                    .fleet
                    .watch(headers, submitted.task_id.clone())
                    .await
                    .map_err(status)?;
                let _ = tokio::time::timeout(wait, async {
                    use futures::StreamExt;
                    while let Some(Ok(event)) = events.next().await {
                        if matches!(event.event, Some(pb::watch_event::Event::Result(_))) {
                            break;
                        }
                    }
                })
                .await;
                let task = self
                    .fleet
                    .get(headers, submitted.task_id)
                    .await
                    .map_err(status)?;
                Ok(task_view(&task))
            }
            "get_task" => self
                .fleet
                .get(headers, s("task_id"))
                .await
                .map(|t| task_view(&t))
                .map_err(status),
            "list_agents" => self
                .fleet
                .list_agents(headers)
                .await
                .map(|agents| {
                    Value::Array(
                        agents
                            .iter()
                            .map(|a| {
                                json!({"name": a.name, "description": a.description,
                                       "mode": pb::AgentMode::try_from(a.mode).map_or("", |m| m.as_str_name())})
                            })
                            .collect(),
                    )
                })
                .map_err(status),
            "cancel_task" => self
                .fleet
                .cancel(
                    headers,
                    pb::CancelRequest {
                        task_id: s("task_id"),
                        reason: s("reason"),
                    },
                )
                .await
                .map(|r| json!({"status": status_name(r.status)}))
                .map_err(status),
            "answer_approval" => {
                let answer = match s("answer").as_str() {
                    "once" => pb::ApprovalAnswer::Once,
                    "always" => pb::ApprovalAnswer::Always,
                    "reject" => pb::ApprovalAnswer::Reject,
                    other => {
                        return Err(McpToolError::InvalidAnswer(other.to_owned()));
                    }
                };
                self.fleet
                    .approve(
                        headers,
                        pb::ApproveRequest {
                            task_id: s("task_id"),
                            request_id: s("request_id"),
                            answer: answer as i32,
                            message: s("message"),
                        },
                    )
                    .await
                    .map(|r| json!({"status": status_name(r.status)}))
                    .map_err(status)
            }
            other => Err(McpToolError::UnknownTool(other.to_owned())),
        }
    }
}

pub(crate) fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
        .chars()
        .fold(String::new(), |mut out, c| {
            if c.is_uppercase() && !out.is_empty() {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
            out
        })
}

fn status_name(status: i32) -> &'static str {
    pb::TaskStatus::try_from(status).map_or("TASK_STATUS_UNSPECIFIED", |s| s.as_str_name())
}

/// A task as the tools return it: its state and, once finished, its answer.
fn task_view(t: &pb::Task) -> Value {
    let mut view = json!({
        "task_id": t.task_id,
        "agent": t.agent,
        "status": status_name(t.status),
        "attempt": t.attempt,
    });
    if !t.parent_task_id.is_empty() {
        view["parent_task_id"] = t.parent_task_id.clone().into();
    }
    if let Some(r) = &t.result {
        let output = r.output.as_ref();
        view["result"] = json!({
            "status": status_name(r.status),
            "output": output.map(|o| o.text.clone()).unwrap_or_default(),
            "errors": r.errors.iter().map(|e| json!({"code": e.code, "message": e.message})).collect::<Vec<_>>(),
            "patch": r.patch,
            "session_id": r.session_id,
        });
        if let Some(structured) = output.and_then(|o| o.structured.as_ref()) {
            view["result"]["structured"] = taskwire_protocol::value::struct_to_json(structured);
        }
    }
    view
}

fn tools() -> Vec<Tool> {
    let schema = |v: Value| match v {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    };
    vec![
        Tool::new(
            "submit_task",
            "Send a task to the taskwire fleet: an agent (see list_agents) runs the prompt. \
             With wait: true, waits (up to wait_seconds, default 300) and returns the result; \
             otherwise returns the task id at once (read it later with get_task).",
            schema(json!({"type": "object", "properties": {
                "agent": {"type": "string", "description": "the agent to run, e.g. general or explore"},
                "prompt": {"type": "string"},
                "wait": {"type": "boolean", "default": false},
                "wait_seconds": {"type": "number", "minimum": 0, "maximum": 3600},
                "tenant": {"type": "string", "description": "only for a token allowed several tenants"},
                "idempotency_key": {"type": "string", "description": "the same key submits once"}
            }, "required": ["agent", "prompt"]})),
        ),
        Tool::new(
            "get_task",
            "A task's state and, once it finished, its result (answer text, errors, patch).",
            schema(
                json!({"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}),
            ),
        ),
        Tool::new(
            "list_agents",
            "The agents tasks can be sent to, with what each does.",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "cancel_task",
            "Cancel a task and its children.",
            schema(
                json!({"type": "object", "properties": {"task_id": {"type": "string"}, "reason": {"type": "string"}}, "required": ["task_id"]}),
            ),
        ),
        Tool::new(
            "answer_approval",
            "Answer a task's request for permission (an `ask` rule): once, always (this and \
             matching calls for the rest of the session) or reject (message goes to the model).",
            schema(json!({"type": "object", "properties": {
                "task_id": {"type": "string"}, "request_id": {"type": "string"},
                "answer": {"type": "string", "enum": ["once", "always", "reject"]},
                "message": {"type": "string"}
            }, "required": ["task_id", "request_id", "answer"]})),
        ),
    ]
}

impl ServerHandler for FleetServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("taskwire", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Send agent tasks to a taskwire fleet: list_agents, submit_task (wait: true for \
                 the result), get_task, cancel_task, answer_approval.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let headers = context
            .extensions
            .get::<axum::http::request::Parts>()
            .map(|parts| parts.headers.clone());
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.run(&request.name, &args, headers.as_ref()).await {
            Ok(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                if value.is_object() {
                    result.structured_content = Some(value);
                }
                result
            }
            Err(reason) => CallToolResult::error(vec![ContentBlock::text(reason.to_string())]),
        };
        Ok(result.into())
    }
}

/// The coordinator's own API, as the caller of an `/mcp` request.
struct OwnApi(HttpApi);

impl OwnApi {
    /// The API and the caller the request's token names.
    fn caller(&self, headers: Option<&HeaderMap>) -> Result<(&TaskApi, Principal), Status> {
        static NONE: std::sync::LazyLock<HeaderMap> = std::sync::LazyLock::new(HeaderMap::new);
        self.0.caller(headers.unwrap_or(&NONE)).map_err(|e| e.0)
    }
}

#[async_trait]
impl Fleet for OwnApi {
    async fn submit(
        &self,
        h: Option<&HeaderMap>,
        r: pb::SubmitRequest,
    ) -> Result<pb::SubmitResponse, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api.submit(request(&caller, r)).await?.into_inner())
    }
    async fn get(&self, h: Option<&HeaderMap>, task_id: String) -> Result<pb::Task, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api
            .get(request(&caller, pb::GetRequest { task_id }))
            .await?
            .into_inner())
    }
    async fn watch(&self, h: Option<&HeaderMap>, task_id: String) -> Result<Events, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api
            .watch(request(&caller, pb::WatchRequest { task_id }))
            .await?
            .into_inner())
    }
    async fn list_agents(&self, h: Option<&HeaderMap>) -> Result<Vec<pb::AgentSpec>, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api
            .list_agents(request(&caller, pb::ListAgentsRequest::default()))
            .await?
            .into_inner()
            .agents)
    }
    async fn cancel(
        &self,
        h: Option<&HeaderMap>,
        r: pb::CancelRequest,
    ) -> Result<pb::CancelResponse, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api.cancel(request(&caller, r)).await?.into_inner())
    }
    async fn approve(
        &self,
        h: Option<&HeaderMap>,
        r: pb::ApproveRequest,
    ) -> Result<pb::ApproveResponse, Status> {
        let (api, caller) = self.caller(h)?;
        Ok(api.approve(request(&caller, r)).await?.into_inner())
    }
}

/// `/mcp`: the Streamable HTTP endpoint. A request without a valid token (when the
/// coordinator has a tokens file) is refused with 401 before the protocol sees it.
pub fn routes(dashboard: HttpApi) -> Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let server = FleetServer::new(Arc::new(OwnApi(dashboard.clone())));
    // Host names are not checked (the coordinator sits behind whatever name its
    // deployment gives it); the bearer token is.
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().disable_allowed_hosts(),
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            dashboard,
            authenticate,
        ))
}

async fn authenticate(
    axum::extract::State(dashboard): axum::extract::State<HttpApi>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match dashboard.caller(request.headers()) {
        Ok(_) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}
