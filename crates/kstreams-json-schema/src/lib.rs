//! JSON Schema serdes in the Confluent wire format, with the Schema
//! Registry.
//!
//! This crate owns what Confluent's `kafka-json-schema-serializer` does for
//! Java Kafka Streams: records are the magic byte `0`, the writer schema's
//! id as 4 big-endian bytes, then the JSON document (UTF-8, no framing).
//! Serializers register their JSON Schema (schema type `JSON`) under the
//! subject a `SubjectNameStrategy` names; deserializers fetch the writer
//! schema by id. With validation on (Confluent's
//! `json.fail.invalid.schema=true`), a document that does not match the
//! schema is refused on write, and on read when it does not match the
//! schema it was written with; the error names each failing path.
//!
//! - [`JsonSchemaSerde`]: Rust types with `serde` derives.
//! - [`JsonSchema`]: a parsed JSON Schema, its `title` (the record name of
//!   the record subject name strategies) and its validator.
//!
//! The registry client, strategies and config keys are
//! `kstreams-schema-registry`'s, re-exported here, the same as the Avro and
//! Protobuf serdes'.
//!
//! Not supported: schema references (`$ref` to another subject), the
//! `json.fail.unknown.properties` check (serde ignores unknown fields
//! unless the type says `#[serde(deny_unknown_fields)]`), schema ids in
//! record headers.
//!
//! ```
//! use std::sync::Arc;
//! use kstreams_json_schema::{JsonSchema, JsonSchemaSerde, MockSchemaRegistryClient};
//! use kstreams_record::{Headers, Serde};
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
//! struct Order { item: String, quantity: i64 }
//!
//! let schema = JsonSchema::parse(r#"{
//!     "title": "Order", "type": "object",
//!     "properties": {"item": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
//!     "required": ["item", "quantity"]}"#)?;
//! let serde = JsonSchemaSerde::<Order>::new(Arc::new(MockSchemaRegistryClient::new()), schema)
//!     .with_validation(true);
//!
//! let order = Order { item: "tea".into(), quantity: 2 };
//! let bytes = serde.serialize("orders", &mut Headers::new(), &order)?.unwrap();
//! assert_eq!(&bytes[5..], br#"{"item":"tea","quantity":2}"#);
//! assert_eq!(serde.deserialize("orders", &Headers::new(), Some(&bytes))?, order);
//!
//! // Validation names the failing path.
//! let error = serde
//!     .serialize("orders", &mut Headers::new(), &Order { item: "tea".into(), quantity: 0 })
//!     .unwrap_err();
//! assert!(error.to_string().contains("/quantity"), "{error}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

mod schema;
mod serde;

pub use kstreams_schema_registry::{
    config, wire, Error, HttpSchemaRegistryClient, MockSchemaRegistryClient, RegisteredSchema,
    RegistryConfig, RegistrySchema, Result, SchemaId, SchemaReference, SchemaRegistryClient,
    SchemaType, SerdeConfig, SubjectNameStrategy, Version,
};

pub use crate::schema::JsonSchema;
pub use crate::serde::{JsonSchemaSerde, FAIL_INVALID_SCHEMA};
