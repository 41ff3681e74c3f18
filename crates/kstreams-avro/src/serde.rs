//! The Avro serdes: [`AvroSerde`] for Rust types with `serde` derives and
//! [`GenericAvroSerde`] for [`GenericRecord`]s, both in the Confluent wire
//! format with schemas kept in a registry.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use apache_avro::schema_compatibility::SchemaCompatibility;
use apache_avro::types::Value;
use apache_avro::Schema;
use kstreams_record::{Headers, Serde, SerdeError};

use kstreams_schema_registry::wire::{self, SchemaId};
use kstreams_schema_registry::{Error, Result, SchemaRegistryClient, SerdeConfig, Version};

/// Parses an Avro schema from its JSON text, with this crate's error.
pub fn parse_schema(json: &str) -> Result<Schema> {
    Schema::parse_str(json).map_err(|e| Error::avro("invalid Avro schema", e))
}

/// A record whose type is known only at run time: an Avro [`Value`] and the
/// schema it follows, as Java's `GenericRecord`.
///
/// Records that share one schema should share one `Arc`: the serializer
/// remembers the schema id per `Arc`, and a new `Arc` costs a schema
/// comparison on its first record.
#[derive(Clone, Debug, PartialEq)]
pub struct GenericRecord {
    /// The schema of `value`.
    pub schema: Arc<Schema>,
    /// The datum (usually a [`Value::Record`]).
    pub value: Value,
}

impl GenericRecord {
    /// A record of `schema`.
    pub fn new(schema: Arc<Schema>, value: Value) -> Self {
        GenericRecord { schema, value }
    }

