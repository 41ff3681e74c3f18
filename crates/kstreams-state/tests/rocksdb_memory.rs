//! RocksDB for operators: bounded memory shared by many stores, and Kafka
//! Streams' RocksDB property metrics (KIP-607).
#![cfg(feature = "rocksdb")]

use std::time::Duration;

use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::MetricsRegistry;
use kstreams_record::{BytesSerde, StringSerde};
use kstreams_state::*;

const MIB: usize = 1 << 20;

fn gauge(registry: &MetricsRegistry, def: &MetricDef, scope: &str, store: &str) -> Option<f64> {
    registry
        .samples(def)
        .into_iter()
        .find(|s| s.label("store_type") == Some(scope) && s.label("store") == Some(store))
        .map(|s| s.value)
}

fn key_value_store(name: &str, context: &StoreContext) -> BuiltStore {
    let built = Stores::key_value_store_builder(
        Stores::persistent_key_value_store(name),
        StringSerde,
        BytesSerde,
    )
    .with_logging_disabled()
    .with_caching_disabled()
    .build();
    built.init(context).unwrap();
    built
}

fn window_store(name: &str, context: &StoreContext) -> BuiltStore {
    let built = Stores::window_store_builder(
        Stores::persistent_window_store(
            name,
            Duration::from_secs(3600),
            Duration::from_secs(60),
            false,
        )
        .unwrap(),
        StringSerde,
        StringSerde,
    )
    .with_logging_disabled()
    .with_caching_disabled()
    .build();
    built.init(context).unwrap();
    built
}

#[test]
fn property_metrics_come_from_the_store_and_leave_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let registry = MetricsRegistry::new();
    let context = StoreContext::new("app", "0_3", 3)
        .with_task_directory(dir.path())
        .with_rocksdb_metrics(registry.clone());
    let kv = key_value_store("counts", &context);
    let window = window_store("clicks", &context);
    let keys = &names::ROCKSDB_ESTIMATE_NUM_KEYS;
    let active = &names::ROCKSDB_NUM_ENTRIES_ACTIVE_MEM_TABLE;
    let live = &names::ROCKSDB_LIVE_SST_FILES_SIZE;
    // Opened: the series exist, at RocksDB's figures for an empty store.
    let capacity = gauge(
        &registry,
        &names::ROCKSDB_BLOCK_CACHE_CAPACITY,
        "rocksdb",
        "counts",
    );
    assert_eq!(
        capacity,
        Some((50 * MIB) as f64),
        "Kafka Streams' 50 MiB cache"
    );
    assert_eq!(gauge(&registry, active, "rocksdb", "counts"), Some(0.0));
    let handle: KeyValueStoreHandle<String, Vec<u8>> = kv.handle().unwrap();
    for i in 0..5_000 {
        handle
            .borrow_mut()
            .put(format!("key-{i:05}"), vec![7; 100])
            .unwrap();
    }
    let clicks: WindowStoreHandle<String, String> = window.handle().unwrap();
    clicks
        .borrow_mut()
        .put("alice".to_string(), Some("home".to_string()), 60_000)
        .unwrap();
    // The first flush (commit) after the open reads the properties before
    // the memtables go to disk: 5 000 entries in them.
    kv.lifecycle.borrow_mut().flush().unwrap();
    window.lifecycle.borrow_mut().flush().unwrap();
    assert_eq!(gauge(&registry, active, "rocksdb", "counts"), Some(5_000.0));
    let estimated = gauge(&registry, keys, "rocksdb", "counts").unwrap();
    assert!((5_000.0..=5_010.0).contains(&estimated), "{estimated}");
    let memtables = gauge(
        &registry,
        &names::ROCKSDB_CUR_SIZE_ALL_MEM_TABLES,
        "rocksdb",
        "counts",
    );
    assert!(memtables.unwrap() > 500_000.0, "{memtables:?}");
    let window_keys = gauge(&registry, keys, "rocksdb-window", "clicks").unwrap();
    assert!(window_keys >= 1.0, "{window_keys}");
    let text = registry.gather_text();
    assert!(
        text.contains(
            "kstreams_rocksdb_block_cache_capacity_bytes{store=\"clicks\",\
             store_type=\"rocksdb-window\",task_id=\"0_3\"} 52428800"
        ),
        "{text}"
    );
    // Closed: its series are gone, the other store's stay.
    kv.lifecycle.borrow_mut().close().unwrap();
    assert_eq!(gauge(&registry, keys, "rocksdb", "counts"), None);
    assert!(gauge(&registry, keys, "rocksdb-window", "clicks").is_some());
    // Reopened: its data is in SST files now, its memtables empty.
    let kv = key_value_store("counts", &context);
    assert_eq!(gauge(&registry, active, "rocksdb", "counts"), Some(0.0));
    let on_disk = gauge(&registry, live, "rocksdb", "counts").unwrap();
    assert!(on_disk > 500_000.0, "{on_disk}");
    kv.lifecycle.borrow_mut().close().unwrap();
}

