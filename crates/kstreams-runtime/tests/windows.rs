//! Windowed aggregations in event time, in the TopologyTestDriver: each
//! expected output is written out as Kafka Streams produces it.

use std::time::Duration;

use kstreams_dsl::{late_headers, Materialized, Produced, StoreType, StreamsBuilder, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{SessionWindowedSerde, TimeWindowedSerde, Window, Windowed};
use kstreams_time::{EmitStrategy, FixedSizeWindows, SessionWindows, TimeWindows};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn w(key: &str, start: i64, end: i64) -> Windowed<String> {
    Windowed::new(s(key), Window::new(start, end))
}

fn driver(topology: Topology, cache_max_bytes: usize) -> TopologyTestDriver {
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = cache_max_bytes;
    TopologyTestDriver::with_config(topology, config, 0).unwrap()
}

fn windowed_count(
    windows: impl Into<FixedSizeWindows>,
    emit: EmitStrategy,
    store_type: StoreType,
) -> Topology {
    let windows = windows.into();
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(windows.clone())
        .emit_strategy(emit)
        .late_records_to("late-events")
        .count_with(
            None,
            Materialized::as_("counts").with_store_type(store_type),
        )
        .to_stream()
        .to_with(
            "counts",
            Produced::with(
                TimeWindowedSerde::new(StringSerde, windows.size_ms()),
                Nullable(I64Serde),
            ),
        );
    b.build().unwrap()
}

#[test]
fn tumbling_count_accepts_out_of_order_records_within_grace_and_drops_late_ones() {
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        let windows = TimeWindows::of_size_and_grace(ms(10), ms(5));
        let driver = driver(
            windowed_count(windows, EmitStrategy::OnWindowUpdate, store_type),
            0,
        );
        let input = driver.create_input_topic("events", StringSerde, StringSerde);
        let output = driver.create_output_topic(
            "counts",
            TimeWindowedSerde::new(StringSerde, 10),
            Nullable(I64Serde),
        );
        let late = driver.create_output_topic("late-events", StringSerde, StringSerde);
        for (value, ts) in [
            ("v1", 1),
            ("v5", 5),
            ("v12", 12),
            ("v3", 3),
            ("v16", 16),
            ("v4", 4),
        ] {
            input.pipe_input_at(s("a"), s(value), ts);
        }
        let got: Vec<_> = output
            .read_records_to_list()
            .into_iter()
            .map(|r| (r.key, r.value, r.timestamp))
            .collect();
        assert_eq!(
            got,
            vec![
                (w("a", 0, 10), Some(1), 1),
                (w("a", 0, 10), Some(2), 5),
                (w("a", 10, 20), Some(1), 12),
                // Out of order but within grace: stream time 12, the window
                // closes at 10 + 5.
                (w("a", 0, 10), Some(3), 5),
                (w("a", 10, 20), Some(2), 16),
            ],
            "{store_type:?}"
        );
        // The record at 4 came at stream time 16, after [0, 10) closed at
        // 15: dropped, counted, and kept on the side topic with the reason.
        assert_eq!(driver.dropped_records(), 1);
        let rejected = late.read_record();
        assert_eq!(
            (rejected.key, rejected.value, rejected.timestamp),
            (s("a"), s("v4"), 4)
        );
        let header = |name: &str| {
            let bytes = rejected.headers.last(name).unwrap().value.clone().unwrap();
            i64::from_be_bytes(bytes.as_slice().try_into().unwrap())
        };
        assert_eq!(header(late_headers::WINDOW_START), 0);
        assert_eq!(header(late_headers::WINDOW_END), 10);
        assert_eq!(header(late_headers::STREAM_TIME), 16);
        assert_eq!(header(late_headers::GRACE_MS), 5);
        assert!(late.is_empty());
    }
}

#[test]
fn hopping_windows_update_every_window_a_record_falls_in() {
    let windows = TimeWindows::of_size_with_no_grace(ms(10)).advance_by(ms(5));
    let driver = driver(
        windowed_count(windows, EmitStrategy::OnWindowUpdate, StoreType::InMemory),
        0,
    );
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    input.pipe_input_at(s("a"), s("x"), 7);
    input.pipe_input_at(s("a"), s("y"), 12);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (w("a", 0, 10), Some(1)),
            (w("a", 5, 15), Some(1)),
            (w("a", 5, 15), Some(2)),
            (w("a", 10, 20), Some(1)),
        ]
    );
}

