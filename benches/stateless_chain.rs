//! Records per second through a five-operator stateless chain on the
//! engine: source (deserialize) -> filter -> map_values -> select_key ->
//! peek -> filter_not -> sink (serialize). No broker: this measures the
//! engine alone, the part kstreams adds on top of the Kafka clients.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kstreams::dsl::__private::ConsumedRecord;
use kstreams::dsl::TaskId;
use kstreams::prelude::*;
use kstreams::runtime::__private::StreamTask;

const BATCH: usize = 10_000;

fn chain() -> Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .filter(|_, v| !v.is_empty())
        .map_values(|v| v.len() as i64)
        .select_key(|k, _| k.clone())
        .peek(|_, _| {})
        .filter_not(|_, n| *n < 0)
        .to_with("out", Produced::with(StringSerde, I64Serde));
    builder.build().expect("valid topology")
}

fn records() -> Vec<ConsumedRecord> {
    (0..BATCH)
        .map(|i| ConsumedRecord {
            topic: "in".into(),
            partition: 0,
            offset: i as i64,
            timestamp: i as i64,
            key: Some(format!("user-{}", i % 1000).into_bytes()),
            value: Some(format!("value number {i}").into_bytes()),
            headers: Headers::new(),
        })
        .collect()
}

fn stateless_chain(c: &mut Criterion) {
    let topology = chain();
    let task_id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let mut task = StreamTask::new(&topology, task_id, TaskConfig::new("bench"), 0).expect("task");
    let input = records();
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("stateless_chain_5_ops", |b| {
        b.iter_batched(
            || input.clone(),
            |batch| {
                for record in batch {
                    task.process(record).expect("processed");
                }
                task.drain_output()
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, stateless_chain);
criterion_main!(benches);
