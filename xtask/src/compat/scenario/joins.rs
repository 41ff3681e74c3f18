//! Join scenarios beyond the co-partitioned ones: foreign-key and global
//! table joins, a stream-table join on a versioned table with a grace
//! period, a table-table join through the record cache, and the outer
//! stream-stream join.

use std::collections::{BTreeMap, HashMap};

use super::{
    by_topic, customer, expect_table_table_join, generate_orders_and_customers,
    generate_two_streams, generate_two_tables, keyed, timestamp, Expect, Rng, Scenario, NAMES,
};
use crate::compat::partitioner::partition_for_key;
use crate::compat::records::Record;

/// A table of orders (key `order-N`, value: a customer id; tombstones
/// delete) left-joined on that foreign key with the customers table:
/// `customer|name` or `customer|null`. Which intermediate results appear
/// depends on how subscriptions and responses meet table updates, so the
/// sides are compared by the final value of each order.
pub(crate) const FOREIGN_KEY_JOIN: Scenario = Scenario {
    name: "foreign-key-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_orders_with_tombstones,
    expect: Expect::FinalValues(expect_foreign_key_join),
};

/// foreign-key-join with Kafka Streams 4.4's options: the join named
/// (`TableJoined#withName`), both tables partitioned by their keys' number
/// N (`customer-N`, `order-N`: N % partitions, in the input topics and by
/// the join's partitioners of both sides), some orders naming no customer
/// (`none`: a null foreign key, kept by the left join as `none|null`,
/// KIP-962), the foreign key read from key and value (KIP-1104) and the
/// result materialized. Compared by final value per order, as
/// foreign-key-join.
pub(crate) const FOREIGN_KEY_JOIN_OPTIONS: Scenario = Scenario {
    name: "foreign-key-join-options",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_orders_by_key_number,
    expect: Expect::FinalValues(expect_foreign_key_join_options),
};

/// The order value that names no customer (Scenarios.NO_CUSTOMER).
const NO_CUSTOMER: &str = "none";

/// A stream of orders (key `order-N`, value: a customer id) left-joined
/// with a global table of customers through that id. A global table is
/// loaded to its end before any record is processed, so every order meets
/// the customers' final names.
pub(crate) const GLOBAL_TABLE_JOIN: Scenario = Scenario {
    name: "global-table-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_orders_by_id,
    expect: Expect::Records(expect_global_table_join),
};

/// stream-table-join's input with one record in four stamped up to 4.5 s
/// early, on a versioned customers table, with a grace period of 3 s on the
/// stream side: an order joins with the name its customer had at the
/// order's time, released in time order once stream time has passed it by
/// the grace; orders later than that join at once (KIP-923).
pub(crate) const VERSIONED_JOIN_GRACE: Scenario = Scenario {
    name: "versioned-join-grace",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_out_of_order_orders,
    expect: Expect::KafkaStreams,
};

/// table-table-join's topology with the record cache on (10 MiB) and three
/// partitions: updates of a key between two commits are merged, so only
/// the final value of each key is fixed.
pub(crate) const TABLE_TABLE_JOIN_CACHED: Scenario = Scenario {
    name: "table-table-join-cached",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_tables,
    expect: Expect::FinalValues(expect_table_table_join),
};

/// table-table-join named `left-right` with its result materialized in
/// `left-right-store` (Kafka Streams' `join(other, joiner, Named,
/// Materialized)`): the same output as table-table-join, and the store's
/// changelog (with both tables') compared byte for byte.
pub(crate) const TABLE_TABLE_JOIN_MATERIALIZED: Scenario = Scenario {
    name: "table-table-join-materialized",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_tables,
    expect: Expect::Records(expect_table_table_join),
};

/// stream-stream-join's input and windows with an outer join: unmatched
/// records of either side are written as `l|null` or `null|r` once their
/// window has closed.
pub(crate) const STREAM_STREAM_OUTER_JOIN: Scenario = Scenario {
    name: "stream-stream-outer-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_streams,
    expect: Expect::KafkaStreams,
};

