//! ProtobufSerde against the in-memory registry: the wire format byte for
//! byte, evolution both ways, references, strategies and bad bytes.

use std::sync::Arc;

use kstreams_protobuf::{
    MockSchemaRegistryClient, ProtoFile, ProtobufSchema, ProtobufSerde, SchemaId,
    SchemaRegistryClient, SchemaType, SerdeConfig, SubjectNameStrategy, Version,
};
use kstreams_record::{Headers, Serde, SerdeError};
use kstreams_schema_registry::RegistrySchema;

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
struct Note {
    #[prost(string, tag = "1")]
    text: String,
}

const USER_V1: &str = r#"syntax = "proto3"; package shop; message User { string name = 1; }"#;
const USER_V2: &str = r#"syntax = "proto3";
package shop;
message User { string name = 1; int32 age = 2; message Note { string text = 1; } }
message Other { bool flag = 1; }"#;

fn user(source: &str) -> ProtobufSchema {
    ProtobufSchema::new(ProtoFile::new("shop/user.proto", source), "shop.User").unwrap()
}

fn serde<M>(registry: &Arc<MockSchemaRegistryClient>, schema: ProtobufSchema) -> ProtobufSerde<M> {
    ProtobufSerde::new(registry.clone(), schema)
}

#[test]
fn records_are_magic_id_indexes_then_the_message() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, user(USER_V1));
    let bytes = v1
        .serialize("users", &mut Headers::new(), &UserV1 { name: "al".into() })
        .unwrap()
        .unwrap();
    // Magic 0, id 1, indexes [0] as the single byte 0, then field 1 "al".
    assert_eq!(bytes, [0, 0, 0, 0, 1, 0, 0x0a, 2, b'a', b'l']);
    let registered = registry
        .schema_by_version("users-value", Version::Latest)
        .unwrap();
    assert_eq!(registered.schema_type, SchemaType::Protobuf);
    assert_eq!(registered.schema, USER_V1);

    // A nested message's path is written in full: count 2, then 0 and 0.
    let note =
        ProtobufSchema::new(ProtoFile::new("shop/user.proto", USER_V2), "shop.User.Note").unwrap();
    let notes = serde::<Note>(&registry, note);
    let bytes = notes
        .serialize("notes", &mut Headers::new(), &Note { text: "x".into() })
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[5..8], &[4, 0, 0]);
    assert_eq!(
        notes
            .deserialize("notes", &Headers::new(), Some(&bytes))
            .unwrap()
            .text,
        "x"
    );
}

#[test]
fn old_and_new_readers_read_each_others_records() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, user(USER_V1));
    let v2 = serde::<UserV2>(&registry, user(USER_V2));
    let old = v1
        .serialize("users", &mut Headers::new(), &UserV1 { name: "ann".into() })
        .unwrap();
    let new = v2
        .serialize(
            "users",
            &mut Headers::new(),
            &UserV2 {
                name: "bo".into(),
                age: 41,
            },
        )
        .unwrap();
    assert_ne!(old.as_ref().unwrap()[1..5], new.as_ref().unwrap()[1..5]);
    assert_eq!(
        v2.deserialize("users", &Headers::new(), old.as_deref())
            .unwrap(),
        UserV2 {
            name: "ann".into(),
            age: 0
        }
    );
    assert_eq!(
        v1.deserialize("users", &Headers::new(), new.as_deref())
            .unwrap()
            .name,
        "bo"
    );
    let latest = registry
        .schema_by_version("users-value", Version::Latest)
        .unwrap();
    assert_eq!(latest.version, 2);
}

#[test]
fn imports_are_registered_as_references_under_their_file_names() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let order = ProtoFile::new(
        "shop/order.proto",
        r#"syntax = "proto3"; package shop;
           import "shop/money.proto"; import "google/protobuf/timestamp.proto";
           message Order { Money price = 1; google.protobuf.Timestamp at = 2; }"#,
    );
    let money = ProtoFile::new(
        "shop/money.proto",
        r#"syntax = "proto3"; package shop; import "shop/currency.proto";
           message Money { int64 cents = 1; Currency currency = 2; }"#,
    );
    let currency = ProtoFile::new(
        "shop/currency.proto",
        r#"syntax = "proto3"; package shop; enum Currency { EUR = 0; }"#,
    );
    let without = ProtobufSchema::new(order.clone(), "shop.Order").unwrap();
    let error = serde::<Note>(&registry, without)
        .serialize("orders", &mut Headers::new(), &Note::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("imports shop/money.proto") && error.contains("with_dependency"),
        "{error}"
    );

    let schema = ProtobufSchema::new(order, "shop.Order")
        .unwrap()
        .with_dependency(money)
        .unwrap()
        .with_dependency(currency.clone())
        .unwrap();
    let orders = serde::<Note>(&registry, schema);
    orders
        .serialize("orders", &mut Headers::new(), &Note::default())
        .unwrap();
    let registered = registry
        .schema_by_version("orders-value", Version::Latest)
        .unwrap();
    // The well-known type is the registry's own: no reference.
    assert_eq!(registered.references.len(), 1);
    assert_eq!(registered.references[0].name, "shop/money.proto");
    assert_eq!(registered.references[0].subject, "shop/money.proto");
    let money = registry
        .schema_by_version("shop/money.proto", Version::Latest)
        .unwrap();
    assert_eq!(money.references[0].subject, "shop/currency.proto");
    let currency_registered = registry
        .schema_by_version("shop/currency.proto", Version::Number(1))
        .unwrap();
    assert_eq!(currency_registered.schema, currency.source);
}

