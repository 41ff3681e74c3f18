//! What every Schema Registry serde shares: the registry client, the
//! Confluent wire format's framing, subject name strategies and the
//! configuration keys.
//!
//! This crate owns what Confluent's `kafka-schema-registry-client` and
//! `kafka-schema-serializer` do for Java: the format serdes build on it
//! (`kstreams-avro`, `kstreams-protobuf`, `kstreams-json-schema`), as
//! Confluent's Avro, Protobuf and JSON Schema serializers build on theirs.
//!
//! - [`SchemaRegistryClient`]: the registry calls, for schemas of every
//!   [`SchemaType`] with their [`SchemaReference`]s; implemented over HTTP
//!   by [`HttpSchemaRegistryClient`] (any registry with the Confluent REST
//!   API) and in memory by [`MockSchemaRegistryClient`] for tests.
//! - [`wire`]: the magic byte `0` and the 4-byte big-endian schema id that
//!   start every record.
//! - [`SubjectNameStrategy`]: `TopicNameStrategy`, `RecordNameStrategy`,
//!   `TopicRecordNameStrategy`.
//! - [`RegistryConfig`] and [`SerdeConfig`] read Confluent's config keys
//!   (`schema.registry.url`, `basic.auth.user.info`,
//!   `auto.register.schemas`, `use.latest.version`, the subject name
//!   strategies).
//!
//! ```
//! use kstreams_schema_registry::{
//!     wire, MockSchemaRegistryClient, RegistrySchema, SchemaRegistryClient, SchemaType,
//!     SubjectNameStrategy,
//! };
//!
//! // With a real registry: HttpSchemaRegistryClient::from_properties(
//! //     [("schema.registry.url", "http://localhost:8081")])?
//! let registry = MockSchemaRegistryClient::new();
//! struct Untitled;
//! impl kstreams_schema_registry::NamedSchema for Untitled {
//!     fn record_name(&self) -> Option<String> { None }
//!     fn describe(&self) -> String { "{}".into() }
//! }
//! let subject = SubjectNameStrategy::TopicName.subject("orders", false, &Untitled)?;
//! let id = registry.register_schema(&subject, &RegistrySchema::new(SchemaType::Json, "{}"))?;
//!
//! let mut record = Vec::new();
//! wire::write_header(id, &mut record);
//! record.extend_from_slice(b"{\"item\":\"tea\"}");
//! let (read_id, payload) = wire::split(&record)?;
//! assert_eq!(registry.schema_by_id_with_type(read_id)?.schema_type, SchemaType::Json);
//! assert_eq!(payload, b"{\"item\":\"tea\"}");
//! # Ok::<(), kstreams_schema_registry::Error>(())
//! ```

#![forbid(unsafe_code)]

mod client;
pub mod config;
mod error;
mod http;
mod strategy;
pub mod wire;

pub use crate::client::{
    MockSchemaRegistryClient, RegisteredSchema, RegistrySchema, SchemaReference,
    SchemaRegistryClient, SchemaType, Version,
};
pub use crate::config::{RegistryConfig, SerdeConfig};
pub use crate::error::{Error, Result};
pub use crate::http::HttpSchemaRegistryClient;
pub use crate::strategy::{NamedSchema, SubjectNameStrategy};
pub use crate::wire::SchemaId;
