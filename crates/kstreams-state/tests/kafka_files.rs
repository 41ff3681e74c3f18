#![cfg(feature = "rocksdb")]
//! RocksDB key-value stores keep Kafka Streams 4.4's files: values in its
//! column families, changelog offsets and the open/closed status in
//! `offsets` (KIP-1035), so either side resumes the other's state
//! directory. The files are read and written here with the rocksdb crate
//! directly, as Kafka Streams' RocksDB would.

mod common;

use std::path::Path;
use std::time::Duration;

use common::context;
use kstreams_record::{I64Serde, StringSerde};
use kstreams_state::*;
use rocksdb::{ColumnFamilyDescriptor, Options, DB};

const CHANGELOG: &str = "app-agg-changelog";

fn timestamped(name: &str) -> KeyValueStoreBuilder<String, ValueAndTimestamp<i64>> {
    Stores::timestamped_key_value_store_builder(
        Stores::persistent_timestamped_key_value_store(name),
        StringSerde,
        I64Serde,
    )
}

/// Kafka Streams' timestamped value: the timestamp, then the value.
fn kafka_value(value: i64, timestamp: i64) -> Vec<u8> {
    [timestamp.to_be_bytes(), value.to_be_bytes()].concat()
}

fn families(path: &Path) -> Vec<String> {
    let mut names = DB::list_cf(&Options::default(), path).unwrap();
    names.sort();
    names
}

/// Opens the store's files as Kafka Streams does: every family named.
fn open_raw(path: &Path, create: &[&str]) -> DB {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    let mut names = DB::list_cf(&options, path).unwrap_or_default();
    names.extend(create.iter().map(|n| n.to_string()));
    names.sort();
    names.dedup();
    let descriptors = names
        .iter()
        .filter(|n| n.as_str() != "default")
        .map(|n| ColumnFamilyDescriptor::new(n, Options::default()));
    DB::open_cf_descriptors(&options, path, descriptors).unwrap()
}

fn raw_get(db: &DB, family: &str, key: &[u8]) -> Option<Vec<u8>> {
    match family {
        "default" => db.get(key).unwrap(),
        named => db.get_cf(db.cf_handle(named).unwrap(), key).unwrap(),
    }
}

#[test]
fn a_timestamped_store_writes_kafka_streams_families_offsets_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    let built = timestamped("agg").build();
    built.init(&ctx).unwrap();
    let store: TimestampedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    store
        .borrow_mut()
        .put("a".to_string(), ValueAndTimestamp::make(5, 42))
        .unwrap();
    {
        let mut lifecycle = built.lifecycle.borrow_mut();
        lifecycle.flush().unwrap();
        lifecycle.commit_offsets(&[(CHANGELOG, 0, 41)]).unwrap();
        lifecycle.close().unwrap();
    }
    let path = dir.path().join("rocksdb/agg");
    assert_eq!(
        families(&path),
        ["default", "keyValueWithTimestamp", "offsets"]
    );
    let db = open_raw(&path, &[]);
    assert_eq!(db.iterator(rocksdb::IteratorMode::Start).count(), 0);
    assert_eq!(
        raw_get(&db, "keyValueWithTimestamp", b"a"),
        Some(kafka_value(5, 42))
    );
    assert_eq!(
        raw_get(&db, "offsets", b"app-agg-changelog-0"),
        Some(41i64.to_be_bytes().to_vec())
    );
    assert_eq!(
        raw_get(&db, "offsets", b"status"),
        Some(0i64.to_be_bytes().to_vec())
    );
    drop(db);

    // Opened again after a clean close, the store says where it is.
    let again = timestamped("agg").build();
    again.init(&ctx).unwrap();
    assert_eq!(
        again
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 0)
            .unwrap(),
        Some(RecordedOffset {
            offset: 41,
            closed_cleanly: true,
            written_transactionally: false
        })
    );
    assert_eq!(
        again
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 1)
            .unwrap(),
        None
    );
    // Dropped without a close (a crash): the offset says so, since data
    // past it may have been flushed.
    drop(again);
    let after_crash = timestamped("agg").build();
    after_crash.init(&ctx).unwrap();
    assert_eq!(
        after_crash
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 0)
            .unwrap(),
        Some(RecordedOffset {
            offset: 41,
            closed_cleanly: false,
            written_transactionally: false
        })
    );
    let store: TimestampedKeyValueStoreHandle<String, i64> = after_crash.handle().unwrap();
    assert_eq!(
        store.borrow().get(&"a".to_string()).unwrap(),
        Some(ValueAndTimestamp::make(5, 42))
    );
    // An empty commit forgets every offset (what exactly-once does at
    // open); the status stays.
    after_crash
        .lifecycle
        .borrow_mut()
        .commit_offsets(&[])
        .unwrap();
    assert_eq!(
        after_crash
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 0)
            .unwrap(),
        None
    );
    after_crash.lifecycle.borrow_mut().close().unwrap();
    let db = open_raw(&dir.path().join("rocksdb/agg"), &[]);
    assert_eq!(
        raw_get(&db, "offsets", b"status"),
        Some(0i64.to_be_bytes().to_vec())
    );
}

