//! JSON log lines: one object per event with `timestamp`, `level`, `target`,
//! `message`, the event's fields, the names of the spans it happened in, and, for a
//! line emitted for a task, `task_id`, `trace_id` and (when traces are exported)
//! `span_id` — the ids that find the line's span in the trace.
//!
//! [`TaskFieldsLayer`] remembers each span's `task.id` and `trace.id` fields (they are
//! recorded when a span starts or later, as `Submit` learns its task's id), so that
//! every line inside a task's spans names the task.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// A span's task and trace, as its fields name them.
#[derive(Debug, Default, Clone)]
struct TaskFields {
    task_id: Option<String>,
    trace_id: Option<String>,
}

impl Visit for TaskFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(slot) = self.slot(field) {
            *slot = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Only the two fields kept are formatted: every span passes through here.
        if let Some(slot) = self.slot(field) {
            *slot = Some(format!("{value:?}"));
        }
    }
}

impl TaskFields {
    fn slot(&mut self, field: &Field) -> Option<&mut Option<String>> {
        match field.name() {
            "task.id" => Some(&mut self.task_id),
            "trace.id" => Some(&mut self.trace_id),
            _ => None,
        }
    }
}

/// Keeps each span's [`TaskFields`] in its extensions.
pub struct TaskFieldsLayer;

impl<S> tracing_subscriber::Layer<S> for TaskFieldsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = TaskFields::default();
        attrs.record(&mut fields);
        if (fields.task_id.is_some() || fields.trace_id.is_some())
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let mut fields = extensions.remove::<TaskFields>().unwrap_or_default();
        values.record(&mut fields);
        if fields.task_id.is_some() || fields.trace_id.is_some() {
            extensions.insert(fields);
        }
    }
}

/// Collects an event's fields as JSON values.
struct JsonFields<'a>(&'a mut Map<String, Value>);

impl Visit for JsonFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), format!("{value:?}").into());
    }
}

/// The JSON line format (`--log-format json`).
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        let mut fields = Map::new();
        event.record(&mut JsonFields(&mut fields));
        if let Some(message) = fields.remove("message") {
            line.insert("message".into(), message);
        }
        let mut task = TaskFields {
            task_id: fields
                .get("task.id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            trace_id: None,
        };
        let mut spans = Vec::new();
        // Innermost first: the line's span and then those around it.
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                spans.push(Value::from(span.name()));
                if let Some(found) = span.extensions().get::<TaskFields>() {
                    task.task_id = task.task_id.or_else(|| found.task_id.clone());
                    task.trace_id = task.trace_id.or_else(|| found.trace_id.clone());
                }
            }
        }
        line.extend(fields);
        if !spans.is_empty() {
            spans.reverse();
            line.insert("spans".into(), spans.into());
        }
        // The ids of the exported span current where the line is written, when there is
        // one (they name the trace exactly): the innermost exported span it is in.
        let ids = taskwire_traces::current_ids();
        if let Some(task_id) = task.task_id {
            line.insert("task_id".into(), task_id.into());
        }
        match ids {
            Some((trace_id, span_id)) => {
                line.insert("trace_id".into(), trace_id.into());
                line.insert("span_id".into(), span_id.into());
            }
            None => {
                if let Some(trace_id) = task.trace_id {
                    line.insert("trace_id".into(), trace_id.into());
                }
            }
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}
