//! The OTLP span exporter and tracer provider, from the standard OpenTelemetry
//! variables. The SDK reads `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`,
//! `OTEL_TRACES_SAMPLER` / `_ARG` and the endpoint variables itself; this module decides
//! whether there is an exporter at all, which protocol it speaks, and the defaults
//! taskwire adds (its service name, `service.instance.id`).

use anyhow::Context;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The tracer's name (the instrumentation scope of every span).
const SCOPE: &str = "taskwire";

/// How this process exports traces, read from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSettings {
    pub protocol: OtlpProtocol,
    /// `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES`
    /// sets one.
    pub default_service_name: &'static str,
    /// `service.instance.id`: the worker id, or a per-process id for a coordinator.
    pub instance_id: String,
    /// The resource already names the service (the SDK reads it from the environment).
    pub service_name_set: bool,
    /// Prompt and completion text go on `chat` spans (`TASKWIRE_OTEL_CAPTURE_CONTENT`).
    pub capture_content: bool,
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL` values taskwire supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    Grpc,
    HttpProtobuf,
}

impl TraceSettings {
    /// The settings `env` describes; `None` when no OTLP endpoint is set (or the SDK is
    /// disabled): then nothing is exported and no tracer is installed. An
    /// unsupported protocol is an error naming the variable.
    pub fn from_env(
        env: impl Fn(&str) -> Option<String>,
        default_service_name: &'static str,
        instance_id: impl FnOnce() -> String,
    ) -> anyhow::Result<Option<Self>> {
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
            && set("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
        {
            return Ok(None);
        }
        let (variable, value) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(v) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v),
            None => (
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                set("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_else(|| "http/protobuf".into()),
            ),
        };
        let protocol = match value.trim() {
            "grpc" => OtlpProtocol::Grpc,
            "http/protobuf" => OtlpProtocol::HttpProtobuf,
            other => anyhow::bail!(
                "{variable}: unsupported protocol {other:?} (use \"grpc\" or \"http/protobuf\")"
            ),
        };
        let capture_content = match set("TASKWIRE_OTEL_CAPTURE_CONTENT")
            .as_deref()
            .map(str::trim)
        {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => anyhow::bail!(
                "TASKWIRE_OTEL_CAPTURE_CONTENT: {other:?} is not \"true\" or \"false\""
            ),
        };
        let service_name_set = set("OTEL_SERVICE_NAME").is_some()
            || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
                a.split(',')
                    .any(|kv| kv.split('=').next().map(str::trim) == Some("service.name"))
            });
        Ok(Some(Self {
            protocol,
            default_service_name,
            instance_id: instance_id(),
            service_name_set,
            capture_content,
        }))
    }
}

/// The provider (kept to flush it at shutdown) and the tracer spans are exported with.
pub fn tracer(settings: &TraceSettings) -> anyhow::Result<(SdkTracerProvider, SdkTracer)> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match settings.protocol {
        OtlpProtocol::Grpc => builder.with_tonic().build(),
        OtlpProtocol::HttpProtobuf => builder
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build(),
    }
    .context("failed to build the otlp span exporter")?;
    // Detectors first (service name, OTEL_RESOURCE_ATTRIBUTES), then what taskwire adds.
    let mut resource = Resource::builder().with_attribute(KeyValue::new(
        "service.instance.id",
        settings.instance_id.clone(),
    ));
    if !settings.service_name_set {
        resource = resource.with_service_name(settings.default_service_name);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer(SCOPE);
    Ok((provider, tracer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> anyhow::Result<Option<TraceSettings>> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TraceSettings::from_env(
            |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            "taskwire-worker",
            || "w1".into(),
        )
    }

    #[test]
    fn without_an_endpoint_nothing_is_exported() {
        assert_eq!(settings(&[]).expect("valid"), None);
        assert_eq!(
            settings(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).expect("valid"),
            None
        );
        assert_eq!(
            settings(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
                ("OTEL_SDK_DISABLED", "true")
            ])
            .expect("valid"),
            None
        );
    }

    #[test]
    fn either_endpoint_variable_turns_export_on_with_http_protobuf_by_default() {
        for var in [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ] {
            let s = settings(&[(var, "http://c:4318")])
                .expect("valid")
                .expect("exports");
            assert_eq!(s.protocol, OtlpProtocol::HttpProtobuf, "{var}");
            assert!(!s.service_name_set);
            assert!(!s.capture_content, "prompts are not recorded by default");
        }
    }

    #[test]
    fn the_protocol_is_read_and_an_unsupported_one_is_refused_naming_the_variable() {
        let grpc = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ])
        .expect("valid")
        .expect("exports");
        assert_eq!(grpc.protocol, OtlpProtocol::Grpc);
        let err = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
        ])
        .expect_err("refused");
        assert!(
            err.to_string()
                .contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            "{err}"
        );
    }

    #[test]
    fn content_capture_is_opt_in_and_a_bad_value_is_refused_naming_the_variable() {
        let on = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("TASKWIRE_OTEL_CAPTURE_CONTENT", "true"),
        ])
        .expect("valid")
        .expect("exports");
        assert!(on.capture_content);
        let err = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("TASKWIRE_OTEL_CAPTURE_CONTENT", "yes please"),
        ])
        .expect_err("refused");
        assert!(
            err.to_string().contains("TASKWIRE_OTEL_CAPTURE_CONTENT"),
            "{err}"
        );
    }

    #[test]
    fn a_service_name_from_the_environment_wins_over_the_default() {
        for (var, value) in [
            ("OTEL_SERVICE_NAME", "fleet-a"),
            ("OTEL_RESOURCE_ATTRIBUTES", "team=x, service.name=fleet-a"),
        ] {
            let s = settings(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                (var, value),
            ])
            .expect("valid")
            .expect("exports");
            assert!(s.service_name_set, "{var}");
        }
    }
}
