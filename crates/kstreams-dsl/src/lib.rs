//! The Processor API and the Streams DSL.
//!
//! This crate owns how an application describes its processing:
//! [`Topology`] with sources, processors, sinks and state stores (the
//! Processor API), [`StreamsBuilder`], [`KStream`], [`KTable`] and the
//! grouped and windowed streams on top of it (the DSL), and
//! [`TopologyDescription`], the same text Kafka Streams prints.
//!
//! Edges are typed: a record crosses from one node to the next as a typed
//! value, forwarded depth-first by a direct call; bytes exist only at
//! sources, sinks and stores.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[doc(hidden)]
#[path = "internals.rs"]
pub mod __private;
pub mod async_processing;
mod change;
mod describe;
mod error;
mod fixed_key;
mod forwarding;
mod global_store;
mod graph;
mod handles;
mod instance;
mod java_order;
mod join_options;
pub mod late_headers;
mod materialized;
mod mock_context;
mod nodes;
mod offset_reset;
mod operators;
mod options;
mod partitioner;
mod processor;
mod suppressed;
mod table_joined;
mod task_context;
mod topology;
mod value_transformer;

pub use describe::{
    GlobalStoreDescription, NodeDescription, NodeDescriptionKind, SubtopologyDescription,
    TopologyDescription,
};
pub use error::{ProcessorError, RecordPosition, StreamsError, TopologyError};
pub use nodes::{RecordContext, TopicNameExtractor};
pub use offset_reset::AutoOffsetReset;
pub use task_context::TaskId;

pub use async_processing::{AsyncOptions, AsyncOrder, AsyncTimeout};
pub use change::Change;
pub use fixed_key::{FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord};
pub use forwarding::CapturedForward;
pub use global_store::GlobalStore;
pub use handles::branched::Branched;
pub use handles::builder::StreamsBuilder;
pub use handles::types::{
    BranchedKStream, CogroupedKStream, GlobalKTable, KGroupedStream, KGroupedTable, KStream,
    KTable, SessionWindowedCogroupedKStream, SessionWindowedKStream, TimeWindowedCogroupedKStream,
    TimeWindowedKStream,
};
pub use join_options::{Joined, StreamJoined};
pub use materialized::{Grouped, Materialized, StoreType};
pub use mock_context::{
    CapturedPunctuator, MockProcessorContext, MOCK_APPLICATION_ID, MOCK_NODE_NAME,
};
pub use options::{Consumed, IntoName, Named, Printed, Produced, Repartitioned};
pub use partitioner::{PartitionCounts, StreamPartitioner};
pub use processor::{Processor, ProcessorContext, PunctuationId};
pub use suppressed::{BufferConfig, Suppressed};
pub use table_joined::{ForeignKeyExtractor, TableJoined};
pub use topology::{ChangelogTopic, SubtopologySources, Topology};
pub use value_transformer::{ValueTransformerContext, ValueTransformerWithKey};
