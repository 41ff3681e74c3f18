//! Damaged local state: a state directory another instance holds, and on a
//! real broker (`cargo xtask kafka start`, KSTREAMS_BOOTSTRAP; skipped
//! without it) a garbage checkpoint, a deleted and a corrupted RocksDB
//! store, each rebuilt from the changelog with the counts exact; a deleted
//! checkpoint, where the RocksDB stores' own offsets (Kafka Streams 4.4's
//! `offsets` column family) resume them without a restore.

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::FreshRun;
use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::test_broker;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, StreamsConfig};
use kstreams_state::{StateRestoreListener, TopicPartition};

fn counting_app(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &Path,
) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
    let config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .state_dir(state_dir);
    KafkaStreams::new(builder.build().unwrap(), config)
}

#[test]
fn a_second_instance_on_a_held_state_directory_fails_to_start_saying_why() {
    let root = tempfile::tempdir().unwrap();
    let held = kstreams_state::__private::StateDirectory::new(root.path(), "app")
        .unwrap()
        .lock_application_directory()
        .unwrap();
    // No broker is asked: the lock is taken first.
    let mut app = counting_app("127.0.0.1:1", "app", "in", "out", root.path());
    let error = app.start().unwrap_err().to_string();
    assert!(error.contains("is locked by another instance"), "{error}");
    drop(held);
}

fn produce(bootstrap: &str, topic: &str, keys: usize, records: usize) {
    let inputs = (0..records).map(|i| Input::new(format!("k{}", i % keys), i.to_string()));
    common::produce(bootstrap, topic, inputs);
}

/// Reads the count topic from the start until every key's latest count is
/// `want`, or 60 s; returns the latest counts.
fn latest_counts(bootstrap: &str, topic: &str, keys: usize, want: i64) -> BTreeMap<String, i64> {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let mut latest = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && !(latest.len() == keys && latest.values().all(|&c| c == want))
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            if let Some(bytes) = m.payload().and_then(|p| <[u8; 8]>::try_from(p).ok()) {
                latest.insert(key, i64::from_be_bytes(bytes));
            }
        }
    }
    latest
}

fn task_dirs(state_dir: &Path, app_id: &str) -> Vec<PathBuf> {
    std::fs::read_dir(state_dir.join(app_id))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect()
}

#[test]
fn damaged_local_state_is_rebuilt_from_the_changelog() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let FreshRun {
        input,
        output,
        app_id,
        state_dir,
    } = FreshRun::new(&bootstrap, "damaged");
    let keys = 10;
    let per_round = 200;

    type Damage = fn(&Path);
    let damages: [(&str, Damage); 4] = [
        ("nothing", |_| {}),
        ("a garbage checkpoint", |task| {
            std::fs::write(task.join(".checkpoint"), b"\xff\xfe garbage").unwrap()
        }),
        ("a deleted RocksDB store", |task| {
            std::fs::remove_dir_all(task.join("rocksdb")).unwrap()
        }),
        ("a corrupted RocksDB store", |task| {
            std::fs::write(task.join("rocksdb/counts/CURRENT"), b"garbage").unwrap()
        }),
    ];
    for (round, (what, damage)) in damages.into_iter().enumerate() {
        if round > 0 {
            for task in task_dirs(&state_dir, &app_id) {
                damage(&task);
            }
        }
        produce(&bootstrap, &input, keys, per_round);
        let mut app = counting_app(&bootstrap, &app_id, &input, &output, &state_dir);
        app.start().unwrap();
        let want = ((round + 1) * per_round / keys) as i64;
        let counts = latest_counts(&bootstrap, &output, keys, want);
        assert!(app.close(Duration::from_secs(30)), "closed after {what}");
        assert!(app.errors().is_empty(), "after {what}: {:?}", app.errors());
        assert!(
            counts.len() == keys && counts.values().all(|&c| c == want),
            "after {what}, every key counted {want} times: {counts:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&state_dir);
}

/// Counts the changelog records restored.
#[derive(Default)]
struct Restored(AtomicU64);

impl StateRestoreListener for Restored {
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, num_restored: u64) {
        self.0.fetch_add(num_restored, Ordering::SeqCst);
    }
}

