//! Exception handlers in the TopologyTestDriver: dead-letter records
//! (KIP-1034) with the original bytes and the failure in headers, and the
//! production handler that drops records that cannot be written.

use kstreams_dsl::{Produced, StreamsBuilder, Topology};
use kstreams_record::{BytesSerde, Headers, I64Serde, Serde, SerdeError, StringSerde};
use kstreams_runtime::{
    DeserializationHandling, ProcessingHandling, ProductionHandling, TaskConfig, TopologyTestDriver,
};

fn header(headers: &Headers, name: &str) -> String {
    let value = headers
        .last(name)
        .and_then(|h| h.value.clone())
        .unwrap_or_default();
    String::from_utf8(value).unwrap()
}

fn numbers_doubled() -> Topology {
    let b = StreamsBuilder::new();
    b.stream_with::<String, i64>(
        "numbers",
        kstreams_dsl::Consumed::with(StringSerde, I64Serde),
    )
    .map_values(|n| {
        assert!(n >= 0, "negative numbers are not allowed");
        n * 2
    })
    .to_with("doubled", Produced::with(StringSerde, I64Serde));
    b.build().unwrap()
}

#[test]
fn dropped_records_go_to_the_dead_letter_queue_with_the_failure_in_headers() {
    let mut config = TaskConfig::new("app");
    config.deserialization = DeserializationHandling::LogAndContinue;
    config.processing = ProcessingHandling::Continue;
    config.dead_letter_queue = Some("dlq".to_string());
    let driver = TopologyTestDriver::with_config(numbers_doubled(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let output = driver.create_output_topic("doubled", StringSerde, I64Serde);
    let dlq = driver.create_output_topic("dlq", BytesSerde, BytesSerde);

    // Three bytes are no i64: a deserialization failure.
    input
        .try_pipe_raw(Some(b"k1".to_vec()), Some(vec![1, 2, 3]), 5)
        .unwrap();
    // A panic in the mapper: a processing failure.
    input.pipe_input_at("k2".to_string(), -1, 6);
    input.pipe_input_at("k3".to_string(), 21, 7);

    assert_eq!(
        output.read_key_values_to_list(),
        vec![("k3".to_string(), 42)]
    );
    assert_eq!(driver.dropped_records(), 2);
    let bad_bytes = dlq.read_record();
    assert_eq!(bad_bytes.key, b"k1".to_vec());
    assert_eq!(bad_bytes.value, vec![1, 2, 3]);
    assert_eq!(bad_bytes.timestamp, 5);
    assert_eq!(
        header(&bad_bytes.headers, "__streams.errors.exception"),
        "org.apache.kafka.common.errors.SerializationException"
    );
    assert_eq!(
        header(&bad_bytes.headers, "__streams.errors.topic"),
        "numbers"
    );
    assert_eq!(
        header(&bad_bytes.headers, "__streams.errors.partition"),
        "0"
    );
    assert_eq!(header(&bad_bytes.headers, "__streams.errors.offset"), "0");
    // Kafka Streams' stack trace starts with `Throwable.toString()`.
    // The message is Kafka's LongDeserializer's, as a Kafka Streams
    // application's dead letter carries it.
    let message = header(&bad_bytes.headers, "__streams.errors.message");
    assert_eq!(
        message,
        "Size of data received by LongDeserializer is not 8"
    );
    assert_eq!(
        header(&bad_bytes.headers, "__streams.errors.stacktrace"),
        format!("org.apache.kafka.common.errors.SerializationException: {message}\n")
    );

    let failed = dlq.read_record();
    assert_eq!(failed.key, b"k2".to_vec());
    assert_eq!(failed.value, (-1i64).to_be_bytes().to_vec());
    assert_eq!(
        header(&failed.headers, "__streams.errors.exception"),
        "java.lang.RuntimeException"
    );
    assert_eq!(header(&failed.headers, "__streams.errors.offset"), "1");
    assert!(
        header(&failed.headers, "__streams.errors.message").contains("negative numbers"),
        "{}",
        header(&failed.headers, "__streams.errors.message")
    );
    assert!(dlq.is_empty());
}

/// Serializes only even numbers.
struct EvenOnly;

impl Serde<i64> for EvenOnly {
    fn serialize(
        &self,
        topic: &str,
        _: &mut Headers,
        n: &i64,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        if n % 2 == 0 {
            Ok(Some(n.to_be_bytes().to_vec()))
        } else {
            Err(SerdeError::Custom {
                topic: topic.to_string(),
                message: format!("{n} is odd"),
            })
        }
    }
    fn deserialize(&self, topic: &str, h: &Headers, b: Option<&[u8]>) -> Result<i64, SerdeError> {
        I64Serde.deserialize(topic, h, b)
    }
}

#[test]
fn the_production_handler_drops_records_that_do_not_serialize_or_fails() {
    let topology = || {
        let b = StreamsBuilder::new();
        b.stream_with::<String, i64>(
            "numbers",
            kstreams_dsl::Consumed::with(StringSerde, I64Serde),
        )
        .to_with("even", Produced::with(StringSerde, EvenOnly));
        b.build().unwrap()
    };
    let mut config = TaskConfig::new("app");
    config.production = ProductionHandling::Continue;
    let driver = TopologyTestDriver::with_config(topology(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let output = driver.create_output_topic("even", StringSerde, I64Serde);
    for n in [2, 3, 4] {
        input.pipe_input("k".to_string(), n);
    }
    assert_eq!(output.read_values_to_list(), vec![2, 4]);
    assert_eq!(driver.dropped_records(), 1);

    let driver = TopologyTestDriver::with_config(topology(), TaskConfig::new("app"), 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let err = input
        .try_pipe_record(kstreams_record::Record::new("k".to_string(), 3, 0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("3 is odd"), "{err}");
}

/// Under "continue" only the output that does not serialize is dropped:
/// the record's other branches (here a sibling sink after the failing one)
/// still run, as Kafka Streams drops just that `send`. With a dead-letter
/// queue, the source record goes there with the failure in its headers.
#[test]
fn a_serialization_failure_under_continue_drops_that_output_only() {
    let b = StreamsBuilder::new();
    let numbers = b.stream_with::<String, i64>(
        "numbers",
        kstreams_dsl::Consumed::with(StringSerde, I64Serde),
    );
    numbers.to_with("even", Produced::with(StringSerde, EvenOnly));
    numbers.to_with("all", Produced::with(StringSerde, I64Serde));
    let mut config = TaskConfig::new("app");
    config.production = ProductionHandling::Continue;
    config.dead_letter_queue = Some("dlq".to_string());
    let driver = TopologyTestDriver::with_config(b.build().unwrap(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let even = driver.create_output_topic("even", StringSerde, I64Serde);
    let all = driver.create_output_topic("all", StringSerde, I64Serde);
    let dlq = driver.create_output_topic("dlq", BytesSerde, BytesSerde);
    for n in [2, 3, 4] {
        input.pipe_input("k".to_string(), n);
    }
    assert_eq!(even.read_values_to_list(), vec![2, 4]);
    assert_eq!(all.read_values_to_list(), vec![2, 3, 4]);
    assert_eq!(driver.dropped_records(), 1);
    let failed = dlq.read_records_to_list();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].value, 3i64.to_be_bytes().to_vec());
    assert_eq!(
        header(&failed[0].headers, "__streams.errors.exception"),
        "org.apache.kafka.common.errors.SerializationException"
    );
    assert!(header(&failed[0].headers, "__streams.errors.message").contains("3 is odd"));
}
