//! Against a real registry that speaks the Confluent REST API: the one
//! `cargo xtask registry start` runs (Apicurio Registry), found through
//! KSTREAMS_TEST_SCHEMA_REGISTRY. Without it every test here says it is
//! skipped and passes.
//!
//! The cross-language test also needs KSTREAMS_TEST_AVRO_JAVA_CLASSPATH (the
//! same `xtask registry start` prints it): it runs the Java peer,
//! xtask/registry/AvroPeer.java, on Apicurio's Java Avro serde for Kafka.
//!
//! Subjects and record names carry a per-run suffix, so runs against one
//! long-lived registry do not see each other's schemas.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use apache_avro::types::Value;
use kstreams_avro::{
    parse_schema, AvroSerde, GenericAvroSerde, GenericRecord, HttpSchemaRegistryClient,
    SchemaRegistryClient, SerdeConfig, SubjectNameStrategy, Version,
};
use kstreams_record::{Headers, Serde};
use serde::{Deserialize, Serialize};

mod common;
use common::{alice, UserV1, UserV2};

const REGISTRY_ENV: &str = "KSTREAMS_TEST_SCHEMA_REGISTRY";
const JAVA_PEER_ENV: &str = "KSTREAMS_TEST_AVRO_JAVA_CLASSPATH";

/// The registry's base URL, or `None` (with a line on stderr) to skip.
fn registry_url() -> Option<String> {
    env_or_skip(REGISTRY_ENV)
}

fn env_or_skip(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => Some(value.trim().to_owned()),
        _ => {
            let test = std::thread::current().name().unwrap_or("test").to_owned();
            // One write straight to the stream: the harness captures the
            // print macros of passing tests, and a skip should be seen.
            let line = format!(
                "skipped {test}: {name} not set (run `eval \"$(cargo xtask registry start)\"`)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}

fn client(url: &str) -> Arc<HttpSchemaRegistryClient> {
    Arc::new(HttpSchemaRegistryClient::from_properties([("schema.registry.url", url)]).unwrap())
}

/// A name no earlier run used.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

/// The user schema of the wire-format spec test, in namespace `namespace`.
fn user_v1(namespace: &str) -> String {
    format!(
        r#"{{"type":"record","name":"User","namespace":"{namespace}","fields":[
            {{"name":"name","type":"string"}},
            {{"name":"favorite_number","type":["null","int"],"default":null}}]}}"#
    )
}

fn user_v2(namespace: &str) -> String {
    format!(
        r#"{{"type":"record","name":"User","namespace":"{namespace}","fields":[
            {{"name":"name","type":"string"}},
            {{"name":"favorite_number","type":["null","int"],"default":null}},
            {{"name":"email","type":"string","default":"unknown"}}]}}"#
    )
}

