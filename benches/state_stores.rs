//! State store operations on each engine, next to the same operations on
//! the `rocksdb` crate directly (the ceiling kstreams' RocksDB engine is
//! measured against).
//!
//! - `raw-rocksdb`: `DB::put_opt` / `get_pinned` / a bounded iterator with
//!   the exact options and write options kstreams opens its stores with;
//! - `rocksdb-bytes`: kstreams' RocksDB key-value engine through its
//!   byte-level trait (what every typed store sits on);
//! - `rocksdb-typed`: a `KeyValueStore<String, i64>` on RocksDB (serdes
//!   included, no cache, no changelog);
//! - `in-memory-typed`: the same on the in-memory engine.
//!
//! The `metered-get` and `metered-put` groups put the metered layer's cost
//! on the same in-memory store: `metrics-off` has no registry in its
//! `StoreContext` (the default), `metrics-on` records every call's latency
//! into a Prometheus histogram.
//!
//! Run: `cargo bench -p kstreams-benches --bench state_stores`
//! (only the metered groups: `... --bench state_stores -- metered`).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kstreams::metrics::MetricsRegistry;
use kstreams::prelude::*;
use kstreams::state::rocksdb::{IteratorMode, ReadOptions, WriteOptions, DB};
use kstreams::state::{KeyValueBytesStore, RocksDbSettings, StoreBuilder, StoreContext};

const KEYS: usize = 100_000;
const RANGE: usize = 100;

fn key(i: usize) -> String {
    format!("key-{i:08}")
}

fn keys() -> Vec<String> {
    // A fixed shuffle so puts and gets do not walk the keys in order.
    let mut out: Vec<String> = (0..KEYS).map(key).collect();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..out.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.swap(i, (state % (i as u64 + 1)) as usize);
    }
    out
}

fn context(dir: &std::path::Path) -> StoreContext {
    StoreContext::new("bench", "0_0", 0).with_task_directory(dir)
}

fn typed(engine: &str, dir: &std::path::Path) -> KeyValueStoreHandle<String, i64> {
    let supplier = match engine {
        "rocksdb" => Stores::persistent_key_value_store("store"),
        _ => Stores::in_memory_key_value_store("store"),
    };
    let built = Stores::key_value_store_builder(supplier, StringSerde, I64Serde)
        .with_logging_disabled()
        .build();
    built.init(&context(dir)).unwrap();
    let handle: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    for (i, k) in keys().into_iter().enumerate() {
        handle.borrow_mut().put(k, i as i64).unwrap();
    }
    handle
}

fn in_memory(metrics: Option<MetricsRegistry>) -> KeyValueStoreHandle<String, i64> {
    let built = Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("store"),
        StringSerde,
        I64Serde,
    )
    .with_logging_disabled()
    .build();
    let mut context = StoreContext::new("bench", "0_0", 0);
    if let Some(registry) = metrics {
        context = context.with_metrics(registry);
    }
    built.init(&context).unwrap();
    let handle: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
    for (i, k) in keys().into_iter().enumerate() {
        handle.borrow_mut().put(k, i as i64).unwrap();
    }
    handle
}

