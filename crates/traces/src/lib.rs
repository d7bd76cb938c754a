//! taskwire's exported trace spans, built with the OpenTelemetry API directly.
//!
//! A [`Span`] is an OpenTelemetry span in its context, with an explicit parent: the span
//! a W3C `traceparent` names (an envelope's, a gRPC call's metadata) or the span current
//! in this task. A future runs "in" a span with [`Span::instrument`], which makes the
//! span current while it is polled, so that the spans it starts (a model call, a tool
//! call) are the span's children and the `traceparent` it sends on is the span's.
//!
//! No exported span goes through `tracing`: log lines keep their own `tracing` spans
//! (which a [`Spanned`] pairs with the exported one), and an exported span costs
//! nothing in a process that does not export traces. The binary installs the tracer
//! with [`install`] only when an OTLP endpoint is configured; until then every [`Span`]
//! is [`Span::none`] and every function here is a cheap no-op.
//!
//! - `propagation` (private): `traceparent` values in and out.

mod propagation;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context as TaskContext, Poll};

use opentelemetry::trace::{SpanContext, SpanId, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

pub use opentelemetry::trace::{SpanBuilder, SpanKind};
pub use opentelemetry::{Array, KeyValue as Attribute, StringValue, Value};

/// The header (gRPC metadata, NATS header) that carries a span's W3C context.
pub const TRACEPARENT: &str = "traceparent";

static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Exports spans with `tracer` from now on (the binary calls it once, when an OTLP
/// endpoint is configured). A second call is ignored.
pub fn install(tracer: SdkTracer) {
    let _ = TRACER.set(tracer);
}

/// Whether this process exports spans. Work that only feeds spans is skipped otherwise.
pub fn exporting() -> bool {
    TRACER.get().is_some()
}

/// Where a new span hangs.
#[derive(Debug, Clone, Copy)]
pub enum Parent<'a> {
    /// The span current in this task ([`Span::instrument`]), else a new trace.
    Current,
    /// The span a `traceparent` names; a new trace when the value is empty or invalid
    /// (which, as the W3C recommends, is ignored rather than refused).
    Remote(&'a str),
    /// The span a `traceparent` names when it is in trace `trace` (a 128-bit trace id);
    /// else a span of that trace without a known parent. The task's trace id is always
    /// its spans' trace id.
    RemoteIn(&'a str, u128),
}

impl Parent<'_> {
    fn context(self) -> Context {
        match self {
            Parent::Current => Context::current(),
            Parent::Remote(traceparent) => propagation::context_of(traceparent).unwrap_or_default(),
            Parent::RemoteIn(traceparent, trace) => match propagation::context_of(traceparent) {
                Some(cx) if propagation::trace_of(&cx) == Some(trace) => cx,
                _ => propagation::context_in(trace),
            },
        }
    }
}

/// One exported span (or none, where traces are not exported). It ends when its last
/// clone is dropped; the futures it instruments hold one.
#[derive(Debug, Clone, Default)]
pub struct Span {
    cx: Option<Context>,
}

impl Span {
    /// No span: every method is a no-op and [`Span::instrument`] changes nothing.
    pub fn none() -> Self {
        Self::default()
    }

    /// Starts the span `build` describes under `parent`. `build` runs only where spans
    /// are exported, so names and attributes cost nothing elsewhere.
    pub fn start(parent: Parent<'_>, build: impl FnOnce() -> SpanBuilder) -> Self {
        let Some(tracer) = TRACER.get() else {
            return Self::none();
        };
        let parent = parent.context();
        let span = build().start_with_context(tracer, &parent);
        Self {
            cx: Some(parent.with_span(span)),
        }
    }

    /// The span current in this task; [`Span::none`] when there is none.
    pub fn current() -> Self {
        if !exporting() {
            return Self::none();
        }
        let cx = Context::current();
        Self {
            cx: cx.has_active_span().then_some(cx),
        }
    }

    /// Whether the span is recorded (exported when it ends).
    pub fn is_recording(&self) -> bool {
        self.cx.as_ref().is_some_and(|cx| cx.span().is_recording())
    }

    /// Sets an attribute.
    pub fn set(&self, key: &'static str, value: impl Into<Value>) {
        if let Some(cx) = &self.cx {
            cx.span().set_attribute(KeyValue::new(key, value));
        }
    }

    /// Sets the attributes `attributes` gives; it runs only when the span is recorded.
    pub fn set_with(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            if span.is_recording() {
                span.set_attributes(attributes());
            }
        }
    }

    /// Marks the span failed: error status, and `error.type` (a low-cardinality name).
    pub fn fail(&self, error_type: impl Into<Value>) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            span.set_attribute(KeyValue::new("error.type", error_type));
            span.set_status(Status::error(""));
        }
    }

    /// Adds an event (a log line written inside the span).
    pub fn add_event(&self, name: impl Into<Cow<'static, str>>, attributes: Vec<KeyValue>) {
        if let Some(cx) = &self.cx {
            cx.span().add_event(name, attributes);
        }
    }

    /// The span's W3C `traceparent`; empty for [`Span::none`].
    pub fn traceparent(&self) -> String {
        self.span_context()
            .map(propagation::traceparent_of)
            .unwrap_or_default()
    }

    /// The span's 128-bit trace id; `None` for [`Span::none`].
    pub fn trace_id(&self) -> Option<u128> {
        self.span_context()
            .map(|sc| u128::from_be_bytes(sc.trace_id().to_bytes()))
    }

    /// The span's id as 16 hex digits; `None` for [`Span::none`].
    pub fn span_id(&self) -> Option<String> {
        self.span_context()
            .map(|sc| sc.span_id())
            .filter(|id| *id != SpanId::INVALID)
            .map(|id| id.to_string())
    }

    fn span_context(&self) -> Option<SpanContext> {
        let sc = self.cx.as_ref()?.span().span_context().clone();
        sc.is_valid().then_some(sc)
    }

    /// Runs `f` with the span current.
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.cx.clone().map(Context::attach);
        f()
    }

    /// `future`, with the span current while it is polled.
    pub fn instrument<F: Future>(&self, future: F) -> InSpan<F> {
        InSpan {
            inner: future,
            cx: self.cx.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// A future polled with a span current ([`Span::instrument`]).
    #[derive(Debug)]
    pub struct InSpan<F> {
        #[pin]
        inner: F,
        cx: Option<Context>,
    }
}

impl<F: Future> Future for InSpan<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, task: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _guard = this.cx.clone().map(Context::attach);
        this.inner.poll(task)
    }
}