#[test]
fn files_kafka_streams_wrote_are_read_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rocksdb/agg");
    std::fs::create_dir_all(&path).unwrap();
    {
        let db = open_raw(&path, &["keyValueWithTimestamp", "offsets"]);
        let values = db.cf_handle("keyValueWithTimestamp").unwrap();
        db.put_cf(values, b"k", kafka_value(9, 1_000)).unwrap();
        let offsets = db.cf_handle("offsets").unwrap();
        db.put_cf(offsets, b"app-agg-changelog-0", 77i64.to_be_bytes())
            .unwrap();
        db.put_cf(offsets, b"status", 0i64.to_be_bytes()).unwrap();
        db.flush_cf(values).unwrap();
        db.flush_cf(offsets).unwrap();
    }
    let (ctx, _) = context(dir.path(), 0);
    let built = timestamped("agg").build();
    built.init(&ctx).unwrap();
    let store: TimestampedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    assert_eq!(
        store.borrow().get(&"k".to_string()).unwrap(),
        Some(ValueAndTimestamp::make(9, 1_000))
    );
    assert_eq!(
        built
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 0)
            .unwrap(),
        Some(RecordedOffset {
            offset: 77,
            closed_cleanly: true,
            written_transactionally: false
        })
    );
    // While open, the files say so: Kafka Streams under exactly-once
    // would treat them as corrupted if this process died now.
    let status = {
        let options = Options::default();
        let names = DB::list_cf(&options, &path).unwrap();
        let db = DB::open_cf_for_read_only(&options, &path, names, false).unwrap();
        raw_get(&db, "offsets", b"status")
    };
    assert_eq!(status, Some(1i64.to_be_bytes().to_vec()));
}

#[test]
fn the_earlier_kstreams_layout_moves_into_kafka_streams_family() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rocksdb/agg");
    std::fs::create_dir_all(&path).unwrap();
    {
        let db = open_raw(&path, &[]);
        for i in 0..25_000i64 {
            db.put(format!("k{i:05}"), kafka_value(i, 10 + i)).unwrap();
        }
        db.flush().unwrap();
    }
    let (ctx, _) = context(dir.path(), 0);
    let built = timestamped("agg").build();
    built.init(&ctx).unwrap();
    let store: TimestampedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    for i in [0i64, 12_345, 24_999] {
        assert_eq!(
            store.borrow().get(&format!("k{i:05}")).unwrap(),
            Some(ValueAndTimestamp::make(i, 10 + i))
        );
    }
    // Nothing recorded an offset: the task restores it from the changelog.
    assert_eq!(
        built
            .lifecycle
            .borrow()
            .committed_offset(CHANGELOG, 0)
            .unwrap(),
        None
    );
    built.lifecycle.borrow_mut().close().unwrap();
    let db = open_raw(&path, &[]);
    assert_eq!(db.iterator(rocksdb::IteratorMode::Start).count(), 0);
    let values = db.cf_handle("keyValueWithTimestamp").unwrap();
    assert_eq!(
        db.iterator_cf(values, rocksdb::IteratorMode::Start).count(),
        25_000
    );
}

