//! A windowed table regrouped and aggregated again: the re-aggregation
//! takes each window's old value back out, as Kafka Streams does. Kafka
//! Streams' window aggregations forward a new window's first update with
//! the initializer's value as the old value (`KStreamWindowAggregate`,
//! `KStreamSlidingWindowAggregate`), so a count regrouped by count first
//! takes the window out of count "0", where nothing is: a tombstone.
//! `cargo xtask compat windowed-count-histogram` checks the same against
//! Kafka Streams itself.

use std::time::Duration;

use kstreams_dsl::{Grouped, StreamsBuilder, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::Windowed;
use kstreams_time::{SlidingWindows, TimeWindows};

type Histogram = Vec<(String, Option<i64>)>;

/// Per key and window, the count; then how many (key, window) pairs have
/// each count.
fn histogram(
    windowed: impl Fn(&StreamsBuilder) -> kstreams_dsl::KTable<Windowed<String>, i64>,
) -> Topology {
    let b = StreamsBuilder::new();
    windowed(&b)
        .group_by_with(
            |window: &Windowed<String>, count: i64| (count.to_string(), window.key.clone()),
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
    let topology = histogram(|b| {
        b.stream::<String, String>("clicks")
            .group_by_key()
            .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(
                10,
            )))
            .count()
    });
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
    let topology = histogram(|b| {
        b.stream::<String, String>("clicks")
            .group_by_key()
            .windowed_by_sliding(SlidingWindows::of_time_difference_with_no_grace(
                Duration::from_millis(10),
            ))
            .count()
    });
    // The first record makes its left window [0, 10]: new, from 0.
    let out = run(topology, &[("a", 10)]);
    assert_eq!(out, vec![entry("0", None), entry("1", Some(1))]);
}
