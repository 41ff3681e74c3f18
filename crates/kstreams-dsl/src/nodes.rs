//! Per-task node instances and the typed edges between them.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Arc;

use kstreams_record::{Record, RecordMetadata, SharedSerde, Timestamp};
use kstreams_time::TimestampExtractor;

use crate::forwarding::{Input, NodeInfo, Outputs};
use crate::partitioner::{checked_partitions, SharedPartitioner, StreamPartitioner};
use crate::processor::{Processor, ProcessorContext, PunctuationId};
use crate::task_context::{ConsumedRecord, ProducedRecord, TaskContext};
use crate::{ProcessorError, RecordPosition, StreamsError};

/// A node's lifecycle, without its types, for the task that owns it.
pub(crate) trait NodeHandle {
    fn init(&self, task: &mut TaskContext) -> Result<(), StreamsError>;
    fn punctuate(
        &self,
        id: u64,
        timestamp: Timestamp,
        task: &mut TaskContext,
    ) -> Result<(), StreamsError>;
    fn flush(&self, task: &mut TaskContext) -> Result<(), StreamsError>;
    fn close(&self);
    /// Whether the node runs async calls (see [`crate::async_processing`]).
    fn is_async(&self) -> bool {
        false
    }
    /// Applies one finished async call (forwards its result); `false` when
    /// none is ready to go out.
    fn apply_async_completion(
        &self,
        task: &mut TaskContext,
        stores: &kstreams_state::StoreContext,
    ) -> Result<bool, StreamsError> {
        let _ = (task, stores);
        Ok(false)
    }
}

/// A source node without its types: takes consumed bytes.
pub(crate) trait SourceHandle {
    fn process(
        &self,
        record: ConsumedRecord,
        timestamp: Timestamp,
        task: &mut TaskContext,
    ) -> Result<(), StreamsError>;
    fn timestamp_extractor(&self) -> Option<&dyn TimestampExtractor>;
    /// The source node's name.
    fn name(&self) -> &str;
}

/// Turns what a processor returned into a `StreamsError` naming the node,
/// unless it already is one (an error from further down, passed up by `?`).
fn attribute(error: ProcessorError, node: &str, task: &TaskContext) -> StreamsError {
    match error.downcast::<StreamsError>() {
        Ok(streams_error) => *streams_error,
        Err(source) => StreamsError::Processing {
            node: node.to_string(),
            position: task.position(),
            source,
        },
    }
}

/// A processor node: a user `Processor` (or a DSL operator) and its children.
pub(crate) struct ProcessorNode<P, KIn, VIn, KOut, VOut> {
    info: NodeInfo,
    processor: RefCell<P>,
    outputs: Outputs<KOut, VOut>,
    input_types: PhantomData<fn(KIn, VIn)>,
}

impl<P, KIn, VIn, KOut, VOut> ProcessorNode<P, KIn, VIn, KOut, VOut> {
    pub(crate) fn new(info: NodeInfo, processor: P, outputs: Outputs<KOut, VOut>) -> Self {
        Self {
            info,
            processor: RefCell::new(processor),
            outputs,
            input_types: PhantomData,
        }
    }

    /// Runs `f` as this node: marks the node current (left set on unwind so
    /// a caught panic names it) and attributes a returned error to it.
    fn run_as_node(
        &self,
        task: &mut TaskContext,
        f: impl FnOnce(&mut P, &mut ProcessorContext<'_, KOut, VOut>) -> Result<(), ProcessorError>,
    ) -> Result<(), StreamsError> {
        let previous = task.current_node.replace(self.info.name.clone());
        let result = {
            let mut processor = self.processor.try_borrow_mut().map_err(|_| {
                StreamsError::Internal(format!("processor {:?} re-entered", self.info.name))
            })?;
            let mut ctx = ProcessorContext {
                task: &mut *task,
                outputs: &self.outputs,
                node: &self.info,
            };
            f(&mut processor, &mut ctx)
        };
        task.current_node = previous;
        result.map_err(|e| attribute(e, &self.info.name, task))
    }
}

impl<P, KIn, VIn, KOut, VOut> Input<KIn, VIn> for ProcessorNode<P, KIn, VIn, KOut, VOut>
where
    P: Processor<KIn, VIn, KOut, VOut>,
    KOut: Clone + 'static,
    VOut: Clone + 'static,
{
    fn push(&self, record: Record<KIn, VIn>, task: &mut TaskContext) -> Result<(), StreamsError> {
        // The node's store writes carry this record's headers (a cache
        // flush forwards them), as Kafka Streams' forward sets the record
        // context for the child.
        let previous = task.enter_record_headers(&record.headers);
        let result = self.run_as_node(task, |p, ctx| p.process(ctx, record));
        task.leave_record_headers(previous);
        result
    }
}

impl<P, KIn, VIn, KOut, VOut> NodeHandle for ProcessorNode<P, KIn, VIn, KOut, VOut>
where
    P: Processor<KIn, VIn, KOut, VOut>,
    KOut: Clone + 'static,
    VOut: Clone + 'static,
{
    fn init(&self, task: &mut TaskContext) -> Result<(), StreamsError> {
        self.run_as_node(task, |p, ctx| p.init(ctx))
    }

    fn punctuate(
        &self,
        id: u64,
        timestamp: Timestamp,
        task: &mut TaskContext,
    ) -> Result<(), StreamsError> {
        self.run_as_node(task, |p, ctx| {
            p.punctuate(ctx, PunctuationId(id), timestamp)
        })
    }

    fn flush(&self, task: &mut TaskContext) -> Result<(), StreamsError> {
        let previous = task.metadata.take();
        let result = self.run_as_node(task, |p, ctx| p.flush(ctx));
        task.metadata = previous;
        result
    }

    fn close(&self) {
        if let Ok(mut p) = self.processor.try_borrow_mut() {
            p.close();
        }
    }
}

/// A source node: deserializes once, then forwards typed records.
pub(crate) struct SourceNode<K, V> {
    pub(crate) info: NodeInfo,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) extractor: Option<Arc<dyn TimestampExtractor>>,
    pub(crate) outputs: Outputs<K, V>,
}

