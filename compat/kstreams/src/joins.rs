//! The join scenarios. Each reads two co-partitioned topics, given as
//! `--input FIRST,SECOND`; FIRST is the table side (customers) or the left
//! side, as in Java's `Scenarios`.

use kstreams::prelude::*;

use crate::{FK_JOIN_NAME, FK_JOIN_STORE, JOIN_DIFFERENCE, JOIN_GRACE, NO_CUSTOMER};
use crate::{VERSIONED_HISTORY, VERSIONED_JOIN_GRACE, VERSIONED_STORE};

fn strings() -> Consumed<String, String> {
    Consumed::with(StringSerde, StringSerde)
}

fn produced() -> Produced<String, String> {
    Produced::with(StringSerde, StringSerde)
}

/// A table's changes go out with their tombstones.
fn produced_nullable() -> Produced<String, Option<String>> {
    Produced::with(StringSerde, Nullable(StringSerde))
}

/// Java's `orNull(x)`: the value, or the string "null" for a missing one.
fn or_null(value: Option<&String>) -> &str {
    value.map_or("null", String::as_str)
}

/// stream-table-join: `stream(orders)`, `leftJoin(table(customers),
/// order|name-or-null)`, `to`.
pub(crate) fn stream_table_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let customers = builder.table_with(first, strings(), Materialized::new());
    builder
        .stream_with(second, strings())
        .left_join(&customers, |order, name| {
            format!("{order}|{}", or_null(name))
        })
        .to_with(output, produced());
}

/// table-table-join (and table-table-join-cached): `table(left)`,
/// `join(table(right), l|r)`, `toStream`, `to`.
pub(crate) fn table_table_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let left = builder.table_with(first, strings(), Materialized::new());
    let right = builder.table_with(second, strings(), Materialized::new());
    left.join(&right, |l, r| format!("{l}|{r}"))
        .to_stream()
        .to_with(output, produced_nullable());
}

/// Mirror `Scenarios.TABLE_JOIN_NAME` and `Scenarios.TABLE_JOIN_STORE`:
/// table-table-join-materialized's join name and result store.
const TABLE_JOIN_NAME: &str = "left-right";
const TABLE_JOIN_STORE: &str = "left-right-store";

/// table-table-join-materialized: table-table-join named `left-right`,
/// its result in the store `left-right-store` (`join(other, joiner,
/// Named, Materialized)`).
pub(crate) fn table_table_join_materialized(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let left = builder.table_with(first, strings(), Materialized::new());
    let right = builder.table_with(second, strings(), Materialized::new());
    left.join_with(
        &right,
        |l, r| format!("{l}|{r}"),
        TABLE_JOIN_NAME,
        Some(
            Materialized::as_(TABLE_JOIN_STORE)
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde),
        ),
    )
    .to_stream()
    .to_with(output, produced_nullable());
}

/// table-table-outer-join: as table-table-join with `outerJoin`, "null"
/// for a missing side.
pub(crate) fn table_table_outer_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let left = builder.table_with(first, strings(), Materialized::new());
    let right = builder.table_with(second, strings(), Materialized::new());
    left.outer_join(&right, |l, r| format!("{}|{}", or_null(l), or_null(r)))
        .to_stream()
        .to_with(output, produced_nullable());
}

/// The windows of both stream-stream joins: 3 s apart, 2 s grace.
fn join_windows() -> JoinWindows {
    JoinWindows::of_time_difference_and_grace(JOIN_DIFFERENCE, JOIN_GRACE)
}

fn stream_joined() -> StreamJoined<String, String, String> {
    StreamJoined::with(StringSerde, StringSerde, StringSerde)
}

/// stream-stream-join: `stream(left)`, `leftJoin(stream(right),
/// l|r-or-null, JoinWindows.ofTimeDifferenceAndGrace(3 s, 2 s))`, `to`.
pub(crate) fn stream_stream_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let left = builder.stream_with(first, strings());
    let right = builder.stream_with(second, strings());
    left.left_join_windowed_with(
        &right,
        |l, r| format!("{l}|{}", or_null(r)),
        join_windows(),
        stream_joined(),
    )
    .to_with(output, produced());
}

/// stream-stream-outer-join: as stream-stream-join with `outerJoin`,
/// "null" for a missing side.
pub(crate) fn stream_stream_outer_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let left = builder.stream_with(first, strings());
    let right = builder.stream_with(second, strings());
    left.outer_join_windowed_with(
        &right,
        |l, r| format!("{}|{}", or_null(l), or_null(r)),
        join_windows(),
        stream_joined(),
    )
    .to_with(output, produced());
}

