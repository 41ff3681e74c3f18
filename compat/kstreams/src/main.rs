//! The kstreams twin of compat/'s Kafka Streams reference apps.
//!
//! ```text
//! kstreams-compat run <scenario> --bootstrap B --app-id A --input I --output O
//!                     [--state-dir DIR] [--describe-to FILE]
//!                     [--cache-max-bytes N] [--dlq TOPIC] [--consumed-to FILE]
//! kstreams-compat supported
//! ```
//!
//! Runs the scenario's topology until SIGTERM or SIGINT, then closes the
//! application cleanly (a final commit). `cargo xtask compat --side kstreams`
//! starts it, waits from the outside until its group has committed the end
//! of its input, stops it and diffs its output against the expected one and
//! against Apache Kafka Streams'.
//!
//! Each topology mirrors compat/src/main/java/dev/kstreams/compat/Scenarios.java
//! operator for operator, in the same order and with the same explicit
//! names, so that both sides' `describe()` texts are equal. The topologies
//! live by kind: [`stateless`], [`aggregations`], [`windows`], [`joins`]
//! and [`processors`] (the Processor API).

#![forbid(unsafe_code)]

mod aggregations;
mod consumed;
mod handlers;
mod joins;
mod processors;
mod stateless;
mod windows;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kstreams::prelude::*;

/// Mirrors `Scenarios.FILTER_CHAR` of the Java side.
const FILTER_CHAR: char = 'a';

/// Mirrors `Scenarios.WINDOW_SIZE` and `Scenarios.WINDOW_GRACE`.
const WINDOW_SIZE: Duration = Duration::from_secs(10);
const WINDOW_GRACE: Duration = Duration::from_secs(5);
/// Mirrors `Scenarios.JOIN_DIFFERENCE` and `Scenarios.JOIN_GRACE`
/// (stream-stream-join and stream-stream-outer-join).
const JOIN_DIFFERENCE: Duration = Duration::from_secs(3);
const JOIN_GRACE: Duration = Duration::from_secs(2);
/// Mirrors `Scenarios.COGROUP_LEFT_STEP` and `Scenarios.COGROUP_RIGHT_STEP`:
/// what a left and a right record add to the key's cogroup total, so that
/// the output tells the two inputs' contributions apart.
const COGROUP_LEFT_STEP: i64 = 1;
const COGROUP_RIGHT_STEP: i64 = 1000;
/// Mirrors `Scenarios.SESSION_GAP` and `Scenarios.SESSION_GRACE`: the
/// inactivity gap that ends a session, and the grace period.
const SESSION_GAP: Duration = Duration::from_secs(5);
const SESSION_GRACE: Duration = Duration::from_secs(2);
/// Mirrors `Scenarios.SLIDING_DIFFERENCE` and `Scenarios.SLIDING_GRACE`;
/// the difference is also the window size the output key serde is told.
const SLIDING_DIFFERENCE: Duration = Duration::from_secs(5);
const SLIDING_GRACE: Duration = Duration::from_secs(2);
/// Mirrors `Scenarios.SUPPRESS_TIME_LIMIT` and
/// `Scenarios.SUPPRESS_MAX_RECORDS`: how long (stream time) each key's
/// latest count is held, for at most this many keys.
const SUPPRESS_TIME_LIMIT: Duration = Duration::from_secs(5);
const SUPPRESS_MAX_RECORDS: u64 = 1000;
/// Mirrors `Scenarios.VERSIONED_STORE`, `Scenarios.VERSIONED_HISTORY` and
/// `Scenarios.VERSIONED_JOIN_GRACE`: the customers table's versioned store,
/// its history retention, and how long (stream time) the join holds each
/// order back.
const VERSIONED_STORE: &str = "customers-versioned";
const VERSIONED_HISTORY: Duration = Duration::from_secs(5 * 60);
const VERSIONED_JOIN_GRACE: Duration = Duration::from_secs(3);
/// Mirrors `Scenarios.PUNCTUATED_STORE` and `Scenarios.PUNCTUATE_INTERVAL`:
/// punctuation's store, and how often (stream time) every count goes out.
const PUNCTUATED_STORE: &str = "punctuated-counts";
const PUNCTUATE_INTERVAL: Duration = Duration::from_secs(10);
/// Mirrors `Scenarios.FK_JOIN_NAME`, `Scenarios.FK_JOIN_STORE` and
/// `Scenarios.NO_CUSTOMER`: foreign-key-join-options' join name (its
/// internal topics and subscription store), its result store, and the
/// order value that names no customer.
const FK_JOIN_NAME: &str = "orders-with-customers";
const FK_JOIN_STORE: &str = "orders-with-customers-store";
const NO_CUSTOMER: &str = "none";

