//! Interactive queries (`KafkaStreams::store`) on librdkafka's in-process
//! cluster: key-value, timestamped, window and session stores read across
//! two stream threads while the application runs, by partition, with the
//! errors Kafka Streams gives for unknown stores, wrong types and a
//! stopped application. The streams-protocol metadata calls are tested on
//! the real broker (tests/streams_group.rs).

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, StreamsBuilder};
use kstreams_embedded::EmbeddedKafka;
use kstreams_record::StringSerde;
use kstreams_runtime::kafka::{
    KafkaStreams, QueryError, QueryableStoreTypes, ReadOnlyKeyValueView, State,
    StoreQueryParameters, StreamsConfig,
};
use kstreams_state::{Window, Windowed};
use kstreams_time::{SessionWindows, TimeWindows};

const APP: &str = "iq-app";
const INPUT: &str = "iq-input";
const PARTITIONS: i32 = 4;
const KEYS: usize = 12;
const WINDOW_MS: i64 = 10_000;

fn key(i: usize) -> String {
    format!("k{}", i % KEYS)
}

/// Every key lives on one partition, chosen here (the mock cluster's
/// producer would hash with librdkafka's partitioner, not Kafka's).
fn partition_of(key: &str) -> i32 {
    key[1..].parse::<i32>().unwrap() % PARTITIONS
}

fn timestamp(i: usize) -> i64 {
    1_000 + i as i64 * 100
}

fn produce(bootstrap: &str, range: std::ops::Range<usize>) {
    let inputs = range.map(|i| {
        let key = key(i);
        let partition = partition_of(&key);
        Input::new(key, format!("v{i}"))
            .in_partition(partition)
            .at(timestamp(i))
    });
    common::produce(bootstrap, INPUT, inputs);
}

/// What `n` records make: per key its count and latest timestamp, and its
/// count per tumbling window.
struct Expected {
    counts: BTreeMap<String, i64>,
    latest: BTreeMap<String, i64>,
    windows: BTreeMap<(String, i64), i64>,
    first: BTreeMap<String, i64>,
}

fn expected(n: usize) -> Expected {
    let mut e = Expected {
        counts: BTreeMap::new(),
        latest: BTreeMap::new(),
        windows: BTreeMap::new(),
        first: BTreeMap::new(),
    };
    for i in 0..n {
        let (k, ts) = (key(i), timestamp(i));
        *e.counts.entry(k.clone()).or_default() += 1;
        e.latest.insert(k.clone(), ts);
        e.first.entry(k.clone()).or_insert(ts);
        *e.windows.entry((k, ts - ts % WINDOW_MS)).or_default() += 1;
    }
    e
}

struct App {
    streams: KafkaStreams,
    dir: std::path::PathBuf,
}

