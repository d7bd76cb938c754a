//! W3C `traceparent` values in and out: a span's context crosses processes in the
//! envelopes (`TaskRequest`, `TaskResult`, `ChildSubmit`), in a `Submit`'s gRPC
//! metadata and in NATS headers. A trace state is neither carried nor kept.

use opentelemetry::Context;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId as OtelTraceId, TraceState,
};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};

/// The `traceparent` of a valid span context: version `00`, the trace and span ids in
/// lowercase hex and the sampled flag, as the W3C format (and the SDK's propagator)
/// writes it, into a string of the value's length.
pub(crate) fn traceparent_of(sc: SpanContext) -> String {
    use std::fmt::Write as _;
    let mut value = String::with_capacity(TRACEPARENT_LEN);
    let flags = sc.trace_flags() & TraceFlags::SAMPLED;
    let _ = write!(
        value,
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        flags.to_u8()
    );
    value
}

/// The length of a version `00` `traceparent`.
const TRACEPARENT_LEN: usize = 55;

/// The remote span context a `traceparent` names; `None` when it is empty or not a
/// valid W3C value. It reads what the SDK's `TraceContextPropagator` reads (a
/// `tracestate` is not carried here), without building a carrier, a list of the
/// value's parts or a context first: a span's parent is read for every span.
pub(crate) fn context_of(traceparent: &str) -> Option<Context> {
    let sc = span_context_of(traceparent)?;
    Some(Context::new().with_remote_span_context(sc))
}

fn span_context_of(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split_terminator('-');
    let version = parts.next()?;
    let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let version = u8::from_str_radix(version, 16).ok()?;
    // Version ff is invalid; version 00 has exactly four parts.
    if version == 0xff || (version == 0 && parts.next().is_some()) {
        return None;
    }
    let lowercase = |part: &str| !part.bytes().any(|b| b.is_ascii_uppercase());
    if !(lowercase(trace) && lowercase(span) && lowercase(flags)) {
        return None;
    }
    let trace = OtelTraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?) & TraceFlags::SAMPLED;
    let sc = SpanContext::new(trace, span, flags, true, TraceState::default());
    sc.is_valid().then_some(sc)
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

    /// What the SDK's propagator reads from and writes for `traceparent`.
    fn sdk(traceparent: &str) -> (Option<SpanContext>, String) {
        use opentelemetry::propagation::TextMapPropagator;
        use opentelemetry_sdk::propagation::TraceContextPropagator;
        use std::collections::HashMap;
        let carrier = HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
        let cx = TraceContextPropagator::new().extract(&carrier);
        let sc = cx.span().span_context().clone();
        let mut written = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut written);
        let written = written.remove("traceparent").unwrap_or_default();
        (sc.is_valid().then_some(sc), written)
    }

    #[test]
    fn a_traceparent_is_read_and_written_as_the_sdk_propagator_does() {
        let cases = [
            PARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "garbage",
            "",
        ];
        for case in cases {
            let (sdk_read, sdk_written) = sdk(case);
            let ours = context_of(case).map(|cx| cx.span().span_context().clone());
            assert_eq!(ours, sdk_read, "{case:?}");
            assert_eq!(
                ours.map(traceparent_of).unwrap_or_default(),
                sdk_written,
                "{case:?}"
            );
        }
    }

    #[test]
    fn a_context_in_a_trace_is_sampled_and_of_that_trace() {
        let cx = context_in(7);
        assert_eq!(trace_of(&cx), Some(7));
        assert!(cx.span().span_context().is_sampled());
    }
}
