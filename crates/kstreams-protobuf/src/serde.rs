//! [`ProtobufSerde`]: prost messages in the Confluent wire format.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kstreams_record::{Headers, Serde, SerdeError};
use kstreams_schema_registry::wire::{self, SchemaId};
use kstreams_schema_registry::{
    Error, RegistrySchema, Result, SchemaReference, SchemaRegistryClient, SchemaType, SerdeConfig,
    Version,
};

use crate::indexes;
use crate::schema::{is_known_type, parse_registered, MessageTree, ProtobufSchema};

/// Entries before a cache keyed by something from outside is cleared, as
/// Confluent's serializers bound theirs.
const CACHE_CAPACITY: usize = 1000;

/// Protobuf for a prost message `M` (Java's `KafkaProtobufSerde` with a
/// specific type), in Confluent's wire format: magic byte, schema id,
/// message indexes, then the message.
///
/// Writing registers `M`'s `.proto` file under the subject its strategy
/// names (or looks it up, or takes the subject's latest version), after
/// registering each imported file under its import name and pointing at
/// it with a schema reference (Confluent's
/// `DefaultReferenceSubjectNameStrategy`). Reading fetches the writer's
/// schema by id and checks that the record's message indexes name `M`'s
/// message there; the bytes then decode as `M` with Protobuf's own
/// evolution rules (unknown fields skipped, missing ones default).
///
/// ```
/// use std::sync::Arc;
/// use kstreams_protobuf::{ProtoFile, ProtobufSchema, ProtobufSerde};
/// use kstreams_record::{Headers, Serde};
/// use kstreams_schema_registry::MockSchemaRegistryClient;
///
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct Order {
///     #[prost(string, tag = "1")]
///     item: String,
///     #[prost(int64, tag = "2")]
///     cents: i64,
/// }
///
/// let schema = ProtobufSchema::new(
///     ProtoFile::new("order.proto", "syntax = \"proto3\"; package shop; \
///         message Order { string item = 1; int64 cents = 2; }"),
///     "shop.Order",
/// )?;
/// let serde = ProtobufSerde::<Order>::new(Arc::new(MockSchemaRegistryClient::new()), schema);
/// let order = Order { item: "tea".into(), cents: 250 };
/// let bytes = serde.serialize("orders", &mut Headers::new(), &order)?.unwrap();
/// assert_eq!(&bytes[..6], &[0, 0, 0, 0, 1, 0]); // magic, id 1, indexes [0]
/// assert_eq!(serde.deserialize("orders", &Headers::new(), Some(&bytes))?, order);
///
/// // Bytes from elsewhere are errors, not panics.
/// let error = serde.deserialize("orders", &Headers::new(), Some(b"tea")).unwrap_err();
/// assert!(error.to_string().contains("not the Confluent magic byte"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ProtobufSerde<M> {
    registry: Arc<dyn SchemaRegistryClient>,
    config: SerdeConfig,
    is_key: bool,
    schema: ProtobufSchema,
    /// The writer per topic: schema id and message indexes.
    writers: RwLock<HashMap<String, (SchemaId, Vec<i32>)>>,
    /// The messages of each writer schema id.
    trees: RwLock<HashMap<SchemaId, Arc<MessageTree>>>,
    _message: PhantomData<fn() -> M>,
}

