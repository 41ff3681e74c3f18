#![cfg(feature = "rocksdb")]
//! Behaviour Kafka Streams defines, case by case: versioned stores (KIP-889),
//! the cache, changelog bytes, restoration and the state directory.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{context, restore, Engine, ENGINES};
use kstreams_record::{I64Serde, StringSerde};
use kstreams_state::__private::*;
use kstreams_state::format;
use kstreams_state::*;

fn s(x: &str) -> String {
    x.to_string()
}

fn versioned(
    engine: Engine,
    dir: &std::path::Path,
    retention_ms: u64,
) -> (
    BuiltStore,
    VersionedKeyValueStoreHandle<String, i64>,
    common::Changelog,
) {
    let supplier = match engine {
        Engine::Memory => {
            Stores::in_memory_versioned_key_value_store("v", Duration::from_millis(retention_ms))
        }
        Engine::Rocks => {
            Stores::persistent_versioned_key_value_store("v", Duration::from_millis(retention_ms))
        }
    };
    let built = Stores::versioned_key_value_store_builder(supplier, StringSerde, I64Serde).build();
    let (ctx, log) = context(dir, 0);
    built.init(&ctx).unwrap();
    let handle = built.handle().unwrap();
    (built, handle, log)
}

fn rec(value: i64, timestamp: i64, valid_to: Option<i64>) -> Option<VersionedRecord<i64>> {
    Some(VersionedRecord {
        value,
        timestamp,
        valid_to,
    })
}

#[test]
fn versioned_out_of_order_puts_split_validity_intervals() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (_b, store, _) = versioned(engine, dir.path(), 1_000);
        let mut st = store.borrow_mut();
        assert_eq!(
            st.put(s("k"), Some(1), 10).unwrap(),
            PUT_RETURN_CODE_VALID_TO_UNDEFINED
        );
        assert_eq!(
            st.put(s("k"), Some(3), 30).unwrap(),
            PUT_RETURN_CODE_VALID_TO_UNDEFINED
        );
        // Out of order: lands between the two, valid until the later one.
        assert_eq!(st.put(s("k"), Some(2), 20).unwrap(), 30);
        assert_eq!(st.get(&s("k")).unwrap(), rec(3, 30, None));
        assert_eq!(st.get_as_of(&s("k"), 9).unwrap(), None);
        assert_eq!(st.get_as_of(&s("k"), 10).unwrap(), rec(1, 10, Some(20)));
        assert_eq!(st.get_as_of(&s("k"), 25).unwrap(), rec(2, 20, Some(30)));
        assert_eq!(st.get_as_of(&s("k"), 99).unwrap(), rec(3, 30, None));
        // Same timestamp replaces the version.
        assert_eq!(st.put(s("k"), Some(22), 20).unwrap(), 30);
        assert_eq!(st.get_as_of(&s("k"), 20).unwrap(), rec(22, 20, Some(30)));
    }
}

#[test]
fn versioned_deletes_are_tombstones_in_the_history() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (_b, store, _) = versioned(engine, dir.path(), 1_000);
        let mut st = store.borrow_mut();
        st.put(s("k"), Some(1), 10).unwrap();
        // delete returns the record valid at the delete's timestamp.
        assert_eq!(st.delete(&s("k"), 20).unwrap(), rec(1, 10, None));
        assert_eq!(st.get(&s("k")).unwrap(), None);
        assert_eq!(st.get_as_of(&s("k"), 15).unwrap(), rec(1, 10, Some(20)));
        assert_eq!(st.get_as_of(&s("k"), 20).unwrap(), None);
        // A put before the tombstone is valid until it.
        assert_eq!(st.put(s("k"), Some(0), 5).unwrap(), 10);
        assert_eq!(st.put(s("k"), Some(9), 15).unwrap(), 20);
        assert_eq!(st.get_as_of(&s("k"), 17).unwrap(), rec(9, 15, Some(20)));
        // An out-of-order delete cuts a version short.
        assert_eq!(st.delete(&s("k"), 12).unwrap(), rec(1, 10, Some(15)));
        assert_eq!(st.get_as_of(&s("k"), 13).unwrap(), None);
        assert_eq!(st.get_as_of(&s("k"), 11).unwrap(), rec(1, 10, Some(12)));
        // A put after the tombstone brings the key back.
        st.put(s("k"), Some(4), 40).unwrap();
        assert_eq!(st.get(&s("k")).unwrap(), rec(4, 40, None));
    }
}

