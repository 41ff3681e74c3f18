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

mod change;
mod describe;
mod error;
mod fixed_key;
mod forwarding;
mod global_store;
mod graph;
mod handles;
mod instance;
#[doc(hidden)]
pub mod internals;
mod java_order;
mod join_options;
pub mod late_headers;
mod materialized;
mod nodes;
mod operators;
mod options;
mod processor;
mod suppressed;
mod task_context;
mod topology;

pub use describe::{
    GlobalStoreDescription, NodeDescription, NodeDescriptionKind, SubtopologyDescription,
    TopologyDescription,
};
pub use error::{ProcessorError, RecordPosition, StreamsError, TopologyError};
pub use nodes::{RecordContext, TopicNameExtractor};
pub use task_context::TaskId;

pub use change::Change;
pub use fixed_key::{FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord};
pub use global_store::GlobalStore;
pub use handles::branched::{Branched, BranchedKStream};
pub use handles::builder::StreamsBuilder;
pub use handles::cogroup::CogroupedKStream;
pub use handles::global_table::GlobalKTable;
pub use handles::grouped_stream::KGroupedStream;
pub use handles::grouped_table::KGroupedTable;
pub use handles::kstream::KStream;
pub use handles::ktable::KTable;
pub use handles::windowed::cogrouped::{
    SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream,
};
pub use handles::windowed::session::SessionWindowedKStream;
pub use handles::windowed::time::TimeWindowedKStream;
pub use join_options::{Joined, StreamJoined};
pub use materialized::{Grouped, Materialized, StoreType};
pub use options::{Consumed, IntoName, Named, Printed, Produced, Repartitioned};
pub use processor::{Processor, ProcessorContext, PunctuationId};
pub use suppressed::{BufferConfig, Suppressed};
pub use topology::{ChangelogTopic, SubtopologySources, Topology};
