//! Expiry boundaries in the TopologyTestDriver: records exactly at, one
//! millisecond before and one after each boundary of every windowed or
//! time-bounded operator, with caching on (any budget) and off. Each
//! expected output says which comparison of Kafka Streams' (4.x) source
//! decides it.

use std::time::Duration;

use kstreams_dsl::{
    BufferConfig, Consumed, Joined, Materialized, Produced, StoreType, StreamsBuilder, Suppressed,
    Topology,
};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TestInputTopic, TestOutputTopic, TopologyTestDriver};
use kstreams_state::{SessionWindowedSerde, TimeWindowedSerde, Window, Windowed};
use kstreams_time::{EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows};

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

/// How a test runs a store: its engine and its cache.
#[derive(Debug, Clone, Copy)]
struct StoreSetup {
    store_type: StoreType,
    caching: bool,
    /// `statestore.cache.max.bytes`; 0 turns caching off (as Kafka
    /// Streams), 1 keeps the caching layer in the path, writing through.
    cache_max_bytes: usize,
}

/// Every engine, with the cache off, writing through, and holding.
fn store_setups() -> Vec<StoreSetup> {
    let mut out = Vec::new();
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        for (caching, cache_max_bytes) in [(false, 0), (true, 1), (true, 10 << 20)] {
            out.push(StoreSetup {
                store_type,
                caching,
                cache_max_bytes,
            });
        }
    }
    out
}

impl StoreSetup {
    fn materialized<K: 'static, V: 'static>(&self, name: &str) -> Materialized<K, V> {
        let m = Materialized::as_(name).with_store_type(self.store_type);
        if self.caching {
            m.with_caching_enabled()
        } else {
            m.with_caching_disabled()
        }
    }

    fn driver(&self, topology: Topology) -> TopologyTestDriver {
        let mut config = TaskConfig::new("app");
        config.cache_max_bytes = self.cache_max_bytes;
        TopologyTestDriver::with_config(topology, config, 0).unwrap()
    }
}

fn session_count(windows: SessionWindows, setup: StoreSetup) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("clicks")
        .group_by_key()
        .windowed_by_session(windows)
        .count_with(None, setup.materialized("sessions"))
        .to_stream()
        .to_with(
            "sessions",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    b.build().unwrap()
}

/// Gap 5 s, grace 0, stream time 20000: the close time is 15000.
/// `KStreamSessionWindowAggregate.process` drops a record only when
/// `mergedWindow.end() < windowCloseTime` (windowCloseTime =
/// observedStreamTime - grace - gap), so a session ending exactly at 15000
/// is accepted, stored and forwarded; one ending at 14999 is dropped and
/// counted, once. Whether a second record at 15000 finds that session
/// depends on the layer, as in Kafka Streams: its session stores answer
/// `findSessions` only from `observedStreamTime - retentionPeriod + 1`
/// (`getActualFrom`, `kstreams_time::expiry::RetainedTime::first_readable`),
/// so without a cache it counts 1 again; a cache keeps the session after the
/// driver's commit flushed it (clean entries stay) and shows it without a
/// retention bound (`CachingSessionStore`), so with one it counts 2. A cache
/// of 1 byte evicts every entry at once: as none.
#[test]
fn a_session_ending_exactly_at_the_close_time_is_found_again_only_while_cached() {
    let windows = SessionWindows::of_inactivity_gap_with_no_grace(ms(5000));
    for setup in store_setups() {
        let driver = setup.driver(session_count(windows, setup));
        let (input, output) = session_io(&driver, "clicks", "sessions");
        let again = if setup.caching && setup.cache_max_bytes > 1 {
            2
        } else {
            1
        };
        input.pipe_input_at(s("a"), s("c"), 20000);
        input.pipe_input_at(s("at"), s("c"), 15000);
        input.pipe_input_at(s("before"), s("c"), 14999);
        input.pipe_input_at(s("after"), s("c"), 15001);
        input.pipe_input_at(s("at"), s("c"), 15000);
        let got: Vec<_> = output
            .read_records_to_list()
            .into_iter()
            .map(|r| (r.key, r.value, r.timestamp))
            .collect();
        assert_eq!(
            got,
            vec![
                (w("a", 20000, 20000), Some(1), 20000),
                (w("at", 15000, 15000), Some(1), 15000),
                (w("after", 15001, 15001), Some(1), 15001),
                (w("at", 15000, 15000), Some(again), 15000),
            ],
            "{setup:?}"
        );
        assert_eq!(driver.dropped_records(), 1, "{setup:?}");
    }
}