impl<K: Clone + 'static, V: Clone + 'static> SourceHandle for SourceNode<K, V> {
    fn process(
        &self,
        record: ConsumedRecord,
        timestamp: Timestamp,
        task: &mut TaskContext,
    ) -> Result<(), StreamsError> {
        let ConsumedRecord {
            topic,
            partition,
            offset,
            key,
            value,
            headers,
            ..
        } = record;
        // The origin is known before the bytes are read, so errors and
        // panics from here on name the record.
        let metadata = task.metadata.insert(RecordMetadata {
            topic,
            partition,
            offset,
        });
        let topic = &*metadata.topic;
        let deserialization_error = |part, source| StreamsError::Deserialization {
            node: self.info.name.to_string(),
            part,
            position: RecordPosition {
                topic: topic.to_string(),
                partition,
                offset,
            },
            source: Box::new(source),
        };
        let key = self
            .key_serde
            .deserialize_owned(topic, &headers, key)
            .map_err(|e| deserialization_error("key", e))?;
        let value = self
            .value_serde
            .deserialize_owned(topic, &headers, value)
            .map_err(|e| deserialization_error("value", e))?;
        let typed = Record {
            key,
            value,
            timestamp,
            headers,
        };
        let previous = task.current_node.replace(self.info.name.clone());
        let result = self.outputs.forward(typed, task);
        task.current_node = previous;
        result
    }

    fn name(&self) -> &str {
        &self.info.name
    }

    fn timestamp_extractor(&self) -> Option<&dyn TimestampExtractor> {
        self.extractor.as_deref()
    }
}

/// What a sink topic extractor sees of the record's origin.
#[derive(Debug, Clone, Copy)]
pub struct RecordContext<'a> {
    /// Where the record being processed came from (`None` in a punctuation).
    pub metadata: Option<&'a RecordMetadata>,
    /// The output record's timestamp.
    pub timestamp: Timestamp,
    /// The output record's headers.
    pub headers: &'a kstreams_record::Headers,
}

/// Chooses a sink's topic per record: Kafka Streams' `TopicNameExtractor`.
///
/// Any `Fn(&K, &V, &RecordContext) -> String` is one; implement the trait
/// on a type of your own to give it the name `describe()` prints.
pub trait TopicNameExtractor<K, V>: Send + Sync + 'static {
    /// The topic for this record.
    fn extract(&self, key: &K, value: &V, context: &RecordContext<'_>) -> String;

    /// What `describe()` prints after `extractor class:`.
    fn description(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }
}

impl<K, V, F> TopicNameExtractor<K, V> for F
where
    F: Fn(&K, &V, &RecordContext<'_>) -> String + Send + Sync + 'static,
{
    fn extract(&self, key: &K, value: &V, context: &RecordContext<'_>) -> String {
        self(key, value, context)
    }
}

pub(crate) type SharedExtractor<K, V> = Arc<dyn TopicNameExtractor<K, V>>;

/// Where a sink writes.
pub(crate) enum SinkTarget<K, V> {
    /// A fixed topic, already resolved (application id prefix included),
    /// shared by every record the sink writes.
    Topic(Arc<str>),
    /// A topic chosen per record.
    Extractor(SharedExtractor<K, V>),
}

/// How a sink chooses the partitions of its records.
pub(crate) enum SinkPartitioning<K, V> {
    /// The whole key, by the producer's default partitioner: Processor API
    /// sinks and repartition topics.
    WholeKey,
    /// A windowed key's plain key (other keys whole), so that all windows
    /// of a key land in one partition: Kafka Streams' `KStream#to` with a
    /// windowed key serde (`WindowedStreamPartitioner`).
    BaseKeyOfWindows,
    /// The application's partitioner, over the typed record.
    Custom(SharedPartitioner<K, V>),
    /// The application's partitioner, held to one partition per record: a
    /// foreign-key join's subscriptions and answers (the join's state for
    /// a key lives in one place).
    Single(SharedPartitioner<K, V>),
}

impl<K, V> Clone for SinkPartitioning<K, V> {
    fn clone(&self) -> Self {
        match self {
            Self::WholeKey => Self::WholeKey,
            Self::BaseKeyOfWindows => Self::BaseKeyOfWindows,
            Self::Custom(partitioner) => Self::Custom(Arc::clone(partitioner)),
            Self::Single(partitioner) => Self::Single(Arc::clone(partitioner)),
        }
    }
}

/// A sink node: serializes once and hands the bytes to the task's output.
pub(crate) struct SinkNode<K, V> {
    pub(crate) info: NodeInfo,
    pub(crate) target: SinkTarget<K, V>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) partitioning: SinkPartitioning<K, V>,
}

