//! Tables and aggregations in the TopologyTestDriver, each expected output
//! written out as Kafka Streams produces it for the same input.

use kstreams_dsl::{
    Consumed, Grouped, Materialized, Produced, StoreType, StreamsBuilder, Topology,
};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{TimestampedKeyValueStoreHandle, ValueAndTimestamp};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn driver_with_cache(topology: Topology, cache_max_bytes: usize) -> TopologyTestDriver {
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = cache_max_bytes;
    TopologyTestDriver::with_config(topology, config, 0).unwrap()
}

fn word_count(store_type: StoreType) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("sentences")
        .flat_map_values(|line| {
            line.to_lowercase()
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .group_by(|_, word| word.clone())
        .count_with(
            None,
            Materialized::as_("counts").with_store_type(store_type),
        )
        .to_stream()
        .to_with(
            "counts-out",
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    b.build().unwrap()
}

#[test]
fn word_count_goes_through_a_repartition_topic_named_after_the_store() {
    let topology = word_count(StoreType::InMemory);
    assert_eq!(topology.subtopology_count(), 2);
    assert_eq!(
        topology.internal_topics().collect::<Vec<_>>(),
        vec!["counts-repartition"]
    );
    let text = topology.describe().to_string();
    assert!(
        text.contains("Sink: counts-repartition-sink (topic: counts-repartition)"),
        "{text}"
    );
    assert!(
        text.contains("Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts])"),
        "{text}"
    );
    assert!(
        text.contains("Processor: KTABLE-TOSTREAM-0000000007"),
        "{text}"
    );
}

#[test]
fn word_count_with_a_cache_coalesces_the_updates_of_one_commit() {
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        let driver = driver_with_cache(word_count(store_type), 10 * 1024 * 1024);
        let input = driver.create_input_topic("sentences", StringSerde, StringSerde);
        let output = driver.create_output_topic("counts-out", StringSerde, Nullable(I64Serde));
        input.pipe_input(s("k"), s("hello hello world"));
        input.pipe_input(s("k"), s("world again"));
        // The driver commits after each input, as Kafka Streams' does: the
        // two updates of "hello" in one input leave the cache as one.
        assert_eq!(
            output.read_key_values_to_list(),
            vec![
                (s("hello"), Some(2)),
                (s("world"), Some(1)),
                (s("world"), Some(2)),
                (s("again"), Some(1)),
            ],
            "{store_type:?}"
        );
    }
}

#[test]
fn word_count_without_a_cache_forwards_every_update() {
    let driver = driver_with_cache(word_count(StoreType::InMemory), 0);
    let input = driver.create_input_topic("sentences", StringSerde, StringSerde);
    let output = driver.create_output_topic("counts-out", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("k"), s("hello hello world"));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("hello"), Some(1)),
            (s("hello"), Some(2)),
            (s("world"), Some(1)),
        ]
    );
    let store: TimestampedKeyValueStoreHandle<S, i64> =
        driver.get_state_store("counts").unwrap().unwrap();
    assert_eq!(
        store.borrow().get(&s("hello")).unwrap().map(|v| v.value),
        Some(2)
    );
}

#[test]
fn aggregation_changelog_holds_timestamped_values() {
    let driver = driver_with_cache(word_count(StoreType::InMemory), 0);
    let input = driver.create_input_topic("sentences", StringSerde, StringSerde);
    let changelog = driver.create_output_topic("app-counts-changelog", StringSerde, I64Serde);
    input.pipe_input_at(s("k"), s("a"), 42);
    let record = changelog.read_record();
    assert_eq!(
        (record.key, record.value, record.timestamp),
        (s("a"), 1, 42)
    );
}

#[test]
fn reduce_and_aggregate_keep_the_largest_timestamp() {
    let b = StreamsBuilder::new();
    let grouped = b.stream::<S, i64>("in").group_by_key();
    grouped
        .reduce_with(|a, b| a + b, None, Materialized::as_("sums"))
        .to_stream()
        .to_with("sums", Produced::with(StringSerde, Nullable(I64Serde)));
    grouped
        .aggregate(String::new, |_, v, agg: String| format!("{agg}{v}"))
        .to_stream()
        .to_with("joined", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("in", StringSerde, I64Serde);
    let sums = driver.create_output_topic("sums", StringSerde, Nullable(I64Serde));
    let joined = driver.create_output_topic("joined", StringSerde, Nullable(StringSerde));
    input.pipe_input_at(s("a"), 1, 10);
    input.pipe_input_at(s("a"), 2, 5);
    input.pipe_input_at(s("b"), 3, 7);
    let got: Vec<_> = sums
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![
            (s("a"), Some(1), 10),
            (s("a"), Some(3), 10),
            (s("b"), Some(3), 7)
        ]
    );
    assert_eq!(
        joined.read_values_to_list(),
        vec![Some(s("1")), Some(s("12")), Some(s("3"))]
    );
}

