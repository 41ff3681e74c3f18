//! Orders enriched from a slow HTTP service, synchronously and with
//! `map_values_async`, and the throughput of each.
//!
//! A customer service (a real HTTP server, axum, answering
//! `GET /customer/{id}` after `SLOW_SERVICE_LATENCY_MS`, 50 by default)
//! gives each order its customer's tier. The synchronous topology calls it
//! from `map_values` on the stream thread: one call at a time, so at most
//! 1/latency records per second per thread. The async one calls it from
//! `map_values_async`: calls overlap up to the in-flight bounds
//! (`kstreams.async.max.in.flight.per.task` 64 and `...per.thread` 256 by
//! default), so with one thread and four partitions the ceiling is
//! 256 / latency. Each run reads orders loaded beforehand and prints its
//! records per second, measured from its first output to its last.
//!
//! ```text
//! cargo run --release -p kstreams-examples --example enrich_async
//! SLOW_SERVICE_LATENCY_MS=20 ASYNC_ORDERS=20000 cargo run --release -p kstreams-examples --example enrich_async
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kstreams::prelude::*;
use kstreams_examples::{
    histogram_sum_count, read_topic, BoxError, Cluster, InputProducer, Outgoing, StateDir,
};

const PARTITIONS: i32 = 4;
const CUSTOMERS: usize = 500;

/// How many calls the service is answering now, and the most at once since
/// the last [`CallGauge::take_peak`]: what shows whether calls overlapped,
/// independent of how fast the machine is.
#[derive(Default)]
struct CallGauge {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl CallGauge {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn take_peak(&self) -> usize {
        self.peak.swap(0, Ordering::SeqCst)
    }
}

/// The slow customer service on its own thread and tokio runtime.
struct CustomerService {
    address: SocketAddr,
    calls: Arc<CallGauge>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CustomerService {
    fn start(latency: Duration) -> Result<Self, BoxError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let calls = Arc::new(CallGauge::default());
        let gauge = Arc::clone(&calls);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let lookup = move |axum::extract::Path(id): axum::extract::Path<String>| {
                    let gauge = Arc::clone(&gauge);
                    async move {
                        gauge.enter();
                        tokio::time::sleep(latency).await;
                        gauge.leave();
                        let n: usize = id.trim_start_matches("c-").parse().unwrap_or(0);
                        ["bronze", "silver", "gold"][n % 3].to_string()
                    }
                };
                let app = axum::Router::new().route("/customer/{id}", axum::routing::get(lookup));
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
            calls,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }
}

impl Drop for CustomerService {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn enriched(order: &str, tier: &str) -> String {
    format!("{order},tier={tier}")
}

/// `orders` (key order id, value `customer,amount`) to `output` with the
/// customer's tier, one blocking call per record.
fn sync_topology(
    orders: &str,
    output: &str,
    service: SocketAddr,
) -> Result<Topology, TopologyError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let builder = StreamsBuilder::new();
    builder
        .stream_with(orders, Consumed::with(StringSerde, StringSerde))
        .map_values(move |order: String| {
            let customer = order.split(',').next().unwrap_or_default().to_string();
            let tier = agent
                .get(format!("http://{service}/customer/{customer}"))
                .call()
                .and_then(|mut answer| answer.body_mut().read_to_string())
                .unwrap_or_else(|e| format!("unknown ({e})"));
            enriched(&order, &tier)
        })
        .to_with(output, Produced::with(StringSerde, StringSerde));
    builder.build()
}

/// The same enrichment with the call made by `map_values_async`.
fn async_topology(orders: &str, output: &str, service: SocketAddr) -> Result<Topology, BoxError> {
    // reqwest keeps connections alive in its pool: a call after the first
    // ones reuses one.
    let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let builder = StreamsBuilder::new();
    builder
        .stream_with(orders, Consumed::with(StringSerde, StringSerde))
        .map_values_async(
            move |_order_id: String, order: String| {
                let client = client.clone();
                async move {
                    let customer = order.split(',').next().unwrap_or_default().to_string();
                    let tier = client
                        .get(format!("http://{service}/customer/{customer}"))
                        .send()
                        .await?
                        .error_for_status()?
                        .text()
                        .await?;
                    Ok::<_, reqwest::Error>(enriched(&order, &tier))
                }
            },
            AsyncOptions::new()
                .with_timeout(Duration::from_secs(5))
                .with_retries(2, Duration::from_millis(50)),
        )
        .to_with(output, Produced::with(StringSerde, StringSerde));
    Ok(builder.build()?)
}

/// One run's figures.
#[derive(Debug, Clone)]
pub struct Run {
    /// Orders read and enriched.
    pub orders: usize,
    /// Records per second from the first output to the last.
    pub per_second: f64,
    /// Orders whose output names a tier the service gave.
    pub enriched: usize,
    /// Whether each order id came out once.
    pub once_each: bool,
    /// The async calls' mean duration (`kstreams_async_call_latency_seconds`).
    pub call_latency: Option<Duration>,
    /// The stream thread's commits: how many, and the seconds they took
    /// (the thread applies no completion while it commits).
    pub commits: (u64, f64),
    /// The most calls the service answered at once during the run.
    pub peak_concurrent_calls: usize,
}

/// What the example measured.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The service's latency.
    pub latency: Duration,
    /// The synchronous run.
    pub sync: Run,
    /// The async run.
    pub asynchronous: Run,
    /// Records in flight at most on the one stream thread.
    pub in_flight_bound: usize,
}

