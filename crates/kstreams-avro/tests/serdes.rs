//! The serdes against the in-memory registry: the Confluent wire format byte
//! for byte, schema evolution both ways, the subject name strategies, the
//! serializer configs, caching, and an error (never a panic) for every kind
//! of bad record.

use std::sync::Arc;

use apache_avro::types::Value;
use kstreams_avro::{
    parse_schema, AvroSerde, GenericAvroSerde, GenericRecord, MockSchemaRegistryClient, SchemaId,
    SchemaRegistryClient, SerdeConfig, SubjectNameStrategy, Version,
};
use kstreams_record::{Headers, Nullable, Serde, SerdeError};
use serde::{Deserialize, Serialize};

mod common;
use common::{alice, UserV1, UserV2};

const USER_V1: &str = r#"{"type":"record","name":"User","namespace":"com.example","fields":[
    {"name":"name","type":"string"},
    {"name":"favorite_number","type":["null","int"],"default":null}]}"#;

/// v1 plus a field with a default: BACKWARD and FORWARD compatible.
const USER_V2: &str = r#"{"type":"record","name":"User","namespace":"com.example","fields":[
    {"name":"name","type":"string"},
    {"name":"favorite_number","type":["null","int"],"default":null},
    {"name":"email","type":"string","default":"unknown"}]}"#;

fn mock() -> Arc<MockSchemaRegistryClient> {
    Arc::new(MockSchemaRegistryClient::new())
}

fn v1(registry: &Arc<MockSchemaRegistryClient>) -> AvroSerde<UserV1> {
    AvroSerde::new(registry.clone(), parse_schema(USER_V1).unwrap())
}

fn v2(registry: &Arc<MockSchemaRegistryClient>) -> AvroSerde<UserV2> {
    AvroSerde::new(registry.clone(), parse_schema(USER_V2).unwrap())
}

fn message(error: SerdeError) -> String {
    error.to_string()
}

/// The record of the Confluent wire-format spec, built by hand: magic byte
/// 0, schema id 42 as 4 big-endian bytes, then the Avro binary encoding of
/// {"name": "alice", "favorite_number": 7}: the string as its zigzag
/// varint length (5 -> 0x0a) and UTF-8 bytes, the union as its branch
/// index (1 -> 0x02) and the int as a zigzag varint (7 -> 0x0e).
const SPEC_RECORD: &[u8] = &[
    0x00, // magic byte
    0x00, 0x00, 0x00, 0x2a, // schema id 42
    0x0a, b'a', b'l', b'i', b'c', b'e', // "alice"
    0x02, 0x0e, // union branch 1 (int), 7
];

#[test]
fn a_record_built_from_the_wire_format_spec_reads_and_writes_byte_for_byte() {
    let registry = mock();
    registry.add_with_id(SchemaId(42), USER_V1).unwrap();
    let serde = v1(&registry);
    let read = serde
        .deserialize("users", &Headers::new(), Some(SPEC_RECORD))
        .unwrap();
    assert_eq!(read, alice());
    // The schema is already known under id 42, so writing gives the same bytes.
    let written = serde
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap();
    assert_eq!(written.as_deref(), Some(SPEC_RECORD));
}

#[test]
fn a_rust_type_round_trips_and_registers_under_the_topic_subject() {
    let registry = mock();
    let serde = v1(&registry);
    let none = UserV1 {
        name: "bob".into(),
        favorite_number: None,
    };
    for user in [alice(), none] {
        let bytes = serde
            .serialize("users", &mut Headers::new(), &user)
            .unwrap()
            .unwrap();
        assert_eq!(&bytes[..5], &[0, 0, 0, 0, 1]);
        let read = serde
            .deserialize("users", &Headers::new(), Some(&bytes))
            .unwrap();
        assert_eq!(read, user);
    }
    let latest = registry
        .schema_by_version("users-value", Version::Latest)
        .unwrap();
    assert_eq!((latest.id, latest.version), (SchemaId(1), 1));
}

#[test]
fn a_new_reader_reads_old_records_with_defaults_and_an_old_reader_skips_new_fields() {
    let registry = mock();
    let (old, new) = (v1(&registry), v2(&registry));
    let old_bytes = old
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap();
    let upgraded = new
        .deserialize("users", &Headers::new(), old_bytes.as_deref())
        .unwrap();
    assert_eq!(
        upgraded,
        UserV2 {
            name: "alice".into(),
            favorite_number: Some(7),
            email: "unknown".into(),
        }
    );

    let full = UserV2 {
        email: "a@example.com".into(),
        ..upgraded
    };
    let new_bytes = new.serialize("users", &mut Headers::new(), &full).unwrap();
    assert_eq!(new_bytes.as_ref().unwrap()[4], 2, "v2 is schema id 2");
    let downgraded = old
        .deserialize("users", &Headers::new(), new_bytes.as_deref())
        .unwrap();
    assert_eq!(downgraded, alice());
    let versions = registry
        .schema_by_version("users-value", Version::Latest)
        .unwrap();
    assert_eq!(versions.version, 2);
}

