//! An OTLP trace receiver: the OTLP/gRPC `TraceService` and OTLP/HTTP (`POST
//! /v1/traces`, binary protobuf) each on a port of 127.0.0.1 chosen by the system,
//! keeping every span it is sent with the resource (the process) that sent it. Tests of
//! trace export read the spans; the benchmark counts them.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

/// One received span and the process that sent it.
#[derive(Debug, Clone)]
pub struct Received {
    pub span: Span,
    /// `service.name` and `service.instance.id` of the sender's resource.
    pub service: String,
    pub instance: String,
}

impl Received {
    pub fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }
    pub fn span_id(&self) -> String {
        hex(&self.span.span_id)
    }
    pub fn parent_id(&self) -> String {
        hex(&self.span.parent_span_id)
    }
    /// The attribute `key` as text (numbers and lists printed), if the span has it.
    pub fn attr(&self, key: &str) -> Option<String> {
        attr(&self.span.attributes, key)
    }
    /// Everything the span says, as text: to look for what must not be there.
    pub fn all_text(&self) -> String {
        let mut text = format!("{} ", self.span.name);
        for kv in &self.span.attributes {
            text.push_str(&format!("{}={} ", kv.key, value_text(kv.value.as_ref())));
        }
        for event in &self.span.events {
            text.push_str(&format!("{} ", event.name));
            for kv in &event.attributes {
                text.push_str(&format!("{}={} ", kv.key, value_text(kv.value.as_ref())));
            }
        }
        text
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| value_text(kv.value.as_ref()))
}

fn value_text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| value_text(Some(v))).collect();
            format!("[{}]", items.join(","))
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

#[derive(Clone, Default)]
struct Store(Arc<Mutex<Vec<Received>>>);

impl Store {
    fn keep(&self, request: ExportTraceServiceRequest) {
        let mut kept = self.0.lock().expect("collector lock");
        for resource_spans in request.resource_spans {
            let resource = resource_spans.resource.unwrap_or_default();
            let service = attr(&resource.attributes, "service.name").unwrap_or_default();
            let instance = attr(&resource.attributes, "service.instance.id").unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    kept.push(Received {
                        span,
                        service: service.clone(),
                        instance: instance.clone(),
                    });
                }
            }
        }
    }
}

#[tonic::async_trait]
impl TraceService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// OTLP/HTTP's `POST /v1/traces` with a binary protobuf body; another content type is
/// refused (415), as a collector does, and a body that does not decode is a 400.
async fn http_export(
    axum::extract::State(store): axum::extract::State<Store>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != PROTOBUF {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("expected {PROTOBUF}, got {content_type:?}"),
        )
            .into_response();
    }
    match ExportTraceServiceRequest::decode(body) {
        Ok(request) => {
            store.keep(request);
            let reply = ExportTraceServiceResponse::default().encode_to_vec();
            ([(header::CONTENT_TYPE, PROTOBUF)], reply).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

const PROTOBUF: &str = "application/x-protobuf";

/// The running receiver; stops when dropped.
pub struct Collector {
    /// The OTLP/gRPC port.
    pub addr: SocketAddr,
    /// The OTLP/HTTP port.
    pub http_addr: SocketAddr,
    store: Store,
    stop: CancellationToken,
}

impl Collector {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let http_addr = http_listener.local_addr()?;
        let store = Store::default();
        let stop = CancellationToken::new();
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(http_export))
            .with_state(store.clone());
        let http = axum::serve(http_listener, app)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future();
        tokio::spawn(async move {
            if let Err(error) = http.await {
                tracing::warn!(%error, "otlp/http receiver stopped with an error");
            }
        });
        let incoming = futures::stream::unfold(listener, |listener| async move {
            let accepted = listener.accept().await.map(|(socket, _)| socket);
            Some((accepted, listener))
        });
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(store.clone()))
            .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
        tokio::spawn(server);
        Ok(Self {
            addr,
            http_addr,
            store,
            stop,
        })
    }

    /// The OTLP/gRPC endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT` (with
    /// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OTLP/HTTP endpoint for `OTEL_EXPORTER_OTLP_ENDPOINT` with the default
    /// protocol, `http/protobuf` (the exporter adds `/v1/traces`).
    pub fn http_endpoint(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.store.0.lock().expect("collector lock").clone()
    }

    /// How many spans were received so far.
    pub fn span_count(&self) -> usize {
        self.store.0.lock().expect("collector lock").len()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
