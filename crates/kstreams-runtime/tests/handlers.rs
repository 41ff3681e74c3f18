//! Exception handlers in the TopologyTestDriver: dead-letter records
//! (KIP-1034) with the original bytes and the failure in headers, the
//! production handler that drops records that cannot be written, and
//! handlers of the application's own deciding by the error and its context.

use kstreams_dsl::{
    Processor, ProcessorContext, ProcessorError, Produced, StreamsBuilder, StreamsError, Topology,
};
use kstreams_record::{BytesSerde, Headers, I64Serde, Record, Serde, SerdeError, StringSerde};
use kstreams_runtime::handlers::{
    DeadLetterRecord, DeserializationExceptionHandler, ErrorHandlerContext,
    ProcessingExceptionHandler, ProductionError, ProductionExceptionHandler, ProductionResponse,
    RefusedRecord, Response, SerializationExceptionOrigin,
};
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

/// A production handler of the application's own: an odd value that does
/// not serialize goes, as text, to "odd" and processing goes on; it records
/// what it saw of each failure.
struct OddAside(Calls);

impl ProductionExceptionHandler for OddAside {
    fn handle_error(
        &self,
        _: &ErrorHandlerContext<'_>,
        _: &RefusedRecord<'_>,
        _: &ProductionError,
    ) -> ProductionResponse {
        ProductionResponse::fail()
    }

    fn handle_serialization_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        error: &StreamsError,
        origin: SerializationExceptionOrigin,
    ) -> ProductionResponse {
        self.0.lock().unwrap().push(format!(
            "{origin:?} {:?} {} {} {:?}",
            context.topic, context.offset, context.processor_node_id, context.source_raw_value
        ));
        let StreamsError::Serialization { topic, .. } = error else {
            return ProductionResponse::fail();
        };
        ProductionResponse::resume_with(vec![DeadLetterRecord {
            topic: "odd".to_string(),
            partition: None,
            key: context.source_raw_key.map(<[u8]>::to_vec),
            value: Some(format!("not for {topic}").into_bytes()),
            timestamp: context.timestamp,
            headers: Headers::new(),
        }])
    }
}

#[test]
fn a_production_handler_of_ones_own_decides_about_outputs_that_do_not_serialize() {
    let b = StreamsBuilder::new();
    let numbers = b.stream_with::<String, i64>(
        "numbers",
        kstreams_dsl::Consumed::with(StringSerde, I64Serde),
    );
    numbers.to_with("even", Produced::with(StringSerde, EvenOnly));
    numbers.to_with("all", Produced::with(StringSerde, I64Serde));
    let calls = Calls::default();
    let mut config = TaskConfig::new("app");
    config.production_handler = Some(std::sync::Arc::new(OddAside(calls.clone())));
    let driver = TopologyTestDriver::with_config(b.build().unwrap(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let even = driver.create_output_topic("even", StringSerde, I64Serde);
    let all = driver.create_output_topic("all", StringSerde, I64Serde);
    let odd = driver.create_output_topic("odd", StringSerde, StringSerde);
    for n in [2, 3, 4] {
        input.pipe_input("k".to_string(), n);
    }
    assert_eq!(even.read_values_to_list(), vec![2, 4]);
    // The record goes on to the sink after the one that failed.
    assert_eq!(all.read_values_to_list(), vec![2, 3, 4]);
    assert_eq!(
        odd.read_key_values_to_list(),
        vec![("k".to_string(), "not for even".to_string())]
    );
    assert_eq!(driver.dropped_records(), 1);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].starts_with("Value Some(\"numbers\") 1 KSTREAM-SINK-"),
        "{calls:?}"
    );
    assert!(
        calls[0].ends_with(&format!("{:?}", Some(3i64.to_be_bytes().as_slice()))),
        "{calls:?}"
    );
}

/// What a handler of the application's own saw, per call.
type Calls = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// Dead-letters a processor's error to "rejected" and resumes; fails on
/// a panic. Records each context it sees.
struct ByErrorType(Calls);

impl ProcessingExceptionHandler for ByErrorType {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        self.0.lock().unwrap().push(format!(
            "{:?} {} {} {} {} {:?} {:?}",
            context.topic,
            context.partition,
            context.offset,
            context.processor_node_id,
            context.timestamp,
            context.source_raw_key,
            context.source_raw_value,
        ));
        match error {
            StreamsError::Processing { .. } => {
                let mut record = DeadLetterRecord::for_error("rejected", context, error);
                record.headers.add("reason", Some(b"rejected".to_vec()));
                Response::resume_with(vec![record])
            }
            _ => Response::fail(),
        }
    }
}

