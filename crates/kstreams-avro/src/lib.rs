//! Avro serdes in the Confluent wire format, with a Schema Registry client.
//!
//! This crate owns what Confluent's `kafka-avro-serializer` does for Java
//! Kafka Streams: records are the magic byte `0`, the writer schema's id as
//! 4 big-endian bytes, then the Avro binary datum ([`wire`]). Serializers
//! register their schema (or look it up, or take the subject's latest)
//! under a subject named by a [`SubjectNameStrategy`]; deserializers fetch
//! the writer schema by id and resolve it to the reader's schema, so
//! producers and consumers evolve their schemas independently.
//!
//! - [`AvroSerde`]: Rust types with `serde` derives (Java's `SpecificAvroSerde`).
//! - [`GenericAvroSerde`]: [`GenericRecord`]s, schemas known at run time.
//! - [`SchemaRegistryClient`]: the registry calls, implemented over HTTP by
//!   [`HttpSchemaRegistryClient`] (any registry with the Confluent REST API)
//!   and in memory by [`MockSchemaRegistryClient`] for tests.
//! - [`RegistryConfig`] and [`SerdeConfig`] read Confluent's config keys
//!   (`schema.registry.url`, `basic.auth.user.info`,
//!   `auto.register.schemas`, `use.latest.version`, the subject name
//!   strategies).
//!
//! Registry answers are cached, so the registry is called for the first
//! record of each schema, not for every record. Every failure (a record not
//! in the wire format, an unknown schema id, truncated bytes, a reader
//! schema that cannot read the writer's) is a [`kstreams_record::SerdeError`]
//! for the configured handler, never a panic.
//!
//! The registry client, the wire framing, the strategies and the config
//! live in `kstreams-schema-registry` (shared with the Protobuf and JSON
//! Schema serdes) and are re-exported here.
//!
//! Not supported yet: Avro schema references, `normalize.schemas`, bearer
//! and `SASL_INHERIT` auth, schema ids in record headers.
//!
//! The tests in `tests/real_registry.rs` run against a real registry:
//! `eval "$(cargo xtask registry start)"` starts one (Apicurio Registry's
//! Confluent-compatible API) and exports its URL, and the classpath of the
//! Java Avro serde that writes the cross-language test's records; without
//! them those tests say they are skipped.
//!
//! ```
//! use std::sync::Arc;
//! use kstreams_avro::{AvroSerde, MockSchemaRegistryClient, SchemaRegistryClient, parse_schema};
//! use kstreams_record::{Headers, Serde};
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct UserV1 { name: String }
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct UserV2 { name: String, age: i32 }
//!
//! // With a real registry: HttpSchemaRegistryClient::from_properties(
//! //     [("schema.registry.url", "http://localhost:8081")])?
//! let registry: Arc<dyn SchemaRegistryClient> = Arc::new(MockSchemaRegistryClient::new());
//! let v1 = AvroSerde::<UserV1>::new(registry.clone(), parse_schema(
//!     r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#)?);
//! let v2 = AvroSerde::<UserV2>::new(registry.clone(), parse_schema(
//!     r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},
//!         {"name":"age","type":"int","default":-1}]}"#)?);
//!
//! // An old producer's record, read by a new consumer: the default fills in.
//! let old = v1.serialize("users", &mut Headers::new(), &UserV1 { name: "ann".into() })?;
//! let read = v2.deserialize("users", &Headers::new(), old.as_deref())?;
//! assert_eq!(read, UserV2 { name: "ann".into(), age: -1 });
//!
//! // Bytes from elsewhere are errors, not panics.
//! let error = v2.deserialize("users", &Headers::new(), Some(b"{\"name\":\"ann\"}")).unwrap_err();
//! assert!(error.to_string().contains("not the Confluent magic byte"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod datum_bounds;
mod serde;

pub use apache_avro;
pub use kstreams_schema_registry::{config, wire};

pub use kstreams_schema_registry::{
    Error, HttpSchemaRegistryClient, MockSchemaRegistryClient, RegisteredSchema, RegistryConfig,
    RegistrySchema, Result, SchemaId, SchemaReference, SchemaRegistryClient, SchemaType,
    SerdeConfig, SubjectNameStrategy, Version,
};

pub use crate::serde::{parse_schema, AvroSerde, GenericAvroSerde, GenericRecord};
