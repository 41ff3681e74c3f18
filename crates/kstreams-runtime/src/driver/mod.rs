//! `TopologyTestDriver`: run a topology in a test, with no broker.
//!
//! The driver builds one [`StreamTask`] per sub-topology (everything is
//! partition 0) on the same engine the Kafka runtime uses. Each piped record
//! is processed at once, depth-first. Every record a sink writes waits in
//! its topic's output queue for a [`TestOutputTopic`] to read; a record
//! written to a topic the topology itself reads (a repartition topic, or a
//! source topic) is also fed straight to the task that reads it. Keys and values cross the serdes on the way
//! in and out, as they would through Kafka.
//!
//! Async processors run their calls on a tokio runtime of the driver's
//! own. By default the driver waits after each input until every call it
//! started has finished and its result went through the topology, so an
//! output topic read right after `pipe_input` holds everything, as for a
//! synchronous topology. [`TopologyTestDriver::set_wait_for_async_after_input`]
//! turns that off: inputs then only start calls (waiting only while the
//! in-flight bound is reached), finished ones are applied at the next
//! input, and [`TopologyTestDriver::wait_for_async`] waits for all of them,
//! so a test can have several calls overlap (order across keys,
//! backpressure).

mod from_config;
mod topics;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kstreams_dsl::__private::{ConsumedRecord, ProducedRecord};
use kstreams_dsl::{StreamsError, TaskId, Topology};
use kstreams_metrics::{MetricsRegistry, RecordingLevel};
use kstreams_record::{Serde, Timestamp};
use kstreams_state::{ChangelogWriter, KeyValueStoreHandle, StoreContext};

pub use from_config::DEFAULT_BOOTSTRAP_SERVERS;
pub use topics::{TestInputTopic, TestOutputTopic};

use crate::async_runtime::{AsyncExecutor, AsyncLimits, ThreadAsync};
use crate::changelog::ChangelogCollector;
use crate::{StreamTask, TaskConfig};

/// How long the driver waits for async calls before it fails the input:
/// a call that never finishes would otherwise hang the test.
const ASYNC_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The application id the driver uses unless told otherwise.
pub const DEFAULT_APPLICATION_ID: &str = "dummy-topology-test-driver-app-id";

pub(crate) struct DriverState {
    tasks: Vec<StreamTask>,
    changelog: Rc<ChangelogCollector>,
    /// Task directories of persistent stores; removed with the driver.
    state_dir: PathBuf,
    next_offset: HashMap<String, i64>,
    outputs: HashMap<String, VecDeque<ProducedRecord>>,
    wall_clock: Timestamp,
    /// Global tables' stores: input to their topics updates them at once,
    /// as the global thread would.
    globals: Vec<Arc<kstreams_dsl::GlobalStore>>,
    /// The calls of async processors, when the topology has any.
    async_side: Option<ThreadAsync>,
    /// Whether each input waits for every call it started.
    wait_for_async: bool,
}

impl DriverState {
    /// Processes one record and everything it causes on internal topics.
    pub(crate) fn pipe(&mut self, mut record: ConsumedRecord) -> Result<(), StreamsError> {
        if let Some(global) = self.globals.iter().find(|g| g.topic() == &*record.topic) {
            // The driver keeps global stores in memory.
            global.apply(
                record.key.as_deref(),
                record.value.as_deref(),
                record.timestamp,
            )?;
            return Ok(());
        }
        let index = self
            .tasks
            .iter()
            .position(|t| t.reads(&record.topic))
            .ok_or_else(|| unknown_topic(&record.topic))?;
        record.offset = self.take_offset(&record.topic);
        let mut pending = VecDeque::from([(index, record)]);
        self.run(&mut pending, self.wait_for_async)?;
        self.commit()
    }

    /// Processes `pending` and what it causes; async results are applied
    /// as they come, and with `drain` until no call is left in flight.
    fn run(
        &mut self,
        pending: &mut VecDeque<(usize, ConsumedRecord)>,
        drain: bool,
    ) -> Result<(), StreamsError> {
        let deadline = std::time::Instant::now() + ASYNC_WAIT_LIMIT;
        loop {
            self.apply_async_completions(pending)?;
            if let Some((index, record)) = pending.pop_front() {
                if !self.tasks[index].admits_records() {
                    // Backpressure, as a stream thread applies it: the
                    // record waits until calls in flight finish.
                    pending.push_front((index, record));
                    self.wait_for_completion(deadline)?;
                    continue;
                }
                self.tasks[index].process(record)?;
                self.route_output(index, pending);
                continue;
            }
            if !drain || self.async_in_flight() == 0 {
                return Ok(());
            }
            self.wait_for_completion(deadline)?;
        }
    }

