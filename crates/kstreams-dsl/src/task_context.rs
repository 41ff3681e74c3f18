use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use kstreams_record::{Headers, RecordMetadata, Timestamp};
use kstreams_state::BuiltStore;
use kstreams_time::PunctuationSchedule;

/// A task: one sub-topology over one partition of its source topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    /// The sub-topology.
    pub subtopology: u32,
    /// The partition.
    pub partition: i32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.subtopology, self.partition)
    }
}

impl TaskId {
    /// Reads the `<subtopology>_<partition>` form [`Display`](fmt::Display)
    /// writes (a task directory's name); `None` for anything else.
    ///
    /// ```
    /// use kstreams_dsl::TaskId;
    /// assert_eq!(TaskId::parse("1_2"), Some(TaskId { subtopology: 1, partition: 2 }));
    /// assert_eq!(TaskId::parse("1-2"), None);
    /// ```
    pub fn parse(text: &str) -> Option<TaskId> {
        let (subtopology, partition) = text.split_once('_')?;
        Some(TaskId {
            subtopology: subtopology.parse().ok()?,
            partition: partition.parse().ok()?,
        })
    }
}

/// A record as consumed, before its source deserializes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumedRecord {
    /// Source topic: one shared name per topic, not a copy per record.
    pub topic: Arc<str>,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// The timestamp stored with the record.
    pub timestamp: Timestamp,
    /// Key bytes (`None` is null).
    pub key: Option<Vec<u8>>,
    /// Value bytes (`None` is null).
    pub value: Option<Vec<u8>>,
    /// Headers.
    pub headers: Headers,
}

/// The largest output buffer, in records, a task context keeps between
/// two drains (see [`TaskContext::drain_output_into`]).
const MAX_KEPT_OUTPUT: usize = 4 * 1024;

/// A record a sink wrote, waiting for the producer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducedRecord {
    /// Destination topic (the full name, application id included for
    /// internal topics): one shared name per sink or store, not a copy per
    /// record.
    pub topic: Arc<str>,
    /// Destination partition, when a partitioner chose one.
    pub partition: Option<i32>,
    /// When no partition was chosen: how many leading key bytes choose it,
    /// as Kafka's default partitioner would with a whole key (a windowed
    /// key's plain key); `None` for the whole key.
    pub partition_key_len: Option<usize>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes.
    pub value: Option<Vec<u8>>,
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Headers.
    pub headers: Headers,
    /// The sink node that wrote the record, for its end-to-end latency
    /// metric; `None` for changelog, dead-letter and late-record outputs.
    pub sink: Option<std::rc::Rc<str>>,
}

/// A punctuation a processor scheduled.
#[derive(Debug, Clone)]
pub(crate) struct ScheduledPunctuation {
    pub node: usize,
    pub id: u64,
    pub schedule: PunctuationSchedule,
    pub cancelled: bool,
}

/// Everything a task's nodes share while a record runs through them: the
/// clocks, the record's origin, the stores, the output buffer.
///
/// One per task, owned by the thread that runs the task and passed down the
/// depth-first forwarding as `&mut`, so nothing here needs a lock.
pub struct TaskContext {
    pub(crate) task_id: TaskId,
    pub(crate) application_id: String,
    pub(crate) stream_time: Timestamp,
    pub(crate) wall_clock: Timestamp,
    pub(crate) metadata: Option<RecordMetadata>,
    pub(crate) output: Vec<ProducedRecord>,
    pub(crate) stores: HashMap<String, BuiltStore>,
    pub(crate) punctuations: Vec<ScheduledPunctuation>,
    pub(crate) next_punctuation_id: u64,
    pub(crate) commit_requested: bool,
    /// Records operators dropped (null keys in aggregations, late records)
    /// since the task last took the count.
    pub(crate) dropped_records: u64,
    /// The node that is running now; kept on unwind, so a caught panic
    /// names the node it came from.
    pub(crate) current_node: Option<std::rc::Rc<str>>,
    /// The production handler says continue: a sink whose record does not
    /// serialize drops that one output and the record's other branches go
    /// on (Kafka Streams' `ProductionExceptionHandler` CONTINUE).
    pub(crate) continue_on_serialization_error: bool,
    /// Serialization errors sinks skipped under that handler, for the task
    /// to log, count and send to the dead-letter queue.
    pub(crate) skipped_errors: Vec<crate::StreamsError>,
    /// Kafka Streams' `ProcessorMetadata`: values operators keep across
    /// restarts by committing them with the task's offsets (emit-final
    /// operators keep their last emitted window close time here, under
    /// their store's name).
    pub(crate) processor_metadata: std::collections::BTreeMap<String, i64>,
    /// The headers of the record the running node processes, shared with
    /// the stores' context: a caching store keeps them with a write.
    pub(crate) record_headers: std::rc::Rc<std::cell::RefCell<kstreams_record::Headers>>,
    /// Records in the task's async nodes and the offsets they hold.
    pub(crate) async_work: crate::async_processing::AsyncWork,
    /// Where sinks with a partitioner learn their topics' partition counts.
    pub(crate) partition_counts: Option<std::rc::Rc<dyn crate::PartitionCounts>>,
}