type Input = TestInputTopic<String, String>;
type WindowedOutput = TestOutputTopic<Windowed<String>, Option<i64>>;

/// An input topic and a time-windowed (size 10) count output topic.
fn time_windowed_io(
    driver: &TopologyTestDriver,
    input: &str,
    output: &str,
) -> (Input, WindowedOutput) {
    (
        driver.create_input_topic(input, StringSerde, StringSerde),
        driver.create_output_topic(
            output,
            TimeWindowedSerde::new(StringSerde, 10),
            Nullable(I64Serde),
        ),
    )
}

/// An input topic and a session-windowed count output topic.
fn session_io(driver: &TopologyTestDriver, input: &str, output: &str) -> (Input, WindowedOutput) {
    (
        driver.create_input_topic(input, StringSerde, StringSerde),
        driver.create_output_topic(
            output,
            SessionWindowedSerde::new(StringSerde),
            Nullable(I64Serde),
        ),
    )
}

/// What a windowed output topic got: (window key, value, timestamp).
type WindowedRows = Vec<(Windowed<String>, Option<i64>, i64)>;

fn windowed_rows(output: &WindowedOutput) -> WindowedRows {
    output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect()
}

/// Pipes `records` (key, timestamp), then a record at `before` (one
/// millisecond before the boundary: nothing may come out), then one at
/// `at`: exactly `want` comes out.
fn final_exactly_at(
    (input, output): &(Input, WindowedOutput),
    records: &[(&str, i64)],
    (before, at): (i64, i64),
    want: WindowedRows,
    setup: StoreSetup,
) {
    for (key, ts) in records {
        input.pipe_input_at(s(key), s("x"), *ts);
    }
    input.pipe_input_at(s("clock"), s("x"), before);
    assert!(output.is_empty(), "{setup:?}");
    input.pipe_input_at(s("clock"), s("x"), at);
    assert_eq!(windowed_rows(output), want, "{setup:?}");
}

fn time_windowed_count(windows: TimeWindows, emit: EmitStrategy, setup: StoreSetup) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(emit)
        .count_with(None, setup.materialized("counts"))
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

/// Size 10, grace 5: a record at 25 falls in [20, 30). At stream time 34
/// the close time is 29, at 35 it is 30, at 36 it is 31.
/// `KStreamWindowAggregate.process` updates a window only `if (windowEnd >
/// windowCloseTime)`: open at 29, closed at exactly 30 and after, and each
/// closed window counts one dropped record.
#[test]
fn a_tumbling_window_closes_when_its_end_reaches_the_close_time() {
    let windows = TimeWindows::of_size_and_grace(ms(10), ms(5));
    let w10 = |k: &str, start| w(k, start, start + 10);
    for setup in store_setups() {
        let driver = setup.driver(time_windowed_count(
            windows,
            EmitStrategy::OnWindowUpdate,
            setup,
        ));
        let (input, output) = time_windowed_io(&driver, "events", "counts");
        input.pipe_input_at(s("clock"), s("x"), 34);
        input.pipe_input_at(s("before"), s("x"), 25);
        input.pipe_input_at(s("clock"), s("x"), 35);
        input.pipe_input_at(s("at"), s("x"), 25);
        input.pipe_input_at(s("clock"), s("x"), 36);
        input.pipe_input_at(s("after"), s("x"), 25);
        assert_eq!(
            windowed_rows(&output),
            vec![
                (w10("clock", 30), Some(1), 34),
                (w10("before", 20), Some(1), 25),
                (w10("clock", 30), Some(2), 35),
                (w10("clock", 30), Some(3), 36),
            ],
            "{setup:?}"
        );
        assert_eq!(driver.dropped_records(), 2, "{setup:?}");
    }
}

