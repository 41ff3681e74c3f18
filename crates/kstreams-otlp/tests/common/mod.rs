//! The test's OTLP/HTTP receiver: an HTTP server (axum) decoding each
//! export request with OTLP's own protobuf messages, keeping the spans.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use kstreams_runtime::TraceParent;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;

/// One span as the receiver got it.
#[derive(Debug, Clone)]
// Each test binary reads the fields it checks.
#[allow(dead_code)]
pub(crate) struct ReceivedSpan {
    pub service: String,
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent_span_id: Vec<u8>,
    pub attributes: HashMap<String, String>,
}

fn text(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                Value::StringValue(s) => s.clone(),
                Value::IntValue(i) => i.to_string(),
                Value::BoolValue(b) => b.to_string(),
                Value::DoubleValue(d) => d.to_string(),
                other => format!("{other:?}"),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

type Spans = Arc<Mutex<Vec<ReceivedSpan>>>;

async fn receive(State(spans): State<Spans>, body: Bytes) -> (axum::http::StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
    };
    let mut got = spans.lock().unwrap();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .map(|r| text(&r.attributes))
            .and_then(|a| a.get("service.name").cloned())
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                got.push(ReceivedSpan {
                    service: service.clone(),
                    name: span.name.clone(),
                    trace_id: span.trace_id.clone(),
                    span_id: span.span_id.clone(),
                    parent_span_id: span.parent_span_id.clone(),
                    attributes: text(&span.attributes),
                });
            }
        }
    }
    // An empty ExportTraceServiceResponse: everything accepted.
    (axum::http::StatusCode::OK, Vec::new())
}

/// An OTLP/HTTP receiver on its own thread and runtime.
pub(crate) struct Receiver {
    pub address: SocketAddr,
    spans: Spans,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    pub(crate) fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let spans = Spans::default();
        let state = spans.clone();
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let app = axum::Router::new()
                    .route("/v1/traces", axum::routing::post(receive))
                    .with_state(state);
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Self {
            address,
            spans,
            shutdown: Some(shutdown),
            thread: Some(thread),
        }
    }

    pub(crate) fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The span called `name` of `trace` (with `span_id`, if given).
pub(crate) fn find<'a>(
    spans: &'a [ReceivedSpan],
    name: &str,
    trace: &TraceParent,
    span_id: Option<&[u8]>,
) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|s| {
            s.name == name
                && s.trace_id == trace.trace_id
                && span_id.is_none_or(|id| s.span_id == id)
        })
        .unwrap_or_else(|| panic!("no {name} span of trace {trace:?} in {spans:#?}"))
}