#[test]
fn emit_on_window_close_forwards_each_final_count_once() {
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        let windows = TimeWindows::of_size_with_no_grace(ms(10));
        let driver = driver(
            windowed_count(windows, EmitStrategy::OnWindowClose, store_type),
            10 * 1024 * 1024,
        );
        let input = driver.create_input_topic("events", StringSerde, StringSerde);
        let output = driver.create_output_topic(
            "counts",
            TimeWindowedSerde::new(StringSerde, 10),
            Nullable(I64Serde),
        );
        input.pipe_input_at(s("a"), s("1"), 1);
        input.pipe_input_at(s("a"), s("2"), 2);
        input.pipe_input_at(s("b"), s("5"), 5);
        assert!(output.is_empty(), "nothing is final before [0, 10) closes");
        input.pipe_input_at(s("a"), s("12"), 12);
        assert_eq!(
            output.read_key_values_to_list(),
            vec![(w("a", 0, 10), Some(2)), (w("b", 0, 10), Some(1))],
            "{store_type:?}"
        );
        input.pipe_input_at(s("a"), s("13"), 13);
        assert!(output.is_empty());
        input.pipe_input_at(s("c"), s("25"), 25);
        assert_eq!(
            output.read_key_values_to_list(),
            vec![(w("a", 10, 20), Some(2))]
        );
    }
}

/// Stream time that jumps past several hopping windows at once closes them
/// all with one record, whose own windows advance the store's retention
/// past them. Emit-on-window-close promises each window's final result, so
/// the closed windows are fetched before that record is written. Kafka
/// Streams 4.4 writes first and fetches after (`KStreamWindowAggregate`),
/// so it loses the windows whose segments that write dropped: kstreams
/// keeps the documented behaviour here, not Kafka Streams' output.
#[test]
fn emit_on_window_close_keeps_every_window_a_jump_in_stream_time_closes() {
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        let windows = TimeWindows::of_size_with_no_grace(ms(10)).advance_by(ms(5));
        let driver = driver(
            windowed_count(windows, EmitStrategy::OnWindowClose, store_type),
            0,
        );
        let input = driver.create_input_topic("events", StringSerde, StringSerde);
        let output = driver.create_output_topic(
            "counts",
            TimeWindowedSerde::new(StringSerde, 10),
            Nullable(I64Serde),
        );
        for (key, ts) in [("a", 1), ("a", 6), ("b", 7), ("a", 12)] {
            input.pipe_input_at(s(key), s("x"), ts);
        }
        assert_eq!(
            output.read_key_values_to_list(),
            vec![(w("a", 0, 10), Some(2)), (w("b", 0, 10), Some(1))],
            "{store_type:?}: [0, 10) closed at 12"
        );
        // Ten minutes later: far beyond the store's retention (size +
        // grace) and RocksDB's segments (at least a minute each).
        input.pipe_input_at(s("c"), s("x"), 600_000);
        assert_eq!(
            output.read_key_values_to_list(),
            vec![
                (w("a", 5, 15), Some(2)),
                (w("b", 5, 15), Some(1)),
                (w("a", 10, 20), Some(1)),
            ],
            "{store_type:?}: every window the jump closed"
        );
    }
}

#[test]
fn windowed_count_with_cache_coalesces_per_commit() {
    let windows = TimeWindows::of_size_with_no_grace(ms(10));
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .flat_map_values(|v| v.split(',').map(str::to_owned).collect::<Vec<_>>())
        .group_by_key()
        .windowed_by(windows)
        .count()
        .to_stream()
        .to_with(
            "counts",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 1024 * 1024);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    input.pipe_input_at(s("a"), s("x,y,z"), 3);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w("a", 0, 10), Some(3))]
    );
}

#[test]
fn sessions_merge_when_a_record_falls_between_them() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("clicks")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(ms(10)))
        .count_with(None, Materialized::as_("sessions").with_caching_disabled())
        .to_stream()
        .to_with(
            "sessions",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "sessions",
        SessionWindowedSerde::new(StringSerde),
        Nullable(I64Serde),
    );
    for ts in [0, 5, 30, 20] {
        input.pipe_input_at(s("a"), s("click"), ts);
    }
    input.pipe_input_at(s("b"), s("late"), 1);
    let got: Vec<_> = output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![
            (w("a", 0, 0), Some(1), 0),
            (w("a", 0, 0), None, 0),
            (w("a", 0, 5), Some(2), 5),
            (w("a", 30, 30), Some(1), 30),
            (w("a", 30, 30), None, 30),
            (w("a", 20, 30), Some(2), 30),
        ]
    );
    // b@1 at stream time 30: its session would end at 1, long closed.
    assert_eq!(driver.dropped_records(), 1);
}

