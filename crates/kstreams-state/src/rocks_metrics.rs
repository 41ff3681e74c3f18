//! Kafka Streams' RocksDB property metrics (KIP-607) of one store: gauges
//! read from RocksDB's own properties, summed over the store's column
//! families as Kafka Streams sums them over a store's segments.
//!
//! Kafka Streams reads a property when its metric is read. Here a store
//! sets its gauges when it opens and at its flushes (every commit), just
//! before its memtables are written out, at most once per
//! [`REFRESH_INTERVAL`]: reading every property of every store at each
//! commit would cost more than the commit under exactly-once. The series go
//! when the store closes, as Kafka Streams removes a store's metrics.

use std::time::{Duration, Instant};

use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::{Gauge, MetricsRegistry};
use rocksdb::properties::{self, PropName};
use rocksdb::{ColumnFamily, DB};

/// The least time between two readings of a store's properties.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// How a property adds up over a store's column families.
#[derive(Clone, Copy)]
enum Over {
    /// Each family has its own: summed.
    Families,
    /// The database's (running flushes and compactions, background
    /// errors), or the block cache's, which the store's families share:
    /// read once.
    Once,
}

/// Each metric, the property it reads and how it adds up.
const PROPERTIES: &[(&MetricDef, &PropName, Over)] = &[
    (
        &names::ROCKSDB_NUM_IMMUTABLE_MEM_TABLE,
        properties::NUM_IMMUTABLE_MEM_TABLE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_CUR_SIZE_ACTIVE_MEM_TABLE,
        properties::CUR_SIZE_ACTIVE_MEM_TABLE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_CUR_SIZE_ALL_MEM_TABLES,
        properties::CUR_SIZE_ALL_MEM_TABLES,
        Over::Families,
    ),
    (
        &names::ROCKSDB_SIZE_ALL_MEM_TABLES,
        properties::SIZE_ALL_MEM_TABLES,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_ENTRIES_ACTIVE_MEM_TABLE,
        properties::NUM_ENTRIES_ACTIVE_MEM_TABLE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_ENTRIES_IMM_MEM_TABLES,
        properties::NUM_ENTRIES_IMM_MEM_TABLES,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_DELETES_ACTIVE_MEM_TABLE,
        properties::NUM_DELETES_ACTIVE_MEM_TABLE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_DELETES_IMM_MEM_TABLES,
        properties::NUM_DELETES_IMM_MEM_TABLES,
        Over::Families,
    ),
    (
        &names::ROCKSDB_MEM_TABLE_FLUSH_PENDING,
        properties::MEM_TABLE_FLUSH_PENDING,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_RUNNING_FLUSHES,
        properties::NUM_RUNNING_FLUSHES,
        Over::Once,
    ),
    (
        &names::ROCKSDB_COMPACTION_PENDING,
        properties::COMPACTION_PENDING,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_RUNNING_COMPACTIONS,
        properties::NUM_RUNNING_COMPACTIONS,
        Over::Once,
    ),
    (
        &names::ROCKSDB_ESTIMATE_PENDING_COMPACTION_BYTES,
        properties::ESTIMATE_PENDING_COMPACTION_BYTES,
        Over::Families,
    ),
    (
        &names::ROCKSDB_TOTAL_SST_FILES_SIZE,
        properties::TOTAL_SST_FILES_SIZE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_LIVE_SST_FILES_SIZE,
        properties::LIVE_SST_FILES_SIZE,
        Over::Families,
    ),
    (
        &names::ROCKSDB_NUM_LIVE_VERSIONS,
        properties::NUM_LIVE_VERSIONS,
        Over::Families,
    ),
    (
        &names::ROCKSDB_BLOCK_CACHE_CAPACITY,
        properties::BLOCK_CACHE_CAPACITY,
        Over::Once,
    ),
    (
        &names::ROCKSDB_BLOCK_CACHE_USAGE,
        properties::BLOCK_CACHE_USAGE,
        Over::Once,
    ),
    (
        &names::ROCKSDB_BLOCK_CACHE_PINNED_USAGE,
        properties::BLOCK_CACHE_PINNED_USAGE,
        Over::Once,
    ),
    (
        &names::ROCKSDB_ESTIMATE_NUM_KEYS,
        properties::ESTIMATE_NUM_KEYS,
        Over::Families,
    ),
    (
        &names::ROCKSDB_ESTIMATE_TABLE_READERS_MEM,
        properties::ESTIMATE_TABLE_READERS_MEM,
        Over::Families,
    ),
    (
        &names::ROCKSDB_BACKGROUND_ERRORS,
        properties::BACKGROUND_ERRORS,
        Over::Once,
    ),
    (
        &names::ROCKSDB_ESTIMATE_LIVE_DATA_SIZE,
        properties::ESTIMATE_LIVE_DATA_SIZE,
        Over::Families,
    ),
];

