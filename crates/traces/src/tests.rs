//! The spans as an exporter receives them: a processor that keeps every ended span.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanProcessor};

use super::*;

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[derive(Debug, Default, Clone)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanProcessor for Kept {
    fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &Context) {}
    fn on_end(&self, span: SpanData) {
        self.0.lock().expect("lock").push(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The spans ended so far, in this test binary (tests tell theirs apart by name).
fn kept() -> &'static Kept {
    static KEPT: OnceLock<Kept> = OnceLock::new();
    KEPT.get_or_init(|| {
        let kept = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(kept.clone())
            .build();
        install(provider.tracer("test"));
        kept
    })
}

fn ended(name: &str) -> Vec<SpanData> {
    kept()
        .0
        .lock()
        .expect("lock")
        .iter()
        .filter(|s| s.name == name)
        .cloned()
        .collect()
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[test]
fn no_span_has_no_context_and_instruments_nothing() {
    let span = Span::none();
    assert_eq!(span.traceparent(), "");
    assert!(span.trace_id().is_none() && span.span_id().is_none());
    assert!(!span.is_recording());
    span.fail("x");
    span.set("k", "v");
}

#[tokio::test]
async fn a_span_under_a_traceparent_is_its_child_and_parents_the_spans_started_in_it() {
    kept();
    let outer = Span::start(Parent::Remote(PARENT), || {
        SpanBuilder::from_name("outer").with_kind(SpanKind::Server)
    });
    assert_eq!(outer.trace_id(), Some(0x4bf92f3577b34da6a3ce929d0e0e4736));
    let sent = outer
        .instrument(async {
            let inner = Span::start(Parent::Current, || SpanBuilder::from_name("inner"));
            inner.fail("timeout");
            tokio::task::yield_now().await;
            (inner.traceparent(), Span::current().span_id())
        })
        .await;
    assert_eq!(
        sent.1,
        outer.span_id(),
        "the outer span is current in its future"
    );
    assert!(Span::current().span_id().is_none(), "and only there");
    drop(outer);

    let [outer] = &ended("outer")[..] else {
        panic!("one outer span")
    };
    let [inner] = &ended("inner")[..] else {
        panic!("one inner span")
    };
    assert_eq!(outer.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(outer.span_kind, SpanKind::Server);
    assert_eq!(inner.parent_span_id, outer.span_context.span_id());
    assert_eq!(inner.span_context.trace_id(), outer.span_context.trace_id());
    assert_eq!(inner.status, Status::error(""));
    assert_eq!(attr(inner, "error.type").as_deref(), Some("timeout"));
    assert_eq!(
        sent.0,
        format!(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
            inner.span_context.span_id()
        ),
        "a span's traceparent names it"
    );
}

#[test]
fn a_traceparent_of_another_trace_is_passed_over_for_the_tasks_trace() {
    kept();
    let trace = 0x0123_4567_89ab_cdef_0123_4567_89ab_cdef;
    let other = Span::start(Parent::RemoteIn(PARENT, trace), || {
        SpanBuilder::from_name("other trace")
    });
    let same = Span::start(
        Parent::RemoteIn(PARENT, 0x4bf92f3577b34da6a3ce929d0e0e4736),
        || SpanBuilder::from_name("same trace"),
    );
    let empty = Span::start(Parent::RemoteIn("", trace), || {
        SpanBuilder::from_name("no traceparent")
    });
    assert_eq!(other.trace_id(), Some(trace));
    assert_eq!(empty.trace_id(), Some(trace));
    assert_eq!(same.trace_id(), Some(0x4bf92f3577b34da6a3ce929d0e0e4736));
    drop((other, same, empty));
    assert_eq!(
        ended("same trace")[0].parent_span_id.to_string(),
        "00f067aa0ba902b7"
    );
    assert_ne!(
        ended("other trace")[0].parent_span_id.to_string(),
        "00f067aa0ba902b7"
    );
}

#[test]
fn a_span_ends_with_its_last_clone_and_keeps_what_was_set() {
    kept();
    let span = Span::start(Parent::Remote("garbage"), || {
        SpanBuilder::from_name("clones").with_attributes([KeyValue::new("a", 1)])
    });
    let clone = span.clone();
    span.set("b", "two");
    span.set_with(|| vec![KeyValue::new("c", true)]);
    span.add_event("a line", vec![KeyValue::new("level", "INFO")]);
    drop(span);
    assert!(ended("clones").is_empty(), "a clone is alive");
    drop(clone);
    let [s] = &ended("clones")[..] else {
        panic!("one span")
    };
    assert_eq!(attr(s, "a").as_deref(), Some("1"));
    assert_eq!(attr(s, "b").as_deref(), Some("two"));
    assert_eq!(attr(s, "c").as_deref(), Some("true"));
    assert_eq!(s.events.events[0].name, "a line");
    assert_eq!(
        s.parent_span_id,
        SpanId::INVALID,
        "an invalid traceparent starts a new trace"
    );
}