#[test]
fn an_import_cycle_is_an_error() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let a = ProtoFile::new(
        "a.proto",
        r#"syntax = "proto3"; import "b.proto"; message A {}"#,
    );
    let b = ProtoFile::new(
        "b.proto",
        r#"syntax = "proto3"; import "a.proto"; message B {}"#,
    );
    let schema = ProtobufSchema::new(a.clone(), "A")
        .unwrap()
        .with_dependency(a)
        .unwrap()
        .with_dependency(b)
        .unwrap();
    let error = serde::<Note>(&registry, schema)
        .serialize("t", &mut Headers::new(), &Note::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("cycle: a.proto -> b.proto -> a.proto"),
        "{error}"
    );
}

#[test]
fn subjects_follow_the_strategies() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let config = SerdeConfig {
        key_subject_name_strategy: SubjectNameStrategy::TopicRecordName,
        ..SerdeConfig::default()
    };
    let keys = serde::<UserV1>(&registry, user(USER_V1))
        .for_keys()
        .with_config(config);
    keys.serialize("t", &mut Headers::new(), &UserV1::default())
        .unwrap();
    assert!(registry
        .schema_by_version("t-shop.User", Version::Latest)
        .is_ok());
}

#[test]
fn use_latest_version_writes_the_latest_schemas_id_and_indexes() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    // The latest schema has the message second: its indexes are [1].
    let latest_source = r#"syntax = "proto3"; package shop;
        message First {} message User { string name = 1; }"#;
    let id = registry
        .register_schema(
            "users-value",
            &RegistrySchema::new(SchemaType::Protobuf, latest_source),
        )
        .unwrap();
    let config = SerdeConfig::from_properties([
        ("auto.register.schemas", "false"),
        ("use.latest.version", "true"),
    ])
    .unwrap();
    let writer = serde::<UserV1>(&registry, user(USER_V1)).with_config(config);
    let bytes = writer
        .serialize("users", &mut Headers::new(), &UserV1 { name: "x".into() })
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[1..5], &id.0.to_be_bytes());
    assert_eq!(&bytes[5..7], &[2, 2]);
    assert_eq!(
        writer
            .deserialize("users", &Headers::new(), Some(&bytes))
            .unwrap()
            .name,
        "x"
    );
    let lookup_only = serde::<UserV1>(&registry, user(USER_V1))
        .with_config(SerdeConfig::from_properties([("auto.register.schemas", "false")]).unwrap());
    let error = lookup_only
        .serialize("users", &mut Headers::new(), &UserV1::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("not registered"), "{error}");
}

#[test]
fn bad_bytes_are_errors_that_say_what_is_wrong() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v2 = serde::<UserV2>(&registry, user(USER_V2));
    let good = v2
        .serialize(
            "users",
            &mut Headers::new(),
            &UserV2 {
                name: "x".into(),
                age: 1,
            },
        )
        .unwrap()
        .unwrap();
    let id = SchemaId(u32::from_be_bytes(good[1..5].try_into().unwrap()));
    let header = |rest: &[u8]| {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&id.0.to_be_bytes());
        bytes.extend_from_slice(rest);
        bytes
    };
    let error = |bytes: &[u8]| -> String {
        let error = v2
            .deserialize("users", &Headers::new(), Some(bytes))
            .unwrap_err();
        assert!(matches!(error, SerdeError::Custom { .. }), "{error}");
        error.to_string()
    };
    assert!(error(b"\x01abcd").contains("not the Confluent magic byte"));
    assert!(error(&[0, 0, 0]).contains("too short"));
    assert!(error(&[0, 0, 0, 0, 99, 0]).contains("schema id 99 not found"));
    assert!(error(&header(&[])).contains("ends inside the message index count"));
    // [1] names shop.Other in the writer schema, not shop.User.
    let other = error(&header(&[2, 2]));
    assert!(
        other.contains("they name shop.Other, but this serde reads shop.User"),
        "{other}"
    );
    assert!(error(&header(&[2, 4])).contains("past the 2 message(s)"));
    let truncated = error(&good[..good.len() - 1]);
    assert!(truncated.contains("does not decode as"), "{truncated}");
    assert!(error(&header(&[0x7e, 0])).contains("63 message indexes"));

    // A schema of another format under the id: not a Protobuf record.
    registry
        .register_schema("j", &RegistrySchema::new(SchemaType::Json, "{}"))
        .unwrap();
    let json_id = registry.schema_by_version("j", Version::Latest).unwrap().id;
    let mut foreign = vec![0];
    foreign.extend_from_slice(&json_id.0.to_be_bytes());
    foreign.push(0);
    assert!(error(&foreign).contains("is a JSON schema, not PROTOBUF"));
    let null = v2.deserialize("users", &Headers::new(), None).unwrap_err();
    assert!(matches!(null, SerdeError::UnexpectedNull { .. }), "{null}");
}

#[test]
fn the_registry_is_asked_once_per_schema_not_per_record() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let v1 = serde::<UserV1>(&registry, user(USER_V1));
    let first = v1
        .serialize("users", &mut Headers::new(), &UserV1::default())
        .unwrap();
    v1.deserialize("users", &Headers::new(), first.as_deref())
        .unwrap();
    let calls = registry.calls();
    for _ in 0..10 {
        let bytes = v1
            .serialize("users", &mut Headers::new(), &UserV1::default())
            .unwrap();
        v1.deserialize("users", &Headers::new(), bytes.as_deref())
            .unwrap();
    }
    assert_eq!(registry.calls(), calls);
}
