//! The `TopologyTestDriver` configured as the application is (issue 49):
//! from its `StreamsConfig`, its properties or its `.properties` file, as
//! Kafka Streams' `TopologyTestDriver(topology, properties)`. What the
//! configuration says reaches the tasks (application id, exception
//! handler, dead-letter queue), the driver's two keys are defaulted, and a
//! bad file is an error naming its line.

use kstreams_dsl::{Materialized, Produced, StreamsBuilder, Topology};
use kstreams_record::{BytesSerde, I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::StreamsConfig;
use kstreams_runtime::TopologyTestDriver;

type S = String;

/// Sums values per key; values are 8-byte longs, so a short value does not
/// deserialize.
fn summing() -> Topology {
    let b = StreamsBuilder::new();
    b.stream_with::<S, i64>(
        "amounts",
        kstreams_dsl::Consumed::with(StringSerde, I64Serde),
    )
    .group_by_key()
    .reduce_with(|a, b| a + b, None, Materialized::as_("sums"))
    .to_stream()
    .to_with("totals", Produced::with(StringSerde, Nullable(I64Serde)));
    b.build().unwrap()
}

/// Pipes two good amounts and a bad one between them; returns the totals.
fn run(driver: &TopologyTestDriver) -> Vec<(S, Option<i64>)> {
    let good = driver.create_input_topic("amounts", StringSerde, I64Serde);
    let bad = driver.create_input_topic("amounts", StringSerde, StringSerde);
    good.pipe_input("k".to_string(), 5);
    let result = bad.try_pipe_input("k".to_string(), "five".to_string());
    assert!(
        result.is_ok(),
        "the configured handler skips it: {result:?}"
    );
    good.pipe_input("k".to_string(), 7);
    driver
        .create_output_topic("totals", StringSerde, Nullable(I64Serde))
        .read_key_values_to_list()
}

const JAVA_PROPERTIES: &str = "\
# a Kafka Streams application's streams.properties
application.id=payments
bootstrap.servers=kafka-1:9092,kafka-2:9092
default.deserialization.exception.handler=org.apache.kafka.streams.errors.LogAndContinueExceptionHandler
errors.dead.letter.queue.topic.name=payments-dlq
statestore.cache.max.bytes=0
";

#[test]
fn a_java_properties_file_configures_the_driver_as_it_configures_the_application() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.properties");
    std::fs::write(&path, JAVA_PROPERTIES).unwrap();
    let driver = TopologyTestDriver::from_properties_file(summing(), &path).unwrap();
    assert_eq!(driver.application_id(), "payments");
    assert_eq!(
        run(&driver),
        vec![("k".to_string(), Some(5)), ("k".to_string(), Some(12))]
    );
    assert_eq!(driver.dropped_records(), 1);
    // The bad record went to the dead-letter queue, the store's changelog
    // is named after the application id.
    let dlq = driver.create_output_topic("payments-dlq", StringSerde, BytesSerde);
    let dead = dlq.read_records_to_list();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].value, b"five".to_vec());
    assert!(driver
        .produced_topic_names()
        .contains("payments-sums-changelog"));
    assert_eq!(
        driver.state_store_names().into_iter().collect::<Vec<_>>(),
        vec!["sums".to_string()]
    );
}

#[test]
fn the_same_configuration_from_a_streams_config_and_from_properties() {
    let config = StreamsConfig::from_properties_str(JAVA_PROPERTIES).unwrap();
    let driver = TopologyTestDriver::with_streams_config(summing(), &config, 0).unwrap();
    assert_eq!(
        run(&driver),
        vec![("k".to_string(), Some(5)), ("k".to_string(), Some(12))]
    );

    // Neither application.id nor bootstrap.servers is needed: the driver
    // defaults them as Kafka Streams' does.
    let driver = TopologyTestDriver::from_properties(
        summing(),
        [(
            "default.deserialization.exception.handler",
            "LogAndContinueExceptionHandler",
        )],
    )
    .unwrap();
    assert_eq!(
        driver.application_id(),
        kstreams_runtime::driver::DEFAULT_APPLICATION_ID
    );
    assert_eq!(
        run(&driver),
        vec![("k".to_string(), Some(5)), ("k".to_string(), Some(12))]
    );

    // Without the handler the default fails the bad record, as the
    // application would.
    let driver = TopologyTestDriver::from_properties(summing(), [] as [(&str, &str); 0]).unwrap();
    let bad = driver.create_input_topic("amounts", StringSerde, StringSerde);
    assert!(bad
        .try_pipe_input("k".to_string(), "five".to_string())
        .is_err());
}

#[test]
fn a_bad_configuration_is_an_error_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.properties");
    std::fs::write(&path, "application.id=payments\nnum.stream.threads=two\n").unwrap();
    let err = TopologyTestDriver::from_properties_file(summing(), &path)
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(
        text.contains("streams.properties:2") && text.contains("num.stream.threads"),
        "{text}"
    );

    // A handler named by a class nothing registered.
    let err = TopologyTestDriver::from_properties(
        summing(),
        [(
            "default.deserialization.exception.handler",
            "com.example.PoisonPillRouter",
        )],
    )
    .err()
    .expect("refused");
    assert!(
        err.to_string().contains("com.example.PoisonPillRouter"),
        "{err}"
    );
}

/// The sum of `def`'s samples of the driver's task 0_0 (and `store`, if
/// given).
fn task_metric(
    driver: &TopologyTestDriver,
    def: &kstreams_metrics::names::MetricDef,
    store: Option<&str>,
) -> f64 {
    driver
        .metrics()
        .samples(def)
        .iter()
        .filter(|s| s.label("task_id") == Some("0_0"))
        .filter(|s| store.is_none_or(|name| s.label("store") == Some(name)))
        .map(|s| s.value)
        .sum()
}

#[test]
fn the_driver_records_the_tasks_and_stores_metrics_at_the_configured_level() {
    use kstreams_metrics::names::{
        STATE_PUT_LATENCY, TASK_DROPPED_RECORDS_TOTAL, TASK_PROCESS_TOTAL,
    };

    let handler = (
        "default.deserialization.exception.handler",
        "LogAndContinueExceptionHandler",
    );
    let driver = TopologyTestDriver::from_properties(
        summing(),
        [handler, ("metrics.recording.level", "DEBUG")],
    )
    .unwrap();
    run(&driver);
    assert_eq!(task_metric(&driver, &TASK_PROCESS_TOTAL, None), 2.0);
    assert_eq!(task_metric(&driver, &TASK_DROPPED_RECORDS_TOTAL, None), 1.0);
    // Store metrics are DEBUG in Kafka Streams: two puts into "sums".
    assert_eq!(task_metric(&driver, &STATE_PUT_LATENCY, Some("sums")), 2.0);
    assert!(driver
        .metrics()
        .samples(&TASK_PROCESS_TOTAL)
        .iter()
        .all(|s| s.label("thread_id") == Some(kstreams_runtime::driver::DRIVER_THREAD_ID)));

    // At the default level (INFO) the task counts, the stores do not.
    let driver = TopologyTestDriver::from_properties(summing(), [handler]).unwrap();
    run(&driver);
    assert_eq!(task_metric(&driver, &TASK_PROCESS_TOTAL, None), 2.0);
    assert_eq!(task_metric(&driver, &STATE_PUT_LATENCY, Some("sums")), 0.0);
}