    /// The field `name` of a record value.
    pub fn field(&self, name: &str) -> Option<&Value> {
        match &self.value {
            Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// The schema a serializer writes with and its id.
#[derive(Clone)]
struct Writer {
    id: SchemaId,
    schema: Arc<Schema>,
    /// Whether values must be resolved to `schema` first: they follow
    /// another schema (`use.latest.version`).
    resolve: bool,
}

/// How the values of one writer id turn into the reader's schema.
#[derive(Clone)]
enum Reading {
    /// Reader and writer schema are the same: no resolution.
    AsWritten,
    /// Avro schema resolution from the writer's schema to the reader's.
    Resolve,
    /// The reader cannot read what this writer wrote.
    Incompatible(String),
}

/// What the key and value serdes of both kinds share: the registry, the
/// config and the caches that keep the registry off the per-record path.
struct Core {
    registry: Arc<dyn SchemaRegistryClient>,
    config: SerdeConfig,
    is_key: bool,
    /// Parsed writer schemas by id, for reading.
    schemas: RwLock<HashMap<SchemaId, Arc<Schema>>>,
    /// Per writer id, how the reader schema reads it.
    readings: RwLock<HashMap<SchemaId, Reading>>,
}

/// Entries before a cache keyed by something user-made is cleared, as
/// Confluent's serializers bound theirs: a producer that parses a fresh
/// schema per record must not grow memory without end.
const CACHE_CAPACITY: usize = 1000;

impl Core {
    fn new(registry: Arc<dyn SchemaRegistryClient>) -> Self {
        Core {
            registry,
            config: SerdeConfig::default(),
            is_key: false,
            schemas: RwLock::default(),
            readings: RwLock::default(),
        }
    }

    fn part(&self) -> &'static str {
        if self.is_key {
            "key"
        } else {
            "value"
        }
    }

    fn error(&self, topic: &str, error: impl std::fmt::Display) -> SerdeError {
        SerdeError::Custom {
            topic: topic.to_owned(),
            message: format!("Avro {}: {error}", self.part()),
        }
    }

    /// Runs `write` on `out`; on failure takes back what it appended, so a
    /// caller's reused buffer never holds half a record.
    fn append(
        &self,
        topic: &str,
        out: &mut Vec<u8>,
        write: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<bool, SerdeError> {
        let start = out.len();
        write(out).map_err(|e| {
            out.truncate(start);
            self.error(topic, e)
        })?;
        Ok(true)
    }

    /// Asks the registry which id `schema` writes under for `topic`.
    fn writer(&self, topic: &str, schema: &Arc<Schema>, json: &str) -> Result<Writer> {
        let strategy = self.config.subject_name_strategy(self.is_key);
        let subject = strategy.subject(topic, self.is_key, &**schema)?;
        // Confluent's order: auto-registration wins over use.latest.version.
        if !self.config.auto_register_schemas && self.config.use_latest_version {
            let latest = self.registry.schema_by_version(&subject, Version::Latest)?;
            let latest_schema = Arc::new(parse_schema(&latest.schema)?);
            let resolve = latest_schema.canonical_form() != schema.canonical_form();
            return Ok(Writer {
                id: latest.id,
                schema: latest_schema,
                resolve,
            });
        }
        let id = if self.config.auto_register_schemas {
            self.registry.register(&subject, json)?
        } else {
            self.registry.lookup(&subject, json)?.id
        };
        Ok(Writer {
            id,
            schema: Arc::clone(schema),
            resolve: false,
        })
    }

    fn encode(&self, writer: &Writer, value: Value, out: &mut Vec<u8>) -> Result<()> {
        let value = if writer.resolve {
            value.resolve(&writer.schema).map_err(|e| {
                Error::avro(
                    format!(
                        "value does not resolve to the latest schema, id {}",
                        writer.id
                    ),
                    e,
                )
            })?
        } else {
            value
        };
        let datum = apache_avro::to_avro_datum(&writer.schema, value).map_err(|e| {
            Error::avro(
                format!("value does not fit its schema, id {}", writer.id),
                e,
            )
        })?;
        wire::write_header(writer.id, out);
        out.extend_from_slice(&datum);
        Ok(())
    }

    fn writer_schema(&self, id: SchemaId) -> Result<Arc<Schema>> {
        if let Some(schema) = read(&self.schemas).get(&id) {
            return Ok(Arc::clone(schema));
        }
        let json = self.registry.schema_by_id(id)?;
        let schema = Arc::new(
            Schema::parse_str(&json)
                .map_err(|e| Error::avro(format!("registry schema id {id} does not parse"), e))?,
        );
        write(&self.schemas).insert(id, Arc::clone(&schema));
        Ok(schema)
    }

    fn reading(&self, id: SchemaId, writer: &Schema, reader: &Schema) -> Reading {
        if let Some(reading) = read(&self.readings).get(&id) {
            return reading.clone();
        }
        let reading = if writer.canonical_form() == reader.canonical_form() {
            Reading::AsWritten
        } else {
            match SchemaCompatibility::can_read(writer, reader) {
                Ok(()) => Reading::Resolve,
                Err(e) => Reading::Incompatible(e.to_string()),
            }
        };
        write(&self.readings).insert(id, reading.clone());
        reading
    }

    /// Reads a wire-format record; `reader` is the schema the caller wants,
    /// `None` for the writer's own. Returns the schema the value follows.
    fn decode(&self, bytes: &[u8], reader: Option<&Arc<Schema>>) -> Result<(Arc<Schema>, Value)> {
        let (id, datum) = wire::split(bytes)?;
        let writer = self.writer_schema(id)?;
        let reader = match reader {
            None => None,
            Some(reader) => match self.reading(id, &writer, reader) {
                Reading::AsWritten => None,
                Reading::Resolve => Some(reader),
                Reading::Incompatible(why) => {
                    return Err(Error::Avro {
                        context: format!(
                        "schema mismatch: the reader schema cannot read the writer schema id {id}"
                    ),
                        message: why,
                    })
                }
            },
        };
        let decode_error = || format!("the datum does not decode with its writer schema id {id}");
        crate::datum_bounds::check(&writer, datum)
            .map_err(|why| Error::avro(decode_error(), why))?;
        let mut input = EofWatch {
            rest: datum,
            hit_eof: false,
        };
        let value = apache_avro::from_avro_datum(&writer, &mut input, reader.map(|r| &**r))
            .map_err(|e| Error::avro(decode_error(), e))?;
        if input.hit_eof {
            return Err(Error::avro(
                decode_error(),
                format!("the datum ends early ({} bytes)", datum.len()),
            ));
        }
        Ok((reader.map_or(writer, Arc::clone), value))
    }
}

/// The datum's bytes, noting whether a read ran past their end.
///
/// apache-avro decodes a string cut short by the end of the input as a
/// null instead of failing, so a truncated record would read as a record
/// with a null field; this is how the truncation is seen instead.
struct EofWatch<'a> {
    rest: &'a [u8],
    hit_eof: bool,
}

impl std::io::Read for EofWatch<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.rest.is_empty() && !buf.is_empty() {
            self.hit_eof = true;
        }
        self.rest.read(buf)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        if buf.len() > self.rest.len() {
            self.hit_eof = true;
        }
        self.rest.read_exact(buf)
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // Every update is a single insert, so a poisoned cache is consistent.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

fn schema_json(schema: &Schema) -> String {
    serde_json::to_string(schema).expect("an Avro schema serializes to JSON")
}

fn null_error<T>(topic: &str) -> SerdeError {
    SerdeError::UnexpectedNull {
        topic: topic.to_owned(),
        type_name: std::any::type_name::<T>(),
    }
}

/// Avro for a Rust type with `serde` derives (Java's `SpecificAvroSerde`).
///
/// Writes `T` with its schema, registered (or looked up, or the subject's
/// latest) under the subject its strategy names. Reads records of any
/// writer schema the registry knows that `T`'s schema can read: fields the
/// writer lacks take their defaults, fields `T` lacks are skipped.
///
/// ```
/// use std::sync::Arc;
/// use kstreams_avro::{AvroSerde, MockSchemaRegistryClient, parse_schema};
/// use kstreams_record::{Headers, Serde};
///
/// #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
/// struct Order { id: i64, item: String }
///
/// let schema = parse_schema(r#"{"type":"record","name":"Order","fields":[
///     {"name":"id","type":"long"},{"name":"item","type":"string"}]}"#)?;
/// let registry = Arc::new(MockSchemaRegistryClient::new());
/// let serde = AvroSerde::<Order>::new(registry.clone(), schema);
///
/// let order = Order { id: 7, item: "tea".into() };
/// let bytes = serde.serialize("orders", &mut Headers::new(), &order)?.unwrap();
/// assert_eq!(bytes[0], 0); // the magic byte, then the schema id
/// assert_eq!(serde.deserialize("orders", &Headers::new(), Some(&bytes))?, order);
/// // Registered under TopicNameStrategy's subject:
/// # use kstreams_avro::{SchemaRegistryClient, Version};
/// assert_eq!(registry.schema_by_version("orders-value", Version::Latest)?.version, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AvroSerde<T> {
    core: Core,
    schema: Arc<Schema>,
    json: String,
    /// The writer per topic (the subject depends on it).
    writers: RwLock<HashMap<String, Writer>>,
    _type: PhantomData<fn() -> T>,
}

impl<T> AvroSerde<T> {
    /// A value serde for `T` with `schema`, Confluent's default config.
    pub fn new(registry: Arc<dyn SchemaRegistryClient>, schema: Schema) -> Self {
        AvroSerde {
            core: Core::new(registry),
            json: schema_json(&schema),
            schema: Arc::new(schema),
            writers: RwLock::default(),
            _type: PhantomData,
        }
    }

