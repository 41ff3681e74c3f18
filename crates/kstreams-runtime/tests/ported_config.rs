//! A Kafka Streams application's configuration, taken over unchanged, on a
//! real Apache Kafka broker (`cargo xtask kafka start`; skipped without
//! KSTREAMS_BOOTSTRAP locally): its `.properties` file starts kstreams, input
//! in every codec Kafka writes is read, output is written with the codec the
//! file asks for, and a sink topic that does not exist is retried as Kafka
//! Streams' default production handler does.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kstreams_dsl::StreamsBuilder;
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use kstreams_embedded::{create_topic, create_topic_with_config, test_broker, unique_name};
use kstreams_runtime::handlers::{
    DeadLetterRecord, ErrorHandlerContext, ProductionError, ProductionExceptionHandler,
    ProductionResponse, RefusedRecord,
};
use kstreams_runtime::kafka::{
    KafkaStreams, ProcessingGuarantee, State, StreamThreadExceptionResponse, StreamsConfig,
};

/// The codecs of Kafka's record batches, by their attribute bits.
const CODECS: [(&str, i16); 4] = [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)];

/// Writes `values` to `partition` of `topic` with a producer compressing
/// with `codec`, in one batch where it fits.
fn produce(bootstrap: &str, topic: &str, partition: i32, codec: &str, values: &[String]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("compression.type", codec)
        .set("linger.ms", "50")
        .create()
        .unwrap();
    for (i, value) in values.iter().enumerate() {
        let key = format!("k{i}");
        producer
            .send(
                BaseRecord::to(topic)
                    .partition(partition)
                    .key(&key)
                    .payload(value),
            )
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// The values in `topic` as a read_committed consumer sees them, until
/// `want` arrived or the timeout.
fn read_committed(bootstrap: &str, topic: &str, want: usize, timeout: Duration) -> Vec<String> {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    while out.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string());
        }
    }
    out
}

fn upper_case_app(config: StreamsConfig, input: &str, output: &str) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .map_values(|v| v.to_uppercase())
        .to(output);
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// The broker's data directories when it is the one `cargo xtask kafka
/// start` runs from this checkout.
fn broker_data_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.kafka");
    let Ok(nodes) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    nodes
        .filter_map(Result::ok)
        .map(|node| node.path().join("data"))
        .filter(|data| data.is_dir())
        .collect()
}

/// The codec of every data batch (control batches, the transaction
/// markers, left out) in the broker's log of `topic`, from its segment
/// files: `None` when the broker's files are not on this machine.
fn batch_codecs(topic: &str) -> Option<Vec<i16>> {
    let mut codecs = Vec::new();
    let mut found = false;
    for data in broker_data_dirs() {
        for dir in std::fs::read_dir(&data).ok()?.filter_map(Result::ok) {
            let name = dir.file_name().to_string_lossy().to_string();
            let Some(partition) = name.strip_prefix(&format!("{topic}-")) else {
                continue;
            };
            if partition.parse::<i32>().is_err() {
                continue;
            }
            found = true;
            for file in std::fs::read_dir(dir.path()).ok()?.filter_map(Result::ok) {
                if file.path().extension().is_some_and(|e| e == "log") {
                    let bytes = std::fs::read(file.path()).ok()?;
                    codecs.extend(data_batch_codecs(&bytes));
                }
            }
        }
    }
    found.then_some(codecs)
}

/// Kafka's record batch (magic 2): base offset (8 bytes), batch length (4),
/// leader epoch (4), magic (1), CRC (4), attributes (2: codec in bits 0-2,
/// control batch in bit 5).
fn data_batch_codecs(log: &[u8]) -> Vec<i16> {
    let mut codecs = Vec::new();
    let mut at = 0;
    while at + 23 <= log.len() {
        let length = i32::from_be_bytes(log[at + 8..at + 12].try_into().unwrap()) as usize;
        let attributes = i16::from_be_bytes(log[at + 21..at + 23].try_into().unwrap());
        if attributes & 0x20 == 0 {
            codecs.push(attributes & 0x07);
        }
        at += 12 + length;
    }
    codecs
}

