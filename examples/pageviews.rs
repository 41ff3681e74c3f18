//! Page views, end to end on Kafka with no broker to install.
//!
//! Starts librdkafka's in-process mock cluster, produces a sample of page
//! view events (JSON), runs a kstreams application that drops bot traffic,
//! keys each view by page, routes checkout pages to their own topic and
//! counts the views of each page (a repartition topic and a store with its
//! changelog), then reads the output topics, prints them and shuts down
//! cleanly.
//!
//! ```text
//! cargo run -p kstreams-examples --example pageviews
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::{ClientConfig, Message};
use kstreams::http::{HttpServer, RestoreProgressBars};
use kstreams::otlp::OtlpTracing;
use kstreams::prelude::*;
use serde::{Deserialize, Serialize};

/// One page view, as the web tier writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PageView {
    user: String,
    page: String,
    user_agent: String,
    millis_on_page: u32,
}

const VIEWS: &str = "page-views";
const CHECKOUT: &str = "checkout-views";
const BROWSE: &str = "browse-views";
const COUNTS: &str = "views-per-page";
const APP: &str = "pageviews-example";

/// The application: the part a real service would deploy.
fn topology() -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    let views = builder
        .stream_with(
            VIEWS,
            Consumed::with(StringSerde, JsonSerde::<PageView>::new()),
        )
        .filter_not_named(|_, v| v.user_agent.contains("bot"), "drop-bots")
        .select_key_named(|_, v| v.page.clone(), "key-by-page");
    // The key changed: the count goes through `<app>-by-page-repartition`
    // so that each page is counted by one task.
    views
        .group_by_key_with(Grouped::as_("by-page"))
        .count_with(None, Materialized::as_("page-counts"))
        .to_stream()
        .to_with(COUNTS, Produced::with(StringSerde, Nullable(I64Serde)));
    let branches = views
        .split_named("pages-")
        .branch(
            |page, _| page.starts_with("/checkout"),
            Branched::named("checkout"),
        )
        .default_branch(Branched::named("browse"));
    let json = || Produced::with(StringSerde, JsonSerde::<PageView>::new());
    branches["pages-checkout"].to_with(CHECKOUT, json());
    branches["pages-browse"]
        .map_values(|mut v| {
            v.user = v.user.to_uppercase();
            v
        })
        .to_with(BROWSE, json());
    builder.build()
}

