//! The application `cargo xtask dashboard` scrapes: every panel of
//! docs/grafana/kstreams.json must show data for it, so it does a little of
//! everything the dashboard watches, on librdkafka's in-process mock
//! cluster, with records flowing until its stdin closes:
//!
//! - a count per user in a RocksDB store (store put/get latency, commits);
//! - a stream-table join of the clicks with a users table, bootstrapped
//!   (read to its end before the clicks);
//! - a join with a global table of regions (loaded before the app runs);
//! - a changelog left by an earlier run, which the count store restores
//!   at start (every restoration kind shows in the restore panels);
//! - a windowed count (window store fetches), to which every 200th click
//!   comes two minutes late (lateness, dropped late records);
//! - a malformed click every second, dropped to a dead-letter queue;
//! - one user far hotter than the others, so one partition carries more.
//!
//! `cargo run -p kstreams-http --example dashboard_app -- --address
//! 127.0.0.1:9464 [--seconds N]`; it runs until stdin reaches its end (the
//! xtask holds the pipe, so the app ends with it) or N seconds have passed.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_dsl::{Consumed, Materialized, Produced, StoreType, StreamsBuilder};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::EmbeddedKafka;
use kstreams_http::{HttpServer, RestoreProgressBars};
use kstreams_metrics::RecordingLevel;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
use kstreams_runtime::DeserializationHandling;
use kstreams_time::TimeWindows;

const APP_ID: &str = "dashboard-check";
const CLICKS: &str = "clicks";
const USERS: &str = "users";
const REGIONS: &str = "regions";
/// Records of the count store's changelog left by "an earlier run".
const RESTORED_RECORDS: usize = 3_000;
/// Regions in the global table.
const REGION_COUNT: usize = 1_000;
const DLQ: &str = "clicks-dlq";
const PARTITIONS: i32 = 3;
const USER_COUNT: usize = 20;
/// Clicks per second the producer aims at.
const CLICK_RATE: u64 = 400;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    env_logger::init();
    let mut address = HttpServer::DEFAULT_ADDRESS.to_string();
    let mut limit: Option<Duration> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--address" => address = args.next().ok_or("--address needs a value")?,
            "--seconds" => {
                let seconds: u64 = args.next().ok_or("--seconds needs a value")?.parse()?;
                limit = Some(Duration::from_secs(seconds));
            }
            other => return Err(format!("unexpected argument {other}").into()),
        }
    }

    let kafka = EmbeddedKafka::start(1)?;
    // The mock cluster takes no CreateTopics with configs: every topic,
    // the changelogs included, is made here.
    for topic in [
        CLICKS,
        USERS,
        "click-counts",
        "enriched-clicks",
        "clicks-per-window",
        "regional-clicks",
        REGIONS,
        DLQ,
    ] {
        kafka.create_topic(topic, PARTITIONS, 1)?;
    }
    for store in ["clicks-per-user", "clicks-per-window", "users-table"] {
        kafka.create_topic(&format!("{APP_ID}-{store}-changelog"), PARTITIONS, 1)?;
    }
    let bootstrap = kafka.bootstrap_servers();

    preload(&bootstrap)?;

    let mut app = KafkaStreams::new(topology()?, config(&bootstrap));
    // A bar on a terminal for any restore of 10,000 records or more.
    app.set_global_state_restore_listener(Arc::new(RestoreProgressBars::new()))?;
    let server = HttpServer::start(&app, address.as_str())?;
    println!("dashboard app: metrics at {}/metrics", server.url());
    app.start()?;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = {
        let (stop, bootstrap) = (stop.clone(), bootstrap.clone());
        std::thread::spawn(move || produce_until(&bootstrap, &stop))
    };
    let stdin_closed = Arc::new(AtomicBool::new(false));
    {
        let stdin_closed = stdin_closed.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stdin_closed.store(true, Ordering::Relaxed);
        });
    }
    let started = Instant::now();
    while !stdin_closed.load(Ordering::Relaxed) && limit.is_none_or(|l| started.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    producer
        .join()
        .map_err(|_| "the producer thread panicked")??;
    server.stop();
    app.close(Duration::from_secs(30));
    Ok(())
}

