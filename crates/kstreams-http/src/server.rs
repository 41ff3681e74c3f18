//! [`HttpServer`]: one thread with a small tokio runtime serving the
//! endpoints, so the stream threads never wait on a request.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::Arc;
use std::thread::JoinHandle;

use kstreams_metrics::MetricsRegistry;
use kstreams_runtime::kafka::KafkaStreams;
use tokio::sync::oneshot;

use crate::routes::{router, Served, TopologyViews};
use crate::state_json::stores_by_subtopology;
use crate::{dot_to_svg, topology_dot, Error};

/// The operator's endpoints of one application, until
/// [`HttpServer::stop`] (or drop):
///
/// | path | answer |
/// | --- | --- |
/// | `/metrics` | the application's metrics, Prometheus text format, with its state (`kstreams_client_state`) and live stream threads (`kstreams_client_alive_stream_threads`) |
/// | `/health/live` | 200, or 503 once the instance stopped after a failure |
/// | `/health/ready` | 200 when RUNNING, every stream thread alive, nothing restoring or bootstrapping; else 503 with a JSON reason |
/// | `/topology` | `Topology::describe()`, as Kafka Streams prints it |
/// | `/topology.dot` | the topology in Graphviz DOT |
/// | `/topology.svg` | the topology as a picture |
/// | `/state` | JSON: state, threads, tasks with partitions, lag and stores; the restorations in flight (changelog, global, bootstrap) with offsets, records restored, rate and time left |
///
/// ```no_run
/// use kstreams_dsl::StreamsBuilder;
/// use kstreams_http::HttpServer;
/// use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
///
/// let builder = StreamsBuilder::new();
/// builder.stream::<String, String>("in").to("out");
/// let mut app = KafkaStreams::new(builder.build().unwrap(), StreamsConfig::new("app", "localhost:9092"));
/// // Before start(): probes see "not ready" while the instance joins and restores.
/// let server = HttpServer::start(&app, HttpServer::DEFAULT_ADDRESS).unwrap();
/// println!("operate it at {}", server.url());
/// app.start().unwrap();
/// ```
#[derive(Debug)]
pub struct HttpServer {
    address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Where to listen when nothing else is configured: this host only
    /// (exposing it is the operator's decision), on the port the examples'
    /// metrics exporter used.
    pub const DEFAULT_ADDRESS: &'static str = "127.0.0.1:9464";

    /// Serves every endpoint of `app` on `address` (port 0 picks a free
    /// port, see [`HttpServer::local_addr`]). It may be called before or
    /// after `app.start()`; the server outlives neither.
    pub fn start(app: &KafkaStreams, address: impl ToSocketAddrs) -> Result<Self, Error> {
        let description = app.describe();
        let dot = topology_dot(&description);
        let svg = dot_to_svg(&dot).unwrap_or_else(|e| {
            log::warn!("/topology.svg: {e}; /topology.dot has the topology");
            error_svg(&e.to_string())
        });
        let views = TopologyViews {
            text: description.to_string(),
            stores: stores_by_subtopology(&description),
            dot,
            svg,
        };
        let metadata = app.metadata_source();
        Self::serve(
            Served {
                registry: app.metrics().clone(),
                app: Some((Arc::new(metadata), Arc::new(views))),
                restores: Some(Arc::new(app.restore_progress_source())),
            },
            address,
        )
    }

    /// [`HttpServer::start`] on the address of the application's
    /// configuration (`kstreams.http.address`, or
    /// `StreamsConfig::http_address`); `None` when it has none, as the
    /// endpoints are off unless asked for.
    pub fn start_configured(app: &KafkaStreams) -> Result<Option<Self>, Error> {
        app.http_address()
            .map(|address| Self::start(app, address))
            .transpose()
    }

    /// Serves only `/metrics` from `registry`: for metrics recorded without
    /// a [`KafkaStreams`] (a test driver, a program's own).
    pub fn serve_metrics(
        registry: MetricsRegistry,
        address: impl ToSocketAddrs,
    ) -> Result<Self, Error> {
        Self::serve(
            Served {
                registry,
                app: None,
                restores: None,
            },
            address,
        )
    }

    fn serve(served: Served, address: impl ToSocketAddrs) -> Result<Self, Error> {
        let shown = address
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .map_or_else(|| "the given address".to_string(), |a| a.to_string());
        let bind_error = |source| Error::Bind {
            address: shown.clone(),
            source,
        };
        // Bound here, not on the server's thread: a taken port fails the
        // caller.
        let listener = TcpListener::bind(&address).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let address = listener.local_addr().map_err(bind_error)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|source| Error::Io {
                action: "building its runtime",
                source,
            })?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("kstreams-http".to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            log::error!("http server on {address}: {e}");
                            return;
                        }
                    };
                    let serving =
                        axum::serve(listener, router(served)).with_graceful_shutdown(async {
                            let _ = stopped.await;
                        });
                    if let Err(e) = serving.await {
                        log::error!("http server on {address}: {e}");
                    }
                })
            })
            .map_err(|source| Error::Io {
                action: "starting its thread",
                source,
            })?;
        log::info!("http server listening on http://{address}");
        Ok(Self {
            address,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// `http://<address>`, to print for the operator.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stops listening, lets requests in flight finish, and waits for the
    /// thread to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A picture saying why there is no picture.
fn error_svg(message: &str) -> String {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"40\">\
         <text x=\"10\" y=\"25\">{escaped}</text></svg>"
    )
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
