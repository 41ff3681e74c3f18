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

mod builder;
mod cogroup;
mod describe;
mod error;
mod fixed_key;
mod fk_join;
mod global;
mod grouped;
pub mod internals;
mod java_order;
mod joins;
mod kstream;
mod materialized;
mod operators;
mod options;
mod processor;
mod sliding;
mod stateful;
mod stream_join;
mod suppress;
mod table;
mod topology;
mod windowed;

pub use describe::{
    GlobalStoreDescription, NodeDescription, NodeDescriptionKind, SubtopologyDescription,
    TopologyDescription,
};
pub use error::{ProcessorError, RecordPosition, StreamsError, TopologyError};
pub use internals::{RecordContext, TaskId, TopicNameExtractor};

pub use builder::StreamsBuilder;
pub use cogroup::{
    CogroupedKStream, SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream,
};
pub use fixed_key::{FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord};
pub use global::{GlobalKTable, GlobalStore};
pub use grouped::{KGroupedStream, KGroupedTable};
pub use joins::Joined;
pub use kstream::{BranchedKStream, KStream};
pub use materialized::{Grouped, Materialized, StoreType};
pub use options::{Branched, Consumed, IntoName, Named, Printed, Produced, Repartitioned};
pub use processor::{Processor, ProcessorContext, PunctuationId};
pub use stateful::Change;
pub use stream_join::StreamJoined;
pub use suppress::{BufferConfig, Suppressed};
pub use table::KTable;
pub use topology::{ChangelogTopic, SubtopologySources, Topology};
pub use windowed::{late_headers, SessionWindowedKStream, TimeWindowedKStream};
