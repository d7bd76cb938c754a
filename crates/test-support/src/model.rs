//! A scripted model served over real HTTP, so provider clients are tested for real.
//!
//! [`ScriptedModel`] binds `127.0.0.1:0` and answers three wire formats:
//!
//! - `POST /v1/chat/completions`: OpenAI-compatible chat completions (`openai`);
//! - `POST /v1/messages`: Anthropic Messages (`anthropic`);
//! - `POST /v1/responses`: the OpenAI Responses API (`responses`).
//!
//! Each request is turned into a provider-neutral [`SeenRequest`], recorded, and handed
//! to a handler that decides the [`ScriptedReply`]. The handler is a pure function of the
//! request, so one server can serve many independent conversations at once (a
//! thousand are tested): [`ScriptedModel::sequence`] scripts a conversation
//! by counting the assistant turns already in the request, not by a global queue.
//!
//! Streaming requests are answered with server-sent events that split text and tool-call
//! arguments over several events, as real servers do, so chunk assembly gets exercised.
//!
//! - `reply`: [`ScriptedReply`] and its rendering to an HTTP response;
//! - `openai`, `anthropic`, `responses`: parsing requests and rendering answers per
//!   wire format;
//! - `error`: why a request is refused (answered 400);
//! - `rate`: a provider's rate limit ([`ScriptedModel::rate_limited`]) and the
//!   [`RateReport`] of what arrived.

mod anthropic;
mod cache;
mod error;
mod openai;
mod rate;
mod reply;
mod responses;

pub use cache::CacheUsage;
pub use rate::{Arrival, HEARD_AFTER, RateReport};
pub use reply::{Gate, ScriptedReply};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::serve::{Listener, ListenerExt};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// `listener`, setting `TCP_NODELAY` on every connection it accepts: a streamed reply is
/// many small writes, which Nagle's algorithm would hold back for the client's delayed
/// ACK, and the model's latency would count against taskwire's.
fn with_nodelay(listener: TcpListener) -> impl Listener<Io = TcpStream, Addr = SocketAddr> {
    listener.tap_io(|socket: &mut TcpStream| {
        if let Err(error) = socket.set_nodelay(true) {
            tracing::warn!(%error, "failed to set TCP_NODELAY on a scripted model connection");
        }
    })
}

/// Decides the reply to one request; shared by all connections of a server.
pub type Handler = Arc<dyn Fn(&SeenRequest) -> ScriptedReply + Send + Sync>;

/// Conversations grow with tool output; axum's 2 MiB default would reject long ones.
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// Which wire format a request arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFormat {
    OpenAi,
    Anthropic,
    Responses,
}

/// One message of a request, in a provider-neutral shape.
///
/// Anthropic requests are flattened to the OpenAI shape: the top-level `system` becomes
/// a `system` message first, and each `tool_result` block becomes a `tool` message.
/// Responses requests likewise: `instructions` becomes a `system` message first, the
/// `function_call` items of a turn the assistant message's tool calls, and each
/// `function_call_output` item a `tool` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text content; text parts are joined.
    pub content: String,
    /// Tool calls of an assistant turn as `(id, name, arguments JSON text)`.
    pub tool_calls: Vec<(String, String, String)>,
    /// For `tool` messages: the call answered.
    pub tool_call_id: Option<String>,
}

/// What the server received, in a provider-neutral shape, plus the raw body.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub format: WireFormat,
    pub model: String,
    pub messages: Vec<SeenMessage>,
    /// Names of the tools offered.
    pub tools: Vec<String>,
    pub stream: bool,
    /// Whether a streamed answer should end with a usage event (OpenAI
    /// `stream_options.include_usage`; Anthropic and Responses always report usage).
    pub include_usage: bool,
    /// Request headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The request body as received.
    pub raw: Value,
}

impl SeenRequest {
    /// A request header by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// How many assistant turns the conversation already holds; the index of the
    /// turn being asked for.
    pub fn assistant_turns(&self) -> usize {
        self.messages
            .iter()
            .filter(|m| m.role == "assistant")
            .count()
    }