/// Size 10, advance 5, grace 0: a record at 25 is in [20, 30) and [25, 35).
/// At stream time 30 (close time 30) only [20, 30) is closed: the record
/// updates the other window and counts one drop, per closed window as
/// `KStreamWindowAggregate` records its dropped-records sensor.
#[test]
fn a_hopping_record_is_dropped_only_from_its_closed_windows() {
    let windows = TimeWindows::of_size_with_no_grace(ms(10)).advance_by(ms(5));
    for setup in store_setups() {
        let driver = setup.driver(time_windowed_count(
            windows,
            EmitStrategy::OnWindowUpdate,
            setup,
        ));
        let (input, output) = time_windowed_io(&driver, "events", "counts");
        input.pipe_input_at(s("clock"), s("x"), 30);
        input.pipe_input_at(s("k"), s("x"), 25);
        input.pipe_input_at(s("k"), s("x"), 24);
        let got: Vec<_> = windowed_rows(&output)
            .into_iter()
            .filter(|(key, _, _)| key.key == "k")
            .collect();
        // 24 is in [15, 25) and [20, 30): both closed at 30.
        assert_eq!(got, vec![(w("k", 25, 35), Some(1), 25)], "{setup:?}");
        assert_eq!(driver.dropped_records(), 3, "{setup:?}");
    }
}

/// Emit on window close, size 10, grace 5: [20, 30) is final once the close
/// time reaches its end, at stream time 35 and not at 34
/// (`KStreamWindowAggregate.emitRangeUpperBound` = closeTime - size, an
/// inclusive start bound).
#[test]
fn emit_on_window_close_forwards_a_window_when_its_end_reaches_the_close_time() {
    let windows = TimeWindows::of_size_and_grace(ms(10), ms(5));
    for setup in store_setups() {
        let driver = setup.driver(time_windowed_count(
            windows,
            EmitStrategy::OnWindowClose,
            setup,
        ));
        let io = time_windowed_io(&driver, "events", "counts");
        final_exactly_at(
            &io,
            &[("a", 21), ("a", 29)],
            (34, 35),
            vec![(w("a", 20, 30), Some(2), 29)],
            setup,
        );
        io.0.pipe_input_at(s("clock"), s("x"), 36);
        assert!(io.1.is_empty(), "{setup:?}");
    }
}

fn sliding_count(windows: SlidingWindows, emit: EmitStrategy, setup: StoreSetup) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by_sliding(windows)
        .emit_strategy(emit)
        .count_with(None, setup.materialized("counts"))
        .to_stream()
        .to_with(
            "counts",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    b.build().unwrap()
}

/// Difference 10, grace 5, stream time 30: close time 25. A record at t
/// has its window [t - 10, t]. `KStreamSlidingWindowAggregate.process`
/// first drops it `if (windowEnd < windowCloseTime)` with windowEnd = t +
/// 10 (14 is dropped, 15 passes), then `updateWindowAndForward` updates a
/// window only `if (windowEnd >= windowCloseTime)`, counting a drop
/// otherwise: [5, 15] and [14, 24] are closed, [15, 25] (ending exactly at
/// the close time) and [16, 26] are open.
#[test]
fn a_sliding_window_ending_exactly_at_the_close_time_is_still_open() {
    let windows = SlidingWindows::of_time_difference_and_grace(ms(10), ms(5));
    for setup in store_setups() {
        let driver = setup.driver(sliding_count(windows, EmitStrategy::OnWindowUpdate, setup));
        let (input, output) = time_windowed_io(&driver, "events", "counts");
        input.pipe_input_at(s("clock"), s("x"), 30);
        for (key, ts) in [
            ("early", 14),
            ("own", 15),
            ("before", 24),
            ("at", 25),
            ("after", 26),
        ] {
            input.pipe_input_at(s(key), s("x"), ts);
        }
        assert_eq!(
            windowed_rows(&output),
            vec![
                (w("clock", 20, 30), Some(1), 30),
                (w("at", 15, 25), Some(1), 25),
                (w("after", 16, 26), Some(1), 26),
            ],
            "{setup:?}"
        );
        assert_eq!(driver.dropped_records(), 3, "{setup:?}");
    }
}

