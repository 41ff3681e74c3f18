//! The Processor API: user processors and the context they run in.

use std::time::Duration;

use kstreams_record::{Record, RecordMetadata, Timestamp};
use kstreams_time::{PunctuationSchedule, PunctuationType};

use crate::forwarding::Outputs;
use crate::task_context::{ScheduledPunctuation, TaskContext};
use crate::{ProcessorError, StreamsError, TaskId};

/// A processor node's logic: Kafka Streams' `api.Processor`.
///
/// One instance exists per task, created by the supplier given to the
/// topology; it is used from one thread only, so it may hold `Rc`s and
/// store handles. Records arrive in `process`; new records leave through
/// [`ProcessorContext::forward`].
///
/// ```
/// use kstreams_dsl::{Processor, ProcessorContext, ProcessorError};
/// use kstreams_record::Record;
///
/// /// Forwards each value with its length.
/// struct WithLength;
///
/// impl Processor<String, String, String, usize> for WithLength {
///     fn process(
///         &mut self,
///         ctx: &mut ProcessorContext<'_, String, usize>,
///         record: Record<String, String>,
///     ) -> Result<(), ProcessorError> {
///         let len = record.value.len();
///         ctx.forward(record.with_value(len))?;
///         Ok(())
///     }
/// }
/// ```
pub trait Processor<KIn, VIn, KOut, VOut>: 'static {
    /// Called once before the first record: fetch stores, schedule
    /// punctuations.
    fn init(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> Result<(), ProcessorError> {
        let _ = ctx;
        Ok(())
    }

    /// Processes one record.
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        record: Record<KIn, VIn>,
    ) -> Result<(), ProcessorError>;

    /// Called when a punctuation scheduled by this processor fires, with
    /// the stream or wall-clock time it fired at.
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, KOut, VOut>,
        punctuation: PunctuationId,
        timestamp: Timestamp,
    ) -> Result<(), ProcessorError> {
        let _ = (ctx, punctuation, timestamp);
        Ok(())
    }

    /// Called at each commit, before the task's stores are flushed, on
    /// every processor in the order they were added (parents before
    /// children). A processor that holds results back, such as the DSL's
    /// aggregations behind a caching store, writes them down and forwards
    /// them here.
    fn flush(&mut self, ctx: &mut ProcessorContext<'_, KOut, VOut>) -> Result<(), ProcessorError> {
        let _ = ctx;
        Ok(())
    }

    /// Called when the task closes.
    fn close(&mut self) {}
}

/// Identifies a scheduled punctuation; pass it to
/// [`ProcessorContext::cancel`] to stop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PunctuationId(pub(crate) u64);

/// What a processor can do besides returning: forward records, read where
/// the current record came from, schedule punctuations, use stores and ask
/// for a commit. Kafka Streams' `api.ProcessorContext`.
pub struct ProcessorContext<'a, K, V> {
    pub(crate) task: &'a mut TaskContext,
    pub(crate) outputs: &'a Outputs<K, V>,
    pub(crate) node: &'a crate::forwarding::NodeInfo,
}

impl<K: Clone + 'static, V: Clone + 'static> ProcessorContext<'_, K, V> {
    /// Sends a record to every child, depth-first: when this returns, the
    /// children have processed it.
    pub fn forward(&mut self, record: Record<K, V>) -> Result<(), StreamsError> {
        self.outputs.forward(record, self.task)
    }

    /// Sends a record to one child, by name.
    pub fn forward_to(&mut self, child: &str, record: Record<K, V>) -> Result<(), StreamsError> {
        self.outputs
            .forward_to(child, record, self.task, &self.node.name)
    }
}

