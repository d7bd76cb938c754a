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
use tracing_subscriber::{EnvFilter, Layer};

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
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(json::JsonLines)
            .boxed(),
    };
    let (provider, events) = match traces {
        Some(settings) => {
            let (provider, tracer) = otlp::tracer(&settings)?;
            taskwire_llm::spans::set_capture_content(settings.capture_content);
            // Spans are built with the OpenTelemetry API where the work is
            // (`taskwire_traces`), not from `tracing` spans: exported spans cost no
            // `tracing` span, and log lines only add themselves to the current one.
            taskwire_traces::install(tracer);
            (Some(provider), Some(events::SpanEvents::layer()))
        }
        None => (None, None),
    };
    // Only JSON lines name the task of the spans they are in. Text lines have no use
    // for it, and without it a span nobody logs or exports is never created at all.
    let task_fields = (format == LogFormat::Json).then_some(json::TaskFieldsLayer);
    tracing_subscriber::registry()
        .with(task_fields)
        .with(logs.with_filter(filter))
        .with(events)
        .try_init()
        .map_err(|e| anyhow::anyhow!("failed to start logging: {e}"))?;
    Ok(Telemetry { provider })
}
