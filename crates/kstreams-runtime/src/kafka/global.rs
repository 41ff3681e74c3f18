//! The global thread: loads every partition of the global tables' topics
//! before the instance runs, then keeps the global stores current.
//!
//! Global stores on RocksDB (the default) live in `<state.dir>/<application
//! id>/global/rocksdb/<store>`, locked by this instance, with a
//! `.checkpoint` of the next offset to read per partition: a restart reads
//! only what was written since, as Kafka Streams' global state manager
//! does. Without a checkpoint the directory is wiped and the topic read
//! from the beginning (a store of an earlier run may hold keys whose
//! tombstones have been compacted away since). In-memory stores are read
//! whole at each start.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{GlobalStore, Topology};
use kstreams_state::__private::{Offsets, StateDirectory, TaskDirectory};
use kstreams_state::{StateRestoreListener, TopicPartition};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::clients;
use super::config::StreamsConfig;
use super::instance::Instance;
use super::restore_progress::{RestoreKind, RestoreReporter};
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;

/// Records read since the last checkpoint below which a periodic one is
/// skipped (Kafka Streams' `OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT`).
const CHECKPOINT_MIN_RECORDS: i64 = 10_000;

/// How long loading the global tables at start may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// Records of one partition reported to the restore listener as one batch
/// at most, while loading.
const LOAD_BATCH: u64 = 10_000;

/// One global partition being loaded, as the restore listener hears it.
struct PartitionLoad {
    partition: TopicPartition,
    store: String,
    /// The end offset (exclusive) to load to.
    end: i64,
    /// Records loaded, and those not yet reported as a batch.
    restored: u64,
    unreported: u64,
    last_offset: i64,
    reporter: Arc<RestoreReporter>,
}

impl PartitionLoad {
    fn report_batch(&mut self) {
        if self.unreported > 0 {
            self.reporter.on_batch_restored(
                &self.partition,
                &self.store,
                self.last_offset,
                self.unreported,
            );
            self.unreported = 0;
        }
    }

    fn finish(mut self) {
        self.report_batch();
        self.reporter
            .on_restore_end(&self.partition, &self.store, self.restored);
    }
}

/// The global thread's consumer and the stores it feeds, by topic.
pub(crate) struct GlobalUpdater {
    consumer: BaseConsumer,
    stores: HashMap<String, Arc<GlobalStore>>,
    /// The locked `global` directory, when a store is on disk.
    directory: Option<TaskDirectory>,
    /// How often the stores on disk are flushed and checkpointed.
    checkpoint_interval: Duration,
    /// The positions last checkpointed.
    checkpointed: Offsets,
}

impl Drop for GlobalUpdater {
    /// The stores close with the global thread (their files and the
    /// directory lock are released together).
    fn drop(&mut self) {
        for store in self.stores.values() {
            store.close();
        }
    }
}