#[test]
fn versioned_history_retention_drops_old_writes_and_old_reads() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (_b, store, _) = versioned(engine, dir.path(), 100);
        let mut st = store.borrow_mut();
        st.put(s("k"), Some(1), 0).unwrap();
        st.put(s("k"), Some(2), 50).unwrap();
        st.put(s("other"), Some(7), 200).unwrap(); // stream time 200: history starts at 100
                                                   // Too old to put (history retention is also the grace period)...
        assert_eq!(
            st.put(s("k"), Some(9), 99).unwrap(),
            PUT_RETURN_CODE_NOT_PUT
        );
        assert_eq!(st.delete(&s("k"), 99).unwrap(), None);
        // ...but exactly at the horizon is fine.
        assert_eq!(
            st.put(s("x"), Some(3), 100).unwrap(),
            PUT_RETURN_CODE_VALID_TO_UNDEFINED
        );
        // Reads older than the history see only the latest version, which
        // never expires.
        assert_eq!(st.get_as_of(&s("k"), 60).unwrap(), rec(2, 50, None));
        assert_eq!(st.get_as_of(&s("k"), 10).unwrap(), None);
        assert_eq!(st.get(&s("k")).unwrap(), rec(2, 50, None));
        // Within the history, the latest version answers with an open end.
        assert_eq!(st.get_as_of(&s("k"), 150).unwrap(), rec(2, 50, None));
        // A newer version makes the old one history again.
        st.put(s("k"), Some(3), 250).unwrap();
        assert_eq!(st.get_as_of(&s("k"), 160).unwrap(), rec(2, 50, Some(250)));
        st.put(s("other"), Some(8), 400).unwrap(); // history starts at 300
        assert_eq!(st.get_as_of(&s("k"), 200).unwrap(), None);
        assert_eq!(st.get_as_of(&s("k"), 300).unwrap(), rec(3, 250, None));
    }
}

#[test]
fn versioned_changelog_is_key_value_and_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (_b, store, log) = versioned(Engine::Memory, dir.path(), 100);
    store.borrow_mut().put(s("k"), Some(1), 10).unwrap();
    store.borrow_mut().delete(&s("k"), 20).unwrap();
    let log = log.borrow();
    assert_eq!(log.len(), 2);
    assert_eq!(
        (
            log[0].key.as_slice(),
            log[0].value.as_deref(),
            log[0].timestamp
        ),
        (&b"k"[..], Some(&1i64.to_be_bytes()[..]), 10)
    );
    assert_eq!((log[1].value.as_deref(), log[1].timestamp), (None, 20));
    assert_eq!(log[0].topic, "app-v-changelog");
}

