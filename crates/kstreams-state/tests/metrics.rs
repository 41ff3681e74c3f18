//! The metered layer: stores initialized with a registry record the latency
//! of each call under their type, name and task, once per call.

use std::time::Duration;

use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::MetricsRegistry;
use kstreams_record::{I64Serde, StringSerde};
use kstreams_state::*;

fn s(x: &str) -> String {
    x.to_string()
}

fn context(registry: &MetricsRegistry) -> StoreContext {
    StoreContext::new("app", "0_1", 1).with_metrics(registry.clone())
}

/// Calls recorded so far in `def` for this store.
fn calls(registry: &MetricsRegistry, def: &MetricDef, store_type: &str, store: &str) -> u64 {
    registry
        .histogram(def, &[store_type, store, "0_1"])
        .unwrap()
        .sample_count()
}

fn counts(registry: &MetricsRegistry) -> KeyValueStoreHandle<String, i64> {
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("counts"),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    built.init(&context(registry)).unwrap();
    built.handle().unwrap()
}

#[test]
fn key_value_store_records_each_call_once_under_its_name() {
    let registry = MetricsRegistry::new();
    let store = counts(&registry);
    let calls = |def: &MetricDef| calls(&registry, def, "in-memory", "counts");

    store.borrow_mut().put(s("a"), 1).unwrap();
    store.borrow_mut().put(s("b"), 2).unwrap();
    store.borrow_mut().put(s("ab"), 3).unwrap();
    assert_eq!(store.borrow().get(&s("a")).unwrap(), Some(1));
    assert_eq!(store.borrow().get(&s("zz")).unwrap(), None);
    // A get and a put inside, counted once as a put-if-absent.
    assert_eq!(
        store.borrow_mut().put_if_absent(s("a"), 9).unwrap(),
        Some(1)
    );
    assert_eq!(store.borrow_mut().delete(&s("b")).unwrap(), Some(2));
    store
        .borrow_mut()
        .put_all(vec![(s("c"), 4), (s("d"), 5)])
        .unwrap();
    store.borrow_mut().flush().unwrap();

    assert_eq!(calls(&names::STATE_PUT_LATENCY), 3);
    assert_eq!(calls(&names::STATE_GET_LATENCY), 2);
    assert_eq!(calls(&names::STATE_PUT_IF_ABSENT_LATENCY), 1);
    assert_eq!(calls(&names::STATE_DELETE_LATENCY), 1);
    assert_eq!(calls(&names::STATE_PUT_ALL_LATENCY), 1);
    assert_eq!(calls(&names::STATE_FLUSH_LATENCY), 1);

    // Queries count when their iterator is dropped, as Kafka Streams
    // records them when the iterator is closed.
    {
        let st = store.borrow();
        let range = st.range(Some(&s("a")), Some(&s("b"))).unwrap();
        assert_eq!(calls(&names::STATE_RANGE_LATENCY), 0);
        assert_eq!(range.count(), 2);
        assert_eq!(calls(&names::STATE_RANGE_LATENCY), 1);
        assert_eq!(st.all().unwrap().count(), 4);
        assert_eq!(st.reverse_all().unwrap().count(), 4);
        assert_eq!(st.prefix_scan(b"a").unwrap().count(), 2);
    }
    assert_eq!(calls(&names::STATE_RANGE_LATENCY), 1);
    assert_eq!(calls(&names::STATE_ALL_LATENCY), 2);
    assert_eq!(calls(&names::STATE_PREFIX_SCAN_LATENCY), 1);

    let text = registry.gather_text();
    let labels = r#"store="counts",store_type="in-memory",task_id="0_1""#;
    assert!(
        text.contains(&format!(
            "kstreams_state_put_latency_seconds_count{{{labels}}} 3"
        )),
        "{text}"
    );
    assert!(text.contains(&format!(
        "kstreams_state_get_latency_seconds_count{{{labels}}} 2"
    )));
    let sum = registry
        .histogram(&names::STATE_PUT_LATENCY, &["in-memory", "counts", "0_1"])
        .unwrap()
        .sample_sum();
    assert!(sum > 0.0 && sum < 10.0, "put latency sum {sum}");
}