/// The done-when of issue 21: a properties file as a Kafka Streams
/// application has it starts kstreams unchanged, reads input in all four
/// codecs and writes zstd.
#[test]
fn a_kafka_streams_properties_file_runs_unchanged_over_input_in_every_codec() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("ported-in");
    let output = unique_name("ported-out");
    create_topic(&bootstrap, &input, CODECS.len() as i32, 1).unwrap();
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    let per_codec = 50;
    for (partition, (codec, _)) in CODECS.iter().enumerate() {
        let values: Vec<String> = (0..per_codec).map(|i| format!("{codec}-{i}")).collect();
        produce(&bootstrap, &input, partition as i32, codec, &values);
    }
    if let Some(mut codecs) = batch_codecs(&input) {
        codecs.sort();
        codecs.dedup();
        assert_eq!(
            codecs,
            [1, 2, 3, 4],
            "the input holds a batch of each codec"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.properties");
    std::fs::write(
        &path,
        format!(
            "# streams.properties, as the Kafka Streams application had it\n\
             application.id={app}\n\
             bootstrap.servers={bootstrap}\n\
             processing.guarantee=exactly_once_v2\n\
             max.task.idle.ms=-1\n\
             compression.type=zstd\n\
             auto.offset.reset=earliest\n\
             acks=all\n\
             max.poll.records=500\n\
             commit.interval.ms=100\n\
             state.dir={state}\n",
            app = unique_name("ported-app"),
            state = dir.path().join("state").display(),
        ),
    )
    .unwrap();
    let config = StreamsConfig::from_properties_file(&path).unwrap();
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    let total = per_codec * CODECS.len();
    let mut seen = read_committed(&bootstrap, &output, total, Duration::from_secs(90));
    assert_eq!(app.state(), State::Running, "{:?}", app.errors());
    assert!(app.close(Duration::from_secs(30)));
    seen.sort();
    let mut expected: Vec<String> = CODECS
        .iter()
        .flat_map(|(codec, _)| (0..per_codec).map(move |i| format!("{codec}-{i}").to_uppercase()))
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    match batch_codecs(&output) {
        Some(codecs) => {
            assert!(!codecs.is_empty());
            assert!(
                codecs.iter().all(|c| *c == 4),
                "every output batch is zstd: {codecs:?}"
            );
        }
        None => eprintln!(
            "the broker's log files are not under this checkout's .kafka: output codec not checked"
        ),
    }
}

/// Kafka Streams 4's DefaultProductionExceptionHandler answers RETRY to the
/// producer's timeout on a missing topic: the application keeps running
/// and catches up once the topic is created, instead of its thread dying.
#[test]
fn a_missing_sink_topic_is_retried_until_it_is_created() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    for guarantee in [
        ProcessingGuarantee::AtLeastOnce,
        ProcessingGuarantee::ExactlyOnceV2,
    ] {
        retried_until_the_sink_topic_exists(&bootstrap, guarantee);
    }
}

fn retried_until_the_sink_topic_exists(bootstrap: &str, guarantee: ProcessingGuarantee) {
    let bootstrap = bootstrap.to_string();
    let input = unique_name("missing-sink-in");
    let output = unique_name("missing-sink-out");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    produce(&bootstrap, &input, 0, "none", &values);
    let dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::new(unique_name("missing-sink-app"), &bootstrap)
        .state_dir(dir.path())
        .processing_guarantee(guarantee)
        .commit_interval(Duration::from_millis(100));
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    // Several retries' worth: the thread is still there, nothing failed.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        assert!(
            app.errors().is_empty() && app.state() != State::Error,
            "{guarantee:?}: {:?} {:?}",
            app.state(),
            app.errors()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    let mut seen = read_committed(&bootstrap, &output, values.len(), Duration::from_secs(60));
    assert!(app.close(Duration::from_secs(30)));
    seen.sort();
    seen.dedup();
    let mut expected: Vec<String> = values.iter().map(|v| v.to_uppercase()).collect();
    expected.sort();
    assert_eq!(seen, expected, "{guarantee:?}");
}

