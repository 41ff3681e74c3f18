//! Damaged local state: a state directory another instance holds, and on a
//! real broker (`cargo xtask kafka start`, KSTREAMS_BOOTSTRAP; skipped
//! without it) a garbage checkpoint, a deleted and a corrupted RocksDB
//! store, each rebuilt from the changelog with the counts exact.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::FreshRun;
use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::test_broker;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, StreamsConfig};

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
    let held = kstreams_state::StateDirectory::new(root.path(), "app")
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
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    for i in 0..records {
        let key = format!("k{}", i % keys);
        let value = i.to_string();
        let mut record = BaseRecord::to(topic).key(&key).payload(&value);
        while let Err((_, back)) = producer.send(record) {
            record = back;
            producer.poll(Duration::from_millis(20));
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
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
