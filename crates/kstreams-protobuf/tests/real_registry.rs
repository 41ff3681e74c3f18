//! Against a real registry that speaks the Confluent REST API: the one
//! `cargo xtask registry start` runs (Apicurio Registry), found through
//! KSTREAMS_TEST_SCHEMA_REGISTRY. Without it every test here says it is
//! skipped and passes.
//!
//! The cross-client test also needs KSTREAMS_TEST_CONFLUENT_PYTHON (the same
//! `xtask registry start` prints it): a Python with Confluent's
//! `confluent-kafka` serializers, which runs xtask/registry/confluent_peer.py.
//!
//! Subjects and packages carry a per-run suffix, so runs against one
//! long-lived registry do not see each other's schemas.

use kstreams_protobuf::{
    ProtoFile, ProtobufSchema, ProtobufSerde, SchemaRegistryClient, SchemaType, Version,
};
use kstreams_record::{Headers, Serde};

#[path = "../../kstreams-schema-registry/tests/support/mod.rs"]
mod support;
use support::{
    client, env_or_skip, hex, python_peer, set_compatibility, unhex, unique, PYTHON_PEER_ENV,
    REGISTRY_ENV,
};

#[derive(Clone, PartialEq, prost::Message)]
struct UserV1 {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct UserV2 {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    age: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Breaking {
    #[prost(int64, tag = "1")]
    name: i64,
}

fn user_file(package: &str, fields: &str) -> ProtoFile {
    ProtoFile::new(
        format!("{package}/user.proto"),
        format!("syntax = \"proto3\";\npackage {package};\n\nmessage User {{\n{fields}}}\n"),
    )
}

fn user_v1(package: &str) -> ProtobufSchema {
    let file = user_file(package, "  string name = 1;\n");
    ProtobufSchema::new(file, &format!("{package}.User")).unwrap()
}

fn user_v2(package: &str) -> ProtobufSchema {
    let file = user_file(package, "  string name = 1;\n  int32 age = 2;\n");
    ProtobufSchema::new(file, &format!("{package}.User")).unwrap()
}

#[test]
fn protobuf_schemas_evolve_and_both_readers_read_both_versions() {
    let Some(url) = env_or_skip(REGISTRY_ENV) else {
        return;
    };
    let package = unique("evolve");
    let topic = package.clone();
    let subject = format!("{topic}-value");
    let old = ProtobufSerde::<UserV1>::new(client(&url), user_v1(&package));
    let old_bytes = old
        .serialize(&topic, &mut Headers::new(), &UserV1 { name: "ann".into() })
        .unwrap();
    set_compatibility(&url, &subject, "BACKWARD");

    // A separate client per side, as producer and consumer would have.
    let new = ProtobufSerde::<UserV2>::new(client(&url), user_v2(&package));
    let new_bytes = new
        .serialize(
            &topic,
            &mut Headers::new(),
            &UserV2 {
                name: "bo".into(),
                age: 41,
            },
        )
        .unwrap();
    assert_ne!(
        old_bytes.as_ref().unwrap()[1..5],
        new_bytes.as_ref().unwrap()[1..5]
    );
    let fresh_new = ProtobufSerde::<UserV2>::new(client(&url), user_v2(&package));
    assert_eq!(
        fresh_new
            .deserialize(&topic, &Headers::new(), old_bytes.as_deref())
            .unwrap(),
        UserV2 {
            name: "ann".into(),
            age: 0
        }
    );
    let fresh_old = ProtobufSerde::<UserV1>::new(client(&url), user_v1(&package));
    assert_eq!(
        fresh_old
            .deserialize(&topic, &Headers::new(), new_bytes.as_deref())
            .unwrap()
            .name,
        "bo"
    );
    let latest = client(&url)
        .schema_by_version(&subject, Version::Latest)
        .unwrap();
    assert_eq!(
        (latest.version, latest.schema_type),
        (2, SchemaType::Protobuf)
    );

    // Field 1 changing from string to int64 breaks the old readers: refused.
    let breaking_file = user_file(&package, "  int64 name = 1;\n");
    let breaking = ProtobufSerde::<Breaking>::new(
        client(&url),
        ProtobufSchema::new(breaking_file, &format!("{package}.User")).unwrap(),
    );
    let error = breaking
        .serialize(&topic, &mut Headers::new(), &Breaking { name: 1 })
        .unwrap_err()
        .to_string();
    assert!(error.contains("answered 409"), "{error}");
}

#[test]
fn imports_are_registered_as_references_and_read_back() {
    let Some(url) = env_or_skip(REGISTRY_ENV) else {
        return;
    };
    let package = unique("refs");
    let money_name = format!("{package}/money.proto");
    let order = ProtoFile::new(
        format!("{package}/order.proto"),
        format!(
            "syntax = \"proto3\";\npackage {package};\nimport \"{money_name}\";\n\
             import \"google/protobuf/timestamp.proto\";\n\n\
             message Order {{\n  Money price = 1;\n  google.protobuf.Timestamp at = 2;\n}}\n"
        ),
    );
    let money = ProtoFile::new(
        money_name.clone(),
        format!("syntax = \"proto3\";\npackage {package};\n\nmessage Money {{\n  int64 cents = 1;\n}}\n"),
    );
    let schema = ProtobufSchema::new(order, &format!("{package}.Order"))
        .unwrap()
        .with_dependency(money)
        .unwrap();

    #[derive(Clone, PartialEq, prost::Message)]
    struct Money {
        #[prost(int64, tag = "1")]
        cents: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Order {
        #[prost(message, optional, tag = "1")]
        price: Option<Money>,
    }
    let serde = ProtobufSerde::<Order>::new(client(&url), schema);
    let order = Order {
        price: Some(Money { cents: 250 }),
    };
    let bytes = serde
        .serialize(&package, &mut Headers::new(), &order)
        .unwrap();

    let fresh = client(&url);
    let registered = fresh
        .schema_by_version(&format!("{package}-value"), Version::Latest)
        .unwrap();
    assert_eq!(registered.references.len(), 1, "{registered:?}");
    assert_eq!(registered.references[0].name, money_name);
    assert_eq!(registered.references[0].subject, money_name);
    let by_id = fresh.schema_by_id_with_type(registered.id).unwrap();
    assert_eq!(by_id.schema_type, SchemaType::Protobuf);
    assert_eq!(by_id.references, registered.references);

    let reader = ProtobufSerde::<Order>::new(client(&url), serde.schema().clone());
    assert_eq!(
        reader
            .deserialize(&package, &Headers::new(), bytes.as_deref())
            .unwrap(),
        order
    );
}

#[test]
fn records_of_confluents_python_serializer_read_in_rust_and_the_other_way() {
    let Some(url) = env_or_skip(REGISTRY_ENV) else {
        return;
    };
    let Some(python) = env_or_skip(PYTHON_PEER_ENV) else {
        return;
    };
    let package = unique("py");
    let topic = package.clone();
    // Python registers its schema (a serialized descriptor) and writes
    // User { name: "alice", age: 7 } with it.
    let written = unhex(&python_peer(
        &python,
        &["proto-write", &url, &topic, &package, "alice", "7"],
    ));
    assert_eq!(written[0], 0, "magic byte first");
    assert_eq!(written[5], 0, "indexes [0] as one byte");
    let v2 = ProtobufSerde::<UserV2>::new(client(&url), user_v2(&package));
    assert_eq!(
        v2.deserialize(&topic, &Headers::new(), Some(&written))
            .unwrap(),
        UserV2 {
            name: "alice".into(),
            age: 7
        }
    );
    let v1 = ProtobufSerde::<UserV1>::new(client(&url), user_v1(&package));
    assert_eq!(
        v1.deserialize(&topic, &Headers::new(), Some(&written))
            .unwrap()
            .name,
        "alice"
    );

    // Rust's record, read by Confluent's deserializer.
    let rust = v2
        .serialize(
            &topic,
            &mut Headers::new(),
            &UserV2 {
                name: "bob".into(),
                age: 3,
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(rust[5], written[5], "the same indexes");
    let read = python_peer(
        &python,
        &["proto-read", &url, &topic, &package, &hex(&rust)],
    );
    assert_eq!(read, r#"{"age": 3, "name": "bob"}"#);
}
