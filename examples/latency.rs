//! Latency governance: what a slow external call does to a stream, read
//! where an operator reads it (the `/metrics` and `/health/ready`
//! endpoints of the `http` feature).
//!
//! A price service (a real HTTP server, axum, answering after a
//! configurable delay) is called once per record from `map_values`, a
//! synchronous call on the stream thread, as most applications start. A
//! burst of requests then queues behind it: the process latency of a record
//! is the call's delay, its end-to-end latency at the sink adds the time it
//! waited for the records before it. The example reads both from
//! `/metrics` (Prometheus text, as a scrape would) and asks `/health/ready`
//! before the start, while running and after the close.
//!
//! ```text
//! cargo run -p kstreams-examples --example latency                 # 50 ms per call
//! SLOW_SERVICE_LATENCY_MS=200 cargo run -p kstreams-examples --example latency
//! ```
//!
//! Calls that do not hold the stream thread (async processing) are the
//! next step; this shows what they are measured against.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kstreams::http::HttpServer;
use kstreams::metrics::RecordingLevel;
use kstreams::prelude::*;
use kstreams_examples::{
    histogram_sum_count, read_topic, wait_until_running, BoxError, Cluster, InputProducer,
    Outgoing, StateDir,
};

const REQUESTS: &str = "price-requests";
const PRICED: &str = "priced";
const APP: &str = "latency-example";
const SOURCE: &str = "price-requests-source";
const SINK: &str = "priced-sink";
const PARTITIONS: i32 = 1;

