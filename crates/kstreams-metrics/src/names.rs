//! The metrics kstreams records: Kafka Streams' metrics under Prometheus
//! names.
//!
//! Kafka Streams names a metric by group, name and tags
//! (`stream-task-metrics`, `process-rate`, `thread-id`/`task-id`) and keeps
//! a rate, a total, an average and a maximum per sensor. Prometheus computes
//! rates and averages at query time, so each Kafka Streams sensor becomes
//! one series here:
//!
//! - `*-rate` and `*-total` become a counter named `kstreams_<scope>_<what>_total`
//!   (`rate(kstreams_task_process_total[1m])` is Kafka's `process-rate`);
//! - `*-latency-avg` and `*-latency-max` become a histogram in seconds named
//!   `kstreams_<scope>_<what>_latency_seconds`, whose `_count` is also the
//!   number of calls (Kafka's `put-rate` is `rate(..._count[1m])`);
//! - values that go up and down (consumer lag) become gauges.
//!
//! Tags keep their meaning with Prometheus spelling: `thread-id` is
//! `thread_id`, `task-id` is `task_id`, `processor-node-id` is `node`, and a
//! store's `<type>-state-id` tag is split into `store_type` (the store's
//! metrics scope, such as `rocksdb` or `in-memory-window`) and `store`.
//!
//! Each [`MetricDef`] below says which Kafka Streams metric it stands for.

/// Label: the stream thread (`thread-id`).
pub const THREAD_ID: &str = "thread_id";
/// Label: the task, as Kafka prints it, `0_1` (`task-id`).
pub const TASK_ID: &str = "task_id";
/// Label: the processor node (`processor-node-id`).
pub const NODE: &str = "node";
/// Label: the store's metrics scope (the `<type>` of `<type>-state-id`).
pub const STORE_TYPE: &str = "store_type";
/// Label: the store name.
pub const STORE: &str = "store";
/// Label: a topic.
pub const TOPIC: &str = "topic";
/// Label: a partition number.
pub const PARTITION: &str = "partition";

/// What kind of Prometheus metric a [`MetricDef`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// Only goes up ([`crate::Counter`]).
    Counter,
    /// Goes up and down ([`crate::Gauge`]).
    Gauge,
    /// Observations in buckets, with their count and sum ([`crate::Histogram`]).
    Histogram,
}

/// A metric family: its Prometheus name, help text, kind and label names.
///
/// Define your own as a `const` to record application metrics through the
/// same [`crate::MetricsRegistry`]:
///
/// ```
/// use kstreams_metrics::names::{MetricDef, MetricKind};
///
/// const ORDERS_REJECTED: MetricDef = MetricDef {
///     name: "shop_orders_rejected_total",
///     help: "Orders the validation step rejected.",
///     kind: MetricKind::Counter,
///     labels: &["reason"],
///     buckets: &[],
///     kafka_name: "",
/// };
/// let registry = kstreams_metrics::MetricsRegistry::new();
/// registry.counter(&ORDERS_REJECTED, &["no-stock"]).unwrap().inc();
/// assert!(registry.gather_text().contains(r#"shop_orders_rejected_total{reason="no-stock"} 1"#));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricDef {
    /// The Prometheus name (counters end in `_total`, durations in `_seconds`).
    pub name: &'static str,
    /// The `# HELP` text.
    pub help: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Label names, in the order label values are given.
    pub labels: &'static [&'static str],
    /// Histogram bucket upper bounds, ascending (empty for other kinds).
    pub buckets: &'static [f64],
    /// The Kafka Streams metric(s) it stands for, as `group: name`.
    pub kafka_name: &'static str,
}

/// Buckets for call latencies, in seconds: 1 µs to 10 s.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_001,
    0.000_002_5,
    0.000_005,
    0.000_01,
    0.000_025,
    0.000_05,
    0.000_1,
    0.000_25,
    0.000_5,
    0.001,
    0.002_5,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
];