/// Under `production.exception.handler` continue (Kafka Streams' CONTINUE),
/// records for the missing topic are dropped and their offsets committed;
/// once the topic exists, later records reach it.
#[test]
fn a_missing_sink_topic_drops_records_under_the_continue_handler() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("dropping-sink-in");
    let output = unique_name("dropping-sink-out");
    let app_id = unique_name("dropping-sink-app");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    produce(&bootstrap, &input, 0, "none", &["dropped".to_string()]);
    let dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties_str(&format!(
        "application.id={app_id}\nbootstrap.servers={bootstrap}\ncommit.interval.ms=100\n\
         production.exception.handler=org.apache.kafka.streams.errors.LogAndContinueProductionExceptionHandler\n\
         state.dir={}\n",
        dir.path().display()
    ))
    .unwrap();
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    // The dropped record's offset is committed: it was processed.
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &app_id)
        .create()
        .unwrap();
    let mut partition = TopicPartitionList::new();
    partition.add_partition(&input, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // The group coordinator may still be moving in: ask again.
        let committed = group
            .committed_offsets(partition.clone(), Duration::from_secs(10))
            .ok()
            .and_then(|c| c.find_partition(&input, 0).map(|p| p.offset()));
        if committed == Some(Offset::Offset(1)) {
            break;
        }
        assert!(Instant::now() < deadline, "the record was not processed");
        assert!(app.errors().is_empty(), "{:?}", app.errors());
        std::thread::sleep(Duration::from_millis(100));
    }
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    // librdkafka's producer may hold the topic as unknown for a moment.
    std::thread::sleep(Duration::from_secs(1));
    produce(&bootstrap, &input, 0, "none", &["kept".to_string()]);
    let seen = read_committed(&bootstrap, &output, 1, Duration::from_secs(60));
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(seen, ["KEPT"]);
    assert!(app.errors().is_empty(), "{:?}", app.errors());
}

/// A record the broker refuses (larger than the topic's max.message.bytes)
/// fails the thread under the default handler: the uncaught-exception
/// handler is told once, with the partition and the broker's reason.
#[test]
fn a_record_the_broker_refuses_reaches_the_handler_naming_its_partition() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("refused-in");
    let output = unique_name("refused-out");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    create_topic_with_config(&bootstrap, &output, 1, 1, &[("max.message.bytes", "1000")]).unwrap();
    produce(&bootstrap, &input, 0, "none", &["x".repeat(5_000)]);
    let dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::new(unique_name("refused-app"), &bootstrap)
        .state_dir(dir.path())
        .commit_interval(Duration::from_millis(100));
    let mut app = upper_case_app(config, &input, &output);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    app.set_uncaught_exception_handler(move |error| {
        record.lock().unwrap().push(error.to_string());
        StreamThreadExceptionResponse::ShutdownClient
    });
    app.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.state() != State::Error {
        assert!(Instant::now() < deadline, "{:?}", app.state());
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with(&format!("a record to {output}-0 could not be produced: ")),
        "{seen:?}"
    );
    assert!(seen[0].contains("too large"), "{seen:?}");
}

/// A production handler of the application's own, named by class in the
/// properties as a Java application's is: records the broker refuses as
/// too large go, shortened, to a topic of their own and processing goes
/// on; it sees the task and the sink that wrote the record.
struct OversizedAside {
    aside: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ProductionExceptionHandler for OversizedAside {
    fn handle_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        record: &RefusedRecord<'_>,
        error: &ProductionError,
    ) -> ProductionResponse {
        self.seen.lock().unwrap().push(format!(
            "{} {} {} {:?}",
            error.code(),
            context.task_id,
            context.processor_node_id,
            record.partition
        ));
        if error.code() != "MSG_SIZE_TOO_LARGE" {
            return ProductionResponse::fail();
        }
        let length = record.value.map_or(0, <[u8]>::len);
        ProductionResponse::resume_with(vec![DeadLetterRecord {
            topic: self.aside.clone(),
            partition: None,
            key: record.key.map(<[u8]>::to_vec),
            value: Some(format!("{length} bytes").into_bytes()),
            timestamp: record.timestamp,
            headers: record.headers.clone(),
        }])
    }
}

