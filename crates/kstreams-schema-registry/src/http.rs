//! A blocking client of the Confluent Schema Registry REST API, with the
//! answers cached.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use serde::Deserialize;

use crate::client::{
    RegisteredSchema, RegistrySchema, SchemaReference, SchemaRegistryClient, SchemaType, Version,
};
use crate::config::RegistryConfig;
use crate::error::{Error, Result};
use crate::wire::SchemaId;

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";
const ACCEPT: &str =
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json";

/// Talks to a registry that speaks the Confluent REST API (Confluent Schema
/// Registry, Apicurio Registry's `/apis/ccompat/v7`, Redpanda, Karapace).
///
/// Ids, schema texts and numbered versions never change once registered,
/// so every answer except `latest` is cached for the client's lifetime:
/// after the first record of a schema no call reaches the network.
/// With several URLs, each call tries them in order until one answers.
#[derive(Debug)]
pub struct HttpSchemaRegistryClient {
    config: RegistryConfig,
    agent: ureq::Agent,
    authorization: Option<String>,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    schemas: HashMap<SchemaId, RegistrySchema>,
    registered: HashMap<(String, RegistrySchema), SchemaId>,
    looked_up: HashMap<(String, RegistrySchema), RegisteredSchema>,
    versions: HashMap<(String, u32), RegisteredSchema>,
}

/// A reference as the REST API spells it.
#[derive(Debug, Deserialize, serde::Serialize)]
struct ReferenceJson {
    name: String,
    subject: String,
    version: u32,
}