#[test]
fn window_and_session_changelog_keys_are_kafka_streams_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, log) = context(dir.path(), 0);
    let win = Stores::window_store_builder(
        Stores::in_memory_window_store(
            "w",
            Duration::from_secs(60),
            Duration::from_secs(10),
            false,
        )
        .unwrap(),
        StringSerde,
        I64Serde,
    )
    .build();
    win.init(&ctx).unwrap();
    let w: WindowStoreHandle<String, i64> = win.handle().unwrap();
    ctx.set_record_timestamp(1234);
    w.borrow_mut().put(s("k"), Some(5), 10_000).unwrap();
    let dups = Stores::window_store_builder(
        Stores::in_memory_window_store("j", Duration::from_secs(60), Duration::from_secs(10), true)
            .unwrap(),
        StringSerde,
        I64Serde,
    )
    .build();
    dups.init(&ctx).unwrap();
    let j: WindowStoreHandle<String, i64> = dups.handle().unwrap();
    j.borrow_mut().put(s("k"), Some(1), 0).unwrap();
    j.borrow_mut().put(s("k"), Some(2), 0).unwrap();
    j.borrow_mut().put(s("k"), None, 0).unwrap(); // removes nothing among duplicates, still logged
    let ses = Stores::session_store_builder(
        Stores::in_memory_session_store("s", Duration::from_secs(60)),
        StringSerde,
        I64Serde,
    )
    .build();
    ses.init(&ctx).unwrap();
    let sh: SessionStoreHandle<String, i64> = ses.handle().unwrap();
    sh.borrow_mut()
        .put(Windowed::new(s("k"), Window::new(3, 7)), Some(9))
        .unwrap();
    let ending: Vec<_> = sh
        .borrow()
        .find_sessions_ending_in(5, 7)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ending, vec![(Windowed::new(s("k"), Window::new(3, 7)), 9)]);
    assert_eq!(
        sh.borrow().find_sessions_ending_in(8, 9).unwrap().count(),
        0
    );

    let log = log.borrow();
    let keys: Vec<(&str, Vec<u8>)> = log
        .iter()
        .map(|r| (r.topic.as_str(), r.key.clone()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("app-w-changelog", format::window_store_key(b"k", 10_000, 0)),
            ("app-j-changelog", format::window_store_key(b"k", 0, 1)),
            ("app-j-changelog", format::window_store_key(b"k", 0, 2)),
            ("app-j-changelog", format::window_store_key(b"k", 0, 3)),
            ("app-s-changelog", format::session_key(b"k", 3, 7)),
        ]
    );
    assert!(log.iter().all(|r| r.timestamp == 1234));
    assert_eq!(
        j.borrow()
            .fetch_time_range(&s("k"), 0, 0)
            .unwrap()
            .map(Result::unwrap)
            .collect::<Vec<_>>(),
        vec![(0, 1), (0, 2)]
    );
}

#[test]
fn timestamped_stores_log_the_plain_value_at_the_value_timestamp() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, log) = context(dir.path(), 0);
        let supplier = match engine {
            Engine::Memory => Stores::in_memory_key_value_store("t"),
            Engine::Rocks => Stores::persistent_timestamped_key_value_store("t"),
        };
        let built =
            Stores::timestamped_key_value_store_builder(supplier.clone(), StringSerde, I64Serde)
                .build();
        built.init(&ctx).unwrap();
        let store: TimestampedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
        ctx.set_record_timestamp(99);
        store
            .borrow_mut()
            .put(s("a"), ValueAndTimestamp::make(7, 42))
            .unwrap();
        store.borrow_mut().delete(&s("a")).unwrap();
        store
            .borrow_mut()
            .put(s("b"), ValueAndTimestamp::make(8, 43))
            .unwrap();
        let records = log.borrow().clone();
        assert_eq!(records[0].value.as_deref(), Some(&7i64.to_be_bytes()[..]));
        assert_eq!(records[0].timestamp, 42);
        assert_eq!(
            (records[1].value.as_deref(), records[1].timestamp),
            (None, 99)
        );
        let dir2 = tempfile::tempdir().unwrap();
        let (ctx2, _) = context(dir2.path(), 0);
        let fresh =
            Stores::timestamped_key_value_store_builder(supplier, StringSerde, I64Serde).build();
        fresh.init(&ctx2).unwrap();
        restore(&fresh, &records);
        let restored: TimestampedKeyValueStoreHandle<String, i64> = fresh.handle().unwrap();
        assert_eq!(restored.borrow().get(&s("a")).unwrap(), None);
        assert_eq!(
            restored.borrow().get(&s("b")).unwrap(),
            Some(ValueAndTimestamp::make(8, 43))
        );
    }
}

type Changes = Rc<RefCell<Vec<CachedChange<String, i64>>>>;

fn cached_kv(
    dir: &std::path::Path,
    budget: usize,
) -> (
    BuiltStore,
    KeyValueStoreHandle<String, i64>,
    common::Changelog,
    Changes,
    StoreContext,
) {
    let (ctx, log) = context(dir, budget);
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("c"),
        StringSerde,
        I64Serde,
    )
    .with_caching_enabled()
    .build();
    built.init(&ctx).unwrap();
    let store: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    let changes: Changes = Rc::default();
    let sink = changes.clone();
    assert!(store
        .borrow_mut()
        .set_flush_listener(Box::new(move |c| sink.borrow_mut().push(c)), true));
    (built, store, log, changes, ctx)
}

