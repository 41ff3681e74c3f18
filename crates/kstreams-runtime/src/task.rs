//! `StreamTask`: one sub-topology over one partition of its topics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use kstreams_dsl::__private::{ConsumedRecord, ProducedRecord, TaskContext, TaskTopology};
use kstreams_dsl::{RecordPosition, StreamsError, TaskId, Topology};
use kstreams_metrics::{Counter, Histogram, LocalHistogram, MetricsRegistry, RecordingLevel};
use kstreams_record::{Headers, Timestamp};
use kstreams_state::StoreContext;
use kstreams_time::{ConsumedRecordView, PunctuationType};

use crate::handlers::{
    DeadLetterRecord, DeserializationExceptionHandler, ErrorHandlerContext, HandlerResult,
    ProcessingExceptionHandler, ProductionExceptionHandler, ProductionResult,
    SerializationExceptionOrigin,
};
use crate::partition_times::PartitionTimes;
use crate::TaskConfig;

/// Counts a task keeps about its records.
///
/// [`TaskMetrics::default`] counts for the task alone (the test driver);
/// [`TaskMetrics::registered`] counts into a [`MetricsRegistry`], where a
/// Prometheus scrape reads them.
#[derive(Debug, Default)]
pub struct TaskMetrics {
    /// Records run through the topology.
    pub processed: Counter,
    /// Records dropped: bad bytes or failures under a "continue" handler,
    /// records whose extracted timestamp is negative, and records operators
    /// dropped (null keys in aggregations, late records for closed windows).
    pub dropped: Counter,
    /// Punctuations that fired.
    pub punctuations: Counter,
    /// Times the task stopped waiting for an empty partition and
    /// processed anyway (`max.task.idle.ms` ran out).
    pub enforced_processing: Counter,
    /// One record's run through the topology (recording level DEBUG).
    pub process_latency: Option<Histogram>,
    /// One punctuation's run (recording level DEBUG).
    pub punctuate_latency: Option<Histogram>,
    /// How far behind stream time each record was (recording level DEBUG).
    pub record_lateness: Option<Histogram>,
    /// End-to-end latency at each source node, in the order of the task's
    /// sources: wall clock minus the record's event time when the source
    /// takes it (Kafka Streams' `record-e2e-latency`, level INFO).
    /// Buffered on the task's thread and flushed as each processing step's
    /// output is drained (two observations per record otherwise cost eight
    /// atomic updates).
    pub source_e2e_latency: Vec<LocalHistogram>,
    /// Records each source node took, in the same order.
    pub source_process: Vec<Counter>,
    /// End-to-end latency at the sink nodes (Kafka Streams records it at
    /// terminal nodes too): wall clock minus the output's timestamp when
    /// the sink wrote it.
    pub sink_e2e_latency: Option<SinkLatency>,
}

/// The sink nodes' end-to-end latency histograms of one task, made on a
/// sink's first record.
#[derive(Debug)]
pub struct SinkLatency {
    registry: MetricsRegistry,
    thread_id: String,
    task_id: String,
    /// By the address of the sink's name: every record of a sink shares
    /// one `Rc<str>`, so no string is hashed per record. Buffered like the
    /// sources' (see [`TaskMetrics::source_e2e_latency`]).
    by_sink: rustc_hash::FxHashMap<usize, LocalHistogram>,
}

impl SinkLatency {
    fn observe(&mut self, sink: &std::rc::Rc<str>, latency_ms: i64) {
        let key = std::rc::Rc::as_ptr(sink) as *const u8 as usize;
        let seconds = latency_ms.max(0) as f64 / 1000.0;
        if let Some(histogram) = self.by_sink.get(&key) {
            histogram.observe(seconds);
            return;
        }
        match self
            .registry
            .node_sensors(&self.thread_id, &self.task_id, sink)
        {
            Ok(sensors) => {
                let histogram = sensors.record_e2e_latency.local();
                histogram.observe(seconds);
                self.by_sink.insert(key, histogram);
            }
            Err(e) => log::warn!("sink {sink}: no end-to-end latency metric: {e}"),
        }
    }
}