#[derive(Debug, Deserialize)]
struct IdAnswer {
    id: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaAnswer {
    schema: String,
    /// Absent for Avro, as Confluent's registry answers.
    schema_type: Option<String>,
    references: Option<Vec<ReferenceJson>>,
}

impl SchemaAnswer {
    fn into_schema(self, base: &str) -> Result<RegistrySchema> {
        Ok(RegistrySchema {
            schema_type: parse_type(base, self.schema_type.as_deref())?,
            schema: self.schema,
            references: from_json(self.references),
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VersionAnswer {
    subject: String,
    version: u32,
    id: u32,
    schema: String,
    schema_type: Option<String>,
    references: Option<Vec<ReferenceJson>>,
}

impl VersionAnswer {
    fn into_registered(self, base: &str) -> Result<RegisteredSchema> {
        Ok(RegisteredSchema {
            schema_type: parse_type(base, self.schema_type.as_deref())?,
            subject: self.subject,
            version: self.version,
            id: SchemaId(self.id),
            schema: self.schema,
            references: from_json(self.references),
        })
    }
}

fn parse_type(base: &str, schema_type: Option<&str>) -> Result<SchemaType> {
    match schema_type {
        None => Ok(SchemaType::Avro),
        Some(name) => name.parse().map_err(|message| Error::BadResponse {
            url: base.to_owned(),
            message,
        }),
    }
}

fn from_json(references: Option<Vec<ReferenceJson>>) -> Vec<SchemaReference> {
    references
        .unwrap_or_default()
        .into_iter()
        .map(|r| SchemaReference::new(r.name, r.subject, r.version))
        .collect()
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error_code: Option<i64>,
    message: Option<String>,
}

enum Method {
    Get,
    Post(String),
}

impl HttpSchemaRegistryClient {
    /// A client for the registry `config` names.
    pub fn new(config: RegistryConfig) -> Result<Self> {
        if config.urls.is_empty() {
            return Err(Error::Config {
                key: crate::config::SCHEMA_REGISTRY_URL.into(),
                message: "no URL given".into(),
            });
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(config.connect_timeout))
            .timeout_recv_response(Some(config.read_timeout))
            .timeout_recv_body(Some(config.read_timeout))
            .build()
            .new_agent();
        let authorization = config.basic_auth.as_ref().map(|(user, password)| {
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Basic {token}")
        });
        Ok(HttpSchemaRegistryClient {
            config,
            agent,
            authorization,
            cache: Mutex::default(),
        })
    }

    /// A client from Confluent-style properties (see
    /// [`RegistryConfig::from_properties`]).
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        Self::new(RegistryConfig::from_properties(properties)?)
    }

    /// The registry's address (the first URL).
    pub fn url(&self) -> &str {
        &self.config.urls[0]
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // Every update is a single insert, so a poisoned cache is consistent.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends one request to the first URL that answers and reads its JSON.
    fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: &Method,
        path: &str,
        what: impl Fn() -> String,
    ) -> Result<T> {
        let mut unreachable = None;
        for base in &self.config.urls {
            let url = format!("{base}{path}");
            let sent = match method {
                Method::Get => {
                    let mut request = self.agent.get(&url).header("Accept", ACCEPT);
                    if let Some(authorization) = &self.authorization {
                        request = request.header("Authorization", authorization);
                    }
                    request.call()
                }
                Method::Post(body) => {
                    let mut request = self
                        .agent
                        .post(&url)
                        .header("Accept", ACCEPT)
                        .header("Content-Type", CONTENT_TYPE);
                    if let Some(authorization) = &self.authorization {
                        request = request.header("Authorization", authorization);
                    }
                    request.send(body.as_str())
                }
            };
            let mut response = match sent {
                Ok(response) => response,
                Err(error) => {
                    unreachable = Some(Error::Unreachable {
                        url: base.clone(),
                        message: error.to_string(),
                    });
                    continue;
                }
            };
            let status = response.status().as_u16();
            let body = response
                .body_mut()
                .read_to_string()
                .map_err(|e| Error::BadResponse {
                    url: base.clone(),
                    message: format!("reading the body of {url}: {e}"),
                })?;
            return answer(base, status, &body, what);
        }
        Err(unreachable.expect("at least one URL was tried"))
    }
}

/// Turns a registry's answer into `T` or into the error its body describes.
fn answer<T: serde::de::DeserializeOwned>(
    base: &str,
    status: u16,
    body: &str,
    what: impl Fn() -> String,
) -> Result<T> {
    if (200..300).contains(&status) {
        return serde_json::from_str(body).map_err(|e| Error::BadResponse {
            url: base.to_owned(),
            message: format!("{e} in {}", excerpt(body)),
        });
    }
    let (error_code, message) = match serde_json::from_str::<ErrorAnswer>(body) {
        Ok(parsed) => (
            parsed.error_code,
            parsed.message.unwrap_or_else(|| excerpt(body)),
        ),
        Err(_) => (None, excerpt(body)),
    };
    if status == 404 {
        Err(Error::NotFound {
            what: what(),
            url: base.to_owned(),
            error_code,
            message,
        })
    } else {
        Err(Error::Rejected {
            url: base.to_owned(),
            status,
            error_code,
            message,
        })
    }
}

fn excerpt(body: &str) -> String {
    const MAX: usize = 200;
    match body.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &body[..cut]),
        None if body.is_empty() => "(empty body)".into(),
        None => body.to_owned(),
    }
}

/// Percent-encodes a subject for a URL path segment: subjects may contain
/// anything, `RecordNameStrategy` ones contain dots, user ones slashes.
fn path_segment(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for byte in subject.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The body of a register or lookup request: `schemaType` only for the
/// formats other than Avro, as Confluent's client sends it (and older
/// registries, which know only Avro, expect).
fn schema_body(schema: &RegistrySchema) -> String {
    let mut body = serde_json::json!({ "schema": schema.schema });
    if schema.schema_type != SchemaType::Avro {
        body["schemaType"] = schema.schema_type.as_str().into();
    }
    if !schema.references.is_empty() {
        let references: Vec<ReferenceJson> = schema
            .references
            .iter()
            .map(|r| ReferenceJson {
                name: r.name.clone(),
                subject: r.subject.clone(),
                version: r.version,
            })
            .collect();
        body["references"] = serde_json::json!(references);
    }
    body.to_string()
}

impl SchemaRegistryClient for HttpSchemaRegistryClient {
    fn register_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<SchemaId> {
        let key = (subject.to_owned(), schema.clone());
        if let Some(id) = self.cache().registered.get(&key) {
            return Ok(*id);
        }
        let path = format!("/subjects/{}/versions", path_segment(subject));
        let answer: IdAnswer = self.call(&Method::Post(schema_body(schema)), &path, || {
            format!("subject {subject}")
        })?;
        let id = SchemaId(answer.id);
        let mut cache = self.cache();
        cache.registered.insert(key, id);
        cache.schemas.entry(id).or_insert_with(|| schema.clone());
        Ok(id)
    }

    fn lookup_schema(&self, subject: &str, schema: &RegistrySchema) -> Result<RegisteredSchema> {
        let key = (subject.to_owned(), schema.clone());
        if let Some(found) = self.cache().looked_up.get(&key) {
            return Ok(found.clone());
        }
        let path = format!("/subjects/{}", path_segment(subject));
        let answer: VersionAnswer = self.call(&Method::Post(schema_body(schema)), &path, || {
            format!("schema under subject {subject}")
        })?;
        let found = answer.into_registered(self.url())?;
        self.cache().looked_up.insert(key, found.clone());
        Ok(found)
    }

    fn schema_by_id_with_type(&self, id: SchemaId) -> Result<RegistrySchema> {
        if let Some(schema) = self.cache().schemas.get(&id) {
            return Ok(schema.clone());
        }
        let path = format!("/schemas/ids/{id}");
        let answer: SchemaAnswer = self.call(&Method::Get, &path, || format!("schema id {id}"))?;
        let schema = answer.into_schema(self.url())?;
        self.cache().schemas.insert(id, schema.clone());
        Ok(schema)
    }

    fn schema_by_version(&self, subject: &str, version: Version) -> Result<RegisteredSchema> {
        if let Version::Number(number) = version {
            if let Some(found) = self.cache().versions.get(&(subject.to_owned(), number)) {
                return Ok(found.clone());
            }
        }
        let path = format!("/subjects/{}/versions/{version}", path_segment(subject));
        let answer: VersionAnswer = self.call(&Method::Get, &path, || {
            format!("version {version} of subject {subject}")
        })?;
        let found = answer.into_registered(self.url())?;
        let mut cache = self.cache();
        // `latest` moves, but the version it named today is fixed.
        cache
            .versions
            .insert((found.subject.clone(), found.version), found.clone());
        cache
            .schemas
            .entry(found.id)
            .or_insert_with(|| found.to_registry_schema());
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_encoded_for_paths() {
        assert_eq!(path_segment("orders-value"), "orders-value");
        assert_eq!(path_segment("com.example.User"), "com.example.User");
        assert_eq!(path_segment("a/b c%"), "a%2Fb%20c%25");
    }

    #[test]
    fn error_bodies_become_errors() {
        let not_found = answer::<IdAnswer>(
            "http://r",
            404,
            r#"{"error_code":40403,"message":"Schema 7 not found"}"#,
            || "schema id 7".into(),
        )
        .unwrap_err();
        assert!(not_found.is_not_found());
        assert_eq!(
            not_found.to_string(),
            "schema id 7 not found in the schema registry at http://r: Schema 7 not found"
        );
        let conflict = answer::<IdAnswer>(
            "http://r",
            409,
            r#"{"error_code":409,"message":"incompatible"}"#,
            String::new,
        )
        .unwrap_err();
        assert_eq!(
            conflict.to_string(),
            "schema registry at http://r answered 409 (error code 409): incompatible"
        );
        let html = answer::<IdAnswer>("http://r", 502, "<html>bad gateway</html>", String::new)
            .unwrap_err();
        assert!(
            html.to_string().contains("502: <html>bad gateway</html>"),
            "{html}"
        );
        let garbage = answer::<IdAnswer>("http://r", 200, "{\"idx\":1}", String::new).unwrap_err();
        assert!(matches!(garbage, Error::BadResponse { .. }), "{garbage}");
        assert_eq!(
            answer::<IdAnswer>("http://r", 200, r#"{"id":12}"#, String::new)
                .unwrap()
                .id,
            12
        );
    }

    #[test]
    fn request_bodies_name_the_format_and_references() {
        assert_eq!(
            schema_body(&RegistrySchema::avro("\"int\"")),
            r#"{"schema":"\"int\""}"#
        );
        let proto = RegistrySchema::new(SchemaType::Protobuf, "import \"a.proto\";")
            .with_references(vec![SchemaReference::new("a.proto", "a.proto", 2)]);
        let body: serde_json::Value = serde_json::from_str(&schema_body(&proto)).unwrap();
        assert_eq!(body["schemaType"], "PROTOBUF");
        assert_eq!(
            body["references"],
            serde_json::json!([{"name":"a.proto","subject":"a.proto","version":2}])
        );
        let answer: SchemaAnswer = serde_json::from_str(
            r#"{"schema":"x","schemaType":"PROTOBUF","references":[{"name":"a.proto","subject":"a.proto","version":2}]}"#,
        )
        .unwrap();
        let expected = RegistrySchema {
            schema: "x".into(),
            ..proto
        };
        assert_eq!(answer.into_schema("http://r").unwrap(), expected);
        let odd: SchemaAnswer =
            serde_json::from_str(r#"{"schema":"x","schemaType":"XML"}"#).unwrap();
        assert!(matches!(
            odd.into_schema("http://r"),
            Err(Error::BadResponse { .. })
        ));
    }

    #[test]
    fn no_url_is_a_config_error() {
        let mut config = RegistryConfig::new("http://r");
        config.urls.clear();
        assert!(matches!(
            HttpSchemaRegistryClient::new(config),
            Err(Error::Config { .. })
        ));
    }
}
