//! W3C `traceparent` values in and out: a span's context crosses processes in the
//! envelopes (`TaskRequest`, `TaskResult`, `ChildSubmit`), in a `Submit`'s gRPC
//! metadata and in NATS headers. A trace state is neither carried nor kept.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    SpanContext, TraceContextExt, TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

use crate::TRACEPARENT;

/// The one header the propagator reads or writes here. A carrier of its own, so that a
/// span's context costs no map and no key copied.
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

/// The `traceparent` of a span context.
pub(crate) fn traceparent_of(sc: SpanContext) -> String {
    let cx = Context::new().with_remote_span_context(sc);
    let mut carrier = Traceparent::default();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.written
}

/// The remote span context a `traceparent` names; `None` when it is empty or not a
/// valid W3C value.
pub(crate) fn context_of(traceparent: &str) -> Option<Context> {
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

/// The 128-bit trace id of a context's span; `None` when it has none.
pub(crate) fn trace_of(cx: &Context) -> Option<u128> {
    let span = cx.span();
    let id = span.span_context().trace_id();
    (id != OtelTraceId::INVALID).then(|| u128::from_be_bytes(id.to_bytes()))
}

/// A context in trace `trace` without a known parent span: a sampled remote parent of
/// a span id made up for it (a submit that names a trace to join but no span).
pub(crate) fn context_in(trace: u128) -> Context {
    let remote = SpanContext::new(
        OtelTraceId::from(trace),
        RandomIdGenerator::default().new_span_id(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    Context::new().with_remote_span_context(remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_names_its_trace_and_is_written_back_alike() {
        let cx = context_of(PARENT).expect("valid");
        assert_eq!(
            trace_of(&cx),
            Some(0x4bf92f3577b34da6a3ce929d0e0e4736),
            "trace id"
        );
        assert_eq!(traceparent_of(cx.span().span_context().clone()), PARENT);
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
    fn a_context_in_a_trace_is_sampled_and_of_that_trace() {
        let cx = context_in(7);
        assert_eq!(trace_of(&cx), Some(7));
        assert!(cx.span().span_context().is_sampled());
    }
}