/// Emit on window close, difference 10, grace 5: [5, 15] is final once its
/// end is before the close time, at stream time 21 (close 16) and not 20
/// (`KStreamSlidingWindowAggregate.emitRangeUpperBound` = closeTime -
/// difference - 1).
#[test]
fn emit_on_window_close_forwards_a_sliding_window_once_its_end_is_before_the_close_time() {
    let windows = SlidingWindows::of_time_difference_and_grace(ms(10), ms(5));
    for setup in store_setups() {
        let driver = setup.driver(sliding_count(windows, EmitStrategy::OnWindowClose, setup));
        let io = time_windowed_io(&driver, "events", "counts");
        final_exactly_at(
            &io,
            &[("a", 15)],
            (20, 21),
            vec![(w("a", 5, 15), Some(1), 15)],
            setup,
        );
    }
}

/// Emit on window close, gap 5, grace 0: the session [10, 10] is final
/// once its end is before the close time (stream time - gap), at stream
/// time 16 and not 15 (`KStreamSessionWindowAggregate.emitRangeUpperBound`
/// = windowCloseTime - 1, an inclusive end bound). The emission reads the
/// store before this record's put, at the store's stream time 15 and
/// retention 5: the store must still hold a session ending at 15 - 5, and
/// the emission's scan by end time (Kafka Streams' `fetchSessions`) must
/// still see it, though a lookup by key would not.
#[test]
fn emit_on_window_close_forwards_a_session_once_its_end_is_before_the_close_time() {
    let windows = SessionWindows::of_inactivity_gap_with_no_grace(ms(5));
    for setup in store_setups() {
        let b = StreamsBuilder::new();
        b.stream::<S, S>("clicks")
            .group_by_key()
            .windowed_by_session(windows)
            .emit_strategy(EmitStrategy::OnWindowClose)
            .count_with(None, setup.materialized("sessions"))
            .to_stream()
            .to_with(
                "sessions",
                Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
            );
        let driver = setup.driver(b.build().unwrap());
        let io = session_io(&driver, "clicks", "sessions");
        final_exactly_at(
            &io,
            &[("a", 10)],
            (15, 16),
            vec![(w("a", 10, 10), Some(1), 10)],
            setup,
        );
    }
}

#[derive(Clone, Copy, Debug)]
enum JoinKind {
    Inner,
    Left,
    Outer,
}

fn show(v: Option<&String>) -> String {
    v.map_or("null".to_string(), String::clone)
}

fn stream_stream(kind: JoinKind, windows: JoinWindows) -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    let left = b.stream::<S, S>("left");
    let right = b.stream::<S, S>("right");
    let joined = match kind {
        JoinKind::Inner => left.join_windowed(&right, |l, r| format!("[{l}, {r}]"), windows),
        JoinKind::Left => {
            left.left_join_windowed(&right, |l, r| format!("[{l}, {}]", show(r)), windows)
        }
        JoinKind::Outer => left.outer_join_windowed(
            &right,
            |l, r| format!("[{}, {}]", show(l), show(r)),
            windows,
        ),
    };
    joined.to_with("out", Produced::with(StringSerde, StringSerde));
    TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0).unwrap()
}

