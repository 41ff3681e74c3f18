//! A task's local state on Kafka: its locked directory, its stores' changelog
//! records going to the thread's producer, and restoration from the
//! changelog topics before the task processes anything.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{ChangelogTopic, TaskId, Topology};
use kstreams_metrics::RecordingLevel;
use kstreams_state::{
    restore_start, ChangelogRecord, ChangelogWriter, Offsets, Restoration, RestoreListener,
    RestoreStart, StateDirectory, StoreContext, TaskDirectory,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use super::config::{is_group_membership_key, ProcessingGuarantee, StreamsConfig};
use super::thread::now_ms;
use super::RuntimeError;
use crate::changelog::ChangelogCollector;
use crate::StreamTask;

/// How long one store may take to restore before the thread gives up.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);

/// A changelog partition's watermarks. A changelog created just before
/// the application started may have no leader yet; as Kafka Streams, ask
/// again until it has (or until the timeout).
fn changelog_watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), RuntimeError> {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode::{
        LeaderNotAvailable, NotLeaderForPartition, UnknownTopicOrPartition,
    };
    let timeout = Duration::from_secs(30);
    let deadline = Instant::now() + timeout;
    loop {
        match consumer.fetch_watermarks(topic, partition, timeout) {
            Err(KafkaError::MetadataFetch(
                code @ (LeaderNotAvailable | NotLeaderForPartition | UnknownTopicOrPartition),
            )) if Instant::now() < deadline => {
                log::debug!("{topic}-{partition}: no leader yet ({code}); asking again");
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return Ok(result?),
        }
    }
}

/// Logs restoration progress: records restored of the total, rate, and an
/// estimate of the time left.
struct ProgressLog {
    thread: String,
    /// The task's `restore_records_total` and `restore_remaining_records`.
    restored_records: kstreams_metrics::Counter,
    remaining_records: kstreams_metrics::Gauge,
    began: std::sync::Mutex<Option<Instant>>,
    total: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
}

impl RestoreListener for ProgressLog {
    fn on_restore_start(&self, store: &str, topic: &str, partition: i32, start: i64, end: i64) {
        use std::sync::atomic::Ordering::Relaxed;
        *self.began.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        self.total.store((end - start).max(0) as u64, Relaxed);
        self.done.store(0, Relaxed);
        self.remaining_records.set((end - start).max(0));
        log::info!(
            "{}: restoring {store} from {topic}-{partition}, offsets {start}..{end} ({} records at most)",
            self.thread,
            end - start
        );
    }

    fn on_batch_restored(&self, store: &str, _: &str, _: i32, _: i64, restored: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let done = self.done.fetch_add(restored, Relaxed) + restored;
        self.restored_records.add(restored);
        self.remaining_records.add(-(restored as i64));
        let total = self.total.load(Relaxed).max(1);
        let elapsed = self
            .began
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map_or(0.0, |b| b.elapsed().as_secs_f64());
        let rate = done as f64 / elapsed.max(1e-3);
        let left = total.saturating_sub(done) as f64 / rate.max(1.0);
        log::info!(
            "{}: restoring {store}: {done}/{total} records ({:.0}%), {rate:.0} records/s, about {left:.1} s left",
            self.thread,
            done as f64 * 100.0 / total as f64
        );
    }

    fn on_restore_end(&self, store: &str, topic: &str, partition: i32, restored: u64) {
        // Records past the end marker (transaction markers, compacted
        // gaps) never arrive as records: the remainder is nothing.
        self.remaining_records.set(0);
        log::info!(
            "{}: restored {store} from {topic}-{partition}: {restored} records",
            self.thread
        );
    }
}

/// Opens the tasks of one stream thread.
pub(crate) struct TaskOpener {
    thread: String,
    config: StreamsConfig,
    topology: Arc<Topology>,
    changelogs: Vec<ChangelogTopic>,
    state_dir: StateDirectory,
    changelog_writer: Rc<ChangelogCollector>,
    /// The thread's cache, shared by the caching stores of all its tasks.
    thread_cache: Rc<kstreams_state::ThreadCache>,
    restore_consumer: Option<BaseConsumer>,
}

impl TaskOpener {
    pub fn new(
        thread: &str,
        config: &StreamsConfig,
        topology: Arc<Topology>,
    ) -> Result<Self, RuntimeError> {
        let state_dir = StateDirectory::new(&config.state_dir, &config.application_id)
            .map_err(kstreams_dsl::StreamsError::from)?;
        Ok(Self {
            thread: thread.to_string(),
            config: config.clone(),
            changelogs: topology.changelog_topics(&config.application_id),
            topology,
            state_dir,
            changelog_writer: Rc::default(),
            thread_cache: Rc::new(kstreams_state::ThreadCache::new(
                config.task_config().cache_max_bytes,
            )),
            restore_consumer: None,
        })
    }

    pub fn changelog(&self) -> &ChangelogCollector {
        &self.changelog_writer
    }

    /// Locks the task's directory, builds the task with its stores, and
    /// restores every logged store from its changelog partition. Without
    /// checkpoints yet, a store restores its whole changelog; under
    /// exactly-once the local state is wiped first, as it may hold writes
    /// of an aborted transaction.
    /// Stateless tasks get no directory, as in Kafka Streams.
    pub fn open(
        &mut self,
        id: TaskId,
    ) -> Result<(StreamTask, Option<TaskDirectory>), RuntimeError> {
        let writer: Rc<dyn ChangelogWriter> = self.changelog_writer.clone();
        let mut stores =
            StoreContext::new(&self.config.application_id, &id.to_string(), id.partition)
                .with_changelog_writer(writer)
                .with_thread_cache(self.thread_cache.clone());
        // State store metrics are DEBUG in Kafka Streams: each operation
        // reads the clock twice.
        if self.config.metrics_recording_level >= RecordingLevel::Debug {
            stores = stores.with_metrics(self.config.metrics.clone());
        }
        let mut directory = None;
        let mut checkpointed = Offsets::new();
        if self.topology.subtopology_has_stores(id.subtopology) {
            let locked = self
                .state_dir
                .lock_task(&id.to_string())
                .map_err(kstreams_dsl::StreamsError::from)?;
            let checkpoint = locked.checkpoint();
            checkpointed = checkpoint
                .read()
                .map_err(kstreams_dsl::StreamsError::from)?;
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                // Under exactly-once a checkpoint is valid only as written at
                // a clean close: it goes now, so a crash while running finds
                // none; without one, local state may hold aborted writes.
                checkpoint
                    .delete()
                    .map_err(kstreams_dsl::StreamsError::from)?;
                if checkpointed.is_empty() {
                    locked
                        .wipe_state()
                        .map_err(kstreams_dsl::StreamsError::from)?;
                }
            }
            stores = stores.with_task_directory(locked.path());
            directory = Some(locked);
        }
        let mut task = StreamTask::with_store_context(
            &self.topology,
            id,
            self.config.task_config(),
            now_ms(),
            stores,
        )?;
        task.register_metrics(
            &self.config.metrics,
            self.config.metrics_recording_level,
            &self.thread,
        )?;
        let changelogs: Vec<ChangelogTopic> = self
            .changelogs
            .iter()
            .filter(|c| c.subtopology == id.subtopology)
            .cloned()
            .collect();
        for changelog in changelogs {
            let after = checkpointed
                .get(&(changelog.topic.clone(), id.partition))
                .copied();
            self.restore(&mut task, &changelog, id.partition, after)?;
        }
        Ok((task, directory))
    }

    /// Writes the task's checkpoint: for each of its changelog partitions,
    /// the offset of the last record the broker acknowledged (`delivered`).
    pub fn write_checkpoint(
        &self,
        id: TaskId,
        directory: &TaskDirectory,
        delivered: &std::collections::HashMap<(String, i32), i64>,
    ) -> Result<(), RuntimeError> {
        let checkpoint = directory.checkpoint();
        let mut offsets = checkpoint
            .read()
            .map_err(kstreams_dsl::StreamsError::from)?;
        for changelog in self
            .changelogs
            .iter()
            .filter(|c| c.subtopology == id.subtopology)
        {
            let key = (changelog.topic.clone(), id.partition);
            if let Some(&offset) = delivered.get(&key) {
                offsets.insert(key, offset);
            }
        }
        if !offsets.is_empty() {
            checkpoint
                .write(&offsets)
                .map_err(kstreams_dsl::StreamsError::from)?;
        }
        Ok(())
    }

    fn restore_consumer(&mut self) -> Result<&BaseConsumer, RuntimeError> {
        if self.restore_consumer.is_none() {
            let eos = self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
            let mut client = ClientConfig::new();
            client
                .set("bootstrap.servers", &self.config.bootstrap_servers)
                .set("client.id", format!("{}-restore-consumer", self.thread))
                // librdkafka's assign() needs a group id; this consumer only
                // assigns, so it never joins the group or commits.
                .set(
                    "group.id",
                    format!("{}-restore", self.config.application_id),
                )
                .set("enable.auto.commit", "false")
                .set(
                    "isolation.level",
                    if eos {
                        "read_committed"
                    } else {
                        "read_uncommitted"
                    },
                );
            for (k, v) in &self.config.consumer {
                if !is_group_membership_key(k) {
                    client.set(k, v);
                }
            }
            self.restore_consumer = Some(client.create()?);
        }
        Ok(self.restore_consumer.as_ref().expect("just made"))
    }

    fn restore(
        &mut self,
        task: &mut StreamTask,
        changelog: &ChangelogTopic,
        partition: i32,
        checkpointed: Option<i64>,
    ) -> Result<(), RuntimeError> {
        let Some(store) = task
            .context()
            .stores()
            .get(&changelog.store)
            .map(|b| b.lifecycle.clone())
        else {
            return Ok(());
        };
        let thread = self.thread.clone();
        let sensors = self
            .config
            .metrics
            .task_sensors(&thread, &task.id().to_string())
            .map_err(|e| {
                RuntimeError::Streams(kstreams_dsl::StreamsError::Internal(format!(
                    "task metrics: {e}"
                )))
            })?;
        let consumer = self.restore_consumer()?;
        let (low, high) = changelog_watermarks(consumer, &changelog.topic, partition)?;
        // A checkpointed persistent store already has everything up to the
        // checkpoint; in-memory stores start empty and read it all.
        let persistent = store.borrow().persistent();
        let low = match restore_start(checkpointed, persistent, false) {
            RestoreStart::After(offset) => (offset + 1).max(low),
            RestoreStart::Beginning | RestoreStart::WipeThenBeginning => low,
        };
        if high <= low {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&changelog.topic, partition, Offset::Offset(low))?;
        consumer.assign(&tpl)?;
        let listener = Arc::new(ProgressLog {
            thread,
            restored_records: sensors.restore_records,
            remaining_records: sensors.restore_remaining_records,
            began: Default::default(),
            total: Default::default(),
            done: Default::default(),
        });
        let mut restoration =
            Restoration::start(store, &changelog.topic, partition, low, high, listener);
        let deadline = Instant::now() + RESTORE_TIMEOUT;
        while !restoration.is_complete() {
            if Instant::now() > deadline {
                return Err(RuntimeError::Streams(kstreams_dsl::StreamsError::Internal(
                    format!(
                        "restoring {} from {}-{partition} did not reach offset {high} within {:?}",
                        changelog.store, changelog.topic, RESTORE_TIMEOUT
                    ),
                )));
            }
            let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>, i64)> = Vec::new();
            let mut last_offset = None;
            let mut wait = Duration::from_millis(500);
            while batch.len() < 10_000 {
                let Some(message) = consumer.poll(wait) else {
                    break;
                };
                wait = Duration::ZERO;
                let message = message?;
                if message.offset() >= high {
                    continue; // written after the restore began: processing will see it
                }
                batch.push((
                    message.key().unwrap_or_default().to_vec(),
                    message.payload().map(<[u8]>::to_vec),
                    message.timestamp().to_millis().unwrap_or(-1),
                ));
                last_offset = Some(message.offset());
                if message.offset() + 1 >= high {
                    break;
                }
            }
            // Transaction markers (exactly-once changelogs end with one)
            // are never handed out as records: the consumer's position
            // says when the partition is read through.
            let read_through = |consumer: &BaseConsumer| -> Result<bool, RuntimeError> {
                Ok(matches!(
                    consumer
                        .position()?
                        .find_partition(&changelog.topic, partition)
                        .map(|e| e.offset()),
                    Some(Offset::Offset(p)) if p >= high
                ))
            };
            let Some(last_offset) = last_offset else {
                if read_through(consumer)? {
                    restoration
                        .restore_batch(&[], high - 1)
                        .map_err(kstreams_dsl::StreamsError::from)?;
                }
                continue;
            };
            let records: Vec<ChangelogRecord<'_>> = batch
                .iter()
                .map(|(key, value, timestamp)| ChangelogRecord {
                    topic: &changelog.topic,
                    partition,
                    key,
                    value: value.as_deref(),
                    timestamp: *timestamp,
                })
                .collect();
            restoration
                .restore_batch(&records, last_offset)
                .map_err(kstreams_dsl::StreamsError::from)?;
            if !restoration.is_complete() && read_through(consumer)? {
                restoration
                    .restore_batch(&[], high - 1)
                    .map_err(kstreams_dsl::StreamsError::from)?;
            }
        }
        restoration
            .finish()
            .map_err(kstreams_dsl::StreamsError::from)?;
        consumer.unassign()?;
        Ok(())
    }
}