/// The Kafka Streams docs' example of a table aggregation: users move
/// between regions, a count per region goes down where they left and up
/// where they arrived.
#[test]
fn table_group_by_moves_a_user_between_regions() {
    let b = StreamsBuilder::new();
    b.table::<S, S>("user-regions")
        .group_by(|_user, region| (region.clone(), region))
        .count()
        .to_stream()
        .to_with(
            "region-counts",
            Produced::with(StringSerde, Nullable(I64Serde)),
        );
    let topology = b.build().unwrap();
    let driver = driver_with_cache(topology, 0);
    let input = driver.create_input_topic("user-regions", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("region-counts", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("alice"), Some(s("asia")));
    input.pipe_input(s("bob"), Some(s("europe")));
    input.pipe_input(s("alice"), Some(s("europe")));
    input.pipe_input(s("bob"), None);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("asia"), Some(1)),
            (s("europe"), Some(1)),
            (s("asia"), Some(0)),
            (s("europe"), Some(2)),
            (s("europe"), Some(1)),
        ]
    );
}

#[test]
fn table_filter_sends_tombstones_for_rejected_updates() {
    let b = StreamsBuilder::new();
    b.table::<S, i64>("t")
        .filter(|_, v| *v > 10)
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("t", StringSerde, Nullable(I64Serde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("a"), Some(20));
    input.pipe_input(s("a"), Some(5));
    input.pipe_input(s("b"), None);
    // Without old values (nothing downstream asked for them), every
    // rejected update and every delete goes on as a tombstone.
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("a"), Some(20)), (s("a"), None), (s("b"), None)]
    );
}

#[test]
fn materialized_table_source_is_queryable_and_keeps_timestamps() {
    let b = StreamsBuilder::new();
    let table = b.table_with::<S, S>(
        "t",
        kstreams_dsl::Consumed::with(StringSerde, StringSerde),
        Materialized::as_("t-store").with_store_type(StoreType::InMemory),
    );
    assert_eq!(table.queryable_store_name(), Some(s("t-store")));
    table
        .map_values(|_, v| v.len() as i64)
        .to_stream()
        .to_with("lengths", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("t", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("lengths", StringSerde, Nullable(I64Serde));
    input.pipe_input_at(s("k"), Some(s("abc")), 7);
    input.pipe_input_at(s("k"), None, 8);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k"), Some(3)), (s("k"), None)]
    );
    let store: TimestampedKeyValueStoreHandle<S, S> =
        driver.get_state_store("t-store").unwrap().unwrap();
    assert_eq!(store.borrow().get(&s("k")).unwrap(), None);
    input.pipe_input_at(s("k"), Some(s("x")), 9);
    assert_eq!(
        store.borrow().get(&s("k")).unwrap(),
        Some(ValueAndTimestamp::make(s("x"), 9))
    );
}

#[test]
fn grouping_without_a_serde_is_a_build_error_naming_the_fix() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .map_values(|v| v.len())
        .map(|k, v| (v, k))
        .group_by_key()
        .count();
    let err = b.build().unwrap_err().to_string();
    assert!(err.contains("needs a key serde"), "{err}");
    assert!(err.contains("Grouped::with_key_serde"), "{err}");
}

#[test]
fn group_by_key_after_a_key_change_repartitions_under_the_grouped_name() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .select_key(|_, v| v.clone())
        .group_by_key_with(Grouped::as_("by-value"))
        .count()
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(I64Serde)));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.internal_topics().collect::<Vec<_>>(),
        vec!["by-value-repartition"]
    );
    let driver = driver_with_cache(topology, 0);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("1"), s("x"));
    input.pipe_input(s("2"), s("x"));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("x"), Some(1)), (s("x"), Some(2))]
    );
}

