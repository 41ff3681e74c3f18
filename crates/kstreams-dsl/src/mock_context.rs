//! `MockProcessorContext`: unit-test a processor, and its punctuations,
//! without a topology or a driver (Kafka Streams' `api.MockProcessorContext`
//! of its test-utils).
//!
//! The mock stands in for the task a processor would run in: what the
//! processor forwards, schedules and asks to commit is captured for the test
//! to read, and the test sets the clocks, the current record's metadata and
//! the stores. It is the processor's only node, so `forward_to` takes any
//! child name and captures it with the record.

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kstreams_record::{Record, RecordMetadata, Timestamp};
use kstreams_state::{StoreBuilder, StoreContext};
use kstreams_time::PunctuationType;

use crate::forwarding::{Captured, CapturedForward, NodeInfo, Outputs};
use crate::task_context::TaskContext;
use crate::{Processor, ProcessorContext, ProcessorError, PunctuationId, StreamsError, TaskId};

/// The application id a mock context reports unless told otherwise (Kafka
/// Streams' mock uses the same).
pub const MOCK_APPLICATION_ID: &str = "dummy-application-id";

/// The node name a mock context reports unless told otherwise.
pub const MOCK_NODE_NAME: &str = "mock-processor";

/// A punctuation the processor scheduled, as
/// [`ProcessorContext::schedule`] was called; a cancelled one stays listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedPunctuator {
    /// What [`ProcessorContext::schedule`] returned.
    pub id: PunctuationId,
    /// The interval it asked for.
    pub interval: Duration,
    /// The clock it runs on.
    pub kind: PunctuationType,
    /// Whether [`ProcessorContext::cancel`] stopped it.
    pub cancelled: bool,
}

/// A processor's context for a unit test: Kafka Streams'
/// `MockProcessorContext`.
///
/// ```
/// use std::time::Duration;
/// use kstreams_dsl::{MockProcessorContext, Processor, ProcessorContext, ProcessorError, PunctuationId};
/// use kstreams_record::{Record, Timestamp};
/// use kstreams_time::PunctuationType;
///
/// /// Forwards each value doubled, and a heartbeat every second of wall time.
/// struct Doubler;
///
/// impl Processor<String, i64, String, i64> for Doubler {
///     fn init(&mut self, ctx: &mut ProcessorContext<'_, String, i64>) -> Result<(), ProcessorError> {
///         ctx.schedule(Duration::from_secs(1), PunctuationType::WallClockTime);
///         Ok(())
///     }
///     fn process(
///         &mut self,
///         ctx: &mut ProcessorContext<'_, String, i64>,
///         record: Record<String, i64>,
///     ) -> Result<(), ProcessorError> {
///         let doubled = record.value * 2;
///         ctx.forward(record.with_value(doubled))?;
///         Ok(())
///     }
///     fn punctuate(
///         &mut self,
///         ctx: &mut ProcessorContext<'_, String, i64>,
///         _: PunctuationId,
///         at: Timestamp,
///     ) -> Result<(), ProcessorError> {
///         ctx.forward_to("heartbeats", Record::new("beat".to_string(), 0, at))?;
///         Ok(())
///     }
/// }
///
/// let mut mock = MockProcessorContext::<String, i64>::new();
/// mock.set_current_system_time_ms(0);
/// let mut doubler = Doubler;
/// mock.init(&mut doubler).unwrap();
/// assert_eq!(mock.scheduled_punctuators()[0].interval, Duration::from_secs(1));
///
/// mock.process(&mut doubler, Record::new("k".to_string(), 21, 5)).unwrap();
/// assert_eq!(mock.forwarded()[0].record.value, 42);
/// assert_eq!(mock.forwarded()[0].child, None);
///
/// mock.reset_forwards();
/// mock.set_current_system_time_ms(1_000);
/// assert_eq!(mock.punctuate_due(&mut doubler, PunctuationType::WallClockTime).unwrap(), 1);
/// assert_eq!(mock.forwarded()[0].child.as_deref(), Some("heartbeats"));
/// ```
pub struct MockProcessorContext<K, V> {
    task: TaskContext,
    node: NodeInfo,
    outputs: Outputs<K, V>,
    captured: Captured<K, V>,
    store_context: StoreContext,
    /// The task directory of persistent stores, made with the first store
    /// and removed with the mock.
    state_dir: Option<PathBuf>,
}