/// Buckets for end-to-end latencies, in seconds: 1 ms to an hour (a
/// catching-up application sees records minutes or hours old).
pub const E2E_LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1800.0, 3600.0,
];

const THREAD: &[&str] = &[THREAD_ID];
const TASK: &[&str] = &[THREAD_ID, TASK_ID];
const NODE_LABELS: &[&str] = &[THREAD_ID, TASK_ID, NODE];
const STORE_LABELS: &[&str] = &[STORE_TYPE, STORE, TASK_ID];
const PARTITION_LABELS: &[&str] = &[TOPIC, PARTITION];
const GLOBAL_STORE_LABELS: &[&str] = &[STORE];

const fn counter(
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    kafka_name: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        help,
        kind: MetricKind::Counter,
        labels,
        buckets: &[],
        kafka_name,
    }
}

const fn gauge(
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    kafka_name: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        help,
        kind: MetricKind::Gauge,
        labels,
        buckets: &[],
        kafka_name,
    }
}

const fn histogram(
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    buckets: &'static [f64],
    kafka_name: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        help,
        kind: MetricKind::Histogram,
        labels,
        buckets,
        kafka_name,
    }
}

// Stream thread.

/// Time spent in one consumer poll.
pub const THREAD_POLL_LATENCY: MetricDef = histogram(
    "kstreams_thread_poll_latency_seconds",
    "Time a stream thread spent in one consumer poll.",
    THREAD,
    LATENCY_BUCKETS,
    "stream-thread-metrics: poll-latency-avg, poll-latency-max, poll-rate, poll-total",
);
/// Records returned by consumer polls.
pub const THREAD_POLL_RECORDS_TOTAL: MetricDef = counter(
    "kstreams_thread_poll_records_total",
    "Records a stream thread's consumer polls returned.",
    THREAD,
    "stream-thread-metrics: poll-records-avg, poll-records-max",
);
/// Time spent committing all of a thread's tasks.
pub const THREAD_COMMIT_LATENCY: MetricDef = histogram(
    "kstreams_thread_commit_latency_seconds",
    "Time a stream thread spent committing its tasks (flush, produce, commit offsets).",
    THREAD,
    LATENCY_BUCKETS,
    "stream-thread-metrics: commit-latency-avg, commit-latency-max, commit-rate, commit-total",
);
/// Tasks created.
pub const THREAD_TASK_CREATED_TOTAL: MetricDef = counter(
    "kstreams_thread_task_created_total",
    "Tasks a stream thread created.",
    THREAD,
    "stream-thread-metrics: task-created-rate, task-created-total",
);
/// Changelog records applied to standby tasks' stores.
pub const THREAD_STANDBY_UPDATES_TOTAL: MetricDef = counter(
    "kstreams_thread_standby_updates_total",
    "Changelog records a stream thread applied to its standby tasks' stores to keep them current.",
    THREAD,
    "stream-task-metrics: update-rate, update-total (KIP-869), summed per thread",
);
/// Tasks closed.
pub const THREAD_TASK_CLOSED_TOTAL: MetricDef = counter(
    "kstreams_thread_task_closed_total",
    "Tasks a stream thread closed.",
    THREAD,
    "stream-thread-metrics: task-closed-rate, task-closed-total",
);

// Task.

