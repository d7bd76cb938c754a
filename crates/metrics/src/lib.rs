//! The Prometheus exposition that coordinators and workers serve at `/metrics` on
//! their HTTP listener (`--http-listen`), and what their metric definitions share.
//!
//! Each process keeps its metrics in a `prometheus-client` [`Registry`] (the names live
//! in one `metrics.rs` per crate); this crate turns a registry into a response:
//!
//! - [`routes`]: an axum router answering `GET /metrics`, to merge into a listener's.
//! - [`render`]: the exposition in the format a scraper asked for. Prometheus asks
//!   for OpenMetrics in its `Accept` header and gets it (exemplars need it); any other
//!   client (curl, `promtool check metrics`) gets the classic text format 0.0.4.
//! - [`classic_text`]: OpenMetrics text to the classic format. The two differ where
//!   `promtool` and older parsers notice: a counter's family is named by its `_total`
//!   sample in the classic format, which also has no `# UNIT` and no `# EOF` lines.
//! - [`buckets`]: histogram buckets suited to each quantity.

pub mod buckets;

use std::collections::HashSet;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
pub use prometheus_client;
use prometheus_client::registry::Registry;

/// `Content-Type` of the OpenMetrics exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of the classic text exposition.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A router serving `GET /metrics` from `registry`.
pub fn routes(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(registry)
}

async fn metrics(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    match render(&registry, openmetrics) {
        Ok((content_type, body)) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "failed to encode the metrics");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "failed to encode the metrics\n",
            )
                .into_response()
        }
    }
}

/// The exposition of `registry` and its content type: OpenMetrics when `openmetrics`,
/// else the classic text format.
pub fn render(
    registry: &Registry,
    openmetrics: bool,
) -> Result<(&'static str, String), std::fmt::Error> {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(if openmetrics {
        (OPENMETRICS_CONTENT_TYPE, text)
    } else {
        (CLASSIC_CONTENT_TYPE, classic_text(&text))
    })
}

/// OpenMetrics text (as `prometheus-client` writes it) in the classic text format:
/// `# HELP` and `# TYPE` of a counter name its `_total` samples, `# UNIT` and `# EOF`
/// lines are dropped; everything else is the same in both.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| line.strip_prefix(prefix).map(|rest| (prefix, rest)));
        if let Some((prefix, rest)) = descriptor {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            if counters.contains(name) {
                out.push_str(prefix);
                out.push_str(name);
                out.push_str("_total ");
                out.push_str(tail);
                out.push('\n');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Unit;

    use super::*;

    fn registry() -> Registry {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        counter.inc();
        registry.register("demo_things", "Things done", counter);
        registry.register("demo_level", "A level", Gauge::<i64>::default());
        registry.register_with_unit(
            "demo_wait",
            "Time waited",
            Unit::Seconds,
            Histogram::new([0.5, 1.0]),
        );
        registry
    }

    #[test]
    fn the_classic_format_names_counters_by_their_total_and_has_no_unit_or_eof() {
        let (content_type, text) = render(&registry(), false).expect("encodes");
        assert_eq!(content_type, CLASSIC_CONTENT_TYPE);
        assert!(
            text.contains("# HELP demo_things_total Things done.\n"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE demo_things_total counter\n"),
            "{text}"
        );
        assert!(text.contains("\ndemo_things_total 1\n"), "{text}");
        assert!(text.contains("# TYPE demo_level gauge\n"), "{text}");
        assert!(
            text.contains("# TYPE demo_wait_seconds histogram\n"),
            "{text}"
        );
        assert!(!text.contains("# UNIT"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn openmetrics_is_left_as_the_library_writes_it() {
        let (content_type, text) = render(&registry(), true).expect("encodes");
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(text.contains("# TYPE demo_things counter\n"), "{text}");
        assert!(
            text.contains("# UNIT demo_wait_seconds seconds\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[tokio::test]
    async fn the_route_answers_by_the_accept_header() {
        let router = routes(Arc::new(registry()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("has an address");
        let server = tokio::spawn(async move { axum::serve(listener, router).await });
        let get = |accept: &'static str| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut stream = tokio::net::TcpStream::connect(addr)
                .await
                .expect("connects");
            let request = format!("GET /metrics HTTP/1.0\r\nAccept: {accept}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("writes");
            let mut response = String::new();
            stream.read_to_string(&mut response).await.expect("reads");
            response
        };
        let classic = get("*/*").await;
        assert!(classic.starts_with("HTTP/1.0 200"), "{classic}");
        assert!(classic.contains(CLASSIC_CONTENT_TYPE), "{classic}");
        let openmetrics = get("application/openmetrics-text;version=1.0.0,text/plain;q=0.5").await;
        assert!(
            openmetrics.contains(OPENMETRICS_CONTENT_TYPE),
            "{openmetrics}"
        );
        assert!(openmetrics.contains("# EOF"), "{openmetrics}");
        server.abort();
    }
}