fn run_one(
    cluster: &Cluster,
    service: &CallGauge,
    name: &str,
    orders: usize,
    topology: impl FnOnce(&str, &str) -> Result<Topology, BoxError>,
) -> Result<Run, BoxError> {
    let bootstrap = cluster.bootstrap_servers();
    let input = cluster.name(&format!("{name}-orders"));
    let output = cluster.name(&format!("{name}-enriched"));
    cluster.create_topic(&input, PARTITIONS)?;
    cluster.create_topic(&output, PARTITIONS)?;
    service.take_peak();
    let producer = InputProducer::new(&bootstrap)?;
    for i in 0..orders {
        let key = format!("o-{i:06}");
        let value = format!("c-{},{}.00", i % CUSTOMERS, 10 + i % 90);
        producer.send(
            &input,
            PARTITIONS,
            Outgoing {
                key: &key,
                value: Some(value.as_bytes()),
                timestamp: 1_700_000_000_000 + i as i64,
            },
        )?;
    }
    producer.flush()?;
    let dir = StateDir::new(name);
    let config = StreamsConfig::new(cluster.name(name), &bootstrap)
        .num_stream_threads(1)
        .commit_interval(Duration::from_millis(500))
        .state_dir(dir.path());
    let mut app = KafkaStreams::new(topology(&input, &output)?, config);
    app.start()?;
    let read = read_topic(&bootstrap, &output, Duration::from_secs(300), |read| {
        read.len() >= orders
    })?;
    let metrics = app.metrics().gather_text();
    app.close(Duration::from_secs(30));
    let (latency_sum, calls) =
        histogram_sum_count(&metrics, "kstreams_async_call_latency_seconds", &[]);
    let call_latency = (calls > 0).then(|| Duration::from_secs_f64(latency_sum / calls as f64));
    let (commit_seconds, commit_count) =
        histogram_sum_count(&metrics, "kstreams_thread_commit_latency_seconds", &[]);
    let per_second = match (read.first(), read.last()) {
        (Some(first), Some(last)) if read.len() > 1 => {
            let span = last.received.duration_since(first.received).as_secs_f64();
            (read.len() - 1) as f64 / span.max(1e-9)
        }
        _ => 0.0,
    };
    let enriched = read
        .iter()
        .filter(|r| {
            ["bronze", "silver", "gold"]
                .iter()
                .any(|t| r.text().ends_with(t))
        })
        .count();
    let mut last_per_key: HashMap<String, usize> = HashMap::new();
    let mut once_each = read.len() == orders;
    for record in &read {
        let n: usize = record
            .key
            .trim_start_matches("o-")
            .parse()
            .unwrap_or(usize::MAX);
        // Each key is one order here: a key seen twice is a duplicate.
        once_each &= last_per_key.insert(record.key.clone(), n).is_none();
    }
    Ok(Run {
        orders: read.len(),
        per_second,
        enriched,
        once_each,
        call_latency,
        commits: (commit_count, commit_seconds),
        peak_concurrent_calls: service.take_peak(),
    })
}