/// Cogroup (KIP-150): three grouped streams of different value types fold
/// into one aggregate per key, in one store, behind one merge node.
#[test]
fn cogroup_folds_several_streams_into_one_aggregate() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<S, S>("clicks").group_by_key();
    let views = b.stream::<S, S>("views").group_by_key();
    let buys = b.stream::<S, i64>("buys").group_by_key();
    clicks
        .cogroup(|_, page: S, agg: S| format!("{agg}click:{page};"))
        .cogroup(&views, |_, page, agg| format!("{agg}view:{page};"))
        .cogroup(&buys, |_, amount, agg| format!("{agg}buy:{amount};"))
        .aggregate_with(String::new, None, Materialized::as_("activity"))
        .to_stream()
        .to_with(
            "activity",
            Produced::with(StringSerde, Nullable(StringSerde)),
        );
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    assert!(
        text.contains("Processor: COGROUPKSTREAM-AGGREGATE-0000000003 (stores: [activity])"),
        "{text}"
    );
    assert!(
        text.contains("Processor: COGROUPKSTREAM-MERGE-0000000006 (stores: [])"),
        "{text}"
    );
    assert_eq!(topology.subtopology_count(), 1);
    let driver = driver_with_cache(topology, 0);
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let views = driver.create_input_topic("views", StringSerde, StringSerde);
    let buys = driver.create_input_topic("buys", StringSerde, I64Serde);
    let output = driver.create_output_topic("activity", StringSerde, Nullable(StringSerde));
    views.pipe_input(s("u1"), s("home"));
    clicks.pipe_input(s("u1"), s("buy-button"));
    buys.pipe_input(s("u1"), 30);
    views.pipe_input(s("u2"), s("home"));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("u1"), Some(s("view:home;"))),
            (s("u1"), Some(s("view:home;click:buy-button;"))),
            (s("u1"), Some(s("view:home;click:buy-button;buy:30;"))),
            (s("u2"), Some(s("view:home;"))),
        ]
    );
}

#[test]
fn windowed_cogroup_sums_per_window() {
    use kstreams_state::{TimeWindowedSerde, Window, Windowed};
    let b = StreamsBuilder::new();
    let a = b.stream::<S, i64>("a").group_by_key();
    let c = b.stream::<S, i64>("b").group_by_key();
    a.cogroup(|_, v: i64, sum: i64| sum + v)
        .cogroup(&c, |_, v, sum| sum + 100 * v)
        .windowed_by(kstreams_time::TimeWindows::of_size_with_no_grace(
            std::time::Duration::from_millis(10),
        ))
        .aggregate(|| 0)
        .to_stream()
        .to_with(
            "sums",
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
        );
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let (a, c, output) = windowed_sums(&driver);
    a.pipe_input_at(s("k"), 1, 1);
    c.pipe_input_at(s("k"), 2, 5);
    a.pipe_input_at(s("k"), 3, 12);
    let w = |start| Windowed::new(s("k"), Window::new(start, start + 10));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(w(0), Some(1)), (w(0), Some(201)), (w(10), Some(3))]
    );
}

type Numbers = kstreams_runtime::TestInputTopic<S, i64>;
type WindowedSums = kstreams_runtime::TestOutputTopic<kstreams_state::Windowed<S>, Option<i64>>;

/// The inputs `a` and `b` of a windowed sum, and its output `sums` (windows
/// of 10 ms).
fn windowed_sums(driver: &TopologyTestDriver) -> (Numbers, Numbers, WindowedSums) {
    let a = driver.create_input_topic("a", StringSerde, I64Serde);
    let b = driver.create_input_topic("b", StringSerde, I64Serde);
    let output = driver.create_output_topic(
        "sums",
        kstreams_state::TimeWindowedSerde::new(StringSerde, 10),
        Nullable(I64Serde),
    );
    (a, b, output)
}

