//! Foreign-key joins with Kafka Streams 4.4's options in the
//! TopologyTestDriver: a foreign key that may be absent (KIP-962), read
//! from the key and the value (KIP-1104), a named join with partitioners
//! of the application's own (`TableJoined`) and a materialized, queryable
//! result. The describe() text of named joins is checked against Kafka
//! Streams' in kstreams-dsl's tests/describe.rs; the broker side (three
//! partitions, partitioners choosing among them) is the
//! `foreign-key-join-options` compat scenario.

use std::sync::{Arc, Mutex};

use kstreams_dsl::{
    ForeignKeyExtractor, KTable, Materialized, Produced, StreamsBuilder, StreamsError, TableJoined,
    Topology,
};
use kstreams_record::{Headers, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{TimestampedKeyValueStoreHandle, ValueAndTimestamp};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn driver(topology: Topology) -> TopologyTestDriver {
    let mut config = TaskConfig::new("app");
    config.cache_max_bytes = 0;
    TopologyTestDriver::with_config(topology, config, 0).unwrap()
}

/// An order's value names its customer, or "none" for no customer.
fn customer_of(order: &S) -> Option<S> {
    (order != "none").then(|| order.clone())
}

/// `orders` joined with `customers` on the customer an order names
/// (inner or left), the results written to "out" as `order|name`.
fn joined_orders(left: bool) -> (TopologyTestDriver, Pipes) {
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    let orders = b.table::<S, S>("orders");
    let extractor = ForeignKeyExtractor::from_value(customer_of);
    let joined: KTable<S, S> = if left {
        orders.left_join_fk_with(
            &customers,
            extractor,
            |order, name| format!("{order}|{}", name.map_or("null", String::as_str)),
            TableJoined::default(),
            Materialized::new(),
        )
    } else {
        orders.join_fk_with(
            &customers,
            extractor,
            |order, name| format!("{order}|{name}"),
            TableJoined::default(),
            Materialized::new(),
        )
    };
    joined
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let pipes = Pipes::new(&driver);
    (driver, pipes)
}

struct Pipes {
    customers: kstreams_runtime::TestInputTopic<S, Option<S>>,
    orders: kstreams_runtime::TestInputTopic<S, Option<S>>,
    out: kstreams_runtime::TestOutputTopic<S, Option<S>>,
}

impl Pipes {
    fn new(driver: &TopologyTestDriver) -> Self {
        Pipes {
            customers: driver.create_input_topic("customers", StringSerde, Nullable(StringSerde)),
            orders: driver.create_input_topic("orders", StringSerde, Nullable(StringSerde)),
            out: driver.create_output_topic("out", StringSerde, Nullable(StringSerde)),
        }
    }

    fn customer(&self, id: &str, name: Option<&str>) {
        self.customers.pipe_input(s(id), name.map(s));
    }

    fn order(&self, id: &str, customer: Option<&str>) {
        self.orders.pipe_input(s(id), customer.map(s));
    }

    fn read(&self) -> Vec<(S, Option<S>)> {
        self.out.read_key_values_to_list()
    }
}

fn out(key: &str, value: Option<&str>) -> (S, Option<S>) {
    (s(key), value.map(s))
}

/// KIP-962, inner join: a row without a foreign key subscribes to nothing
/// and has no result (it is dropped, counted); a row whose foreign key
/// becomes `None` loses its result (a tombstone), and gets it back with
/// its foreign key.
#[test]
fn an_inner_join_has_no_result_for_a_row_without_a_foreign_key() {
    let (driver, pipes) = joined_orders(false);
    pipes.customer("c1", Some("Alice"));
    pipes.order("o1", Some("none"));
    assert_eq!(pipes.read(), []);
    assert_eq!(driver.dropped_records(), 1, "the row without a foreign key");
    pipes.order("o1", Some("c1"));
    assert_eq!(pipes.read(), [out("o1", Some("c1|Alice"))]);
    // The foreign key becomes null: the result is retracted, and the row
    // no longer follows c1.
    pipes.order("o1", Some("none"));
    assert_eq!(pipes.read(), [out("o1", None)]);
    pipes.customer("c1", Some("Alicia"));
    assert_eq!(pipes.read(), []);
    // ... and back.
    pipes.order("o1", Some("c1"));
    assert_eq!(pipes.read(), [out("o1", Some("c1|Alicia"))]);
    // Deleting a row that never had a foreign key writes nothing.
    pipes.order("o2", Some("none"));
    pipes.order("o2", None);
    assert_eq!(pipes.read(), []);
    pipes.order("o1", None);
    assert_eq!(pipes.read(), [out("o1", None)]);
}

/// KIP-962, left join: a row without a foreign key is in the result,
/// joined with no foreign value; a row whose foreign key becomes `None`
/// is joined with none, stops following its old foreign row, and follows
/// it again when its foreign key comes back.
#[test]
fn a_left_join_keeps_a_row_without_a_foreign_key() {
    let (_driver, pipes) = joined_orders(true);
    pipes.customer("c1", Some("Alice"));
    pipes.order("o1", Some("none"));
    assert_eq!(pipes.read(), [out("o1", Some("none|null"))]);
    pipes.order("o1", Some("c1"));
    assert_eq!(pipes.read(), [out("o1", Some("c1|Alice"))]);
    pipes.order("o1", Some("none"));
    assert_eq!(pipes.read(), [out("o1", Some("none|null"))]);
    pipes.customer("c1", Some("Alicia"));
    assert_eq!(pipes.read(), [], "o1 no longer subscribes to c1");
    pipes.order("o1", Some("c1"));
    assert_eq!(pipes.read(), [out("o1", Some("c1|Alicia"))]);
    // A foreign key without a row, then the row comes.
    pipes.order("o2", Some("c2"));
    pipes.customer("c2", Some("Bob"));
    assert_eq!(
        pipes.read(),
        [out("o2", Some("c2|null")), out("o2", Some("c2|Bob"))]
    );
    pipes.order("o1", None);
    assert_eq!(pipes.read(), [out("o1", None)]);
}

/// KIP-1104: the foreign key from the key and the value. Orders are keyed
/// `<region>/<order>`; the foreign key is the region's account
/// `<region>:<value>`.
#[test]
fn the_foreign_key_can_be_read_from_the_key_and_the_value() {
    let b = StreamsBuilder::new();
    let accounts = b.table::<S, S>("accounts");
    b.table::<S, S>("orders")
        .join_fk_with(
            &accounts,
            ForeignKeyExtractor::from_key_and_value(|key: &S, account: &S| {
                let (region, _) = key.split_once('/')?;
                Some(format!("{region}:{account}"))
            }),
            |account, owner| format!("{account} owned by {owner}"),
            TableJoined::default(),
            Materialized::new(),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let accounts = driver.create_input_topic("accounts", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, Nullable(StringSerde));
    let output = driver.create_output_topic("out", StringSerde, Nullable(StringSerde));
    accounts.pipe_input(s("eu:7"), Some(s("Ada")));
    accounts.pipe_input(s("us:7"), Some(s("Grace")));
    orders.pipe_input(s("eu/o1"), Some(s("7")));
    orders.pipe_input(s("us/o2"), Some(s("7")));
    // A key without a region: no foreign key.
    orders.pipe_input(s("o3"), Some(s("7")));
    accounts.pipe_input(s("us:7"), Some(s("Grace H.")));
    assert_eq!(
        output.read_key_values_to_list(),
        [
            out("eu/o1", Some("7 owned by Ada")),
            out("us/o2", Some("7 owned by Grace")),
            out("us/o2", Some("7 owned by Grace H.")),
        ]
    );
    assert_eq!(driver.dropped_records(), 1, "o3, without a foreign key");
}

/// A named Materialized keeps the result in its store at once: queryable,
/// with each row's latest result and timestamp (the later of the two
/// rows'), and deletes removing it.
#[test]
fn a_materialized_result_is_kept_in_its_store() {
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    let joined = b.table::<S, S>("orders").left_join_fk_with(
        &customers,
        ForeignKeyExtractor::from_value(customer_of),
        |order, name| format!("{order}|{}", name.map_or("null", String::as_str)),
        TableJoined::as_("orders-with-customers"),
        Materialized::as_("orders-with-customers-store")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    assert_eq!(
        joined.queryable_store_name().as_deref(),
        Some("orders-with-customers-store")
    );
    let driver = driver(b.build().unwrap());
    let customers = driver.create_input_topic("customers", StringSerde, Nullable(StringSerde));
    let orders = driver.create_input_topic("orders", StringSerde, Nullable(StringSerde));
    customers.pipe_input_at(s("c1"), Some(s("Alice")), 20);
    orders.pipe_input_at(s("o1"), Some(s("c1")), 10);
    orders.pipe_input_at(s("o2"), Some(s("none")), 30);
    orders.pipe_input_at(s("o3"), Some(s("c1")), 40);
    orders.pipe_input_at(s("o3"), None, 50);
    let store: TimestampedKeyValueStoreHandle<S, S> = driver
        .get_state_store("orders-with-customers-store")
        .unwrap()
        .expect("the result store");
    let store = store.borrow();
    assert_eq!(
        store.get(&s("o1")).unwrap(),
        Some(ValueAndTimestamp::make(s("c1|Alice"), 20))
    );
    assert_eq!(
        store.get(&s("o2")).unwrap(),
        Some(ValueAndTimestamp::make(s("none|null"), 30))
    );
    assert_eq!(store.get(&s("o3")).unwrap(), None);
    // The changelog of the subscription store carries the join's name.
    assert!(
        driver
            .produced_topic_names()
            .contains("app-orders-with-customers-subscription-store-changelog"),
        "{:?}",
        driver.produced_topic_names()
    );
}

/// What a partitioner saw: topic and key.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn recording(seen: Seen) -> impl Fn(&str, &S, &(), &Headers, i32) -> Option<Vec<i32>> {
    move |topic, key, _, _, partitions| {
        seen.lock().unwrap().push((topic.to_string(), key.clone()));
        Some(vec![key.len() as i32 % partitions])
    }
}

/// The subscription sink asks the foreign table's partitioner (with the
/// foreign key), the response sink the left table's (with the primary
/// key), each with its topic; a subscription without a foreign key goes
/// by the default partitioner.
#[test]
fn partitioners_are_asked_with_the_internal_topics() {
    let (primary, foreign) = (Seen::default(), Seen::default());
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    b.table::<S, S>("orders")
        .left_join_fk_with(
            &customers,
            ForeignKeyExtractor::from_value(customer_of),
            |order, name| format!("{order}|{}", name.map_or("null", String::as_str)),
            TableJoined::with(recording(primary.clone()), recording(foreign.clone()))
                .with_name("fk"),
            Materialized::new(),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let pipes = Pipes::new(&driver);
    pipes.customer("c1", Some("Alice"));
    pipes.order("o1", Some("c1"));
    pipes.order("o2", Some("none"));
    pipes.customer("c1", Some("Alicia"));
    assert_eq!(
        pipes.read(),
        [
            out("o1", Some("c1|Alice")),
            out("o2", Some("none|null")),
            out("o1", Some("c1|Alicia")),
        ]
    );
    let subscriptions = s("app-fk-subscription-registration-topic");
    let responses = s("app-fk-subscription-response-topic");
    assert_eq!(*foreign.lock().unwrap(), [(subscriptions, s("c1"))]);
    assert_eq!(
        *primary.lock().unwrap(),
        [
            (responses.clone(), s("o1")),
            (responses.clone(), s("o2")),
            (responses, s("o1")),
        ]
    );
}

/// A foreign-key join's partitioner must choose one partition: none (or
/// several) fails the task with a partitioning error naming the sink (not
/// a panic), as Kafka Streams' `IllegalArgumentException` does; choosing
/// one twice is choosing one.
#[test]
fn a_partitioner_choosing_other_than_one_partition_fails_the_task() {
    let b = StreamsBuilder::new();
    let customers = b.table::<S, S>("customers");
    b.table::<S, S>("orders")
        .join_fk_with(
            &customers,
            ForeignKeyExtractor::from_value(customer_of),
            |order, name| format!("{order}|{name}"),
            TableJoined::default()
                .with_name("fk")
                .with_other_partitioner(|_: &str, key: &S, _: &(), _: &Headers, _: i32| match key
                    .as_str()
                {
                    "twice" => Some(vec![0, 0]),
                    _ => Some(vec![]),
                }),
            Materialized::new(),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    let driver = driver(b.build().unwrap());
    let pipes = Pipes::new(&driver);
    pipes.customer("twice", Some("Ada"));
    pipes.order("o1", Some("twice"));
    assert_eq!(pipes.read(), [out("o1", Some("twice|Ada"))]);
    let error = pipes
        .orders
        .try_pipe_input(s("o2"), Some(s("c1")))
        .unwrap_err();
    assert!(
        matches!(&error, StreamsError::Partitioning { node, message, .. }
            if node == "fk-subscription-registration-sink"
                && message.contains("[]")
                && message.contains("exactly one")),
        "{error:?}"
    );
}