impl TaskMetrics {
    /// Adds the buffered end-to-end latencies to their histograms.
    fn flush_local(&self) {
        for histogram in &self.source_e2e_latency {
            histogram.flush();
        }
        if let Some(sinks) = &self.sink_e2e_latency {
            for histogram in sinks.by_sink.values() {
                histogram.flush();
            }
        }
    }

    /// The task's series in `registry` (labels `thread_id`, `task_id`, and
    /// `node` for the source nodes' end-to-end latency).
    pub fn registered(
        registry: &MetricsRegistry,
        level: RecordingLevel,
        thread_id: &str,
        task_id: &str,
        source_nodes: &[String],
    ) -> Result<Self, kstreams_metrics::Error> {
        let sensors = registry.task_sensors(thread_id, task_id)?;
        let debug = level >= RecordingLevel::Debug;
        let mut source_e2e_latency = Vec::new();
        let mut source_process = Vec::new();
        for node in source_nodes {
            let sensors = registry.node_sensors(thread_id, task_id, node)?;
            source_e2e_latency.push(sensors.record_e2e_latency.local());
            source_process.push(sensors.process);
        }
        Ok(Self {
            processed: sensors.process,
            dropped: sensors.dropped_records,
            punctuations: sensors.punctuate,
            enforced_processing: sensors.enforced_processing,
            process_latency: debug.then_some(sensors.process_latency),
            punctuate_latency: debug.then_some(sensors.punctuate_latency),
            record_lateness: debug.then_some(sensors.record_lateness),
            source_e2e_latency,
            source_process,
            sink_e2e_latency: Some(SinkLatency {
                registry: registry.clone(),
                thread_id: thread_id.to_string(),
                task_id: task_id.to_string(),
                by_sink: Default::default(),
            }),
        })
    }
}

/// A task: one sub-topology instantiated over one partition of its source
/// topics. It extracts event time, keeps stream time and partition time,
/// runs each record depth-first through the nodes, fires punctuations, and
/// applies the error handlers. Whoever drives it (the test driver, a stream
/// thread) chooses the order of records and collects the output.
pub struct StreamTask {
    topology: TaskTopology,
    config: TaskConfig,
    /// Largest timestamp seen per input partition.
    partition_time: PartitionTimes,
    /// Largest timestamp processed per input partition: the partition time
    /// committed with its offset (records buffered but not processed are
    /// read again after a restart, so they must not count).
    processed_time: PartitionTimes,
    metrics: TaskMetrics,
    /// With a dead-letter queue or handlers of the application's own: the
    /// consumed records still in async processors, for the handler if
    /// their call fails.
    async_raw: Vec<ConsumedRecord>,
    /// The handlers in force (the application's own or the built-in ones).
    deserialization_handler: Arc<dyn DeserializationExceptionHandler>,
    processing_handler: Arc<dyn ProcessingExceptionHandler>,
    production_handler: Arc<dyn ProductionExceptionHandler>,
    /// Whether each record is kept as consumed until processed: the
    /// handlers' context gives its raw key and value.
    keeps_raw: bool,
}

impl StreamTask {
    /// Builds the task's nodes and stores and initializes its processors;
    /// stores get a context of their own (no task directory, no changelog).
    pub fn new(
        topology: &Topology,
        id: TaskId,
        config: TaskConfig,
        wall_clock: Timestamp,
    ) -> Result<Self, StreamsError> {
        let stores = StoreContext::new(&config.application_id, &id.to_string(), id.partition);
        Self::with_store_context(topology, id, config, wall_clock, stores)
    }