#[test]
fn generic_records_keep_the_writer_schema_or_take_the_reader_schema() {
    let registry = mock();
    let writer_schema = Arc::new(parse_schema(USER_V1).unwrap());
    let record = GenericRecord::new(
        writer_schema.clone(),
        Value::Record(vec![
            ("name".into(), Value::String("alice".into())),
            (
                "favorite_number".into(),
                Value::Union(1, Box::new(Value::Int(7))),
            ),
        ]),
    );
    let generic = GenericAvroSerde::new(registry.clone());
    let bytes = generic
        .serialize("users", &mut Headers::new(), &record)
        .unwrap()
        .unwrap();
    // Generic and typed serdes write the same bytes for the same data.
    assert_eq!(
        Some(bytes.clone()),
        v1(&registry)
            .serialize("users", &mut Headers::new(), &alice())
            .unwrap()
    );
    let read = generic
        .deserialize("users", &Headers::new(), Some(&bytes))
        .unwrap();
    assert_eq!(read.value, record.value);
    assert_eq!(read.schema.canonical_form(), writer_schema.canonical_form());

    let reader_schema = Arc::new(parse_schema(USER_V2).unwrap());
    let evolving = GenericAvroSerde::new(registry).with_reader_schema(reader_schema.clone());
    let read = evolving
        .deserialize("users", &Headers::new(), Some(&bytes))
        .unwrap();
    assert_eq!(read.field("email"), Some(&Value::String("unknown".into())));
    assert!(Arc::ptr_eq(&read.schema, &reader_schema));
}