const STORES: usize = 24;
const KEYS: usize = 12_000;
const VALUE: usize = 200;

/// What many stores' RocksDB memory came to, from RocksDB's own figures.
struct Figures {
    /// Bytes written into the stores.
    written: usize,
    /// Under bounds, the peaks while writing of the shared cache's usage
    /// (blocks, index and filter blocks and the memtables' reservations)
    /// and of the memtables.
    peak_cache: usize,
    peak_memtables: usize,
    /// At the end, from the property metrics: each store's
    /// `block-cache-usage` and `-capacity`, and all memtables
    /// (`size-all-mem-tables`).
    cache_usage: Vec<f64>,
    cache_capacity: Vec<f64>,
    memtables: f64,
}

/// Writes `STORES` key-value stores in turn, with reads of earlier keys
/// between the writes (data blocks into the block cache) and no flush:
/// memtables grow until RocksDB flushes them itself. Then each store
/// flushes once, which sets its property metrics from RocksDB just before
/// its memtables go to disk.
fn write_many_stores(settings: RocksDbSettings, bounds: Option<&RocksDbMemoryBounds>) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let registry = MetricsRegistry::new();
    let stores: Vec<(BuiltStore, KeyValueStoreHandle<String, Vec<u8>>)> = (0..STORES)
        .map(|i| {
            // Three tasks, as a thread's stores would be.
            let task = format!("0_{}", i % 3);
            let context = StoreContext::new("app", &task, (i % 3) as i32)
                .with_task_directory(dir.path().join(&task))
                .with_rocksdb(settings.clone())
                .with_rocksdb_metrics(registry.clone());
            let built = key_value_store(&format!("store-{i}"), &context);
            let handle = built.handle().unwrap();
            (built, handle)
        })
        .collect();
    let mut figures = Figures {
        written: 0,
        peak_cache: 0,
        peak_memtables: 0,
        cache_usage: Vec::new(),
        cache_capacity: Vec::new(),
        memtables: 0.0,
    };
    for round in 0..KEYS / 100 {
        for (_, handle) in &stores {
            let mut store = handle.borrow_mut();
            for i in round * 100..(round + 1) * 100 {
                store
                    .put(format!("key-{i:08}"), vec![i as u8; VALUE])
                    .unwrap();
                figures.written += VALUE + 12;
            }
            // A read hands the held writes to RocksDB, and reads a block.
            let earlier = (round * 7919) % ((round + 1) * 100);
            store.get(&format!("key-{earlier:08}")).unwrap();
        }
        if let Some(bounds) = bounds {
            figures.peak_cache = figures.peak_cache.max(bounds.usage());
            figures.peak_memtables = figures.peak_memtables.max(bounds.memtable_usage());
        }
        // A commit every ten rounds flushes every store, as a stream
        // thread's does: between two, the stores write 5 MiB.
        if round % 10 == 9 {
            for (built, _) in &stores {
                built.lifecycle.borrow_mut().flush().unwrap();
            }
        }
    }
    for (i, (built, handle)) in stores.iter().enumerate() {
        let key = format!("key-{:08}", KEYS - 1 - i);
        let value = handle.borrow().get(&key).unwrap();
        assert_eq!(value.map(|v| v.len()), Some(VALUE), "{key} lost");
        built.lifecycle.borrow_mut().flush().unwrap();
    }
    let usage = registry.samples(&names::ROCKSDB_BLOCK_CACHE_USAGE);
    assert_eq!(usage.len(), STORES);
    figures.cache_usage = usage.into_iter().map(|s| s.value).collect();
    figures.cache_capacity = registry
        .samples(&names::ROCKSDB_BLOCK_CACHE_CAPACITY)
        .iter()
        .map(|s| s.value)
        .collect();
    figures.memtables = registry
        .samples(&names::ROCKSDB_SIZE_ALL_MEM_TABLES)
        .iter()
        .map(|s| s.value)
        .sum();
    figures
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / MIB as f64)
}