#[test]
fn without_a_checkpoint_rocksdb_stores_resume_from_their_own_offsets() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let FreshRun {
        input,
        output,
        app_id,
        state_dir,
    } = FreshRun::new(&bootstrap, "own-offsets");
    let (keys, per_round) = (10, 300);
    for round in 0..2 {
        if round == 1 {
            // What Kafka Streams 4.4 leaves: no `.checkpoint`, the offsets
            // in each store's files.
            for task in task_dirs(&state_dir, &app_id) {
                assert!(task.join(".checkpoint").exists(), "{}", task.display());
                std::fs::remove_file(task.join(".checkpoint")).unwrap();
            }
        }
        produce(&bootstrap, &input, keys, per_round);
        let restored = Arc::new(Restored::default());
        let mut app = counting_app(&bootstrap, &app_id, &input, &output, &state_dir);
        app.set_global_state_restore_listener(restored.clone())
            .unwrap();
        app.start().unwrap();
        let want = ((round + 1) * per_round / keys) as i64;
        let counts = latest_counts(&bootstrap, &output, keys, want);
        assert!(app.close(Duration::from_secs(30)));
        assert!(app.errors().is_empty(), "{:?}", app.errors());
        assert!(
            counts.len() == keys && counts.values().all(|&c| c == want),
            "round {round}: every key counted {want} times: {counts:?}"
        );
        // Under exactly-once a store without a valid offset is wiped and
        // restored in full (`keys` records at least): none was.
        assert_eq!(restored.0.load(Ordering::SeqCst), 0, "round {round}");
    }
    let _ = std::fs::remove_dir_all(&state_dir);
}

#[test]
fn in_memory_stores_are_not_checkpointed() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let FreshRun {
        input,
        output,
        app_id,
        state_dir,
    } = FreshRun::new(&bootstrap, "in-memory-checkpoint");
    produce(&bootstrap, &input, 5, 50);
    let builder = StreamsBuilder::new();
    let stream = builder.stream::<String, String>(&input);
    stream
        .group_by_key()
        .count_with(None, Materialized::as_("on-disk"))
        .to_stream()
        .to_with(&output, Produced::with(StringSerde, Nullable(I64Serde)));
    stream
        .group_by_key()
        .count_with(
            None,
            Materialized::as_("in-memory").with_store_type(kstreams_dsl::StoreType::InMemory),
        )
        .to_stream()
        .to_with(&output, Produced::with(StringSerde, Nullable(I64Serde)));
    let config = StreamsConfig::new(&app_id, &bootstrap).state_dir(&state_dir);
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    latest_counts(&bootstrap, &output, 5, 10);
    assert!(app.close(Duration::from_secs(30)));
    let mut checkpointed = String::new();
    for task in task_dirs(&state_dir, &app_id) {
        checkpointed += &std::fs::read_to_string(task.join(".checkpoint")).unwrap_or_default();
    }
    assert!(checkpointed.contains("on-disk-changelog"), "{checkpointed}");
    // Kafka Streams, which may back the store with RocksDB, would take the
    // in-memory store's offset for its own and restore nothing before it.
    assert!(
        !checkpointed.contains("in-memory-changelog"),
        "{checkpointed}"
    );
    let _ = std::fs::remove_dir_all(&state_dir);
}

#[test]
fn under_exactly_once_a_store_with_an_empty_changelog_does_not_rebuild_its_task() {
    use kstreams_dsl::Consumed;
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let FreshRun {
        input,
        output,
        app_id,
        state_dir,
    } = FreshRun::new(&bootstrap, "empty-store");
    // A table nobody writes to, joined in the same task as the count: its
    // store's changelog stays empty.
    let empty = kstreams_embedded::unique_name("empty-table-in");
    kstreams_embedded::create_topic(&bootstrap, &empty, 2, 1).unwrap();
    let app = || {
        let builder = StreamsBuilder::new();
        let table = builder.table_with(
            &empty,
            Consumed::with(StringSerde, StringSerde),
            Materialized::as_("empty-table"),
        );
        builder
            .stream::<String, String>(&input)
            .left_join(&table, |value: &String, _: Option<&String>| value.clone())
            .group_by_key()
            .count_with(None, Materialized::as_("counts"))
            .to_stream()
            .to_with(&output, Produced::with(StringSerde, Nullable(I64Serde)));
        let config = StreamsConfig::new(&app_id, &bootstrap)
            .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
            .state_dir(&state_dir);
        KafkaStreams::new(builder.build().unwrap(), config)
    };
    let (keys, per_round) = (10, 200);
    for round in 0..2 {
        produce(&bootstrap, &input, keys, per_round);
        let restored = Arc::new(Restored::default());
        let mut app = app();
        app.set_global_state_restore_listener(restored.clone())
            .unwrap();
        app.start().unwrap();
        let want = ((round + 1) * per_round / keys) as i64;
        let counts = latest_counts(&bootstrap, &output, keys, want);
        assert!(app.close(Duration::from_secs(30)));
        assert!(app.errors().is_empty(), "{:?}", app.errors());
        assert!(
            counts.len() == keys && counts.values().all(|&c| c == want),
            "round {round}: every key counted {want} times: {counts:?}"
        );
        // A rebuilt task would restore the counts' changelog.
        assert_eq!(restored.0.load(Ordering::SeqCst), 0, "round {round}");
    }
    let _ = std::fs::remove_dir_all(&state_dir);
}