    fn apply_async_completions(
        &mut self,
        pending: &mut VecDeque<(usize, ConsumedRecord)>,
    ) -> Result<(), StreamsError> {
        let Some(side) = &self.async_side else {
            return Ok(());
        };
        side.take_ready();
        for index in 0..self.tasks.len() {
            if self.tasks[index].apply_async_completions()? > 0 {
                self.route_output(index, pending);
            }
        }
        Ok(())
    }

    fn wait_for_completion(&self, deadline: std::time::Instant) -> Result<(), StreamsError> {
        let Some(side) = &self.async_side else {
            return Ok(());
        };
        if !side.wait_until(deadline) && std::time::Instant::now() >= deadline {
            return Err(StreamsError::Internal(format!(
                "async calls still in flight after {} s",
                ASYNC_WAIT_LIMIT.as_secs()
            )));
        }
        Ok(())
    }

    pub(crate) fn async_in_flight(&self) -> usize {
        self.tasks.iter().map(StreamTask::async_in_flight).sum()
    }

    /// What Kafka Streams' driver does after each input: a commit, which
    /// flushes the stores (and their caches); what that writes downstream
    /// is processed too, and changelog records join the output topics.
    fn commit(&mut self) -> Result<(), StreamsError> {
        let mut pending = VecDeque::new();
        for index in 0..self.tasks.len() {
            self.tasks[index].flush()?;
            self.route_output(index, &mut pending);
        }
        self.run(&mut pending, self.wait_for_async)?;
        for record in self.changelog.drain() {
            self.outputs
                .entry(record.topic.to_string())
                .or_default()
                .push_back(record);
        }
        Ok(())
    }

    fn take_offset(&mut self, topic: &str) -> i64 {
        let next = self.next_offset.entry(topic.to_string()).or_insert(0);
        let offset = *next;
        *next += 1;
        offset
    }

    /// Captures a task's output for the output topics, and feeds each
    /// record written to a topic the topology reads (a repartition topic, or
    /// a source topic written by a sink) to the task that reads it, as Kafka
    /// Streams' driver does.
    fn route_output(&mut self, from: usize, pending: &mut VecDeque<(usize, ConsumedRecord)>) {
        for produced in self.tasks[from].drain_output() {
            if let Some(index) = self.tasks.iter().position(|t| t.reads(&produced.topic)) {
                let offset = self.take_offset(&produced.topic);
                pending.push_back((
                    index,
                    ConsumedRecord {
                        topic: produced.topic.clone(),
                        partition: 0,
                        offset,
                        timestamp: produced.timestamp,
                        key: produced.key.clone(),
                        value: produced.value.clone(),
                        headers: produced.headers.clone(),
                    },
                ));
            }
            self.outputs
                .entry(produced.topic.to_string())
                .or_default()
                .push_back(produced);
        }
    }

    pub(crate) fn read_output(&mut self, topic: &str) -> Option<ProducedRecord> {
        self.outputs.get_mut(topic).and_then(VecDeque::pop_front)
    }

    pub(crate) fn output_len(&self, topic: &str) -> usize {
        self.outputs.get(topic).map_or(0, VecDeque::len)
    }

    fn advance_wall_clock(&mut self, by: Duration) -> Result<(), StreamsError> {
        self.wall_clock += by.as_millis() as i64;
        for index in 0..self.tasks.len() {
            self.tasks[index].advance_wall_clock(self.wall_clock)?;
            let mut pending = VecDeque::new();
            self.route_output(index, &mut pending);
            self.run(&mut pending, self.wait_for_async)?;
        }
        self.commit()
    }
}

fn unknown_topic(topic: &str) -> StreamsError {
    StreamsError::Internal(format!(
        "unknown topic {topic:?}: no source of the topology reads it (check the topic name given to create_input_topic)"
    ))
}

/// Drives a topology in a test: Kafka Streams' `TopologyTestDriver`.
///
/// ```
/// use kstreams_dsl::StreamsBuilder;
/// use kstreams_record::StringSerde;
/// use kstreams_runtime::TopologyTestDriver;
///
/// let builder = StreamsBuilder::new();
/// builder
///     .stream::<String, String>("in")
///     .map_values(|v| v.to_uppercase())
///     .to("out");
/// let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
/// let input = driver.create_input_topic("in", StringSerde, StringSerde);
/// let output = driver.create_output_topic("out", StringSerde, StringSerde);
/// input.pipe_input("k".to_string(), "hello".to_string());
/// assert_eq!(output.read_key_value(), ("k".to_string(), "HELLO".to_string()));
/// assert!(output.is_empty());
/// ```
pub struct TopologyTestDriver {
    state: Rc<RefCell<DriverState>>,
    topology: Arc<Topology>,
    application_id: String,
    /// The tasks' and stores' metrics, as one stream thread's.
    metrics: MetricsRegistry,
}

