//! The Schema Registry operations the serdes need, as a trait with two
//! implementations: [`HttpSchemaRegistryClient`](crate::HttpSchemaRegistryClient)
//! for a real registry and [`MockSchemaRegistryClient`] in memory.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::wire::SchemaId;

/// The format of a schema, as the registry's `schemaType` names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SchemaType {
    /// Avro JSON; the registry's default when `schemaType` is absent.
    #[default]
    Avro,
    /// Protobuf source (a `.proto` file's text).
    Protobuf,
    /// JSON Schema.
    Json,
}

impl SchemaType {
    /// The registry's name: `AVRO`, `PROTOBUF` or `JSON`.
    ///
    /// ```
    /// use kstreams_schema_registry::SchemaType;
    /// assert_eq!(SchemaType::Protobuf.as_str(), "PROTOBUF");
    /// assert_eq!("JSON".parse::<SchemaType>(), Ok(SchemaType::Json));
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}

impl fmt::Display for SchemaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SchemaType {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_uppercase().as_str() {
            "AVRO" => Ok(SchemaType::Avro),
            "PROTOBUF" => Ok(SchemaType::Protobuf),
            "JSON" => Ok(SchemaType::Json),
            other => Err(format!(
                "unknown schema type `{other}`; expected AVRO, PROTOBUF or JSON"
            )),
        }
    }
}

/// A schema's reference to another registered schema, as the registry
/// stores it: a Protobuf `import`, a JSON Schema `$ref`, an Avro named type
/// defined elsewhere.
///
/// ```
/// use kstreams_schema_registry::SchemaReference;
///
/// // Confluent's default: an import is registered under its own file name.
/// let import = SchemaReference::new("shop/money.proto", "shop/money.proto", 1);
/// assert_eq!(import.subject, import.name);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaReference {
    /// The name the referring schema uses (the import path).
    pub name: String,
    /// The subject the referenced schema is registered under.
    pub subject: String,
    /// Its version in that subject.
    pub version: u32,
}

impl SchemaReference {
    /// A reference to `version` of `subject`, known to the referrer as `name`.
    pub fn new(name: impl Into<String>, subject: impl Into<String>, version: u32) -> Self {
        SchemaReference {
            name: name.into(),
            subject: subject.into(),
            version,
        }
    }
}

/// A schema as the registry takes and gives it: its text, its format and
/// the schemas it references.
///
/// ```
/// use kstreams_schema_registry::{RegistrySchema, SchemaType};
///
/// let schema = RegistrySchema::new(SchemaType::Json, r#"{"type":"object"}"#);
/// assert!(schema.references.is_empty());
/// assert_eq!(RegistrySchema::avro("\"string\"").schema_type, SchemaType::Avro);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RegistrySchema {
    /// The format.
    pub schema_type: SchemaType,
    /// The schema's text: Avro JSON, `.proto` source, JSON Schema.
    pub schema: String,
    /// The registered schemas it uses, in the order it names them.
    pub references: Vec<SchemaReference>,
}

impl RegistrySchema {
    /// A schema of `schema_type` without references.
    pub fn new(schema_type: SchemaType, schema: impl Into<String>) -> Self {
        RegistrySchema {
            schema_type,
            schema: schema.into(),
            references: Vec::new(),
        }
    }

    /// An Avro schema without references.
    pub fn avro(schema: impl Into<String>) -> Self {
        Self::new(SchemaType::Avro, schema)
    }

    /// The same schema with `references`.
    pub fn with_references(mut self, references: Vec<SchemaReference>) -> Self {
        self.references = references;
        self
    }
}

/// One version of a subject, as the registry returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// The subject it is registered under.
    pub subject: String,
    /// Its version within the subject, from 1.
    pub version: u32,
    /// Its id, the one the wire format carries.
    pub id: SchemaId,
    /// The schema's text.
    pub schema: String,
    /// Its format.
    pub schema_type: SchemaType,
    /// The registered schemas it references.
    pub references: Vec<SchemaReference>,
}

impl RegisteredSchema {
    /// The schema without its subject, version and id.
    pub fn to_registry_schema(&self) -> RegistrySchema {
        RegistrySchema {
            schema_type: self.schema_type,
            schema: self.schema.clone(),
            references: self.references.clone(),
        }
    }
}

/// Which version of a subject to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Version {
    /// The newest version (`/versions/latest`).
    Latest,
    /// A version number, from 1.
    Number(u32),
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Number(n) => n.fmt(f),
        }
    }
}