impl GlobalUpdater {
    /// Assigns every partition of the global topics from the beginning and
    /// reads them to the end offsets seen now; `None` without global
    /// tables. Start returns only after this, as in Kafka Streams.
    pub(super) fn load(
        topology: &Topology,
        config: &StreamsConfig,
        instance: &Instance,
    ) -> Result<Option<Self>, RuntimeError> {
        let restore_board = &instance.restore_board;
        if topology.global_stores().is_empty() {
            return Ok(None);
        }
        let _span = tracing::debug_span!(
            "kstreams.restore",
            thread = "global",
            stores = topology.global_stores().len()
        )
        .entered();
        let stores: HashMap<String, Arc<GlobalStore>> = topology
            .global_stores()
            .iter()
            .map(|s| (s.topic().to_string(), s.clone()))
            .collect();
        let consumer: BaseConsumer = clients::global_consumer(config).create().client()?;
        let mut directory = None;
        let mut checkpointed = Offsets::new();
        if stores.values().any(|s| s.wants_persistence()) {
            let state_dir = StateDirectory::new(&config.state_dir, &config.application_id)?;
            let locked = state_dir.lock_task("global")?;
            checkpointed = locked.checkpoint().read()?;
            // Records between the checkpoint and the log start are gone
            // (retention): their deletes with them, so the store is
            // rebuilt, as Kafka Streams does on an out-of-range offset.
            let timeout = Duration::from_secs(30);
            for (changelog, next) in &checkpointed {
                let (low, _) = consumer
                    .fetch_watermarks(&changelog.topic, changelog.partition, timeout)
                    .client()?;
                if *next < low {
                    log::warn!(
                        "global tables: {changelog} was checkpointed at {next}, before \
                         its log start {low}; rebuilding the global stores from the topics"
                    );
                    checkpointed.clear();
                    break;
                }
            }
            if checkpointed.is_empty() {
                locked.wipe_state()?;
            }
            // Without the `rocksdb` feature no global store wants persistence
            // (building the topology refuses StoreType::RocksDb): nothing to open.
            // With the instance's config setter, and its shared cache under
            // bounded memory, as the task stores.
            #[cfg(feature = "rocksdb")]
            for store in stores.values() {
                let path = locked.path().join("rocksdb").join(store.name());
                let settings = instance.rocksdb.clone().unwrap_or_default();
                store.open_persistent(&path, &settings)?;
            }
            directory = Some(locked);
        }
        let timeout = Duration::from_secs(30);
        let mut tpl = TopicPartitionList::new();
        let mut ends: HashMap<TopicPartition, i64> = HashMap::new();
        let mut loads: Vec<PartitionLoad> = Vec::new();
        let mut reporters: HashMap<String, Arc<RestoreReporter>> = HashMap::new();
        let mut missing = Vec::new();
        for topic in stores.keys() {
            let metadata = consumer.fetch_metadata(Some(topic), timeout).client()?;
            let partitions: Vec<i32> = metadata
                .topics()
                .iter()
                .filter(|t| t.name() == topic && t.error().is_none())
                .flat_map(|t| t.partitions().iter().map(|p| p.id()))
                .collect();
            if partitions.is_empty() {
                missing.push(topic.clone());
                continue;
            }
            let persistent = stores[topic].is_persistent();
            for partition in partitions {
                let (low, high) = consumer
                    .fetch_watermarks(topic, partition, timeout)
                    .client()?;
                // A store on disk goes on from its checkpoint (unless
                // retention has deleted records past it since).
                let resume = checkpointed
                    .get(&TopicPartition::new(topic.as_str(), partition))
                    .copied()
                    .filter(|_| persistent)
                    .map(|next| next.max(low));
                let start = resume.unwrap_or(low);
                tpl.add_partition_offset(
                    topic,
                    partition,
                    resume.map_or(Offset::Beginning, Offset::Offset),
                )
                .client()?;
                if high > start {
                    ends.insert(TopicPartition::new(topic.as_str(), partition), high);
                }
                let store = stores[topic].name().to_string();
                let reporter = match reporters.get(&store) {
                    Some(r) => r.clone(),
                    None => {
                        let sensors = config.metrics.global_restore_sensors(&store)?;
                        let thread = format!("{}-GlobalStreamThread", config.application_id);
                        let r = Arc::new(restore_board.reporter(
                            RestoreKind::GlobalStore,
                            &thread,
                            None,
                            sensors,
                        ));
                        reporters.insert(store.clone(), r.clone());
                        r
                    }
                };
                loads.push(PartitionLoad {
                    partition: TopicPartition::new(topic.clone(), partition),
                    store,
                    end: high.max(start),
                    restored: 0,
                    unreported: 0,
                    last_offset: start - 1,
                    reporter,
                });
            }
        }
        if !missing.is_empty() {
            return Err(RuntimeError::MissingSourceTopics(missing));
        }
        consumer.assign(&tpl).client()?;
        // As Kafka Streams' global state manager: every partition starts
        // and ends, even one with nothing to load.
        for load in &loads {
            load.reporter.on_restore_start(
                &load.partition,
                &load.store,
                load.last_offset + 1,
                load.end,
            );
        }
        let mut updater = GlobalUpdater {
            consumer,
            stores,
            directory,
            checkpoint_interval: config.effective_commit_interval(),
            checkpointed,
        };
        let began = Instant::now();
        let total: i64 = ends.values().sum();
        let mut loaded = 0u64;
        let mut last_log = Instant::now();
        while !ends.is_empty() {
            if began.elapsed() > LOAD_TIMEOUT {
                let mut left: Vec<(String, i32, i64)> = ends
                    .iter()
                    .map(|(tp, end)| (tp.topic.clone(), tp.partition, *end))
                    .collect();
                left.sort();
                for mut load in loads {
                    load.report_batch();
                    load.reporter
                        .on_restore_suspended(&load.partition, &load.store, load.restored);
                }
                return Err(RuntimeError::GlobalLoadTimeout {
                    timeout: LOAD_TIMEOUT,
                    left,
                });
            }
            if let Some(message) = updater.consumer.poll(Duration::from_millis(200)) {
                let message = match message {
                    Ok(message) => message,
                    Err(e) => {
                        log::warn!("global tables: consumer error while loading: {e}");
                        continue;
                    }
                };
                updater.apply(&message)?;
                loaded += 1;
                if let Some(load) = loads.iter_mut().find(|l| {
                    l.partition.partition == message.partition()
                        && l.partition.topic == message.topic()
                }) {
                    if message.offset() < load.end {
                        load.restored += 1;
                        load.unreported += 1;
                        load.last_offset = message.offset();
                        if load.unreported >= LOAD_BATCH {
                            load.report_batch();
                        }
                    }
                }
                let key = TopicPartition::new(message.topic(), message.partition());
                if ends
                    .get(&key)
                    .is_some_and(|end| message.offset() + 1 >= *end)
                {
                    ends.remove(&key);
                }
            }
            // Transaction markers at the end are never handed out: the
            // consumer's position says when a partition is read through.
            let positions = updater.consumer.position().client()?;
            ends.retain(|tp, end| {
                !matches!(
                    positions.find_partition(&tp.topic, tp.partition).map(|e| e.offset()),
                    Some(Offset::Offset(p)) if p >= *end
                )
            });
            // Partitions read through end their restoration.
            let (done, going): (Vec<_>, Vec<_>) = std::mem::take(&mut loads)
                .into_iter()
                .partition(|l| !ends.contains_key(&l.partition));
            done.into_iter().for_each(PartitionLoad::finish);
            loads = going;
            if last_log.elapsed() >= Duration::from_secs(5) {
                log::info!(
                    "global tables: loading, {loaded} records so far ({total} offsets in all)"
                );
                last_log = Instant::now();
            }
        }
        loads.into_iter().for_each(PartitionLoad::finish);
        let secs = began.elapsed().as_secs_f64();
        log::info!(
            "global tables: loaded {loaded} records in {secs:.1} s ({:.0} records/s)",
            loaded as f64 / secs.max(1e-3)
        );
        updater.checkpoint(true)?;
        Ok(Some(updater))
    }

