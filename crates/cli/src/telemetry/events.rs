//! Log lines as span events: a line at INFO or above written where an exported span is
//! current (see [`taskwire_traces`]) is added to that span, with its level and fields.

use std::borrow::Cow;

use taskwire_traces::Attribute;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterFn, Filtered, LevelFilter};
use tracing_subscriber::layer::Context;

/// The layer that adds log lines to the current exported span.
pub struct SpanEvents;

/// Which lines become events: taskwire's, at INFO and above; no span.
type Lines = FilterFn<fn(&Metadata<'_>) -> bool>;

impl SpanEvents {
    /// The layer, for taskwire's own lines at INFO and above, whatever `RUST_LOG` says.
    /// It enables no span: a span that no log line needs is never created.
    pub fn layer<S: Subscriber>() -> Filtered<Self, Lines, S> {
        let events: fn(&Metadata<'_>) -> bool = |meta| {
            meta.is_event() && *meta.level() <= Level::INFO && meta.target().starts_with("taskwire")
        };
        // The hint keeps DEBUG and TRACE callsites off at their first, static check.
        SpanEvents.with_filter(FilterFn::new(events).with_max_level_hint(LevelFilter::INFO))
    }
}

impl<S: Subscriber> Layer<S> for SpanEvents {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        taskwire_traces::add_current_event(|| {
            let mut fields = Fields {
                message: Cow::Borrowed(""),
                attributes: vec![Attribute::new("level", event.metadata().level().as_str())],
            };
            event.record(&mut fields);
            (fields.message, fields.attributes)
        });
    }
}

struct Fields {
    message: Cow<'static, str>,
    attributes: Vec<Attribute>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Cow::Owned(value.to_owned());
        } else {
            self.attributes
                .push(Attribute::new(field.name(), value.to_owned()));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(Attribute::new(field.name(), value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.attributes.push(Attribute::new(
            field.name(),
            i64::try_from(value).unwrap_or(i64::MAX),
        ));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(Attribute::new(field.name(), value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.push(Attribute::new(field.name(), value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = Cow::Owned(text);
        } else {
            self.attributes.push(Attribute::new(field.name(), text));
        }
    }
}
