//! The Kafka runtime on a real Apache Kafka broker (`cargo xtask kafka
//! start`, found through KSTREAMS_BOOTSTRAP; skipped without it locally,
//! failing without it in CI).
//!
//! Exactly-once is tested here only: librdkafka's mock cluster does not
//! filter aborted transactions.

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use kstreams_dsl::{Consumed, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::{create_topic, test_broker, unique_name};
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, State, StreamsConfig};

/// Input and output topics of `partitions` partitions each and an
/// application id, all new, named after `name`.
fn fresh_topics(bootstrap: &str, name: &str, partitions: i32) -> (String, String, String) {
    let input = unique_name(&format!("{name}-in"));
    let output = unique_name(&format!("{name}-out"));
    create_topic(bootstrap, &input, partitions, 1).unwrap();
    create_topic(bootstrap, &output, partitions, 1).unwrap();
    (input, output, unique_name(&format!("{name}-app")))
}

/// Set in a child process: run the exactly-once app until killed.
const CHILD_ENV: &str = "KSTREAMS_TEST_EOS_CHILD";

fn produce(bootstrap: &str, topic: &str, records: impl IntoIterator<Item = (String, String, i64)>) {
    let inputs = records
        .into_iter()
        .map(|(key, value, timestamp)| Input::new(key, value).at(timestamp));
    common::produce(bootstrap, topic, inputs);
}

/// Every value in `topic` as a read_committed consumer sees it, until
/// `want` values or the timeout.
fn read_committed(
    bootstrap: &str,
    topic: &str,
    want: usize,
    timeout: Duration,
) -> Vec<(String, String)> {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    while out.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
            let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
            out.push((key, value));
        }
    }
    // Anything more that arrives shortly after is a duplicate: keep it too.
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
            out.push((
                key,
                String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string(),
            ));
        }
    }
    out
}

fn eos_app(bootstrap: &str, app_id: &str, input: &str, output: &str) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .map_values(|v| format!("seen:{v}"))
        .to(output);
    let config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .client_config("consumer.session.timeout.ms", "6000")
        .client_config("consumer.heartbeat.interval.ms", "500");
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// The child side of the crash test: runs the app until the parent kills it.
#[test]
fn eos_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when started by the crash test
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [bootstrap, app_id, input, output] = parts[..] else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    common::run_until_killed(eos_app(bootstrap, app_id, input, output));
}

fn spawn_child(spec: &str) -> Child {
    common::spawn_test_child(module_path!(), "eos_child_process", CHILD_ENV, spec)
}

#[test]
fn exactly_once_survives_an_instance_killed_mid_run() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, output, app_id) = fresh_topics(&bootstrap, "eos", 2);
    let total = 3_000;
    let records = |range: std::ops::Range<usize>| {
        range.map(|i| (format!("k{}", i % 10), format!("{i}"), i as i64))
    };
    produce(&bootstrap, &input, records(0..total / 2));
    let spec = format!("{bootstrap}|{app_id}|{input}|{output}");

    // Kill the first instance (SIGKILL: no close, no commit) once it has
    // made some progress, with transactions open.
    let mut first = spawn_child(&spec);
    let progress = read_committed(&bootstrap, &output, 200, Duration::from_secs(60));
    assert!(
        progress.len() >= 200,
        "the first instance made progress before the kill"
    );
    produce(&bootstrap, &input, records(total / 2..total));
    first.kill().unwrap();
    first.wait().unwrap();

    // A new instance resumes from the last committed transaction.
    let mut second = spawn_child(&spec);
    let seen = read_committed(&bootstrap, &output, total, Duration::from_secs(120));
    second.kill().unwrap();
    second.wait().unwrap();

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, value) in &seen {
        *counts.entry(value.clone()).or_default() += 1;
    }
    let duplicates: Vec<_> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(v, _)| v.clone())
        .collect();
    assert!(
        duplicates.is_empty(),
        "duplicates under exactly-once: {duplicates:?}"
    );
    let missing: Vec<usize> = (0..total)
        .filter(|i| !counts.contains_key(&format!("seen:{i}")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} records missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(seen.len(), total);
}

#[test]
fn max_task_idle_orders_records_of_two_topics_of_one_task_by_timestamp() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (left, right, output) = (
        unique_name("idle-a"),
        unique_name("idle-b"),
        unique_name("idle-out"),
    );
    for t in [&left, &right, &output] {
        create_topic(&bootstrap, t, 1, 1).unwrap();
    }
    // Both topics are filled before start: odd timestamps left, even right.
    let n = 500i64;
    produce(
        &bootstrap,
        &left,
        (0..n).map(|i| ("k".to_string(), format!("a{}", 2 * i + 1), 2 * i + 1)),
    );
    produce(
        &bootstrap,
        &right,
        (0..n).map(|i| ("k".to_string(), format!("b{}", 2 * i + 2), 2 * i + 2)),
    );

    let builder = StreamsBuilder::new();
    builder
        .stream_topics::<String, String>(&[left.as_str(), right.as_str()], Consumed::default())
        .to(&output);
    let mut config = StreamsConfig::new(unique_name("idle-app"), &bootstrap)
        .commit_interval(Duration::from_millis(100));
    config.set("max.task.idle.ms", "5000").unwrap();
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let seen = read_committed(&bootstrap, &output, 2 * n as usize, Duration::from_secs(60));
    assert!(app.close(Duration::from_secs(30)));
    let stamps: Vec<i64> = seen.iter().map(|(_, v)| v[1..].parse().unwrap()).collect();
    assert_eq!(stamps.len(), 2 * n as usize, "every record arrived once");
    let first_out_of_order = stamps.windows(2).position(|w| w[0] > w[1]);
    assert_eq!(
        first_out_of_order,
        None,
        "records of the two partitions interleave by timestamp; order went back at {:?}",
        first_out_of_order.map(|i| &stamps[i.saturating_sub(2)..(i + 3).min(stamps.len())])
    );
}

