use std::fmt;

/// The error a user processor returns: any error type, boxed.
///
/// Errors that come back from [`crate::ProcessorContext::forward`] are
/// [`StreamsError`]s; returned with `?` they pass through unchanged, so the
/// node that failed is still the one named.
pub type ProcessorError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A topology that cannot be built, with what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// Two nodes with one name.
    #[error("a node named {0:?} already exists in the topology; give each operator a unique name")]
    DuplicateName(String),
    /// A parent that was not added first.
    #[error(
        "node {node:?} names parent {parent:?}, which is not in the topology; add the parent first"
    )]
    UnknownParent {
        /// The node being added.
        node: String,
        /// The missing parent.
        parent: String,
    },
    /// A sink cannot have children.
    #[error("node {node:?} names sink {parent:?} as its parent; a sink has no children")]
    SinkAsParent {
        /// The node being added.
        node: String,
        /// The sink.
        parent: String,
    },
    /// A processor or sink without a parent.
    #[error("node {0:?} needs at least one parent")]
    NoParent(String),
    /// Typed edges that do not fit.
    #[error(
        "node {node:?} takes records of type {expected}, but its parent {parent:?} forwards {actual}"
    )]
    TypeMismatch {
        /// The node being added.
        node: String,
        /// The parent.
        parent: String,
        /// What the node takes.
        expected: &'static str,
        /// What the parent forwards.
        actual: &'static str,
    },
    /// One topic read by two sources.
    #[error("topic {topic:?} is already read by source {source_node:?}; a topic may feed only one source")]
    TopicAlreadyRead {
        /// The topic.
        topic: String,
        /// The source that reads it.
        source_node: String,
    },
    /// A source with no topic.
    #[error("source {0:?} needs at least one topic")]
    NoTopics(String),
    /// A store added twice.
    #[error("a state store named {0:?} is already in the topology")]
    DuplicateStore(String),
    /// A store that does not exist.
    #[error("processor {processor:?} is connected to state store {store:?}, which was never added; add it with add_state_store")]
    UnknownStore {
        /// The processor.
        processor: String,
        /// The store.
        store: String,
    },
    /// A processor that does not exist.
    #[error("state store {store:?} is to be connected to processor {processor:?}, which is not in the topology")]
    UnknownProcessor {
        /// The processor.
        processor: String,
        /// The store.
        store: String,
    },
    /// A stateful operator has no serde for its store or repartition topic.
    #[error(
        "state store {store:?} needs a {part} serde for {type_name}: give one with \
         Materialized::with_{part}_serde (or Grouped::with_{part}_serde before a grouping), \
         or read the topic with serdes that the operators in between keep"
    )]
    MissingSerde {
        /// The store (or repartition topic) that needs it.
        store: String,
        /// `key` or `value`.
        part: &'static str,
        /// The Rust type.
        type_name: &'static str,
    },
    /// An operator was configured with values that cannot work.
    #[error("{operator}: {message}")]
    InvalidOperator {
        /// The operator (or store).
        operator: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A bad topic pattern.
    #[error("invalid topic pattern {pattern:?}: {source}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// Why.
        source: regex::Error,
    },
}

/// Where a record came from, for error messages: `topic-partition@offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPosition {
    /// Source topic.
    pub topic: String,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
}

impl fmt::Display for RecordPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}@{}", self.topic, self.partition, self.offset)
    }
}

fn position_text(p: &Option<RecordPosition>) -> String {
    match p {
        Some(p) => format!("record {p}"),
        None => "a punctuation".to_string(),
    }
}

/// An error while processing records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamsError {
    /// A processor (a user function or a user `Processor`) failed.
    #[error("processor {node:?} failed on {}: {source}", position_text(.position))]
    Processing {
        /// The node that failed.
        node: String,
        /// The record being processed, if any.
        position: Option<RecordPosition>,
        /// The user's error.
        source: ProcessorError,
    },
    /// A processor panicked; the panic was caught and turned into this error.
    #[error("processor {node:?} panicked on {}: {message}", position_text(.position))]
    Panic {
        /// The node that panicked.
        node: String,
        /// The record being processed, if any.
        position: Option<RecordPosition>,
        /// The panic message.
        message: String,
    },
    /// A key or value could not be deserialized at a source.
    #[error("source {node:?} could not deserialize the {part} of record {position}: {source}")]
    Deserialization {
        /// The source node.
        node: String,
        /// `key` or `value`.
        part: &'static str,
        /// The record.
        position: RecordPosition,
        /// Why (boxed: serde errors are large and rare).
        source: Box<kstreams_record::SerdeError>,
    },
    /// A key or value could not be serialized at a sink.
    #[error(
        "sink {node:?} could not serialize the {part} of a record for topic {topic:?}: {source}"
    )]
    Serialization {
        /// The sink node.
        node: String,
        /// `key` or `value`.
        part: &'static str,
        /// Destination topic.
        topic: String,
        /// Why (boxed: serde errors are large and rare).
        source: Box<kstreams_record::SerdeError>,
    },
    /// A sink's partitioner could not choose (the topic's partition count
    /// is not known) or chose a partition the topic does not have.
    #[error(
        "sink {node:?} could not choose the partition of a record for topic {topic:?}: {message}"
    )]
    Partitioning {
        /// The sink node.
        node: String,
        /// Destination topic.
        topic: String,
        /// Why.
        message: String,
    },
    /// No timestamp could be extracted.
    #[error(transparent)]
    Timestamp(#[from] kstreams_time::Error),
    /// A processor asked for a store it may not use.
    #[error(
        "processor {node:?} has no access to state store {store:?}: connect the store to the \
         processor (add_state_store / connect_processor_and_state_stores, or name it in process())"
    )]
    StoreNotConnected {
        /// The processor.
        node: String,
        /// The store.
        store: String,
    },
    /// A store of another type.
    #[error(transparent)]
    Store(#[from] kstreams_state::Error),
    /// `forward_to` named a node that is not a child.
    #[error(
        "processor {node:?} forwarded to {child:?}, which is not one of its children {children:?}"
    )]
    UnknownChild {
        /// The processor.
        node: String,
        /// The name asked for.
        child: String,
        /// The actual children.
        children: Vec<String>,
    },
    /// The topology could not be instantiated.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// An engine invariant failed: a bug in kstreams, not in the application.
    #[error("internal error in kstreams (please report): {0}")]
    Internal(String),
}