impl Drop for App {
    fn drop(&mut self) {
        self.streams.close(Duration::from_secs(30));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Counts per key (store `counts`), per 10 s window (`windows`: a grace
/// of an hour keeps every window of the run) and per session (`sessions`:
/// a gap longer than any key's spacing, so one session per key).
fn app(kafka: &EmbeddedKafka) -> App {
    for store in ["counts", "windows", "sessions"] {
        kafka
            .create_topic(&format!("{APP}-{store}-changelog"), PARTITIONS, 1)
            .unwrap();
    }
    let builder = StreamsBuilder::new();
    let grouped = builder.stream::<String, String>(INPUT).group_by_key();
    grouped.count_with(None, Materialized::as_("counts"));
    grouped
        .windowed_by(TimeWindows::of_size_and_grace(
            Duration::from_millis(WINDOW_MS as u64),
            Duration::from_secs(3600),
        ))
        .count_with(None, Materialized::as_("windows"));
    grouped
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(
            Duration::from_secs(60),
        ))
        .count_with(None, Materialized::as_("sessions"));
    let dir = std::env::temp_dir().join(format!(
        "kstreams-iq-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let config = StreamsConfig::new(APP, kafka.bootstrap_servers())
        .num_stream_threads(2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&dir);
    App {
        streams: KafkaStreams::new(builder.build().unwrap(), config),
        dir,
    }
}

/// Waits until both stream threads run tasks, so that the input is
/// processed without a rebalance moving a task midway (at-least-once would
/// then count the records since the last commit twice).
fn wait_until_both_threads_run(app: &App) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let metadata = app.streams.metadata();
        let busy = metadata
            .threads
            .iter()
            .filter(|t| !t.active_tasks.is_empty())
            .count();
        let tasks: usize = metadata.threads.iter().map(|t| t.active_tasks.len()).sum();
        // One sub-topology: one task per partition.
        if metadata.state == State::Running && busy == 2 && tasks == PARTITIONS as usize {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "threads not running: {metadata:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn counts_view(app: &App) -> ReadOnlyKeyValueView<String, i64> {
    app.streams
        .store(StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::key_value_store::<String, i64>(),
        ))
        .unwrap()
}

/// Reads `read` until it returns `want` (errors while the group forms
/// are retried); fails with the last answer after a minute.
fn eventually<T: PartialEq + std::fmt::Debug>(
    what: &str,
    want: &T,
    read: impl Fn() -> Result<T, QueryError>,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = read();
        if got.as_ref().ok() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: wanted {want:?}, last read {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn key_value_stores_are_read_across_threads_by_key_range_prefix_and_partition() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, PARTITIONS, 1).unwrap();
    let mut app = app(&kafka);
    let before = app.streams.store(StoreQueryParameters::from_name_and_type(
        "counts",
        QueryableStoreTypes::key_value_store::<String, i64>(),
    ));
    assert!(
        matches!(before, Err(QueryError::NotStarted)),
        "{:?}",
        before.err()
    );
    app.streams.start().unwrap();
    wait_until_both_threads_run(&app);
    produce(&kafka.bootstrap_servers(), 0..600);
    let want = expected(600);

    let counts = counts_view(&app);
    eventually("every count", &want.counts, || {
        Ok(counts.all()?.into_iter().collect::<BTreeMap<_, _>>())
    });
    for (k, n) in &want.counts {
        assert_eq!(counts.get(k).unwrap(), Some(*n), "{k}");
    }
    assert_eq!(counts.get(&"absent".to_string()).unwrap(), None);

    // Ranges and prefixes: each local store in key order, then merged.
    let mut in_range: Vec<String> = counts
        .range(Some(&"k1".to_string()), Some(&"k3".to_string()))
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    in_range.sort();
    assert_eq!(in_range, ["k1", "k10", "k11", "k2", "k3"]);
    let mut prefixed: Vec<String> = counts
        .prefix_scan(b"k1")
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    prefixed.sort();
    assert_eq!(prefixed, ["k1", "k10", "k11"]);
    assert_eq!(counts.reverse_all().unwrap().len(), KEYS);
    // RocksDB's estimate: of what the record cache handed it, at a commit.
    let deadline = Instant::now() + Duration::from_secs(10);
    while counts.approximate_num_entries().unwrap() == 0 {
        assert!(Instant::now() < deadline, "no estimate after commits");
        std::thread::sleep(Duration::from_millis(50));
    }

    // With a timestamp: the latest record's, as the DSL stores it.
    let stamped = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::timestamped_key_value_store::<String, i64>(),
        ))
        .unwrap();
    for (k, n) in &want.counts {
        let found = stamped.get(k).unwrap().expect(k);
        assert_eq!((found.value, found.timestamp), (*n, want.latest[k]), "{k}");
    }

    // One partition: only its task's store answers.
    for partition in 0..PARTITIONS {
        let one = app
            .streams
            .store(
                StoreQueryParameters::from_name_and_type(
                    "counts",
                    QueryableStoreTypes::key_value_store::<String, i64>(),
                )
                .with_partition(partition),
            )
            .unwrap();
        let keys: Vec<String> = one.all().unwrap().into_iter().map(|(k, _)| k).collect();
        assert!(!keys.is_empty(), "partition {partition}");
        for k in want.counts.keys() {
            let local = one.get(k).unwrap();
            assert_eq!(
                local.is_some(),
                partition_of(k) == partition,
                "{k} @ {partition}"
            );
        }
    }
    let missing = app.streams.store(
        StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::key_value_store::<String, i64>(),
        )
        .with_partition(PARTITIONS + 3),
    );
    assert!(
        matches!(
            missing.unwrap().get(&"k1".to_string()),
            Err(QueryError::NotAvailable { .. })
        ),
        "a partition no task holds"
    );