/// A Confluent Schema Registry: what a serializer and a deserializer ask it.
///
/// Calls block; the serdes call them on the stream thread, once per new
/// schema or id (they cache the answers), never per record.
///
/// The `*_schema` methods take and give schemas of any format with their
/// references; [`register`](Self::register), [`lookup`](Self::lookup) and
/// [`schema_by_id`](Self::schema_by_id) are their Avro shorthands.
///
/// ```
/// use kstreams_schema_registry::{
///     MockSchemaRegistryClient, RegistrySchema, SchemaRegistryClient, SchemaType, Version,
/// };
///
/// let registry = MockSchemaRegistryClient::new();
/// let proto = RegistrySchema::new(SchemaType::Protobuf, "syntax = \"proto3\"; message A {}");
/// let id = registry.register_schema("a-value", &proto)?;
/// assert_eq!(registry.schema_by_id_with_type(id)?, proto);
/// assert_eq!(registry.schema_by_version("a-value", Version::Latest)?.id, id);
/// # Ok::<(), kstreams_schema_registry::Error>(())
/// ```
pub trait SchemaRegistryClient: Send + Sync + 'static {
    /// Registers `schema` under `subject` and returns its id; an already
    /// registered schema keeps its id. The registry may refuse a schema
    /// that breaks the subject's compatibility rule, or whose references
    /// it does not know ([`Error::Rejected`]).
    fn register_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<SchemaId>;

    /// The id and version of `schema` under `subject`, without registering
    /// it ([`Error::NotFound`] when it is not registered there).
    fn lookup_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<RegisteredSchema>;

    /// The schema of an id, with its format and references.
    fn schema_by_id_with_type(&self, id: SchemaId) -> Result<RegistrySchema>;

    /// One version of a subject.
    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema>;

    /// Registers the Avro schema `schema` (its JSON text) under `subject`.
    fn register(&self, subject: &str, schema: &str) -> Result<SchemaId> {
        self.register_schema(subject, &RegistrySchema::avro(schema))
    }

    /// Looks up the Avro schema `schema` under `subject`.
    fn lookup(&self, subject: &str, schema: &str) -> Result<RegisteredSchema> {
        self.lookup_schema(subject, &RegistrySchema::avro(schema))
    }

    /// The schema text of an id.
    fn schema_by_id(&self, id: SchemaId) -> Result<String> {
        self.schema_by_id_with_type(id).map(|found| found.schema)
    }
}

impl<C: SchemaRegistryClient + ?Sized> SchemaRegistryClient for Arc<C> {
    fn register_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<SchemaId> {
        (**self).register_schema(subject, schema)
    }
    fn lookup_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<RegisteredSchema> {
        (**self).lookup_schema(subject, schema)
    }
    fn schema_by_id_with_type(&self, id: SchemaId) -> Result<RegistrySchema> {
        (**self).schema_by_id_with_type(id)
    }
    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema> {
        (**self).schema_by_version(subject, version)
    }
}

/// An in-memory registry, as Confluent's `MockSchemaRegistryClient`: for
/// tests and examples that have no registry running.
///
/// Ids are global and start at 1; a schema registered under two subjects
/// keeps one id, as in Confluent's registry. Schemas are compared by
/// format, references and a canonical text: the Avro canonical form (with
/// the `avro` feature), JSON re-written without whitespace (JSON Schema, and
/// Avro without the feature), the text with runs of whitespace folded
/// (Protobuf). Texts that are not what their format needs (an Avro or JSON
/// schema that does not parse) are refused with 422, as the registry
/// does, and so are references to versions it does not hold. It checks no
/// compatibility rule (Confluent's `NONE`).
///
/// ```
/// use kstreams_schema_registry::{MockSchemaRegistryClient, SchemaRegistryClient};
///
/// let registry = MockSchemaRegistryClient::new();
/// let id = registry.register("users-value", r#"{"type": "string"}"#)?;
/// assert_eq!(registry.register("other-value", r#"{"type":"string"}"#)?, id);
/// # Ok::<(), kstreams_schema_registry::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct MockSchemaRegistryClient {
    state: Mutex<MockState>,
    calls: AtomicUsize,
}

/// What makes two registered schemas the same one.
type Identity = (SchemaType, String, Vec<SchemaReference>);

#[derive(Debug, Default)]
struct MockState {
    /// Schemas by id - 1; `None` for ids never given.
    schemas: Vec<Option<RegistrySchema>>,
    /// Identity to id.
    ids: HashMap<Identity, SchemaId>,
    /// Each subject's ids, by version - 1.
    subjects: HashMap<String, Vec<SchemaId>>,
}

const MOCK_URL: &str = "mock://";

impl MockSchemaRegistryClient {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many calls the registry got: tests use it to check that a serde
    /// asks once per schema, not once per record.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    /// Stores the Avro schema `schema` under exactly `id` (not under a
    /// subject), as a record from another registry would need: a
    /// wire-format test vector names its own id.
    pub fn add_with_id(&self, id: SchemaId, schema: &str) -> Result<()> {
        self.add_schema_with_id(id, RegistrySchema::avro(schema))
    }