impl TaskContext {
    pub(crate) fn new(task_id: TaskId, application_id: String, wall_clock: Timestamp) -> Self {
        Self {
            task_id,
            application_id,
            stream_time: -1,
            wall_clock,
            metadata: None,
            output: Vec::new(),
            stores: HashMap::new(),
            punctuations: Vec::new(),
            next_punctuation_id: 0,
            commit_requested: false,
            dropped_records: 0,
            current_node: None,
            continue_on_serialization_error: false,
            skipped_errors: Vec::new(),
            processor_metadata: std::collections::BTreeMap::new(),
            record_headers: Default::default(),
            async_work: Default::default(),
            partition_counts: None,
        }
    }

    /// The time on the clock punctuations of `kind` run on.
    pub(crate) fn clock(&self, kind: kstreams_time::PunctuationType) -> Timestamp {
        match kind {
            kstreams_time::PunctuationType::StreamTime => self.stream_time,
            kstreams_time::PunctuationType::WallClockTime => self.wall_clock,
        }
    }

    /// The next punctuation of `kind` due at the task's stream time or wall
    /// clock, from place `*cursor` of the schedule on, as (node, id, time
    /// it fires at); marks it fired and moves the cursor past it. Called
    /// until `None`, it fires each due punctuation once, in the order they
    /// were scheduled, and those a punctuator schedules meanwhile too.
    pub(crate) fn next_due_punctuation(
        &mut self,
        kind: kstreams_time::PunctuationType,
        cursor: &mut usize,
    ) -> Option<(usize, u64, Timestamp)> {
        let now = self.clock(kind);
        while let Some(p) = self.punctuations.get_mut(*cursor) {
            *cursor += 1;
            if p.cancelled || p.schedule.kind != kind {
                continue;
            }
            if let Some(at) = p.schedule.fire_if_due(now) {
                return Some((p.node, p.id, at));
            }
        }
        None
    }

    /// Makes `headers` the current record's for the stores, returning the
    /// ones they replace (`None` when equal, the common case: nothing to
    /// copy or restore).
    pub(crate) fn enter_record_headers(
        &mut self,
        headers: &kstreams_record::Headers,
    ) -> Option<kstreams_record::Headers> {
        let mut current = self.record_headers.borrow_mut();
        if *current == *headers {
            return None;
        }
        Some(std::mem::replace(&mut *current, headers.clone()))
    }

    /// Puts back what [`TaskContext::enter_record_headers`] replaced.
    pub(crate) fn leave_record_headers(&mut self, previous: Option<kstreams_record::Headers>) {
        if let Some(previous) = previous {
            *self.record_headers.borrow_mut() = previous;
        }
    }

    /// The task's records in async nodes: how many, and the source offsets
    /// the commit may not pass.
    pub fn async_work(&self) -> &crate::async_processing::AsyncWork {
        &self.async_work
    }

    /// Gives the task's async nodes the runtime their calls run on.
    pub fn install_async_runtime(&mut self, runtime: crate::async_processing::AsyncRuntime) {
        self.async_work.runtime = Some(runtime);
    }

    /// The task's processor metadata, to commit with its offsets.
    pub fn processor_metadata(&self) -> &std::collections::BTreeMap<String, i64> {
        &self.processor_metadata
    }

    /// Merges committed processor metadata into the task's: a key's larger
    /// value wins (Kafka's `ProcessorMetadata#update`, as a task merges the
    /// metadata committed with each of its partitions).
    pub fn merge_processor_metadata(&mut self, committed: impl IntoIterator<Item = (String, i64)>) {
        for (key, value) in committed {
            let slot = self.processor_metadata.entry(key).or_insert(value);
            *slot = (*slot).max(value);
        }
    }