/// Counts records per key in the persistent, logged store "counts".
struct CountPerKey {
    store: Option<kstreams_state::KeyValueStoreHandle<String, i64>>,
}

impl kstreams_dsl::Processor<String, String, String, i64> for CountPerKey {
    fn init(
        &mut self,
        ctx: &mut kstreams_dsl::ProcessorContext<'_, String, i64>,
    ) -> Result<(), kstreams_dsl::ProcessorError> {
        self.store = Some(ctx.get_state_store("counts")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut kstreams_dsl::ProcessorContext<'_, String, i64>,
        record: kstreams_record::Record<String, String>,
    ) -> Result<(), kstreams_dsl::ProcessorError> {
        let store = self.store.as_ref().expect("init ran");
        let count = store.borrow().get(&record.key)?.unwrap_or(0) + 1;
        store.borrow_mut().put(record.key.clone(), count)?;
        ctx.forward(record.with_value(count))?;
        Ok(())
    }
}

fn counting_app(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &std::path::Path,
) -> KafkaStreams {
    counting_app_committing_every(
        bootstrap,
        app_id,
        input,
        output,
        state_dir,
        Duration::from_millis(100),
    )
}

fn counting_app_committing_every(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &std::path::Path,
    commit_interval: Duration,
) -> KafkaStreams {
    let config = counting_app_config(bootstrap, app_id, state_dir, commit_interval);
    counting_app_with(input, output, config)
}

fn counting_app_config(
    bootstrap: &str,
    app_id: &str,
    state_dir: &std::path::Path,
    commit_interval: Duration,
) -> StreamsConfig {
    StreamsConfig::new(app_id, bootstrap)
        .commit_interval(commit_interval)
        .state_dir(state_dir)
}

/// Counts per key in a persistent logged store, each update written out.
fn counting_app_with(input: &str, output: &str, config: StreamsConfig) -> KafkaStreams {
    use kstreams_record::{I64Serde, StringSerde};
    use kstreams_state::Stores;
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder.add_state_store(Stores::key_value_store_builder(
        Stores::persistent_key_value_store("counts"),
        StringSerde,
        I64Serde,
    ));
    builder
        .stream::<String, String>(input)
        .process(|| CountPerKey { store: None }, &["counts"])
        .to_with(output, kstreams_dsl::Produced::with(StringSerde, I64Serde));
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// The latest count per key in `topic`, once `want` records were read.
fn latest_counts(bootstrap: &str, topic: &str, want: usize) -> BTreeMap<String, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("counts-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let (mut read, mut latest) = (0, BTreeMap::new());
    let deadline = Instant::now() + Duration::from_secs(90);
    while read < want && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            let count = i64::from_be_bytes(m.payload().unwrap().try_into().unwrap());
            latest.insert(key, count);
            read += 1;
        }
    }
    assert_eq!(read, want, "records read from {topic}");
    latest
}

/// Every count record in `topic`: read until `want` came and then no more
/// for a few seconds (so that duplicates would be seen too).
fn all_counts(bootstrap: &str, topic: &str, want: usize) -> Vec<(String, i64)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("counts-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline
        && (records.len() < want || quiet_since.elapsed() < Duration::from_secs(3))
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            let count = i64::from_be_bytes(m.payload().unwrap().try_into().unwrap());
            records.push((key, count));
            quiet_since = Instant::now();
        }
    }
    records
}

fn wait_until_running(apps: &[&KafkaStreams]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !apps.iter().all(|a| a.state() == State::Running) {
        assert!(Instant::now() < deadline, "instances did not reach RUNNING");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// At-least-once as Kafka Streams does it: revoked tasks are committed
/// before their partitions go. The commit interval here is longer than the
/// test, so only the revocation commits: without that commit a second
/// instance joining would make the next owners process the first batch
/// again on top of the state restored from the changelog (counts doubled).
#[test]
fn a_rebalance_commits_revoked_tasks_so_no_record_is_counted_twice() {
    rebalance_counts_every_record_once(None);
}

/// The same under KIP-848, where a revocation takes only the partitions
/// that move (`incremental_unassign` after the commit).
#[test]
fn a_kip848_rebalance_commits_revoked_tasks_so_no_record_is_counted_twice() {
    rebalance_counts_every_record_once(Some("consumer"));
}

fn rebalance_counts_every_record_once(group_protocol: Option<&str>) {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, output, app_id) = fresh_topics(&bootstrap, "revoke", 4);
    let app = |dir: &std::path::Path| {
        let mut app_config =
            counting_app_config(&bootstrap, &app_id, dir, Duration::from_secs(3600));
        if let Some(protocol) = group_protocol {
            app_config.set("consumer.group.protocol", protocol).unwrap();
        }
        counting_app_with(&input, &output, app_config)
    };
    let dirs = [
        std::env::temp_dir().join(unique_name("kstreams-revoke-a")),
        std::env::temp_dir().join(unique_name("kstreams-revoke-b")),
    ];
    let records = |range: std::ops::Range<usize>| {
        range.map(|i| (format!("k{}", i % 20), format!("{i}"), i as i64))
    };

    produce(&bootstrap, &input, records(0..400));
    let mut first = app(&dirs[0]);
    first.start().unwrap();
    let counts = latest_counts(&bootstrap, &output, 400);
    assert!(counts.values().all(|&c| c == 20), "{counts:?}");

    // A second instance joins: the first's tasks are revoked mid-run.
    let mut second = app(&dirs[1]);
    second.start().unwrap();
    wait_until_running(&[&first, &second]);
    produce(&bootstrap, &input, records(400..800));
    let all = all_counts(&bootstrap, &output, 800);
    assert!(first.close(Duration::from_secs(30)));
    assert!(second.close(Duration::from_secs(30)));
    for dir in &dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    let mut latest = BTreeMap::new();
    for (key, count) in &all {
        latest.insert(key.clone(), *count);
    }
    assert_eq!(latest.len(), 20);
    assert!(
        latest.values().all(|&c| c == 40),
        "every record counted once: {latest:?}"
    );
    assert_eq!(all.len(), 800, "no record processed twice");
}

#[test]
fn counts_survive_a_wiped_state_directory_through_the_changelog() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, output, app_id) = fresh_topics(&bootstrap, "restore", 2);
    let state_dir = std::env::temp_dir().join(unique_name("kstreams-restore-state"));
    let records = |range: std::ops::Range<usize>| {
        range.map(|i| (format!("k{}", i % 10), format!("{i}"), i as i64))
    };

    produce(&bootstrap, &input, records(0..300));
    let mut first = counting_app(&bootstrap, &app_id, &input, &output, &state_dir);
    first.start().unwrap();
    let counts = latest_counts(&bootstrap, &output, 300);
    assert!(first.close(Duration::from_secs(30)));
    assert!(counts.values().all(|&c| c == 30), "{counts:?}");
    assert!(
        state_dir.join(&app_id).exists(),
        "the persistent store lived in the state directory"
    );

    // The local state is lost; the changelog topic is not.
    std::fs::remove_dir_all(&state_dir).unwrap();
    produce(&bootstrap, &input, records(300..600));
    let mut second = counting_app(&bootstrap, &app_id, &input, &output, &state_dir);
    second.start().unwrap();
    let counts = latest_counts(&bootstrap, &output, 600);
    assert!(second.close(Duration::from_secs(30)));
    let _ = std::fs::remove_dir_all(&state_dir);
    assert_eq!(counts.len(), 10);
    assert!(
        counts.values().all(|&c| c == 60),
        "counts went on from the restored store: {counts:?}"
    );
}