fn sample_views() -> Vec<PageView> {
    let pages = [
        "/home",
        "/search",
        "/checkout/cart",
        "/item/42",
        "/checkout/pay",
    ];
    let agents = ["firefox", "googlebot", "safari", "chrome"];
    (0..40)
        .map(|i| PageView {
            user: format!("user-{}", i % 7),
            page: pages[i % pages.len()].to_string(),
            user_agent: agents[i % agents.len()].to_string(),
            millis_on_page: 300 + (i as u32 * 37) % 900,
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let kafka = EmbeddedKafka::start(1)?;
    // The mock cluster does not create topics through the admin API, so
    // the application's internal topics are made here too.
    let repartition = format!("{APP}-by-page-repartition");
    let changelog = format!("{APP}-page-counts-changelog");
    for topic in [VIEWS, CHECKOUT, BROWSE, COUNTS, &repartition, &changelog] {
        kafka.create_topic(topic, 3, 1)?;
    }
    let bootstrap = kafka.bootstrap_servers();
    println!("embedded Kafka (librdkafka mock cluster) at {bootstrap}");

    let views = sample_views();
    let expected = views
        .iter()
        .filter(|v| !v.user_agent.contains("bot"))
        .count();
    produce(&bootstrap, &views)?;
    println!("produced {} page views to {VIEWS}", views.len());

    let topology = topology()?;
    println!("{}", topology.describe());
    let state_dir = std::env::temp_dir().join(format!("{APP}-{}", std::process::id()));
    let config = StreamsConfig::new(APP, &bootstrap)
        .commit_interval(Duration::from_millis(200))
        .state_dir(&state_dir);
    // OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 traces every record
    // (a `kstreams.process` span per task, W3C traceparent on the outputs)
    // and exports the spans there over OTLP/HTTP (Jaeger, a collector).
    let otlp = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) => {
            let otlp = OtlpTracing::builder()
                .endpoint(endpoint.as_str())
                .service_name(APP)
                .build()?;
            otlp.install()?;
            println!("tracing every record; spans go to {endpoint} (OTLP/HTTP)");
            Some(otlp)
        }
        Err(_) => None,
    };
    let config = match &otlp {
        Some(_) => config.tracing(kstreams::runtime::TracingConfig::enabled()),
        None => config,
    };
    let mut app = KafkaStreams::new(topology, config);
    app.set_state_listener(|new, old| println!("state: {old:?} -> {new:?}"));
    // A restore of 10,000 records or more (a rerun on a long changelog)
    // draws a progress bar with its rate and time left.
    app.set_global_state_restore_listener(Arc::new(RestoreProgressBars::new()))?;
    // KSTREAMS_HTTP_ADDR=127.0.0.1:9464 serves /metrics, /health/live,
    // /health/ready, /topology(.dot|.svg) and /state while the example runs;
    // started before the app, so a probe sees it become ready.
    let server = match std::env::var("KSTREAMS_HTTP_ADDR") {
        Ok(address) => {
            let server = HttpServer::start(&app, address.as_str())?;
            let url = server.url();
            println!(
                "operate it at {url}/metrics {url}/health/ready {url}/topology.svg {url}/state"
            );
            Some(server)
        }
        Err(_) => None,
    };
    app.start()?;

    // SIGTERM or Ctrl-C ends the wait early; the app still closes cleanly.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, interrupted.clone())?;
    }
    let wait = Duration::from_secs(60);
    let outputs = consume(
        &bootstrap,
        &[CHECKOUT, BROWSE],
        expected,
        wait,
        &interrupted,
    )?;
    let counts = latest_counts(&bootstrap, expected, wait, &interrupted)?;
    if interrupted.load(Ordering::Relaxed) {
        println!("interrupted: closing the application");
    }
    // A few series as a Prometheus scrape reads them.
    println!("\nmetrics (records per task, consumer lag):");
    for line in app.metrics().gather_text().lines().filter(|l| {
        l.starts_with("kstreams_task_process_total")
            || l.starts_with("kstreams_consumer_records_lag")
    }) {
        println!("  {line}");
    }
    let closed = app.close(Duration::from_secs(30));
    if let Some(otlp) = otlp {
        // The spans still batched.
        otlp.shutdown()?;
    }
    if let Some(server) = server {
        server.stop();
    }
    let _ = std::fs::remove_dir_all(&state_dir);
    for (topic, records) in &outputs {
        println!("\n{topic} ({} records):", records.len());
        for (page, view) in records {
            println!("  {page:<16} {view}");
        }
    }
    println!("\n{COUNTS} (latest count per page):");
    for (page, count) in &counts {
        println!("  {page:<16} {count}");
    }
    let counted: i64 = counts.values().sum();
    let total: usize = outputs.values().map(Vec::len).sum();
    println!("\n{total} of {} views passed the bot filter (expected {expected}), {counted} counted; closed cleanly: {closed}", views.len());
    if total != expected
        || counted != expected as i64
        || !closed
        || app.state() != State::NotRunning
    {
        return Err(format!(
            "expected {expected} outputs and a clean close, got {total} and state {:?}",
            app.state()
        )
        .into());
    }
    Ok(())
}

fn produce(bootstrap: &str, views: &[PageView]) -> Result<(), Box<dyn std::error::Error>> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    for view in views {
        let value = serde_json::to_vec(view)?;
        producer
            .send(
                BaseRecord::to(VIEWS)
                    .key(view.user.as_bytes())
                    .payload(&value),
            )
            .map_err(|(e, _)| e)?;
    }
    producer.flush(Duration::from_secs(10))?;
    Ok(())
}

type Outputs = BTreeMap<String, Vec<(String, String)>>;

/// The latest count per page on the counts topic, read until the counts
/// add up to `expected` (the cache sends the counts at each commit).
fn latest_counts(
    bootstrap: &str,
    expected: usize,
    timeout: Duration,
    interrupted: &AtomicBool,
) -> Result<BTreeMap<String, i64>, Box<dyn std::error::Error>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pageviews-example-counts-reader")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(&[COUNTS])?;
    let mut counts = BTreeMap::new();
    let deadline = Instant::now() + timeout;
    while counts.values().sum::<i64>() < expected as i64
        && Instant::now() < deadline
        && !interrupted.load(Ordering::Relaxed)
    {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message?;
            let page = String::from_utf8_lossy(message.key().unwrap_or_default()).to_string();
            let count = match message.payload() {
                Some(bytes) => i64::from_be_bytes(bytes.try_into()?),
                None => 0,
            };
            counts.insert(page, count);
        }
    }
    Ok(counts)
}

fn consume(
    bootstrap: &str,
    topics: &[&str],
    expected: usize,
    timeout: Duration,
    interrupted: &AtomicBool,
) -> Result<Outputs, Box<dyn std::error::Error>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pageviews-example-reader")
        .set("auto.offset.reset", "earliest")
        .create()?;
    consumer.subscribe(topics)?;
    let mut outputs = Outputs::new();
    let deadline = Instant::now() + timeout;
    while outputs.values().map(Vec::len).sum::<usize>() < expected
        && Instant::now() < deadline
        && !interrupted.load(Ordering::Relaxed)
    {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message?;
            let key = String::from_utf8_lossy(message.key().unwrap_or_default()).to_string();
            let value = String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string();
            outputs
                .entry(message.topic().to_string())
                .or_default()
                .push((key, value));
        }
    }
    Ok(outputs)
}
