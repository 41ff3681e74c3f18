//! The Schema Registry operations the serdes need, as a trait with two
//! implementations: [`HttpSchemaRegistryClient`](crate::HttpSchemaRegistryClient)
//! for a real registry and [`MockSchemaRegistryClient`] in memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::wire::SchemaId;

/// One version of a subject, as the registry returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// The subject it is registered under.
    pub subject: String,
    /// Its version within the subject, from 1.
    pub version: u32,
    /// Its id, the one the wire format carries.
    pub id: SchemaId,
    /// The schema's JSON text.
    pub schema: String,
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
pub trait SchemaRegistryClient: Send + Sync + 'static {
    /// Registers `schema` (Avro JSON) under `subject` and returns its id;
    /// an already registered schema keeps its id. The registry may refuse a
    /// schema that breaks the subject's compatibility rule
    /// ([`Error::Rejected`]).
    fn register(&self, subject: &str, schema: &str) -> Result<SchemaId>;

    /// The id and version of `schema` under `subject`, without registering
    /// it ([`Error::NotFound`] when it is not registered there).
    fn lookup(&self, subject: &str, schema: &str) -> Result<RegisteredSchema>;

    /// The schema text of an id.
    fn schema_by_id(&self, id: SchemaId) -> Result<String>;

    /// One version of a subject.
    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema>;
}

impl<C: SchemaRegistryClient + ?Sized> SchemaRegistryClient for Arc<C> {
    fn register(&self, subject: &str, schema: &str) -> Result<SchemaId> {
        (**self).register(subject, schema)
    }
    fn lookup(&self, subject: &str, schema: &str) -> Result<RegisteredSchema> {
        (**self).lookup(subject, schema)
    }
    fn schema_by_id(&self, id: SchemaId) -> Result<String> {
        (**self).schema_by_id(id)
    }
    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema> {
        (**self).schema_by_version(subject, version)
    }
}

/// An in-memory registry, as Confluent's `MockSchemaRegistryClient`: for
/// tests and examples that have no registry running.
///
/// Ids are global and start at 1; a schema registered under two subjects
/// keeps one id, as in Confluent's registry. Schemas are compared by their
/// Avro canonical form. It checks no compatibility rule (Confluent's `NONE`).
#[derive(Debug, Default)]
pub struct MockSchemaRegistryClient {
    state: Mutex<MockState>,
    calls: AtomicUsize,
}

#[derive(Debug, Default)]
struct MockState {
    /// Schema text by id - 1.
    schemas: Vec<String>,
    /// Canonical form to id.
    ids: HashMap<String, SchemaId>,
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

    /// Stores `schema` under exactly `id` (not under a subject), as a record
    /// from another registry would need: a wire-format test vector names its
    /// own id.
    pub fn add_with_id(&self, id: SchemaId, schema: &str) -> Result<()> {
        let canonical = canonical_form(schema)?;
        let mut state = self.lock();
        let index = id.0.checked_sub(1).ok_or_else(|| Error::Config {
            key: "schema id".into(),
            message: "ids start at 1".into(),
        })? as usize;
        if state.schemas.len() <= index {
            // Ids below it stay unknown: an empty text is never a schema.
            state.schemas.resize(index + 1, String::new());
        }
        state.schemas[index] = schema.to_owned();
        state.ids.insert(canonical, id);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MockState> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // A panic elsewhere while holding the lock leaves consistent maps:
        // every update is a single insert or push.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn canonical_form(schema: &str) -> Result<String> {
    apache_avro::Schema::parse_str(schema)
        .map(|parsed| parsed.canonical_form())
        .map_err(|e| Error::Rejected {
            url: MOCK_URL.into(),
            status: 422,
            error_code: Some(42201),
            message: format!("invalid Avro schema: {e}"),
        })
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

    fn registered(&self, subject: &str, version: u32, id: SchemaId) -> RegisteredSchema {
        RegisteredSchema {
            subject: subject.to_owned(),
            version,
            id,
            schema: self.schemas[id.0 as usize - 1].clone(),
        }
    }
}

impl SchemaRegistryClient for MockSchemaRegistryClient {
    fn register(&self, subject: &str, schema: &str) -> Result<SchemaId> {
        let canonical = canonical_form(schema)?;
        let mut state = self.lock();
        let id = match state.ids.get(&canonical) {
            Some(id) => *id,
            None => {
                state.schemas.push(schema.to_owned());
                let id = SchemaId(state.schemas.len() as u32);
                state.ids.insert(canonical, id);
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

    fn lookup(&self, subject: &str, schema: &str) -> Result<RegisteredSchema> {
        let canonical = canonical_form(schema)?;
        let state = self.lock();
        if !state.subjects.contains_key(subject) {
            return Err(not_found(format!("subject {subject}"), 40401));
        }
        let found = state
            .ids
            .get(&canonical)
            .and_then(|id| Some((*id, state.version_of(subject, *id)?)));
        match found {
            Some((id, version)) => Ok(state.registered(subject, version, id)),
            None => Err(not_found(format!("schema under subject {subject}"), 40403)),
        }
    }

    fn schema_by_id(&self, id: SchemaId) -> Result<String> {
        let state = self.lock();
        match (id.0 as usize)
            .checked_sub(1)
            .and_then(|i| state.schemas.get(i))
        {
            Some(schema) if !schema.is_empty() => Ok(schema.clone()),
            _ => Err(not_found(format!("schema id {id}"), 40403)),
        }
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
}