/// Left joins of orders with a customer table, on 4 stream threads, with
/// the table produced before the start and newer timestamps than the
/// orders (as when orders are reprocessed from the beginning): timestamp
/// synchronization alone processes the older orders first and they find
/// no customer. Returns how many of `orders` outputs found their customer.
fn orders_joined_with_customers(bootstrap_table: bool) -> (usize, usize) {
    use kstreams_dsl::{Materialized, Produced};
    use kstreams_record::StringSerde;
    let _ = env_logger::builder().is_test(true).try_init();
    let Some(bootstrap) = test_broker() else {
        return (0, 0);
    };
    let customers = unique_name("customers");
    let orders = unique_name("orders");
    let output = unique_name("orders-enriched");
    for topic in [&customers, &orders, &output] {
        create_topic(&bootstrap, topic, 4, 1).unwrap();
    }
    let keys = 200;
    produce(
        &bootstrap,
        &customers,
        (0..keys).map(|i| (format!("c{i}"), format!("customer-{i}"), 1_000_000 + i)),
    );
    produce(
        &bootstrap,
        &orders,
        (0..keys).map(|i| (format!("c{i}"), format!("order-{i}"), 1_000 + i)),
    );

    let builder = StreamsBuilder::new();
    let consumed = Consumed::with(StringSerde, StringSerde);
    let consumed = if bootstrap_table {
        consumed.with_bootstrap()
    } else {
        consumed
    };
    let table = builder.table_with(&customers, consumed, Materialized::as_("customers-store"));
    builder
        .stream::<String, String>(&orders)
        .left_join(&table, |order, customer| {
            format!("{order}:{}", customer.map_or("NONE", |c| c.as_str()))
        })
        .to_with(&output, Produced::with(StringSerde, StringSerde));
    let state_dir = std::env::temp_dir().join(unique_name("bootstrap-state"));
    let config = StreamsConfig::new(unique_name("bootstrap-app"), &bootstrap)
        .num_stream_threads(4)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&state_dir);
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let out = read_committed(&bootstrap, &output, keys as usize, Duration::from_secs(90));
    app.close(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&state_dir);
    let found = out.iter().filter(|(_, v)| !v.ends_with(":NONE")).count();
    (found, out.len())
}

#[test]
fn bootstrapped_tables_serve_every_left_join_on_four_threads() {
    let (found, total) = orders_joined_with_customers(true);
    if total == 0 && test_broker().is_none() {
        return;
    }
    assert_eq!(total, 200);
    assert_eq!(found, 200, "with bootstrap every order finds its customer");
}

#[test]
fn without_bootstrap_older_orders_run_ahead_of_the_table() {
    let (found, total) = orders_joined_with_customers(false);
    if total == 0 && test_broker().is_none() {
        return;
    }
    eprintln!("without bootstrap: {found} of {total} orders found their customer");
    assert_eq!(total, 200);
    assert!(
        found < total,
        "timestamp order processes the orders before the newer customer records: \
         some left joins come out empty ({found} of {total} found their customer)"
    );
}