    /// [`StreamTask::new`] with the stores' task directory, changelog writer
    /// and cache given by `stores`.
    pub fn with_store_context(
        topology: &Topology,
        id: TaskId,
        config: TaskConfig,
        wall_clock: Timestamp,
        stores: StoreContext,
    ) -> Result<Self, StreamsError> {
        let mut topology = TaskTopology::with_store_context(
            topology,
            id,
            &config.application_id,
            wall_clock,
            stores,
        )?;
        // Sinks leave what does not serialize to the production handler,
        // asked once the record is through (`skipped_outputs`): a record
        // it resumes goes on to the task's other sinks, as in Kafka Streams.
        topology.context().set_continue_on_serialization_error(true);
        let keeps_raw = config.dead_letter_queue.is_some()
            || config.deserialization_handler.is_some()
            || config.processing_handler.is_some()
            || config.production_handler.is_some();
        Ok(Self {
            deserialization_handler: config.deserialization_handler(),
            processing_handler: config.processing_handler(),
            production_handler: config.production_handler(),
            keeps_raw,
            topology,
            config,
            partition_time: PartitionTimes::default(),
            processed_time: PartitionTimes::default(),
            metrics: TaskMetrics::default(),
            async_raw: Vec::new(),
        })
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.topology.context_view().task_id()
    }

    /// Whether the task reads `topic`.
    pub fn reads(&self, topic: &str) -> bool {
        self.topology.reads(topic)
    }

    /// The task's stream time (-1 before its first record).
    pub fn stream_time(&self) -> Timestamp {
        self.topology.context_view().stream_time()
    }

    /// Counters of this task.
    pub fn metrics(&self) -> &TaskMetrics {
        &self.metrics
    }

    /// Records the task's metrics into `registry` from now on.
    pub fn register_metrics(
        &mut self,
        registry: &MetricsRegistry,
        level: RecordingLevel,
        thread_id: &str,
    ) -> Result<(), StreamsError> {
        let sources = self.topology.source_names();
        self.metrics =
            TaskMetrics::registered(registry, level, thread_id, &self.id().to_string(), &sources)
                .map_err(|e| StreamsError::Internal(format!("task metrics: {e}")))?;
        Ok(())
    }

    /// The largest timestamp processed from a partition (-1: none yet), as
    /// committed with its offset.
    pub fn processed_partition_time(&self, topic: &str, partition: i32) -> Timestamp {
        self.processed_time.get(topic, partition).unwrap_or(-1)
    }

    /// Resumes a partition from what was committed with its offset (Kafka
    /// Streams' `initializeTaskTime`): its partition time, which also
    /// moves the task's stream time, and the operators' metadata.
    pub fn resume_partition(
        &mut self,
        topic: &str,
        partition: i32,
        partition_time: Timestamp,
        processor_metadata: impl IntoIterator<Item = (String, i64)>,
    ) {
        for times in [&mut self.partition_time, &mut self.processed_time] {
            times.raise_named(topic, partition, partition_time);
        }
        if partition_time >= 0 {
            self.topology.context().advance_stream_time(partition_time);
        }
        self.topology
            .context()
            .merge_processor_metadata(processor_metadata);
    }

    /// The operators' metadata to commit with the task's offsets.
    pub fn processor_metadata(&self) -> &std::collections::BTreeMap<String, i64> {
        self.topology.context_view().processor_metadata()
    }

    /// The task's stores by name.
    pub fn stores(&self) -> &std::collections::HashMap<String, kstreams_state::BuiltStore> {
        self.topology.context_view().stores()
    }

    /// The task's context (stores, output).
    pub fn context(&mut self) -> &mut TaskContext {
        self.topology.context()
    }

    /// Runs one consumed record through the task, then any stream-time
    /// punctuation it made due. A dropped record (bad bytes or a failure
    /// under a "continue" handler, a negative timestamp) is `Ok`.
    pub fn process(&mut self, record: ConsumedRecord) -> Result<(), StreamsError> {
        match self.extract_timestamp(&record)? {
            Some(timestamp) => self.process_at(record, timestamp, crate::clock::now_ms()),
            None => Ok(()),
        }
    }