    /// Stores `schema`, of any format, under exactly `id`.
    pub fn add_schema_with_id(&self, id: SchemaId, schema: RegistrySchema) -> Result<()> {
        let identity = identity(&schema)?;
        let mut state = self.lock();
        let index = id.0.checked_sub(1).ok_or_else(|| Error::Config {
            key: "schema id".into(),
            message: "ids start at 1".into(),
        })? as usize;
        if state.schemas.len() <= index {
            state.schemas.resize(index + 1, None);
        }
        state.schemas[index] = Some(schema);
        state.ids.insert(identity, id);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MockState> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // A panic elsewhere while holding the lock leaves consistent maps:
        // every update is a single insert or push.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn invalid(message: String) -> Error {
    Error::Rejected {
        url: MOCK_URL.into(),
        status: 422,
        error_code: Some(42201),
        message,
    }
}

/// The text two schemas of one format share when the registry treats them
/// as one.
fn canonical_form(schema_type: SchemaType, text: &str) -> Result<String> {
    match schema_type {
        #[cfg(feature = "avro")]
        SchemaType::Avro => apache_avro::Schema::parse_str(text)
            .map(|parsed| parsed.canonical_form())
            .map_err(|e| invalid(format!("invalid Avro schema: {e}"))),
        #[cfg(not(feature = "avro"))]
        SchemaType::Avro => compact_json(schema_type, text),
        SchemaType::Json => compact_json(schema_type, text),
        SchemaType::Protobuf => Ok(text.split_whitespace().collect::<Vec<_>>().join(" ")),
    }
}

fn compact_json(schema_type: SchemaType, text: &str) -> Result<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|value| value.to_string())
        .map_err(|e| invalid(format!("invalid {schema_type} schema: {e}")))
}

fn identity(schema: &RegistrySchema) -> Result<Identity> {
    Ok((
        schema.schema_type,
        canonical_form(schema.schema_type, &schema.schema)?,
        schema.references.clone(),
    ))
}

fn not_found(what: String, error_code: i64) -> Error {
    Error::NotFound {
        message: format!("{what} is not registered"),
        what,
        url: MOCK_URL.into(),
        error_code: Some(error_code),
    }
}

impl MockState {
    fn version_of(&self, subject: &str, id: SchemaId) -> Option<u32> {
        let versions = self.subjects.get(subject)?;
        let index = versions.iter().position(|v| *v == id)?;
        Some(index as u32 + 1)
    }

    fn schema(&self, id: SchemaId) -> Option<&RegistrySchema> {
        let index = (id.0 as usize).checked_sub(1)?;
        self.schemas.get(index)?.as_ref()
    }

    fn registered(&self, subject: &str, version: u32, id: SchemaId) -> RegisteredSchema {
        let schema = self.schema(id).cloned().unwrap_or_default();
        RegisteredSchema {
            subject: subject.to_owned(),
            version,
            id,
            schema: schema.schema,
            schema_type: schema.schema_type,
            references: schema.references,
        }
    }

    fn check_references(&self, schema: &RegistrySchema) -> Result<()> {
        for reference in &schema.references {
            let known = self
                .subjects
                .get(&reference.subject)
                .is_some_and(|versions| (1..=versions.len() as u32).contains(&reference.version));
            if !known {
                return Err(invalid(format!(
                    "reference {} names version {} of subject {}, which is not registered",
                    reference.name, reference.version, reference.subject
                )));
            }
        }
        Ok(())
    }
}

impl SchemaRegistryClient for MockSchemaRegistryClient {
    fn register_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<SchemaId> {
        let identity = identity(schema)?;
        let mut state = self.lock();
        state.check_references(schema)?;
        let id = match state.ids.get(&identity) {
            Some(id) => *id,
            None => {
                state.schemas.push(Some(schema.clone()));
                let id = SchemaId(state.schemas.len() as u32);
                state.ids.insert(identity, id);
                id
            }
        };
        if state.version_of(subject, id).is_none() {
            state
                .subjects
                .entry(subject.to_owned())
                .or_default()
                .push(id);
        }
        Ok(id)
    }

    fn lookup_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<RegisteredSchema> {
        let identity = identity(schema)?;
        let state = self.lock();
        if !state.subjects.contains_key(subject) {
            return Err(not_found(format!("subject {subject}"), 40401));
        }
        let found = state
            .ids
            .get(&identity)
            .and_then(|id| Some((*id, state.version_of(subject, *id)?)));
        match found {
            Some((id, version)) => Ok(state.registered(subject, version, id)),
            None => Err(not_found(format!("schema under subject {subject}"), 40403)),
        }
    }