/// The slow external service: `GET /price/{sku}` answers after `latency`.
struct SlowService {
    address: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowService {
    fn start(latency: Duration) -> Result<Self, BoxError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let app = axum::Router::new().route(
                    "/price/{sku}",
                    axum::routing::get(
                        move |axum::extract::Path(sku): axum::extract::Path<String>| async move {
                            tokio::time::sleep(latency).await;
                            let cents = sku.bytes().map(u32::from).sum::<u32>() * 7;
                            format!("{}.{:02}", cents / 100, cents % 100)
                        },
                    ),
                );
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Ok(Self {
            address,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }
}

impl Drop for SlowService {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn topology(service: SocketAddr) -> Result<Topology, TopologyError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let builder = StreamsBuilder::new();
    builder
        .stream_with(
            REQUESTS,
            Consumed::with(StringSerde, StringSerde).with_name(SOURCE),
        )
        .map_values_with_key(move |sku, request| {
            // Synchronous: the stream thread waits for the answer.
            let price = agent
                .get(format!("http://{service}/price/{sku}"))
                .call()
                .and_then(|mut answer| answer.body_mut().read_to_string());
            match price {
                Ok(price) => format!("{request}: {sku} costs {price}"),
                Err(e) => format!("{request}: {sku} has no price ({e})"),
            }
        })
        .to_with(
            PRICED,
            Produced::with(StringSerde, StringSerde).with_name(SINK),
        );
    builder.build()
}

/// What an HTTP GET answered: status and body.
fn get(agent: &ureq::Agent, url: &str) -> Result<(u16, String), BoxError> {
    let mut answer = agent.get(url).call()?;
    let status = answer.status().as_u16();
    Ok((status, answer.body_mut().read_to_string()?))
}

/// Latency figures read from `/metrics`, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Latencies {
    /// Records the process latency histogram counted.
    pub processed: u64,
    /// Mean time of one record through the topology.
    pub process_mean: f64,
    /// Mean wall clock at the source minus the record's timestamp: how
    /// long records waited before their processing began.
    pub e2e_mean_at_source: f64,
    /// Records the sink's end-to-end histogram counted.
    pub at_sink: u64,
    /// Mean wall clock at the sink minus the record's timestamp.
    pub e2e_mean_at_sink: f64,
}

/// What the example saw.
#[derive(Debug)]
pub struct Summary {
    /// The service's delay.
    pub latency: Duration,
    /// Records sent.
    pub requests: usize,
    /// From the burst's send to the first and the last output read.
    pub first_output_after: Duration,
    /// See `first_output_after`.
    pub last_output_after: Duration,
    /// Records on the output topic.
    pub priced: usize,
    /// `/health/ready` before start, while running, after close.
    pub readiness: [(u16, String); 3],
    /// From `/metrics` once every record was out.
    pub latencies: Latencies,
}

/// Runs the slow service, the application and its HTTP endpoints on the
/// embedded cluster; sends `requests` records in one burst.
pub fn run(latency: Duration, requests: usize) -> Result<Summary, BoxError> {
    let service = SlowService::start(latency)?;
    let cluster = Cluster::start(false)?;
    let bootstrap = cluster.bootstrap_servers();
    cluster.create_topic(REQUESTS, PARTITIONS)?;
    cluster.create_topic(PRICED, PARTITIONS)?;
    println!(
        "embedded Kafka at {bootstrap}; price service at http://{} answering after {} ms",
        service.address,
        latency.as_millis()
    );

    let dir = StateDir::new(APP);
    let config = StreamsConfig::new(APP, &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .metrics_recording_level(RecordingLevel::Debug)
        .state_dir(dir.path());
    let mut app = KafkaStreams::new(topology(service.address)?, config);
    let server = HttpServer::start(&app, "127.0.0.1:0")?;
    let url = server.url();
    println!("operator endpoints: {url}/metrics {url}/health/ready");
    let http: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let ready = format!("{url}/health/ready");
    let before_start = get(&http, &ready)?;
    app.start()?;
    wait_until_running(&app, Duration::from_secs(20))?;
    let running = get(&http, &ready)?;

    let producer = InputProducer::new(&bootstrap)?;
    let sent_at = Instant::now();
    for i in 0..requests {
        let sku = format!("sku-{:02}", i % 10);
        let request = format!("request-{i}");
        producer.send(
            REQUESTS,
            PARTITIONS,
            Outgoing {
                key: &sku,
                value: Some(request.as_bytes()),
                // End-to-end latency is measured from this timestamp.
                timestamp: now_ms(),
            },
        )?;
    }
    producer.flush()?;
    let priced = read_topic(&bootstrap, PRICED, Duration::from_secs(30), |read| {
        read.len() >= requests
    })?;
    let after = |r: Option<&kstreams_examples::Incoming>| {
        r.map_or(Duration::ZERO, |r| r.received.duration_since(sent_at))
    };
    let (first_output_after, last_output_after) = (after(priced.first()), after(priced.last()));
    // The metrics are recorded as records go; one more commit interval
    // lets the last record's figures in.
    std::thread::sleep(Duration::from_millis(200));
    let (_, metrics) = get(&http, &format!("{url}/metrics"))?;
    let (process_sum, processed) =
        histogram_sum_count(&metrics, "kstreams_task_process_latency_seconds", &[]);
    let sink_label = format!("node=\"{SINK}\"");
    let (e2e_sum, at_sink) = histogram_sum_count(
        &metrics,
        "kstreams_record_e2e_latency_seconds",
        &[&sink_label],
    );
    let source_label = format!("node=\"{SOURCE}\"");
    let (source_sum, at_source) = histogram_sum_count(
        &metrics,
        "kstreams_record_e2e_latency_seconds",
        &[&source_label],
    );
    let latencies = Latencies {
        processed,
        process_mean: process_sum / processed.max(1) as f64,
        e2e_mean_at_source: source_sum / at_source.max(1) as f64,
        at_sink,
        e2e_mean_at_sink: e2e_sum / at_sink.max(1) as f64,
    };
    app.close(Duration::from_secs(10));
    let after_close = get(&http, &ready)?;
    server.stop();

    if let Some(first) = priced.first() {
        println!("first output: {}", first.text());
    }
    println!(
        "{} requests in one burst, {} priced; first output read {:.2} s after the send, last {:.2} s",
        requests,
        priced.len(),
        first_output_after.as_secs_f64(),
        last_output_after.as_secs_f64()
    );
    println!(
        "from /metrics: process latency mean {:.1} ms over {} records \
         (kstreams_task_process_latency_seconds)",
        latencies.process_mean * 1000.0,
        latencies.processed
    );
    println!(
        "from /metrics: end-to-end latency mean at {SOURCE} {:.1} ms, at {SINK} {:.1} ms \
         over {} records (kstreams_record_e2e_latency_seconds): records wait for the calls \
         of the records before them",
        latencies.e2e_mean_at_source * 1000.0,
        latencies.e2e_mean_at_sink * 1000.0,
        latencies.at_sink
    );
    let readiness = [before_start, running, after_close];
    for (when, (status, body)) in ["before start", "while running", "after close"]
        .iter()
        .zip(&readiness)
    {
        println!("/health/ready {when:<13}: {status} {}", body.trim());
    }
    Ok(Summary {
        latency,
        requests,
        first_output_after,
        last_output_after,
        priced: priced.len(),
        readiness,
        latencies,
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn main() -> Result<(), BoxError> {
    env_logger::init();
    let latency_ms = match std::env::var("SLOW_SERVICE_LATENCY_MS") {
        Ok(ms) => ms
            .parse()
            .map_err(|e| format!("SLOW_SERVICE_LATENCY_MS={ms}: {e}"))?,
        Err(_) => 50,
    };
    run(Duration::from_millis(latency_ms), 40).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn metrics_show_the_slow_call_in_process_and_end_to_end_latency_and_readiness_follows_the_state(
    ) {
        let latency = Duration::from_millis(50);
        let summary = super::run(latency, 20).unwrap();
        assert_eq!(summary.priced, summary.requests, "{summary:?}");
        let l = summary.latencies;
        assert!(l.processed >= summary.requests as u64, "{summary:?}");
        assert!(l.at_sink >= summary.requests as u64, "{summary:?}");
        // Every record waited for one call; at the sink it also waited for
        // the calls of the records queued before it.
        assert!(l.process_mean >= latency.as_secs_f64(), "{summary:?}");
        assert!(l.e2e_mean_at_sink > l.process_mean, "{summary:?}");
        assert!(l.e2e_mean_at_sink > l.e2e_mean_at_source, "{summary:?}");
        let statuses: Vec<u16> = summary.readiness.iter().map(|(s, _)| *s).collect();
        assert_eq!(statuses, [503, 200, 503], "{summary:?}");
    }

    /// The engine gap this example found: a task processed every record
    /// its partition group had buffered before handing the outputs to the
    /// producer, so the first record's output waited for the calls of all
    /// the records behind it. Kafka Streams' sink sends each output as it
    /// is written; the runtime now sends a task's outputs every few
    /// milliseconds of processing.
    #[test]
    fn the_first_output_leaves_before_the_burst_is_processed() {
        let summary = super::run(Duration::from_millis(50), 40).unwrap();
        assert!(
            summary.first_output_after * 2 < summary.last_output_after,
            "{summary:?}"
        );
    }
}
