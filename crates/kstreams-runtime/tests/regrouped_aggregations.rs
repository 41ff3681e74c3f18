//! An aggregation's table regrouped and aggregated again: the
//! re-aggregation takes each old value back out, as Kafka Streams does.
//! Kafka Streams' stream aggregations forward a key's (or a new window's)
//! first update with the initializer's value as the old value
//! (`KStreamAggregate`, `KStreamWindowAggregate`,
//! `KStreamSlidingWindowAggregate`; without a record cache), so a count
//! regrouped by count first takes the key out of count "0", where nothing
//! is: a tombstone. `cargo xtask compat windowed-count-histogram` checks
//! the windowed case against Kafka Streams itself.

use std::time::Duration;

use kstreams_dsl::{Grouped, StreamsBuilder, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::Windowed;
use kstreams_time::{SlidingWindows, TimeWindows};

type Histogram = Vec<(String, Option<i64>)>;

/// The counts `counts` makes (per user, or per user and window), then how
/// many of them have each count: regrouped by count (`user` names the
/// user of a counted key) and counted.
fn histogram<K: Clone + 'static>(
    counts: impl Fn(&StreamsBuilder) -> kstreams_dsl::KTable<K, i64>,
    user: fn(&K) -> String,
) -> Topology {
    let b = StreamsBuilder::new();
    counts(&b)
        .group_by_with(
            move |key: &K, count: i64| (count.to_string(), user(key)),
            Grouped::with(StringSerde, StringSerde),
        )
        .count()
        .to_stream()
        .to_with(
            "histogram",
            kstreams_dsl::Produced::with(StringSerde, Nullable(I64Serde)),
        );
    b.build().unwrap()
}

fn window_user(window: &Windowed<String>) -> String {
    window.key.clone()
}

fn run(topology: Topology, records: &[(&str, i64)]) -> Histogram {
    // No record cache: every update is forwarded (a cache forwards what it
    // holds at flush, with the store's old value: null for a new window).
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    let driver = TopologyTestDriver::with_config(topology, config, 0).unwrap();
    let input = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let output = driver.create_output_topic("histogram", StringSerde, Nullable(I64Serde));
    for (key, timestamp) in records {
        input.pipe_input_at(key.to_string(), "x".to_string(), *timestamp);
    }
    output.read_key_values_to_list()
}

fn entry(count: &str, value: Option<i64>) -> (String, Option<i64>) {
    (count.to_string(), value)
}

#[test]
fn a_regrouped_tumbling_window_count_takes_each_old_count_out() {
    let topology = histogram(
        |b| {
            b.stream::<String, String>("clicks")
                .group_by_key()
                .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(
                    10,
                )))
                .count()
        },
        window_user,
    );
    // Two records in one window, then one in the next.
    let out = run(topology, &[("a", 1), ("a", 2), ("a", 11)]);
    assert_eq!(
        out,
        vec![
            entry("0", None),
            entry("1", Some(1)),
            entry("1", Some(0)),
            entry("2", Some(1)),
            entry("0", None),
            entry("1", Some(1)),
        ]
    );
}

#[test]
fn a_regrouped_sliding_window_count_takes_each_old_count_out() {
    let topology = histogram(
        |b| {
            b.stream::<String, String>("clicks")
                .group_by_key()
                .windowed_by_sliding(SlidingWindows::of_time_difference_with_no_grace(
                    Duration::from_millis(10),
                ))
                .count()
        },
        window_user,
    );
    // The first record makes its left window [0, 10]: new, from 0.
    let out = run(topology, &[("a", 10)]);
    assert_eq!(out, vec![entry("0", None), entry("1", Some(1))]);
}

#[test]
fn a_regrouped_count_takes_each_old_count_out() {
    let topology = histogram(
        |b| b.stream::<String, String>("clicks").group_by_key().count(),
        String::clone,
    );
    let out = run(topology, &[("a", 1), ("a", 2)]);
    assert_eq!(
        out,
        vec![
            entry("0", None),
            entry("1", Some(1)),
            entry("1", Some(0)),
            entry("2", Some(1)),
        ]
    );
}