/// A global table is loaded whole before the instance runs, on every
/// instance: orders of any partition find customers of any partition.
#[test]
fn global_tables_are_loaded_before_processing_and_kept_current() {
    use kstreams_dsl::{Materialized, Produced};
    use kstreams_record::StringSerde;
    let _ = env_logger::builder().is_test(true).try_init();
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let customers = unique_name("global-customers");
    let orders = unique_name("global-orders");
    let output = unique_name("global-enriched");
    create_topic(&bootstrap, &customers, 3, 1).unwrap();
    create_topic(&bootstrap, &orders, 2, 1).unwrap();
    create_topic(&bootstrap, &output, 2, 1).unwrap();
    produce(
        &bootstrap,
        &customers,
        (0..100).map(|i| (format!("c{i}"), format!("customer-{i}"), 1_000_000)),
    );
    let builder = StreamsBuilder::new();
    let table = builder.global_table_with(
        &customers,
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("customers"),
    );
    builder
        .stream::<String, String>(&orders)
        .left_join_global(
            &table,
            |_, order: &String| order.split(':').next().unwrap_or_default().to_string(),
            |order, customer| format!("{order}={}", customer.map_or("NONE", |c| c.as_str())),
        )
        .to_with(&output, Produced::with(StringSerde, StringSerde));
    let config = StreamsConfig::new(unique_name("global-app"), &bootstrap)
        .commit_interval(Duration::from_millis(100));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    assert_eq!(table.store().len(), 100, "loaded before start returned");
    // Orders are older than the customers and of other partitions: only a
    // fully loaded global table serves them all.
    produce(
        &bootstrap,
        &orders,
        (0..100).map(|i| (format!("o{i}"), format!("c{i}:order"), 1_000)),
    );
    // Later updates reach the running global store too.
    produce(
        &bootstrap,
        &customers,
        [("c100".to_string(), "customer-100".to_string(), 2_000_000)],
    );
    let out = read_committed(&bootstrap, &output, 100, Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_secs(30);
    while table.store().len() < 101 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(table.store().len(), 101);
    app.close(Duration::from_secs(30));
    assert_eq!(out.len(), 100);
    assert!(out.iter().all(|(_, v)| !v.ends_with("=NONE")), "{out:?}");
    // Closed with the application, as Kafka Streams' stores are.
    assert!(matches!(
        table.store().get(b"c1"),
        Err(kstreams_state::Error::NotOpen { .. })
    ));
}

fn global_customers_app(
    bootstrap: &str,
    app_id: &str,
    customers: &str,
    state_dir: &std::path::Path,
) -> (KafkaStreams, kstreams_dsl::GlobalKTable<String, String>) {
    use kstreams_dsl::Materialized;
    use kstreams_record::StringSerde;
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    let table = builder.global_table_with(
        customers,
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("customers"),
    );
    let config = StreamsConfig::new(app_id, bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir);
    (KafkaStreams::new(builder.build().unwrap(), config), table)
}

fn global_value(table: &kstreams_dsl::GlobalKTable<String, String>, key: &str) -> Option<String> {
    table
        .store()
        .get(key.as_bytes())
        .unwrap()
        .map(|(v, _)| String::from_utf8(v).unwrap())
}

/// A global store on RocksDB (the default) goes on from its checkpoint
/// after a restart, as Kafka Streams' global state manager does: here the
/// topic's old records are deleted while the application is down, so only
/// the store on disk still knows them.
#[test]
fn a_global_store_on_disk_goes_on_from_its_checkpoint_after_a_restart() {
    use kstreams_embedded::rdkafka::admin::{AdminClient, AdminOptions};
    use kstreams_embedded::rdkafka::client::DefaultClientContext;
    use kstreams_embedded::rdkafka::{Offset, TopicPartitionList};
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let customers = unique_name("global-disk-customers");
    let app_id = unique_name("global-disk-app");
    create_topic(&bootstrap, &customers, 2, 1).unwrap();
    let state_dir = std::env::temp_dir().join(unique_name("kstreams-global-state"));
    produce(
        &bootstrap,
        &customers,
        (0..50).map(|i| (format!("c{i}"), format!("customer-{i}"), 1_000)),
    );

    let (mut first, table) = global_customers_app(&bootstrap, &app_id, &customers, &state_dir);
    first.start().unwrap();
    assert_eq!(table.store().len(), 50);
    assert!(table.store().is_persistent());
    assert!(first.close(Duration::from_secs(30)));
    drop(first);
    let checkpoint = kstreams_state::__private::OffsetCheckpoint::new(
        state_dir
            .join(&app_id)
            .join("global")
            .join(kstreams_state::__private::CHECKPOINT_FILE_NAME),
    )
    .read()
    .unwrap();
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let mut purge = TopicPartitionList::new();
    for partition in 0..2 {
        let (_, high) = probe
            .fetch_watermarks(&customers, partition, Duration::from_secs(10))
            .unwrap();
        assert_eq!(
            checkpoint.get(&kstreams_state::TopicPartition::new(
                customers.as_str(),
                partition
            )),
            Some(&high),
            "the checkpoint holds the next offset to read"
        );
        purge
            .add_partition_offset(&customers, partition, Offset::Offset(high))
            .unwrap();
    }
    // While the application is down: the old records go, and one key is
    // updated, one deleted, one added.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    futures_executor::block_on(admin.delete_records(&purge, &AdminOptions::new())).unwrap();
    produce(
        &bootstrap,
        &customers,
        [
            ("c1".to_string(), "renamed".to_string(), 2_000),
            ("c50".to_string(), "customer-50".to_string(), 2_000),
        ],
    );
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    producer
        .send(BaseRecord::<str, str>::to(&customers).key("c2"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();

    let (mut second, table) = global_customers_app(&bootstrap, &app_id, &customers, &state_dir);
    second.start().unwrap();
    let len = table.store().len();
    let (c0, c1, c2, c50) = (
        global_value(&table, "c0"),
        global_value(&table, "c1"),
        global_value(&table, "c2"),
        global_value(&table, "c50"),
    );
    assert!(second.close(Duration::from_secs(30)));
    let _ = std::fs::remove_dir_all(&state_dir);
    assert_eq!(len, 50, "49 kept from disk, c2 deleted, c50 added");
    assert_eq!(c0.as_deref(), Some("customer-0"));
    assert_eq!(c1.as_deref(), Some("renamed"));
    assert_eq!(c2, None);
    assert_eq!(c50.as_deref(), Some("customer-50"));
}

#[test]
fn joining_topics_with_different_partition_counts_fails_start_naming_them() {
    use kstreams_record::StringSerde;
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let orders = unique_name("copart-orders");
    let customers = unique_name("copart-customers");
    create_topic(&bootstrap, &orders, 2, 1).unwrap();
    create_topic(&bootstrap, &customers, 3, 1).unwrap();
    let builder = StreamsBuilder::new();
    let table = builder.table::<String, String>(&customers);
    builder
        .stream::<String, String>(&orders)
        .join(&table, |o, c| format!("{o}{c}"))
        .to_with(
            &unique_name("copart-out"),
            kstreams_dsl::Produced::with(StringSerde, StringSerde),
        );
    let mut app = KafkaStreams::new(
        builder.build().unwrap(),
        StreamsConfig::new(unique_name("copart-app"), &bootstrap),
    );
    let err = app.start().unwrap_err().to_string();
    assert!(err.contains("same number of partitions"), "{err}");
    assert!(err.contains(&format!("{orders} has 2")), "{err}");
    assert!(err.contains(&format!("{customers} has 3")), "{err}");
}

#[test]
fn repartition_topics_get_the_partition_count_the_user_set() {
    use kstreams_dsl::Repartitioned;
    use kstreams_record::StringSerde;
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let input = unique_name("rp-in");
    let output = unique_name("rp-out");
    create_topic(&bootstrap, &input, 2, 1).unwrap();
    create_topic(&bootstrap, &output, 2, 1).unwrap();
    let app_id = unique_name("rp-app");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&input)
        .repartition_with(
            Repartitioned::with(StringSerde, StringSerde)
                .with_name("spread")
                .with_partitions(5),
        )
        .to(&output);
    let mut app = KafkaStreams::new(
        builder.build().unwrap(),
        StreamsConfig::new(&app_id, &bootstrap),
    );
    app.start().unwrap();
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let topic = format!("{app_id}-spread-repartition");
    let metadata = probe
        .fetch_metadata(Some(&topic), Duration::from_secs(10))
        .unwrap();
    app.close(Duration::from_secs(30));
    assert_eq!(metadata.topics()[0].partitions().len(), 5);
}

/// A foreign-key join between tables with different partition counts: the
/// subscriptions go to the customers' partitions, the answers back to the
/// orders'.
#[test]
fn foreign_key_join_across_differently_partitioned_tables() {
    use kstreams_dsl::Produced;
    use kstreams_record::{Nullable, StringSerde};
    let _ = env_logger::builder().is_test(true).try_init();
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let orders = unique_name("fk-orders");
    let customers = unique_name("fk-customers");
    let output = unique_name("fk-out");
    create_topic(&bootstrap, &orders, 3, 1).unwrap();
    create_topic(&bootstrap, &customers, 2, 1).unwrap();
    create_topic(&bootstrap, &output, 3, 1).unwrap();
    produce(
        &bootstrap,
        &customers,
        (0..20).map(|i| (format!("c{i}"), format!("customer-{i}"), 1_000)),
    );
    produce(
        &bootstrap,
        &orders,
        (0..60).map(|i| (format!("o{i}"), format!("c{}", i % 20), 2_000)),
    );
    let app_id = unique_name("fk-app");
    let builder = StreamsBuilder::new();
    let customers_table = builder.table::<String, String>(&customers);
    builder
        .table::<String, String>(&orders)
        .join_fk(
            &customers_table,
            |c: &String| c.clone(),
            |_, customer| customer.clone(),
        )
        .to_stream()
        .to_with(&output, Produced::with(StringSerde, Nullable(StringSerde)));
    let config = StreamsConfig::new(&app_id, &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(std::env::temp_dir().join(unique_name("fk-state")));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let out = read_committed(&bootstrap, &output, 60, Duration::from_secs(60));
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let partitions = |suffix: &str| {
        let metadata = probe.fetch_metadata(None, Duration::from_secs(10)).unwrap();
        metadata
            .topics()
            .iter()
            .find(|t| t.name().starts_with(&app_id) && t.name().ends_with(suffix))
            .map(|t| t.partitions().len())
    };
    let subscription = partitions("SUBSCRIPTION-REGISTRATION-0000000006-topic");
    // Kafka Streams 4.4's names: the response topic draws index 14 (after
    // the registration topic and processor, sink, source, store and three
    // subscription processors).
    let response = partitions("SUBSCRIPTION-RESPONSE-0000000014-topic");
    app.close(Duration::from_secs(30));
    let joined: BTreeMap<String, String> = out.into_iter().collect();
    assert_eq!(joined.len(), 60);
    for i in 0..60 {
        assert_eq!(joined[&format!("o{i}")], format!("customer-{}", i % 20));
    }
    assert_eq!(
        subscription,
        Some(2),
        "subscriptions follow the customers' partitions"
    );
    assert_eq!(response, Some(3), "answers follow the orders' partitions");
}

/// Records the application has committed past are deleted from its
/// repartition topics (Kafka Streams' repartition purge).
#[test]
fn consumed_repartition_records_are_purged() {
    use kstreams_dsl::{Grouped, Produced};
    use kstreams_record::{I64Serde, Nullable, StringSerde};
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let input = unique_name("purge-in");
    let output = unique_name("purge-out");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    produce(
        &bootstrap,
        &input,
        (0..200).map(|i| (format!("k{i}"), format!("w{}", i % 10), 1_000 + i)),
    );
    let app_id = unique_name("purge-app");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&input)
        .group_by_with(|_, w| w.clone(), Grouped::as_("by-word"))
        .count()
        .to_stream()
        .to_with(&output, Produced::with(StringSerde, Nullable(I64Serde)));
    let config = StreamsConfig::new(&app_id, &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .repartition_purge_interval(Duration::from_millis(100))
        .state_dir(std::env::temp_dir().join(unique_name("purge-state")));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let topic = format!("{app_id}-by-word-repartition");
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut low = 0;
    while Instant::now() < deadline && low < 200 {
        std::thread::sleep(Duration::from_millis(200));
        low = probe
            .fetch_watermarks(&topic, 0, Duration::from_secs(5))
            .map(|(low, _)| low)
            .unwrap_or(0);
    }
    app.close(Duration::from_secs(30));
    assert_eq!(low, 200, "every consumed repartition record was deleted");
}

fn final_counts_app(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &std::path::Path,
) -> KafkaStreams {
    use kstreams_dsl::{Materialized, Produced};
    use kstreams_record::{I64Serde, StringSerde};
    use kstreams_time::{EmitStrategy, TimeWindows};
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(10)))
        .emit_strategy(EmitStrategy::OnWindowClose)
        // Closed windows stay in the store long after they were emitted.
        .count_with(
            None,
            Materialized::as_("final-counts").with_retention(Duration::from_secs(3600)),
        )
        .to_stream()
        .map(|window, count| {
            (
                format!("{}@{}", window.key, window.window.start),
                count.unwrap_or(0),
            )
        })
        .to_with(output, Produced::with(StringSerde, I64Serde));
    let config = StreamsConfig::new(app_id, bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir);
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// KIP-825's emit-final keeps its last emitted window close time in the
/// offsets' commit metadata (Kafka Streams' `ProcessorMetadata`, in its
/// bytes): after a restart, windows already emitted are not emitted again,
/// though the store still holds them.
#[test]
fn emit_final_results_are_not_emitted_again_after_a_restart() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, output, app_id) = fresh_topics(&bootstrap, "final", 1);
    let state_dir = std::env::temp_dir().join(unique_name("kstreams-final-state"));
    let event = |ts: i64| ("k".to_string(), "x".to_string(), ts);

    // Window [0, 10 s) gets two records and closes at 12 s.
    produce(
        &bootstrap,
        &input,
        [event(1_000), event(2_000), event(12_000)],
    );
    let mut first = final_counts_app(&bootstrap, &app_id, &input, &output, &state_dir);
    first.start().unwrap();
    let counts = all_counts(&bootstrap, &output, 1);
    assert!(first.close(Duration::from_secs(30)));
    assert_eq!(counts, vec![("k@0".to_string(), 2)]);

    // After the restart, window [10 s, 20 s) closes at 25 s.
    produce(&bootstrap, &input, [event(13_000), event(25_000)]);
    let mut second = final_counts_app(&bootstrap, &app_id, &input, &output, &state_dir);
    second.start().unwrap();
    let counts = all_counts(&bootstrap, &output, 2);
    assert!(second.close(Duration::from_secs(30)));
    let _ = std::fs::remove_dir_all(&state_dir);
    assert_eq!(
        counts,
        vec![("k@0".to_string(), 2), ("k@10000".to_string(), 2)],
        "each window's final result exactly once"
    );
}