#[test]
fn cache_coalesces_updates_and_forwards_old_and_new_on_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (built, store, log, changes, ctx) = cached_kv(dir.path(), 1 << 20);
    for (ts, v) in [(1, 1), (2, 2), (3, 3)] {
        ctx.set_record_timestamp(ts);
        store.borrow_mut().put(s("a"), v).unwrap();
    }
    ctx.set_record_timestamp(4);
    store.borrow_mut().put(s("b"), 10).unwrap();
    assert_eq!(store.borrow().get(&s("a")).unwrap(), Some(3));
    assert!(log.borrow().is_empty() && changes.borrow().is_empty());
    built.lifecycle.borrow_mut().flush().unwrap();
    let c = changes.borrow().clone();
    assert_eq!(
        c,
        vec![
            CachedChange {
                key: s("a"),
                new_value: Some(3),
                old_value: None,
                timestamp: 3,
                headers: kstreams_record::Headers::new()
            },
            CachedChange {
                key: s("b"),
                new_value: Some(10),
                old_value: None,
                timestamp: 4,
                headers: kstreams_record::Headers::new()
            },
        ]
    );
    let l = log.borrow().clone();
    assert_eq!(l.len(), 2);
    assert_eq!((l[0].key.as_slice(), l[0].timestamp), (&b"a"[..], 3));
    // Next round: old values come from the engine.
    ctx.set_record_timestamp(5);
    store.borrow_mut().put(s("a"), 4).unwrap();
    store.borrow_mut().delete(&s("b")).unwrap();
    store.borrow_mut().delete(&s("zz")).unwrap(); // never existed: nothing to say
    built.lifecycle.borrow_mut().flush().unwrap();
    let c = changes.borrow()[2..].to_vec();
    assert_eq!(
        c,
        vec![
            CachedChange {
                key: s("a"),
                new_value: Some(4),
                old_value: Some(3),
                timestamp: 5,
                headers: kstreams_record::Headers::new()
            },
            CachedChange {
                key: s("b"),
                new_value: None,
                old_value: Some(10),
                timestamp: 5,
                headers: kstreams_record::Headers::new()
            },
        ]
    );
    assert_eq!(log.borrow().len(), 4);
}

#[test]
fn cache_over_budget_evicts_and_flushes_dirty_entries_in_write_order() {
    let dir = tempfile::tempdir().unwrap();
    // Room for about three entries.
    let (_built, store, log, changes, ctx) = cached_kv(dir.path(), 250);
    for (i, k) in ["a", "b", "c"].iter().enumerate() {
        ctx.set_record_timestamp(i as i64);
        store.borrow_mut().put(s(k), i as i64).unwrap();
    }
    assert!(changes.borrow().is_empty());
    ctx.set_record_timestamp(9);
    // Over budget: evicting the dirty eldest ("a") first flushes every
    // dirty entry of the store, "d" included, in write order.
    store.borrow_mut().put(s("d"), 3).unwrap();
    let keys: Vec<String> = changes.borrow().iter().map(|c| c.key.clone()).collect();
    assert_eq!(keys, vec![s("a"), s("b"), s("c"), s("d")]);
    assert_eq!(log.borrow().len(), 4);
    assert_eq!(log.borrow()[3].timestamp, 9);
    assert!(ctx.thread_cache().evictions() >= 1);
    assert!(ctx.thread_cache().size_bytes() <= 250);
    // Evicted data is still there, from the engine.
    assert_eq!(store.borrow().get(&s("a")).unwrap(), Some(0));
}

/// Kafka Streams turns every store's caching off when
/// `statestore.cache.max.bytes` is 0: the store takes no flush listener
/// (its processor forwards each update itself) and writes through.
#[test]
fn a_zero_budget_turns_caching_off() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, log) = context(dir.path(), 0);
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("c"),
        StringSerde,
        I64Serde,
    )
    .with_caching_enabled()
    .build();
    built.init(&ctx).unwrap();
    let store: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    assert!(!store
        .borrow_mut()
        .set_flush_listener(Box::new(|_| {}), true));
    store.borrow_mut().put(s("x"), 1).unwrap();
    assert_eq!(log.borrow().len(), 1);
    assert_eq!(ctx.thread_cache().size_bytes(), 0);
}