    /// The record's event time by the source's (or the default) extractor,
    /// moving its partition's time; `None` (and counted as dropped) for a
    /// negative timestamp. Kafka Streams extracts when a record is
    /// buffered, so that the partition group orders records by event time.
    pub fn extract_timestamp(
        &mut self,
        record: &ConsumedRecord,
    ) -> Result<Option<Timestamp>, StreamsError> {
        let slot = self.partition_time.slot(&record.topic, record.partition);
        let partition_time = self.partition_time.at(slot);
        let extractor = match self.topology.timestamp_extractor(&record.topic) {
            Some(extractor) => extractor,
            None => &*self.config.default_timestamp_extractor,
        };
        let view = ConsumedRecordView {
            topic: &record.topic,
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            value: record.value.as_deref(),
        };
        let timestamp = extractor.extract(&view, partition_time)?;
        if timestamp < 0 {
            log::warn!(
                "skipping record {}-{}@{}: extracted timestamp {timestamp} is negative",
                record.topic,
                record.partition,
                record.offset
            );
            self.metrics.dropped.inc();
            return Ok(None);
        }
        self.partition_time.raise(slot, timestamp);
        Ok(Some(timestamp))
    }

    /// Runs a record whose event time was extracted (see
    /// [`StreamTask::extract_timestamp`]) through the task, then any
    /// stream-time punctuation it made due. `wall_clock_ms` is the time its
    /// end-to-end latency is measured at (a clock read shared by a few
    /// records, see `SliceClock`).
    pub fn process_at(
        &mut self,
        mut record: ConsumedRecord,
        timestamp: Timestamp,
        wall_clock_ms: i64,
    ) -> Result<(), StreamsError> {
        let stream_time_before = self.stream_time();
        if let Some(lateness) = &self.metrics.record_lateness {
            let behind = stream_time_before.saturating_sub(timestamp).max(0);
            lateness.observe(behind as f64 / 1000.0);
        }
        self.processed_time
            .raise_for(&record.topic, record.partition, timestamp);
        if !self.metrics.source_e2e_latency.is_empty() {
            if let Some(source) = self.topology.source_index(&record.topic) {
                self.metrics.source_e2e_latency[source]
                    .observe(wall_clock_ms.saturating_sub(timestamp).max(0) as f64 / 1000.0);
                self.metrics.source_process[source].inc();
            }
        }
        let started = self
            .metrics
            .process_latency
            .as_ref()
            .map(|_| std::time::Instant::now());
        self.topology.context().advance_stream_time(timestamp);
        // The raw record is kept only when a handler may need it.
        let raw = self.keeps_raw.then(|| record.clone());
        let trace = crate::trace_context::begin(
            &self.config.tracing,
            self.id(),
            &mut record,
            self.topology.context().pending_output().len(),
        );
        let result = self.guarded(|t| t.process(record, timestamp));
        if let Some(trace) = trace {
            trace.finish(self.topology.context().pending_output());
        }
        let dropped = self.topology.context().take_dropped_records();
        self.metrics.dropped.add(dropped);
        self.skipped_outputs(raw.as_ref())?;
        if let (Some(histogram), Some(started)) = (&self.metrics.process_latency, started) {
            histogram.observe_since(started);
        }
        match result {
            Ok(()) => {
                self.metrics.processed.inc();
                if let Some(raw) = raw {
                    let held = self.topology.context_view().async_work().holds(
                        &raw.topic,
                        raw.partition,
                        raw.offset,
                    );
                    if held {
                        self.async_raw.push(raw);
                    }
                }
            }
            Err(error) => {
                // A record that does not deserialize never entered the
                // task in Kafka Streams (it is dropped while buffered):
                // it does not move stream time.
                if matches!(error, StreamsError::Deserialization { .. }) {
                    self.topology.context().set_stream_time(stream_time_before);
                }
                self.on_error(error, raw.as_ref())?
            }
        }
        self.punctuate(PunctuationType::StreamTime)?;
        Ok(())
    }

    /// Whether the task has async processors.
    pub fn has_async_nodes(&self) -> bool {
        self.topology.has_async_nodes()
    }

    /// Gives the task's async processors the runtime their calls run on.
    pub fn install_async_runtime(&mut self, runtime: kstreams_dsl::__private::AsyncRuntime) {
        self.topology.context().install_async_runtime(runtime);
    }