    /// Content of the `system` message (the session's system prompt), if any.
    pub fn system_prompt(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.role == "system")
            .map(|m| m.content.as_str())
    }

    /// Content of the first `user` message (the task's prompt), if any.
    pub fn first_user_message(&self) -> Option<&str> {
        self.messages
            .iter()
            .find(|m| m.role == "user")
            .map(|m| m.content.as_str())
    }

    /// The result of the tool call `call_id` (its `tool` message), empty when there is
    /// none.
    pub fn tool_result(&self, call_id: &str) -> &str {
        self.messages
            .iter()
            .find(|m| m.role == "tool" && m.tool_call_id.as_deref() == Some(call_id))
            .map_or("", |m| m.content.as_str())
    }

    /// Content of the last `user` message, if any.
    pub fn last_user_message(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == "user")
            .map(|m| m.content.as_str())
    }
}

/// The signature the scripted model gives a thinking block of `text`, which the
/// client must send back unchanged.
pub fn thinking_signature(text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    format!("scripted-signature-{:016x}", h.finish())
}

/// An OpenAI-compatible (chat completions and Responses) and Anthropic-compatible
/// model server on a loopback port.
///
/// Shuts down when dropped.
#[derive(Debug)]
pub struct ScriptedModel {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    limiter: Option<Arc<Mutex<rate::Limiter>>>,
    shutdown: Option<oneshot::Sender<()>>,
}

struct ServerState {
    handler: Handler,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
    limiter: Option<Arc<Mutex<rate::Limiter>>>,
    cache: Option<Arc<Mutex<cache::PromptCache>>>,
}

impl ScriptedModel {
    /// Starts a server whose replies `handler` decides.
    pub async fn start<F>(handler: F) -> Self
    where
        F: Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static,
    {
        Self::start_shared(Arc::new(handler)).await
    }

    /// Starts a server with an already shared handler.
    pub async fn start_shared(handler: Handler) -> Self {
        Self::serve_with(handler, None, None).await
    }

    /// Starts a server with a prompt cache, as providers have: each answer reports
    /// its input tokens (a quarter of the request's bytes) and those read from and
    /// written to the cache (see `cache`), whatever the handler's reply says.
    pub async fn caching<F>(handler: F) -> Self
    where
        F: Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static,
    {
        let cache = Arc::new(Mutex::new(cache::PromptCache::default()));
        Self::serve_with(Arc::new(handler), None, Some(cache)).await
    }

    /// Starts a server that accepts at most `per_second` requests in any one-second
    /// window, as a provider's rate limit does, and throttles the rest (`429`,
    /// `Retry-After: 1`, `x-ratelimit-*`); [`ScriptedModel::rate_report`] says what
    /// arrived.
    pub async fn rate_limited<F>(per_second: usize, handler: F) -> Self
    where
        F: Fn(&SeenRequest) -> ScriptedReply + Send + Sync + 'static,
    {
        let limiter = Arc::new(Mutex::new(rate::Limiter::new(per_second)));
        Self::serve_with(Arc::new(handler), Some(limiter), None).await
    }

