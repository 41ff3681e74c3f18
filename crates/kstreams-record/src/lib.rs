//! Records, headers and serdes: the bottom layer of kstreams.
//!
//! This crate owns what a Kafka record is once it is inside a kstreams
//! application ([`Record`], [`Headers`], [`RecordMetadata`]) and the
//! [`Serde`] trait that turns typed keys and values into bytes and back at
//! the edges of a topology (sources, sinks, stores and changelogs).
//!
//! The built-in serdes write exactly the bytes of Kafka's own serializers,
//! so a topic written by kstreams reads the same in Kafka Streams and the
//! other way round.

// One `unsafe` block, allowed where it is (serde.rs: a UTF-8 check not made
// twice); anything else unsafe is an error.
#![deny(unsafe_code)]

mod byte_reader;
mod headers;
mod partitioner;
mod record;
pub mod serde;
mod topic_partition;

pub use byte_reader::ByteReader;
pub use headers::{Header, Headers};
pub use partitioner::{murmur2, partition_for_key};
pub use record::{Record, RecordMetadata};
pub use serde::{
    builtin_serde, BoolSerde, BytesSerde, DefaultSerde, F32Serde, F64Serde, I16Serde, I32Serde,
    I64Serde, JsonSerde, ListSerde, Nullable, Serde, SerdeError, SharedSerde, StringSerde,
    UnitSerde, UuidSerde, VoidSerde,
};
/// The UUID type of [`UuidSerde`] (the `uuid` crate's).
pub use topic_partition::TopicPartition;
pub use uuid::Uuid;

/// A timestamp in milliseconds since the Unix epoch, as Kafka stores it.
pub type Timestamp = i64;