/// A sliding-window cogroup (Kafka Streams' `windowedBy(SlidingWindows)`
/// on a cogroup): each input's aggregator over one window store. It gives
/// what one sliding aggregation of the inputs merged gives, each input's
/// values mapped as its aggregator weighs them, record for record, out of
/// order records within the grace included.
#[test]
fn sliding_window_cogroup_aggregates_as_the_merged_streams_would() {
    use kstreams_state::{TimeWindowedSerde, Windowed};
    use kstreams_time::SlidingWindows;
    let windows = || {
        SlidingWindows::of_time_difference_and_grace(
            std::time::Duration::from_millis(10),
            std::time::Duration::from_millis(5),
        )
    };
    let cogrouped = {
        let b = StreamsBuilder::new();
        let a = b.stream::<S, i64>("a").group_by_key();
        let c = b.stream::<S, i64>("b").group_by_key();
        a.cogroup(|_, v: i64, sum: i64| sum + v)
            .cogroup(&c, |_, v, sum| sum + 100 * v)
            .windowed_by_sliding(windows())
            .aggregate(|| 0)
            .to_stream()
            .to_with(
                "sums",
                Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
            );
        b.build().unwrap()
    };
    let merged = {
        let b = StreamsBuilder::new();
        let a = b.stream::<S, i64>("a");
        let c = b.stream::<S, i64>("b").map_values(|v| 100 * v);
        a.merge(&c)
            .group_by_key()
            .windowed_by_sliding(windows())
            .aggregate(|| 0, |_, v, sum: i64| sum + v)
            .to_stream()
            .to_with(
                "sums",
                Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
            );
        b.build().unwrap()
    };
    let run = |topology| -> Vec<(Windowed<S>, Option<i64>)> {
        let driver = driver_with_cache(topology, 0);
        let (a, c, output) = windowed_sums(&driver);
        // Two keys; 8 after 12 is out of order within the grace, 1 after
        // 30 is late.
        for (input, key, value, ts) in [
            (&a, "k", 1, 10),
            (&c, "k", 2, 15),
            (&a, "j", 3, 12),
            (&c, "k", 4, 8),
            (&a, "k", 5, 21),
            (&c, "j", 6, 30),
            (&a, "k", 7, 1),
            (&c, "k", 8, 26),
        ] {
            input.pipe_input_at(s(key), value, ts);
        }
        output.read_key_values_to_list()
    };
    let expected = run(merged);
    assert!(expected.len() > 8, "{expected:?}");
    assert_eq!(run(cogrouped), expected);
}

/// A filter below an aggregation gets old values for free, so an update
/// that fails the predicate, of a key that never passed it, sends nothing
/// (Kafka Streams' KAFKA-10077) instead of a tombstone.
#[test]
fn filter_below_an_aggregation_sends_no_tombstones_for_keys_never_let_through() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .group_by_key()
        .count()
        .filter(|_, count| *count >= 2)
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("a"), s("x"));
    input.pipe_input(s("a"), s("x"));
    input.pipe_input(s("b"), s("x"));
    assert_eq!(output.read_key_values_to_list(), vec![(s("a"), Some(2))]);
}

#[test]
fn to_table_after_a_key_change_repartitions_and_null_table_keys_are_dropped() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .select_key(|_, v| v.clone())
        .to_table()
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.internal_topics().collect::<Vec<_>>(),
        vec!["KSTREAM-TOTABLE-0000000002-repartition"]
    );

    let b = StreamsBuilder::new();
    b.table::<S, S>("t")
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("t", Nullable(StringSerde), StringSerde);
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input(None, s("no key"));
    input.pipe_input(Some(s("k")), s("v"));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(s("k"), Some(s("v")))]
    );
    assert_eq!(driver.dropped_records(), 1);
}

#[test]
fn two_aggregations_of_one_named_grouping_share_its_repartition_topic() {
    let b = StreamsBuilder::new();
    let grouped = b
        .stream::<S, S>("in")
        .group_by_with(|_, v| v.clone(), Grouped::as_("by-value"));
    grouped.count();
    grouped.reduce(|a, b| format!("{a}{b}"));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.internal_topics().collect::<Vec<_>>(),
        vec!["by-value-repartition"]
    );
    let text = topology.describe().to_string();
    assert!(text.contains("Processor: by-value (stores: [])"), "{text}");
}

