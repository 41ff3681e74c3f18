//! The endpoints: what each path answers, from what the server was given.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kstreams_metrics::MetricsRegistry;
use kstreams_runtime::kafka::{LocalMetadata, RestoreProgress, State};
use serde_json::json;

use crate::client_metrics::ClientGauges;
use crate::state_json::{state_json, state_name};

/// Reads the application's metadata at the moment of a request.
pub(crate) type MetadataSource = Arc<dyn Fn() -> LocalMetadata + Send + Sync>;

/// Reads the restorations in flight at the moment of a request.
pub(crate) type RestoreSource = Arc<dyn Fn() -> Vec<RestoreProgress> + Send + Sync>;

/// The topology in its three forms, made once at start: it never changes
/// while the application runs.
pub(crate) struct TopologyViews {
    pub text: String,
    pub dot: String,
    pub svg: String,
    pub stores: BTreeMap<u32, Vec<String>>,
}

/// What the server answers from: the registry always, the application when
/// there is one.
#[derive(Clone)]
pub(crate) struct Served {
    pub registry: MetricsRegistry,
    pub app: Option<(MetadataSource, Arc<TopologyViews>)>,
    /// The application's restorations in flight, for `/state`.
    pub restores: Option<RestoreSource>,
}

/// The router of every endpoint; those of an application answer 404
/// when only metrics are served.
pub(crate) fn router(served: Served) -> Router {
    // The client's gauges come from its metadata, read at each scrape.
    let client = served.app.as_ref().and_then(|(metadata, _)| {
        match ClientGauges::register(&served.registry) {
            Ok(gauges) => Some((metadata.clone(), Arc::new(gauges))),
            Err(e) => {
                log::warn!("/metrics: without the client state gauges: {e}");
                None
            }
        }
    });
    let mut router = Router::new().route(
        "/metrics",
        get({
            let registry = served.registry.clone();
            move || async move {
                if let Some((metadata, gauges)) = &client {
                    gauges.update(&metadata());
                }
                (
                    [(header::CONTENT_TYPE, prometheus_text_format())],
                    registry.gather_text(),
                )
            }
        }),
    );
    let restores = served.restores.clone();
    if let Some((metadata, topology)) = served.app {
        router = router
            .route(
                "/health/live",
                get({
                    let metadata = metadata.clone();
                    move || async move { live(&metadata()) }
                }),
            )
            .route(
                "/health/ready",
                get({
                    let metadata = metadata.clone();
                    move || async move { ready(&metadata()) }
                }),
            )
            .route(
                "/state",
                get({
                    let (metadata, topology) = (metadata.clone(), topology.clone());
                    let restores = restores.clone();
                    move || async move {
                        let restoring = restores.as_ref().map(|r| r()).unwrap_or_default();
                        json_response(
                            StatusCode::OK,
                            state_json(&metadata(), &topology.stores, &restoring),
                        )
                    }
                }),
            )
            .route(
                "/topology",
                get({
                    let topology = topology.clone();
                    move || async move { text(topology.text.clone(), "text/plain; charset=utf-8") }
                }),
            )
            .route(
                "/topology.dot",
                get({
                    let topology = topology.clone();
                    move || async move { text(topology.dot.clone(), "text/vnd.graphviz; charset=utf-8") }
                }),
            )
            .route(
                "/topology.svg",
                get({
                    let topology = topology.clone();
                    move || async move { text(topology.svg.clone(), "image/svg+xml") }
                }),
            );
    }
    router
}

/// The content type Prometheus expects of the text exposition format.
fn prometheus_text_format() -> &'static str {
    "text/plain; version=0.0.4; charset=utf-8"
}

/// Live unless the instance stopped after a failure: a restart is then the
/// only way on, which is what a failing liveness probe asks for.
fn live(metadata: &LocalMetadata) -> Response {
    let body = json!({"state": state_name(metadata.state)});
    match metadata.state {
        State::Error | State::PendingError => json_response(StatusCode::SERVICE_UNAVAILABLE, body),
        _ => json_response(StatusCode::OK, body),
    }
}

fn ready(metadata: &LocalMetadata) -> Response {
    match metadata.not_ready_reason() {
        None => json_response(
            StatusCode::OK,
            json!({"ready": true, "state": state_name(metadata.state)}),
        ),
        Some(reason) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"ready": false, "state": state_name(metadata.state), "reason": reason}),
        ),
    }
}

fn json_response(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn text(body: String, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}