#[test]
fn two_stores_share_the_thread_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _log) = context(dir.path(), 300);
    let make = |name: &str| {
        let b = Stores::key_value_store_builder(
            Stores::in_memory_key_value_store(name),
            StringSerde,
            I64Serde,
        )
        .with_caching_enabled()
        .build();
        b.init(&ctx).unwrap();
        b
    };
    let (b1, b2) = (make("one"), make("two"));
    let h1: KeyValueStoreHandle<String, i64> = b1.handle().unwrap();
    let h2: KeyValueStoreHandle<String, i64> = b2.handle().unwrap();
    h1.borrow_mut().put(s("a"), 1).unwrap();
    h1.borrow_mut().put(s("b"), 1).unwrap();
    let used = ctx.thread_cache().size_bytes();
    assert!(used > 0);
    h2.borrow_mut().put(s("c"), 1).unwrap();
    h2.borrow_mut().put(s("d"), 1).unwrap();
    assert!(ctx.thread_cache().size_bytes() <= 300);
    assert_eq!(h1.borrow().get(&s("a")).unwrap(), Some(1));
}

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl StateRestoreListener for Recorder {
    fn on_restore_start(&self, partition: &TopicPartition, store: &str, start: i64, end: i64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("start {store} {partition} {start}..{end}"));
    }
    fn on_batch_restored(&self, _: &TopicPartition, store: &str, end: i64, n: u64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("batch {store} {end} {n}"));
    }
    fn on_restore_end(&self, _: &TopicPartition, store: &str, total: u64) {
        self.0.lock().unwrap().push(format!("end {store} {total}"));
    }
}

#[test]
fn restoration_reports_start_batches_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("r"),
        StringSerde,
        I64Serde,
    )
    .build();
    built.init(&ctx).unwrap();
    let listener = Arc::new(Recorder::default());
    let records: Vec<OwnedChangelogRecord> = (0..5i64)
        .map(|i| OwnedChangelogRecord {
            topic: "app-r-changelog".into(),
            partition: 0,
            key: format!("k{i}").into_bytes(),
            value: Some(i.to_be_bytes().to_vec()),
            timestamp: i,
            headers: Vec::new(),
        })
        .collect();
    let mut r = Restoration::start(
        built.lifecycle.clone(),
        "app-r-changelog",
        0,
        10,
        15,
        listener.clone(),
    );
    assert_eq!(r.total(), 5);
    let batch: Vec<ChangelogRecord<'_>> = records.iter().map(|r| r.as_record()).collect();
    r.restore_batch(&batch[..3], 12).unwrap();
    assert!(!r.is_complete());
    r.restore_batch(&batch[3..], 14).unwrap();
    assert!(r.is_complete());
    assert_eq!(r.last_offset(), Some(14));
    assert_eq!(r.restored(), 5);
    // An in-memory store flushes in place: done at once.
    assert!(r.finish().unwrap().outcome().expect("done").is_ok());
    assert_eq!(
        *listener.0.lock().unwrap(),
        vec![
            "start r app-r-changelog-0 10..15",
            "batch r 12 3",
            "batch r 14 2",
            "end r 5"
        ]
    );
    let h: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    assert_eq!(h.borrow().get(&s("k4")).unwrap(), Some(4));
}

#[test]
fn restore_starts_after_the_checkpoint_or_wipes_under_exactly_once() {
    assert_eq!(restore_start(Some(41), true, true), RestoreStart::After(41));
    assert_eq!(restore_start(None, true, false), RestoreStart::Beginning);
    assert_eq!(
        restore_start(None, true, true),
        RestoreStart::WipeThenBeginning
    );
    assert_eq!(
        restore_start(Some(OffsetCheckpoint::OFFSET_UNKNOWN), true, true),
        RestoreStart::WipeThenBeginning
    );
    assert_eq!(
        restore_start(Some(41), false, true),
        RestoreStart::Beginning
    );
}

