//! A process that installs no tracer (no OTLP endpoint) builds no span: its own test
//! binary, since the tracer, once installed, stays for the process.

use taskwire_traces::{Parent, Span, SpanBuilder, exporting};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn without_a_tracer_no_span_is_built_and_nothing_is_propagated() {
    assert!(!exporting());
    let mut built = false;
    let span = Span::start(Parent::Remote(PARENT), || {
        built = true;
        SpanBuilder::from_name("never")
    });
    assert!(!built, "the span's name and attributes are not even built");
    assert_eq!(span.traceparent(), "");
    assert!(span.trace_id().is_none());
    let inner = span.in_scope(|| Span::current().span_id());
    assert!(inner.is_none(), "nothing is current");
    assert!(taskwire_traces::current_ids().is_none());
}
