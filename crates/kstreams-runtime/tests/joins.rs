//! Joins with tables in the TopologyTestDriver: the semantics tables of
//! Kafka Streams' developer guide (one key, inputs in timestamp order), and
//! the out-of-order table update that versioned tables with a stream-side
//! grace period join correctly (KIP-914, KIP-923).

use std::time::Duration;

use kstreams_dsl::{Consumed, Joined, Materialized, Produced, StoreType, StreamsBuilder, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn driver(topology: Topology) -> TopologyTestDriver {
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    TopologyTestDriver::with_config(topology, config, 0).unwrap()
}

/// One input of a semantics table: a stream value, a table value, or a
/// table delete, at a timestamp.
enum Input {
    Left(Option<&'static str>),
    Right(Option<&'static str>),
}

use Input::{Left, Right};

/// Rows 1–15 of the developer guide's stream-table tables (key "k",
/// timestamp = row).
fn rows() -> Vec<(i64, Input)> {
    vec![
        (1, Left(None)),
        (2, Right(None)),
        (3, Left(Some("A"))),
        (4, Right(Some("a"))),
        (5, Left(Some("B"))),
        (6, Right(Some("b"))),
        (7, Left(None)),
        (8, Right(None)),
        (9, Left(Some("C"))),
        (10, Right(Some("c"))),
        (11, Right(None)),
        (12, Right(None)),
        (13, Left(Some("D"))),
        (14, Right(Some("d"))),
        (15, Left(Some("D"))),
    ]
}

fn stream_table(left: bool) -> Vec<(S, i64)> {
    let b = StreamsBuilder::new();
    let table = b.table::<S, S>("right");
    let stream = b.stream::<S, S>("left");
    let joined = if left {
        stream.left_join(&table, |l, r| {
            format!("[{l}, {}]", r.map_or("null", |r| r.as_str()))
        })
    } else {
        stream.join(&table, |l, r| format!("[{l}, {r}]"))
    };
    joined.to_with("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(b.build().unwrap());
    let stream_in = driver.create_input_topic("left", StringSerde, StringSerde);
    let table_in = driver.create_input_topic("right", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic("out", StringSerde, StringSerde);
    for (ts, input) in rows() {
        match input {
            // A stream record with a null value is dropped by the join in
            // Kafka Streams; a Rust stream of String has none to send.
            Left(None) => {}
            Left(Some(v)) => stream_in.pipe_input_at(s("k"), s(v), ts),
            Right(v) => table_in.pipe_input_at(s("k"), v.map(s), ts),
        }
    }
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

#[test]
fn stream_table_inner_join_follows_the_developer_guide() {
    assert_eq!(
        stream_table(false),
        vec![(s("[B, a]"), 5), (s("[D, d]"), 15)]
    );
}

#[test]
fn stream_table_left_join_follows_the_developer_guide() {
    assert_eq!(
        stream_table(true),
        vec![
            (s("[A, null]"), 3),
            (s("[B, a]"), 5),
            (s("[C, null]"), 9),
            (s("[D, null]"), 13),
            (s("[D, d]"), 15),
        ]
    );
}

#[derive(Clone, Copy)]
enum Kind {
    Inner,
    Left,
    Outer,
}

fn show(v: Option<&String>) -> String {
    v.cloned().unwrap_or_else(|| s("null"))
}

/// Rows 1–15 of the developer guide's table-table tables: as the
/// stream-table rows up to 11, then the left side is deleted too.
fn table_rows() -> Vec<(i64, Input)> {
    let mut rows: Vec<(i64, Input)> = rows().into_iter().take(11).collect();
    rows.extend([
        (12, Left(None)),
        (13, Right(None)),
        (14, Right(Some("d"))),
        (15, Left(Some("D"))),
    ]);
    rows
}

fn table_table(kind: Kind) -> Vec<(Option<S>, i64)> {
    let b = StreamsBuilder::new();
    let left = b.table::<S, S>("left");
    let right = b.table::<S, S>("right");
    let joined = match kind {
        Kind::Inner => left.join(&right, |l, r| format!("[{l}, {r}]")),
        Kind::Left => left.left_join(&right, |l, r| format!("[{l}, {}]", show(r))),
        Kind::Outer => left.outer_join(&right, |l, r| format!("[{}, {}]", show(l), show(r))),
    };
    joined
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let left_in = driver.create_input_topic("left", StringSerde, Nullable(StringSerde));
    let right_in = driver.create_input_topic("right", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    for (ts, input) in table_rows() {
        match input {
            Left(v) => left_in.pipe_input_at(s("k"), v.map(s), ts),
            Right(v) => right_in.pipe_input_at(s("k"), v.map(s), ts),
        }
    }
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

#[test]
fn table_table_inner_join_follows_the_developer_guide() {
    assert_eq!(
        table_table(Kind::Inner),
        vec![
            (Some(s("[A, a]")), 4),
            (Some(s("[B, a]")), 5),
            (Some(s("[B, b]")), 6),
            (None, 7),
            (Some(s("[C, c]")), 10),
            (None, 11),
            (Some(s("[D, d]")), 15),
        ]
    );
}

#[test]
fn table_table_left_join_follows_the_developer_guide() {
    assert_eq!(
        table_table(Kind::Left),
        vec![
            (Some(s("[A, null]")), 3),
            (Some(s("[A, a]")), 4),
            (Some(s("[B, a]")), 5),
            (Some(s("[B, b]")), 6),
            (None, 7),
            (Some(s("[C, null]")), 9),
            (Some(s("[C, c]")), 10),
            (Some(s("[C, null]")), 11),
            (None, 12),
            (Some(s("[D, d]")), 15),
        ]
    );
}

#[test]
fn table_table_outer_join_follows_the_developer_guide() {
    assert_eq!(
        table_table(Kind::Outer),
        vec![
            (Some(s("[A, null]")), 3),
            (Some(s("[A, a]")), 4),
            (Some(s("[B, a]")), 5),
            (Some(s("[B, b]")), 6),
            (Some(s("[null, b]")), 7),
            (None, 8),
            (Some(s("[C, null]")), 9),
            (Some(s("[C, c]")), 10),
            (Some(s("[C, null]")), 11),
            (None, 12),
            (Some(s("[null, d]")), 14),
            (Some(s("[D, d]")), 15),
        ]
    );
}

/// The first problem users bring: a table update with an earlier timestamp
/// but a later offset than the stream record it should serve.
fn out_of_order_update(versioned_with_grace: bool) -> Vec<(S, i64)> {
    let b = StreamsBuilder::new();
    let materialized = if versioned_with_grace {
        Materialized::as_("prices")
            .with_store_type(StoreType::InMemory)
            .with_versioned_history(Duration::from_secs(60))
    } else {
        Materialized::as_("prices").with_store_type(StoreType::InMemory)
    };
    let table = b.table_with(
        "prices",
        Consumed::with(StringSerde, StringSerde),
        materialized,
    );
    let joined = if versioned_with_grace {
        Joined::default().with_grace_period(Duration::from_millis(10))
    } else {
        Joined::default()
    };
    b.stream::<S, S>("orders")
        .join_with(&table, |order, price| format!("{order}@{price}"), joined)
        .to_with("priced", Produced::with(StringSerde, StringSerde));
    let driver = driver(b.build().unwrap());
    let prices = driver.create_input_topic("prices", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, StringSerde);
    let out = driver.create_output_topic("priced", StringSerde, StringSerde);
    prices.pipe_input_at(s("apple"), Some(s("old price")), 0);
    orders.pipe_input_at(s("apple"), s("order-1"), 10);
    // Valid from 5, so it is the price order-1 (at 10) should get; it
    // arrives after the order.
    prices.pipe_input_at(s("apple"), Some(s("new price")), 5);
    orders.pipe_input_at(s("apple"), s("order-2"), 20);
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

#[test]
fn a_versioned_table_with_grace_joins_the_update_valid_at_the_record_time() {
    // order-1 waits for the grace period (10 ms of stream time), then sees
    // the price valid at 10; order-2 is still held back.
    assert_eq!(
        out_of_order_update(true),
        vec![(s("order-1@new price"), 10)]
    );
}

#[test]
fn without_them_the_join_sees_the_table_as_it_was_when_the_record_came() {
    // Kafka Streams' classic result: the update came too late for order-1.
    assert_eq!(
        out_of_order_update(false),
        vec![(s("order-1@old price"), 10), (s("order-2@new price"), 20)]
    );
}

#[test]
fn grace_without_a_versioned_table_is_a_build_error() {
    let b = StreamsBuilder::new();
    let table = b.table::<S, S>("prices");
    b.stream::<S, S>("orders").join_with(
        &table,
        |o, p| format!("{o}{p}"),
        Joined::default().with_grace_period(Duration::from_millis(10)),
    );
    let err = b.build().unwrap_err().to_string();
    assert!(err.contains("needs a versioned table"), "{err}");
}

fn stream_stream(kind: Kind) -> Vec<(S, i64)> {
    use kstreams_time::JoinWindows;
    let b = StreamsBuilder::new();
    let left = b.stream::<S, S>("left");
    let right = b.stream::<S, S>("right");
    let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_millis(10));
    let joined = match kind {
        Kind::Inner => left.join_windowed(&right, |l, r| format!("[{l}, {r}]"), windows),
        Kind::Left => {
            left.left_join_windowed(&right, |l, r| format!("[{l}, {}]", show(r)), windows)
        }
        Kind::Outer => left.outer_join_windowed(
            &right,
            |l, r| format!("[{}, {}]", show(l), show(r)),
            windows,
        ),
    };
    joined.to_with("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(b.build().unwrap());
    let left_in = driver.create_input_topic("left", StringSerde, StringSerde);
    let right_in = driver.create_input_topic("right", StringSerde, StringSerde);
    let out = driver.create_output_topic("out", StringSerde, StringSerde);
    for (ts, input) in [
        (0, Left(Some("A"))),
        (5, Right(Some("a"))),
        (20, Left(Some("B"))),
        (40, Right(Some("b"))),
        (45, Left(Some("C"))),
        (100, Right(Some("d"))),
        (200, Left(Some("E"))),
    ] {
        match input {
            Left(v) => left_in.pipe_input_at(s("k"), s(v.unwrap()), ts),
            Right(v) => right_in.pipe_input_at(s("k"), s(v.unwrap()), ts),
        }
    }
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

#[test]
fn stream_stream_inner_join_matches_within_the_window() {
    assert_eq!(
        stream_stream(Kind::Inner),
        vec![(s("[A, a]"), 5), (s("[C, b]"), 45)]
    );
}

/// KIP-633: a left record that finds its match later gives no `[A, null]`
/// first; one that never does is emitted once its window has closed.
#[test]
fn stream_stream_left_join_emits_unmatched_records_only_after_their_window() {
    assert_eq!(
        stream_stream(Kind::Left),
        vec![(s("[A, a]"), 5), (s("[B, null]"), 20), (s("[C, b]"), 45)]
    );
}

#[test]
fn stream_stream_outer_join_emits_unmatched_records_of_both_sides() {
    assert_eq!(
        stream_stream(Kind::Outer),
        vec![
            (s("[A, a]"), 5),
            (s("[B, null]"), 20),
            (s("[C, b]"), 45),
            (s("[null, d]"), 100),
        ]
    );
}

/// KStream-GlobalKTable joins look the table up by a key computed from
/// each record; the table is global, so no co-partitioning is needed.
#[test]
fn global_table_joins_look_up_a_selected_key() {
    let b = StreamsBuilder::new();
    let customers = b.global_table::<S, S>("customers");
    let orders = b.stream::<S, S>("orders");
    let customer_of = |_: &S, order: &S| order.split(':').next().unwrap_or_default().to_string();
    orders
        .join_global(&customers, customer_of, |order, name| {
            format!("{order} by {name}")
        })
        .to_with("joined", Produced::with(StringSerde, StringSerde));
    orders
        .left_join_global(&customers, customer_of, |order, name| {
            format!("{order} by {}", name.map_or("nobody", |n| n.as_str()))
        })
        .to_with("left-joined", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(topology.global_stores().len(), 1);
    assert_eq!(
        topology.global_stores()[0].name(),
        "customers-STATE-STORE-0000000000"
    );
    // The global table was declared first: it is sub-topology 0, as Kafka
    // Streams numbers them, and the stream tasks are 1_<partition>.
    assert_eq!(topology.subtopology_ids(), vec![1]);
    let text = topology.describe().to_string();
    assert!(text.contains("Sub-topology: 0 for global store"), "{text}");
    assert!(text.contains("Sub-topology: 1\n"), "{text}");
    let driver = driver(topology);
    let customers_in = driver.create_input_topic("customers", StringSerde, Nullable(StringSerde));
    let orders_in = driver.create_input_topic("orders", StringSerde, StringSerde);
    let joined = driver.create_output_topic("joined", StringSerde, StringSerde);
    let left = driver.create_output_topic("left-joined", StringSerde, StringSerde);
    customers_in.pipe_input(s("c1"), Some(s("Alice")));
    orders_in.pipe_input(s("o1"), s("c1:10"));
    orders_in.pipe_input(s("o2"), s("c2:20"));
    customers_in.pipe_input(s("c1"), None);
    orders_in.pipe_input(s("o3"), s("c1:30"));
    assert_eq!(
        joined.read_key_values_to_list(),
        vec![(s("o1"), s("c1:10 by Alice"))]
    );
    assert_eq!(
        left.read_key_values_to_list(),
        vec![
            (s("o1"), s("c1:10 by Alice")),
            (s("o2"), s("c2:20 by nobody")),
            (s("o3"), s("c1:30 by nobody")),
        ]
    );
}

/// Task ids, changelog owners and source topics use Kafka Streams'
/// sub-topology numbers, global stores included, so a task's directory is
/// named as Kafka Streams names it.
#[test]
fn stream_subtopologies_are_numbered_after_earlier_global_tables() {
    use kstreams_dsl::Grouped;
    let b = StreamsBuilder::new();
    let _first = b.global_table::<S, S>("regions");
    b.stream::<S, S>("clicks")
        .group_by_with(|_, v| v.clone(), Grouped::as_("by-page"))
        .count()
        .to_stream()
        .to_with("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    let _last = b.global_table::<S, S>("currencies");
    let topology = b.build().unwrap();
    // regions = 0, clicks = 1, the repartitioned count = 2, currencies = 3.
    assert_eq!(topology.subtopology_ids(), vec![1, 2]);
    let sources = topology.source_topics("app");
    assert_eq!(sources.iter().map(|s| s.id).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(sources[1].topics, vec![s("app-by-page-repartition")]);
    let changelogs = topology.changelog_topics("app");
    assert_eq!(changelogs.len(), 1);
    assert_eq!(changelogs[0].subtopology, 2);
    assert!(topology.subtopology_has_stores(2));
    assert!(!topology.subtopology_has_stores(1));
    assert!(
        !topology.subtopology_has_stores(0),
        "a global store is no task's"
    );
    let text = topology.describe().to_string();
    for n in 0..4 {
        assert!(text.contains(&format!("Sub-topology: {n}")), "{text}");
    }
    let driver = driver(topology);
    let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
    clicks.pipe_input(s("u1"), s("/home"));
    clicks.pipe_input(s("u2"), s("/home"));
    assert_eq!(
        counts.read_key_values_to_list(),
        vec![(s("/home"), Some(1)), (s("/home"), Some(2))]
    );
}

#[test]
fn joined_topics_form_copartition_groups() {
    let b = StreamsBuilder::new();
    let table = b.table::<S, S>("customers");
    b.stream::<S, S>("orders")
        .join(&table, |o, c| format!("{o}{c}"))
        .to_with("out", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.copartition_groups("app"),
        vec![vec![s("customers"), s("orders")]]
    );
}

fn fk_join(left: bool) -> Vec<(S, Option<S>)> {
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    let orders = b.table::<S, S>("orders");
    let customer_of = |order: &S| order.split(':').next().unwrap_or_default().to_string();
    let amount = |order: &S| order.split(':').nth(1).unwrap_or_default().to_string();
    let joined = if left {
        orders.left_join_fk(&customers, customer_of, move |order, customer| {
            format!(
                "{} by {}",
                amount(order),
                customer.map_or("nobody", |c| c.as_str())
            )
        })
    } else {
        orders.join_fk(&customers, customer_of, move |order, customer| {
            format!("{} by {customer}", amount(order))
        })
    };
    joined
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let topology = b.build().unwrap();
    assert_eq!(
        topology.subtopology_count(),
        2,
        "orders' and customers' partitions"
    );
    let driver = driver(topology);
    let customers = driver.create_input_topic("customers", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    customers.pipe_input(s("c1"), Some(s("Alice")));
    customers.pipe_input(s("c2"), Some(s("Bob")));
    orders.pipe_input(s("o1"), Some(s("c1:10")));
    // The order moves to another customer.
    orders.pipe_input(s("o1"), Some(s("c2:10")));
    customers.pipe_input(s("c2"), Some(s("Bobby")));
    // Nobody subscribes to c1 any more.
    customers.pipe_input(s("c1"), Some(s("Alicia")));
    orders.pipe_input(s("o2"), Some(s("c3:5")));
    customers.pipe_input(s("c3"), Some(s("Carol")));
    orders.pipe_input(s("o1"), None);
    customers.pipe_input(s("c2"), None);
    // A row whose foreign row comes, goes (retracted), and a row moving to
    // a foreign key with no row (retracted).
    orders.pipe_input(s("o3"), Some(s("c4:7")));
    customers.pipe_input(s("c4"), Some(s("Dan")));
    customers.pipe_input(s("c4"), None);
    orders.pipe_input(s("o2"), Some(s("c9:5")));
    out.read_key_values_to_list()
}

/// Foreign-key join (KIP-213): orders join the customer they name, follow
/// a change of customer, see customer updates, and leave a tombstone when
/// deleted.
#[test]
fn foreign_key_join_follows_the_foreign_row() {
    assert_eq!(
        fk_join(false),
        vec![
            (s("o1"), Some(s("10 by Alice"))),
            (s("o1"), Some(s("10 by Bob"))),
            (s("o1"), Some(s("10 by Bobby"))),
            (s("o2"), Some(s("5 by Carol"))),
            (s("o1"), None),
            (s("o3"), Some(s("7 by Dan"))),
            (s("o3"), None),
            (s("o2"), None),
        ]
    );
}

#[test]
fn foreign_key_left_join_keeps_rows_without_a_foreign_row() {
    assert_eq!(
        fk_join(true),
        vec![
            (s("o1"), Some(s("10 by Alice"))),
            (s("o1"), Some(s("10 by Bob"))),
            (s("o1"), Some(s("10 by Bobby"))),
            (s("o2"), Some(s("5 by nobody"))),
            (s("o2"), Some(s("5 by Carol"))),
            (s("o1"), None),
            (s("o3"), Some(s("7 by nobody"))),
            (s("o3"), Some(s("7 by Dan"))),
            (s("o3"), Some(s("7 by nobody"))),
            (s("o2"), Some(s("5 by nobody"))),
        ]
    );
}

/// The result of a foreign-key join sends old values, so an aggregation
/// of it takes rows back out when they change.
#[test]
fn a_foreign_key_join_result_can_be_aggregated() {
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    b.table::<S, S>("orders")
        .join_fk(
            &customers,
            |order: &S| order.clone(),
            |_, region| region.clone(),
        )
        .group_by(|_, region| (region.clone(), region))
        .count()
        .to_stream()
        .to_with(
            "per-region",
            Produced::with(StringSerde, Nullable(kstreams_record::I64Serde)),
        );
    let driver = driver(b.build().unwrap());
    let customers = driver.create_input_topic("customers", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic(
        "per-region",
        StringSerde,
        Nullable(kstreams_record::I64Serde),
    );
    customers.pipe_input(s("c1"), Some(s("EU")));
    customers.pipe_input(s("c2"), Some(s("US")));
    orders.pipe_input(s("o1"), Some(s("c1")));
    orders.pipe_input(s("o1"), Some(s("c2")));
    assert_eq!(
        out.read_key_values_to_list(),
        vec![(s("EU"), Some(1)), (s("EU"), Some(0)), (s("US"), Some(1))]
    );
}

#[test]
fn unmatched_records_with_the_same_key_and_time_are_all_emitted() {
    use kstreams_time::JoinWindows;
    let b = StreamsBuilder::new();
    let left = b.stream::<S, S>("left");
    let right = b.stream::<S, S>("right");
    left.left_join_windowed(
        &right,
        |l, r| format!("[{l}, {}]", show(r)),
        JoinWindows::of_time_difference_with_no_grace(Duration::from_millis(10)),
    )
    .to_with("out", Produced::with(StringSerde, StringSerde));
    let driver = driver(b.build().unwrap());
    let left_in = driver.create_input_topic("left", StringSerde, StringSerde);
    let out = driver.create_output_topic("out", StringSerde, StringSerde);
    left_in.pipe_input_at(s("k"), s("A"), 5);
    left_in.pipe_input_at(s("k"), s("B"), 5);
    left_in.pipe_input_at(s("other"), s("C"), 100);
    assert_eq!(
        out.read_values_to_list(),
        vec![s("[A, null]"), s("[B, null]")]
    );
}

/// A delete of a key one table does not have, while the other has it:
/// Kafka Streams' table-table joins still look the other side up and write
/// the result, a tombstone (inner) or the other side alone (outer).
fn table_table_delete_of_an_absent_key(kind: Kind) -> Vec<(Option<S>, i64)> {
    let b = StreamsBuilder::new();
    let left = b.table::<S, S>("left");
    let right = b.table::<S, S>("right");
    let joined = match kind {
        Kind::Inner => left.join(&right, |l, r| format!("[{l}, {r}]")),
        Kind::Left => left.left_join(&right, |l, r| format!("[{l}, {}]", show(r))),
        Kind::Outer => left.outer_join(&right, |l, r| format!("[{}, {}]", show(l), show(r))),
    };
    joined
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let left_in = driver.create_input_topic("left", StringSerde, Nullable(StringSerde));
    let right_in = driver.create_input_topic("right", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    right_in.pipe_input_at(s("k"), Some(s("a")), 1);
    left_in.pipe_input_at(s("k"), None, 2);
    left_in.pipe_input_at(s("k"), Some(s("A")), 3);
    right_in.pipe_input_at(s("j"), Some(s("b")), 4);
    right_in.pipe_input_at(s("j"), None, 5);
    right_in.pipe_input_at(s("j"), None, 6);
    out.read_records_to_list()
        .into_iter()
        .map(|r| (r.value, r.timestamp))
        .collect()
}

#[test]
fn table_table_joins_write_a_delete_of_an_absent_key() {
    assert_eq!(
        table_table_delete_of_an_absent_key(Kind::Inner),
        vec![(None, 2), (Some(s("[A, a]")), 3)]
    );
    assert_eq!(
        table_table_delete_of_an_absent_key(Kind::Outer),
        vec![
            (Some(s("[null, a]")), 1),
            (Some(s("[null, a]")), 2),
            (Some(s("[A, a]")), 3),
            (Some(s("[null, b]")), 4),
            (None, 5),
        ]
    );
}

/// KIP-149's `ValueJoinerWithKey` on stream-table joins: the joiner sees
/// each record's key, in the inner and the left join.
#[test]
fn stream_table_joiners_with_key_see_the_record_key() {
    let b = StreamsBuilder::new();
    let table = b.table::<S, S>("right");
    let stream = b.stream::<S, S>("left");
    stream
        .join_with_key(
            &table,
            |k, l, r| format!("{k}:{l}+{r}"),
            Joined::as_("keyed-join"),
        )
        .to_with("joined", Produced::with(StringSerde, StringSerde));
    stream
        .left_join_with_key(
            &table,
            |k, l, r| format!("{k}:{l}+{}", show(r)),
            Joined::default(),
        )
        .to_with("left-joined", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    assert!(topology
        .describe()
        .to_string()
        .contains("Processor: keyed-join (stores: [right-STATE-STORE-0000000000])"));
    let driver = driver(topology);
    let left_in = driver.create_input_topic("left", StringSerde, StringSerde);
    let right_in = driver.create_input_topic("right", StringSerde, StringSerde);
    let joined = driver.create_output_topic("joined", StringSerde, StringSerde);
    let left = driver.create_output_topic("left-joined", StringSerde, StringSerde);
    right_in.pipe_input(s("k1"), s("a"));
    left_in.pipe_input(s("k1"), s("A"));
    left_in.pipe_input(s("k2"), s("B"));
    assert_eq!(
        joined.read_key_values_to_list(),
        vec![(s("k1"), s("k1:A+a"))]
    );
    assert_eq!(
        left.read_key_values_to_list(),
        vec![(s("k1"), s("k1:A+a")), (s("k2"), s("k2:B+null"))]
    );
}

/// `ValueJoinerWithKey` on stream-stream joins: the key reaches the joiner
/// for matches and for the unmatched records a left or outer join emits
/// once their window has closed (read back from the shared store).
#[test]
fn stream_stream_joiners_with_key_see_the_key_of_matched_and_unmatched_records() {
    use kstreams_dsl::StreamJoined;
    use kstreams_time::JoinWindows;
    let run = |kind: Kind| {
        let b = StreamsBuilder::new();
        let left = b.stream::<S, S>("left");
        let right = b.stream::<S, S>("right");
        let windows = JoinWindows::of_time_difference_with_no_grace(Duration::from_millis(10));
        let joined = match kind {
            Kind::Inner => left.join_windowed_with_key(
                &right,
                |k, l, r| format!("{k}:[{l}, {r}]"),
                windows,
                StreamJoined::default(),
            ),
            Kind::Left => left.left_join_windowed_with_key(
                &right,
                |k, l, r| format!("{k}:[{l}, {}]", show(r)),
                windows,
                StreamJoined::default(),
            ),
            Kind::Outer => left.outer_join_windowed_with_key(
                &right,
                |k, l, r| format!("{k}:[{}, {}]", show(l), show(r)),
                windows,
                StreamJoined::default(),
            ),
        };
        joined.to_with("out", Produced::with(StringSerde, StringSerde));
        let driver = driver(b.build().unwrap());
        let left_in = driver.create_input_topic("left", StringSerde, StringSerde);
        let right_in = driver.create_input_topic("right", StringSerde, StringSerde);
        let out = driver.create_output_topic("out", StringSerde, StringSerde);
        left_in.pipe_input_at(s("k1"), s("A"), 0);
        right_in.pipe_input_at(s("k1"), s("a"), 5);
        left_in.pipe_input_at(s("k2"), s("B"), 20);
        right_in.pipe_input_at(s("k3"), s("c"), 25);
        // Closes the windows of B and c.
        left_in.pipe_input_at(s("k4"), s("D"), 100);
        out.read_key_values_to_list()
    };
    assert_eq!(run(Kind::Inner), vec![(s("k1"), s("k1:[A, a]"))]);
    assert_eq!(
        run(Kind::Left),
        vec![(s("k1"), s("k1:[A, a]")), (s("k2"), s("k2:[B, null]"))]
    );
    assert_eq!(
        run(Kind::Outer),
        vec![
            (s("k1"), s("k1:[A, a]")),
            (s("k2"), s("k2:[B, null]")),
            (s("k3"), s("k3:[null, c]")),
        ]
    );
}

/// Global-table joins with a name (Kafka Streams' `Named` overloads: the
/// processor takes the name, the generated index is still used up) and
/// with a joiner that sees the stream record's key, not the selected one.
#[test]
fn global_table_joins_can_be_named_and_see_the_record_key() {
    let b = StreamsBuilder::new();
    let customers = b.global_table::<S, S>("customers");
    let orders = b.stream::<S, S>("orders");
    let customer_of = |_: &S, order: &S| order.split(':').next().unwrap_or_default().to_string();
    orders
        .join_global_named(
            &customers,
            customer_of,
            |order, name| format!("{order} by {name}"),
            "by-customer",
        )
        .to_with("joined", Produced::with(StringSerde, StringSerde));
    orders
        .left_join_global_with_key(
            &customers,
            customer_of,
            |id, order, name| format!("{id}={order} by {}", show(name)),
            "left-by-customer",
        )
        .to_with("left-joined", Produced::with(StringSerde, StringSerde));
    orders
        .join_global_with_key(
            &customers,
            customer_of,
            |id, _, name| format!("{id} by {name}"),
            None,
        )
        .to_with("keyed", Produced::with(StringSerde, StringSerde));
    let topology = b.build().unwrap();
    let text = topology.describe().to_string();
    for line in [
        "Processor: by-customer (stores: [])\n      --> KSTREAM-SINK-0000000005",
        "Processor: left-by-customer (stores: [])\n      --> KSTREAM-SINK-0000000007",
        // Each named join used up its generated index all the same.
        "Processor: KSTREAM-LEFTJOIN-0000000008 (stores: [])",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    let driver = driver(topology);
    let customers_in = driver.create_input_topic("customers", StringSerde, Nullable(StringSerde));
    let orders_in = driver.create_input_topic("orders", StringSerde, StringSerde);
    let joined = driver.create_output_topic("joined", StringSerde, StringSerde);
    let left = driver.create_output_topic("left-joined", StringSerde, StringSerde);
    let keyed = driver.create_output_topic("keyed", StringSerde, StringSerde);
    customers_in.pipe_input(s("c1"), Some(s("Alice")));
    orders_in.pipe_input(s("o1"), s("c1:10"));
    orders_in.pipe_input(s("o2"), s("c2:20"));
    assert_eq!(
        joined.read_key_values_to_list(),
        vec![(s("o1"), s("c1:10 by Alice"))]
    );
    assert_eq!(
        left.read_key_values_to_list(),
        vec![
            (s("o1"), s("o1=c1:10 by Alice")),
            (s("o2"), s("o2=c2:20 by null")),
        ]
    );
    assert_eq!(
        keyed.read_key_values_to_list(),
        vec![(s("o1"), s("o1 by Alice"))]
    );
}

/// A table-table join materialized under a name (Kafka Streams'
/// `join(other, joiner, Named, Materialized)`): the merge node keeps each
/// result in the store, deletes included, and a regrouping downstream gets
/// the old values it retracts.
#[test]
fn a_materialized_table_table_join_keeps_its_results_in_the_store() {
    use kstreams_dsl::Grouped;
    use kstreams_state::{TimestampedKeyValueStoreHandle, ValueAndTimestamp};
    let b = StreamsBuilder::new();
    let users = b.table::<S, S>("users");
    let regions = b.table::<S, S>("regions");
    let joined = users.join_with(
        &regions,
        |u, r| format!("{u}/{r}"),
        "user-regions",
        Some(Materialized::as_("user-regions-store")),
    );
    assert_eq!(
        joined.queryable_store_name().as_deref(),
        Some("user-regions-store")
    );
    joined
        .to_stream()
        .to_with("joined", Produced::with(StringSerde, Nullable(StringSerde)));
    joined
        .group_by_with(
            |_, v: S| (v.clone(), v),
            Grouped::with(StringSerde, StringSerde),
        )
        .count()
        .to_stream()
        .to_with("counts", Produced::with(StringSerde, Nullable(I64Serde)));
    let topology = b.build().unwrap();
    let changelogs: Vec<String> = topology
        .changelog_topics("app")
        .into_iter()
        .map(|c| c.store)
        .collect();
    assert!(
        changelogs.contains(&s("user-regions-store")),
        "{changelogs:?}"
    );
    let driver = driver(topology);
    let users_in = driver.create_input_topic("users", StringSerde, Nullable(StringSerde));
    let regions_in = driver.create_input_topic("regions", StringSerde, Nullable(StringSerde));
    let out = driver.create_output_topic("joined", StringSerde, Nullable(StringSerde));
    let counts = driver.create_output_topic("counts", StringSerde, Nullable(I64Serde));
    users_in.pipe_input_at(s("u1"), Some(s("Ada")), 10);
    regions_in.pipe_input_at(s("u1"), Some(s("eu")), 20);
    let store: TimestampedKeyValueStoreHandle<S, S> = driver
        .get_state_store("user-regions-store")
        .unwrap()
        .expect("the join's store");
    // The result's timestamp: the later of the two sides'.
    let stored =
        |store: &TimestampedKeyValueStoreHandle<S, S>| store.borrow().get(&s("u1")).unwrap();
    assert_eq!(
        stored(&store),
        Some(ValueAndTimestamp::make(s("Ada/eu"), 20))
    );
    regions_in.pipe_input_at(s("u1"), Some(s("us")), 30);
    assert_eq!(
        stored(&store),
        Some(ValueAndTimestamp::make(s("Ada/us"), 30))
    );
    users_in.pipe_input_at(s("u1"), None, 40);
    assert_eq!(stored(&store), None);
    assert_eq!(
        out.read_key_values_to_list(),
        vec![
            (s("u1"), Some(s("Ada/eu"))),
            (s("u1"), Some(s("Ada/us"))),
            (s("u1"), None),
        ]
    );
    assert_eq!(
        counts.read_key_values_to_list(),
        vec![
            (s("Ada/eu"), Some(1)),
            (s("Ada/eu"), Some(0)),
            (s("Ada/us"), Some(1)),
            (s("Ada/us"), Some(0)),
        ]
    );
}
