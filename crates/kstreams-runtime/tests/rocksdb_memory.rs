//! RocksDB for operators, through the runtime on librdkafka's mock cluster:
//! `rocksdb.config.setter` resolves a setter the application registered and
//! reaches every store the instance opens, and with bounded memory the
//! stores of all tasks share one block cache and write buffer manager, so
//! RocksDB's memory stays under the bound while the state written grows
//! well beyond it. Figures come from RocksDB's own properties, through the
//! property metrics (KIP-607) a scrape reads.

use crate::common::{self, Input};

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, StreamsBuilder};
use kstreams_embedded::EmbeddedKafka;
use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::MetricsRegistry;
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
use kstreams_state::rocksdb::{BlockBasedOptions, Options};
use kstreams_state::RocksDbConfigSetter;

const MIB: f64 = (1 << 20) as f64;
const INPUT: &str = "wide-rows";
const PARTITIONS: i32 = 3;
/// Stores per task: 8 reductions of the input, each its own store.
const STORES: usize = 8;
const RECORDS: usize = 30_000;
const VALUE_BYTES: usize = 300;
const BOUND: usize = 8 << 20;
const MEMTABLES: usize = 4 << 20;

/// Notes the stores it is called for (and shrinks their memtables, as a
/// setter tuning a bounded instance would).
#[derive(Default)]
struct RecordingSetter {
    stores: Mutex<Vec<String>>,
}

impl RocksDbConfigSetter for RecordingSetter {
    fn set_config(&self, store: &str, options: &mut Options, _table: &mut BlockBasedOptions) {
        options.set_write_buffer_size(1 << 20);
        self.stores.lock().unwrap().push(store.to_string());
    }
}

fn values(registry: &MetricsRegistry, def: &MetricDef) -> Vec<f64> {
    registry.samples(def).into_iter().map(|s| s.value).collect()
}

/// RocksDB's figures as the metrics last read them.
struct Reading {
    stores: usize,
    /// Each store's `block-cache-usage` and `-capacity`.
    cache_usage: Vec<f64>,
    cache_capacity: Vec<f64>,
    /// `size-all-mem-tables` over every store.
    memtables: f64,
    /// `estimate-live-data-size` and memtables over every store: the state
    /// written.
    state: f64,
}

fn read(registry: &MetricsRegistry) -> Reading {
    let memtables: f64 = values(registry, &names::ROCKSDB_SIZE_ALL_MEM_TABLES)
        .iter()
        .sum();
    Reading {
        stores: registry.samples(&names::ROCKSDB_BLOCK_CACHE_USAGE).len(),
        cache_usage: values(registry, &names::ROCKSDB_BLOCK_CACHE_USAGE),
        cache_capacity: values(registry, &names::ROCKSDB_BLOCK_CACHE_CAPACITY),
        memtables,
        state: values(registry, &names::ROCKSDB_ESTIMATE_LIVE_DATA_SIZE)
            .iter()
            .sum::<f64>()
            + memtables,
    }
}