    /// A value serde for `T` with the schema its `AvroSchema` derive gives.
    pub fn derived(registry: Arc<dyn SchemaRegistryClient>) -> Self
    where
        T: apache_avro::AvroSchema,
    {
        Self::new(registry, T::get_schema())
    }

    /// Makes it a key serde: subjects end in `-key` under TopicNameStrategy
    /// and the key strategy applies.
    pub fn for_keys(mut self) -> Self {
        self.core.is_key = true;
        self
    }

    /// Uses `config` instead of the defaults.
    pub fn with_config(mut self, config: SerdeConfig) -> Self {
        self.core.config = config;
        self
    }

    /// The schema `T` is written and read with.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    fn writer(&self, topic: &str) -> Result<Writer> {
        if let Some(writer) = read(&self.writers).get(topic) {
            return Ok(writer.clone());
        }
        let writer = self.core.writer(topic, &self.schema, &self.json)?;
        let mut writers = write(&self.writers);
        if writers.len() >= CACHE_CAPACITY {
            writers.clear();
        }
        writers.insert(topic.to_owned(), writer.clone());
        Ok(writer)
    }

    fn to_bytes(&self, topic: &str, value: &T, out: &mut Vec<u8>) -> Result<()>
    where
        T: serde::Serialize,
    {
        let writer = self.writer(topic)?;
        let value = apache_avro::to_value(value)
            .map_err(|e| Error::avro("the value does not serialize to Avro", e))?;
        // serde's view of a value is not Avro's (an Option is not a union
        // branch yet, an enum variant not an enum symbol): resolving against
        // the schema makes it one.
        let value = value.resolve(&self.schema).map_err(|e| {
            Error::avro(
                format!(
                    "the value does not fit schema {}",
                    schema_title(&self.schema)
                ),
                e,
            )
        })?;
        self.core.encode(&writer, value, out)
    }
}

fn schema_title(schema: &Schema) -> String {
    match schema.name() {
        Some(name) => name.fullname(None),
        None => schema.canonical_form(),
    }
}