/// foreign-key-join: `table(orders).leftJoin(table(customers), the order's
/// value as the customer id, customerId|name-or-null)`, `toStream`, `to`
/// (Java's `Function<V, KO>` overload: no TableJoined, no Materialized).
pub(crate) fn foreign_key_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let customers = builder.table_with(first, strings(), Materialized::new());
    let orders = builder.table_with(second, strings(), Materialized::new());
    orders
        .left_join_fk(
            &customers,
            |customer_id: &String| customer_id.clone(),
            |customer_id, name| format!("{customer_id}|{}", or_null(name)),
        )
        .to_stream()
        .to_with(output, produced_nullable());
}

/// foreign-key-join-options: foreign-key-join with Kafka Streams 4.4's
/// options (Java's `leftJoin(other, BiFunction, joiner, TableJoined,
/// Materialized)`): the foreign key from the key and the value (KIP-1104),
/// none for an order whose value is `none` (KIP-962: kept, joined with no
/// customer), the join named `orders-with-customers` with both tables
/// partitioned by their keys' number N (`customer-N`, `order-N`) modulo
/// the partition count, and the result in the store
/// `orders-with-customers-store`.
pub(crate) fn foreign_key_join_options(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    // The partitioner of both tables (Java's `ByKeyNumber`): a key `kind-N`
    // to partition N % partitions.
    let by_key_number = |_: &str, key: &String, _: &(), _: &Headers, partitions: i32| {
        let n: i32 = key.rsplit('-').next()?.parse().ok()?;
        Some(vec![n % partitions])
    };
    let customers = builder.table_with(first, strings(), Materialized::new());
    let orders = builder.table_with(second, strings(), Materialized::new());
    orders
        .left_join_fk_with(
            &customers,
            ForeignKeyExtractor::from_key_and_value(|_order_id: &String, customer_id: &String| {
                (customer_id != NO_CUSTOMER).then(|| customer_id.clone())
            }),
            |customer_id, name| format!("{customer_id}|{}", or_null(name)),
            TableJoined::with(by_key_number, by_key_number).with_name(FK_JOIN_NAME),
            Materialized::as_(FK_JOIN_STORE)
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde),
        )
        .to_stream()
        .to_with(output, produced_nullable());
}

/// global-table-join: `stream(orders).leftJoin(globalTable(customers),
/// (orderId, customerId) -> customerId, customerId|name-or-null)`, `to`.
pub(crate) fn global_table_join(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let customers = builder.global_table_with(first, strings(), Materialized::new());
    builder
        .stream_with(second, strings())
        .left_join_global(
            &customers,
            |_order_id, customer_id: &String| customer_id.clone(),
            |customer_id, name| format!("{customer_id}|{}", or_null(name)),
        )
        .to_with(output, produced());
}

/// Mirrors `Scenarios.GLOBAL_JOIN_NAME`: global-table-join-named's join
/// processor.
const GLOBAL_JOIN_NAME: &str = "orders-with-names";

/// global-table-join-named: global-table-join with the join processor named
/// (`Named`) and a joiner that sees the order's key (`ValueJoinerWithKey`):
/// `order|customer|name-or-null`.
pub(crate) fn global_table_join_named(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let customers = builder.global_table_with(first, strings(), Materialized::new());
    builder
        .stream_with(second, strings())
        .left_join_global_with_key(
            &customers,
            |_order_id, customer_id: &String| customer_id.clone(),
            |order_id, customer_id, name| format!("{order_id}|{customer_id}|{}", or_null(name)),
            GLOBAL_JOIN_NAME,
        )
        .to_with(output, produced());
}

/// versioned-join-grace: customers on the versioned store
/// `customers-versioned` (5 minutes of history); `stream(orders)`,
/// `leftJoin(customers, order|name-or-null)` holding each order back for
/// 3 s of stream time (KIP-923), `to`.
pub(crate) fn versioned_join_grace(
    builder: &StreamsBuilder,
    (first, second): (&str, &str),
    output: &str,
) {
    let customers = builder.table_with(
        first,
        strings(),
        Materialized::as_(VERSIONED_STORE)
            .with_versioned_history(VERSIONED_HISTORY)
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    builder
        .stream_with(second, strings())
        .left_join_with(
            &customers,
            |order, name| format!("{order}|{}", or_null(name)),
            // Java's Joined.with(S, S, S): the table's value serde has no
            // place here, the table brings its own.
            Joined::default()
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde)
                .with_grace_period(VERSIONED_JOIN_GRACE),
        )
        .to_with(output, produced());
}