#[test]
fn session_emit_final_forwards_closed_sessions_only() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("clicks")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_and_grace(ms(10), ms(2)))
        .emit_strategy(EmitStrategy::OnWindowClose)
        .count()
        .to_stream()
        .to_with(
            "sessions",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "sessions",
        SessionWindowedSerde::new(StringSerde),
        Nullable(I64Serde),
    );
    input.pipe_input_at(s("a"), s("c"), 0);
    input.pipe_input_at(s("a"), s("c"), 4);
    input.pipe_input_at(s("b"), s("c"), 6);
    assert!(output.is_empty());
    // Stream time 40, grace 2: sessions that ended before 38 are final.
    input.pipe_input_at(s("c"), s("c"), 40);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w("a", 0, 4), Some(2)), (w("b", 6, 6), Some(1))]
    );
}

#[test]
fn bad_windows_are_build_errors() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(ms(10)).advance_by(ms(20)))
        .count();
    let err = b.build().unwrap_err().to_string();
    assert!(err.contains("at most the window size"), "{err}");

    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(ms(10), ms(5)))
        .count_with(None, Materialized::as_("c").with_retention(ms(12)));
    let err = b.build().unwrap_err().to_string();
    assert!(
        err.contains("must be at least the window size plus grace"),
        "{err}"
    );
}

/// Sliding windows (KIP-450): each record has a window ending at it, and a
/// window starting right after it once a later record is within reach; an
/// out-of-order record updates every window it falls in and creates its own.
#[test]
fn sliding_windows_count_per_distinct_set_of_records() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by_sliding(kstreams_time::SlidingWindows::of_time_difference_and_grace(
            ms(10),
            ms(100),
        ))
        .count_with(None, Materialized::new().with_caching_disabled())
        .to_stream()
        .to_with(
            "counts",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    let read = |output: &kstreams_runtime::TestOutputTopic<Windowed<String>, Option<i64>>| {
        output
            .read_records_to_list()
            .into_iter()
            .map(|r| (r.key.window.start, r.value.unwrap(), r.timestamp))
            .collect::<Vec<_>>()
    };
    for ts in [20, 25, 40] {
        input.pipe_input_at(s("k"), s("x"), ts);
    }
    assert_eq!(
        read(&output),
        vec![(10, 1, 20), (21, 1, 25), (15, 2, 25), (30, 1, 40)]
    );
    input.pipe_input_at(s("k"), s("late but within grace"), 22);
    assert_eq!(
        read(&output),
        vec![(21, 2, 25), (15, 3, 25), (12, 2, 22), (23, 1, 25)]
    );
}

/// A session stays open for records within the gap after its end plus
/// grace (Kafka Streams since KAFKA-12718): an out-of-order record that
/// starts a new session that late is still accepted.
#[test]
fn sessions_close_after_gap_plus_grace() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("clicks")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(ms(10)))
        .count_with(None, Materialized::new().with_caching_disabled())
        .to_stream()
        .to_with(
            "sessions",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "sessions",
        SessionWindowedSerde::new(StringSerde),
        Nullable(I64Serde),
    );
    input.pipe_input_at(s("a"), s("c"), 100);
    input.pipe_input_at(s("b"), s("c"), 95);
    input.pipe_input_at(s("c"), s("c"), 89);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w("a", 100, 100), Some(1)), (w("b", 95, 95), Some(1))]
    );
    assert_eq!(driver.dropped_records(), 1);
}