impl<K: Clone + 'static, V: Clone + 'static> Default for MockProcessorContext<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + 'static, V: Clone + 'static> MockProcessorContext<K, V> {
    /// A context of task `0_0` of application [`MOCK_APPLICATION_ID`], node
    /// [`MOCK_NODE_NAME`], stream time -1 and wall clock 0.
    pub fn new() -> Self {
        Self::for_task(
            MOCK_APPLICATION_ID,
            TaskId {
                subtopology: 0,
                partition: 0,
            },
        )
    }

    /// A context of `task` of `application_id`.
    pub fn for_task(application_id: &str, task: TaskId) -> Self {
        let store_context = StoreContext::new(application_id, &task.to_string(), task.partition);
        let mut context = TaskContext::new(task, application_id.to_string(), 0);
        context.record_headers = store_context.headers_cell().clone();
        let captured: Captured<K, V> = Rc::default();
        Self {
            task: context,
            node: NodeInfo {
                name: Rc::from(MOCK_NODE_NAME),
                index: 0,
                stores: Vec::new(),
            },
            outputs: Outputs::capturing(captured.clone()),
            captured,
            store_context,
            state_dir: None,
        }
    }

    /// Names the processor's node (what `ProcessorContext::node_name` says).
    pub fn with_node_name(mut self, name: &str) -> Self {
        self.node.name = Rc::from(name);
        self
    }