    /// Whether a sink's serialization error drops only that output (the
    /// production handler says continue) instead of failing the record.
    pub fn set_continue_on_serialization_error(&mut self, continue_on_error: bool) {
        self.continue_on_serialization_error = continue_on_error;
    }

    /// The serialization errors sinks skipped since the last call.
    pub fn take_skipped_errors(&mut self) -> Vec<crate::StreamsError> {
        std::mem::take(&mut self.skipped_errors)
    }

    /// Tells sinks with a partitioner how many partitions their topics
    /// have (the runtime's metadata).
    pub fn set_partition_counts(&mut self, counts: std::rc::Rc<dyn crate::PartitionCounts>) {
        self.partition_counts = Some(counts);
    }

    pub(crate) fn partition_count(&self, topic: &str) -> Result<i32, String> {
        match &self.partition_counts {
            Some(counts) => counts.partition_count(topic),
            None => Err("the runtime told this task no partition counts".to_string()),
        }
    }

    /// The task this context belongs to.
    pub fn task_id(&self) -> TaskId {
        self.task_id
    }

    /// The largest timestamp the task has processed, -1 before the first.
    pub fn stream_time(&self) -> Timestamp {
        self.stream_time
    }

    /// Sets the origin of the record about to be processed (`None` for a
    /// punctuation).
    pub fn set_record_metadata(&mut self, metadata: Option<RecordMetadata>) {
        self.metadata = metadata;
    }

    /// Moves stream time forward (never back).
    pub fn advance_stream_time(&mut self, timestamp: Timestamp) {
        self.stream_time = self.stream_time.max(timestamp);
    }

    /// Puts stream time back to `timestamp` (only for a record that turned
    /// out never to have entered the task).
    pub fn set_stream_time(&mut self, timestamp: Timestamp) {
        self.stream_time = timestamp;
    }

    /// Sets the wall clock (milliseconds since the epoch).
    pub fn set_wall_clock(&mut self, now: Timestamp) {
        self.wall_clock = now;
    }

    /// The wall clock as the task last saw it.
    pub fn wall_clock(&self) -> Timestamp {
        self.wall_clock
    }

    /// Adds a record to the task's output (a dead-letter record, say).
    pub fn push_output(&mut self, record: ProducedRecord) {
        self.output.push(record);
    }

    /// The records produced and not drained yet, to amend in place (the
    /// runtime sets their trace context).
    pub fn pending_output(&mut self) -> &mut [ProducedRecord] {
        &mut self.output
    }

    /// Takes the records the sinks wrote since the last call.
    pub fn drain_output(&mut self) -> Vec<ProducedRecord> {
        std::mem::take(&mut self.output)
    }

    /// Moves the records the sinks wrote to the end of `out`, keeping this
    /// context's buffer (and its capacity) for the next records: a buffer
    /// grown anew per batch made the allocator consolidate its free lists
    /// once per batch, which slowed every small allocation after. A buffer
    /// a burst made large (a commit's cache flush) is let go instead of
    /// being held for the task's life.
    pub fn drain_output_into(&mut self, out: &mut Vec<ProducedRecord>) {
        out.append(&mut self.output);
        if self.output.capacity() > MAX_KEPT_OUTPUT {
            self.output = Vec::new();
        }
    }

    /// Whether a processor asked for a commit; clears the request.
    pub fn take_commit_request(&mut self) -> bool {
        std::mem::take(&mut self.commit_requested)
    }

    /// Records operators dropped since the last call (null keys in
    /// aggregations, late records for closed windows).
    pub fn take_dropped_records(&mut self) -> u64 {
        std::mem::take(&mut self.dropped_records)
    }

    /// The task's stores, by name.
    pub fn stores(&self) -> &HashMap<String, BuiltStore> {
        &self.stores
    }

    /// The node that was running when processing stopped.
    pub fn current_node(&self) -> Option<&str> {
        self.current_node.as_deref()
    }

    /// Forgets the node and record a caught panic interrupted.
    pub fn reset_after_panic(&mut self) {
        self.current_node = None;
        self.metadata = None;
    }

    /// The origin of the record being processed.
    pub fn record_metadata(&self) -> Option<&RecordMetadata> {
        self.metadata.as_ref()
    }

    pub(crate) fn position(&self) -> Option<crate::RecordPosition> {
        self.metadata.as_ref().map(|m| crate::RecordPosition {
            topic: m.topic.to_string(),
            partition: m.partition,
            offset: m.offset,
        })
    }
}
