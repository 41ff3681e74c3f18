//! [`JsonSchemaSerde`]: serde types as JSON in the Confluent wire format.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kstreams_record::{Headers, Serde, SerdeError};
use kstreams_schema_registry::wire::{self, SchemaId};
use kstreams_schema_registry::{
    Error, RegistrySchema, Result, SchemaRegistryClient, SchemaType, SerdeConfig, Version,
};
use serde_json::Value;

use crate::schema::JsonSchema;

/// `json.fail.invalid.schema`: whether the serde validates documents
/// against their schema (Confluent's default: false).
pub const FAIL_INVALID_SCHEMA: &str = "json.fail.invalid.schema";

/// Entries before a cache keyed by something from outside is cleared, as
/// Confluent's serializers bound theirs.
const CACHE_CAPACITY: usize = 1000;

/// JSON Schema for a Rust type with `serde` derives (Java's
/// `KafkaJsonSchemaSerde` with a specific type).
///
/// Writes `T` as JSON after the magic byte and the id its schema has under
/// the subject its strategy names (registered, looked up, or the subject's
/// latest with `use.latest.version`). Reads any record whose writer schema
/// the registry holds as a `JSON` schema, into `T` by serde: fields the
/// document lacks need `#[serde(default)]` (or an `Option`), fields `T`
/// lacks are ignored. With [`with_validation`](Self::with_validation), a
/// document that does not match the schema is an error naming its paths:
/// on write against the schema written with, on read against the writer's.
///
/// ```
/// use std::sync::Arc;
/// use kstreams_json_schema::{JsonSchema, JsonSchemaSerde, MockSchemaRegistryClient};
/// use kstreams_record::{Headers, Serde};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Click { page: String }
///
/// let serde = JsonSchemaSerde::<Click>::new(
///     Arc::new(MockSchemaRegistryClient::new()),
///     JsonSchema::parse(r#"{"type":"object","properties":{"page":{"type":"string"}}}"#)?,
/// );
/// let bytes = serde.serialize("clicks", &mut Headers::new(), &Click { page: "/".into() })?;
/// let error = serde.deserialize("clicks", &Headers::new(), Some(b"{\"page\":\"/\"}")).unwrap_err();
/// assert!(error.to_string().contains("not the Confluent magic byte"), "{error}");
/// assert_eq!(serde.deserialize("clicks", &Headers::new(), bytes.as_deref())?.page, "/");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JsonSchemaSerde<T> {
    registry: Arc<dyn SchemaRegistryClient>,
    config: SerdeConfig,
    is_key: bool,
    validate: bool,
    schema: JsonSchema,
    /// The writer per topic: the id, and the schema documents are checked
    /// against (another than `schema` with `use.latest.version`).
    writers: RwLock<HashMap<String, (SchemaId, JsonSchema)>>,
    /// Writer schemas by id, for reading.
    schemas: RwLock<HashMap<SchemaId, JsonSchema>>,
    _type: PhantomData<fn() -> T>,
}

impl<T> JsonSchemaSerde<T> {
    /// A value serde for `T` with `schema`, Confluent's default config and
    /// no validation.
    pub fn new(registry: Arc<dyn SchemaRegistryClient>, schema: JsonSchema) -> Self {
        JsonSchemaSerde {
            registry,
            config: SerdeConfig::default(),
            is_key: false,
            validate: false,
            schema,
            writers: RwLock::default(),
            schemas: RwLock::default(),
            _type: PhantomData,
        }
    }

    /// Makes it a key serde: subjects end in `-key` under TopicNameStrategy
    /// and the key strategy applies.
    pub fn for_keys(mut self) -> Self {
        self.is_key = true;
        self
    }

    /// Uses `config` instead of the defaults.
    pub fn with_config(mut self, config: SerdeConfig) -> Self {
        self.config = config;
        self
    }

    /// Validates documents on write and read ([`FAIL_INVALID_SCHEMA`]).
    pub fn with_validation(mut self, validate: bool) -> Self {
        self.validate = validate;
        self
    }