#[test]
fn rocksdb_stores_live_in_kafka_streams_layout_and_survive_reopening() {
    let root = tempfile::tempdir().unwrap();
    let dirs = StateDirectory::new(root.path(), "app").unwrap();
    let task = dirs.lock_task("0_0").unwrap();
    let (ctx, _log) = context(task.path(), 0);
    let kv = Stores::key_value_store_builder(
        Stores::persistent_key_value_store("counts"),
        StringSerde,
        I64Serde,
    );
    let win = Stores::window_store_builder(
        Stores::persistent_window_store(
            "wins",
            Duration::from_secs(600),
            Duration::from_secs(60),
            false,
        )
        .unwrap(),
        StringSerde,
        I64Serde,
    );
    {
        let k = kv.build();
        k.init(&ctx).unwrap();
        let w = win.build();
        w.init(&ctx).unwrap();
        let kh: KeyValueStoreHandle<String, i64> = k.handle().unwrap();
        kh.borrow_mut().put(s("a"), 1).unwrap();
        let wh: WindowStoreHandle<String, i64> = w.handle().unwrap();
        wh.borrow_mut().put(s("a"), Some(2), 60_000).unwrap();
        assert!(k.lifecycle.borrow().persistent());
        k.lifecycle.borrow_mut().close().unwrap();
        w.lifecycle.borrow_mut().close().unwrap();
    }
    assert!(root.path().join("app/0_0/rocksdb/counts").is_dir());
    assert!(root.path().join("app/0_0/kstreams/wins").is_dir());
    let k = kv.build();
    k.init(&ctx).unwrap();
    let kh: KeyValueStoreHandle<String, i64> = k.handle().unwrap();
    assert_eq!(kh.borrow().get(&s("a")).unwrap(), Some(1));
    let w = win.build();
    w.init(&ctx).unwrap();
    let wh: WindowStoreHandle<String, i64> = w.handle().unwrap();
    assert_eq!(wh.borrow().fetch(&s("a"), 60_000).unwrap(), Some(2));
}

#[test]
fn persistent_store_without_task_directory_is_a_clear_error() {
    let built = Stores::key_value_store_builder(
        Stores::persistent_key_value_store("p"),
        StringSerde,
        I64Serde,
    )
    .build();
    let err = built.init(&StoreContext::new("app", "0_0", 0)).unwrap_err();
    assert!(err.to_string().contains("needs a task directory"), "{err}");
    let h: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    let err = h.borrow().get(&s("a")).unwrap_err();
    assert!(err.to_string().contains("not open"), "{err}");
}

