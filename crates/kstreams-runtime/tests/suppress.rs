//! `KTable::suppress` in the TopologyTestDriver (KIP-328): final results
//! of windows, and updates held back for a time limit with buffer bounds.

use std::time::Duration;

use kstreams_dsl::{BufferConfig, Produced, StreamsBuilder, Suppressed, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{SessionWindowedSerde, TimeWindowedSerde, Window, Windowed};
use kstreams_time::{SessionWindows, TimeWindows};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn driver(topology: Topology) -> TopologyTestDriver {
    TopologyTestDriver::with_config(topology, TaskConfig::new("app"), 0).unwrap()
}

#[test]
fn until_window_closes_emits_each_final_count_once() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(ms(10), ms(2)))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            "finals",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains(
            "Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])"
        ),
        "{text}"
    );
    let driver = driver(topology);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "finals",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    for (key, ts) in [("a", 1), ("a", 3), ("b", 4), ("a", 11)] {
        input.pipe_input_at(s(key), s("x"), ts);
    }
    assert!(output.is_empty(), "[0, 10) closes at 12 (end + grace)");
    input.pipe_input_at(s("a"), s("x"), 12);
    let got: Vec<_> = output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    let w = |k: &str, start| Windowed::new(s(k), Window::new(start, start + 10));
    assert_eq!(got, vec![(w("a", 0), Some(2), 3), (w("b", 0), Some(1), 4)]);
    input.pipe_input_at(s("c"), s("x"), 30);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w("a", 10), Some(2))]
    );
}

/// A session is final only once no record can merge into it any more:
/// stream time past its end + inactivity gap + grace (Kafka Streams'
/// `GraphGraceSearchUtil` for session aggregations). At end + grace alone a
/// record within the gap still merges, and the "final" result would be
/// taken back.
#[test]
fn until_window_closes_waits_out_a_sessions_gap_before_its_final_result() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_and_grace(ms(10), ms(2)))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            "finals",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap());
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "finals",
        SessionWindowedSerde::new(StringSerde),
        Nullable(I64Serde),
    );
    input.pipe_input_at(s("a"), s("x"), 0);
    // Stream time 5 is past a's end + grace (2), but a record at 8 is
    // within the gap of a's session and merges into it.
    input.pipe_input_at(s("b"), s("x"), 5);
    input.pipe_input_at(s("a"), s("x"), 8);
    assert!(
        output.is_empty(),
        "no session is closed before 12 + its end"
    );
    // 19 closes a session ending at 5 (b) but not one ending at 8 (a).
    input.pipe_input_at(s("c"), s("x"), 19);
    let session = |k: &str, start, end| Windowed::new(s(k), Window::new(start, end));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(session("b", 5, 5), Some(1))]
    );
    input.pipe_input_at(s("c"), s("x"), 20);
    // The merged session once, never the [0, 0] one it replaced.
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(session("a", 0, 8), Some(2))]
    );
}

fn time_limited(buffer: BufferConfig) -> Topology {
    let b = StreamsBuilder::new();
    b.table::<S, S>("t")
        .suppress(Suppressed::until_time_limit(ms(10), buffer).with_name("quiet"))
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    b.build().unwrap()
}

#[test]
fn until_time_limit_emits_the_latest_value_once_due() {
    let driver = driver(time_limited(BufferConfig::unbounded()));
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    input.pipe_input_at(s("k1"), Some(s("b")), 3);
    input.pipe_input_at(s("k2"), Some(s("c")), 5);
    assert!(output.is_empty());
    input.pipe_input_at(s("k3"), Some(s("d")), 14);
    let record = output.read_record();
    assert_eq!(
        (record.key, record.value, record.timestamp),
        (s("k1"), Some(s("b")), 3)
    );
    assert!(output.is_empty());
    input.pipe_input_at(s("k3"), None, 20);
    // k2 (5) is due; k3's delete at 20 is not, and a time limit forwards
    // deletes too once due.
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k2"), Some(s("c")))]
    );
    input.pipe_input_at(s("k4"), Some(s("e")), 30);
    assert_eq!(output.read_key_values_to_list(), vec![(s("k3"), None)]);
}

