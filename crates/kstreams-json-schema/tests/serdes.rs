//! JsonSchemaSerde against the in-memory registry: the wire format,
//! evolution both ways, validation on write and read, bad bytes.

use std::sync::Arc;

use kstreams_json_schema::{
    JsonSchema, JsonSchemaSerde, MockSchemaRegistryClient, RegistrySchema, SchemaRegistryClient,
    SchemaType, SerdeConfig, SubjectNameStrategy, Version,
};
use kstreams_record::{Headers, Serde, SerdeError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UserV1 {
    name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UserV2 {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    age: Option<i32>,
}

const USER_V1: &str = r#"{"title":"shop.User","type":"object",
    "properties":{"name":{"type":"string","minLength":1}},"required":["name"]}"#;
const USER_V2: &str = r#"{"title":"shop.User","type":"object",
    "properties":{"name":{"type":"string","minLength":1},"age":{"type":"integer","minimum":0}},
    "required":["name"]}"#;

fn serde<T>(registry: &Arc<MockSchemaRegistryClient>, schema: &str) -> JsonSchemaSerde<T> {
    JsonSchemaSerde::new(registry.clone(), JsonSchema::parse(schema).unwrap())
}

#[test]
fn records_are_magic_id_then_the_document() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, USER_V1);
    let bytes = v1
        .serialize("users", &mut Headers::new(), &UserV1 { name: "al".into() })
        .unwrap()
        .unwrap();
    assert_eq!(bytes, b"\x00\x00\x00\x00\x01{\"name\":\"al\"}");
    let registered = registry
        .schema_by_version("users-value", Version::Latest)
        .unwrap();
    assert_eq!(registered.schema_type, SchemaType::Json);
    // Read with any formatting a peer may write.
    let spaced = b"\x00\x00\x00\x00\x01 { \"name\" : \"bo\" }\n";
    assert_eq!(
        v1.deserialize("users", &Headers::new(), Some(spaced))
            .unwrap()
            .name,
        "bo"
    );
}

#[test]
fn old_and_new_readers_read_each_others_records() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, USER_V1).with_validation(true);
    let v2 = serde::<UserV2>(&registry, USER_V2).with_validation(true);
    let old = v1
        .serialize("users", &mut Headers::new(), &UserV1 { name: "ann".into() })
        .unwrap();
    let new = v2
        .serialize(
            "users",
            &mut Headers::new(),
            &UserV2 {
                name: "bo".into(),
                age: Some(4),
            },
        )
        .unwrap();
    assert_ne!(old.as_ref().unwrap()[1..5], new.as_ref().unwrap()[1..5]);
    assert_eq!(
        v2.deserialize("users", &Headers::new(), old.as_deref())
            .unwrap(),
        UserV2 {
            name: "ann".into(),
            age: None
        }
    );
    assert_eq!(
        v1.deserialize("users", &Headers::new(), new.as_deref())
            .unwrap()
            .name,
        "bo"
    );
}

#[test]
fn validation_refuses_documents_on_write_and_read_and_names_the_path() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let strict = serde::<UserV2>(&registry, USER_V2).with_validation(true);
    let bad = UserV2 {
        name: String::new(),
        age: Some(-1),
    };
    let error = strict
        .serialize("users", &mut Headers::new(), &bad)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("at /name") && error.contains("at /age"),
        "{error}"
    );
    // The same value passes without validation, and fails a validating
    // reader: it is checked against the schema it was written with.
    let lax = serde::<UserV2>(&registry, USER_V2);
    let written = lax.serialize("users", &mut Headers::new(), &bad).unwrap();
    let error = strict
        .deserialize("users", &Headers::new(), written.as_deref())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("does not match its writer JSON Schema") && error.contains("at /age"),
        "{error}"
    );
    assert_eq!(
        lax.deserialize("users", &Headers::new(), written.as_deref())
            .unwrap(),
        bad
    );
    // A buffer reused across records keeps no half record.
    let mut out = b"kept".to_vec();
    assert!(strict
        .serialize_into("users", &mut Headers::new(), &bad, &mut out)
        .is_err());
    assert_eq!(out, b"kept");
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, USER_V1);
    v1.serialize("users", &mut Headers::new(), &UserV1 { name: "a".into() })
        .unwrap();
    let error = |bytes: &[u8]| -> String {
        let error = v1
            .deserialize("users", &Headers::new(), Some(bytes))
            .unwrap_err();
        assert!(matches!(error, SerdeError::Custom { .. }), "{error}");
        error.to_string()
    };
    assert!(error(b"{\"name\":\"a\"}").contains("not the Confluent magic byte"));
    assert!(error(b"\x00\x00\x00\x00\x01{\"name\":").contains("is not JSON"));
    assert!(error(b"\x00\x00\x00\x00\x01{\"nom\":1}").contains("does not map to"));
    assert!(error(b"\x00\x00\x00\x00\x07{}").contains("schema id 7 not found"));
    let deep = [b"\x00\x00\x00\x00\x01".to_vec(), vec![b'['; 10_000]].concat();
    assert!(error(&deep).contains("is not JSON"));
    let avro = registry.register("a", r#""string""#).unwrap();
    let mut foreign = vec![0];
    foreign.extend_from_slice(&avro.0.to_be_bytes());
    foreign.extend_from_slice(b"{}");
    assert!(error(&foreign).contains("is a AVRO schema, not JSON"));
}

#[test]
fn strategies_and_latest_version() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let config = SerdeConfig {
        value_subject_name_strategy: SubjectNameStrategy::RecordName,
        ..SerdeConfig::default()
    };
    serde::<UserV1>(&registry, USER_V1)
        .with_config(config.clone())
        .serialize("any", &mut Headers::new(), &UserV1 { name: "a".into() })
        .unwrap();
    assert!(registry
        .schema_by_version("shop.User", Version::Latest)
        .is_ok());
    let untitled = serde::<UserV1>(&registry, r#"{"type":"object"}"#)
        .with_config(config)
        .serialize("any", &mut Headers::new(), &UserV1 { name: "a".into() })
        .unwrap_err()
        .to_string();
    assert!(untitled.contains("without a title"), "{untitled}");

    let latest = registry
        .register_schema(
            "users-value",
            &RegistrySchema::new(SchemaType::Json, USER_V2),
        )
        .unwrap();
    let writer = serde::<UserV1>(&registry, USER_V1)
        .with_properties([
            ("auto.register.schemas", "false"),
            ("use.latest.version", "true"),
            ("json.fail.invalid.schema", "true"),
        ])
        .unwrap();
    let bytes = writer
        .serialize("users", &mut Headers::new(), &UserV1 { name: "a".into() })
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[1..5], &latest.0.to_be_bytes());
}