/// Sets a subject's compatibility rule through the Confluent config API
/// (the serdes never change it; the test wants the registry to check).
fn set_compatibility(url: &str, subject: &str, level: &str) {
    let mut answer = ureq::put(&format!("{url}/config/{subject}"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send(format!(r#"{{"compatibility":"{level}"}}"#))
        .unwrap();
    let body = answer.body_mut().read_to_string().unwrap();
    assert!(body.contains(level), "{body}");
}

#[test]
fn register_and_look_up_by_id_and_by_subject_version() {
    let Some(url) = registry_url() else { return };
    let registry = client(&url);
    let namespace = unique("reg");
    let subject = format!("{namespace}-value");
    let (v1, v2) = (user_v1(&namespace), user_v2(&namespace));

    let id1 = registry.register(&subject, &v1).unwrap();
    assert_eq!(registry.register(&subject, &v1).unwrap(), id1);
    let id2 = registry.register(&subject, &v2).unwrap();
    assert_ne!(id1, id2);

    // A fresh client, so the answers come from the registry, not a cache.
    let fresh = client(&url);
    let by_id = parse_schema(&fresh.schema_by_id(id1).unwrap()).unwrap();
    assert_eq!(
        by_id.canonical_form(),
        parse_schema(&v1).unwrap().canonical_form()
    );
    let first = fresh
        .schema_by_version(&subject, Version::Number(1))
        .unwrap();
    assert_eq!((first.id, first.version), (id1, 1));
    let latest = fresh.schema_by_version(&subject, Version::Latest).unwrap();
    assert_eq!((latest.id, latest.version), (id2, 2));
    let looked_up = fresh.lookup(&subject, &v2).unwrap();
    assert_eq!((looked_up.id, looked_up.version), (id2, 2));

    let no_subject = fresh
        .schema_by_version(&unique("nosuch"), Version::Latest)
        .unwrap_err();
    assert!(no_subject.is_not_found(), "{no_subject}");
    let no_id = fresh
        .schema_by_id(kstreams_avro::SchemaId(i32::MAX as u32))
        .unwrap_err();
    assert!(no_id.is_not_found(), "{no_id}");
    let not_registered = fresh
        .lookup(&subject, &user_v1(&unique("other")))
        .unwrap_err();
    assert!(not_registered.is_not_found(), "{not_registered}");
}

#[test]
fn a_spec_built_record_reads_and_writes_byte_for_byte_through_the_registry() {
    let Some(url) = registry_url() else { return };
    let registry = client(&url);
    let topic = unique("spec");
    let schema = user_v1(&topic);
    let id = registry
        .register(&format!("{topic}-value"), &schema)
        .unwrap();

    // Magic byte, the registry's id big-endian, then the Avro binary datum
    // of {"name": "alice", "favorite_number": 7} (see tests/serdes.rs).
    let mut record = vec![0];
    record.extend_from_slice(&id.0.to_be_bytes());
    record.extend_from_slice(&[0x0a, b'a', b'l', b'i', b'c', b'e', 0x02, 0x0e]);

    let serde = AvroSerde::<UserV1>::new(client(&url), parse_schema(&schema).unwrap());
    let read = serde
        .deserialize(&topic, &Headers::new(), Some(&record))
        .unwrap();
    assert_eq!(read, alice());
    let written = serde
        .serialize(&topic, &mut Headers::new(), &alice())
        .unwrap();
    assert_eq!(written, Some(record));
}

#[test]
fn schemas_evolve_under_backward_compatibility_and_breaking_changes_are_refused() {
    let Some(url) = registry_url() else { return };
    let topic = unique("evolve");
    let subject = format!("{topic}-value");
    let old = AvroSerde::<UserV1>::new(client(&url), parse_schema(&user_v1(&topic)).unwrap());
    let old_bytes = old
        .serialize(&topic, &mut Headers::new(), &alice())
        .unwrap();
    set_compatibility(&url, &subject, "BACKWARD");

    // A separate client per side, as producer and consumer would have.
    let new = AvroSerde::<UserV2>::new(client(&url), parse_schema(&user_v2(&topic)).unwrap());
    let upgraded = new
        .deserialize(&topic, &Headers::new(), old_bytes.as_deref())
        .unwrap();
    assert_eq!(upgraded.email, "unknown");
    let full = UserV2 {
        email: "alice@example.com".into(),
        ..upgraded
    };
    let new_bytes = new.serialize(&topic, &mut Headers::new(), &full).unwrap();
    assert_ne!(
        new_bytes.as_ref().unwrap()[1..5],
        old_bytes.as_ref().unwrap()[1..5]
    );
    let reader = AvroSerde::<UserV1>::new(client(&url), parse_schema(&user_v1(&topic)).unwrap());
    assert_eq!(
        reader
            .deserialize(&topic, &Headers::new(), new_bytes.as_deref())
            .unwrap(),
        alice()
    );
    let latest = client(&url)
        .schema_by_version(&subject, Version::Latest)
        .unwrap();
    assert_eq!(latest.version, 2);

    // A new field without a default cannot read the old records: refused.
    #[derive(Serialize, Deserialize)]
    struct Breaking {
        name: String,
        favorite_number: Option<i32>,
        age: i32,
    }
    let breaking_schema = format!(
        r#"{{"type":"record","name":"User","namespace":"{topic}","fields":[
            {{"name":"name","type":"string"}},
            {{"name":"favorite_number","type":["null","int"],"default":null}},
            {{"name":"age","type":"int"}}]}}"#
    );
    let breaking =
        AvroSerde::<Breaking>::new(client(&url), parse_schema(&breaking_schema).unwrap());
    let value = Breaking {
        name: "x".into(),
        favorite_number: None,
        age: 1,
    };
    let error = breaking
        .serialize(&topic, &mut Headers::new(), &value)
        .unwrap_err()
        .to_string();
    assert!(error.contains("answered 409"), "{error}");
}

#[test]
fn generic_records_under_the_record_name_strategy() {
    let Some(url) = registry_url() else { return };
    let namespace = unique("generic");
    let schema = Arc::new(parse_schema(&user_v1(&namespace)).unwrap());
    let config = SerdeConfig {
        value_subject_name_strategy: SubjectNameStrategy::RecordName,
        ..SerdeConfig::default()
    };
    let writer = GenericAvroSerde::new(client(&url)).with_config(config);
    let record = GenericRecord::new(
        schema,
        Value::Record(vec![
            ("name".into(), Value::String("bob".into())),
            (
                "favorite_number".into(),
                Value::Union(0, Box::new(Value::Null)),
            ),
        ]),
    );
    let bytes = writer
        .serialize("any-topic", &mut Headers::new(), &record)
        .unwrap();
    let reader = GenericAvroSerde::new(client(&url))
        .with_reader_schema(Arc::new(parse_schema(&user_v2(&namespace)).unwrap()));
    let read = reader
        .deserialize("other-topic", &Headers::new(), bytes.as_deref())
        .unwrap();
    assert_eq!(read.field("name"), Some(&Value::String("bob".into())));
    assert_eq!(read.field("email"), Some(&Value::String("unknown".into())));
    let subject = format!("{namespace}.User");
    let registered = client(&url)
        .schema_by_version(&subject, Version::Latest)
        .unwrap();
    assert_eq!(registered.version, 1);
}

#[test]
fn use_latest_version_without_auto_register() {
    let Some(url) = registry_url() else { return };
    let topic = unique("latest");
    let registry = client(&url);
    let latest_id = registry
        .register(&format!("{topic}-value"), &user_v2(&topic))
        .unwrap();
    let config = SerdeConfig::from_properties([
        ("auto.register.schemas", "false"),
        ("use.latest.version", "true"),
    ])
    .unwrap();
    let writer = AvroSerde::<UserV1>::new(client(&url), parse_schema(&user_v1(&topic)).unwrap())
        .with_config(config);
    let bytes = writer
        .serialize(&topic, &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[1..5], &latest_id.0.to_be_bytes());

    let unregistered = AvroSerde::<UserV1>::new(
        client(&url),
        parse_schema(&user_v1(&unique("unregistered"))).unwrap(),
    )
    .with_config(SerdeConfig::from_properties([("auto.register.schemas", "false")]).unwrap());
    let error = unregistered
        .serialize(&unique("t"), &mut Headers::new(), &alice())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("not found in the schema registry"),
        "{error}"
    );

    // Registered by someone else, in other JSON formatting: found by lookup.
    let topic = unique("lookup");
    let registered = registry
        .register(&format!("{topic}-value"), &user_v1(&topic))
        .unwrap();
    let looking_up =
        AvroSerde::<UserV1>::new(client(&url), parse_schema(&user_v1(&topic)).unwrap())
            .with_config(
                SerdeConfig::from_properties([("auto.register.schemas", "false")]).unwrap(),
            );
    let bytes = looking_up
        .serialize(&topic, &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[1..5], &registered.0.to_be_bytes());
}