/// The shape of topology the stateful DSL issue names: a stream
/// left-joined to two tables, then cogrouped with four more grouped
/// streams (five in all) into one aggregate per customer.
#[test]
fn stream_joined_to_two_tables_then_cogrouped_with_five_grouped_streams() {
    /// Counters per customer: orders, order total, payments, returns,
    /// reviews, clicks, and the last tier/region seen on an order.
    fn bump(agg: &str, field: usize, by: i64, tag: Option<String>) -> String {
        let mut parts: Vec<String> = if agg.is_empty() {
            vec!["0".into(); 6]
                .into_iter()
                .chain([String::from("-")])
                .collect()
        } else {
            agg.split('|').map(str::to_owned).collect()
        };
        let n: i64 = parts[field].parse().unwrap();
        parts[field] = (n + by).to_string();
        if let Some(tag) = tag {
            parts[6] = tag;
        }
        parts.join("|")
    }
    let b = StreamsBuilder::new();
    let tiers = b.table::<S, S>("tiers");
    let regions = b.table::<S, S>("regions");
    let orders = b
        .stream::<S, i64>("orders")
        .left_join(&tiers, |amount, tier| {
            (*amount, tier.cloned().unwrap_or_else(|| s("none")))
        })
        .left_join(&regions, |(amount, tier), region| {
            format!("{amount}/{tier}/{}", region.map_or("none", |r| r.as_str()))
        })
        .group_by_key();
    let payments = b.stream::<S, i64>("payments").group_by_key();
    let returns = b.stream::<S, S>("returns").group_by_key();
    let reviews = b.stream::<S, S>("reviews").group_by_key();
    let clicks = b.stream::<S, S>("clicks").group_by_key();
    orders
        .cogroup(|_, order: S, agg: S| {
            let mut fields = order.split('/');
            let amount: i64 = fields.next().unwrap().parse().unwrap();
            let tag = format!("{}@{}", fields.next().unwrap(), fields.next().unwrap());
            let agg = bump(&agg, 0, 1, Some(tag));
            bump(&agg, 1, amount, None)
        })
        .cogroup(&payments, |_, paid, agg| bump(&agg, 2, paid, None))
        .cogroup(&returns, |_, _, agg| bump(&agg, 3, 1, None))
        .cogroup(&reviews, |_, _, agg| bump(&agg, 4, 1, None))
        .cogroup(&clicks, |_, _, agg| bump(&agg, 5, 1, None))
        .aggregate_with(String::new, None, Materialized::as_("customer-activity"))
        .to_stream()
        .to_with(
            "activity",
            Produced::with(StringSerde, Nullable(StringSerde)),
        );
    let topology = b.build().unwrap();
    // Joins and cogroup keep every input in one task per partition.
    assert_eq!(topology.subtopology_count(), 1);
    let driver = driver_with_cache(topology, 0);
    let tiers = driver.create_input_topic("tiers", StringSerde, Nullable(StringSerde));
    let regions = driver.create_input_topic("regions", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, I64Serde);
    let payments = driver.create_input_topic("payments", StringSerde, I64Serde);
    let returns = driver.create_input_topic("returns", StringSerde, StringSerde);
    let reviews = driver.create_input_topic("reviews", StringSerde, StringSerde);
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let out = driver.create_output_topic("activity", StringSerde, Nullable(StringSerde));
    tiers.pipe_input(s("c1"), Some(s("gold")));
    regions.pipe_input(s("c1"), Some(s("EU")));
    clicks.pipe_input(s("c1"), s("home"));
    orders.pipe_input(s("c1"), 30);
    payments.pipe_input(s("c1"), 30);
    orders.pipe_input(s("c2"), 5);
    reviews.pipe_input(s("c1"), s("5 stars"));
    returns.pipe_input(s("c2"), s("damaged"));
    assert_eq!(
        out.read_key_values_to_list(),
        vec![
            (s("c1"), Some(s("0|0|0|0|0|1|-"))),
            (s("c1"), Some(s("1|30|0|0|0|1|gold@EU"))),
            (s("c1"), Some(s("1|30|30|0|0|1|gold@EU"))),
            (s("c2"), Some(s("1|5|0|0|0|0|none@none"))),
            (s("c1"), Some(s("1|30|30|0|1|1|gold@EU"))),
            (s("c2"), Some(s("1|5|0|1|0|0|none@none"))),
        ]
    );
}

/// A cache flush forwards each update with the headers of the record that
/// made it, as Kafka Streams' cache keeps the record context of a write;
/// with the cache off every update carries its own record's headers.
#[test]
fn cached_and_uncached_updates_keep_the_headers_of_the_record_that_made_them() {
    use kstreams_record::{Headers, Record};
    let trace = |record: &Record<String, Option<i64>>| {
        record
            .headers
            .last("trace")
            .and_then(|h| h.value.clone())
            .map(|v| String::from_utf8(v).unwrap())
    };
    for cache_max_bytes in [10 * 1024 * 1024, 0] {
        for store_type in [StoreType::InMemory, StoreType::RocksDb] {
            let driver = driver_with_cache(word_count(store_type), cache_max_bytes);
            let input = driver.create_input_topic("sentences", StringSerde, StringSerde);
            let output = driver.create_output_topic("counts-out", StringSerde, Nullable(I64Serde));
            for (line, id) in [("hello hello world", "t1"), ("world again", "t2")] {
                let mut record = Record::new(s("k"), s(line), 0);
                record.headers = Headers::new().with("trace", id);
                input.pipe_record(record);
            }
            let got: Vec<(String, Option<i64>, Option<String>)> = output
                .read_records_to_list()
                .iter()
                .map(|r| (r.key.clone(), r.value, trace(r)))
                .collect();
            let t = |id: &str| Some(s(id));
            let mut expected = vec![
                (s("hello"), Some(2), t("t1")),
                (s("world"), Some(1), t("t1")),
                (s("world"), Some(2), t("t2")),
                (s("again"), Some(1), t("t2")),
            ];
            if cache_max_bytes == 0 {
                expected.insert(0, (s("hello"), Some(1), t("t1")));
            }
            assert_eq!(got, expected, "{store_type:?}, cache {cache_max_bytes}");
        }
    }
}