impl<K, V> ProcessorContext<'_, K, V> {
    /// The name of this processor node.
    pub fn node_name(&self) -> &str {
        &self.node.name
    }

    /// The application id.
    pub fn application_id(&self) -> &str {
        &self.task.application_id
    }

    /// The task this processor instance belongs to.
    pub fn task_id(&self) -> TaskId {
        self.task.task_id
    }

    /// Topic, partition and offset of the record being processed; `None`
    /// inside a punctuation.
    pub fn record_metadata(&self) -> Option<&RecordMetadata> {
        self.task.metadata.as_ref()
    }

    /// The task's stream time: the largest record timestamp it has
    /// processed (-1 before the first record).
    pub fn current_stream_time(&self) -> Timestamp {
        self.task.stream_time
    }

    /// The wall clock, in milliseconds since the epoch, as the task sees it
    /// (the driver's mocked clock in tests).
    pub fn current_system_time_ms(&self) -> Timestamp {
        self.task.wall_clock
    }

    /// Schedules [`Processor::punctuate`] every `interval` of stream time or
    /// of wall-clock time.
    pub fn schedule(&mut self, interval: Duration, kind: PunctuationType) -> PunctuationId {
        let now = self.task.clock(kind);
        self.add_punctuation(PunctuationSchedule::new(kind, interval, now))
    }

    /// Schedules [`Processor::punctuate`] at `start` (milliseconds since the
    /// epoch, on the clock `kind` names) and every `interval` after it:
    /// Kafka Streams' `schedule(Instant, Duration, type, punctuator)`
    /// (KIP-1146), to punctuate on the hour, say, whenever the task
    /// started. A `start` already passed fires first at the next of those
    /// times, not at once.
    pub fn schedule_anchored(
        &mut self,
        start: Timestamp,
        interval: Duration,
        kind: PunctuationType,
    ) -> PunctuationId {
        let now = self.task.clock(kind);
        self.add_punctuation(PunctuationSchedule::anchored(kind, start, interval, now))
    }

    fn add_punctuation(&mut self, schedule: PunctuationSchedule) -> PunctuationId {
        let id = self.task.next_punctuation_id;
        self.task.next_punctuation_id += 1;
        self.task.punctuations.push(ScheduledPunctuation {
            node: self.node.index,
            id,
            schedule,
            cancelled: false,
        });
        PunctuationId(id)
    }

    /// Stops a scheduled punctuation.
    pub fn cancel(&mut self, punctuation: PunctuationId) {
        for p in &mut self.task.punctuations {
            if p.id == punctuation.0 {
                p.cancelled = true;
            }
        }
    }

    /// A handle on a state store connected to this processor, by name and
    /// handle type, for example
    /// `ctx.get_state_store::<KeyValueStoreHandle<String, i64>>("counts")`.
    pub fn get_state_store<H: Clone + 'static>(&self, name: &str) -> Result<H, StreamsError> {
        if !self.node.stores.iter().any(|s| s == name) {
            return Err(StreamsError::StoreNotConnected {
                node: self.node.name.to_string(),
                store: name.to_string(),
            });
        }
        let built = self.task.stores.get(name).ok_or_else(|| {
            StreamsError::Internal(format!("store {name:?} is connected but was not built"))
        })?;
        Ok(built.handle::<H>()?)
    }

    /// Sends bytes straight to a topic, beside the typed children: the
    /// DSL's side outputs (late records) use it.
    pub(crate) fn send_raw(&mut self, record: crate::task_context::ProducedRecord) {
        self.task.output.push(record);
    }

    /// Counts a record the operator dropped (the task's dropped-records
    /// metric, as Kafka Streams' `dropped-records`).
    pub(crate) fn record_dropped(&mut self) {
        self.task.dropped_records += 1;
    }

    /// KIP-825: the last window close time the emit-final operator of
    /// `store` emitted, as committed with the task's offsets; a restarted
    /// task goes on from there instead of emitting closed windows again.
    pub(crate) fn last_emitted_close(&self, store: &str) -> Option<Timestamp> {
        self.task.processor_metadata.get(store).copied()
    }

    /// Records the emit-final operator's last emitted close time, for the
    /// next commit.
    pub(crate) fn set_last_emitted_close(&mut self, store: &str, close: Timestamp) {
        match self.task.processor_metadata.get_mut(store) {
            Some(slot) => *slot = close,
            None => {
                self.task
                    .processor_metadata
                    .insert(store.to_string(), close);
            }
        }
    }

    /// The task's stores, for value getters of other operators' tables.
    pub(crate) fn store_lookup(&self) -> StoreLookup<'_> {
        StoreLookup {
            stores: &self.task.stores,
        }
    }

    /// Asks for a commit as soon as possible.
    pub fn commit(&mut self) {
        self.task.commit_requested = true;
    }
}

/// The task's stores by name, for value getters (which read the stores of
/// another operator's table: a join reads its table side this way).
pub(crate) struct StoreLookup<'a> {
    pub(crate) stores: &'a std::collections::HashMap<String, kstreams_state::BuiltStore>,
}

impl StoreLookup<'_> {
    pub(crate) fn handle<H: Clone + 'static>(&self, name: &str) -> Result<H, ProcessorError> {
        let built = self
            .stores
            .get(name)
            .ok_or_else(|| StreamsError::Internal(format!("store {name:?} is not in this task")))?;
        Ok(built.handle::<H>()?)
    }
}