#[test]
fn a_full_buffer_emits_early_or_fails_as_configured() {
    let driver = driver(time_limited(
        BufferConfig::max_records(1).emit_early_when_full(),
    ));
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    input.pipe_input_at(s("k2"), Some(s("b")), 1);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k1"), Some(s("a")))]
    );

    let driver = driver_failing();
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    let err = input
        .try_pipe_record(kstreams_record::Record::new(s("k2"), Some(s("b")), 1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("suppression buffer quiet-store is full"),
        "{err}"
    );
}

fn driver_failing() -> TopologyTestDriver {
    driver(time_limited(
        BufferConfig::max_records(1).shut_down_when_full(),
    ))
}

#[test]
fn until_window_closes_on_a_plain_table_is_a_build_error() {
    let b2 = StreamsBuilder::new();
    let table = b2.table::<S, i64>("t");
    // A table keyed by windows but not made by a windowed aggregation.
    let windowed = table
        .to_stream()
        .map(|k, v| (Windowed::new(k, Window::new(0, 10)), v.unwrap_or(0)))
        .to_table_with(
            None,
            kstreams_dsl::Materialized::with(TimeWindowedSerde::new(StringSerde, 10), I64Serde),
        );
    windowed.suppress(Suppressed::until_window_closes(BufferConfig::unbounded()));
    let err = b2.build().unwrap_err().to_string();
    assert!(
        err.contains("needs the table of a windowed aggregation"),
        "{err}"
    );
}

/// Kafka Streams' buffer orders entries by time, then by serialized key
/// (`BufferKey`): windows closing together leave in key order, whatever
/// order their keys were updated in.
#[test]
fn windows_closing_together_are_emitted_in_key_order() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(ms(10), ms(0)))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            "finals",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap());
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "finals",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    for (key, ts) in [("c", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("c", 16)] {
        input.pipe_input_at(s(key), s("x"), ts);
    }
    let got: Vec<_> = output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key.key, r.key.window.start, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![
            (s("a"), 0, Some(1), 3),
            (s("b"), 0, Some(2), 5),
            (s("c"), 0, Some(2), 4),
        ]
    );
}

/// A later update of a buffered key replaces its value but keeps its place
/// and its time: the time limit runs from the first update (Kafka Streams
/// does not restart the timer).
#[test]
fn until_time_limit_counts_from_the_first_buffered_update() {
    let driver = driver(time_limited(BufferConfig::unbounded()));
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    input.pipe_input_at(s("k2"), Some(s("b")), 1);
    input.pipe_input_at(s("k1"), Some(s("c")), 8);
    assert!(output.is_empty());
    input.pipe_input_at(s("k3"), Some(s("d")), 10);
    let record = output.read_record();
    assert_eq!(
        (record.key, record.value, record.timestamp),
        (s("k1"), Some(s("c")), 8)
    );
    assert!(output.is_empty());
    input.pipe_input_at(s("k3"), Some(s("e")), 11);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k2"), Some(s("b")))]
    );
}

/// A suppressed final result goes out with the headers of the update that
/// was buffered last for its key (Kafka Streams' buffer keeps the record
/// context). They are read back from the buffer store's value bytes, the
/// bytes its changelog holds.
#[test]
fn suppressed_results_keep_the_headers_of_their_latest_update() {
    use kstreams_record::{Headers, Record};
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(ms(10)))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            "finals",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    // With the cache off each update reaches the buffer with its record's
    // headers (with it on, the cache's flush carries them: tested with
    // tables).
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    let driver = TopologyTestDriver::with_config(b.build().unwrap(), config, 0).unwrap();
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "finals",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    for (key, ts, trace) in [("a", 1, "first"), ("a", 3, "second"), ("b", 12, "closer")] {
        let mut record = Record::new(s(key), s("x"), ts);
        record.headers = Headers::new().with("trace", trace);
        input.pipe_record(record);
    }
    let finals = output.read_records_to_list();
    assert_eq!(finals.len(), 1);
    assert_eq!(finals[0].key, Windowed::new(s("a"), Window::new(0, 10)));
    assert_eq!(finals[0].value, Some(2));
    assert_eq!(
        finals[0]
            .headers
            .last("trace")
            .and_then(|h| h.value.clone()),
        Some(b"second".to_vec())
    );
}