/// Customers 0 to 19 (three in four of them at first; topic 0), then one
/// record in ten a customer renamed and one in twenty deleted; the rest are
/// orders (topic 1) `order-0` to `order-N` (N a quarter of `records`, so
/// orders are updated) naming customers 0 to 24, with, when
/// `order_tombstones`, one in twelve an order deleted instead. One
/// timestamp a record, growing.
fn orders(rng: &mut Rng, records: usize, partitions: i32, order_tombstones: bool) -> Vec<Record> {
    let name = |rng: &mut Rng| Some(NAMES[rng.below(NAMES.len())].to_owned());
    let mut input = Vec::new();
    for id in 0..20 {
        if rng.below(4) != 0 {
            let at = timestamp(input.len());
            input.push(keyed(
                0,
                partitions,
                at,
                format!("customer-{id}"),
                name(rng),
            ));
        }
    }
    let order_ids = records / 4 + 1;
    for _ in 0..records {
        let at = timestamp(input.len());
        let record = match rng.below(20) {
            0 | 1 => keyed(0, partitions, at, customer(rng, 20), name(rng)),
            2 => keyed(0, partitions, at, customer(rng, 20), None),
            n => {
                let order = format!("order-{}", rng.below(order_ids));
                let deleted = order_tombstones && n == 3 && rng.below(3) != 0;
                let value = (!deleted).then(|| customer(rng, 25));
                keyed(1, partitions, at, order, value)
            }
        };
        input.push(record);
    }
    input
}

fn generate_orders_with_tombstones(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    orders(rng, records, partitions, true)
}

/// foreign-key-join's input with one order in six naming no customer
/// (`none`), every record of both topics at partition N % partitions of
/// its key `customer-N` or `order-N` (not where Kafka's default
/// partitioner would put it).
fn generate_orders_by_key_number(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    let mut input = orders(rng, records, partitions, true);
    for record in &mut input {
        let topic = record.partition / partitions;
        if topic == 1 && record.value.is_some() && rng.below(6) == 0 {
            record.value = Some(NO_CUSTOMER.to_owned());
        }
        record.partition = topic * partitions + key_number(record.key.as_deref()) % partitions;
    }
    input
}