/// Numbers; a processor rejects odd ones with an error and panics on
/// negative ones.
fn numbers_checked() -> Topology {
    let mut topology = Topology::new();
    topology
        .add_source("numbers", &["numbers"], StringSerde, I64Serde)
        .unwrap()
        .add_processor("check", || Checker, &["numbers"])
        .unwrap()
        .add_sink("out", "checked", StringSerde, I64Serde, &["check"])
        .unwrap();
    topology
}

struct Checker;

impl Processor<String, i64, String, i64> for Checker {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, i64>,
        record: Record<String, i64>,
    ) -> Result<(), ProcessorError> {
        assert!(record.value >= 0, "negative");
        if record.value % 2 == 1 {
            return Err(format!("odd number {}", record.value).into());
        }
        ctx.forward(record)?;
        Ok(())
    }
}

#[test]
fn a_processing_handler_of_the_applications_own_routes_failures_by_type() {
    let calls = Calls::default();
    let mut config = TaskConfig::new("app");
    config.processing_handler = Some(std::sync::Arc::new(ByErrorType(calls.clone())));
    let driver = TopologyTestDriver::with_config(numbers_checked(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let output = driver.create_output_topic("checked", StringSerde, I64Serde);
    let rejected = driver.create_output_topic("rejected", BytesSerde, BytesSerde);
    input.pipe_input_at("a".to_string(), 2, 10);
    input.pipe_input_at("b".to_string(), 3, 11);
    input.pipe_input_at("c".to_string(), 4, 12);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![("a".to_string(), 2), ("c".to_string(), 4)]
    );
    assert_eq!(driver.dropped_records(), 1);
    let dead = rejected.read_record();
    assert_eq!(dead.key, b"b".to_vec());
    assert_eq!(dead.value, 3i64.to_be_bytes().to_vec());
    assert_eq!(dead.timestamp, 11);
    assert_eq!(header(&dead.headers, "reason"), "rejected");
    assert_eq!(
        header(&dead.headers, "__streams.errors.message"),
        "odd number 3"
    );
    assert_eq!(header(&dead.headers, "__streams.errors.offset"), "1");
    assert_eq!(
        calls.lock().unwrap().as_slice(),
        [format!(
            "Some(\"numbers\") 0 1 check 11 Some({:?}) Some({:?})",
            b"b",
            3i64.to_be_bytes()
        )]
    );
    // A panic: the handler fails, and the error reaches the caller.
    let error = input
        .try_pipe_input("d".to_string(), -4)
        .expect_err("the handler fails on a panic");
    assert!(matches!(error, StreamsError::Panic { .. }), "{error:?}");
    assert!(rejected.is_empty());
}

/// Routes records that do not deserialize to a topic named after the
/// source topic, keeping the bytes.
struct BadBytesAside;

impl DeserializationExceptionHandler for BadBytesAside {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, _: &StreamsError) -> Response {
        Response::resume_with(vec![DeadLetterRecord {
            topic: format!("{}-unreadable", context.topic.unwrap_or("none")),
            partition: None,
            key: context.source_raw_key.map(<[u8]>::to_vec),
            value: context.source_raw_value.map(<[u8]>::to_vec),
            timestamp: context.timestamp,
            headers: Headers::new().with("node", context.processor_node_id),
        }])
    }
}

#[test]
fn a_deserialization_handler_of_the_applications_own_gets_the_raw_record() {
    let mut config = TaskConfig::new("app");
    config.deserialization_handler = Some(std::sync::Arc::new(BadBytesAside));
    let driver = TopologyTestDriver::with_config(numbers_checked(), config, 0).unwrap();
    let input = driver.create_input_topic("numbers", StringSerde, I64Serde);
    let output = driver.create_output_topic("checked", StringSerde, I64Serde);
    let aside = driver.create_output_topic("numbers-unreadable", BytesSerde, BytesSerde);
    input
        .try_pipe_raw(Some(b"k".to_vec()), Some(vec![9, 9]), 7)
        .unwrap();
    input.pipe_input_at("a".to_string(), 2, 8);
    assert_eq!(output.read_key_values_to_list(), vec![("a".to_string(), 2)]);
    let dead = aside.read_record();
    assert_eq!(
        (dead.key, dead.value, dead.timestamp),
        (b"k".to_vec(), vec![9, 9], 7)
    );
    assert_eq!(header(&dead.headers, "node"), "numbers");
    assert_eq!(driver.dropped_records(), 1);
}