#[test]
fn changelog_restores_rocksdb_stores_after_their_directory_is_deleted() {
    let root = tempfile::tempdir().unwrap();
    let dirs = StateDirectory::new(root.path(), "app").unwrap();
    let task = dirs.lock_task("1_2").unwrap();
    let (ctx, log) = context(task.path(), 1 << 16);
    let kv = Stores::key_value_store_builder(
        Stores::persistent_key_value_store("kv"),
        StringSerde,
        I64Serde,
    )
    .with_caching_enabled();
    let ses = Stores::session_store_builder(
        Stores::persistent_session_store("ses", Duration::from_secs(3600)),
        StringSerde,
        I64Serde,
    )
    .with_caching_enabled();
    let (k1, s1) = (kv.build(), ses.build());
    k1.init(&ctx).unwrap();
    s1.init(&ctx).unwrap();
    let kh: KeyValueStoreHandle<String, i64> = k1.handle().unwrap();
    let sh: SessionStoreHandle<String, i64> = s1.handle().unwrap();
    for i in 0..200i64 {
        ctx.set_record_timestamp(i);
        kh.borrow_mut().put(format!("k{}", i % 37), i).unwrap();
        if i % 5 == 0 {
            kh.borrow_mut().delete(&format!("k{}", i % 11)).unwrap();
        }
        sh.borrow_mut()
            .put(
                Windowed::new(format!("s{}", i % 7), Window::new(i * 1000, i * 1000 + 500)),
                Some(i),
            )
            .unwrap();
    }
    k1.lifecycle.borrow_mut().flush().unwrap();
    s1.lifecycle.borrow_mut().flush().unwrap();
    let want_kv: Vec<(String, i64)> = kh.borrow().all().unwrap().map(Result::unwrap).collect();
    let want_s: Vec<_> = sh
        .borrow()
        .fetch_key_range(None, None)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    k1.lifecycle.borrow_mut().close().unwrap();
    s1.lifecycle.borrow_mut().close().unwrap();
    let records = log.borrow().clone();
    // Both changelogs are in there, once per coalesced write.
    assert!(
        records.iter().any(|r| r.topic == "app-kv-changelog")
            && records.iter().any(|r| r.topic == "app-ses-changelog")
    );
    assert!(records.iter().all(|r| r.partition == 0));

    task.wipe_state().unwrap();
    assert!(!task.path().join("rocksdb/kv").exists());
    let (k2, s2) = (kv.build(), ses.build());
    k2.init(&ctx).unwrap();
    s2.init(&ctx).unwrap();
    let by_topic = |t: &str| {
        records
            .iter()
            .filter(|r| r.topic == t)
            .cloned()
            .collect::<Vec<_>>()
    };
    restore(&k2, &by_topic("app-kv-changelog"));
    restore(&s2, &by_topic("app-ses-changelog"));
    let kh: KeyValueStoreHandle<String, i64> = k2.handle().unwrap();
    let sh: SessionStoreHandle<String, i64> = s2.handle().unwrap();
    assert_eq!(
        kh.borrow()
            .all()
            .unwrap()
            .map(Result::unwrap)
            .collect::<Vec<_>>(),
        want_kv
    );
    assert_eq!(
        sh.borrow()
            .fetch_key_range(None, None)
            .unwrap()
            .map(Result::unwrap)
            .collect::<Vec<_>>(),
        want_s
    );
    assert!(!want_kv.is_empty() && !want_s.is_empty());
}

#[test]
fn window_segments_expire_whole_on_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _) = context(dir.path(), 0);
    // Retention 3 min: segments of 90 s.
    let store = || {
        Stores::window_store_builder(
            Stores::persistent_window_store(
                "w",
                Duration::from_secs(180),
                Duration::from_secs(10),
                false,
            )
            .unwrap(),
            StringSerde,
            I64Serde,
        )
        .build()
    };
    let all_of_k = |w: &WindowStoreHandle<String, i64>| -> Vec<(i64, i64)> {
        w.borrow()
            .fetch_time_range(&s("k"), 0, i64::MAX)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let b = store();
    b.init(&ctx).unwrap();
    let w: WindowStoreHandle<String, i64> = b.handle().unwrap();
    for t in (0..1_000_000).step_by(10_000) {
        w.borrow_mut().put(s("k"), Some(t), t).unwrap();
    }
    let left = all_of_k(&w);
    assert_eq!(left.first().unwrap().0, 990_000 - 180_000 + 10_000);
    b.lifecycle.borrow_mut().close().unwrap();
    // Only a few segments (key prefixes in the segments family) remain on
    // disk: the expired ones were deleted whole.
    let segments = segments_on_disk(&dir.path().join("kstreams/w"));
    assert!((1..=4).contains(&segments.len()), "{segments:?}");
    // Reopened, the store sees the same data.
    let again = store();
    again.init(&ctx).unwrap();
    assert_eq!(all_of_k(&again.handle().unwrap()), left);
}

/// The distinct segment keyspaces (8-byte key prefixes) with entries in a
/// segmented store's `kstreams.segments` family.
fn segments_on_disk(path: &std::path::Path) -> std::collections::BTreeSet<Vec<u8>> {
    let names = rocksdb::DB::list_cf(&rocksdb::Options::default(), path).unwrap();
    let db = rocksdb::DB::open_cf_for_read_only(&rocksdb::Options::default(), path, &names, false)
        .unwrap();
    let family = db.cf_handle("kstreams.segments").unwrap();
    db.iterator_cf(family, rocksdb::IteratorMode::Start)
        .map(|item| item.unwrap().0[..8].to_vec())
        .collect()
}

struct SmallWriteBuffers;

