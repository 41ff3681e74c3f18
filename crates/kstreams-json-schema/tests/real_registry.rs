//! Against a real registry that speaks the Confluent REST API: the one
//! `cargo xtask registry start` runs (Apicurio Registry), found through
//! KSTREAMS_TEST_SCHEMA_REGISTRY. Without it every test here says it is
//! skipped and passes.
//!
//! The cross-client test also needs KSTREAMS_TEST_CONFLUENT_PYTHON (the same
//! `xtask registry start` prints it): a Python with Confluent's
//! `confluent-kafka` serializers, which runs xtask/registry/confluent_peer.py.

use kstreams_json_schema::{
    JsonSchema, JsonSchemaSerde, SchemaRegistryClient, SchemaType, Version,
};
use kstreams_record::{Headers, Serde};
use serde::{Deserialize, Serialize};

#[path = "../../kstreams-schema-registry/tests/support/mod.rs"]
mod support;
use support::{
    client, env_or_skip, hex, python_peer, set_compatibility, unhex, unique, PYTHON_PEER_ENV,
    REGISTRY_ENV,
};

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

/// Version 1: a name. The content model is closed
/// (`additionalProperties: false`): under Confluent's JSON Schema rules
/// (which Apicurio follows) adding a property to an open one is not
/// backward compatible, since old documents may hold it with another type.
const USER_V1: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"User","type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}"#;
/// Version 2: an optional age more.
const USER_V2: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"User","type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0}},"required":["name"],"additionalProperties":false}"#;
/// Breaking: name is now a number.
const BREAKING: &str = r#"{"$schema":"http://json-schema.org/draft-07/schema#","title":"User","type":"object","properties":{"name":{"type":"integer"}},"required":["name"],"additionalProperties":false}"#;

fn serde<T>(url: &str, schema: &str) -> JsonSchemaSerde<T> {
    JsonSchemaSerde::new(client(url), JsonSchema::parse(schema).unwrap()).with_validation(true)
}

#[test]
fn json_schemas_evolve_and_both_readers_read_both_versions() {
    let Some(url) = env_or_skip(REGISTRY_ENV) else {
        return;
    };
    let topic = unique("evolve");
    let subject = format!("{topic}-value");
    let old = serde::<UserV1>(&url, USER_V1);
    let old_bytes = old
        .serialize(&topic, &mut Headers::new(), &UserV1 { name: "ann".into() })
        .unwrap();
    set_compatibility(&url, &subject, "BACKWARD");
    let new = serde::<UserV2>(&url, USER_V2);
    let new_bytes = new
        .serialize(
            &topic,
            &mut Headers::new(),
            &UserV2 {
                name: "bo".into(),
                age: Some(41),
            },
        )
        .unwrap();
    assert_ne!(
        old_bytes.as_ref().unwrap()[1..5],
        new_bytes.as_ref().unwrap()[1..5]
    );
    let latest = client(&url)
        .schema_by_version(&subject, Version::Latest)
        .unwrap();
    assert_eq!((latest.version, latest.schema_type), (2, SchemaType::Json));

    // Fresh serdes, so writer schemas come from the registry.
    assert_eq!(
        serde::<UserV2>(&url, USER_V2)
            .deserialize(&topic, &Headers::new(), old_bytes.as_deref())
            .unwrap(),
        UserV2 {
            name: "ann".into(),
            age: None
        }
    );
    assert_eq!(
        serde::<UserV1>(&url, USER_V1)
            .deserialize(&topic, &Headers::new(), new_bytes.as_deref())
            .unwrap()
            .name,
        "bo"
    );

    #[derive(Serialize, Deserialize)]
    struct Breaking {
        name: i64,
    }
    let error = serde::<Breaking>(&url, BREAKING)
        .serialize(&topic, &mut Headers::new(), &Breaking { name: 1 })
        .unwrap_err()
        .to_string();
    assert!(error.contains("answered 409"), "{error}");
}

#[test]
fn records_of_confluents_python_serializer_read_in_rust_and_the_other_way() {
    let Some(url) = env_or_skip(REGISTRY_ENV) else {
        return;
    };
    let Some(python) = env_or_skip(PYTHON_PEER_ENV) else {
        return;
    };
    let topic = unique("py");
    let written = unhex(&python_peer(
        &python,
        &[
            "json-write",
            &url,
            &topic,
            USER_V2,
            r#"{"name": "alice", "age": 7}"#,
        ],
    ));
    assert_eq!(written[0], 0, "magic byte first");
    let v2 = serde::<UserV2>(&url, USER_V2);
    assert_eq!(
        v2.deserialize(&topic, &Headers::new(), Some(&written))
            .unwrap(),
        UserV2 {
            name: "alice".into(),
            age: Some(7)
        }
    );
    // Rust finds the schema Python registered: the same id.
    let rust = v2
        .serialize(
            &topic,
            &mut Headers::new(),
            &UserV2 {
                name: "bob".into(),
                age: Some(3),
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(rust[..5], written[..5]);
    let read = python_peer(&python, &["json-read", &url, &topic, &hex(&rust)]);
    assert_eq!(read, r#"{"age": 3, "name": "bob"}"#);
}