#[cfg(feature = "rocksdb")]
#[test]
fn timestamped_cached_and_persistent_stores_are_metered_too() {
    let registry = MetricsRegistry::new();
    let dir = tempfile::tempdir().unwrap();
    let built = Stores::timestamped_key_value_store_builder(
        Stores::persistent_timestamped_key_value_store("ts"),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .with_caching_enabled()
    .build();
    built
        .init(&context(&registry).with_task_directory(dir.path()))
        .unwrap();
    let store: TimestampedKeyValueStoreHandle<String, i64> = built.handle().unwrap();
    store
        .borrow_mut()
        .put(s("k"), ValueAndTimestamp::make(1, 5))
        .unwrap();
    // Served by the cache: still a get, as the processor sees it.
    assert_eq!(store.borrow().get(&s("k")).unwrap().unwrap().value, 1);
    built.lifecycle.borrow_mut().flush().unwrap();
    assert_eq!(
        calls(&registry, &names::STATE_PUT_LATENCY, "rocksdb", "ts"),
        1
    );
    assert_eq!(
        calls(&registry, &names::STATE_GET_LATENCY, "rocksdb", "ts"),
        1
    );
    assert_eq!(
        calls(&registry, &names::STATE_FLUSH_LATENCY, "rocksdb", "ts"),
        1
    );
    built.lifecycle.borrow_mut().close().unwrap();
}

#[test]
fn window_session_and_versioned_stores_record_their_calls() {
    let registry = MetricsRegistry::new();
    let ctx = context(&registry);

    let window = Stores::window_store_builder(
        Stores::in_memory_window_store(
            "win",
            Duration::from_secs(60),
            Duration::from_secs(10),
            false,
        )
        .unwrap(),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    window.init(&ctx).unwrap();
    let win: WindowStoreHandle<String, i64> = window.handle().unwrap();
    win.borrow_mut().put(s("k"), Some(1), 0).unwrap();
    win.borrow_mut().put(s("k"), Some(2), 10_000).unwrap();
    assert_eq!(win.borrow().fetch(&s("k"), 0).unwrap(), Some(1));
    assert_eq!(
        win.borrow()
            .fetch_time_range(&s("k"), 0, 20_000)
            .unwrap()
            .count(),
        2
    );
    // `all` goes through one fetch.
    assert_eq!(win.borrow().all().unwrap().count(), 2);
    let calls_w = |def| calls(&registry, def, "in-memory-window", "win");
    assert_eq!(calls_w(&names::STATE_PUT_LATENCY), 2);
    assert_eq!(calls_w(&names::STATE_FETCH_LATENCY), 3);

    let session = Stores::session_store_builder(
        Stores::in_memory_session_store("sess", Duration::from_secs(60)),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    session.init(&ctx).unwrap();
    let sess: SessionStoreHandle<String, i64> = session.handle().unwrap();
    let w = Windowed::new(s("k"), Window::new(0, 5));
    sess.borrow_mut().put(w.clone(), Some(1)).unwrap();
    assert_eq!(
        sess.borrow().find_sessions(&s("k"), 0, 10).unwrap().count(),
        1
    );
    assert_eq!(sess.borrow().fetch_session(&s("k"), 0, 5).unwrap(), Some(1));
    sess.borrow_mut().remove(&w).unwrap();
    let calls_s = |def| calls(&registry, def, "in-memory-session", "sess");
    assert_eq!(calls_s(&names::STATE_PUT_LATENCY), 1);
    assert_eq!(calls_s(&names::STATE_FETCH_LATENCY), 2);
    assert_eq!(calls_s(&names::STATE_REMOVE_LATENCY), 1);

    let versioned = Stores::versioned_key_value_store_builder(
        Stores::in_memory_versioned_key_value_store("ver", Duration::from_secs(60)),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    versioned.init(&ctx).unwrap();
    let ver: VersionedKeyValueStoreHandle<String, i64> = versioned.handle().unwrap();
    ver.borrow_mut().put(s("k"), Some(1), 10).unwrap();
    ver.borrow_mut().put(s("k"), Some(2), 20).unwrap();
    assert_eq!(ver.borrow().get(&s("k")).unwrap().unwrap().value, 2);
    assert_eq!(
        ver.borrow().get_as_of(&s("k"), 15).unwrap().unwrap().value,
        1
    );
    ver.borrow_mut().delete(&s("k"), 30).unwrap();
    let calls_v = |def| calls(&registry, def, "in-memory", "ver");
    assert_eq!(calls_v(&names::STATE_PUT_LATENCY), 2);
    assert_eq!(calls_v(&names::STATE_GET_LATENCY), 2);
    assert_eq!(calls_v(&names::STATE_DELETE_LATENCY), 1);
}

#[test]
fn no_registry_or_metrics_disabled_records_nothing() {
    // No registry: the store works and nothing is measured.
    let plain = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("plain"),
        StringSerde,
        I64Serde,
    )
    .build();
    plain.init(&StoreContext::new("app", "0_1", 1)).unwrap();
    let h: KeyValueStoreHandle<String, i64> = plain.handle().unwrap();
    h.borrow_mut().put(s("a"), 1).unwrap();
    assert_eq!(h.borrow().get(&s("a")).unwrap(), Some(1));

    // A registry, but the builder said no.
    let registry = MetricsRegistry::new();
    let builder = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("quiet"),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .with_metrics_disabled();
    assert!(!builder.metrics_enabled());
    let quiet = builder.build();
    quiet.init(&context(&registry)).unwrap();
    let h: KeyValueStoreHandle<String, i64> = quiet.handle().unwrap();
    h.borrow_mut().put(s("a"), 1).unwrap();
    assert_eq!(h.borrow().get(&s("a")).unwrap(), Some(1));
    assert!(
        !registry.gather_text().contains("quiet"),
        "{}",
        registry.gather_text()
    );
}

#[test]
fn closing_a_store_removes_its_series() {
    let registry = MetricsRegistry::new();
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("gone"),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    built.init(&context(&registry)).unwrap();
    let h: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    h.borrow_mut().put(s("a"), 1).unwrap();
    assert!(registry.gather_text().contains(r#"store="gone""#));
    built.lifecycle.borrow_mut().close().unwrap();
    assert!(!registry.gather_text().contains(r#"store="gone""#));
}