impl RocksDbConfigSetter for SmallWriteBuffers {
    fn set_config(
        &self,
        _: &str,
        options: &mut rocksdb_options::Options,
        _: &mut rocksdb_options::BlockBasedOptions,
    ) {
        options.set_write_buffer_size(1 << 20);
    }
}

mod rocksdb_options {
    pub(crate) use kstreams_state::rocksdb::{BlockBasedOptions, Options};
}

#[test]
fn rocksdb_options_hook_and_bounded_memory_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    let bounds = RocksDbMemoryBounds::new(8 << 20, 2 << 20);
    let settings = RocksDbSettings::new()
        .with_config_setter(Arc::new(SmallWriteBuffers))
        .with_memory_bounds(bounds.clone());
    let (ctx, _) = context(dir.path(), 0);
    let ctx = ctx.with_rocksdb(settings);
    let stores: Vec<BuiltStore> = (0..3)
        .map(|i| {
            let b = Stores::key_value_store_builder(
                Stores::persistent_key_value_store(&format!("s{i}")),
                StringSerde,
                I64Serde,
            )
            .build();
            b.init(&ctx).unwrap();
            b
        })
        .collect();
    for b in &stores {
        let h: KeyValueStoreHandle<String, i64> = b.handle().unwrap();
        for i in 0..2000 {
            h.borrow_mut().put(format!("key-{i}"), i).unwrap();
        }
    }
    // Memtables are charged to the shared cache.
    assert!(bounds.usage() > 0);
    assert!(bounds.usage() <= 8 << 20);
    let options = std::fs::read_dir(dir.path().join("rocksdb/s0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("OPTIONS-")
        })
        .unwrap();
    assert!(std::fs::read_to_string(options)
        .unwrap()
        .contains("write_buffer_size=1048576"));
}

#[test]
fn a_restore_batch_with_a_key_written_many_times_ends_with_its_last_write() {
    // The batch is written to RocksDB in key order (faster memtable
    // inserts): a key's writes must keep their order within it.
    for engine in ENGINES {
        let root = tempfile::tempdir().unwrap();
        let dirs = StateDirectory::new(root.path(), "app").unwrap();
        let task = dirs.lock_task("0_0").unwrap();
        let (ctx, log) = context(task.path(), 0);
        let supplier = match engine {
            Engine::Memory => Stores::in_memory_key_value_store("kv"),
            Engine::Rocks => Stores::persistent_key_value_store("kv"),
        };
        let builder = Stores::key_value_store_builder(supplier, StringSerde, I64Serde);
        let first = builder.build();
        first.init(&ctx).unwrap();
        let h: KeyValueStoreHandle<String, i64> = first.handle().unwrap();
        for (key, value) in [
            ("b", Some(1)),
            ("a", Some(1)),
            ("b", Some(2)),
            ("a", None),
            ("c", Some(3)),
            ("b", None),
            ("b", Some(4)),
            ("d", Some(5)),
            ("a", Some(6)),
            ("d", None),
        ] {
            match value {
                Some(v) => h.borrow_mut().put(s(key), v).unwrap(),
                None => h.borrow_mut().delete(&s(key)).map(|_| ()).unwrap(),
            }
        }
        let want: Vec<(String, i64)> = h.borrow().all().unwrap().map(Result::unwrap).collect();
        assert_eq!(want, [(s("a"), 6), (s("b"), 4), (s("c"), 3)], "{engine:?}");
        first.lifecycle.borrow_mut().close().unwrap();
        let records = log.borrow().clone();
        assert_eq!(
            records.len(),
            10,
            "{engine:?}: one changelog record per write"
        );

        task.wipe_state().unwrap();
        let second = builder.build();
        second.init(&ctx).unwrap();
        let batch: Vec<ChangelogRecord<'_>> = records.iter().map(|r| r.as_record()).collect();
        second.lifecycle.borrow_mut().restore_batch(&batch).unwrap();
        let h: KeyValueStoreHandle<String, i64> = second.handle().unwrap();
        let restored: Vec<(String, i64)> = h.borrow().all().unwrap().map(Result::unwrap).collect();
        assert_eq!(restored, want, "{engine:?}");
    }
}