fn topology() -> Result<kstreams_dsl::Topology, Box<dyn std::error::Error>> {
    let builder = StreamsBuilder::new();
    let users = builder.table_with(
        USERS,
        Consumed::with(StringSerde, StringSerde).with_bootstrap(),
        Materialized::as_("users-table"),
    );
    let regions = builder.global_table_with::<String, String>(
        REGIONS,
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("regions-table"),
    );
    let clicks = builder.stream_with(CLICKS, Consumed::with(StringSerde, StringSerde));
    clicks
        .group_by_key()
        .count_with(
            None,
            Materialized::as_("clicks-per-user").with_store_type(StoreType::RocksDb),
        )
        .to_stream()
        .to_with(
            "click-counts",
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    clicks
        .left_join(&users, |page, user| {
            format!("{page} by {}", user.map_or("?", String::as_str))
        })
        .to("enriched-clicks");
    clicks
        .left_join_global(
            &regions,
            |user: &String, _: &String| format!("region{}", user.len() % 7),
            |page, region| format!("{page} in {}", region.map_or("?", String::as_str)),
        )
        .to("regional-clicks");
    clicks
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(
            Duration::from_secs(10),
            Duration::from_secs(5),
        ))
        .count_with(None, Materialized::as_("clicks-per-window"))
        .to_stream()
        .map(|window, count| {
            (
                format!("{}@{}", window.key, window.window.start),
                count.unwrap_or(0),
            )
        })
        .to_with("clicks-per-window", Produced::with(StringSerde, I64Serde));
    Ok(builder.build()?)
}

fn config(bootstrap: &str) -> StreamsConfig {
    let state_dir = std::env::temp_dir().join(format!("kstreams-{APP_ID}-{}", std::process::id()));
    StreamsConfig::new(APP_ID, bootstrap)
        .num_stream_threads(2)
        // Commits often enough that a short scrape window sees several.
        .commit_interval(Duration::from_secs(1))
        // Process and store latencies are DEBUG metrics, as in Kafka Streams.
        .metrics_recording_level(RecordingLevel::Debug)
        .deserialization_handling(DeserializationHandling::LogAndContinue)
        .dead_letter_queue(DLQ)
        .state_dir(state_dir)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What an earlier run left, before the app starts: the users (a
/// bootstrap table), the regions (a global table) and the count store's
/// changelog (restored at start).
fn preload(bootstrap: &str) -> Result<(), String> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .map_err(|e| e.to_string())?;
    let changelog = format!("{APP_ID}-clicks-per-user-changelog");
    let mut records: Vec<(String, String, Vec<u8>)> = Vec::new();
    for user in 0..USER_COUNT {
        records.push((
            USERS.into(),
            format!("user{user}"),
            format!("User {user}").into_bytes(),
        ));
    }
    for region in 0..REGION_COUNT {
        records.push((
            REGIONS.into(),
            format!("region{region}"),
            format!("Region {region}").into_bytes(),
        ));
    }
    // Users of the earlier run, never clicking again: a timestamped
    // count (8-byte timestamp, then the count) as the store writes it.
    for i in 0..RESTORED_RECORDS {
        let value = [now_ms().to_be_bytes(), (i as i64).to_be_bytes()].concat();
        records.push((changelog.clone(), format!("earlier-user{i}"), value));
    }
    for (topic, key, value) in &records {
        let mut record = BaseRecord::to(topic)
            .key(key)
            .payload(value)
            .timestamp(now_ms());
        while let Err((_, returned)) = producer.send(record) {
            producer.poll(Duration::from_millis(10));
            record = returned;
        }
    }
    producer
        .flush(Duration::from_secs(30))
        .map_err(|e| e.to_string())
}

/// Users first, then clicks at [`CLICK_RATE`] until `stop`: half of them by
/// `user0`, every 200th two minutes old, and one malformed each second.
fn produce_until(bootstrap: &str, stop: &AtomicBool) -> Result<(), String> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .map_err(|e| e.to_string())?;
    let send = |topic: &str, key: &str, value: &[u8], timestamp: i64| {
        let mut record = BaseRecord::to(topic)
            .key(key)
            .payload(value)
            .timestamp(timestamp);
        // A full queue: serve delivery reports, then try again.
        while let Err((error, returned)) = producer.send(record) {
            if stop.load(Ordering::Relaxed) {
                return Err(error.to_string());
            }
            producer.poll(Duration::from_millis(10));
            record = returned;
        }
        Ok(())
    };
    for user in 0..USER_COUNT {
        send(
            USERS,
            &format!("user{user}"),
            format!("User {user}").as_bytes(),
            now_ms(),
        )?;
    }
    let started = Instant::now();
    let mut sent: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = started.elapsed().as_millis() as u64 * CLICK_RATE / 1000;
        while sent < due {
            let user = if sent.is_multiple_of(2) {
                0
            } else {
                (sent as usize / 2) % USER_COUNT
            };
            let timestamp = if sent.is_multiple_of(200) {
                now_ms() - 120_000
            } else {
                now_ms()
            };
            let key = format!("user{user}");
            if sent % CLICK_RATE == 1 {
                // Not UTF-8: the String serde refuses it.
                send(CLICKS, &key, &[0xff, 0xfe, 0xfd], timestamp)?;
            } else {
                send(
                    CLICKS,
                    &key,
                    format!("/page/{}", sent % 7).as_bytes(),
                    timestamp,
                )?;
            }
            sent += 1;
        }
        producer.poll(Duration::from_millis(10));
    }
    producer
        .flush(Duration::from_secs(10))
        .map_err(|e| e.to_string())
}