/// Runs both topologies against one service; `sync_orders` and
/// `async_orders` are how many orders each reads.
pub fn run(
    latency: Duration,
    sync_orders: usize,
    async_orders: usize,
) -> Result<Summary, BoxError> {
    let service = CustomerService::start(latency)?;
    let cluster = Cluster::start(true)?;
    println!(
        "Kafka at {}; customer service at http://{} answering after {} ms; 1 stream thread, {PARTITIONS} partitions",
        cluster.bootstrap_servers(),
        service.address,
        latency.as_millis()
    );
    let address = service.address;
    let sync = run_one(
        &cluster,
        &service.calls,
        "enrich-sync",
        sync_orders,
        |i, o| Ok(sync_topology(i, o, address)?),
    )?;
    println!(
        "sync  (map_values):       {:>6} orders, {:>8.1} records/s (ceiling 1/latency = {:.1}); at most {} call(s) at once",
        sync.orders,
        sync.per_second,
        1.0 / latency.as_secs_f64(),
        sync.peak_concurrent_calls
    );
    let asynchronous = run_one(
        &cluster,
        &service.calls,
        "enrich-async",
        async_orders,
        |i, o| async_topology(i, o, address),
    )?;
    let in_flight_bound = (PARTITIONS as usize * kstreams::runtime::DEFAULT_MAX_IN_FLIGHT_PER_TASK)
        .min(kstreams::runtime::DEFAULT_MAX_IN_FLIGHT_PER_THREAD);
    let ceiling = in_flight_bound as f64 / latency.as_secs_f64();
    println!(
        "async (map_values_async): {:>6} orders, {:>8.1} records/s (ceiling {in_flight_bound} in flight / latency = {ceiling:.0}: {:.0}%); mean call {:.1} ms",
        asynchronous.orders,
        asynchronous.per_second,
        100.0 * asynchronous.per_second / ceiling,
        asynchronous.call_latency.unwrap_or_default().as_secs_f64() * 1000.0
    );
    println!(
        "async: at most {} calls at once (bound {in_flight_bound})",
        asynchronous.peak_concurrent_calls
    );
    let (commits, commit_seconds) = asynchronous.commits;
    println!(
        "async: {commits} commits, {:.1} ms each on average, {:.2} s in all",
        commit_seconds * 1000.0 / commits.max(1) as f64,
        commit_seconds
    );
    println!(
        "async / sync: {:.0}x; every order enriched once: sync {}, async {}",
        asynchronous.per_second / sync.per_second.max(1e-9),
        sync.once_each && sync.enriched == sync.orders,
        asynchronous.once_each && asynchronous.enriched == asynchronous.orders
    );
    Ok(Summary {
        latency,
        sync,
        asynchronous,
        in_flight_bound,
    })
}

fn env_number(name: &str, default: u64) -> Result<u64, BoxError> {
    match std::env::var(name) {
        Ok(v) => v.parse().map_err(|e| format!("{name}={v}: {e}").into()),
        Err(_) => Ok(default),
    }
}

fn main() -> Result<(), BoxError> {
    env_logger::init();
    let latency = Duration::from_millis(env_number("SLOW_SERVICE_LATENCY_MS", 50)?);
    let sync_orders = env_number("SYNC_ORDERS", 100)? as usize;
    let async_orders = env_number("ASYNC_ORDERS", 10_000)? as usize;
    run(latency, sync_orders, async_orders).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn async_enrichment_overlaps_calls_and_enriches_every_order_once() {
        let summary = super::run(Duration::from_millis(50), 20, 1_000).unwrap();
        for run in [&summary.sync, &summary.asynchronous] {
            assert_eq!(run.enriched, run.orders, "{summary:?}");
            assert!(run.once_each, "{summary:?}");
        }
        assert_eq!(summary.asynchronous.orders, 1_000, "{summary:?}");
        // The service counts the calls it answers at once: map_values makes
        // one at a time; map_values_async overlaps them, within the thread's
        // in-flight bound. Counted, not timed, so a slow machine cannot
        // fail it.
        assert_eq!(summary.sync.peak_concurrent_calls, 1, "{summary:?}");
        assert!(
            summary.asynchronous.peak_concurrent_calls > 1,
            "{summary:?}"
        );
        assert!(
            summary.asynchronous.peak_concurrent_calls <= summary.in_flight_bound,
            "{summary:?}"
        );
    }
}