    fn schema_by_id_with_type(&self, id: SchemaId) -> Result<RegistrySchema> {
        let state = self.lock();
        state
            .schema(id)
            .cloned()
            .ok_or_else(|| not_found(format!("schema id {id}"), 40403))
    }

    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema> {
        let state = self.lock();
        let versions = state
            .subjects
            .get(subject)
            .ok_or_else(|| not_found(format!("subject {subject}"), 40401))?;
        let number = match version {
            Version::Latest => versions.len() as u32,
            Version::Number(n) => n,
        };
        let id = (number as usize)
            .checked_sub(1)
            .and_then(|i| versions.get(i))
            .ok_or_else(|| not_found(format!("version {version} of subject {subject}"), 40402))?;
        Ok(state.registered(subject, number, *id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str =
        r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
    const V2: &str = r#"{"type":"record","name":"User","fields":[
        {"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;

    #[test]
    fn ids_are_global_and_versions_per_subject() {
        let registry = MockSchemaRegistryClient::new();
        let v1 = registry.register("a-value", V1).unwrap();
        assert_eq!(registry.register("a-value", V1).unwrap(), v1);
        let v2 = registry.register("a-value", V2).unwrap();
        assert_eq!(registry.register("b-value", V2).unwrap(), v2);
        assert_ne!(v1, v2);
        let latest = registry
            .schema_by_version("a-value", Version::Latest)
            .unwrap();
        assert_eq!((latest.version, latest.id), (2, v2));
        let b = registry
            .schema_by_version("b-value", Version::Number(1))
            .unwrap();
        assert_eq!((b.version, b.id, b.schema.as_str()), (1, v2, V2));
        assert_eq!(registry.schema_by_id(v1).unwrap(), V1);
        assert_eq!(registry.lookup("a-value", V2).unwrap().version, 2);
    }

    #[test]
    fn missing_things_are_not_found() {
        let registry = MockSchemaRegistryClient::new();
        assert!(registry
            .schema_by_id(SchemaId(1))
            .unwrap_err()
            .is_not_found());
        assert!(registry
            .schema_by_id(SchemaId(0))
            .unwrap_err()
            .is_not_found());
        assert!(registry
            .schema_by_version("x", Version::Latest)
            .unwrap_err()
            .is_not_found());
        registry.register("x", V1).unwrap();
        assert!(registry.lookup("x", V2).unwrap_err().is_not_found());
        assert!(registry
            .schema_by_version("x", Version::Number(2))
            .unwrap_err()
            .is_not_found());
        let invalid = registry.register("x", "{not json").unwrap_err();
        let json = RegistrySchema::new(SchemaType::Json, "{not json");
        assert!(matches!(
            registry.register_schema("x", &json),
            Err(Error::Rejected { status: 422, .. })
        ));
        assert!(
            matches!(invalid, Error::Rejected { status: 422, .. }),
            "{invalid}"
        );
    }

    #[test]
    fn a_schema_can_be_placed_at_a_given_id() {
        let registry = MockSchemaRegistryClient::new();
        registry.add_with_id(SchemaId(3), V1).unwrap();
        assert_eq!(registry.schema_by_id(SchemaId(3)).unwrap(), V1);
        assert!(registry
            .schema_by_id(SchemaId(2))
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn formats_and_references_are_part_of_a_schema() {
        let registry = MockSchemaRegistryClient::new();
        let text = r#"{"type":"string"}"#;
        let avro = registry.register("s", text).unwrap();
        let json = registry
            .register_schema("s", &RegistrySchema::new(SchemaType::Json, text))
            .unwrap();
        assert_ne!(avro, json);
        assert_eq!(
            registry.schema_by_id_with_type(json).unwrap().schema_type,
            SchemaType::Json
        );

        let dependency = RegistrySchema::new(SchemaType::Protobuf, "message M {}");
        let missing = RegistrySchema::new(SchemaType::Protobuf, "import \"m.proto\";")
            .with_references(vec![SchemaReference::new("m.proto", "m.proto", 1)]);
        let error = registry.register_schema("p", &missing).unwrap_err();
        assert!(error.to_string().contains("not registered"), "{error}");
        registry.register_schema("m.proto", &dependency).unwrap();
        let id = registry.register_schema("p", &missing).unwrap();
        let found = registry.schema_by_version("p", Version::Latest).unwrap();
        assert_eq!(
            (found.id, found.to_registry_schema()),
            (id, missing.clone())
        );
        // Whitespace does not make another Protobuf schema.
        let spaced = RegistrySchema {
            schema: "import  \"m.proto\";\n".into(),
            ..missing
        };
        assert_eq!(registry.lookup_schema("p", &spaced).unwrap().id, id);
    }
}
