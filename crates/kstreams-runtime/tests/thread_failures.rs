//! A stream thread that dies after `start()` returned reaches the
//! uncaught-exception handler, whatever killed it, and the handler's answer
//! is carried out: on librdkafka's mock cluster.

use crate::common::{self, Input};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::StreamsBuilder;
use kstreams_embedded::EmbeddedKafka;
use kstreams_runtime::kafka::{
    KafkaStreams, RuntimeError, State, StreamThreadExceptionResponse, StreamsConfig,
};

const INPUT: &str = "input";
const OUTPUT: &str = "output";

fn cluster() -> EmbeddedKafka {
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 1, 1).unwrap();
    kafka.create_topic(OUTPUT, 1, 1).unwrap();
    kafka
}

fn produce(bootstrap: &str, values: &[String]) {
    let inputs = values
        .iter()
        .enumerate()
        .map(|(i, value)| Input::new(format!("k{i}"), value.as_str()));
    common::produce(bootstrap, INPUT, inputs);
}

/// The causes the handler was given, and what it answers: `answers` in
/// turn, the last one from then on.
fn recording_handler(
    app: &KafkaStreams,
    answers: Vec<StreamThreadExceptionResponse>,
) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    app.set_uncaught_exception_handler(move |error: &RuntimeError| {
        let mut seen = record.lock().unwrap();
        seen.push(error.to_string());
        answers[(seen.len() - 1).min(answers.len() - 1)]
    });
    seen
}

fn wait_for_error(app: &KafkaStreams) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.state() != State::Error {
        assert!(
            Instant::now() < deadline,
            "the app did not reach ERROR: {:?}, {:?}",
            app.state(),
            app.errors()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A topology whose processor fails on the value `poison`.
fn poisoned_topology() -> kstreams_dsl::Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .map_values(|v| {
            assert_ne!(v, "poison", "a poison record");
            v
        })
        .to(OUTPUT);
    builder.build().unwrap()
}

/// [`poisoned_topology`] as an application.
fn poisoned_app(bootstrap: &str, application_id: &str) -> KafkaStreams {
    // The mock cluster does not empty a group whose last member left: the
    // replacement's join waits out a rebalance of the session timeout less
    // a second (44 s at librdkafka's default), where a broker assigns at
    // once. A short session keeps that wait to 5 s.
    let config = StreamsConfig::new(application_id, bootstrap)
        .commit_interval(Duration::from_millis(100))
        .client_config("consumer.session.timeout.ms", "6000");
    KafkaStreams::new(poisoned_topology(), config)
}

#[test]
fn a_processing_error_reaches_the_handler_each_time_a_replaced_thread_meets_it() {
    let kafka = cluster();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, &["fine".into(), "poison".into()]);
    let mut app = poisoned_app(&bootstrap, "replace-app");
    let seen = recording_handler(
        &app,
        vec![
            StreamThreadExceptionResponse::ReplaceThread,
            StreamThreadExceptionResponse::ShutdownClient,
        ],
    );
    app.start().unwrap();
    wait_for_error(&app);
    // The replacement resumed from the last commit and met the record again.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|e| e.contains("a poison record")),
        "{seen:?}"
    );
    assert_eq!(app.errors(), seen);
}

#[test]
fn shutdown_application_stops_this_instance_with_an_error() {
    let kafka = cluster();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, &["poison".into()]);
    let mut app = poisoned_app(&bootstrap, "shutdown-app");
    let seen = recording_handler(
        &app,
        vec![StreamThreadExceptionResponse::ShutdownApplication],
    );
    app.start().unwrap();
    wait_for_error(&app);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// The instance stops as a whole: its other thread (it has no partition to
/// fail on) stops too, and the instance ends in ERROR.
#[test]
fn shutdown_client_stops_every_thread_of_the_instance() {
    let kafka = cluster();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, &["poison".into()]);
    let config = StreamsConfig::new("shutdown-client-two-threads", &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .num_stream_threads(2);
    let mut app = KafkaStreams::new(poisoned_topology(), config);
    let seen = recording_handler(&app, vec![StreamThreadExceptionResponse::ShutdownClient]);
    app.start().unwrap();
    wait_for_error(&app);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn a_record_the_producer_refuses_reaches_the_handler_with_its_cause() {
    let kafka = cluster();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, &["x".repeat(5_000)]);
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(INPUT).to(OUTPUT);
    let config = StreamsConfig::new("too-large-app", &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .client_config("producer.message.max.bytes", "1000");
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let seen = recording_handler(&app, vec![StreamThreadExceptionResponse::ShutdownClient]);
    app.start().unwrap();
    wait_for_error(&app);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("too large"), "{seen:?}");
}

/// Kafka Streams fails the thread with NoOffsetForPartitionException; the
/// error names the partition and the two ways out.
#[test]
fn auto_offset_reset_none_without_a_committed_offset_fails_the_thread_naming_the_partition() {
    let kafka = cluster();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, &["a".into()]);
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(INPUT).to(OUTPUT);
    let config = StreamsConfig::from_properties_str(&format!(
        "application.id=no-offset-app\nbootstrap.servers={bootstrap}\nauto.offset.reset=none\n"
    ))
    .unwrap();
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let seen = recording_handler(&app, vec![StreamThreadExceptionResponse::ShutdownClient]);
    app.start().unwrap();
    wait_for_error(&app);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [format!(
            "no committed offset for {INPUT}-0 and auto.offset.reset=none (or its source's \
             AutoOffsetReset::None); commit offsets for the group first \
             (kafka-consumer-groups.sh --reset-offsets --group <application.id>) or set \
             auto.offset.reset (or the source's policy) to earliest or latest"
        )]
    );
}