/// Pipes `(side, key, value, timestamp)` in order; returns (value, timestamp)
/// of every output.
fn run_join(driver: &TopologyTestDriver, input: &[(char, &str, &str, i64)]) -> Vec<(S, i64)> {
    let left = driver.create_input_topic("left", StringSerde, StringSerde);
    let right = driver.create_input_topic("right", StringSerde, StringSerde);
    let out = driver.create_output_topic("out", StringSerde, StringSerde);
    for (side, key, value, ts) in input {
        match side {
            'L' => left.pipe_input_at(s(key), s(value), *ts),
            _ => right.pipe_input_at(s(key), s(value), *ts),
        }
    }
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

/// Before = after = 10: a left record at 20 joins right records in
/// [10, 30], both edges included (`KStreamKStreamJoin.process` fetches
/// `[timestamp - before, timestamp + after]` inclusive), not 9 or 31; the
/// result's timestamp is the later of the two.
#[test]
fn an_inner_join_includes_both_window_edges() {
    let windows = JoinWindows::of_time_difference_and_grace(ms(10), ms(5));
    let got = run_join(
        &stream_stream(JoinKind::Inner, windows),
        &[
            ('L', "k", "L", 20),
            ('R', "k", "r9", 9),
            ('R', "k", "r10", 10),
            ('R', "k", "r30", 30),
            ('R', "k", "r31", 31),
        ],
    );
    assert_eq!(got, vec![(s("[L, r10]"), 20), (s("[L, r30]"), 30)]);
}

/// Before = after = 10, grace 5. An unmatched left record at 20 waits while
/// `timestamp + after + grace >= streamTime` (`isOuterJoinWindowOpen`): at
/// stream time 35 it still waits, at 36 it is emitted. One arriving when
/// its window end (`timeTo` = timestamp + after) is already before stream
/// time is emitted at once (`timeTo < streamTime`, no grace): 25 at stream
/// time 36 is, 26 waits.
#[test]
fn a_left_join_emits_an_unmatched_record_once_window_and_grace_have_passed() {
    let windows = JoinWindows::of_time_difference_and_grace(ms(10), ms(5));
    let got = run_join(
        &stream_stream(JoinKind::Left, windows),
        &[
            ('L', "k", "L20", 20),
            ('R', "other", "x", 35),
            ('R', "other", "x", 36),
            ('L', "j", "L25", 25),
            ('L', "j", "L26", 26),
            ('R', "other", "x", 41),
            ('R', "other", "x", 42),
        ],
    );
    assert_eq!(
        got,
        vec![
            (s("[L20, null]"), 20),
            (s("[L25, null]"), 25),
            (s("[L26, null]"), 26),
        ]
    );
}

/// Before 10, after 0 (`JoinWindows.after(0)`), no grace: a left record
/// waits only `after` for right records (Kafka Streams gives each side its
/// own look-ahead, `getOuterJoinLookBackTimeMs`), but the store is looked
/// at only when the record being processed has passed the tracked minimum
/// by its own processor's look-ahead (`minTime + joinAfterMs + grace <
/// streamTime`, `joinAfterMs` being `before` on the right side): the right
/// records at 5 and 6 leave the left record at 5 waiting, the left record
/// at 7 emits it.
#[test]
fn an_asymmetric_left_join_waits_only_for_its_own_side_look_ahead() {
    let windows = JoinWindows::of_time_difference_with_no_grace(ms(10)).after(ms(0));
    let got = run_join(
        &stream_stream(JoinKind::Left, windows),
        &[
            ('L', "k", "A", 5),
            ('R', "other", "x", 5),
            ('R', "other", "x", 6),
        ],
    );
    assert_eq!(got, vec![]);
    let got = run_join(
        &stream_stream(JoinKind::Left, windows),
        &[
            ('L', "k", "A", 5),
            ('R', "other", "x", 5),
            ('R', "other", "x", 6),
            ('L', "third", "y", 7),
        ],
    );
    assert_eq!(got, vec![(s("[A, null]"), 5)]);
}

/// Outer join, before = after = 10, grace 0: an unmatched right record at
/// 20 waits `before` (a right record's look-ahead) and is emitted at stream
/// time 31, not 30; an open right record does not hold back a closed left
/// one behind it (the loop breaks only when both sides have an open entry).
#[test]
fn an_outer_join_emits_each_side_after_its_own_window() {
    let windows = JoinWindows::of_time_difference_with_no_grace(ms(10));
    let got = run_join(
        &stream_stream(JoinKind::Outer, windows),
        &[
            ('R', "k", "R20", 20),
            ('L', "other", "x", 30),
            ('L', "third", "y", 31),
        ],
    );
    // At 31 the left record at 30 still waits (30 + 10 >= 31).
    assert_eq!(got, vec![(s("[null, R20]"), 20)]);
    let windows = JoinWindows::of_time_difference_with_no_grace(ms(10)).after(ms(2));
    let got = run_join(
        &stream_stream(JoinKind::Outer, windows),
        &[
            // Right waits `before` = 10: until 30; left waits `after` = 2.
            ('R', "k", "R20", 20),
            ('L', "j", "L21", 21),
            ('L', "clock", "c", 24),
        ],
    );
    // At 24: R20 open (20 + 10 >= 24), L21 closed (21 + 2 < 24).
    assert_eq!(got, vec![(s("[L21, null]"), 21)]);
}

fn versioned_join(history: Duration, grace: Option<Duration>, left: bool) -> TopologyTestDriver {
    let b = StreamsBuilder::new();
    let table = b.table_with(
        "prices",
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("prices")
            .with_store_type(StoreType::InMemory)
            .with_versioned_history(history),
    );
    let joined = match grace {
        Some(grace) => Joined::default().with_grace_period(grace),
        None => Joined::default(),
    };
    let orders = b.stream::<S, S>("orders");
    let out = if left {
        orders.left_join_with(&table, |o, p| format!("{o}@{}", show(p)), joined)
    } else {
        orders.join_with(&table, |o, p| format!("{o}@{p}"), joined)
    };
    out.to_with("priced", Produced::with(StringSerde, StringSerde));
    TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0).unwrap()
}