/// Replaces a record's headers, as a processor may.
struct Restamp;

impl kstreams_dsl::FixedKeyProcessor<S, S, S> for Restamp {
    fn process(
        &mut self,
        ctx: &mut kstreams_dsl::FixedKeyProcessorContext<'_, '_, S, S>,
        record: kstreams_dsl::FixedKeyRecord<S, S>,
    ) -> Result<(), kstreams_dsl::ProcessorError> {
        let headers = kstreams_record::Headers::new().with("stage", "restamped");
        ctx.forward(record.with_headers(headers))?;
        Ok(())
    }
}

/// A caching store keeps the headers of the record as its node got it, not
/// as the source read it: a processor upstream replaced them.
#[test]
fn a_cache_keeps_the_headers_its_node_saw() {
    use kstreams_record::{Headers, Record};
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .process_values(|| Restamp, &[])
        .group_by_key()
        .count()
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 10 * 1024 * 1024);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, Nullable(I64Serde));
    let mut record = Record::new(s("k"), s("v"), 0);
    record.headers = Headers::new().with("stage", "source");
    input.pipe_record(record);
    let out = output.read_records_to_list();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].headers.last("stage").and_then(|h| h.value.clone()),
        Some(b"restamped".to_vec())
    );
}

/// `stream.toTable(Materialized.as("latest"))` on a stream whose values may
/// be null: as Kafka Streams' `KTableSource`, a null value deletes the key
/// (the store forgets it, a stream-table join no longer finds it, the
/// table's update is a tombstone) instead of keeping a null as the value.
#[test]
fn to_table_reads_a_null_value_as_a_delete_of_its_key() {
    let b = StreamsBuilder::new();
    let latest = b
        .stream_with::<S, Option<S>>("in", Consumed::with(StringSerde, Nullable(StringSerde)))
        .to_table_with(None, Materialized::as_("latest"));
    latest.to_stream().to_with(
        "updates",
        Produced::with(StringSerde, Nullable(Nullable(StringSerde))),
    );
    b.stream::<S, S>("orders")
        .left_join(&latest, |order, found| {
            format!(
                "{order}/{}",
                found.map_or("none", |v| v.as_deref().unwrap_or("null"))
            )
        })
        .to("joined");
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("in", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let updates = driver.create_output_topic("updates", StringSerde, Nullable(StringSerde));
    let joined = driver.create_output_topic("joined", StringSerde, StringSerde);
    let store: TimestampedKeyValueStoreHandle<S, Option<S>> =
        driver.get_state_store("latest").unwrap().unwrap();

    input.pipe_input_at(s("a"), Some(s("1")), 10);
    orders.pipe_input_at(s("a"), s("o1"), 11);
    assert_eq!(
        store.borrow().get(&s("a")).unwrap(),
        Some(ValueAndTimestamp::make(Some(s("1")), 10))
    );
    input.pipe_input_at(s("a"), None, 12);
    orders.pipe_input_at(s("a"), s("o2"), 13);
    assert_eq!(store.borrow().get(&s("a")).unwrap(), None);
    assert_eq!(
        updates.read_key_values_to_list(),
        vec![(s("a"), Some(s("1"))), (s("a"), None)]
    );
    assert_eq!(
        joined.read_key_values_to_list(),
        vec![(s("a"), s("o1/1")), (s("a"), s("o2/none"))]
    );
    assert_eq!(driver.dropped_records(), 0);
}

/// A null value deletes the key downstream of an unmaterialized
/// `toTable()` too: a table aggregation subtracts the old value and adds
/// nothing (Kafka Streams' `KTableSource` forwards `Change(null, old)`).
#[test]
fn to_table_null_value_is_subtracted_by_a_table_aggregation() {
    let b = StreamsBuilder::new();
    b.stream_with::<S, Option<S>>("in", Consumed::with(StringSerde, Nullable(StringSerde)))
        .to_table()
        .group_by_with(
            |_, v: Option<S>| (v.unwrap_or_default(), 1i64),
            Grouped::with(StringSerde, I64Serde),
        )
        .count()
        .to_stream()
        .to_with("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("in", StringSerde, Nullable(StringSerde));
    let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("a"), Some(s("red")));
    input.pipe_input(s("b"), Some(s("red")));
    input.pipe_input(s("a"), None);
    assert_eq!(
        counts.read_key_values_to_list(),
        vec![
            (s("red"), Some(1)),
            (s("red"), Some(2)),
            (s("red"), Some(1))
        ]
    );
}

/// A null key cannot be a table's key: `toTable()` drops the record and
/// counts it, as Kafka Streams' `KTableSource` ("Skipping record due to
/// null key").
#[test]
fn to_table_drops_and_counts_a_null_key() {
    let b = StreamsBuilder::new();
    b.stream_with::<Option<S>, S>("in", Consumed::with(Nullable(StringSerde), StringSerde))
        .to_table()
        .to_stream()
        .to_with(
            "out",
            Produced::with(Nullable(StringSerde), Nullable(StringSerde)),
        );
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("in", Nullable(StringSerde), StringSerde);
    let output = driver.create_output_topic("out", Nullable(StringSerde), Nullable(StringSerde));
    input.pipe_input(None, s("no key"));
    input.pipe_input(Some(s("k")), s("v"));
    assert_eq!(
        output.read_key_values_to_list(),
        vec![(Some(s("k")), Some(s("v")))]
    );
    assert_eq!(driver.dropped_records(), 1);
}

/// Counts each key's updates in the store "seen" and tags the value with
/// the count; a delete becomes `gone#n` (a transformer sees deletes, and
/// what it returns is the value). Logs every call.
struct CountingTag {
    seen: Option<kstreams_state::KeyValueStoreHandle<S, i64>>,
    calls: Calls,
}

impl kstreams_dsl::ValueTransformerWithKey<S, S, S> for CountingTag {
    fn init(
        &mut self,
        ctx: &kstreams_dsl::ValueTransformerContext<'_>,
    ) -> Result<(), kstreams_dsl::ProcessorError> {
        self.seen = Some(ctx.get_state_store("seen")?);
        Ok(())
    }

    fn transform(
        &mut self,
        key: &S,
        value: Option<S>,
    ) -> Result<Option<S>, kstreams_dsl::ProcessorError> {
        self.calls
            .lock()
            .unwrap()
            .push((key.clone(), value.clone()));
        let seen = self.seen.as_ref().ok_or("not initialized")?;
        let n = seen.borrow().get(key)?.unwrap_or(0) + 1;
        seen.borrow_mut().put(key.clone(), n)?;
        Ok(Some(match value {
            Some(v) => format!("{v}#{n}"),
            None => format!("gone#{n}"),
        }))
    }
}

fn seen_store() -> impl kstreams_state::StoreBuilder {
    kstreams_state::Stores::key_value_store_builder(
        kstreams_state::Stores::in_memory_key_value_store("seen"),
        StringSerde,
        I64Serde,
    )
}

type Calls = std::sync::Arc<std::sync::Mutex<Vec<(S, Option<S>)>>>;

/// `table.transformValues(supplier, "seen")`: a per-key transformer with a
/// state store, called for a delete too (Kafka Streams'
/// `KTableTransformValues` calls `transform(key, null)`).
#[test]
fn table_transform_values_uses_its_store_and_sees_deletes() {
    let calls: Calls = Default::default();
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    let log = calls.clone();
    b.table_with::<S, S>(
        "prices",
        Consumed::with(StringSerde, StringSerde),
        Materialized::new(),
    )
    .transform_values(
        move || CountingTag {
            seen: None,
            calls: log.clone(),
        },
        &["seen"],
    )
    .to_stream()
    .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("prices", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    input.pipe_input(s("a"), Some(s("1")));
    input.pipe_input(s("b"), Some(s("1")));
    input.pipe_input(s("a"), Some(s("2")));
    input.pipe_input(s("a"), None);
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("a"), Some(s("1#1"))),
            (s("b"), Some(s("1#1"))),
            (s("a"), Some(s("2#2"))),
            (s("a"), Some(s("gone#3"))),
        ]
    );
    // No old values needed downstream: one call per update.
    assert_eq!(calls.lock().unwrap().len(), 4);
}