fn metered(c: &mut Criterion) {
    let keys = keys();
    let registry = MetricsRegistry::new();
    let stores = [
        ("metrics-off", in_memory(None)),
        ("metrics-on", in_memory(Some(registry.clone()))),
    ];
    let mut i = 0usize;
    let mut group = c.benchmark_group("metered-get");
    for (name, store) in &stores {
        group.bench_function(*name, |b| {
            b.iter(|| {
                i = (i + 1) % KEYS;
                store.borrow().get(&keys[i]).unwrap().unwrap()
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group("metered-put");
    for (name, store) in &stores {
        group.bench_function(*name, |b| {
            b.iter_batched(
                || {
                    i = (i + 1) % KEYS;
                    (keys[i].clone(), i as i64)
                },
                |(k, v)| store.borrow_mut().put(k, v).unwrap(),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
    // The metered store did record: the figures above are not of a no-op.
    assert!(registry
        .gather_text()
        .contains("kstreams_state_put_latency_seconds_count"));
}

fn bytes_engine(dir: &std::path::Path) -> Box<dyn KeyValueBytesStore> {
    let mut engine = Stores::persistent_key_value_store("store").get();
    engine.init(&context(dir)).unwrap();
    for (i, k) in keys().iter().enumerate() {
        engine
            .put(k.as_bytes(), Some(&(i as i64).to_be_bytes()))
            .unwrap();
    }
    engine
}

fn raw(dir: &std::path::Path) -> (DB, WriteOptions) {
    let options = RocksDbSettings::new().options("store");
    let db = DB::open(&options, dir.join("raw")).unwrap();
    let mut write = WriteOptions::default();
    write.disable_wal(true);
    for (i, k) in keys().iter().enumerate() {
        db.put_opt(k.as_bytes(), (i as i64).to_be_bytes(), &write)
            .unwrap();
    }
    (db, write)
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    let dir = tempfile::tempdir().unwrap();
    let (db, write) = raw(dir.path());
    let engine_dir = tempfile::tempdir().unwrap();
    let mut engine = bytes_engine(engine_dir.path());
    let typed_dir = tempfile::tempdir().unwrap();
    let rocks = typed("rocksdb", typed_dir.path());
    let memory_dir = tempfile::tempdir().unwrap();
    let memory = typed("memory", memory_dir.path());
    let key_bytes: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();

    let mut i = 0usize;
    let mut group = c.benchmark_group("get");
    group.bench_function("raw-rocksdb", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            let v = db.get_pinned(&key_bytes[i]).unwrap().unwrap();
            i64::from_be_bytes(v.as_ref().try_into().unwrap())
        })
    });
    group.bench_function("rocksdb-bytes", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            engine.get(&key_bytes[i]).unwrap().unwrap()
        })
    });
    group.bench_function("rocksdb-typed", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            rocks.borrow().get(&keys[i]).unwrap().unwrap()
        })
    });
    group.bench_function("in-memory-typed", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            memory.borrow().get(&keys[i]).unwrap().unwrap()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("range-100");
    let starts: Vec<usize> = (0..1000).map(|n| (n * 97) % (KEYS - RANGE)).collect();
    let mut n = 0usize;
    group.bench_function("raw-rocksdb", |b| {
        b.iter(|| {
            n = (n + 1) % starts.len();
            let (from, to) = (key(starts[n]), key(starts[n] + RANGE - 1));
            let mut read = ReadOptions::default();
            read.set_iterate_lower_bound(from.into_bytes());
            let mut upper = to.into_bytes();
            upper.push(0);
            read.set_iterate_upper_bound(upper);
            let mut sum = 0i64;
            for item in db.iterator_opt(IteratorMode::Start, read) {
                let (_, v) = item.unwrap();
                sum += i64::from_be_bytes(v.as_ref().try_into().unwrap());
            }
            sum
        })
    });
    group.bench_function("rocksdb-typed", |b| {
        b.iter(|| {
            n = (n + 1) % starts.len();
            let (from, to) = (key(starts[n]), key(starts[n] + RANGE - 1));
            let store = rocks.borrow();
            let mut sum = 0i64;
            for item in store.range(Some(&from), Some(&to)).unwrap() {
                sum += item.unwrap().1;
            }
            sum
        })
    });
    group.bench_function("in-memory-typed", |b| {
        b.iter(|| {
            n = (n + 1) % starts.len();
            let (from, to) = (key(starts[n]), key(starts[n] + RANGE - 1));
            let store = memory.borrow();
            let mut sum = 0i64;
            for item in store.range(Some(&from), Some(&to)).unwrap() {
                sum += item.unwrap().1;
            }
            sum
        })
    });
    group.finish();
    // Puts last: they grow the memtables, which would slow the reads.
    let mut group = c.benchmark_group("put");
    group.bench_function("raw-rocksdb", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            db.put_opt(&key_bytes[i], (i as i64).to_be_bytes(), &write)
                .unwrap();
        })
    });
    group.bench_function("rocksdb-bytes", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            engine
                .put(&key_bytes[i], Some(&(i as i64).to_be_bytes()))
                .unwrap();
        })
    });
    group.bench_function("rocksdb-typed", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % KEYS;
                (keys[i].clone(), i as i64)
            },
            |(k, v)| rocks.borrow_mut().put(k, v).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("in-memory-typed", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % KEYS;
                (keys[i].clone(), i as i64)
            },
            |(k, v)| memory.borrow_mut().put(k, v).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = bench, metered
}
criterion_main!(benches);