    // Errors as Kafka Streams gives them.
    let unknown = app.streams.store(StoreQueryParameters::from_name_and_type(
        "no-such-store",
        QueryableStoreTypes::key_value_store::<String, i64>(),
    ));
    assert!(
        matches!(&unknown, Err(QueryError::UnknownStore { store, .. }) if store == "no-such-store"),
        "{:?}",
        unknown.err()
    );
    let as_window = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::window_store::<String, i64>(),
        ))
        .unwrap();
    let wrong = as_window.fetch(&"k1".to_string(), 0);
    assert!(
        matches!(&wrong, Err(QueryError::WrongStoreType { store, .. }) if store == "counts"),
        "{wrong:?}"
    );
    let wrong_value = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "counts",
            QueryableStoreTypes::key_value_store::<String, String>(),
        ))
        .unwrap()
        .get(&"k1".to_string());
    assert!(
        matches!(wrong_value, Err(QueryError::WrongStoreType { .. })),
        "{wrong_value:?}"
    );
    let metadata = app.streams.metadata_for_all_streams_clients();
    assert!(
        matches!(&metadata, Err(QueryError::MetadataUnavailable(why)) if why.contains("group.protocol=streams")),
        "{metadata:?}"
    );
    let for_key = app
        .streams
        .query_metadata_for_key("counts", &"k1".to_string(), &StringSerde);
    assert!(
        matches!(for_key, Err(QueryError::MetadataUnavailable(_))),
        "{for_key:?}"
    );

    assert!(app.streams.close(Duration::from_secs(30)));
    let after = counts.get(&"k1".to_string());
    assert!(
        matches!(
            after,
            Err(QueryError::NotRunning {
                state: State::NotRunning
            })
        ),
        "{after:?}"
    );
}

#[test]
fn window_and_session_stores_are_read_while_records_arrive_and_counts_never_go_back() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, PARTITIONS, 1).unwrap();
    let mut app = app(&kafka);
    app.streams.start().unwrap();
    wait_until_both_threads_run(&app);

    // Readers on other threads while the input goes in: a key's count
    // seen by one reader never goes back (reads see every processed
    // record, through the cache).
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let counts = counts_view(&app);
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut seen: BTreeMap<String, i64> = BTreeMap::new();
                let mut reads = 0u64;
                while !stop.load(Ordering::Acquire) {
                    for i in 0..KEYS {
                        let k = key(i);
                        if let Ok(Some(n)) = counts.get(&k) {
                            let before = seen.insert(k.clone(), n).unwrap_or(0);
                            assert!(n >= before, "{k} went from {before} to {n}");
                            reads += 1;
                        }
                    }
                }
                reads
            })
        })
        .collect();
    produce(&kafka.bootstrap_servers(), 0..300);
    produce(&kafka.bootstrap_servers(), 300..600);
    let want = expected(600);
    let counts = counts_view(&app);
    eventually("every count", &want.counts, || {
        Ok(counts.all()?.into_iter().collect::<BTreeMap<_, _>>())
    });
    stop.store(true, Ordering::Release);
    for reader in readers {
        assert!(reader.join().unwrap() > 0, "a reader read nothing");
    }

    let windows = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "windows",
            QueryableStoreTypes::window_store::<String, i64>(),
        ))
        .unwrap();
    eventually("every window", &want.windows, || {
        Ok(windows
            .all()?
            .into_iter()
            .map(|(w, n)| ((w.key, w.window.start), n))
            .collect::<BTreeMap<_, _>>())
    });
    for ((k, start), n) in &want.windows {
        assert_eq!(windows.fetch(k, *start).unwrap(), Some(*n), "{k}@{start}");
    }
    let k0: Vec<(i64, i64)> = want
        .windows
        .iter()
        .filter(|((k, _), _)| k == "k0")
        .map(|((_, start), n)| (*start, *n))
        .collect();
    assert_eq!(
        windows
            .fetch_time_range(&"k0".to_string(), 0, i64::MAX)
            .unwrap(),
        k0
    );
    let mut backward = k0.clone();
    backward.reverse();
    assert_eq!(
        windows
            .backward_fetch_time_range(&"k0".to_string(), 0, i64::MAX)
            .unwrap(),
        backward
    );
    // The timestamped view of the same store.
    let stamped = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "windows",
            QueryableStoreTypes::timestamped_window_store::<String, i64>(),
        ))
        .unwrap();
    let (start, n) = k0[0];
    assert_eq!(
        stamped
            .fetch(&"k0".to_string(), start)
            .unwrap()
            .map(|v| v.value),
        Some(n)
    );

    let sessions = app
        .streams
        .store(StoreQueryParameters::from_name_and_type(
            "sessions",
            QueryableStoreTypes::session_store::<String, i64>(),
        ))
        .unwrap();
    for (k, n) in &want.counts {
        let session = Windowed {
            key: k.clone(),
            window: Window {
                start: want.first[k],
                end: want.latest[k],
            },
        };
        eventually(
            &format!("the session of {k}"),
            &vec![(session.clone(), *n)],
            || sessions.fetch(k),
        );
        assert_eq!(
            sessions
                .fetch_session(k, session.window.start, session.window.end)
                .unwrap(),
            Some(*n)
        );
    }
}