/// Unmaterialized, with old values needed downstream (a `groupBy`): as
/// Kafka Streams' `KTableTransformValuesProcessor`, the transformer runs
/// on the new value and then on the old one (null for a key's first
/// update), and the old result is what the aggregation subtracts.
#[test]
fn table_transform_values_computes_old_values_with_a_second_call() {
    let calls: Calls = Default::default();
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    let log = calls.clone();
    b.table::<S, S>("prices")
        .transform_values(
            move || CountingTag {
                seen: None,
                calls: log.clone(),
            },
            &["seen"],
        )
        .group_by_with(|_, v: S| (v, 1i64), Grouped::with(StringSerde, I64Serde))
        .count()
        .to_stream()
        .to_with("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("prices", StringSerde, StringSerde);
    let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
    input.pipe_input(s("a"), s("x"));
    input.pipe_input(s("a"), s("y"));
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            (s("a"), Some(s("x"))),
            (s("a"), None),
            (s("a"), Some(s("y"))),
            (s("a"), Some(s("x"))),
        ]
    );
    // The old results are the second calls' (`gone#2` for the first
    // update's null, then `x#4`: the store counted every call). As Kafka
    // Streams' KTableRepartitionMap, the old pair goes first; subtracted
    // from no aggregate, it leaves none (a tombstone).
    assert_eq!(
        counts.read_key_values_to_list(),
        vec![
            (s("gone#2"), None),
            (s("x#1"), Some(1)),
            (s("x#4"), None),
            (s("y#3"), Some(1)),
        ]
    );
}