    /// Records in the task's async processors, taken and not finished.
    pub fn async_in_flight(&self) -> usize {
        self.topology.context_view().async_work().in_flight()
    }

    /// Whether the task may take another record: its async processors
    /// (and its thread's) are below their in-flight bounds.
    pub fn admits_records(&self) -> bool {
        self.topology.context_view().async_work().admits()
    }

    /// The lowest offset of a partition whose record is still in an async
    /// processor: the commit of that partition may not pass it.
    pub fn lowest_unfinished_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.topology
            .context_view()
            .async_work()
            .lowest_held(topic, partition)
    }

    /// Applies every async call that finished and may go out (its result
    /// runs through the nodes below as a record would). A failed call goes
    /// to the processing handler and the dead-letter queue as a failed
    /// record does. Returns how many were applied.
    pub fn apply_async_completions(&mut self) -> Result<usize, StreamsError> {
        if !self.topology.has_async_nodes() {
            return Ok(0);
        }
        let mut applied = 0;
        loop {
            let result = self.guarded(|t| t.apply_async_completion());
            let dropped = self.topology.context().take_dropped_records();
            self.metrics.dropped.add(dropped);
            self.skipped_outputs(None)?;
            match result {
                Ok(false) => break,
                Ok(true) => applied += 1,
                Err(error) => {
                    applied += 1;
                    let position = match &error {
                        StreamsError::Processing { position, .. }
                        | StreamsError::Panic { position, .. } => position.clone(),
                        _ => None,
                    };
                    let raw = position.and_then(|p| {
                        let i = self.async_raw.iter().position(|r| {
                            r.offset == p.offset
                                && r.partition == p.partition
                                && *r.topic == *p.topic
                        })?;
                        Some(self.async_raw.swap_remove(i))
                    });
                    self.on_error(error, raw.as_ref())?
                }
            }
        }
        if !self.async_raw.is_empty() {
            let work = self.topology.context_view().async_work();
            self.async_raw
                .retain(|r| work.holds(&r.topic, r.partition, r.offset));
        }
        Ok(applied)
    }

    /// Moves the wall clock and fires the wall-clock punctuations due;
    /// returns whether one fired.
    pub fn advance_wall_clock(&mut self, now: Timestamp) -> Result<bool, StreamsError> {
        self.topology.context().set_wall_clock(now);
        self.punctuate(PunctuationType::WallClockTime)
    }

    /// Fires the punctuations of `kind` due; returns whether one fired.
    fn punctuate(&mut self, kind: PunctuationType) -> Result<bool, StreamsError> {
        if !self.topology.schedules(kind) {
            return Ok(false);
        }
        let started = self
            .metrics
            .punctuate_latency
            .as_ref()
            .map(|_| std::time::Instant::now());
        let fired = self.guarded(|t| t.punctuate(kind));
        self.skipped_outputs(None)?;
        match fired {
            Ok(true) => {
                self.metrics.punctuations.inc();
                if let (Some(histogram), Some(started)) = (&self.metrics.punctuate_latency, started)
                {
                    histogram.observe_since(started);
                }
                Ok(true)
            }
            Ok(false) => Ok(false),
            // The handler let the task go on: what the punctuator did
            // before failing may still need a commit.
            Err(error) => self.on_error(error, None).map(|()| true),
        }
    }

    /// Runs `f` on the topology, turning a panic in user code into
    /// [`StreamsError::Panic`] naming the node it came from and the record
    /// it was on (the sources record it before deserializing).
    fn guarded<T>(
        &mut self,
        f: impl FnOnce(&mut TaskTopology) -> Result<T, StreamsError>,
    ) -> Result<T, StreamsError> {
        let topology = &mut self.topology;
        match catch_unwind(AssertUnwindSafe(|| f(topology))) {
            Ok(result) => result,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_string());
                let context = self.topology.context();
                let node = context.current_node().unwrap_or("(unknown)").to_string();
                let position = context.record_metadata().map(|m| RecordPosition {
                    topic: m.topic.to_string(),
                    partition: m.partition,
                    offset: m.offset,
                });
                context.reset_after_panic();
                Err(StreamsError::Panic {
                    node,
                    position,
                    message,
                })
            }
        }
    }

    fn write_dead_letter(&mut self, record: DeadLetterRecord) {
        self.topology.context().push_output(ProducedRecord {
            topic: record.topic.into(),
            partition: record.partition,
            partition_key_len: None,
            key: record.key,
            value: record.value,
            timestamp: record.timestamp,
            headers: record.headers,
            sink: None,
        });
    }

    /// Where `error` happened, for a handler: the consumed record's place
    /// and bytes when there is one, else the error's position (a
    /// punctuation has none), at the task's stream time.
    fn error_context<'a>(
        &'a self,
        error: &'a StreamsError,
        raw: Option<&'a ConsumedRecord>,
    ) -> ErrorHandlerContext<'a> {
        static NO_HEADERS: std::sync::OnceLock<Headers> = std::sync::OnceLock::new();
        let (node, position) = match error {
            StreamsError::Processing { node, position, .. }
            | StreamsError::Panic { node, position, .. } => (node.as_str(), position.as_ref()),
            StreamsError::Deserialization { node, position, .. } => (node.as_str(), Some(position)),
            StreamsError::Serialization { node, .. } => (node.as_str(), None),
            _ => ("", None),
        };
        let task_id = self.id();
        match raw {
            Some(raw) => ErrorHandlerContext {
                topic: Some(&raw.topic),
                partition: raw.partition,
                offset: raw.offset,
                headers: &raw.headers,
                processor_node_id: node,
                task_id,
                timestamp: raw.timestamp,
                source_raw_key: raw.key.as_deref(),
                source_raw_value: raw.value.as_deref(),
            },
            None => ErrorHandlerContext {
                topic: position.map(|p| p.topic.as_str()),
                partition: position.map_or(-1, |p| p.partition),
                offset: position.map_or(-1, |p| p.offset),
                headers: NO_HEADERS.get_or_init(Headers::new),
                processor_node_id: node,
                task_id,
                timestamp: self.stream_time(),
                source_raw_key: None,
                source_raw_value: None,
            },
        }
    }

    /// Hands a failed record (or punctuation) to its handler: the
    /// deserialization handler for bytes that do not deserialize, the
    /// processing handler for a processor's error or panic; other errors
    /// go to [`StreamTask::handle`]. The handler's dead-letter records are
    /// written either way; `Ok` if it resumes.
    fn on_error(
        &mut self,
        error: StreamsError,
        raw: Option<&ConsumedRecord>,
    ) -> Result<(), StreamsError> {
        let response = match &error {
            StreamsError::Deserialization { .. } => {
                let handler = Arc::clone(&self.deserialization_handler);
                let context = self.error_context(&error, raw);
                catch_unwind(AssertUnwindSafe(|| handler.handle_error(&context, &error)))
            }
            StreamsError::Processing { .. } | StreamsError::Panic { .. } => {
                let handler = Arc::clone(&self.processing_handler);
                let context = self.error_context(&error, raw);
                catch_unwind(AssertUnwindSafe(|| handler.handle_error(&context, &error)))
            }
            StreamsError::Serialization { .. } => return self.on_serialization_error(error, raw),
            _ => {
                // The caller fails with it: a stream thread logs it once,
                // as it ends; the test driver returns it.
                log::debug!("task {}: {error}", self.id());
                return Err(error);
            }
        };
        let Ok(response) = response else {
            // Kafka Streams fails the task when its handler throws.
            log::error!(
                "task {}: the exception handler panicked on: {error}; failing",
                self.id()
            );
            return Err(error);
        };
        for record in response.dead_letter_records {
            self.write_dead_letter(record);
        }
        match response.result {
            HandlerResult::Resume => {
                log::warn!("task {}: dropping record: {error}", self.id());
                self.metrics.dropped.inc();
                Ok(())
            }
            HandlerResult::Fail => {
                // The caller fails with it: a stream thread logs it once,
                // as it ends; the test driver returns it.
                log::debug!("task {}: {error}", self.id());
                Err(error)
            }
        }
    }

    /// Outputs the sinks left because they did not serialize, each handed
    /// to the production handler in turn: `Err` with the first one it
    /// fails on.
    fn skipped_outputs(&mut self, raw: Option<&ConsumedRecord>) -> Result<(), StreamsError> {
        for error in self.topology.context().take_skipped_errors() {
            self.on_serialization_error(error, raw)?;
        }
        Ok(())
    }

    /// Asks the production handler about an output that did not serialize
    /// (Kafka Streams' `RecordCollectorImpl.handleException`): its
    /// dead-letter records are written; `Ok` if it resumes (the output is
    /// dropped and counted). RETRY is FAIL here, as in Kafka Streams: no
    /// retry serializes the same value differently.
    fn on_serialization_error(
        &mut self,
        error: StreamsError,
        raw: Option<&ConsumedRecord>,
    ) -> Result<(), StreamsError> {
        let origin = match &error {
            StreamsError::Serialization { part: "key", .. } => SerializationExceptionOrigin::Key,
            _ => SerializationExceptionOrigin::Value,
        };
        let handler = Arc::clone(&self.production_handler);
        let context = self.error_context(&error, raw);
        let response = catch_unwind(AssertUnwindSafe(|| {
            handler.handle_serialization_error(&context, &error, origin)
        }));
        let Ok(response) = response else {
            log::error!(
                "task {}: the production exception handler panicked on: {error}; failing",
                self.id()
            );
            return Err(error);
        };
        for record in response.dead_letter_records {
            self.write_dead_letter(record);
        }
        match response.result {
            ProductionResult::Resume => {
                log::warn!("task {}: dropping an output: {error}", self.id());
                self.metrics.dropped.inc();
                Ok(())
            }
            ProductionResult::Retry => {
                log::warn!(
                    "task {}: the production exception handler answered RETRY to a \
                     serialization error, which no retry mends: failing",
                    self.id()
                );
                Err(error)
            }
            ProductionResult::Fail => {
                log::debug!("task {}: {error}", self.id());
                Err(error)
            }
        }
    }

    /// Takes the records the sinks wrote (their buffer with them).
    pub fn drain_output(&mut self) -> Vec<ProducedRecord> {
        let output = self.topology.context().drain_output();
        self.observe_sinks(&output);
        output
    }

    /// Moves the records the sinks wrote to the end of `out` (see
    /// [`TaskContext::drain_output_into`]): the stream thread's path, once
    /// per processing step.
    pub fn drain_output_into(&mut self, out: &mut Vec<ProducedRecord>) {
        let start = out.len();
        self.topology.context().drain_output_into(out);
        self.observe_sinks(&out[start..]);
    }

    /// Records the sinks' end-to-end latency of `written`, and flushes the
    /// buffered latencies (the sources' too) to their histograms.
    fn observe_sinks(&mut self, written: &[ProducedRecord]) {
        if let (Some(latency), false) = (&mut self.metrics.sink_e2e_latency, written.is_empty()) {
            // One clock read for what one processing step wrote.
            let now = crate::clock::now_ms();
            for record in written {
                if let Some(sink) = &record.sink {
                    latency.observe(sink, now.saturating_sub(record.timestamp));
                }
            }
        }
        self.metrics.flush_local();
    }

    /// Flushes the stores (at commit).
    pub fn flush(&mut self) -> Result<(), StreamsError> {
        let flushed = self.guarded(|t| t.flush());
        let dropped = self.topology.context().take_dropped_records();
        self.metrics.dropped.add(dropped);
        self.skipped_outputs(None)?;
        flushed
    }

    /// Closes processors and stores.
    pub fn close(&mut self) {
        self.topology.close();
    }

    /// Closes processors and stores dirty (see [`TaskTopology::close_dirty`]):
    /// for a task whose work since the last commit is thrown away, so that
    /// nothing its caches hold reaches the stores or the changelogs.
    pub fn close_dirty(&mut self) {
        self.topology.close_dirty();
    }
}