/// N of a key `kind-N` (Scenarios.userNumber).
fn key_number(key: Option<&str>) -> i32 {
    key.and_then(|k| k.rsplit('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Orders as a stream carry no tombstones: a stream-table join drops
/// records without a value before the join, which the expectation here
/// does not model.
fn generate_orders_by_id(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    orders(rng, records, partitions, false)
}

/// The final state of both tables: customers' names and orders' customer
/// ids, each record of the input applied in order.
fn final_tables(input: &[Record], partitions: i32) -> [BTreeMap<String, String>; 2] {
    let mut tables = [BTreeMap::new(), BTreeMap::new()];
    for (topic, record) in by_topic(input, partitions) {
        let key = record.key.unwrap_or_default();
        match record.value {
            Some(value) => tables[topic as usize].insert(key, value),
            None => tables[topic as usize].remove(&key),
        };
    }
    tables
}

/// Each live order with its customer's final name (or `null`).
fn expect_foreign_key_join(input: &[Record], partitions: i32) -> Vec<Record> {
    live_orders_with_final_names(input, FOREIGN_KEY_JOIN.input_partitions, partitions)
}

/// As foreign-key-join: an order naming no customer (`none`) has no
/// customer's name, `none|null` (no customer is keyed `none`).
fn expect_foreign_key_join_options(input: &[Record], partitions: i32) -> Vec<Record> {
    live_orders_with_final_names(input, FOREIGN_KEY_JOIN_OPTIONS.input_partitions, partitions)
}

/// Each live order with its customer's final name (or `null`), where the
/// output's default partitioner puts the order.
fn live_orders_with_final_names(
    input: &[Record],
    input_partitions: i32,
    partitions: i32,
) -> Vec<Record> {
    let [customers, orders] = final_tables(input, input_partitions);
    orders
        .into_iter()
        .map(|(order, customer)| {
            let name = customers.get(&customer).map_or("null", String::as_str);
            Record {
                partition: partition_for_key(order.as_bytes(), partitions),
                timestamp: 0,
                value: Some(format!("{customer}|{name}")),
                key: Some(order),
            }
        })
        .collect()
}

/// global-table-join with the join processor named (Kafka Streams'
/// `Named` overload: both sides must describe the same topology) and a
/// joiner that sees the order's key (`ValueJoinerWithKey`, KIP-149):
/// `order|customer|name-or-null`.
pub(crate) const GLOBAL_TABLE_JOIN_NAMED: Scenario = Scenario {
    name: "global-table-join-named",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_orders_by_id,
    expect: Expect::Records(expect_global_table_join_named),
};

/// Every order, in input order, with its customer's final name (the global
/// table is complete before the first order), at the order's timestamp.
fn expect_global_table_join(input: &[Record], partitions: i32) -> Vec<Record> {
    global_table_join_values(input, partitions, |_, customer, name| {
        format!("{customer}|{name}")
    })
}

/// expect_global_table_join with the order's key in front.
fn expect_global_table_join_named(input: &[Record], partitions: i32) -> Vec<Record> {
    global_table_join_values(input, partitions, |order, customer, name| {
        format!("{order}|{customer}|{name}")
    })
}

/// Every order, in input order, joined by `value(order, customer, name)`
/// with its customer's final name (`null` for none).
fn global_table_join_values(
    input: &[Record],
    partitions: i32,
    value: fn(&str, &str, &str) -> String,
) -> Vec<Record> {
    let input_partitions = GLOBAL_TABLE_JOIN.input_partitions;
    let [customers, _] = final_tables(input, input_partitions);
    by_topic(input, input_partitions)
        .into_iter()
        .filter(|(topic, _)| *topic == 1)
        .map(|(_, order)| {
            let key = order.key.unwrap_or_default();
            let customer = order.value.unwrap_or_default();
            let name = customers.get(&customer).map_or("null", String::as_str);
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: order.timestamp,
                value: Some(value(&key, &customer, name)),
                key: Some(key),
            }
        })
        .collect()
}

/// stream-table-join's input, one record in four moved up to 4.5 s
/// earlier (customers and orders alike: the versioned table keeps each
/// name's validity interval), then per orders partition one order far
/// enough ahead to release every buffered one.
fn generate_out_of_order_orders(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    let mut input = generate_orders_and_customers(rng, records, partitions);
    let mut latest = 0;
    for record in &mut input {
        if rng.below(4) == 0 {
            record.timestamp -= 1 + rng.below(4_500) as i64;
        }
        latest = latest.max(record.timestamp);
    }
    let mut closers: HashMap<i32, String> = HashMap::new();
    for n in 0.. {
        let key = format!("closer-{n}");
        closers
            .entry(partition_for_key(key.as_bytes(), partitions))
            .or_insert(key);
        if closers.len() == partitions as usize {
            break;
        }
    }
    let mut closers: Vec<_> = closers.into_iter().collect();
    closers.sort();
    for (n, (_, key)) in closers.into_iter().enumerate() {
        let at = latest + 10_000 + n as i64;
        input.push(keyed(1, partitions, at, key, Some("close".to_owned())));
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_key_join_keeps_live_orders_with_final_names() {
        let rec = |partition, key: &str, value: Option<&str>| Record {
            partition,
            timestamp: 0,
            key: Some(key.to_owned()),
            value: value.map(str::to_owned),
        };
        // Partitions 0..3 are customers, 3..6 orders.
        let input = [
            rec(0, "customer-1", Some("ada")),
            rec(3, "order-1", Some("customer-1")),
            rec(3, "order-2", Some("customer-2")),
            rec(3, "order-3", Some("customer-1")),
            rec(3, "order-3", None),
            rec(0, "customer-1", Some("grace")),
        ];
        let out: Vec<_> = expect_foreign_key_join(&input, 3)
            .into_iter()
            .map(|r| (r.key.unwrap(), r.value.unwrap()))
            .collect();
        assert_eq!(
            out,
            [
                ("order-1".into(), "customer-1|grace".into()),
                ("order-2".into(), "customer-2|null".into())
            ]
        );
    }

    #[test]
    fn orders_by_key_number_sit_at_their_number_and_some_name_no_customer() {
        let input = FOREIGN_KEY_JOIN_OPTIONS.input(42, 600);
        for record in &input {
            let number = key_number(record.key.as_deref());
            assert_eq!(record.partition % 3, number % 3, "{record:?}");
        }
        let no_customer = input
            .iter()
            .filter(|r| r.value.as_deref() == Some(NO_CUSTOMER))
            .count();
        assert!(no_customer > 10, "{no_customer} orders without a customer");
        let out = expect_foreign_key_join_options(&input, 3);
        assert!(out.iter().any(|r| r.value.as_deref() == Some("none|null")));
    }

    #[test]
    fn out_of_order_orders_end_with_a_closer_per_partition() {
        let input = VERSIONED_JOIN_GRACE.input(7, 200);
        let closers = input
            .iter()
            .filter(|r| r.value.as_deref() == Some("close"))
            .map(|r| r.partition)
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(closers.into_iter().collect::<Vec<_>>(), [3, 4, 5]);
        let early = input.windows(2).filter(|w| w[1].timestamp < w[0].timestamp);
        assert!(early.count() > 10, "some records are out of order");
    }
}