/// The scenarios this side can run: all of them.
const SUPPORTED: &[&str] = &[
    "wordcount",
    "filter-map",
    "windowed-count",
    "windowed-count-histogram",
    "session-windows",
    "table-aggregate",
    "stream-table-join",
    "table-table-join",
    "table-table-outer-join",
    "stream-stream-join",
    "cogroup",
    "sliding-windows",
    "foreign-key-join",
    "foreign-key-join-options",
    "global-table-join",
    "suppress-time-limit",
    "versioned-join-grace",
    "table-table-join-cached",
    "punctuation",
    "dead-letter-queue",
    "processing-dead-letters",
    "branch-merge",
    "stream-stream-outer-join",
    "session-suppress",
    "custom-partitioner",
    "processing-handler-by-type",
    "global-table-join-named",
    "suppress-logging-disabled",
    "table-table-join-materialized",
];

fn main() -> ExitCode {
    // windowed-count, session-windows and sliding-windows drop late records
    // on purpose; each draws a warning.
    env_logger::Builder::from_env(
        env_logger::Env::default().default_filter_or("warn,kstreams_dsl::windowed=error"),
    )
    .init();
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kstreams-compat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The topology of a scenario; the same operators, in the same order, as
/// compat/src/main/java/dev/kstreams/compat/Scenarios.java.
fn topology(scenario: &str, input: &str, output: &str) -> Result<Topology, String> {
    let builder = StreamsBuilder::new();
    let two = || two_topics(scenario, input);
    match scenario {
        "filter-map" => stateless::filter_map(&builder, input, output),
        "dead-letter-queue" => stateless::dead_letter_queue(&builder, input, output),
        "processing-dead-letters" => stateless::processing_dead_letters(&builder, input, output),
        "branch-merge" => stateless::branch_merge(&builder, input, output),
        "custom-partitioner" => stateless::custom_partitioner(&builder, input, output),
        "processing-handler-by-type" => {
            handlers::processing_handler_by_type(&builder, input, output)
        }
        "wordcount" => aggregations::wordcount(&builder, input, output),
        "table-aggregate" => aggregations::table_aggregate(&builder, input, output),
        "cogroup" => aggregations::cogroup(&builder, two()?, output),
        "suppress-time-limit" => aggregations::suppress_time_limit(&builder, input, output),
        "suppress-logging-disabled" => {
            aggregations::suppress_logging_disabled(&builder, input, output)
        }
        "windowed-count" => windows::windowed_count(&builder, input, output),
        "windowed-count-histogram" => windows::windowed_count_histogram(&builder, input, output),
        "session-windows" => windows::session_windows(&builder, input, output),
        "session-suppress" => windows::session_suppress(&builder, input, output),
        "sliding-windows" => windows::sliding_windows(&builder, input, output),
        "stream-table-join" => joins::stream_table_join(&builder, two()?, output),
        // The cached variant differs only in its config (--cache-max-bytes).
        "table-table-join" | "table-table-join-cached" => {
            joins::table_table_join(&builder, two()?, output)
        }
        "table-table-outer-join" => joins::table_table_outer_join(&builder, two()?, output),
        "table-table-join-materialized" => {
            joins::table_table_join_materialized(&builder, two()?, output)
        }
        "stream-stream-join" => joins::stream_stream_join(&builder, two()?, output),
        "stream-stream-outer-join" => joins::stream_stream_outer_join(&builder, two()?, output),
        "foreign-key-join" => joins::foreign_key_join(&builder, two()?, output),
        "foreign-key-join-options" => joins::foreign_key_join_options(&builder, two()?, output),
        "global-table-join" => joins::global_table_join(&builder, two()?, output),
        "global-table-join-named" => joins::global_table_join_named(&builder, two()?, output),
        "versioned-join-grace" => joins::versioned_join_grace(&builder, two()?, output),
        "punctuation" => processors::punctuation(&builder, input, output),
        other => {
            return Err(format!(
                "unknown scenario {other} ({})",
                SUPPORTED.join(", ")
            ))
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// The two input topics of a scenario that reads two, given as
/// `--input FIRST,SECOND` (Java's `Scenarios.inputs`).
fn two_topics<'a>(scenario: &str, input: &'a str) -> Result<(&'a str, &'a str), String> {
    input
        .split_once(',')
        .ok_or_else(|| format!("{scenario} reads two topics, --input FIRST,SECOND; got {input}"))
}

fn run(args: Vec<String>) -> Result<(), Box<dyn std::error::Error>> {
    let (command, rest) = args
        .split_first()
        .ok_or("usage: kstreams-compat run <scenario> --bootstrap B ... | supported")?;
    if command == "supported" {
        println!("{}", SUPPORTED.join(" "));
        return Ok(());
    }
    if command != "run" {
        return Err(format!("unknown command {command} (run, supported)").into());
    }
    let (scenario, rest) = rest.split_first().ok_or("name a scenario")?;
    let options = options(rest)?;
    let required = |key: &str| {
        options
            .get(key)
            .cloned()
            .ok_or_else(|| format!("--{key} is required"))
    };
    let (bootstrap, app_id) = (required("bootstrap")?, required("app-id")?);
    let input = required("input")?;
    let topology = topology(scenario, &input, &required("output")?)?;
    if let Some(path) = options.get("describe-to") {
        std::fs::write(path, topology.describe().to_string())?;
    }
    // As the Java side (RunApp.config): no record cache unless
    // --cache-max-bytes asks for one (table-table-join-cached), so every
    // update is forwarded; one thread (the default); a short commit interval.
    let mut config =
        StreamsConfig::new(app_id, bootstrap).commit_interval(Duration::from_millis(100));
    let cache_max_bytes = options.get("cache-max-bytes").map_or("0", String::as_str);
    config.set("statestore.cache.max.bytes", cache_max_bytes)?;
    if let Some(dir) = options.get("state-dir") {
        config = config.state_dir(dir);
    }
    // As the Java side: the generators stamp their records in 2023, so
    // with the default extra day the broker's cleaner would delete a
    // windowed changelog's records while the run compares them.
    config.set(
        "windowstore.changelog.additional.retention.ms",
        &(100i64 * 365 * 24 * 60 * 60 * 1000).to_string(),
    )?;
    // A killed migration runs both sides under exactly_once_v2.
    if let Some(guarantee) = options.get("processing-guarantee") {
        config.set("processing.guarantee", guarantee)?;
    }
    // A mixed group (Kafka Streams and kstreams sharing one streams group):
    // the streams protocol, and each side's endpoint names it.
    if let Some(protocol) = options.get("group-protocol") {
        config.set("group.protocol", protocol)?;
    }
    if let Some(server) = options.get("application-server") {
        config.set("application.server", server)?;
    }
    if let Some(idle) = options.get("max-task-idle-ms") {
        config.set("max.task.idle.ms", idle)?;
    }
    // dead-letter-queue and processing-dead-letters: a record whose value
    // does not deserialize, or that a processor fails on, is logged,
    // skipped and written to the DLQ topic instead of stopping the
    // application, as Java's LogAndContinueExceptionHandler and
    // LogAndContinueProcessingExceptionHandler with
    // errors.dead.letter.queue.topic.name.
    if let Some(topic) = options.get("dlq") {
        config = config
            .dead_letter_queue(topic)
            .deserialization_handling(DeserializationHandling::LogAndContinue)
            .processing_handling(ProcessingHandling::Continue);
        // processing-handler-by-type: the application's own processing
        // handler, by name, as the Java side's properties name its class.
        if scenario == "processing-handler-by-type" {
            config = handlers::with_handler(config, topic)?;
        }
    }
    let mut app = KafkaStreams::new(topology, config);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let mut consumed = options
        .get("consumed-to")
        .map(|file| consumed::ConsumedCounts::new(file.into(), &input));
    app.start()?;
    while !stop.load(Ordering::Relaxed) && app.state() != State::Error {
        if let Some(consumed) = consumed.as_mut() {
            consumed.update(app.metrics())?;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(consumed) = consumed.as_mut() {
        consumed.update(app.metrics())?;
    }
    let closed = app.close(Duration::from_secs(30));
    if app.state() == State::Error || !closed {
        let errors = app.errors();
        return Err(
            format!("the application failed: {errors:?} (closed in time: {closed})").into(),
        );
    }
    Ok(())
}

/// `--key value` pairs.
fn options(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut options = HashMap::new();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let key = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("expected --option, got {flag}"))?;
        let value = args
            .next()
            .ok_or_else(|| format!("--{key} needs a value"))?;
        options.insert(key.to_string(), value.clone());
    }
    Ok(options)
}