#[test]
fn a_production_handler_of_ones_own_sets_refused_records_aside_and_goes_on() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("aside-in");
    let output = unique_name("aside-out");
    let aside = unique_name("aside-oversized");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    create_topic(&bootstrap, &aside, 1, 1).unwrap();
    create_topic_with_config(&bootstrap, &output, 1, 1, &[("max.message.bytes", "1000")]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let config = StreamsConfig::from_properties_str(&format!(
        "application.id={}\nbootstrap.servers={bootstrap}\ncommit.interval.ms=100\n\
         production.exception.handler=com.example.streams.OversizedAside\nstate.dir={}\n",
        unique_name("aside-app"),
        dir.path().display()
    ))
    .unwrap()
    .register_production_exception_handler(
        "OversizedAside",
        std::sync::Arc::new(OversizedAside {
            aside: aside.clone(),
            seen: seen.clone(),
        }),
    );
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    // One at a time: the broker refuses a whole batch that is too large,
    // and librdkafka, unlike Java's producer, does not split it.
    produce(&bootstrap, &input, 0, "none", &["small".to_string()]);
    read_committed(&bootstrap, &output, 1, Duration::from_secs(60));
    produce(&bootstrap, &input, 0, "none", &["x".repeat(5_000)]);
    let set_aside = read_committed(&bootstrap, &aside, 1, Duration::from_secs(60));
    produce(&bootstrap, &input, 0, "none", &["after".to_string()]);
    let kept = read_committed(&bootstrap, &output, 2, Duration::from_secs(60));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_ne!(app.state(), State::Error);
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(kept, ["SMALL", "AFTER"]);
    assert_eq!(set_aside, ["5000 bytes"]);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].starts_with("MSG_SIZE_TOO_LARGE 0_0 "), "{seen:?}");
    assert!(seen[0].ends_with(" Some(0)"), "{seen:?}");
}

/// Kafka 4's `auto.offset.reset=by_duration:PT1H` (KIP-1106), which
/// librdkafka lacks: a partition without a committed offset starts at its
/// first record of the last hour.
#[test]
fn auto_offset_reset_by_duration_starts_at_the_first_record_that_young() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("by-duration-in");
    let output = unique_name("by-duration-out");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let hour = 3_600_000;
    for (value, timestamp) in [
        ("three-hours-old", now - 3 * hour),
        ("two-hours-old", now - 2 * hour),
        ("ten-minutes-old", now - hour / 6),
        ("new", now),
    ] {
        producer
            .send(
                BaseRecord::to(&input)
                    .partition(0)
                    .key("k")
                    .payload(value)
                    .timestamp(timestamp),
            )
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties_str(&format!(
        "application.id={}\nbootstrap.servers={bootstrap}\ncommit.interval.ms=100\n\
         auto.offset.reset=by_duration:PT1H\nstate.dir={}\n",
        unique_name("by-duration-app"),
        dir.path().display()
    ))
    .unwrap();
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    // Two wanted; a third would be a record older than an hour.
    let seen = read_committed(&bootstrap, &output, 3, Duration::from_secs(10));
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(seen, ["TEN-MINUTES-OLD", "NEW"], "{:?}", app.errors());
}

/// `auto.offset.reset=latest`: a partition without a committed offset
/// starts after its last record, so what was written before the
/// application started is not processed; what comes after is. (The thread
/// places such partitions itself, kafka/uncommitted_start.rs.)
#[test]
fn auto_offset_reset_latest_starts_after_the_records_already_there() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("latest-in");
    let output = unique_name("latest-out");
    create_topic(&bootstrap, &input, 2, 1).unwrap();
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    for partition in 0..2 {
        produce(&bootstrap, &input, partition, "none", &["old".to_string()]);
    }
    let dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties_str(&format!(
        "application.id={}\nbootstrap.servers={bootstrap}\ncommit.interval.ms=100\n\
         auto.offset.reset=latest\nstate.dir={}\n",
        unique_name("latest-app"),
        dir.path().display()
    ))
    .unwrap();
    let mut app = upper_case_app(config, &input, &output);
    app.start().unwrap();
    let consumer = common::read_committed_consumer(&bootstrap, &output);
    let mut seen = Vec::new();
    // A record written before the thread has looked its partition's end up
    // would be skipped too: new ones are written until one comes through.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    while !seen.iter().any(|v: &String| v.starts_with("NEW")) && Instant::now() < deadline {
        for partition in 0..2 {
            produce(
                &bootstrap,
                &input,
                partition,
                "none",
                &[format!("new-{sent}")],
            );
        }
        sent += 1;
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                seen.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string());
            }
        }
    }
    assert!(app.close(Duration::from_secs(30)));
    assert!(
        seen.iter().any(|v| v.starts_with("NEW")),
        "{seen:?} {:?}",
        app.errors()
    );
    assert!(!seen.iter().any(|v| v == "OLD"), "{seen:?}");
}
