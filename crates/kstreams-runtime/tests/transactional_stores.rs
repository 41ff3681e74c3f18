//! Transactional state stores (KIP-892) under exactly-once, on a real
//! broker (`cargo xtask kafka start`, found through KSTREAMS_BOOTSTRAP;
//! skipped without it).
//!
//! Without them, a task whose instance was SIGKILLed under exactly-once
//! finds its RocksDB store not closed cleanly, deletes it and restores its
//! whole changelog (as Kafka Streams does). With them the store's files
//! only ever hold committed states with the offsets they reach, so the
//! restarted task resumes from its own store and restores only the
//! changelog's tail, and its counts stay exact.

use crate::common::{self, FreshRun, Input};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::test_broker;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    KafkaStreams, ProcessingGuarantee, State, StateRestoreListener, StreamsConfig, TopicPartition,
};

/// Set in a child process: run the counting app until killed.
const CHILD_ENV: &str = "KSTREAMS_TEST_TRANSACTIONAL_STORES_CHILD";
/// Distinct keys: the count store holds this many entries.
const KEYS: usize = 20_000;
/// Each round writes every key this many times.
const PER_ROUND: usize = 2;

fn counting_app(spec: &str) -> KafkaStreams {
    let common::ChildRun {
        bootstrap,
        app_id,
        input,
        output,
        state_dir,
    } = common::ChildRun::parse(spec, CHILD_ENV);
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .group_by_key()
        .count()
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
    let config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .transactional_state_stores(true)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir)
        // Static membership: the restarted member takes its predecessor's
        // place at once instead of waiting out its session.
        .client_config("consumer.group.instance.id", &format!("{app_id}-member"))
        .client_config("consumer.session.timeout.ms", "30000");
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// The child side: runs the app until the parent kills it.
#[test]
fn transactional_stores_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when started by the test below
    };
    common::run_until_killed(counting_app(&spec));
}

/// Counts the changelog records restored.
#[derive(Default)]
struct Restored {
    records: AtomicU64,
}

impl StateRestoreListener for Restored {
    fn on_restore_start(&self, _: &TopicPartition, _: &str, _: i64, _: i64) {}
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, n: u64) {
        self.records.fetch_add(n, Ordering::Relaxed);
    }
    fn on_restore_end(&self, _: &TopicPartition, _: &str, _: u64) {}
}

/// Each key's counts as a read_committed consumer of the output saw them.
type Counts = Arc<Mutex<HashMap<String, Vec<i64>>>>;

fn read_counts(
    bootstrap: &str,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> (Counts, std::thread::JoinHandle<()>) {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let counts: Counts = Arc::default();
    let sink = counts.clone();
    let handle = std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
                let count = i64::from_be_bytes(m.payload().unwrap().try_into().unwrap());
                sink.lock().unwrap().entry(key).or_default().push(count);
            }
        }
    });
    (counts, handle)
}