/// A per-source extractor takes event time from a field of the value:
/// windows follow the business time, not the time the record was written.
#[test]
fn windows_follow_a_business_time_field_of_the_value() {
    use kstreams_time::{ConsumedRecordView, ValueTimestampExtractor};
    let extractor = ValueTimestampExtractor::new(|record: &ConsumedRecordView<'_>, _| {
        std::str::from_utf8(record.value?)
            .ok()?
            .split('@')
            .nth(1)?
            .parse()
            .ok()
    });
    let b = StreamsBuilder::new();
    b.stream_with::<S, S>(
        "events",
        kstreams_dsl::Consumed::with(StringSerde, StringSerde).with_timestamp_extractor(extractor),
    )
    .group_by_key()
    .windowed_by(TimeWindows::of_size_with_no_grace(ms(10)))
    .count()
    .to_stream()
    .to_with(
        "counts",
        Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
    );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    // Written at 1000, 1001, 1002; happened at 3, 13, and no time at all.
    input.pipe_input_at(s("a"), s("click@3"), 1000);
    input.pipe_input_at(s("a"), s("click@13"), 1001);
    input.pipe_input_at(s("a"), s("click"), 1002);
    let got: Vec<_> = output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![(w("a", 0, 10), Some(1), 3), (w("a", 10, 20), Some(1), 13)]
    );
    assert_eq!(driver.dropped_records(), 1, "no time in the value: skipped");
}

/// The unlimited window: one window from its start on, never closing.
#[test]
fn unlimited_windows_count_everything_from_their_start() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(kstreams_time::UnlimitedWindows::start_on(10))
        .count()
        .to_stream()
        .to_with(
            "counts",
            Produced::with(
                TimeWindowedSerde::new(StringSerde, i64::MAX),
                Nullable(I64Serde),
            ),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, i64::MAX),
        Nullable(I64Serde),
    );
    for ts in [5, 10, 1_000_000, 20] {
        input.pipe_input_at(s("a"), s("x"), ts);
    }
    let w = Windowed::new(s("a"), Window::new(10, i64::MAX));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w.clone(), Some(1)), (w.clone(), Some(2)), (w, Some(3))]
    );
}

/// Windows of the application's own (Kafka Streams' `Windows` subclass):
/// windows of 10 ms that start at 3 past each ten, and a second, shifted
/// window for timestamps in the odd tens, so a record can be in one or two.
#[derive(Debug)]
struct ShiftedTens;

impl kstreams_time::Windows for ShiftedTens {
    fn windows_for(&self, timestamp: i64) -> Vec<(i64, i64)> {
        let start = (timestamp - 3).div_euclid(10) * 10 + 3;
        let mut windows = vec![(start, start + 10)];
        if start.div_euclid(10) % 2 == 1 {
            // Listed out of order on purpose: the operator orders them.
            windows.insert(0, (start + 5, start + 15));
        }
        windows.retain(|&(from, to)| from <= timestamp && timestamp < to);
        windows
    }
    fn size_ms(&self) -> i64 {
        10
    }
    fn grace_ms(&self) -> i64 {
        5
    }
}

#[test]
fn windows_of_the_applications_own_aggregate_close_and_validate() {
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        let windows = FixedSizeWindows::custom(ShiftedTens);
        let topology = windowed_count(windows, EmitStrategy::OnWindowUpdate, store_type);
        own_windows_count(driver(topology, 0));
    }
    #[derive(Debug)]
    struct Empty;
    impl kstreams_time::Windows for Empty {
        fn windows_for(&self, _: i64) -> Vec<(i64, i64)> {
            Vec::new()
        }
        fn size_ms(&self) -> i64 {
            0
        }
        fn grace_ms(&self) -> i64 {
            0
        }
    }
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(FixedSizeWindows::custom(Empty))
        .count();
    let error = b.build().unwrap_err().to_string();
    assert!(
        error.contains("Empty") && error.contains("size_ms is 0"),
        "{error}"
    );
}

/// [`ShiftedTens`]' count, its late record sent to `late-events`.
fn own_windows_count(driver: TopologyTestDriver) {
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    // 5 is in [3, 13); 14 in [13, 23) and, 13 being in an odd ten, in
    // [18, 28) only from 18: not yet; 19 in both.
    for ts in [5, 14, 19] {
        input.pipe_input_at(s("a"), s("x"), ts);
    }
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (w("a", 3, 13), Some(1)),
            (w("a", 13, 23), Some(1)),
            (w("a", 13, 23), Some(2)),
            (w("a", 18, 28), Some(1)),
        ]
    );
    // Stream time 40 (in [33, 43) and, 33 being in an odd ten, in
    // [38, 48)): [3, 13) closed at 13 + 5 grace, so a record at 8 is late.
    input.pipe_input_at(s("a"), s("x"), 40);
    input.pipe_input_at(s("a"), s("x"), 8);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w("a", 33, 43), Some(1)), (w("a", 38, 48), Some(1))]
    );
    let late = driver.create_output_topic("late-events", StringSerde, StringSerde);
    assert_eq!(late.read_key_values_to_list(), vec![(s("a"), s("x"))]);
}