/// The stream thread the driver's metrics name (their `thread_id` label).
pub const DRIVER_THREAD_ID: &str = "topology-test-driver";

impl TopologyTestDriver {
    /// A driver with the default configuration and the wall clock at now.
    pub fn new(topology: Topology) -> Result<Self, StreamsError> {
        Self::with_config(topology, TaskConfig::new(DEFAULT_APPLICATION_ID), now())
    }

    /// A driver with this configuration and initial wall clock (ms).
    pub fn with_config(
        topology: Topology,
        config: TaskConfig,
        wall_clock: Timestamp,
    ) -> Result<Self, StreamsError> {
        Self::build(topology, config, wall_clock, RecordingLevel::Info)
    }

    /// [`TopologyTestDriver::with_config`], recording metrics at `level`.
    fn build(
        topology: Topology,
        config: TaskConfig,
        wall_clock: Timestamp,
        level: RecordingLevel,
    ) -> Result<Self, StreamsError> {
        let metrics = MetricsRegistry::new();
        let application_id = config.application_id.clone();
        static DRIVERS: AtomicUsize = AtomicUsize::new(0);
        let state_dir = std::env::temp_dir().join(format!(
            "kstreams-test-driver-{}-{}",
            std::process::id(),
            DRIVERS.fetch_add(1, Ordering::Relaxed)
        ));
        let changelog = Rc::new(ChangelogCollector::default());
        // One cache for the driver's tasks, as for one stream thread.
        let cache = Rc::new(kstreams_state::ThreadCache::new(config.cache_max_bytes));
        let tasks = topology
            .subtopology_ids()
            .into_iter()
            .map(|s| {
                let id = TaskId {
                    subtopology: s,
                    partition: 0,
                };
                let task_dir = state_dir.join(&application_id).join(id.to_string());
                std::fs::create_dir_all(&task_dir).map_err(|e| {
                    StreamsError::Internal(format!("cannot create {}: {e}", task_dir.display()))
                })?;
                let writer: Rc<dyn ChangelogWriter> = changelog.clone();
                let stores = StoreContext::new(&application_id, &id.to_string(), 0)
                    .with_task_directory(task_dir)
                    .with_changelog_writer(writer)
                    .with_thread_cache(cache.clone());
                // Store metrics are DEBUG, as in the runtime (Kafka Streams'
                // state-store metrics are).
                let stores = if level >= RecordingLevel::Debug {
                    stores.with_metrics(metrics.clone())
                } else {
                    stores
                };
                let mut task = StreamTask::with_store_context(
                    &topology,
                    id,
                    config.clone(),
                    wall_clock,
                    stores,
                )?;
                task.register_metrics(&metrics, level, DRIVER_THREAD_ID)?;
                // The driver's topics have one partition each, as its
                // records all come from and go to partition 0.
                task.context()
                    .set_partition_counts(Rc::new(|_: &str| Ok(1)));
                Ok(task)
            })
            .collect::<Result<Vec<StreamTask>, StreamsError>>()?;
        let mut tasks = tasks;
        let async_side = if tasks.iter().any(StreamTask::has_async_nodes) {
            let mut side = ThreadAsync::new(AsyncExecutor::default(), AsyncLimits::default());
            for task in tasks.iter_mut().filter(|t| t.has_async_nodes()) {
                task.install_async_runtime(side.for_task()?);
            }
            Some(side)
        } else {
            None
        };
        Ok(Self {
            state: Rc::new(RefCell::new(DriverState {
                tasks,
                changelog,
                state_dir,
                next_offset: HashMap::new(),
                outputs: HashMap::new(),
                wall_clock,
                globals: topology.global_stores().to_vec(),
                async_side,
                wait_for_async: true,
            })),
            topology: Arc::new(topology),
            application_id,
            metrics,
        })
    }