impl<T> Serde<T> for AvroSerde<T>
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
        self.core
            .append(topic, out, |out| self.to_bytes(topic, value, out))
    }

    fn deserialize(&self, topic: &str, _: &Headers, bytes: Option<&[u8]>) -> Result<T, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<T>(topic))?;
        let (_, value) = self
            .core
            .decode(bytes, Some(&self.schema))
            .map_err(|e| self.core.error(topic, e))?;
        apache_avro::from_value(&value).map_err(|e| {
            self.core.error(
                topic,
                format!(
                    "the record does not map to {}: {e}",
                    std::any::type_name::<T>()
                ),
            )
        })
    }
}

/// Avro for [`GenericRecord`]s (Java's `GenericAvroSerde`): each record
/// carries its schema, and reading gives the writer's schema, or a reader
/// schema set with [`GenericAvroSerde::with_reader_schema`].
///
/// ```
/// use std::sync::Arc;
/// use apache_avro::types::Value;
/// use kstreams_avro::{GenericAvroSerde, GenericRecord, MockSchemaRegistryClient, parse_schema};
/// use kstreams_record::{Headers, Serde};
///
/// let schema = Arc::new(parse_schema(
///     r#"{"type":"record","name":"Click","fields":[{"name":"page","type":"string"}]}"#,
/// )?);
/// let serde = GenericAvroSerde::new(Arc::new(MockSchemaRegistryClient::new()));
/// let click = GenericRecord::new(
///     schema,
///     Value::Record(vec![("page".into(), Value::String("/home".into()))]),
/// );
/// let bytes = serde.serialize("clicks", &mut Headers::new(), &click)?.unwrap();
/// let read = serde.deserialize("clicks", &Headers::new(), Some(&bytes))?;
/// assert_eq!(read.field("page"), Some(&Value::String("/home".into())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct GenericAvroSerde {
    core: Core,
    reader: Option<Arc<Schema>>,
    /// Writers per topic and per schema `Arc` (by address; the entry keeps
    /// the `Arc` alive so the address is not reused).
    writers: RwLock<HashMap<String, WritersBySchema>>,
}

/// A topic's writers by schema address, each with the `Arc` it is for.
type WritersBySchema = HashMap<usize, (Arc<Schema>, Writer)>;

impl GenericAvroSerde {
    /// A value serde with Confluent's default config.
    pub fn new(registry: Arc<dyn SchemaRegistryClient>) -> Self {
        GenericAvroSerde {
            core: Core::new(registry),
            reader: None,
            writers: RwLock::default(),
        }
    }

    /// Makes it a key serde.
    pub fn for_keys(mut self) -> Self {
        self.core.is_key = true;
        self
    }

    /// Uses `config` instead of the defaults.
    pub fn with_config(mut self, config: SerdeConfig) -> Self {
        self.core.config = config;
        self
    }

    /// Reads every record into `schema` (Avro schema resolution), whatever
    /// schema wrote it; records it cannot read are errors.
    pub fn with_reader_schema(mut self, schema: Arc<Schema>) -> Self {
        self.reader = Some(schema);
        self
    }

    fn writer(&self, topic: &str, schema: &Arc<Schema>) -> Result<Writer> {
        let address = Arc::as_ptr(schema) as usize;
        if let Some((_, writer)) = read(&self.writers)
            .get(topic)
            .and_then(|by_schema| by_schema.get(&address))
        {
            return Ok(writer.clone());
        }
        let writer = self.core.writer(topic, schema, &schema_json(schema))?;
        let mut writers = write(&self.writers);
        if writers.values().map(HashMap::len).sum::<usize>() >= CACHE_CAPACITY {
            writers.clear();
        }
        writers
            .entry(topic.to_owned())
            .or_default()
            .insert(address, (Arc::clone(schema), writer.clone()));
        Ok(writer)
    }
}

impl Serde<GenericRecord> for GenericAvroSerde {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &GenericRecord,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(topic, headers, value, &mut out)?;
        Ok(Some(out))
    }

    fn serialize_into(
        &self,
        topic: &str,
        _: &mut Headers,
        record: &GenericRecord,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        self.core.append(topic, out, |out| {
            let writer = self.writer(topic, &record.schema)?;
            self.core.encode(&writer, record.value.clone(), out)
        })
    }

    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<GenericRecord, SerdeError> {
        let bytes = bytes.ok_or_else(|| null_error::<GenericRecord>(topic))?;
        let (schema, value) = self
            .core
            .decode(bytes, self.reader.as_ref())
            .map_err(|e| self.core.error(topic, e))?;
        Ok(GenericRecord { schema, value })
    }
}
