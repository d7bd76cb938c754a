//! W3C trace context between processes: a span's context as a `traceparent` string and
//! back, so that one task tree is one trace across the coordinator and the workers.
//!
//! Envelopes carry the context in a `traceparent` field (`TaskRequest`, `TaskResult`,
//! `ChildSubmit`); a `Submit` may bring one in its gRPC metadata. Spans are
//! `tracing` spans; the OpenTelemetry layer (installed by the binary only when an OTLP
//! endpoint is configured) turns them into exported spans. Without that layer every
//! function here is a cheap no-op: [`traceparent_of`] is empty and parents are not set.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use taskwire_protocol::TraceId;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::headers::TRACEPARENT;

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Records that this process exports spans (the binary calls it once it has installed
/// the OpenTelemetry layer). Work that only feeds spans is skipped otherwise.
pub fn set_exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether this process exports spans.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The one header the propagator reads or writes here: `traceparent` (a trace state is
/// neither carried nor kept). A carrier of its own, so that a span's context costs no
/// map and no key copied.
#[derive(Default)]
struct Traceparent<'a> {
    read: &'a str,
    written: String,
}

impl Extractor for Traceparent<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == TRACEPARENT).then_some(self.read)
    }
    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT]
    }
}

impl Injector for Traceparent<'_> {
    fn set(&mut self, key: &str, value: String) {
        if key == TRACEPARENT {
            self.written = value;
        }
    }
}

/// The `traceparent` of `span`; empty when the span is not traced (no OpenTelemetry
/// layer, or the span is disabled).
pub fn traceparent_of(span: &tracing::Span) -> String {
    if !exporting() {
        return String::new();
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return String::new();
    }
    let mut carrier = Traceparent::default();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.written
}

/// The `traceparent` of the current span (see [`traceparent_of`]).
pub fn current_traceparent() -> String {
    traceparent_of(&tracing::Span::current())
}

/// The remote span context a `traceparent` names; `None` when it is empty or not a
/// valid W3C value (which, as the W3C recommends, is ignored rather than refused).
pub fn context_of(traceparent: &str) -> Option<Context> {
    if traceparent.is_empty() {
        return None;
    }
    let carrier = Traceparent {
        read: traceparent,
        ..Traceparent::default()
    };
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes `span` a child of the span `traceparent` names. Returns whether it did: not
/// when the value is empty or invalid, spans are not exported, or the span started.
pub fn set_parent(span: &tracing::Span, traceparent: &str) -> bool {
    if !exporting() {
        return false;
    }
    context_of(traceparent).is_some_and(|cx| span.set_parent(cx).is_ok())
}

/// Makes `span` a span of trace `trace_id`: a child of the span `traceparent` names when
/// that span is in this trace, else a span of the trace without a known parent. The
/// value is parsed once.
pub fn set_parent_in(span: &tracing::Span, traceparent: &str, trace_id: TraceId) -> bool {
    if !exporting() {
        return false;
    }
    match context_of(traceparent) {
        Some(cx) if trace_of(cx.span().span_context().trace_id()) == Some(trace_id) => {
            span.set_parent(cx).is_ok()
        }
        _ => join_trace(span, trace_id),
    }
}

/// Puts `span` in trace `trace_id` without a known parent span (a submit that names a
/// trace to join but sends no `traceparent`).
pub fn join_trace(span: &tracing::Span, trace_id: TraceId) -> bool {
    if !exporting() {
        return false;
    }
    let remote = SpanContext::new(
        OtelTraceId::from(trace_id.as_u128()),
        RandomIdGenerator::default().new_span_id(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    span.set_parent(Context::new().with_remote_span_context(remote))
        .is_ok()
}

/// Our trace id of an OpenTelemetry one; `None` for the invalid (all-zero) id.
fn trace_of(id: OtelTraceId) -> Option<TraceId> {
    TraceId::from_u128(u128::from_be_bytes(id.to_bytes()))
}

/// The trace `span` belongs to; `None` when it is not traced.
pub fn trace_id_of(span: &tracing::Span) -> Option<TraceId> {
    if !exporting() {
        return None;
    }
    let cx = span.context();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    trace_of(sc.trace_id())
}

/// The span id `span` is exported with, as 16 hex digits; `None` when not traced.
pub fn span_id_of(span: &tracing::Span) -> Option<String> {
    if !exporting() {
        return None;
    }
    let cx = span.context();
    let id = cx.span().span_context().span_id();
    (id != SpanId::INVALID).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_names_its_trace() {
        assert_eq!(
            context_of(PARENT)
                .and_then(|cx| trace_of(cx.span().span_context().trace_id()))
                .map(|t| t.to_string())
                .as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
    }

    #[test]
    fn empty_or_malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        ] {
            assert!(context_of(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn without_an_exporter_spans_have_no_traceparent() {
        // No OpenTelemetry layer is installed in unit tests.
        let span = tracing::info_span!("x");
        assert_eq!(traceparent_of(&span), "");
        assert!(!set_parent(&span, PARENT));
        assert!(trace_id_of(&span).is_none());
    }
}