/// The buffer's changelog has Kafka Streams' version-3 records (header
/// `v` = 3): the record context of the key's latest update, its prior, old
/// and new value, and the buffer time, so either side restores the other's
/// buffer.
#[test]
fn the_buffer_changelog_has_kafka_streams_version_3_records() {
    use kstreams_record::BytesSerde;
    // With the cache off each update reaches the buffer while its record
    // is processed, with the record's position (a cache's flush has none:
    // offset and partition -1, no topic).
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    let driver =
        TopologyTestDriver::with_config(time_limited(BufferConfig::unbounded()), config, 0)
            .unwrap();
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let changelog = driver.create_output_topic(
        "app-quiet-store-changelog",
        StringSerde,
        Nullable(BytesSerde),
    );
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    input.pipe_input_at(s("k1"), Some(s("b")), 3);
    let records = changelog.read_records_to_list();
    let last = records.last().expect("the buffer logged its entries");
    assert_eq!(last.key, s("k1"));
    assert_eq!(
        last.headers.last("v").and_then(|h| h.value.clone()),
        Some(vec![3])
    );
    let mut want = Vec::new();
    want.extend_from_slice(&3i64.to_be_bytes()); // the latest update's timestamp
    want.extend_from_slice(&1i64.to_be_bytes()); // its offset
    want.extend_from_slice(&[0, 0, 0, 1, b't']); // its topic
    want.extend_from_slice(&0i32.to_be_bytes()); // its partition
    want.extend_from_slice(&0i32.to_be_bytes()); // no headers
    want.extend_from_slice(&(-1i32).to_be_bytes()); // prior: none before "a"
    want.extend_from_slice(&[0, 0, 0, 1, b'a']); // old
    want.extend_from_slice(&[0, 0, 0, 1, b'b']); // new
    want.extend_from_slice(&0i64.to_be_bytes()); // buffer time: the first update's
    assert_eq!(last.value.as_deref(), Some(&want[..]));
}

/// `BufferConfig::with_logging_disabled` (Kafka Streams'
/// `withLoggingDisabled()`): the buffer still holds updates back, but no
/// changelog topic is declared and nothing is written to one.
#[test]
fn a_buffer_with_logging_disabled_has_no_changelog() {
    use kstreams_record::BytesSerde;
    let topology = time_limited(BufferConfig::unbounded().with_logging_disabled());
    let changelogs: Vec<String> = topology
        .changelog_topics("app")
        .into_iter()
        .map(|c| c.topic)
        .collect();
    assert_eq!(
        changelogs,
        vec![s("app-t-STATE-STORE-0000000000-changelog")]
    );
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    let driver = TopologyTestDriver::with_config(topology, config, 0).unwrap();
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    let changelog = driver.create_output_topic(
        "app-quiet-store-changelog",
        StringSerde,
        Nullable(BytesSerde),
    );
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    input.pipe_input_at(s("k1"), Some(s("b")), 3);
    assert!(output.is_empty());
    input.pipe_input_at(s("k2"), Some(s("c")), 10);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k1"), Some(s("b")))]
    );
    assert!(changelog.is_empty(), "nothing logged for the buffer");
}

/// `BufferConfig::with_logging_enabled` (Kafka Streams'
/// `withLoggingEnabled(Map)`): the buffer's changelog topic gets the given
/// configs over its own, and still receives the buffer's records.
#[test]
fn a_buffer_with_logging_enabled_passes_its_topic_configs() {
    use std::collections::BTreeMap;

    use kstreams_record::BytesSerde;
    let topology = time_limited(
        BufferConfig::max_records(100)
            .shut_down_when_full()
            .with_logging_enabled(BTreeMap::from([(s("min.compaction.lag.ms"), s("60000"))])),
    );
    let buffer = topology
        .changelog_topics("app")
        .into_iter()
        .find(|c| c.store == "quiet-store")
        .expect("the buffer's changelog");
    assert_eq!(buffer.topic, "app-quiet-store-changelog");
    assert_eq!(
        buffer.config,
        BTreeMap::from([
            (s("cleanup.policy"), s("compact")),
            (s("min.compaction.lag.ms"), s("60000")),
        ])
    );
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    let driver = TopologyTestDriver::with_config(topology, config, 0).unwrap();
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let changelog = driver.create_output_topic(
        "app-quiet-store-changelog",
        StringSerde,
        Nullable(BytesSerde),
    );
    input.pipe_input_at(s("k1"), Some(s("a")), 0);
    let keys: Vec<String> = changelog
        .read_records_to_list()
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(keys, vec![s("k1")]);
}
