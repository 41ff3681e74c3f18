//! Protobuf serdes in the Confluent wire format, with the Schema Registry.
//!
//! This crate owns what Confluent's `kafka-protobuf-serializer` does for
//! Java Kafka Streams: records are the magic byte `0`, the writer schema's
//! id as 4 big-endian bytes, the message indexes that say which message of
//! the schema's `.proto` file the record holds ([`indexes`]), then the
//! Protobuf encoding of the message. Serializers register the message's
//! `.proto` file (schema type `PROTOBUF`), and each file it imports as a
//! schema reference, under subjects named by a `SubjectNameStrategy`;
//! deserializers fetch the writer schema by id and check the indexes name
//! the message they read.
//!
//! - [`ProtobufSerde`]: prost messages (`#[derive(prost::Message)]`, or
//!   `prost-build`'s generated types).
//! - [`ProtobufSchema`]: the `.proto` source the message was generated from,
//!   its full name, and its imports.
//!
//! The registry client, strategies and config keys are
//! `kstreams-schema-registry`'s, re-exported here, the same as the Avro
//! serde's: one `SerdeConfig` and one registry client serve every format.
//!
//! Every failure (a record not in the wire format, an unknown schema id,
//! indexes that name another message or none, bytes that are not the
//! message) is a [`kstreams_record::SerdeError`] for the configured
//! deserialization handler, never a panic.
//!
//! Not supported: `DynamicMessage` (records of types known only at run
//! time), `normalize.schemas`, `reference.subject.name.strategy` other than
//! the default, schema ids in record headers.
//!
//! ```
//! use std::sync::Arc;
//! use kstreams_protobuf::{MockSchemaRegistryClient, ProtoFile, ProtobufSchema, ProtobufSerde};
//! use kstreams_record::{Headers, Serde};
//!
//! #[derive(Clone, PartialEq, prost::Message)]
//! struct UserV1 { #[prost(string, tag = "1")] name: String }
//! #[derive(Clone, PartialEq, prost::Message)]
//! struct UserV2 {
//!     #[prost(string, tag = "1")] name: String,
//!     #[prost(int32, tag = "2")] age: i32,
//! }
//!
//! let registry = Arc::new(MockSchemaRegistryClient::new());
//! let v1 = ProtobufSerde::<UserV1>::new(registry.clone(), ProtobufSchema::new(
//!     ProtoFile::new("user.proto", "syntax = \"proto3\"; message User { string name = 1; }"),
//!     "User",
//! )?);
//! let v2 = ProtobufSerde::<UserV2>::new(registry.clone(), ProtobufSchema::new(
//!     ProtoFile::new("user.proto",
//!         "syntax = \"proto3\"; message User { string name = 1; int32 age = 2; }"),
//!     "User",
//! )?);
//!
//! // An old producer's record, read by a new consumer: the field defaults.
//! let old = v1.serialize("users", &mut Headers::new(), &UserV1 { name: "ann".into() })?;
//! assert_eq!(v2.deserialize("users", &Headers::new(), old.as_deref())?,
//!     UserV2 { name: "ann".into(), age: 0 });
//! // A new producer's record, read by an old consumer: the field is skipped.
//! let new = v2.serialize("users", &mut Headers::new(), &UserV2 { name: "bo".into(), age: 3 })?;
//! assert_eq!(v1.deserialize("users", &Headers::new(), new.as_deref())?.name, "bo");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

pub mod indexes;
mod schema;
mod serde;

pub use kstreams_schema_registry::{
    config, wire, Error, HttpSchemaRegistryClient, MockSchemaRegistryClient, RegisteredSchema,
    RegistryConfig, RegistrySchema, Result, SchemaId, SchemaReference, SchemaRegistryClient,
    SchemaType, SerdeConfig, SubjectNameStrategy, Version,
};

pub use crate::schema::{ProtoFile, ProtobufSchema};
pub use crate::serde::ProtobufSerde;