    /// Reads [`SerdeConfig`]'s keys and [`FAIL_INVALID_SCHEMA`] from
    /// Confluent-style properties; other keys are ignored.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use kstreams_json_schema::{JsonSchema, JsonSchemaSerde, MockSchemaRegistryClient};
    /// let serde = JsonSchemaSerde::<serde_json::Value>::new(
    ///     Arc::new(MockSchemaRegistryClient::new()),
    ///     JsonSchema::parse("{}")?,
    /// )
    /// .with_properties([("json.fail.invalid.schema", "true"), ("auto.register.schemas", "false")])?;
    /// assert!(serde.validates());
    /// assert!(JsonSchemaSerde::<serde_json::Value>::new(
    ///     Arc::new(MockSchemaRegistryClient::new()), JsonSchema::parse("{}")?)
    ///     .with_properties([("json.fail.invalid.schema", "yes")]).is_err());
    /// # Ok::<(), kstreams_schema_registry::Error>(())
    /// ```
    pub fn with_properties<'a>(
        mut self,
        properties: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    ) -> Result<Self> {
        self.config = SerdeConfig::from_properties(properties.clone())?;
        for (key, value) in properties {
            if key.trim() == FAIL_INVALID_SCHEMA {
                self.validate = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(Error::Config {
                            key: FAIL_INVALID_SCHEMA.into(),
                            message: format!("expected true or false, got `{value}`"),
                        })
                    }
                };
            }
        }
        Ok(self)
    }

    /// Whether documents are validated.
    pub fn validates(&self) -> bool {
        self.validate
    }

    /// The schema `T` is written with.
    pub fn schema(&self) -> &JsonSchema {
        &self.schema
    }

    fn error(&self, topic: &str, error: impl std::fmt::Display) -> SerdeError {
        SerdeError::Custom {
            topic: topic.to_owned(),
            message: format!(
                "JSON Schema {}: {error}",
                if self.is_key { "key" } else { "value" }
            ),
        }
    }

    fn writer(&self, topic: &str) -> Result<(SchemaId, JsonSchema)> {
        if let Some(writer) = read(&self.writers).get(topic) {
            return Ok(writer.clone());
        }
        let strategy = self.config.subject_name_strategy(self.is_key);
        let subject = strategy.subject(topic, self.is_key, &self.schema)?;
        let writer = if !self.config.auto_register_schemas && self.config.use_latest_version {
            // Confluent's order: auto-registration wins over use.latest.version.
            let latest = self.registry.schema_by_version(&subject, Version::Latest)?;
            let schema = self.writer_schema(latest.id)?;
            (latest.id, schema)
        } else {
            let registered = RegistrySchema::new(SchemaType::Json, self.schema.text());
            let id = if self.config.auto_register_schemas {
                self.registry.register_schema(&subject, &registered)?
            } else {
                self.registry.lookup_schema(&subject, &registered)?.id
            };
            (id, self.schema.clone())
        };
        let mut writers = write(&self.writers);
        if writers.len() >= CACHE_CAPACITY {
            writers.clear();
        }
        writers.insert(topic.to_owned(), writer.clone());
        Ok(writer)
    }

    /// The schema of `id`, which must be a JSON Schema.
    fn writer_schema(&self, id: SchemaId) -> Result<JsonSchema> {
        if let Some(schema) = read(&self.schemas).get(&id) {
            return Ok(schema.clone());
        }
        let found = self.registry.schema_by_id_with_type(id)?;
        if found.schema_type != SchemaType::Json {
            return Err(Error::json_schema(
                format!("schema id {id}"),
                format!(
                    "it is a {} schema, not JSON: the record was not written by a \
                     JSON Schema serializer",
                    found.schema_type
                ),
            ));
        }
        let schema = JsonSchema::parse(&found.schema).map_err(|e| {
            Error::json_schema(format!("registry schema id {id} does not compile"), e)
        })?;
        let mut schemas = write(&self.schemas);
        if schemas.len() >= CACHE_CAPACITY {
            schemas.clear();
        }
        schemas.insert(id, schema.clone());
        Ok(schema)
    }

    fn to_bytes(&self, topic: &str, value: &T, out: &mut Vec<u8>) -> Result<()>
    where
        T: serde::Serialize,
    {
        let (id, schema) = self.writer(topic)?;
        let document = serde_json::to_value(value)
            .map_err(|e| Error::json_schema("the value does not serialize to JSON", e))?;
        if self.validate {
            schema.validate(&document).map_err(|why| {
                Error::json_schema(
                    format!("the value does not match its JSON Schema, id {id}"),
                    why,
                )
            })?;
        }
        wire::write_header(id, out);
        serde_json::to_writer(&mut *out, &document)
            .map_err(|e| Error::json_schema("the value does not write as JSON", e))
    }

    fn decode(&self, bytes: &[u8]) -> Result<T>
    where
        T: serde::de::DeserializeOwned,
    {
        let (id, payload) = wire::split(bytes)?;
        let schema = self.writer_schema(id)?;
        // serde_json stops at 128 levels of nesting: deep documents are
        // errors, not stack overflows.
        let document: Value = serde_json::from_slice(payload).map_err(|e| {
            Error::json_schema(format!("the record (schema id {id}) is not JSON"), e)
        })?;
        if self.validate {
            schema.validate(&document).map_err(|why| {
                Error::json_schema(
                    format!("the record does not match its writer JSON Schema, id {id}"),
                    why,
                )
            })?;
        }
        serde_json::from_value(document).map_err(|e| {
            Error::json_schema(
                format!(
                    "the record (schema id {id}) does not map to {}",
                    std::any::type_name::<T>()
                ),
                e,
            )
        })
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // Every update is a single insert or a clear, so a poisoned cache is
    // consistent.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl<T> Serde<T> for JsonSchemaSerde<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &T,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(topic, headers, value, &mut out)?;
        Ok(Some(out))
    }

    fn serialize_into(
        &self,
        topic: &str,
        _: &mut Headers,
        value: &T,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        let start = out.len();
        self.to_bytes(topic, value, out).map_err(|e| {
            // A caller's reused buffer never holds half a record.
            out.truncate(start);
            self.error(topic, e)
        })?;
        Ok(true)
    }

    fn deserialize(&self, topic: &str, _: &Headers, bytes: Option<&[u8]>) -> Result<T, SerdeError> {
        let bytes = bytes.ok_or_else(|| SerdeError::UnexpectedNull {
            topic: topic.to_owned(),
            type_name: std::any::type_name::<T>(),
        })?;
        self.decode(bytes).map_err(|e| self.error(topic, e))
    }
}