#[test]
fn sliding_windows_emit_final_results_once_closed() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by_sliding(
            kstreams_time::SlidingWindows::of_time_difference_with_no_grace(ms(10)),
        )
        .emit_strategy(EmitStrategy::OnWindowClose)
        .count()
        .to_stream()
        .to_with(
            "counts",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let driver = driver(b.build().unwrap(), 0);
    let input = driver.create_input_topic("events", StringSerde, StringSerde);
    let output = driver.create_output_topic(
        "counts",
        TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    let read = |output: &kstreams_runtime::TestOutputTopic<Windowed<String>, Option<i64>>| {
        output
            .read_records_to_list()
            .into_iter()
            .map(|r| (r.key.window.start, r.value.unwrap(), r.timestamp))
            .collect::<Vec<_>>()
    };
    input.pipe_input_at(s("k"), s("x"), 20);
    assert!(output.is_empty());
    // At stream time 25, [10, 20] has ended: no record can reach it.
    input.pipe_input_at(s("k"), s("x"), 25);
    assert_eq!(read(&output), vec![(10, 1, 20)]);
    input.pipe_input_at(s("k"), s("x"), 40);
    assert_eq!(read(&output), vec![(15, 2, 25), (21, 1, 25)]);
    input.pipe_input_at(s("k"), s("x"), 60);
    assert_eq!(read(&output), vec![(30, 1, 40)]);
}

/// Which changelogs a store without local state may restore only within
/// its retention (issue 46): those of stores whose changelog records are
/// stamped within their windows — the DSL's time and sliding window
/// aggregations and the stores of a windowed stream-stream join — and not
/// session stores (a merged session can be stamped long before its end),
/// key-value stores, nor window stores a processor writes as it likes.
#[test]
fn window_aggregations_and_join_stores_restore_within_their_retention() {
    use kstreams_dsl::StreamJoined;
    use kstreams_time::{JoinWindows, SlidingWindows};
    let b = StreamsBuilder::new();
    let events = b.stream::<S, S>("events");
    let grouped = events.group_by_key();
    grouped
        .windowed_by(TimeWindows::of_size_with_no_grace(ms(10)))
        .count_with(None, Materialized::as_("tumbling").with_retention(ms(100)));
    grouped
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_no_grace(ms(10)))
        .count_with(None, Materialized::as_("sliding"));
    grouped
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(ms(10)))
        .count_with(None, Materialized::as_("sessions"));
    grouped.count_with(None, Materialized::as_("totals"));
    let other = b.stream::<S, S>("other");
    events
        .join_windowed_with(
            &other,
            |l, r| format!("{l}{r}"),
            JoinWindows::of_time_difference_with_no_grace(ms(10)),
            StreamJoined::default().with_store_name("pairs"),
        )
        .to("joined");
    let topology = b.build().unwrap();
    let within: std::collections::BTreeMap<String, Option<i64>> = topology
        .changelog_topics("app")
        .into_iter()
        .map(|c| (c.store, c.restore_within_retention))
        .collect();
    assert_eq!(within["tumbling"], Some(100));
    assert!(within["sliding"].is_some(), "{within:?}");
    assert_eq!(within["sessions"], None);
    assert_eq!(within["totals"], None);
    let join_stores: Vec<_> = within
        .iter()
        .filter(|(store, _)| store.starts_with("pairs"))
        .collect();
    assert_eq!(join_stores.len(), 2, "{within:?}");
    assert!(
        join_stores.iter().all(|(_, r)| r.is_some()),
        "{join_stores:?}"
    );

    // A window store of one's own restores all its changelog unless its
    // builder says its records are stamped within their windows.
    use kstreams_state::{StoreBuilder, Stores};
    let own = || {
        Stores::window_store_builder(
            Stores::in_memory_window_store("own", ms(100), ms(10), false).unwrap(),
            StringSerde,
            StringSerde,
        )
    };
    assert_eq!(own().restore_within_retention(), None);
    assert_eq!(
        own()
            .with_changelog_stamped_in_window()
            .restore_within_retention(),
        Some(100)
    );
}