/// Grace 10: a stream record waits in the buffer until `timestamp <=
/// streamTime - grace` (`RocksDBTimeOrderedKeyValueBuffer.evictWhile`
/// fetches up to that time inclusive), so o1 at 10 goes at stream time 20,
/// not 19; a record older than that is not buffered (`put` refuses
/// `streamTime - grace > timestamp`) and joins at once; one exactly at it
/// is buffered and evicted in the same step.
#[test]
fn a_stream_table_join_with_grace_releases_a_record_at_stream_time_minus_grace() {
    let driver = versioned_join(Duration::from_secs(60), Some(ms(10)), false);
    let prices = driver.create_input_topic("prices", StringSerde, StringSerde);
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let out = driver.create_output_topic("priced", StringSerde, StringSerde);
    prices.pipe_input_at(s("k"), s("p0"), 0);
    orders.pipe_input_at(s("k"), s("o1"), 10);
    orders.pipe_input_at(s("k"), s("o2"), 19);
    assert!(out.is_empty());
    orders.pipe_input_at(s("k"), s("o3"), 20);
    assert_eq!(out.read_value(), "o1@p0");
    assert!(out.is_empty());
    orders.pipe_input_at(s("k"), s("late"), 9);
    orders.pipe_input_at(s("k"), s("edge"), 10);
    let got: Vec<_> = out
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect();
    assert_eq!(got, vec![(s("late@p0"), 9), (s("edge@p0"), 10)]);
}