/// Which instance processed a record of which input partition, and when:
/// (time, topic index, partition).
type ProcessedLog = std::sync::Arc<std::sync::Mutex<Vec<(Instant, usize, i32)>>>;

/// A pass-through of two co-partitioned topics in one sub-topology (task
/// `0_p` reads partition p of both) under the KIP-848 group protocol. Input
/// values are `topic:partition:round`; outputs are `tag|value`.
fn kip848_app(
    bootstrap: &str,
    app_id: &str,
    inputs: &[String; 2],
    output: &str,
    tag: &'static str,
    log: ProcessedLog,
) -> KafkaStreams {
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder
        .stream_topics::<String, String>(
            &[inputs[0].as_str(), inputs[1].as_str()],
            Consumed::default(),
        )
        .peek(move |_, v| {
            let mut fields = v.split(':').map(|f| f.parse::<i32>().unwrap());
            let (topic, partition) = (fields.next().unwrap(), fields.next().unwrap());
            log.lock()
                .unwrap()
                .push((Instant::now(), topic as usize, partition));
        })
        .map_values(move |v| format!("{tag}|{v}"))
        .to(output);
    let config = StreamsConfig::new(app_id, bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(std::env::temp_dir().join(unique_name("kip848-state")))
        .client_config("consumer.group.protocol", "consumer");
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// Input partitions (topic index, partition) an instance processed a record
/// of in the last `window`.
fn recently_processed(
    log: &ProcessedLog,
    window: Duration,
) -> std::collections::BTreeSet<(usize, i32)> {
    let since = Instant::now() - window;
    log.lock()
        .unwrap()
        .iter()
        .filter(|(t, _, _)| *t >= since)
        .map(|(_, topic, partition)| (*topic, *partition))
        .collect()
}

/// KIP-848 (`consumer.group.protocol=consumer`, the server-side range
/// assignor the runtime asks for): two instances share the partitions of
/// two co-partitioned topics, partition p of both topics always with the
/// same instance (one task); when one instance closes, the other takes
/// every partition over and no input record is missing from the output.
#[test]
fn consumer_group_protocol_keeps_co_partitioned_topics_in_one_task_across_instances() {
    use std::collections::{BTreeSet, HashSet};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let Some(bootstrap) = test_broker() else {
        return;
    };
    const PARTITIONS: i32 = 4;
    let inputs = [unique_name("kip848-left"), unique_name("kip848-right")];
    let output = unique_name("kip848-out");
    for t in inputs.iter().chain([&output]) {
        create_topic(&bootstrap, t, PARTITIONS, 1).unwrap();
    }
    let all: BTreeSet<(usize, i32)> = (0..2)
        .flat_map(|t| (0..PARTITIONS).map(move |p| (t, p)))
        .collect();

    // A steady input: a round of one record per input partition every 50 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicUsize::new(0));
    let feeder = {
        let (stop, rounds, bootstrap, inputs) = (
            stop.clone(),
            rounds.clone(),
            bootstrap.clone(),
            inputs.clone(),
        );
        std::thread::spawn(move || {
            let producer: BaseProducer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("linger.ms", "5")
                .create()
                .unwrap();
            while !stop.load(Ordering::Acquire) {
                let round = rounds.load(Ordering::Acquire);
                for (t, topic) in inputs.iter().enumerate() {
                    for p in 0..PARTITIONS {
                        let value = format!("{t}:{p}:{round}");
                        let key = format!("k{round}");
                        let mut record =
                            BaseRecord::to(topic).partition(p).key(&key).payload(&value);
                        while let Err((_, back)) = producer.send(record) {
                            producer.poll(Duration::from_millis(50));
                            record = back;
                        }
                    }
                }
                producer.flush(Duration::from_secs(30)).unwrap();
                rounds.store(round + 1, Ordering::Release);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let app_id = unique_name("kip848-app");
    let (log_a, log_b): (ProcessedLog, ProcessedLog) = Default::default();
    let mut a = kip848_app(&bootstrap, &app_id, &inputs, &output, "A", log_a.clone());
    a.start().unwrap();
    let mut b = kip848_app(&bootstrap, &app_id, &inputs, &output, "B", log_b.clone());
    b.start().unwrap();

    // Wait until the two instances split the partitions, both RUNNING, and
    // the split holds for 3 s.
    let window = Duration::from_secs(2);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut split: Option<(Instant, BTreeSet<(usize, i32)>)> = None;
    let (owned_a, owned_b) = loop {
        assert!(
            Instant::now() < deadline,
            "no stable split: A {:?}, B {:?}, states {:?} {:?}, errors {:?} {:?}",
            recently_processed(&log_a, window),
            recently_processed(&log_b, window),
            a.state(),
            b.state(),
            a.errors(),
            b.errors()
        );
        std::thread::sleep(Duration::from_millis(250));
        let (owned_a, owned_b) = (
            recently_processed(&log_a, window),
            recently_processed(&log_b, window),
        );
        let shared = owned_a.is_disjoint(&owned_b)
            && !owned_a.is_empty()
            && !owned_b.is_empty()
            && owned_a.union(&owned_b).copied().collect::<BTreeSet<_>>() == all
            && a.state() == State::Running
            && b.state() == State::Running;
        match &split {
            Some((since, held)) if shared && *held == owned_a => {
                if since.elapsed() >= Duration::from_secs(3) {
                    break (owned_a, owned_b);
                }
            }
            _ => split = shared.then(|| (Instant::now(), owned_a)),
        }
    };
    for p in 0..PARTITIONS {
        assert_eq!(
            owned_a.contains(&(0, p)),
            owned_a.contains(&(1, p)),
            "partition {p} of both topics belongs to one task: A has {owned_a:?}, B has {owned_b:?}"
        );
    }

    // B leaves: A takes all partitions over.
    assert!(b.close(Duration::from_secs(30)), "B closed in time");
    let deadline = Instant::now() + Duration::from_secs(120);
    while recently_processed(&log_a, window) != all {
        assert!(
            Instant::now() < deadline,
            "A did not take every partition over: {:?}, state {:?}, errors {:?}",
            recently_processed(&log_a, window),
            a.state(),
            a.errors()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Release);
    feeder.join().unwrap();
    let rounds = rounds.load(Ordering::Acquire);
    let sent: HashSet<String> = (0..rounds)
        .flat_map(|r| {
            (0..2).flat_map(move |t| (0..PARTITIONS).map(move |p| format!("{t}:{p}:{r}")))
        })
        .collect();

    // Every input record reached the output (at-least-once: duplicates of
    // records reprocessed after a partition moved are allowed).
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", unique_name("kip848-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[output.as_str()]).unwrap();
    let mut seen = HashSet::new();
    let mut by = BTreeMap::<String, usize>::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sent.is_subset(&seen) && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let out = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
            let (tag, value) = out.split_once('|').unwrap();
            *by.entry(tag.to_string()).or_default() += 1;
            seen.insert(value.to_string());
        }
    }
    assert!(a.close(Duration::from_secs(30)));
    let missing: Vec<&String> = sent.difference(&seen).take(10).collect();
    assert!(
        missing.is_empty(),
        "{} of {} input records missing from the output, e.g. {missing:?}",
        sent.difference(&seen).count(),
        sent.len()
    );
    assert!(
        by.get("B").copied().unwrap_or(0) > 0,
        "B processed records: {by:?}"
    );
}

/// Sum of a metric family's samples in Prometheus text.
fn metric_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Under exactly-once a checkpoint is kept only for a task closed clean: a
/// rebalance commits the transaction, then checkpoints the revoked tasks,
/// so the tasks an instance gets back restore from there (nothing to
/// read) instead of wiping their stores and reading the whole changelog.
#[test]
fn exactly_once_tasks_back_after_a_rebalance_restore_from_their_checkpoint() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, output, app_id) = fresh_topics(&bootstrap, "eos-reopen", 4);
    let dirs = [
        std::env::temp_dir().join(unique_name("kstreams-eos-reopen-a")),
        std::env::temp_dir().join(unique_name("kstreams-eos-reopen-b")),
    ];
    let app = |dir: &std::path::Path| {
        let config = counting_app_config(&bootstrap, &app_id, dir, Duration::from_millis(100))
            .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2);
        counting_app_with(&input, &output, config)
    };
    produce(
        &bootstrap,
        &input,
        (0..800).map(|i| (format!("k{}", i % 40), format!("{i}"), i as i64)),
    );
    let mut first = app(&dirs[0]);
    first.start().unwrap();
    assert_eq!(all_counts(&bootstrap, &output, 800).len(), 800);
    // B joins: every task of A is revoked (eager), and A gets some back.
    let mut second = app(&dirs[1]);
    second.start().unwrap();
    wait_until_running(&[&first, &second]);
    let text = first.metrics().gather_text();
    let tasks_back = metric_sum(&text, "kstreams_thread_task_created_total");
    let restored = metric_sum(&text, "kstreams_task_restore_records_total");
    assert!(first.close(Duration::from_secs(30)));
    assert!(second.close(Duration::from_secs(30)));
    for dir in &dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    assert!(
        tasks_back > 4.0,
        "A created its 4 tasks, then got some back: {text}"
    );
    assert_eq!(
        restored, 0.0,
        "the tasks A got back restored nothing: {text}"
    );
}

/// Sums what the application's restore listener hears per store.
#[derive(Default)]
struct RestoredRecords {
    /// Per store: the offset its restoration started at, the end it ran
    /// to, records restored, and whether it ended.
    stores: std::sync::Mutex<BTreeMap<String, (i64, i64, u64, bool)>>,
}

impl kstreams_runtime::kafka::StateRestoreListener for RestoredRecords {
    fn on_restore_start(
        &self,
        _: &kstreams_runtime::kafka::TopicPartition,
        store: &str,
        start: i64,
        end: i64,
    ) {
        self.stores
            .lock()
            .unwrap()
            .insert(store.to_string(), (start, end, 0, false));
    }
    fn on_batch_restored(
        &self,
        _: &kstreams_runtime::kafka::TopicPartition,
        store: &str,
        _: i64,
        restored: u64,
    ) {
        if let Some(entry) = self.stores.lock().unwrap().get_mut(store) {
            entry.2 += restored;
        }
    }
    fn on_restore_end(&self, _: &kstreams_runtime::kafka::TopicPartition, store: &str, _: u64) {
        if let Some(entry) = self.stores.lock().unwrap().get_mut(store) {
            entry.3 = true;
        }
    }
}

/// A count per key and minute, kept for an hour, over `input`; no record
/// cache, so that each update goes to the changelog.
fn minute_counts_app(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    state_dir: &std::path::Path,
    guarantee: ProcessingGuarantee,
) -> KafkaStreams {
    use kstreams_dsl::Materialized;
    use kstreams_time::TimeWindows;
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)))
        .count_with(
            None,
            Materialized::as_("minute-counts").with_retention(Duration::from_secs(3600)),
        );
    let mut config = StreamsConfig::new(app_id, bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir)
        .processing_guarantee(guarantee);
    config.set("statestore.cache.max.bytes", "0").unwrap();
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// Every window of "minute-counts" the instance serves, once they are
/// `done`.
fn minute_counts(
    app: &KafkaStreams,
    done: impl Fn(&BTreeMap<(String, i64), i64>) -> bool,
) -> BTreeMap<(String, i64), i64> {
    use kstreams_runtime::kafka::{QueryableStoreTypes, StoreQueryParameters};
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let windows = app
            .store(StoreQueryParameters::from_name_and_type(
                "minute-counts",
                QueryableStoreTypes::window_store::<String, i64>(),
            ))
            .and_then(|view| view.all());
        if let Ok(windows) = windows {
            let windows: BTreeMap<_, _> = windows
                .into_iter()
                .map(|(w, n)| ((w.key, w.window.start), n))
                .collect();
            if done(&windows) {
                return windows;
            }
            assert!(
                Instant::now() < deadline,
                "{} windows, the last {:?}; {:?}",
                windows.len(),
                windows.iter().next_back(),
                app.state()
            );
        } else {
            assert!(Instant::now() < deadline, "{:?}", windows.err());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A window store without local state restores only the records within
/// its retention of the newest window (issue 46): 30 000 records over 25
/// hours of event time into one-minute windows kept an hour; after the
/// state directory is deleted the store reads about the last hour's 1 200
/// changelog records (at least once; exactly once see below), and serves
/// exactly the windows the first instance served.
fn a_window_store_restores_only_its_retention(guarantee: ProcessingGuarantee) {
    const RECORDS: i64 = 30_000;
    const EVERY_MS: i64 = 3_000;
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let (input, _, app_id) = fresh_topics(&bootstrap, "window-restore", 1);
    let state_dir = std::env::temp_dir().join(unique_name("kstreams-window-restore"));
    // From 26 hours ago on the minute (a timestamp of 0 would be the
    // producer's wall clock) to about an hour ago.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let base = (now_ms - 26 * 3_600_000) / 60_000 * 60_000;
    produce(
        &bootstrap,
        &input,
        (0..RECORDS).map(|i| (format!("k{}", i % 20), String::new(), base + i * EVERY_MS)),
    );
    // The newest window has a record of each of the 20 keys; the store
    // keeps the hour's 60 windows up to it.
    let newest_start = base + (RECORDS - 1) * EVERY_MS / 60_000 * 60_000;
    let all_counted = |windows: &BTreeMap<(String, i64), i64>| {
        windows
            .keys()
            .filter(|(_, start)| *start == newest_start)
            .count()
            == 20
    };

    let mut first = minute_counts_app(&bootstrap, &app_id, &input, &state_dir, guarantee);
    first.start().unwrap();
    let served = minute_counts(&first, all_counted);
    assert!(first.close(Duration::from_secs(30)));
    assert_eq!(served.len(), 60 * 20, "{served:?}");

    std::fs::remove_dir_all(&state_dir).unwrap();
    let mut second = minute_counts_app(&bootstrap, &app_id, &input, &state_dir, guarantee);
    let restored = std::sync::Arc::new(RestoredRecords::default());
    second
        .set_global_state_restore_listener(restored.clone())
        .unwrap();
    second.start().unwrap();
    let again = minute_counts(&second, all_counted);
    let stores = restored.stores.lock().unwrap().clone();
    assert!(second.close(Duration::from_secs(30)));
    let _ = std::fs::remove_dir_all(&state_dir);

    assert_eq!(
        again, served,
        "the restored store serves what the first one did"
    );
    let Some(&(start, end, records, ended)) = stores.get("minute-counts") else {
        panic!("the window store did not restore: {stores:?}")
    };
    assert!(ended, "{stores:?}");
    // Each of the 30 000 records updated a window: the changelog has them
    // all (and transaction markers under exactly-once).
    assert!(end >= RECORDS, "{stores:?}");
    assert!(start > 0, "restored from the changelog's start: {stores:?}");
    let within_retention = 3_600_000 / EVERY_MS as u64;
    if guarantee == ProcessingGuarantee::AtLeastOnce {
        assert!(
            (within_retention..within_retention + 100).contains(&records),
            "restored {records} records; the last hour has {within_retention}"
        );
    } else {
        // The broker finds the first offset stamped at or after a time, and
        // a commit marker is stamped with the wall clock of its commit: the
        // first instance's first commit (its records are 26 hours old)
        // lies after the window's start, so the restore starts there, at
        // that marker. Live records, stamped close to the wall clock, find
        // the first commit within the retention.
        assert!(
            records < RECORDS as u64 - 100,
            "restored {records} records, all but the first commit's"
        );
    }
}

#[test]
fn a_window_store_restores_only_its_retention_at_least_once() {
    a_window_store_restores_only_its_retention(ProcessingGuarantee::AtLeastOnce);
}

#[test]
fn a_window_store_restores_only_its_retention_exactly_once() {
    a_window_store_restores_only_its_retention(ProcessingGuarantee::ExactlyOnceV2);
}
