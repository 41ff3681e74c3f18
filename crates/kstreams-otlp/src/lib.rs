//! Traces of a kstreams application exported with OpenTelemetry over
//! OTLP/HTTP (protobuf), to a collector, Jaeger, Tempo or any OTLP
//! receiver.
//!
//! kstreams traces records with `tracing` spans (`kstreams.tracing.enabled`:
//! one `kstreams.process` span per record and task, child of the record's
//! W3C `traceparent`, whose trace goes on in the records it causes). With
//! this crate those spans become OpenTelemetry spans: [`OtlpTracing::layer`]
//! is a `tracing-opentelemetry` layer over the SDK's batch exporter, and
//! this crate turns on kstreams-runtime's `opentelemetry` feature, under
//! which a record span takes its ids from OpenTelemetry. So the trace id a
//! backend shows for a record's span is the one on its output records, and
//! spans the application opens while processing a record (an HTTP client's
//! in an async call, say) are children of it. The stream threads' own spans
//! (`kstreams.poll`, `kstreams.process_batch`, `kstreams.commit`,
//! `kstreams.rebalance`, `kstreams.restore`) are at DEBUG level; the layer
//! exports whatever the subscriber's filter lets through.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! # fn main() -> Result<(), kstreams_otlp::OtlpError> {
//! // OTEL_EXPORTER_OTLP_ENDPOINT (or http://localhost:4318) unless given.
//! let otlp = kstreams_otlp::OtlpTracing::builder()
//!     .endpoint("http://localhost:4318")
//!     .service_name("orders-app")
//!     .build()?;
//! tracing_subscriber::registry().with(otlp.layer()).init();
//! // ... StreamsConfig::new(..).set("kstreams.tracing.enabled", "true"),
//! // KafkaStreams::start, and at the end:
//! otlp.shutdown()?; // sends what is still batched
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetryLayer;

/// The path of the traces signal under an OTLP/HTTP base address.
const TRACES_PATH: &str = "/v1/traces";

/// What can go wrong setting up or flushing the export.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtlpError {
    /// The exporter could not be made (a bad endpoint, say).
    #[error("the OTLP exporter cannot be built: {0}")]
    Build(String),
    /// Spans could not be sent or the exporter stopped badly.
    #[error("the OTLP export failed: {0}")]
    Export(String),
}

/// How [`OtlpTracing`] is made.
#[derive(Debug, Clone, Default)]
pub struct OtlpTracingBuilder {
    endpoint: Option<String>,
    service_name: Option<String>,
    timeout: Option<Duration>,
}

impl OtlpTracingBuilder {
    /// The receiver's base address (`http://host:4318`; `/v1/traces` is
    /// added unless the address has a path). Unset, OpenTelemetry's
    /// variables decide: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is,
    /// else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, else
    /// `http://localhost:4318/v1/traces`.
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The `service.name` the spans are reported under (unset:
    /// `OTEL_SERVICE_NAME`, else the SDK's `unknown_service`). The
    /// application id is a good one.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// How long one export request may take (the SDK's default: 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Makes the exporter and its batch thread.
    pub fn build(self) -> Result<OtlpTracing, OtlpError> {
        let mut exporter = opentelemetry_otlp::SpanExporter::builder().with_http();
        if let Some(endpoint) = &self.endpoint {
            exporter = exporter.with_endpoint(traces_url(endpoint));
        }
        if let Some(timeout) = self.timeout {
            exporter = exporter.with_timeout(timeout);
        }
        let exporter = exporter
            .build()
            .map_err(|e| OtlpError::Build(e.to_string()))?;
        let mut resource = Resource::builder();
        if let Some(name) = self.service_name {
            resource = resource.with_service_name(name);
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("kstreams");
        Ok(OtlpTracing { provider, tracer })
    }
}

/// `endpoint` with the traces path when it has none.
fn traces_url(endpoint: &str) -> String {
    let trimmed = endpoint.trim_end_matches('/');
    let has_path = trimmed
        .split_once("://")
        .map_or(trimmed, |(_, rest)| rest)
        .contains('/');
    if has_path {
        endpoint.to_string()
    } else {
        format!("{trimmed}{TRACES_PATH}")
    }
}

/// The OpenTelemetry SDK's tracer provider with an OTLP/HTTP exporter; its
/// [`layer`](Self::layer) goes into the application's `tracing`
/// subscriber. Dropping it sends what is batched, as
/// [`shutdown`](Self::shutdown) does.
#[derive(Debug)]
pub struct OtlpTracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl OtlpTracing {
    /// A builder; see [`OtlpTracingBuilder`].
    pub fn builder() -> OtlpTracingBuilder {
        OtlpTracingBuilder::default()
    }

    /// The `tracing` layer that turns spans into OpenTelemetry spans and
    /// hands them to this exporter.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.tracer.clone())
    }

    /// Makes a subscriber of just this exporter's layer the process'
    /// default (for an application without a subscriber of its own; one
    /// with its own adds [`layer`](Self::layer) to it instead).
    pub fn install(&self) -> Result<(), OtlpError> {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(self.layer());
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|e| OtlpError::Build(format!("a tracing subscriber is already set: {e}")))
    }

    /// Sends every finished span now (the batch thread otherwise sends
    /// every 5 s or 512 spans).
    pub fn force_flush(&self) -> Result<(), OtlpError> {
        self.provider
            .force_flush()
            .map_err(|e| OtlpError::Export(e.to_string()))
    }

    /// Sends what is left and stops the batch thread.
    pub fn shutdown(self) -> Result<(), OtlpError> {
        self.provider
            .shutdown()
            .map_err(|e| OtlpError::Export(e.to_string()))
    }
}

impl Drop for OtlpTracing {
    fn drop(&mut self) {
        // After `shutdown` this reports that it already ran: nothing to do.
        let _ = self.provider.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn a_base_address_gets_the_traces_path_and_a_full_one_is_kept() {
        assert_eq!(
            traces_url("http://localhost:4318"),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://localhost:4318/"),
            "http://localhost:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/custom/traces"),
            "http://collector:4318/custom/traces"
        );
    }
}