/// The property gauges of one open RocksDB store.
pub(crate) struct PropertyMetrics {
    registry: MetricsRegistry,
    /// `store_type`, `store`, `task_id`.
    labels: [String; 3],
    /// One per entry of [`PROPERTIES`] that could be registered.
    gauges: Vec<(usize, Gauge)>,
    refreshed: Option<Instant>,
}

impl PropertyMetrics {
    /// The gauges of store `store` of task `task_id`, whose metrics scope
    /// (`rocksdb`, `rocksdb-window`, `rocksdb-session`) is `scope`.
    pub(crate) fn new(registry: &MetricsRegistry, scope: &str, store: &str, task_id: &str) -> Self {
        let labels = [scope.to_string(), store.to_string(), task_id.to_string()];
        let values = [scope, store, task_id];
        let gauges = PROPERTIES
            .iter()
            .enumerate()
            .filter_map(|(i, (def, _, _))| match registry.gauge(def, &values) {
                Ok(gauge) => Some((i, gauge)),
                Err(e) => {
                    log::warn!("state store {store}: no metric {}: {e}", def.name);
                    None
                }
            })
            .collect();
        PropertyMetrics {
            registry: registry.clone(),
            labels,
            gauges,
            refreshed: None,
        }
    }

    /// Reads the properties of `db`, whose column families besides
    /// `default` are `families`, unless they were read less than
    /// [`REFRESH_INTERVAL`] ago.
    pub(crate) fn refresh(&mut self, db: &DB, families: &[&ColumnFamily]) {
        if self
            .refreshed
            .is_some_and(|at| at.elapsed() < REFRESH_INTERVAL)
        {
            return;
        }
        self.refresh_now(db, families);
    }

    /// Reads the properties of `db` as it opens; its first flush reads
    /// them again, whenever it comes.
    pub(crate) fn read_at_open(&mut self, db: &DB, families: &[&ColumnFamily]) {
        self.refresh_now(db, families);
        self.refreshed = None;
    }

    /// Reads the properties of `db` now.
    fn refresh_now(&mut self, db: &DB, families: &[&ColumnFamily]) {
        for (i, gauge) in &self.gauges {
            let (_, property, over) = PROPERTIES[*i];
            // A property RocksDB does not report (an error, or none for
            // this table format) counts as 0.
            let mut value = db.property_int_value(property).ok().flatten().unwrap_or(0);
            if let Over::Families = over {
                for family in families {
                    value += db
                        .property_int_value_cf(*family, property)
                        .ok()
                        .flatten()
                        .unwrap_or(0);
                }
            }
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        }
        self.refreshed = Some(Instant::now());
    }
}

impl Drop for PropertyMetrics {
    /// The store closed: its series go, as Kafka Streams removes a store's
    /// metrics at close.
    fn drop(&mut self) {
        let values = [
            self.labels[0].as_str(),
            self.labels[1].as_str(),
            self.labels[2].as_str(),
        ];
        for (i, _) in &self.gauges {
            self.registry.remove(PROPERTIES[*i].0, &values);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rocksdb_metric_reads_a_property() {
        let defined: Vec<&str> = names::ALL
            .iter()
            .filter(|def| def.name.starts_with("kstreams_rocksdb_"))
            .map(|def| def.name)
            .collect();
        let read: Vec<&str> = PROPERTIES.iter().map(|(def, _, _)| def.name).collect();
        assert_eq!(defined, read);
    }
}