    fn apply(&self, message: &rdkafka::message::BorrowedMessage<'_>) -> Result<(), RuntimeError> {
        if let Some(store) = self.stores.get(message.topic()) {
            store.apply(
                message.key(),
                message.payload(),
                message.timestamp().to_millis().unwrap_or(-1),
            )?;
        }
        Ok(())
    }

    /// Flushes the stores on disk and records the consumer's positions of
    /// their partitions, when they moved since the last checkpoint.
    fn checkpoint(&mut self, force: bool) -> Result<(), RuntimeError> {
        let Some(directory) = &self.directory else {
            return Ok(());
        };
        let mut positions = Offsets::new();
        for e in self.consumer.position().client()?.elements() {
            let persistent = self
                .stores
                .get(e.topic())
                .is_some_and(|s| s.is_persistent());
            if let (true, Offset::Offset(next)) = (persistent, e.offset()) {
                positions.insert(TopicPartition::new(e.topic(), e.partition()), next);
            }
        }
        // Partitions not read yet keep their checkpointed position.
        for (tp, next) in &self.checkpointed {
            positions.entry(tp.clone()).or_insert(*next);
        }
        // As Kafka Streams: a flush and a checkpoint only once enough has
        // been read since (at close, whatever moved).
        let moved: i64 = positions
            .iter()
            .map(|(tp, next)| next - self.checkpointed.get(tp).copied().unwrap_or(0))
            .sum();
        if positions == self.checkpointed || (!force && moved < CHECKPOINT_MIN_RECORDS) {
            return Ok(());
        }
        for store in self.stores.values().filter(|s| s.is_persistent()) {
            store.flush()?;
        }
        directory.checkpoint().write(&positions)?;
        self.checkpointed = positions;
        Ok(())
    }

    /// Keeps the global stores current until `stop` is set.
    pub(super) fn run(mut self, stop: &AtomicBool) -> Result<(), RuntimeError> {
        let mut last_checkpoint = Instant::now();
        while !stop.load(Ordering::Acquire) {
            if last_checkpoint.elapsed() >= self.checkpoint_interval {
                self.checkpoint(false)?;
                last_checkpoint = Instant::now();
            }
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => self.apply(&message)?,
                // Transport errors and brokers going away are retried by
                // librdkafka; only a fatal error ends the global thread.
                Some(Err(e))
                    if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::Fatal) =>
                {
                    return Err(RuntimeError::client(e))
                }
                Some(Err(e)) => log::warn!("global thread: consumer error: {e}"),
                None => {}
            }
        }
        self.checkpoint(true)
    }
}