/// Records processed by a task.
pub const TASK_PROCESS_TOTAL: MetricDef = counter(
    "kstreams_task_process_total",
    "Records a task ran through its topology.",
    TASK,
    "stream-task-metrics: process-rate, process-total",
);
/// Time to run one record through a task's topology.
pub const TASK_PROCESS_LATENCY: MetricDef = histogram(
    "kstreams_task_process_latency_seconds",
    "Time a task took to run one record through its topology.",
    TASK,
    LATENCY_BUCKETS,
    "stream-task-metrics: process-latency-avg, process-latency-max",
);
/// Records dropped by a task.
pub const TASK_DROPPED_RECORDS_TOTAL: MetricDef = counter(
    "kstreams_task_dropped_records_total",
    "Records a task dropped: undeserializable or failed under a continue handler, \
     negative timestamps, null keys in aggregations, late records for closed windows.",
    TASK,
    "stream-task-metrics: dropped-records-rate, dropped-records-total",
);
/// Punctuations fired by a task.
pub const TASK_PUNCTUATE_TOTAL: MetricDef = counter(
    "kstreams_task_punctuate_total",
    "Punctuations a task fired.",
    TASK,
    "stream-task-metrics: punctuate-rate, punctuate-total",
);
/// Time spent in one punctuation.
pub const TASK_PUNCTUATE_LATENCY: MetricDef = histogram(
    "kstreams_task_punctuate_latency_seconds",
    "Time one punctuation of a task took.",
    TASK,
    LATENCY_BUCKETS,
    "stream-task-metrics: punctuate-latency-avg, punctuate-latency-max",
);
/// Times a task processed while a partition was still empty.
pub const TASK_ENFORCED_PROCESSING_TOTAL: MetricDef = counter(
    "kstreams_task_enforced_processing_total",
    "Times a task stopped waiting for an empty partition (max.task.idle.ms ran out) and processed anyway.",
    TASK,
    "stream-task-metrics: enforced-processing-rate, enforced-processing-total",
);
/// Changelog records restored into a task's stores (KIP-869).
pub const TASK_RESTORE_TOTAL: MetricDef = counter(
    "kstreams_task_restore_records_total",
    "Changelog records restored into a task's stores.",
    TASK,
    "stream-task-metrics: restore-rate, restore-total",
);
/// Changelog records still to restore (KIP-869).
pub const TASK_RESTORE_REMAINING_RECORDS: MetricDef = gauge(
    "kstreams_task_restore_remaining_records",
    "Changelog records a task still has to restore before it can process.",
    TASK,
    "stream-task-metrics: restore-remaining-records-total",
);

/// Records a task read from its bootstrap tables' partitions (kstreams'
/// table bootstrap; Kafka Streams has none).
pub const TASK_BOOTSTRAP_TOTAL: MetricDef = counter(
    "kstreams_task_bootstrap_records_total",
    "Records a task read from its bootstrap tables' partitions before processing its other partitions.",
    TASK,
    "",
);
/// Records a bootstrapping task still has to read.
pub const TASK_BOOTSTRAP_REMAINING_RECORDS: MetricDef = gauge(
    "kstreams_task_bootstrap_remaining_records",
    "Records a task still has to read from its bootstrap tables' partitions (offsets up to the \
     end seen at assignment) before processing its other partitions.",
    TASK,
    "",
);
/// Records loaded into a global store (Kafka Streams restores global
/// stores without a metric).
pub const GLOBAL_RESTORE_TOTAL: MetricDef = counter(
    "kstreams_global_restore_records_total",
    "Records the global thread loaded into a global store from its topic before the instance ran.",
    GLOBAL_STORE_LABELS,
    "",
);
/// Records a global store still has to load.
pub const GLOBAL_RESTORE_REMAINING_RECORDS: MetricDef = gauge(
    "kstreams_global_restore_remaining_records",
    "Records a global store still has to load from its topic (offsets up to the end seen at start) \
     before the instance runs.",
    GLOBAL_STORE_LABELS,
    "",
);

/// How far behind the task's stream time a record's timestamp was.
pub const TASK_RECORD_LATENESS: MetricDef = histogram(
    "kstreams_task_record_lateness_seconds",
    "How far a record's timestamp was behind the task's stream time when the task \
     processed it (0 for records in order): out-of-order arrival, against which \
     window grace periods are set.",
    TASK,
    E2E_LATENCY_BUCKETS,
    "stream-task-metrics: record-lateness-avg, record-lateness-max",
);

// Processor node.