#[test]
fn files_of_another_store_type_are_refused_and_kafka_streams_other_layouts_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    // A timestamped store's files opened as a plain key-value store.
    let ts = timestamped("t").build();
    ts.init(&ctx).unwrap();
    ts.lifecycle.borrow_mut().close().unwrap();
    let plain = Stores::key_value_store_builder(
        Stores::persistent_key_value_store("t"),
        StringSerde,
        I64Serde,
    )
    .build();
    let error = plain.init(&ctx).unwrap_err().to_string();
    assert!(error.contains("keyValueWithTimestamp"), "{error}");

    // Kafka Streams' versioned store (its segments are key prefixes in one
    // RocksDB at `rocksdb/<store>`) and window store (one RocksDB per
    // segment in `<store>/`) are not kstreams' layouts: kstreams keeps its
    // own under `kstreams/` and leaves theirs alone.
    let versioned_path = dir.path().join("rocksdb/v");
    std::fs::create_dir_all(&versioned_path).unwrap();
    drop(open_raw(&versioned_path, &["offsets"]));
    let versioned = Stores::versioned_key_value_store_builder(
        Stores::persistent_versioned_key_value_store("v", Duration::from_secs(60)),
        StringSerde,
        I64Serde,
    )
    .build();
    versioned.init(&ctx).unwrap();
    assert!(!versioned.lifecycle.borrow().checkpointed_in_task_file());
    assert!(dir.path().join("kstreams/v/CURRENT").exists());
    assert_eq!(families(&versioned_path), ["default", "offsets"]);

    std::fs::create_dir_all(dir.path().join("w/w.1800000")).unwrap();
    let window = window_store("w").build();
    window.init(&ctx).unwrap();
    assert!(dir.path().join("kstreams/w/CURRENT").exists());
    assert!(dir.path().join("w/w.1800000").is_dir());
}

fn window_store(name: &str) -> WindowStoreBuilder<String, i64> {
    Stores::window_store_builder(
        Stores::persistent_window_store(
            name,
            Duration::from_secs(3600),
            Duration::from_secs(60),
            false,
        )
        .unwrap(),
        StringSerde,
        I64Serde,
    )
}

#[test]
fn window_stores_keep_their_offsets_in_their_files_and_move_out_of_kafka_streams_way() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    let built = window_store("w").build();
    built.init(&ctx).unwrap();
    let store: WindowStoreHandle<String, i64> = built.handle().unwrap();
    store
        .borrow_mut()
        .put("a".to_string(), Some(3), 60_000)
        .unwrap();
    {
        let mut lifecycle = built.lifecycle.borrow_mut();
        assert!(!lifecycle.checkpointed_in_task_file());
        lifecycle.flush().unwrap();
        lifecycle
            .commit_offsets(&[("app-w-changelog", 0, 9)])
            .unwrap();
        lifecycle.close().unwrap();
    }
    // Where kstreams kept it before: `<task dir>/<store>`, Kafka Streams'
    // segments directory. Opened, it moves under `kstreams/`.
    std::fs::rename(dir.path().join("kstreams/w"), dir.path().join("w")).unwrap();
    let again = window_store("w").build();
    again.init(&ctx).unwrap();
    assert!(!dir.path().join("w").exists());
    let store: WindowStoreHandle<String, i64> = again.handle().unwrap();
    assert_eq!(
        store.borrow().fetch(&"a".to_string(), 60_000).unwrap(),
        Some(3)
    );
    assert_eq!(
        again
            .lifecycle
            .borrow()
            .committed_offset("app-w-changelog", 0)
            .unwrap(),
        Some(RecordedOffset {
            offset: 9,
            closed_cleanly: true,
            written_transactionally: false
        })
    );
}

/// The segment keyspace of a key in the segments family: its first 8
/// bytes, big-endian with the sign bit flipped.
fn segment_of(key: &[u8]) -> i64 {
    (u64::from_be_bytes(key[..8].try_into().unwrap()) ^ (1 << 63)) as i64
}