/// Waits until every key's last count is `count`.
fn wait_for_counts(counts: &Counts, count: i64, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let done = {
            let counts = counts.lock().unwrap();
            counts.len() == KEYS && counts.values().all(|c| c.last() == Some(&count))
        };
        if done {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn round(bootstrap: &str, topic: &str, per_second: u64) -> std::thread::JoinHandle<()> {
    let inputs = (0..KEYS * PER_ROUND).map(|i| Input::new(format!("k{}", i % KEYS), "x"));
    common::produce_paced(bootstrap, topic, inputs.collect(), per_second)
}

#[test]
fn after_a_sigkill_a_transactional_store_resumes_from_its_own_files_with_exact_counts() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "txn-stores");
    let spec = run.child_spec(&bootstrap);
    let FreshRun {
        input,
        output,
        app_id: _,
        state_dir,
    } = run;
    let stop = Arc::new(AtomicBool::new(false));
    let (counts, reader) = read_counts(&bootstrap, &output, stop.clone());

    // Round one, all counted: the store holds every key.
    round(&bootstrap, &input, 0).join().unwrap();
    let mut child = common::spawn_test_child(
        module_path!(),
        "transactional_stores_child_process",
        CHILD_ENV,
        &spec,
    );
    let counted = wait_for_counts(&counts, PER_ROUND as i64, Duration::from_secs(120));
    // Round two arrives while the instance runs: it dies mid-way, with a
    // transaction open and uncommitted writes held.
    let producing = round(&bootstrap, &input, 20_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    while counted && Instant::now() < deadline {
        let started = counts
            .lock()
            .unwrap()
            .values()
            .filter(|c| c.last() > Some(&(PER_ROUND as i64)))
            .count();
        if started > KEYS / 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(counted, "the first instance counted round one within 120 s");

    // The restart, in this process, with a listener counting what it
    // restores.
    let restored = Arc::new(Restored::default());
    let mut app = counting_app(&spec);
    app.set_global_state_restore_listener(restored.clone())
        .unwrap();
    app.start().unwrap();
    producing.join().unwrap();
    let exact = wait_for_counts(&counts, 2 * PER_ROUND as i64, Duration::from_secs(120));
    // A count past the total, arriving late, would be a record counted twice.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Release);
    reader.join().unwrap();
    let state = app.state();
    app.close(Duration::from_secs(30));
    let _ = std::fs::remove_dir_all(&state_dir);

    assert_ne!(state, State::Error, "{:?}", app.errors());
    let counts = counts.lock().unwrap();
    let over: Vec<_> = counts
        .iter()
        .filter(|(_, c)| c.iter().any(|n| *n > 2 * PER_ROUND as i64))
        .take(5)
        .collect();
    assert!(over.is_empty(), "records counted twice: {over:?}");
    let short: Vec<_> = counts
        .iter()
        .filter(|(_, c)| c.last() != Some(&(2 * PER_ROUND as i64)))
        .take(5)
        .collect();
    assert!(
        exact && short.is_empty(),
        "counts short of {}: {short:?}",
        2 * PER_ROUND
    );
    // The store holds KEYS entries and its changelog at least as many
    // records; without transactional stores all of them are restored.
    let restored = restored.records.load(Ordering::Relaxed);
    eprintln!(
        "transactional stores: {restored} changelog records restored after the SIGKILL \
         (state: {KEYS} keys)"
    );
    assert!(
        restored < KEYS as u64 / 4,
        "{restored} records restored: the store was rebuilt instead of resumed"
    );
}

/// The input offsets the application's group committed for `input`'s two
/// partitions, summed: the records it committed as processed.
fn committed_input_records(bootstrap: &str, app_id: &str, input: &str) -> i64 {
    use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
    use kstreams_embedded::rdkafka::{ClientConfig, Offset, TopicPartitionList};
    // Reads the group's offsets without joining it.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", app_id)
        .create()
        .unwrap();
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition(input, 0);
    partitions.add_partition(input, 1);
    let committed = consumer
        .committed_offsets(partitions, Duration::from_secs(10))
        .unwrap();
    committed
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(offset) => offset,
            _ => 0,
        })
        .sum()
}

#[test]
fn a_read_committed_query_never_sees_a_write_before_its_transaction_commits() {
    use kstreams_runtime::kafka::{IsolationLevel, QueryableStoreTypes, StoreQueryParameters};
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "read-committed-query");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .count_with(None, kstreams_dsl::Materialized::as_("counts"));
    // Commits 3 s apart: a write stays uncommitted long enough to be read.
    let mut config = StreamsConfig::new(&run.app_id, &bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .transactional_state_stores(true)
        .commit_interval(Duration::from_secs(3))
        .state_dir(&run.state_dir);
    config
        .set(
            "default.interactive.query.isolation.level",
            "READ_COMMITTED",
        )
        .unwrap();
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let view = |level: Option<IsolationLevel>| {
        let mut parameters = StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::key_value_store::<String, i64>(),
        );
        if let Some(level) = level {
            parameters = parameters.with_isolation_level(level);
        }
        app.store(parameters).unwrap()
    };
    common::produce(&bootstrap, &run.input, [Input::new("k", "v")]);
    // The record is counted (a read of uncommitted writes sees it) ...
    let uncommitted = view(Some(IsolationLevel::ReadUncommitted));
    let deadline = Instant::now() + Duration::from_secs(60);
    while uncommitted.get(&"k".to_owned()).ok().flatten() != Some(1) {
        assert!(Instant::now() < deadline, "the record was never counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    // ... and the default (READ_COMMITTED) read answers only once the count
    // is committed: with the input offset past the record.
    let committed = view(None);
    let answer = committed.get(&"k".to_owned()).unwrap();
    let processed = committed_input_records(&bootstrap, &run.app_id, &run.input);
    app.close(Duration::from_secs(30));
    assert_eq!(answer, Some(1), "the committed count");
    assert_eq!(
        processed, 1,
        "the read committed answer came before the transaction committed"
    );
}