    /// An input topic; records get the wall clock's time unless given one.
    pub fn create_input_topic<K: 'static, V: 'static>(
        &self,
        topic: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> TestInputTopic<K, V> {
        let start = self.state.borrow().wall_clock;
        TestInputTopic::new(
            self.state.clone(),
            topic,
            Arc::new(key_serde),
            Arc::new(value_serde),
            start,
            Duration::ZERO,
        )
    }

    /// An input topic whose records are stamped `start`, `start + advance`,
    /// ... unless given a time.
    pub fn create_input_topic_at<K: 'static, V: 'static>(
        &self,
        topic: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
        start: Timestamp,
        advance: Duration,
    ) -> TestInputTopic<K, V> {
        TestInputTopic::new(
            self.state.clone(),
            topic,
            Arc::new(key_serde),
            Arc::new(value_serde),
            start,
            advance,
        )
    }

    /// An output topic, read with these serdes.
    pub fn create_output_topic<K: 'static, V: 'static>(
        &self,
        topic: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> TestOutputTopic<K, V> {
        TestOutputTopic::new(
            self.state.clone(),
            topic,
            Arc::new(key_serde),
            Arc::new(value_serde),
        )
    }

    /// Moves the mocked wall clock and fires wall-clock punctuations.
    pub fn advance_wall_clock_time(&self, by: Duration) {
        self.try_advance_wall_clock_time(by)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`TopologyTestDriver::advance_wall_clock_time`], returning errors.
    pub fn try_advance_wall_clock_time(&self, by: Duration) -> Result<(), StreamsError> {
        self.state.borrow_mut().advance_wall_clock(by)
    }

    /// Whether each input waits until the async calls it started finished
    /// and their results went through (the default: `true`). With `false`
    /// calls overlap across inputs; [`TopologyTestDriver::wait_for_async`]
    /// waits for them.
    pub fn set_wait_for_async_after_input(&self, wait: bool) {
        self.state.borrow_mut().wait_for_async = wait;
    }

    /// Waits until every async call in flight finished and its result went
    /// through the topology (then commits, as after an input).
    pub fn wait_for_async(&self) -> Result<(), StreamsError> {
        let mut state = self.state.borrow_mut();
        state.run(&mut VecDeque::new(), true)?;
        state.commit()
    }

    /// Records in async processors: called or waiting behind their key.
    pub fn async_in_flight(&self) -> usize {
        self.state.borrow().async_in_flight()
    }

    /// A handle on a store by name and handle type, if a task has it.
    pub fn get_state_store<H: Clone + 'static>(
        &self,
        name: &str,
    ) -> Result<Option<H>, StreamsError> {
        let mut state = self.state.borrow_mut();
        for task in &mut state.tasks {
            if let Some(built) = task.context().stores().get(name) {
                return Ok(Some(built.handle::<H>()?));
            }
        }
        Ok(None)
    }

    /// The names of every store of the driver's tasks (Kafka Streams'
    /// `getAllStateStores`; get one with
    /// [`TopologyTestDriver::get_state_store`]).
    pub fn state_store_names(&self) -> BTreeSet<String> {
        let mut state = self.state.borrow_mut();
        state
            .tasks
            .iter_mut()
            .flat_map(|t| t.context().stores().keys().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// A key-value store by name.
    pub fn get_key_value_store<K: 'static, V: 'static>(
        &self,
        name: &str,
    ) -> Option<KeyValueStoreHandle<K, V>> {
        self.get_state_store(name).ok().flatten()
    }

    /// The topics that have output waiting or were written.
    pub fn produced_topic_names(&self) -> BTreeSet<String> {
        self.state.borrow().outputs.keys().cloned().collect()
    }

    /// Records dropped by error handlers or for negative timestamps, over
    /// all tasks.
    pub fn dropped_records(&self) -> u64 {
        self.state
            .borrow()
            .tasks
            .iter()
            .map(|t| t.metrics().dropped.get())
            .sum()
    }

    /// The metrics of the driver's tasks and stores (Kafka Streams'
    /// driver's `metrics()`), under the names `KafkaStreams::metrics` gives
    /// them, as of one stream thread named [`DRIVER_THREAD_ID`]; read one
    /// with [`MetricsRegistry::samples`].
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// The topology under test.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The application id in use.
    pub fn application_id(&self) -> &str {
        &self.application_id
    }
}

/// The wall clock, in milliseconds since the epoch: a driver's first
/// reading unless given one.
fn now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Drop for TopologyTestDriver {
    fn drop(&mut self) {
        if let Ok(mut state) = self.state.try_borrow_mut() {
            for task in &mut state.tasks {
                task.close();
            }
            let _ = std::fs::remove_dir_all(&state.state_dir);
        }
    }
}