/// Records processed by a node.
pub const NODE_PROCESS_TOTAL: MetricDef = counter(
    "kstreams_node_process_total",
    "Records a processor node processed.",
    NODE_LABELS,
    "stream-processor-node-metrics: process-rate, process-total",
);
/// Wall-clock time minus record timestamp when a record reaches a node.
pub const RECORD_E2E_LATENCY: MetricDef = histogram(
    "kstreams_record_e2e_latency_seconds",
    "Wall-clock time minus the record's timestamp when the record reached the node \
     (source and terminal nodes).",
    NODE_LABELS,
    E2E_LATENCY_BUCKETS,
    "stream-processor-node-metrics: record-e2e-latency-avg, record-e2e-latency-min, \
     record-e2e-latency-max",
);

// Consumer.

/// Records between the consumer's position and the partition's end.
pub const CONSUMER_RECORDS_LAG: MetricDef = gauge(
    "kstreams_consumer_records_lag",
    "Records between the consumer's position and the end of the partition.",
    PARTITION_LABELS,
    "consumer-fetch-manager-metrics: records-lag",
);
/// How far the most lagging partition of a source topic is behind the
/// topic's mean lag, over the partitions this instance reads: 0 when the
/// lag is even; large when a hot partition falls behind.
pub const CONSUMER_RECORDS_LAG_SKEW: MetricDef = gauge(
    "kstreams_consumer_records_lag_skew",
    "Records by which the most lagging partition of a source topic is behind the topic's mean lag, over this instance's partitions.",
    &[TOPIC],
    "",
);
/// Records consumed from a partition.
pub const CONSUMER_RECORDS_CONSUMED_TOTAL: MetricDef = counter(
    "kstreams_consumer_records_consumed_total",
    "Records consumed from a partition.",
    PARTITION_LABELS,
    "consumer-fetch-manager-metrics: records-consumed-rate, records-consumed-total",
);

// State stores: the latency of each call as the processor sees it (cache,
// changelog and engine included).

