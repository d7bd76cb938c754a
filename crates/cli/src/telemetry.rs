//! Telemetry: `tracing` logs to stderr (stdout carries only data), filtered by
//! `RUST_LOG`, as text or as JSON lines; and, only when an OTLP endpoint is configured,
//! OpenTelemetry traces (the spans of `taskwire_traces`, with the log lines written in
//! them as events).
//!
//! Traces are configured by the standard variables alone (see `docs/observability.md`):
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc`, `http/protobuf`), `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` / `_ARG`, `OTEL_SDK_DISABLED`.
//! Without an endpoint no tracer is installed and no span is built.
//!
//! - `json` (private): the JSON line format, which names each line's task and span.
//! - `otlp` (private): the exporter and tracer provider.
//! - `events` (private): log lines as events of the current exported span.

mod events;
mod json;
mod otlp;

use std::io::IsTerminal;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

pub use otlp::TraceSettings;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log collectors; lines emitted for a task carry
    /// `task_id`, `trace_id` and (when traces are exported) `span_id`.
    Json,
}

/// What was started; [`Telemetry::shutdown`] flushes the spans not yet exported.
#[must_use = "shut telemetry down to flush the last spans"]
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still buffered and stops the exporter. Blocks: call it off the
    /// async runtime (with the runtime still alive, for the gRPC exporter).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "failed to flush the last spans");
        }
    }
}

/// Installs the global subscriber. `default_level` applies when `RUST_LOG` is unset;
/// an invalid `RUST_LOG` keeps the directives that parse rather than failing start-up.
/// With `traces`, spans are exported too: build them inside a tokio runtime (the gRPC
/// exporter starts its connection there).
pub fn init(
    default_level: LevelFilter,
    format: LogFormat,
    traces: Option<TraceSettings>,
) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::builder()
        .with_default_directive(default_level.into())
        .from_env_lossy();
    let provider = match traces {
        Some(settings) => {
            let (provider, tracer) = otlp::tracer(&settings)?;
            taskwire_llm::spans::set_capture_content(settings.capture_content);
            // Spans are built with the OpenTelemetry API where the work is
            // (`taskwire_traces`), not from `tracing` spans: exported spans cost no
            // `tracing` span, and log lines only add themselves to the current one.
            taskwire_traces::install(tracer);
            Some(provider)
        }
        None => None,
    };
    let writer = std::io::stderr;
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(layers(format, filter, writer, ansi, provider.is_some()))
        .try_init()
        .map_err(|e| anyhow::anyhow!("failed to start logging: {e}"))?;
    Ok(Telemetry { provider })
}

/// The subscriber's layers: log lines in `format` to `writer`, filtered by `filter`;
/// with `span_events`, log lines as events of the current exported span. A list, not
/// a nest of optional layers: an absent layer in the nest would make every span
/// callsite "sometimes" enabled, and spans nobody logs would be created.
fn layers<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
    span_events: bool,
) -> Vec<Box<dyn Layer<Registry> + Send + Sync>>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let mut layers = Vec::new();
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => {
            // Only JSON lines name the task of the spans they are in. Text lines have
            // no use for it, and without it a span nobody logs is never created.
            layers.push(json::TaskFieldsLayer.boxed());
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .event_format(json::JsonLines)
                .boxed()
        }
    };
    layers.push(logs.with_filter(filter).boxed());
    if span_events {
        layers.push(events::SpanEvents::layer().boxed());
    }
    layers
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    fn with_layers(format: LogFormat, span_events: bool, check: impl FnOnce()) {
        let layers = layers(
            format,
            EnvFilter::new("warn"),
            std::io::sink,
            false,
            span_events,
        );
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layers), check);
    }

    #[test]
    fn with_logs_at_warn_no_info_span_is_created_whether_spans_are_exported_or_not() {
        for span_events in [false, true] {
            with_layers(LogFormat::Text, span_events, || {
                let span = tracing::info_span!(target: "taskwire_worker", "invoke_agent");
                assert!(span.is_disabled(), "span events {span_events}: not created");
                let span = tracing::warn_span!(target: "taskwire_worker", "warned");
                assert!(!span.is_disabled(), "a span the logs want is created");
                assert!(!tracing::event_enabled!(target: "taskwire_worker", Level::DEBUG));
                assert_eq!(
                    tracing::event_enabled!(target: "taskwire_worker", Level::INFO),
                    span_events,
                    "INFO lines are wanted only as span events"
                );
            });
        }
    }
}