/// Runs the Java peer and returns what it printed.
fn java_peer(classpath: &str, args: &[&str]) -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/registry/AvroPeer.java");
    let output = Command::new("java")
        .arg("-cp")
        .arg(classpath)
        .arg(&source)
        .args(args)
        .output()
        .expect("java runs");
    assert!(
        output.status.success(),
        "the Java peer failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn records_written_by_javas_avro_serde_read_in_rust_and_the_other_way() {
    let Some(url) = registry_url() else { return };
    let Some(classpath) = env_or_skip(JAVA_PEER_ENV) else {
        return;
    };
    // The Java serde speaks Apicurio's own API, beside the Confluent one.
    let Some(native_url) = url
        .strip_suffix("/apis/ccompat/v7")
        .map(|root| format!("{root}/apis/registry/v2"))
    else {
        eprintln!("skipped: {url} is not an Apicurio Registry's /apis/ccompat/v7");
        return;
    };
    let topic = unique("java");
    let schema = parse_schema(&user_v1(&topic)).unwrap();
    let schema_json = serde_json::to_string(&schema).unwrap();

    let java_hex = java_peer(
        &classpath,
        &["write", &native_url, &topic, &schema_json, "alice", "7"],
    );
    let java_bytes = unhex(&java_hex);
    assert_eq!(java_bytes[0], 0, "magic byte first: {java_hex}");

    let rust = AvroSerde::<UserV1>::new(client(&url), schema);
    let read = rust
        .deserialize(&topic, &Headers::new(), Some(&java_bytes))
        .unwrap();
    assert_eq!(read, alice());
    // A newer Rust reader resolves the Java record to its own schema.
    let evolved = AvroSerde::<UserV2>::new(client(&url), parse_schema(&user_v2(&topic)).unwrap());
    let upgraded = evolved
        .deserialize(&topic, &Headers::new(), Some(&java_bytes))
        .unwrap();
    assert_eq!(upgraded.email, "unknown");

    // Rust finds the schema Java registered (same id) and writes the same bytes.
    let rust_bytes = rust
        .serialize(&topic, &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    assert_eq!(hex(&rust_bytes), java_hex);
    let bob = UserV1 {
        name: "bob".into(),
        favorite_number: Some(3),
    };
    let bob_bytes = rust
        .serialize(&topic, &mut Headers::new(), &bob)
        .unwrap()
        .unwrap();
    let java_read = java_peer(&classpath, &["read", &native_url, &topic, &hex(&bob_bytes)]);
    assert_eq!(java_read, r#"{"name": "bob", "favorite_number": 3}"#);
}