impl<K: 'static, V: 'static> Input<K, V> for SinkNode<K, V> {
    fn push(&self, record: Record<K, V>, task: &mut TaskContext) -> Result<(), StreamsError> {
        let topic = match &self.target {
            SinkTarget::Topic(t) => t.clone(),
            SinkTarget::Extractor(extract) => {
                let ctx = RecordContext {
                    metadata: task.metadata.as_ref(),
                    timestamp: record.timestamp,
                    headers: &record.headers,
                };
                // A panicking extractor leaves the sink marked as current.
                let previous = task.current_node.replace(self.info.name.clone());
                let topic = extract.extract(&record.key, &record.value, &ctx);
                task.current_node = previous;
                Arc::from(topic)
            }
        };
        let chosen = match &self.partitioning {
            SinkPartitioning::Custom(partitioner) | SinkPartitioning::Single(partitioner) => {
                let exactly_one = matches!(self.partitioning, SinkPartitioning::Single(_));
                match self.choose_partitions(
                    partitioner.as_ref(),
                    &topic,
                    &record,
                    exactly_one,
                    task,
                )? {
                    Some(partitions) if partitions.is_empty() => {
                        log::warn!(
                            "sink {}: dropping a record for topic {topic}: its partitioner \
                             chose no partition",
                            self.info.name
                        );
                        task.dropped_records += 1;
                        return Ok(());
                    }
                    chosen => chosen,
                }
            }
            _ => None,
        };
        let mut headers = record.headers;
        let serialization_error = |part, source| StreamsError::Serialization {
            node: self.info.name.to_string(),
            part,
            topic: topic.to_string(),
            source: Box::new(source),
        };
        let serialized = self
            .key_serde
            .serialize_owned(&topic, &mut headers, record.key)
            .map_err(|e| serialization_error("key", e))
            .and_then(|key| {
                self.value_serde
                    .serialize_owned(&topic, &mut headers, record.value)
                    .map_err(|e| serialization_error("value", e))
                    .map(|value| (key, value))
            });
        let (key, value) = match serialized {
            Ok(bytes) => bytes,
            Err(error) if task.continue_on_serialization_error => {
                task.skipped_errors.push(error);
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let partition_key_len = match (&self.partitioning, &key) {
            (SinkPartitioning::BaseKeyOfWindows, Some(key)) => self.key_serde.base_key_len(key),
            _ => None,
        };
        let record = ProducedRecord {
            topic,
            partition: None,
            partition_key_len,
            key,
            value,
            timestamp: record.timestamp,
            headers,
            sink: Some(self.info.name.clone()),
        };
        match chosen {
            None => task.output.push(record),
            Some(partitions) => {
                // A copy per partition (KIP-837): the bytes are cloned for
                // all but the last.
                let last = partitions.len() - 1;
                for &partition in &partitions[..last] {
                    task.output.push(ProducedRecord {
                        partition: Some(partition),
                        ..record.clone()
                    });
                }
                task.output.push(ProducedRecord {
                    partition: Some(partitions[last]),
                    ..record
                });
            }
        }
        Ok(())
    }
}

impl<K: 'static, V: 'static> SinkNode<K, V> {
    /// The partitions the application's partitioner chose for `record`:
    /// `None` for the default, else a non-empty, sorted list without
    /// duplicates. `Ok(Some(empty))` never comes back: the caller drops
    /// such a record.
    fn choose_partitions(
        &self,
        partitioner: &dyn StreamPartitioner<K, V>,
        topic: &str,
        record: &Record<K, V>,
        exactly_one: bool,
        task: &mut TaskContext,
    ) -> Result<Option<Vec<i32>>, StreamsError> {
        let failed = |message: String| StreamsError::Partitioning {
            node: self.info.name.to_string(),
            topic: topic.to_string(),
            message,
        };
        let count = task.partition_count(topic).map_err(failed)?;
        let previous = task.current_node.replace(self.info.name.clone());
        let chosen =
            partitioner.partitions(topic, &record.key, &record.value, &record.headers, count);
        task.current_node = previous;
        let Some(partitions) = chosen else {
            return Ok(None);
        };
        checked_partitions(partitions, count, exactly_one)
            .map(Some)
            .map_err(failed)
    }
}