    /// Every request a [`ScriptedModel::rate_limited`] server saw, and how it answered;
    /// empty for other servers.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.limiter.as_ref().map_or_else(Vec::new, |l| {
            l.lock().unwrap_or_else(PoisonError::into_inner).arrivals()
        })
    }

    /// The report of [`ScriptedModel::arrivals`].
    pub fn rate_report(&self) -> RateReport {
        RateReport::of(&self.arrivals())
    }

    async fn serve_with(
        handler: Handler,
        limiter: Option<Arc<Mutex<rate::Limiter>>>,
        cache: Option<Arc<Mutex<cache::PromptCache>>>,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the scripted model to a loopback port should succeed");
        let addr = listener
            .local_addr()
            .expect("a bound listener has a local address");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(ServerState {
            handler,
            seen: Arc::clone(&seen),
            limiter: limiter.clone(),
            cache,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/messages", post(messages))
            .route("/v1/responses", post(create_response))
            .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(state);
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // The sender is dropped or fired when the model is dropped; either ends it.
            let server =
                axum::serve(with_nodelay(listener), app).with_graceful_shutdown(async move {
                    let _ = stopped.await;
                });
            if let Err(error) = server.await {
                tracing::warn!(%error, "scripted model server stopped with an error");
            }
        });
        Self {
            addr,
            seen,
            limiter,
            shutdown: Some(shutdown),
        }
    }

    /// Scripts one conversation: the answer to a request is `replies[n]`, where `n` is
    /// the number of assistant turns already in it. Works for many concurrent copies of
    /// the same conversation. A retried request gets the same reply again, so use
    /// [`ScriptedModel::queue`] to script failures followed by success.
    ///
    /// Past the end of the script the server answers 400 with a message saying so.
    pub async fn sequence(replies: Vec<ScriptedReply>) -> Self {
        Self::start(move |request| {
            let turn = request.assistant_turns();
            replies.get(turn).cloned().unwrap_or_else(|| {
                ScriptedReply::status(
                    400,
                    format!(
                        "scripted model has no reply for assistant turn {turn} (the script has {})",
                        replies.len()
                    ),
                )
            })
        })
        .await
    }

    /// Answers the n-th request received with `replies[n]`, whatever it holds: for
    /// retry tests of a single conversation, not for concurrent ones.
    ///
    /// Past the end of the script the server answers 400 with a message saying so.
    pub async fn queue(replies: Vec<ScriptedReply>) -> Self {
        let next = AtomicUsize::new(0);
        Self::start(move |_| {
            let n = next.fetch_add(1, Ordering::SeqCst);
            replies.get(n).cloned().unwrap_or_else(|| {
                ScriptedReply::status(
                    400,
                    format!(
                        "scripted model has no reply for request {n} (the queue has {})",
                        replies.len()
                    ),
                )
            })
        })
        .await
    }

    /// Answers every request at once with `echo: <last user message>`.
    pub async fn echo() -> Self {
        Self::start(|request| {
            ScriptedReply::text(format!(
                "echo: {}",
                request.last_user_message().unwrap_or_default()
            ))
        })
        .await
    }

    /// Base URL for OpenAI-compatible clients (chat completions and Responses), e.g.
    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for Anthropic clients, which append `/v1/messages` themselves.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many requests were received so far.
    pub fn request_count(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn chat_completions(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(&state, WireFormat::OpenAi, &headers, &body).await
}

async fn messages(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(&state, WireFormat::Anthropic, &headers, &body).await
}

async fn create_response(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(&state, WireFormat::Responses, &headers, &body).await
}

async fn serve(
    state: &ServerState,
    format: WireFormat,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    if let Some(limiter) = &state.limiter
        && let Some(throttled) = limiter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .admit()
    {
        return throttled;
    }
    let raw: Value = match serde_json::from_slice(body) {
        Ok(raw) => raw,
        Err(error) => {
            return reply::plain(
                StatusCode::BAD_REQUEST,
                format!("scripted model: request body is not json: {error}"),
            );
        }
    };
    let headers = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let parsed = match format {
        WireFormat::OpenAi => openai::parse(raw, headers),
        WireFormat::Anthropic => anthropic::parse(raw, headers),
        WireFormat::Responses => responses::parse(raw, headers),
    };
    let request = match parsed {
        Ok(request) => request,
        Err(problem) => {
            return reply::plain(
                StatusCode::BAD_REQUEST,
                format!("scripted model: invalid request: {problem}"),
            );
        }
    };
    state
        .seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());

    // A panicking handler would drop the connection and the client would retry; a 400
    // ends the test with a clear error instead (the panic message is printed anyway).
    let scripted = match std::panic::catch_unwind(AssertUnwindSafe(|| (state.handler)(&request))) {
        Ok(scripted) => scripted,
        Err(_) => {
            return reply::plain(
                StatusCode::BAD_REQUEST,
                "scripted model: the reply handler panicked".into(),
            );
        }
    };
    let scripted = match &state.cache {
        Some(cache) => {
            let seen = cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .see(format, &request.raw);
            let output = scripted.usage().map_or(5, |(_, output)| output);
            scripted
                .with_usage(seen.input, output)
                .with_cache(seen.read, seen.written)
        }
        None => scripted,
    };
    if !scripted.delay().is_zero() {
        tokio::time::sleep(scripted.delay()).await;
    }
    if let Some(gate) = scripted.gate() {
        gate.passed().await;
    }
    reply::respond(&scripted, &request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay_set() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("bound address");
        let mut listener = with_nodelay(listener);
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (socket, _) = listener.accept().await;
        assert!(socket.nodelay().expect("TCP_NODELAY is readable"));
    }

    #[test]
    fn assistant_turns_count_only_assistant_messages() {
        let request = openai::parse(
            serde_json::json!({"model": "m", "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"},
                {"role": "user", "content": "again"},
            ]}),
            BTreeMap::new(),
        )
        .expect("request parses");
        assert_eq!(request.assistant_turns(), 1);
        assert_eq!(request.last_user_message(), Some("again"));
    }
}
