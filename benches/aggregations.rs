//! Records per second through stateful DSL operators on the engine (no
//! broker): a count by key and a tumbling-window aggregate, on the
//! in-memory and the RocksDB store, with the record cache on (Kafka
//! Streams' default, 10 MiB, flushed at each batch's commit) and off.
//!
//! Each batch is 10 000 records over 1 000 keys with increasing
//! timestamps, then a commit (flush). Changelog records are produced and
//! dropped (no changelog writer), as a task without a broker would.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kstreams::dsl::__private::ConsumedRecord;
use kstreams::dsl::TaskId;
use kstreams::prelude::*;
use kstreams::runtime::__private::StreamTask;
use kstreams::state::StoreContext;
use std::time::Duration;

const BATCH: usize = 10_000;
const KEYS: usize = 1_000;

fn count_by_key(store_type: StoreType) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .group_by_key()
        .count_with(
            None,
            Materialized::as_("counts").with_store_type(store_type),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(I64Serde)));
    builder.build().expect("valid topology")
}

fn tumbling_sum(store_type: StoreType) -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(
            Duration::from_secs(60),
            Duration::from_secs(10),
        ))
        .aggregate_with(
            || 0i64,
            |_, v: String, sum| sum + v.len() as i64,
            None,
            Materialized::as_("sums").with_store_type(store_type),
        )
        .to_stream()
        .to_with(
            "out",
            Produced::with(
                TimeWindowedSerde::new(StringSerde, 60_000),
                Nullable(I64Serde),
            ),
        );
    builder.build().expect("valid topology")
}

fn batches() -> impl FnMut() -> Vec<ConsumedRecord> {
    let mut next = 0i64;
    move || {
        (0..BATCH)
            .map(|i| {
                next += 1;
                ConsumedRecord {
                    topic: "in".into(),
                    partition: 0,
                    offset: next,
                    // 10 records per millisecond: a window holds 600 000.
                    timestamp: next / 10,
                    key: Some(format!("user-{}", i % KEYS).into_bytes()),
                    value: Some(format!("value number {i}").into_bytes()),
                    headers: Headers::new(),
                }
            })
            .collect()
    }
}

fn bench(c: &mut Criterion, name: &str, topology: fn(StoreType) -> Topology) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(BATCH as u64));
    for (store_type, label) in [
        (StoreType::InMemory, "in_memory"),
        (StoreType::RocksDb, "rocksdb"),
    ] {
        for cache in [10 * 1024 * 1024, 0] {
            let dir = tempfile::tempdir().expect("temp dir");
            let topology = topology(store_type);
            let task_id = TaskId {
                subtopology: 0,
                partition: 0,
            };
            let mut config = TaskConfig::new("bench");
            config.cache_max_bytes = cache;
            let stores = StoreContext::new("bench", "0_0", 0)
                .with_task_directory(dir.path())
                .with_thread_cache(std::rc::Rc::new(kstreams::state::ThreadCache::new(cache)));
            let mut task = StreamTask::with_store_context(&topology, task_id, config, 0, stores)
                .expect("task");
            let mut input = batches();
            let cache_label = if cache == 0 { "no_cache" } else { "cache" };
            group.bench_function(format!("{label}_{cache_label}"), |b| {
                b.iter_batched(
                    &mut input,
                    |batch| {
                        for record in batch {
                            task.process(record).expect("processed");
                        }
                        task.flush().expect("flushed");
                        task.drain_output()
                    },
                    BatchSize::LargeInput,
                )
            });
            task.close();
        }
    }
    group.finish();
}

fn aggregations(c: &mut Criterion) {
    bench(c, "count_by_key", count_by_key);
    bench(c, "tumbling_window_aggregate", tumbling_sum);
}

criterion_group!(benches, aggregations);
criterion_main!(benches);