macro_rules! store_latency {
    ($(#[$doc:meta])* $id:ident, $op:literal, $kafka:literal) => {
        $(#[$doc])*
        pub const $id: MetricDef = histogram(
            concat!("kstreams_state_", $op, "_latency_seconds"),
            concat!(
                "Time a state store's ",
                $op,
                " took as the processor saw it (cache, changelog and engine included)."
            ),
            STORE_LABELS,
            LATENCY_BUCKETS,
            concat!(
                "stream-state-metrics: ",
                $kafka,
                "-latency-avg, ",
                $kafka,
                "-latency-max, ",
                $kafka,
                "-rate"
            ),
        );
    };
}

store_latency!(
    /// Key-value, window, session and versioned puts.
    STATE_PUT_LATENCY,
    "put",
    "put"
);
store_latency!(
    /// Key-value `put_if_absent`.
    STATE_PUT_IF_ABSENT_LATENCY,
    "put_if_absent",
    "put-if-absent"
);
store_latency!(
    /// Key-value `put_all`.
    STATE_PUT_ALL_LATENCY,
    "put_all",
    "put-all"
);
store_latency!(
    /// Key-value and versioned gets.
    STATE_GET_LATENCY,
    "get",
    "get"
);
store_latency!(
    /// Key-value and versioned deletes.
    STATE_DELETE_LATENCY,
    "delete",
    "delete"
);
store_latency!(
    /// Key-value range queries, from the call until the iterator is dropped.
    STATE_RANGE_LATENCY,
    "range",
    "range"
);
store_latency!(
    /// Key-value `all`, from the call until the iterator is dropped.
    STATE_ALL_LATENCY,
    "all",
    "all"
);
store_latency!(
    /// Key-value prefix scans, from the call until the iterator is dropped.
    STATE_PREFIX_SCAN_LATENCY,
    "prefix_scan",
    "prefix-scan"
);
store_latency!(
    /// Flushes of any store.
    STATE_FLUSH_LATENCY,
    "flush",
    "flush"
);
store_latency!(
    /// Window and session reads (fetches, session finds), iterators until dropped.
    STATE_FETCH_LATENCY,
    "fetch",
    "fetch"
);
store_latency!(
    /// Session removes.
    STATE_REMOVE_LATENCY,
    "remove",
    "remove"
);

// RocksDB stores: Kafka Streams' property-based RocksDB metrics (KIP-607),
// read from RocksDB's own properties. Gauges, refreshed when the store is
// opened and at its flushes (every commit, before the memtables are written
// out), at most once a second: Kafka Streams reads them when they are read. Summed over the column families of
// the store (a window or session store's segments included), as Kafka
// Streams sums them over segments; the block cache ones are the cache's, so
// stores sharing one cache (bounded memory) report the same figure.

macro_rules! rocksdb_property {
    ($(#[$doc:meta])* $id:ident, $prom:literal, $kafka:literal, $help:literal) => {
        $(#[$doc])*
        pub const $id: MetricDef = gauge(
            concat!("kstreams_rocksdb_", $prom),
            $help,
            STORE_LABELS,
            concat!("stream-state-metrics: ", $kafka),
        );
    };
}

rocksdb_property!(
    /// `rocksdb.num-immutable-mem-table`.
    ROCKSDB_NUM_IMMUTABLE_MEM_TABLE,
    "num_immutable_mem_table",
    "num-immutable-mem-table",
    "Immutable memtables of a RocksDB store not yet flushed."
);
rocksdb_property!(
    /// `rocksdb.cur-size-active-mem-table`.
    ROCKSDB_CUR_SIZE_ACTIVE_MEM_TABLE,
    "cur_size_active_mem_table_bytes",
    "cur-size-active-mem-table",
    "Approximate bytes of a RocksDB store's active memtables."
);
rocksdb_property!(
    /// `rocksdb.cur-size-all-mem-tables`.
    ROCKSDB_CUR_SIZE_ALL_MEM_TABLES,
    "cur_size_all_mem_tables_bytes",
    "cur-size-all-mem-tables",
    "Approximate bytes of a RocksDB store's active and unflushed immutable memtables."
);
rocksdb_property!(
    /// `rocksdb.size-all-mem-tables`.
    ROCKSDB_SIZE_ALL_MEM_TABLES,
    "size_all_mem_tables_bytes",
    "size-all-mem-tables",
    "Approximate bytes of all of a RocksDB store's memtables (active, unflushed and pinned immutable)."
);
rocksdb_property!(
    /// `rocksdb.num-entries-active-mem-table`.
    ROCKSDB_NUM_ENTRIES_ACTIVE_MEM_TABLE,
    "num_entries_active_mem_table",
    "num-entries-active-mem-table",
    "Entries in a RocksDB store's active memtables."
);
rocksdb_property!(
    /// `rocksdb.num-entries-imm-mem-tables`.
    ROCKSDB_NUM_ENTRIES_IMM_MEM_TABLES,
    "num_entries_imm_mem_tables",
    "num-entries-imm-mem-tables",
    "Entries in a RocksDB store's unflushed immutable memtables."
);
rocksdb_property!(
    /// `rocksdb.num-deletes-active-mem-table`.
    ROCKSDB_NUM_DELETES_ACTIVE_MEM_TABLE,
    "num_deletes_active_mem_table",
    "num-deletes-active-mem-table",
    "Delete entries in a RocksDB store's active memtables."
);
rocksdb_property!(
    /// `rocksdb.num-deletes-imm-mem-tables`.
    ROCKSDB_NUM_DELETES_IMM_MEM_TABLES,
    "num_deletes_imm_mem_tables",
    "num-deletes-imm-mem-tables",
    "Delete entries in a RocksDB store's unflushed immutable memtables."
);
rocksdb_property!(
    /// `rocksdb.mem-table-flush-pending`.
    ROCKSDB_MEM_TABLE_FLUSH_PENDING,
    "mem_table_flush_pending",
    "mem-table-flush-pending",
    "Column families of a RocksDB store with a memtable flush pending (1 each)."
);
rocksdb_property!(
    /// `rocksdb.num-running-flushes`.
    ROCKSDB_NUM_RUNNING_FLUSHES,
    "num_running_flushes",
    "num-running-flushes",
    "Memtable flushes of a RocksDB store running now."
);
rocksdb_property!(
    /// `rocksdb.compaction-pending`.
    ROCKSDB_COMPACTION_PENDING,
    "compaction_pending",
    "compaction-pending",
    "Column families of a RocksDB store with a compaction pending (1 each)."
);
rocksdb_property!(
    /// `rocksdb.num-running-compactions`.
    ROCKSDB_NUM_RUNNING_COMPACTIONS,
    "num_running_compactions",
    "num-running-compactions",
    "Compactions of a RocksDB store running now."
);
rocksdb_property!(
    /// `rocksdb.estimate-pending-compaction-bytes`.
    ROCKSDB_ESTIMATE_PENDING_COMPACTION_BYTES,
    "estimate_pending_compaction_bytes",
    "estimate-pending-compaction-bytes",
    "Estimated bytes compaction has to rewrite to settle a RocksDB store's levels."
);
rocksdb_property!(
    /// `rocksdb.total-sst-files-size`.
    ROCKSDB_TOTAL_SST_FILES_SIZE,
    "total_sst_files_size_bytes",
    "total-sst-files-size",
    "Bytes of all SST files of a RocksDB store, obsolete ones included."
);
rocksdb_property!(
    /// `rocksdb.live-sst-files-size`.
    ROCKSDB_LIVE_SST_FILES_SIZE,
    "live_sst_files_size_bytes",
    "live-sst-files-size",
    "Bytes of the SST files of a RocksDB store's current version."
);
rocksdb_property!(
    /// `rocksdb.num-live-versions`.
    ROCKSDB_NUM_LIVE_VERSIONS,
    "num_live_versions",
    "num-live-versions",
    "Live versions of a RocksDB store (more than one: iterators or compactions hold old files)."
);
rocksdb_property!(
    /// `rocksdb.block-cache-capacity`.
    ROCKSDB_BLOCK_CACHE_CAPACITY,
    "block_cache_capacity_bytes",
    "block-cache-capacity",
    "Capacity of a RocksDB store's block cache (the shared cache's under bounded memory)."
);
rocksdb_property!(
    /// `rocksdb.block-cache-usage`.
    ROCKSDB_BLOCK_CACHE_USAGE,
    "block_cache_usage_bytes",
    "block-cache-usage",
    "Bytes in a RocksDB store's block cache (the shared cache's under bounded memory, memtables \
     charged to it included)."
);
rocksdb_property!(
    /// `rocksdb.block-cache-pinned-usage`.
    ROCKSDB_BLOCK_CACHE_PINNED_USAGE,
    "block_cache_pinned_usage_bytes",
    "block-cache-pinned-usage",
    "Bytes of a RocksDB store's block cache pinned by readers (the shared cache's under bounded \
     memory)."
);
rocksdb_property!(
    /// `rocksdb.estimate-num-keys`.
    ROCKSDB_ESTIMATE_NUM_KEYS,
    "estimate_num_keys",
    "estimate-num-keys",
    "Estimated keys in a RocksDB store (its offsets column family included)."
);
rocksdb_property!(
    /// `rocksdb.estimate-table-readers-mem`.
    ROCKSDB_ESTIMATE_TABLE_READERS_MEM,
    "estimate_table_readers_mem_bytes",
    "estimate-table-readers-mem",
    "Estimated bytes a RocksDB store uses to read SST files outside the block cache (index and \
     filter blocks when not cached)."
);
rocksdb_property!(
    /// `rocksdb.background-errors`.
    ROCKSDB_BACKGROUND_ERRORS,
    "background_errors",
    "background-errors",
    "Background errors (flush, compaction) of a RocksDB store since it was opened."
);
/// `rocksdb.estimate-live-data-size`: not among Kafka Streams' metrics; the
/// size of the state a store would restore.
pub const ROCKSDB_ESTIMATE_LIVE_DATA_SIZE: MetricDef = gauge(
    "kstreams_rocksdb_estimate_live_data_size_bytes",
    "Estimated bytes of live data in a RocksDB store's SST files.",
    STORE_LABELS,
    "",
);

/// Every metric kstreams defines.
pub const ALL: &[&MetricDef] = &[
    &THREAD_POLL_LATENCY,
    &THREAD_POLL_RECORDS_TOTAL,
    &THREAD_COMMIT_LATENCY,
    &THREAD_TASK_CREATED_TOTAL,
    &THREAD_TASK_CLOSED_TOTAL,
    &THREAD_STANDBY_UPDATES_TOTAL,
    &TASK_PROCESS_TOTAL,
    &TASK_PROCESS_LATENCY,
    &TASK_DROPPED_RECORDS_TOTAL,
    &TASK_PUNCTUATE_TOTAL,
    &TASK_PUNCTUATE_LATENCY,
    &TASK_ENFORCED_PROCESSING_TOTAL,
    &TASK_RESTORE_TOTAL,
    &TASK_RESTORE_REMAINING_RECORDS,
    &TASK_BOOTSTRAP_TOTAL,
    &TASK_BOOTSTRAP_REMAINING_RECORDS,
    &GLOBAL_RESTORE_TOTAL,
    &GLOBAL_RESTORE_REMAINING_RECORDS,
    &TASK_RECORD_LATENESS,
    &NODE_PROCESS_TOTAL,
    &RECORD_E2E_LATENCY,
    &CONSUMER_RECORDS_LAG,
    &CONSUMER_RECORDS_LAG_SKEW,
    &CONSUMER_RECORDS_CONSUMED_TOTAL,
    &STATE_PUT_LATENCY,
    &STATE_PUT_IF_ABSENT_LATENCY,
    &STATE_PUT_ALL_LATENCY,
    &STATE_GET_LATENCY,
    &STATE_DELETE_LATENCY,
    &STATE_RANGE_LATENCY,
    &STATE_ALL_LATENCY,
    &STATE_PREFIX_SCAN_LATENCY,
    &STATE_FLUSH_LATENCY,
    &STATE_FETCH_LATENCY,
    &STATE_REMOVE_LATENCY,
    &ROCKSDB_NUM_IMMUTABLE_MEM_TABLE,
    &ROCKSDB_CUR_SIZE_ACTIVE_MEM_TABLE,
    &ROCKSDB_CUR_SIZE_ALL_MEM_TABLES,
    &ROCKSDB_SIZE_ALL_MEM_TABLES,
    &ROCKSDB_NUM_ENTRIES_ACTIVE_MEM_TABLE,
    &ROCKSDB_NUM_ENTRIES_IMM_MEM_TABLES,
    &ROCKSDB_NUM_DELETES_ACTIVE_MEM_TABLE,
    &ROCKSDB_NUM_DELETES_IMM_MEM_TABLES,
    &ROCKSDB_MEM_TABLE_FLUSH_PENDING,
    &ROCKSDB_NUM_RUNNING_FLUSHES,
    &ROCKSDB_COMPACTION_PENDING,
    &ROCKSDB_NUM_RUNNING_COMPACTIONS,
    &ROCKSDB_ESTIMATE_PENDING_COMPACTION_BYTES,
    &ROCKSDB_TOTAL_SST_FILES_SIZE,
    &ROCKSDB_LIVE_SST_FILES_SIZE,
    &ROCKSDB_NUM_LIVE_VERSIONS,
    &ROCKSDB_BLOCK_CACHE_CAPACITY,
    &ROCKSDB_BLOCK_CACHE_USAGE,
    &ROCKSDB_BLOCK_CACHE_PINNED_USAGE,
    &ROCKSDB_ESTIMATE_NUM_KEYS,
    &ROCKSDB_ESTIMATE_TABLE_READERS_MEM,
    &ROCKSDB_BACKGROUND_ERRORS,
    &ROCKSDB_ESTIMATE_LIVE_DATA_SIZE,
];