/// The ids of the span current in this thread, as hex (trace id, span id), when it is
/// exported: what a log line written now names.
pub fn current_ids() -> Option<(String, String)> {
    if !exporting() {
        return None;
    }
    Context::map_current(|cx| {
        let span = cx.span();
        let sc = span.span_context();
        sc.is_valid()
            .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
    })
}

/// Adds an event to the span current in this thread, when it is recorded; `event`
/// builds it only then.
pub fn add_current_event(event: impl FnOnce() -> (Cow<'static, str>, Vec<KeyValue>)) {
    if !exporting() {
        return;
    }
    Context::map_current(|cx| {
        let span = cx.span();
        if span.is_recording() {
            let (name, attributes) = event();
            span.add_event(name, attributes);
        }
    });
}

/// A log span (`tracing`, for the fields log lines carry) and the exported span of
/// the same work.
#[derive(Debug, Clone)]
pub struct Spanned {
    /// The `tracing` span log lines are written in.
    pub log: tracing::Span,
    /// The exported span.
    pub trace: Span,
}

impl Spanned {
    /// Neither span: where nothing is logged or exported for the work.
    pub fn none() -> Self {
        Self {
            log: tracing::Span::none(),
            trace: Span::none(),
        }
    }

    /// `future`, in both spans while it is polled.
    pub fn instrument<F: Future>(&self, future: F) -> InSpan<tracing::instrument::Instrumented<F>> {
        let logged = tracing::Instrument::instrument(future, self.log.clone());
        Span::instrument(&self.trace, logged)
    }

    /// Runs `f` in both spans.
    pub fn in_scope<T>(&self, f: impl FnOnce() -> T) -> T {
        self.trace.in_scope(|| self.log.in_scope(f))
    }
}

#[cfg(test)]
mod tests;