#[test]
fn bounded_memory_holds_across_every_store_of_the_instance() {
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    let app_id = format!("rocksdb-bounded-{}", std::process::id());
    kafka.create_topic(INPUT, PARTITIONS, 1).unwrap();
    let builder = StreamsBuilder::new();
    let rows = builder.stream::<String, String>(INPUT).group_by_key();
    for i in 0..STORES {
        // The mock cluster takes no CreateTopics with configs: the
        // changelogs are made here.
        kafka
            .create_topic(&format!("{app_id}-wide-{i}-changelog"), PARTITIONS, 1)
            .unwrap();
        rows.reduce_with(|_, new| new, None, Materialized::as_(format!("wide-{i}")));
    }
    let setter = Arc::new(RecordingSetter::default());
    let state_dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", kafka.bootstrap_servers().as_str()),
        ("commit.interval.ms", "100"),
        // Every write reaches RocksDB.
        ("statestore.cache.max.bytes", "0"),
        ("rocksdb.config.setter", "com.example.RecordingSetter"),
        ("kstreams.rocksdb.bounded.memory.bytes", &BOUND.to_string()),
        (
            "kstreams.rocksdb.bounded.memtable.bytes",
            &MEMTABLES.to_string(),
        ),
    ])
    .unwrap()
    .state_dir(state_dir.path())
    .register_rocksdb_config_setter("RecordingSetter", setter.clone());
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let padding = "v".repeat(VALUE_BYTES);
    common::produce(
        &kafka.bootstrap_servers(),
        INPUT,
        (0..RECORDS).map(|i| Input::new(format!("row-{i:08}"), format!("{i}{padding}"))),
    );

    let registry = app.metrics().clone();
    let all_stores = STORES * PARTITIONS as usize;
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut peak_cache, mut peak_memtables, mut readings) = (0.0f64, 0.0f64, 0);
    let last = loop {
        let reading = read(&registry);
        if reading.stores > 0 {
            readings += 1;
            let cache = reading.cache_usage.iter().cloned().fold(0.0, f64::max);
            peak_cache = peak_cache.max(cache);
            peak_memtables = peak_memtables.max(reading.memtables);
            // RocksDB's cache is not strict (kstreams-state's
            // rocksdb_memory test says why): a tenth of slack.
            assert!(
                cache <= BOUND as f64 * 1.1,
                "block-cache-usage {cache} over the bound"
            );
            assert!(
                reading.memtables <= BOUND as f64,
                "memtables {} over the bound",
                reading.memtables
            );
        }
        let processed = common::metric_sum(&registry.gather_text(), "kstreams_task_process_total");
        // The gauges follow the commits: done once the last ones show the
        // whole state.
        let written = reading.state > 4.0 * BOUND as f64;
        if processed as usize == RECORDS && reading.stores == all_stores && written {
            break reading;
        }
        assert!(
            Instant::now() < deadline,
            "timed out: {processed} of {RECORDS} records processed, {} of {all_stores} stores, \
             {:.1} MiB of state (4 times the bound expected)",
            reading.stores,
            reading.state / MIB
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    println!(
        "{all_stores} RocksDB stores bounded to {:.0} MiB ({:.0} MiB memtables): state written \
         {:.1} MiB; over {readings} readings, peak block-cache-usage {:.2} MiB (memtables \
         charged to it), peak memtables over all stores {:.2} MiB",
        BOUND as f64 / MIB,
        MEMTABLES as f64 / MIB,
        last.state / MIB,
        peak_cache / MIB,
        peak_memtables / MIB,
    );
    // One cache for every store of every task: each reports its capacity.
    assert_eq!(last.cache_capacity.len(), all_stores);
    assert!(
        last.cache_capacity.iter().all(|c| *c == BOUND as f64),
        "{:?}",
        last.cache_capacity
    );
    assert!(peak_cache > 0.0 && readings > 1);
    // The setter the key named ran for every store the instance opened.
    let called: BTreeSet<String> = setter.stores.lock().unwrap().iter().cloned().collect();
    let expected: BTreeSet<String> = (0..STORES).map(|i| format!("wide-{i}")).collect();
    assert_eq!(called, expected);
    assert!(setter.stores.lock().unwrap().len() >= all_stores);
    assert!(app.close(Duration::from_secs(30)));
}

#[test]
fn an_unregistered_setter_name_fails_start_naming_the_key() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 1, 1).unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .group_by_key()
        .count();
    let state_dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::from_properties([
        ("application.id", "rocksdb-unknown-setter"),
        ("bootstrap.servers", kafka.bootstrap_servers().as_str()),
        (
            "rocksdb.config.setter",
            "com.example.BoundedMemoryRocksDBConfig",
        ),
    ])
    .unwrap()
    .state_dir(state_dir.path());
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let err = app.start().unwrap_err().to_string();
    assert!(
        err.contains("for config rocksdb.config.setter")
            && err.contains(
                "StreamsConfig::register_rocksdb_config_setter(\"BoundedMemoryRocksDBConfig\""
            ),
        "{err}"
    );
}