#[test]
fn the_registry_is_asked_once_per_schema_not_per_record() {
    let registry = mock();
    let serde = v1(&registry);
    let bytes = serde
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap();
    serde
        .deserialize("users", &Headers::new(), bytes.as_deref())
        .unwrap();
    let calls = registry.calls();
    for _ in 0..100 {
        let bytes = serde
            .serialize("users", &mut Headers::new(), &alice())
            .unwrap();
        serde
            .deserialize("users", &Headers::new(), bytes.as_deref())
            .unwrap();
    }
    assert_eq!(registry.calls(), calls);

    let generic = GenericAvroSerde::new(registry.clone());
    let schema = Arc::new(parse_schema(r#"{"type":"record","name":"N","fields":[]}"#).unwrap());
    let record = GenericRecord::new(schema, Value::Record(vec![]));
    generic
        .serialize("n", &mut Headers::new(), &record)
        .unwrap();
    let calls = registry.calls();
    for _ in 0..100 {
        generic
            .serialize("n", &mut Headers::new(), &record.clone())
            .unwrap();
    }
    assert_eq!(registry.calls(), calls);
}

#[test]
fn subject_name_strategies_and_key_serdes() {
    let registry = mock();
    let schema = || parse_schema(USER_V1).unwrap();
    let with = |strategy| SerdeConfig {
        value_subject_name_strategy: strategy,
        key_subject_name_strategy: strategy,
        ..SerdeConfig::default()
    };
    let record_name = AvroSerde::<UserV1>::new(registry.clone(), schema())
        .with_config(with(SubjectNameStrategy::RecordName));
    let topic_record = AvroSerde::<UserV1>::new(registry.clone(), schema())
        .for_keys()
        .with_config(with(SubjectNameStrategy::TopicRecordName));
    let key = AvroSerde::<UserV1>::new(registry.clone(), schema()).for_keys();
    for serde in [&record_name, &topic_record, &key] {
        serde
            .serialize("users", &mut Headers::new(), &alice())
            .unwrap();
    }
    for subject in ["com.example.User", "users-com.example.User", "users-key"] {
        let found = registry
            .schema_by_version(subject, Version::Latest)
            .unwrap();
        assert_eq!(found.id, SchemaId(1), "{subject}");
    }
}

#[test]
fn without_auto_register_the_schema_must_be_registered() {
    let registry = mock();
    let config = SerdeConfig {
        auto_register_schemas: false,
        ..SerdeConfig::default()
    };
    let serde = v1(&registry).with_config(config);
    let error = message(
        serde
            .serialize("users", &mut Headers::new(), &alice())
            .unwrap_err(),
    );
    assert!(error.starts_with("topic users: Avro value:"), "{error}");
    assert!(error.contains("subject users-value not found"), "{error}");
    registry.register("users-value", USER_V1).unwrap();
    assert!(serde
        .serialize("users", &mut Headers::new(), &alice())
        .is_ok());
}

#[test]
fn use_latest_version_writes_with_the_subjects_latest_schema() {
    let registry = mock();
    let latest = registry.register("users-value", USER_V2).unwrap();
    let config = SerdeConfig {
        auto_register_schemas: false,
        use_latest_version: true,
        ..SerdeConfig::default()
    };
    let old_writer = v1(&registry).with_config(config);
    let bytes = old_writer
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    assert_eq!(&bytes[1..5], &latest.0.to_be_bytes());
    let read = v2(&registry)
        .deserialize("users", &Headers::new(), Some(&bytes))
        .unwrap();
    assert_eq!(read.email, "unknown");
    assert_eq!(
        registry
            .schema_by_version("users-value", Version::Latest)
            .unwrap()
            .version,
        1,
        "nothing was registered"
    );

    // As in Confluent's serializer, registering comes first.
    let registering = v1(&registry).with_config(SerdeConfig {
        use_latest_version: true,
        ..SerdeConfig::default()
    });
    let bytes = registering
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    let own = registry.lookup("users-value", USER_V1).unwrap();
    assert_eq!(
        (own.version, &bytes[1..5]),
        (2, &own.id.0.to_be_bytes()[..])
    );
}

#[test]
fn bad_records_are_clear_errors() {
    let registry = mock();
    let serde = v1(&registry);
    let good = serde
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap()
        .unwrap();
    let read = |bytes: &[u8]| {
        message(
            serde
                .deserialize("users", &Headers::new(), Some(bytes))
                .unwrap_err(),
        )
    };

    let json = read(br#"{"name":"alice"}"#);
    assert!(
        json.contains("first byte is 0x7b, not the Confluent magic byte"),
        "{json}"
    );
    let short = read(&[0, 0, 1]);
    assert!(short.contains("3 byte(s) is too short"), "{short}");
    let empty = read(&[]);
    assert!(empty.contains("0 byte(s) is too short"), "{empty}");

    let mut unknown = good.clone();
    unknown[1..5].copy_from_slice(&99u32.to_be_bytes());
    let unknown = read(&unknown);
    assert!(unknown.contains("schema id 99 not found"), "{unknown}");

    let truncated = read(&good[..good.len() - 3]);
    assert!(
        truncated.contains("does not decode with its writer schema id 1"),
        "{truncated}"
    );

    // Cut inside the string: apache-avro alone would read a null there.
    for cut in [6, 8, good.len() - 1] {
        let generic = GenericAvroSerde::new(registry.clone())
            .deserialize("users", &Headers::new(), Some(&good[..cut]))
            .unwrap_err();
        assert!(
            generic
                .to_string()
                .contains("does not decode with its writer schema id 1"),
            "{cut}: {generic}"
        );
    }

    let null = serde
        .deserialize("users", &Headers::new(), None)
        .unwrap_err();
    assert!(matches!(null, SerdeError::UnexpectedNull { .. }), "{null}");
}

#[test]
fn a_reader_that_cannot_read_the_writer_schema_is_a_schema_mismatch() {
    let registry = mock();
    #[derive(Debug, Serialize, Deserialize)]
    struct Other {
        id: i64,
    }
    let other = AvroSerde::<Other>::new(
        registry.clone(),
        parse_schema(r#"{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"}]}"#)
            .unwrap(),
    );
    let bytes = v1(&registry)
        .serialize("users", &mut Headers::new(), &alice())
        .unwrap();
    let error = message(
        other
            .deserialize("users", &Headers::new(), bytes.as_deref())
            .unwrap_err(),
    );
    assert!(
        error.contains("schema mismatch: the reader schema cannot read the writer schema id 1"),
        "{error}"
    );
}

#[test]
fn values_that_do_not_fit_the_schema_are_errors_when_written() {
    let registry = mock();
    #[derive(Serialize, Deserialize)]
    struct Wrong {
        name: i64,
    }
    let wrong = AvroSerde::<Wrong>::new(registry.clone(), parse_schema(USER_V1).unwrap());
    let mut out = vec![9];
    let error = wrong
        .serialize_into("users", &mut Headers::new(), &Wrong { name: 1 }, &mut out)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("does not fit schema com.example.User"),
        "{error}"
    );
    assert_eq!(out, [9], "nothing half-written is left in the buffer");

    let generic = GenericAvroSerde::new(registry);
    let record = GenericRecord::new(
        Arc::new(parse_schema(USER_V1).unwrap()),
        Value::Record(vec![("name".into(), Value::Long(1))]),
    );
    let error = generic
        .serialize("users", &mut Headers::new(), &record)
        .unwrap_err();
    assert!(
        error.to_string().contains("does not fit its schema"),
        "{error}"
    );
}

#[test]
fn nullable_avro_values_are_kafka_nulls() {
    let registry = mock();
    let serde = Nullable(v1(&registry));
    assert_eq!(
        serde
            .serialize("users", &mut Headers::new(), &None)
            .unwrap(),
        None
    );
    assert_eq!(
        serde.deserialize("users", &Headers::new(), None).unwrap(),
        None
    );
}

#[test]
fn named_type_references_enums_maps_and_arrays() {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Address {
        city: String,
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    enum Status {
        Active,
        Closed,
    }
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Customer {
        home: Address,
        work: Option<Address>,
        status: Status,
        tags: Vec<String>,
        scores: std::collections::HashMap<String, i64>,
    }
    // `work` refers to Address by name, as schemas reuse types.
    let schema = parse_schema(
        r#"{"type":"record","name":"Customer","namespace":"shop","fields":[
            {"name":"home","type":{"type":"record","name":"Address","fields":[
                {"name":"city","type":"string"}]}},
            {"name":"work","type":["null","Address"],"default":null},
            {"name":"status","type":{"type":"enum","name":"Status","symbols":["Active","Closed"]}},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"scores","type":{"type":"map","values":"long"}}]}"#,
    )
    .unwrap();
    let serde = AvroSerde::<Customer>::new(mock(), schema);
    let customer = Customer {
        home: Address {
            city: "Oslo".into(),
        },
        work: Some(Address {
            city: "Bergen".into(),
        }),
        status: Status::Closed,
        tags: vec!["a".into(), "b".into()],
        scores: [("x".to_owned(), 3)].into_iter().collect(),
    };
    let bytes = serde
        .serialize("customers", &mut Headers::new(), &customer)
        .unwrap();
    let read = serde
        .deserialize("customers", &Headers::new(), bytes.as_deref())
        .unwrap();
    assert_eq!(read, customer);
}

#[test]
fn primitive_keys_as_confluent_writes_them() {
    let registry = mock();
    let keys =
        AvroSerde::<String>::new(registry.clone(), parse_schema(r#""string""#).unwrap()).for_keys();
    let bytes = keys
        .serialize("users", &mut Headers::new(), &"k1".to_owned())
        .unwrap()
        .unwrap();
    // Magic byte, id 1, then the string: zigzag length 2 (0x04) and "k1".
    assert_eq!(bytes, [0, 0, 0, 0, 1, 0x04, b'k', b'1']);
    assert_eq!(
        keys.deserialize("users", &Headers::new(), Some(&bytes))
            .unwrap(),
        "k1"
    );
    let subject = registry
        .schema_by_version("users-key", Version::Latest)
        .unwrap();
    assert_eq!(subject.schema, r#""string""#);
}

/// Garbage after a valid header, of every length up to 40 bytes: each is a
/// value or an error, never a panic (the stream thread must survive it).
#[test]
fn random_bytes_never_panic() {
    let registry = mock();
    let typed = v2(&registry);
    let generic = GenericAvroSerde::new(registry.clone());
    typed
        .serialize(
            "users",
            &mut Headers::new(),
            &UserV2 {
                name: "a".into(),
                favorite_number: None,
                email: "e".into(),
            },
        )
        .unwrap();
    // xorshift: reproducible without a dependency.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    };
    for round in 0..4000 {
        let mut bytes = vec![0, 0, 0, 0, 1];
        bytes.extend((0..round % 40).map(|_| next()));
        let _ = typed.deserialize("users", &Headers::new(), Some(&bytes));
        let _ = generic.deserialize("users", &Headers::new(), Some(&bytes));
    }
}

#[test]
fn a_block_count_past_the_datum_is_an_error_not_an_abort() {
    // A map of longs whose first block claims 400 M entries in 6 bytes:
    // apache-avro alone would reserve them all and abort the process.
    let registry = mock();
    registry
        .add_with_id(
            SchemaId(3),
            r#"{"type":"record","name":"Tags","fields":[
                {"name":"attrs","type":{"type":"map","values":"long"}}]}"#,
        )
        .unwrap();
    let record = [0, 0, 0, 0, 3, 0x80, 0x90, 0xbc, 0xfd, 0x02, 2, b'x', 4, 0];
    let error = GenericAvroSerde::new(registry)
        .deserialize("tags", &Headers::new(), Some(&record))
        .unwrap_err();
    assert!(matches!(error, SerdeError::Custom { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("does not decode with its writer schema id 3")
            && message.contains("map block count 400000000 cannot fit in the 4 bytes left"),
        "{message}"
    );
}