#[test]
fn window_segments_in_kstreams_earlier_layout_of_a_family_each_are_converted() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    let built = window_store("w").build();
    built.init(&ctx).unwrap();
    let store: WindowStoreHandle<String, i64> = built.handle().unwrap();
    // Segments of 30 min: three of them, all within the retention of 1 h.
    let puts = [("a", 1, 60_000), ("b", 2, 1_900_000), ("a", 3, 3_650_000)];
    for (key, value, start) in puts {
        store
            .borrow_mut()
            .put(key.to_string(), Some(value), start)
            .unwrap();
    }
    {
        let mut lifecycle = built.lifecycle.borrow_mut();
        lifecycle.flush().unwrap();
        lifecycle
            .commit_offsets(&[("app-w-changelog", 0, 2)])
            .unwrap();
        lifecycle.close().unwrap();
    }
    let path = dir.path().join("kstreams/w");
    assert!(families(&path).contains(&"kstreams.segments".to_string()));
    // Rewritten as kstreams wrote segments before: a column family
    // `ks.N` each, keys without the prefix.
    {
        let mut db = open_raw(&path, &[]);
        let mut moved = Vec::new();
        let segments = db.cf_handle("kstreams.segments").unwrap();
        for item in db.iterator_cf(segments, rocksdb::IteratorMode::Start) {
            let (key, value) = item.unwrap();
            moved.push((segment_of(&key), key[8..].to_vec(), value.to_vec()));
        }
        assert_eq!(moved.len(), 3);
        for (ks, key, value) in moved {
            let family = format!("ks.{ks}");
            if db.cf_handle(&family).is_none() {
                db.create_cf(&family, &Options::default()).unwrap();
            }
            db.put_cf(db.cf_handle(&family).unwrap(), key, value)
                .unwrap();
        }
        db.drop_cf("kstreams.segments").unwrap();
        db.flush_wal(true).unwrap();
    }
    assert_eq!(
        families(&path)
            .iter()
            .filter(|f| f.starts_with("ks."))
            .count(),
        3
    );
    let again = window_store("w").build();
    again.init(&ctx).unwrap();
    let store: WindowStoreHandle<String, i64> = again.handle().unwrap();
    for (key, value, start) in puts {
        assert_eq!(
            store.borrow().fetch(&key.to_string(), start).unwrap(),
            Some(value),
            "{key}@{start}"
        );
    }
    assert_eq!(
        again
            .lifecycle
            .borrow()
            .committed_offset("app-w-changelog", 0)
            .unwrap()
            .map(|o| o.offset),
        Some(2)
    );
    again.lifecycle.borrow_mut().close().unwrap();
    assert!(!families(&path).iter().any(|f| f.starts_with("ks.")));
}

#[test]
fn a_versioned_store_kstreams_kept_in_kafka_streams_path_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    let versioned = || {
        Stores::versioned_key_value_store_builder(
            Stores::persistent_versioned_key_value_store("v", Duration::from_secs(60)),
            StringSerde,
            I64Serde,
        )
        .build()
    };
    let built = versioned();
    built.init(&ctx).unwrap();
    let store: VersionedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    for ts in [10, 20, 30] {
        store
            .borrow_mut()
            .put("a".to_string(), Some(ts), ts)
            .unwrap();
    }
    built.lifecycle.borrow_mut().close().unwrap();
    // Where kstreams kept it before: Kafka Streams' versioned store path,
    // which Kafka Streams could not open (kstreams' own families).
    std::fs::create_dir_all(dir.path().join("rocksdb")).unwrap();
    std::fs::rename(dir.path().join("kstreams/v"), dir.path().join("rocksdb/v")).unwrap();
    assert!(families(&dir.path().join("rocksdb/v"))
        .iter()
        .any(|f| f == "kstreams.segments"));
    let again = versioned();
    again.init(&ctx).unwrap();
    assert!(!dir.path().join("rocksdb/v").exists());
    let store: VersionedKeyValueStoreHandle<String, i64> = again.handle().unwrap();
    assert_eq!(store.borrow().get(&"a".to_string()).unwrap(), None);
}