    /// The context to hand the processor: each call of `init`, `process`,
    /// `punctuate` or `flush` takes one.
    pub fn context(&mut self) -> ProcessorContext<'_, K, V> {
        ProcessorContext {
            task: &mut self.task,
            outputs: &self.outputs,
            node: &self.node,
        }
    }

    /// Calls the processor's `init`.
    pub fn init<KIn, VIn>(
        &mut self,
        processor: &mut impl Processor<KIn, VIn, K, V>,
    ) -> Result<(), ProcessorError> {
        processor.init(&mut self.context())
    }

    /// Calls the processor's `process` with `record`, as a task would: the
    /// stores see its timestamp and headers for their writes. The record's
    /// metadata and the clocks are the test's to set.
    pub fn process<KIn, VIn>(
        &mut self,
        processor: &mut impl Processor<KIn, VIn, K, V>,
        record: Record<KIn, VIn>,
    ) -> Result<(), ProcessorError> {
        self.store_context.set_record_timestamp(record.timestamp);
        self.store_context.set_record_headers(&record.headers);
        processor.process(&mut self.context(), record)
    }

    /// Calls the processor's `punctuate` for `punctuation` at `timestamp`,
    /// as a task would: no record metadata, and the stores see `timestamp`
    /// and no headers.
    pub fn punctuate<KIn, VIn>(
        &mut self,
        processor: &mut impl Processor<KIn, VIn, K, V>,
        punctuation: PunctuationId,
        timestamp: Timestamp,
    ) -> Result<(), ProcessorError> {
        let metadata = self.task.metadata.take();
        self.store_context.set_record_timestamp(timestamp);
        self.store_context
            .set_record_headers(&kstreams_record::Headers::new());
        let result = processor.punctuate(&mut self.context(), punctuation, timestamp);
        self.task.metadata = metadata;
        result
    }

    /// Fires, in the order they were scheduled, the punctuations of `kind`
    /// that are due at the mock's stream time or wall clock, as a task
    /// does after a record or a wall-clock tick (a stream-time punctuation
    /// fires first on the first record; a wall-clock one one interval after
    /// it was scheduled). Returns how many fired.
    pub fn punctuate_due<KIn, VIn>(
        &mut self,
        processor: &mut impl Processor<KIn, VIn, K, V>,
        kind: PunctuationType,
    ) -> Result<usize, ProcessorError> {
        let mut fired = 0;
        let mut cursor = 0;
        while let Some((_, id, at)) = self.task.next_due_punctuation(kind, &mut cursor) {
            self.punctuate(processor, PunctuationId(id), at)?;
            fired += 1;
        }
        Ok(fired)
    }

    /// Calls the processor's `flush`, as a commit would.
    pub fn flush<KIn, VIn>(
        &mut self,
        processor: &mut impl Processor<KIn, VIn, K, V>,
    ) -> Result<(), ProcessorError> {
        processor.flush(&mut self.context())
    }

    /// What the processor forwarded since the mock was made or
    /// [`MockProcessorContext::reset_forwards`], in order.
    pub fn forwarded(&self) -> Vec<CapturedForward<K, V>> {
        self.captured.borrow().clone()
    }

    /// What child `name` would have received: the records forwarded to it
    /// by name and those forwarded to every child (Kafka Streams'
    /// `forwarded(childName)`).
    pub fn forwarded_to(&self, name: &str) -> Vec<CapturedForward<K, V>> {
        self.captured
            .borrow()
            .iter()
            .filter(|f| f.child.as_deref().is_none_or(|child| child == name))
            .cloned()
            .collect()
    }

    /// Takes what the processor forwarded, leaving nothing captured.
    pub fn take_forwarded(&mut self) -> Vec<CapturedForward<K, V>> {
        std::mem::take(&mut *self.captured.borrow_mut())
    }

    /// Forgets what the processor forwarded.
    pub fn reset_forwards(&mut self) {
        self.captured.borrow_mut().clear();
    }

    /// The punctuations the processor scheduled, cancelled ones too, in
    /// the order it scheduled them.
    pub fn scheduled_punctuators(&self) -> Vec<CapturedPunctuator> {
        self.task
            .punctuations
            .iter()
            .map(|p| CapturedPunctuator {
                id: PunctuationId(p.id),
                interval: Duration::from_millis(p.schedule.interval_ms as u64),
                kind: p.schedule.kind,
                cancelled: p.cancelled,
            })
            .collect()
    }

    /// Whether the processor asked for a commit since the mock was made or
    /// [`MockProcessorContext::reset_commit`].
    pub fn committed(&self) -> bool {
        self.task.commit_requested
    }

    /// Forgets a commit request.
    pub fn reset_commit(&mut self) {
        self.task.commit_requested = false;
    }

    /// Sets where the current record came from (what
    /// `ProcessorContext::record_metadata` says).
    pub fn set_record_metadata(&mut self, topic: &str, partition: i32, offset: i64) {
        self.task.metadata = Some(RecordMetadata {
            topic: topic.into(),
            partition,
            offset,
        });
    }

    /// Clears the current record's metadata (as inside a punctuation).
    pub fn clear_record_metadata(&mut self) {
        self.task.metadata = None;
    }

    /// Sets the task's stream time.
    pub fn set_current_stream_time_ms(&mut self, timestamp: Timestamp) {
        self.task.stream_time = timestamp;
    }

    /// Sets the wall clock (milliseconds since the epoch).
    pub fn set_current_system_time_ms(&mut self, timestamp: Timestamp) {
        self.task.wall_clock = timestamp;
    }

    /// Builds a store, opens it and connects it to the processor, which
    /// then gets it with `ProcessorContext::get_state_store`. Persistent
    /// stores open in a task directory of the mock's own, removed with it.
    /// A store with logging enabled writes no changelog here; its cache,
    /// if it has one, is written down by [`MockProcessorContext::flush_stores`].
    pub fn add_state_store(&mut self, builder: impl StoreBuilder) -> Result<(), StreamsError> {
        let name = builder.name().to_string();
        if self.task.stores.contains_key(&name) {
            return Err(crate::TopologyError::DuplicateStore(name).into());
        }
        if self.state_dir.is_none() {
            static MOCKS: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "kstreams-mock-context-{}-{}",
                std::process::id(),
                MOCKS.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).map_err(|source| kstreams_state::Error::Io {
                action: "creating the mock context's task directory",
                path: dir.clone(),
                source,
            })?;
            self.store_context = self.store_context.clone().with_task_directory(&dir);
            self.state_dir = Some(dir);
        }
        let built = builder.build();
        built.init(&self.store_context)?;
        self.node.stores.push(name.clone());
        self.task.stores.insert(name, built);
        Ok(())
    }

    /// Flushes every store (a caching store writes its cache down).
    pub fn flush_stores(&mut self) -> Result<(), StreamsError> {
        for store in self.task.stores.values() {
            store.lifecycle.borrow_mut().flush()?;
        }
        Ok(())
    }
}

impl<K, V> Drop for MockProcessorContext<K, V> {
    fn drop(&mut self) {
        for store in self.task.stores.values() {
            if let Ok(mut store) = store.lifecycle.try_borrow_mut() {
                let _ = store.close();
            }
        }
        self.task.stores.clear();
        if let Some(dir) = &self.state_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