/// History retention 10, the table's stream time 50 (horizon 40): a read
/// as of 40 still sees the history (`RocksDBVersionedStore.get` falls back
/// to the latest version only `if (asOfTimestamp < observedStreamTime -
/// historyRetention)`), as of 39 only the latest version, which started
/// after 39 and so answers nothing.
#[test]
fn versioned_lookups_see_history_exactly_to_the_retention_horizon() {
    let driver = versioned_join(ms(10), None, true);
    let prices = driver.create_input_topic("prices", StringSerde, StringSerde);
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let out = driver.create_output_topic("priced", StringSerde, StringSerde);
    prices.pipe_input_at(s("k"), s("v0"), 0);
    prices.pipe_input_at(s("k"), s("v50"), 50);
    for ts in [39, 40, 41, 50] {
        orders.pipe_input_at(s("k"), format!("o{ts}"), ts);
    }
    assert_eq!(
        out.read_values_to_list(),
        vec![s("o39@null"), s("o40@v0"), s("o41@v0"), s("o50@v50")]
    );
    // A put exactly at the horizon is kept (`put` skips only `timestamp <
    // observedStreamTime - historyRetention`), one before it is not.
    prices.pipe_input_at(s("k"), s("v40"), 40);
    prices.pipe_input_at(s("k"), s("v39"), 39);
    for ts in [40, 45] {
        orders.pipe_input_at(s("k"), format!("o{ts}"), ts);
    }
    assert_eq!(out.read_values_to_list(), vec![s("o40@v40"), s("o45@v40")]);
}

fn suppressed_count(suppressed: Suppressed<Windowed<String>>, setup: StoreSetup) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("events")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(ms(10), ms(2)))
        .count_with(None, setup.materialized("counts"))
        .suppress(suppressed)
        .to_stream()
        .to_with(
            "finals",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    b.build().unwrap()
}

/// Until the window closes, size 10, grace 2: [0, 10) is buffered at its
/// end, 10, and released once `minTimestamp <= streamTime - grace`
/// (`KTableSuppressProcessor.enforceConstraints`): at stream time 12, not
/// 11.
#[test]
fn suppression_until_window_closes_releases_at_end_plus_grace() {
    for setup in store_setups() {
        let driver = setup.driver(suppressed_count(
            Suppressed::until_window_closes(BufferConfig::unbounded()),
            setup,
        ));
        let io = time_windowed_io(&driver, "events", "finals");
        final_exactly_at(
            &io,
            &[("a", 9)],
            (11, 12),
            vec![(w("a", 0, 10), Some(1), 9)],
            setup,
        );
    }
}

/// Until a time limit of 10: an entry buffered at record time 5 goes at
/// stream time 15 (`minTimestamp <= streamTime - 10`), not 14.
#[test]
fn suppression_until_time_limit_releases_exactly_at_the_limit() {
    let b = StreamsBuilder::new();
    b.table_with(
        "in",
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("in").with_caching_disabled(),
    )
    .suppress(Suppressed::until_time_limit(
        ms(10),
        BufferConfig::unbounded(),
    ))
    .to_stream()
    .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver =
        TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0).unwrap();
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("a"), s("a5"), 5);
    input.pipe_input_at(s("clock"), s("c"), 14);
    assert!(output.is_empty());
    input.pipe_input_at(s("clock"), s("c"), 15);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("a"), Some(s("a5")))]
    );
}

/// Records with the same timestamp leave the grace buffer in key order,
/// not arrival order: `RocksDBTimeOrderedKeyValueBuffer` keys its store by
/// `TimeFirstWindowKeySchema` (timestamp, key bytes, sequence number) and
/// evicts in store order.
#[test]
fn a_stream_table_join_with_grace_releases_ties_in_key_order() {
    let driver = versioned_join(Duration::from_secs(60), Some(ms(10)), true);
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let out = driver.create_output_topic("priced", StringSerde, StringSerde);
    for key in ["b", "a", "c", "a"] {
        orders.pipe_input_at(s(key), format!("{key}5"), 5);
    }
    orders.pipe_input_at(s("clock"), s("x"), 15);
    assert_eq!(
        out.read_key_values_to_list(),
        vec![
            (s("a"), s("a5@null")),
            (s("a"), s("a5@null")),
            (s("b"), s("b5@null")),
            (s("c"), s("c5@null")),
        ]
    );
}