/// How far past its capacity the shared cache may go: RocksDB's LRU cache
/// is not strict (Kafka Streams' recipe: a strict one fails reads once
/// memtables are charged to it), and while flushes lag behind a burst of
/// writes the memtables' reservations and the blocks readers pin can hold
/// it over capacity. Measured: 7.3 to 8.1 MiB against 8 MiB.
const CACHE_SLACK: f64 = 1.10;

#[test]
fn many_stores_written_well_beyond_the_bound_stay_within_it() {
    let total = 8 * MIB;
    // Half for memtables, as `kstreams.rocksdb.bounded.memory.bytes` alone.
    let bounds = RocksDbMemoryBounds::new(total, total / 2);
    let settings = RocksDbSettings::new().with_memory_bounds(bounds.clone());
    let figures = write_many_stores(settings, Some(&bounds));
    println!(
        "bounded to {}, {STORES} stores, {} written: peak cache usage {} (memtables charged \
         to it), peak memtables {}",
        mib(total as f64),
        mib(figures.written as f64),
        mib(figures.peak_cache as f64),
        mib(figures.peak_memtables as f64),
    );
    assert!(figures.written > 6 * total, "written {}", figures.written);
    // One cache for every store, as each store's metrics say.
    assert_eq!(figures.cache_capacity.len(), STORES);
    assert!(
        figures.cache_capacity.iter().all(|c| *c == total as f64),
        "{:?}",
        figures.cache_capacity
    );
    // The total is the cache's usage: data, index and filter blocks, and
    // the memtables, whose memory it reserves; at each store's last
    // commit too.
    let bound = total as f64 * CACHE_SLACK;
    assert!(
        figures.peak_cache as f64 <= bound,
        "peak {}",
        mib(figures.peak_cache as f64)
    );
    for usage in &figures.cache_usage {
        assert!(*usage <= bound, "block-cache-usage {}", mib(*usage));
    }
    // Memtables pass their part while flushes lag, never the bound.
    assert!(
        figures.peak_memtables <= total,
        "peak memtables {}",
        mib(figures.peak_memtables as f64)
    );
    assert!(figures.peak_memtables > 0 && figures.peak_cache > MIB);
}

/// The same workload with Kafka Streams' defaults (a cache per store, no
/// write buffer manager) outgrows the bound: the test above would catch
/// bounds that did not hold. The usage depends on when RocksDB flushes
/// (24 to 33 MiB seen, 16.0 on CI's loaded machine, where it once failed a
/// check of twice the bound), so it must only pass what the bounded test
/// allows, by a quarter again; the capacities, a cache of its own per
/// store, do not depend on timing.
#[test]
fn without_bounds_the_same_stores_outgrow_the_bound() {
    let figures = write_many_stores(RocksDbSettings::new(), None);
    let caches: f64 = figures.cache_usage.iter().sum();
    let total = caches + figures.memtables;
    println!(
        "unbounded, {STORES} stores, {} written: block caches {}, memtables {}, total {}",
        mib(figures.written as f64),
        mib(caches),
        mib(figures.memtables),
        mib(total),
    );
    let allowed = (8 * MIB) as f64 * CACHE_SLACK;
    assert!(total > 1.25 * allowed, "total {}", mib(total));
    let capacity: f64 = figures.cache_capacity.iter().sum();
    assert!(
        capacity > (STORES * 8 * MIB) as f64,
        "capacities {}",
        mib(capacity)
    );
}