impl<M> ProtobufSerde<M> {
    /// A value serde for `M`, whose `.proto` definition is `schema`, with
    /// Confluent's default config.
    pub fn new(registry: Arc<dyn SchemaRegistryClient>, schema: ProtobufSchema) -> Self {
        ProtobufSerde {
            registry,
            config: SerdeConfig::default(),
            is_key: false,
            schema,
            writers: RwLock::default(),
            trees: RwLock::default(),
            _message: PhantomData,
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

    /// The schema `M` is written with.
    pub fn schema(&self) -> &ProtobufSchema {
        &self.schema
    }

    fn error(&self, topic: &str, error: impl std::fmt::Display) -> SerdeError {
        SerdeError::Custom {
            topic: topic.to_owned(),
            message: format!(
                "Protobuf {}: {error}",
                if self.is_key { "key" } else { "value" }
            ),
        }
    }

    /// The registry schema of a file and its references, registering (or
    /// looking up) each imported file first under its import name.
    /// `importers` are the files whose imports led here, to refuse a cycle
    /// instead of recursing without end.
    fn resolve(
        &self,
        file_name: &str,
        source: &str,
        imports: &[String],
        importers: &mut Vec<String>,
    ) -> Result<RegistrySchema> {
        if importers.iter().any(|name| name == file_name) {
            return Err(Error::protobuf(
                "the .proto imports form a cycle",
                format!("{} -> {file_name}", importers.join(" -> ")),
            ));
        }
        importers.push(file_name.to_owned());
        let mut references = Vec::new();
        for import in imports {
            let Some((file, nested)) = self.schema.dependency(import) else {
                if is_known_type(import) {
                    continue;
                }
                return Err(Error::protobuf(
                    format!("{file_name} imports {import}"),
                    "it is not among the schema's dependencies; add it with \
                     ProtobufSchema::with_dependency",
                ));
            };
            let dependency = self.resolve(&file.name, &file.source, nested, importers)?;
            // Confluent's DefaultReferenceSubjectNameStrategy: the import
            // path is the subject.
            let subject = &file.name;
            if self.config.auto_register_schemas {
                self.registry.register_schema(subject, &dependency)?;
            }
            let version = self.registry.lookup_schema(subject, &dependency)?.version;
            references.push(SchemaReference::new(
                import.clone(),
                subject.clone(),
                version,
            ));
        }
        Ok(RegistrySchema::new(SchemaType::Protobuf, source).with_references(references))
    }

    /// Asks the registry which id `M`'s schema writes under for `topic`,
    /// and the message's indexes in that schema.
    fn writer(&self, topic: &str) -> Result<(SchemaId, Vec<i32>)> {
        if let Some(writer) = read(&self.writers).get(topic) {
            return Ok(writer.clone());
        }
        let strategy = self.config.subject_name_strategy(self.is_key);
        let subject = strategy.subject(topic, self.is_key, &self.schema)?;
        let writer = if !self.config.auto_register_schemas && self.config.use_latest_version {
            // Confluent's order: auto-registration wins over use.latest.version.
            let latest = self.registry.schema_by_version(&subject, Version::Latest)?;
            let tree = self.tree(latest.id)?;
            let indexes = tree.indexes_of(self.schema.message_name()).ok_or_else(|| {
                Error::protobuf(
                    format!("the latest schema of subject {subject}, id {}", latest.id),
                    format!("it has no message {}", self.schema.message_name()),
                )
            })?;
            (latest.id, indexes)
        } else {
            let file = self.schema.file();
            let schema = self.resolve(
                &file.name,
                &file.source,
                self.schema.imports(),
                &mut Vec::new(),
            )?;
            let id = if self.config.auto_register_schemas {
                self.registry.register_schema(&subject, &schema)?
            } else {
                self.registry.lookup_schema(&subject, &schema)?.id
            };
            (id, self.schema.message_indexes().to_vec())
        };
        let mut writers = write(&self.writers);
        if writers.len() >= CACHE_CAPACITY {
            writers.clear();
        }
        writers.insert(topic.to_owned(), writer.clone());
        Ok(writer)
    }

    /// The messages of the schema with `id`.
    fn tree(&self, id: SchemaId) -> Result<Arc<MessageTree>> {
        if let Some(tree) = read(&self.trees).get(&id) {
            return Ok(Arc::clone(tree));
        }
        let schema = self.registry.schema_by_id_with_type(id)?;
        if schema.schema_type != SchemaType::Protobuf {
            return Err(Error::protobuf(
                format!("schema id {id}"),
                format!(
                    "it is a {} schema, not PROTOBUF: the record was not written by a \
                     Protobuf serializer",
                    schema.schema_type
                ),
            ));
        }
        let parsed = parse_registered(&format!("schema id {id}"), &schema.schema)?;
        let tree = Arc::new(MessageTree::of(&parsed));
        let mut trees = write(&self.trees);
        if trees.len() >= CACHE_CAPACITY {
            trees.clear();
        }
        trees.insert(id, Arc::clone(&tree));
        Ok(tree)
    }

    /// Splits a record into its message bytes, after checking that its
    /// indexes name `M`'s message in the writer's schema.
    fn payload<'a>(&self, bytes: &'a [u8]) -> Result<&'a [u8]> {
        let (id, rest) = wire::split(bytes)?;
        let (path, message) = indexes::read(rest)?;
        let tree = self.tree(id)?;
        let expected = self.schema.message_name();
        match tree.name_at(&path) {
            Ok(name) if name == expected => Ok(message),
            Ok(name) => Err(Error::protobuf(
                format!("message indexes {path:?} in schema id {id}"),
                format!("they name {name}, but this serde reads {expected}"),
            )),
            Err(why) => Err(Error::protobuf(
                format!("message indexes {path:?} in schema id {id}"),
                why,
            )),
        }
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

impl<M> Serde<M> for ProtobufSerde<M>
where
    M: prost::Message + Default + 'static,
{
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &M,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        self.serialize_into(topic, headers, value, &mut out)?;
        Ok(Some(out))
    }

    fn serialize_into(
        &self,
        topic: &str,
        _: &mut Headers,
        value: &M,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        let (id, path) = self.writer(topic).map_err(|e| self.error(topic, e))?;
        let start = out.len();
        wire::write_header(id, out);
        indexes::write(&path, out);
        value.encode(out).map_err(|e| {
            // A caller's reused buffer never holds half a record.
            out.truncate(start);
            self.error(topic, format!("the message does not encode: {e}"))
        })?;
        Ok(true)
    }

    fn deserialize(&self, topic: &str, _: &Headers, bytes: Option<&[u8]>) -> Result<M, SerdeError> {
        let bytes = bytes.ok_or_else(|| SerdeError::UnexpectedNull {
            topic: topic.to_owned(),
            type_name: std::any::type_name::<M>(),
        })?;
        let message = self.payload(bytes).map_err(|e| self.error(topic, e))?;
        M::decode(message).map_err(|e| {
            self.error(
                topic,
                format!(
                    "the message does not decode as {}: {e}",
                    std::any::type_name::<M>()
                ),
            )
        })
    }
}