/// Materialized (`transformValues(supplier, Materialized.as("tagged"),
/// Named.as("tag"), "seen")`): old values come from the store, so the
/// transformer runs once per update; the store holds its results.
#[test]
fn table_transform_values_materialized_reads_old_values_from_its_store() {
    let calls: Calls = Default::default();
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    let log = calls.clone();
    let tagged = b.table::<S, S>("prices").transform_values_with(
        move || CountingTag {
            seen: None,
            calls: log.clone(),
        },
        &["seen"],
        kstreams_dsl::Named::new("tag"),
        Some(Materialized::as_("tagged").with_value_serde(StringSerde)),
    );
    assert_eq!(tagged.queryable_store_name(), Some(s("tagged")));
    tagged
        .group_by_with(|_, v: S| (v, 1i64), Grouped::with(StringSerde, I64Serde))
        .count()
        .to_stream()
        .to_with("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let input = driver.create_input_topic("prices", StringSerde, StringSerde);
    let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
    input.pipe_input_at(s("a"), s("x"), 5);
    input.pipe_input_at(s("a"), s("y"), 6);
    assert_eq!(calls.lock().unwrap().len(), 2);
    assert_eq!(
        counts.read_key_values_to_list(),
        vec![
            (s("x#1"), Some(1)),
            (s("x#1"), Some(0)),
            (s("y#2"), Some(1))
        ]
    );
    let store: TimestampedKeyValueStoreHandle<S, S> =
        driver.get_state_store("tagged").unwrap().unwrap();
    assert_eq!(
        store.borrow().get(&s("a")).unwrap(),
        Some(ValueAndTimestamp::make(s("y#2"), 6))
    );
}

/// Upper-cases values; in `init` it takes the store "seen" (which a join's
/// lookup transformer must find too).
struct Upper {
    seen: Option<kstreams_state::KeyValueStoreHandle<S, i64>>,
}

impl kstreams_dsl::ValueTransformerWithKey<S, S, S> for Upper {
    fn init(
        &mut self,
        ctx: &kstreams_dsl::ValueTransformerContext<'_>,
    ) -> Result<(), kstreams_dsl::ProcessorError> {
        self.seen = Some(ctx.get_state_store("seen")?);
        Ok(())
    }

    fn transform(
        &mut self,
        _: &S,
        value: Option<S>,
    ) -> Result<Option<S>, kstreams_dsl::ProcessorError> {
        self.seen.as_ref().ok_or("not initialized")?;
        Ok(value.map(|v| v.to_uppercase()))
    }
}

/// A stream-table join on an unmaterialized `transformValues`: the join
/// reads the parent's value through a transformer of its own (Kafka
/// Streams' `KTableTransformValuesGetter`).
#[test]
fn stream_join_reads_an_unmaterialized_transform_values_through_the_transformer() {
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    let names = b
        .table::<S, S>("names")
        .transform_values(|| Upper { seen: None }, &["seen"]);
    b.stream::<S, S>("orders")
        .left_join(&names, |order, name| {
            format!("{order} for {}", name.map_or("nobody", |n| n.as_str()))
        })
        .to("out");
    let driver = driver_with_cache(b.build().unwrap(), 0);
    let names_in = driver.create_input_topic("names", StringSerde, StringSerde);
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    orders.pipe_input(s("1"), s("tea"));
    names_in.pipe_input(s("1"), s("ada"));
    orders.pipe_input(s("1"), s("cake"));
    assert_eq!(
        output.read_values_to_list(),
        vec![s("tea for nobody"), s("cake for ADA")]
    );
}
