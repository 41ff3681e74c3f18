//! The built-in serdes checked against the bytes Kafka's own serializers
//! wrote (compat's `wire-vectors` command, checked in as kstreams-dsl's
//! fixture tests/fixtures/wire/kafka_wire_vectors.tsv): each `serde/`
//! vector is written from its input and read back to it, and each
//! `serde-error/` vector, bytes Kafka's deserializer rejects, is rejected
//! with Kafka's message.

use std::fmt::Debug;

use kstreams_record::{
    BoolSerde, BytesSerde, F32Serde, F64Serde, Headers, I16Serde, I32Serde, I64Serde, ListSerde,
    Nullable, Serde, StringSerde, UnitSerde, Uuid, UuidSerde, VoidSerde,
};
use serde_json::Value;

const VECTORS: &str = include_str!("../../kstreams-dsl/tests/fixtures/wire/kafka_wire_vectors.tsv");

/// The lines named exactly `name`, as their input fields and last field.
fn lines(name: &str) -> Vec<(Vec<&'static str>, &'static str)> {
    let found: Vec<_> = VECTORS
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields: Vec<&str> = line.split('\t').collect();
            (fields[0] == name).then(|| {
                let last = fields.pop().expect("a vector line has bytes");
                (fields.split_off(1), last)
            })
        })
        .collect();
    assert!(!found.is_empty(), "no vector named {name}");
    found
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// Writing `value` gives Kafka's `bytes`, reading them gives `value` back.
fn round_trip<T: PartialEq + Debug + 'static>(
    serde: &impl Serde<T>,
    what: &str,
    value: T,
    bytes: &[u8],
) {
    let written = serde
        .serialize("t", &mut Headers::new(), &value)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(written.as_deref(), Some(bytes), "{what}");
    let mut out = vec![0xaa];
    assert!(serde
        .serialize_into("t", &mut Headers::new(), &value, &mut out)
        .unwrap());
    assert_eq!(&out[1..], bytes, "{what}: serialize_into");
    let read = serde
        .deserialize("t", &Headers::new(), Some(bytes))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(read, value, "{what}");
}

/// Each line `serde/<name>`: the input parsed with `parse`, then round-tripped.
fn check<T: PartialEq + Debug + 'static>(
    name: &str,
    serde: &impl Serde<T>,
    parse: impl Fn(&str) -> T,
) {
    for (inputs, bytes) in lines(&format!("serde/{name}")) {
        round_trip(
            serde,
            &format!("{name} {inputs:?}"),
            parse(inputs[0]),
            &hex(bytes),
        );
    }
}

/// Each line `serde/list-<name>`: the JSON array input, entries made by
/// `entry`, round-tripped through a `ListSerde` of `inner`.
fn check_list<T: PartialEq + Debug + 'static>(
    name: &str,
    inner: impl Serde<T>,
    entry: impl Fn(&Value) -> T,
) {
    let serde = ListSerde(Nullable(inner));
    check(&format!("list-{name}"), &serde, |input| {
        let array: Vec<Value> = serde_json::from_str(input).expect("a JSON array");
        array
            .iter()
            .map(|v| (!v.is_null()).then(|| entry(v)))
            .collect::<Vec<_>>()
    });
}

/// Each line `serde-error/<name>`: reading the bytes fails with Kafka's message.
fn check_rejected<T: Debug + 'static>(name: &str, serde: &impl Serde<T>) {
    for (inputs, message) in lines(&format!("serde-error/{name}")) {
        let bytes = hex(inputs[0]);
        match serde.deserialize("t", &Headers::new(), Some(&bytes)) {
            Ok(value) => panic!("{name} {}: read as {value:?}, Kafka rejects it", inputs[0]),
            Err(e) => assert_eq!(e.kafka_message(), message, "{name} {}: {e}", inputs[0]),
        }
    }
}

fn java_float(text: &str) -> f32 {
    text.parse().unwrap_or_else(|_| panic!("a float: {text}"))
}

fn uuid(value: &Value) -> Uuid {
    Uuid::parse_str(value.as_str().expect("a UUID string")).expect("a UUID")
}

fn int(value: &Value) -> i64 {
    value.as_i64().expect("an integer")
}

/// The UUID Java's `UUID.fromString` made of an input: what our reader
/// makes of the same text (checked against Kafka's bytes by the round trip).
fn java_uuid(text: &str) -> Uuid {
    UuidSerde
        .deserialize("t", &Headers::new(), Some(text.as_bytes()))
        .unwrap_or_else(|e| panic!("Java reads {text} as a UUID: {e}"))
}

#[test]
fn shorts_are_kafkas() {
    check("short", &I16Serde, |s| s.parse::<i16>().unwrap());
    check_rejected("short", &I16Serde);
}

#[test]
fn floats_are_kafkas() {
    for (inputs, bytes) in lines("serde/float") {
        let value = java_float(inputs[0]);
        let bytes = hex(bytes);
        let written = F32Serde
            .serialize("t", &mut Headers::new(), &value)
            .unwrap()
            .unwrap();
        assert_eq!(written, bytes, "float {}", inputs[0]);
        let read = F32Serde
            .deserialize("t", &Headers::new(), Some(&bytes))
            .unwrap();
        assert_eq!(read.to_bits(), value.to_bits(), "float {}", inputs[0]);
    }
    // A NaN keeps its payload: compared as bits, NaN != NaN.
    check("float-bits", &Bits(F32Serde), |s| {
        u32::from_str_radix(s, 16).unwrap()
    });
    check_rejected("float", &F32Serde);
}

#[test]
fn booleans_are_kafkas() {
    check("boolean", &BoolSerde, |s| s.parse::<bool>().unwrap());
    check_rejected("boolean", &BoolSerde);
}

#[test]
fn uuids_are_kafkas() {
    check("uuid", &UuidSerde, java_uuid);
    // The bytes are the canonical text, which any UUID parser reads.
    for (inputs, bytes) in lines("serde/uuid") {
        let text = String::from_utf8(hex(bytes)).unwrap();
        assert_eq!(
            Uuid::parse_str(&text).unwrap(),
            java_uuid(inputs[0]),
            "{text}"
        );
    }
    check_rejected("uuid", &UuidSerde);
}

#[test]
fn void_is_kafkas() {
    for (inputs, bytes) in lines("serde/void") {
        assert_eq!((inputs[0], bytes), ("null", "null"));
        assert_eq!(
            VoidSerde.serialize("t", &mut Headers::new(), &()).unwrap(),
            None
        );
        VoidSerde.deserialize("t", &Headers::new(), None).unwrap();
    }
    check_rejected("void", &UnitSerde);
}

#[test]
fn lists_are_kafkas() {
    check_list("short", I16Serde, |v| int(v) as i16);
    check_list("integer", I32Serde, |v| int(v) as i32);
    check_list("long", I64Serde, int);
    check_list("float", F32Serde, |v| v.as_f64().unwrap() as f32);
    check_list("double", F64Serde, |v| v.as_f64().unwrap());
    check_list("uuid", UuidSerde, uuid);
    check_list("string", StringSerde, |v| v.as_str().unwrap().to_string());
    check_list("bytes", BytesSerde, |v| hex(v.as_str().unwrap()));
    check_list("boolean", BoolSerde, |v| v.as_bool().unwrap());
    check_list("list-integer", ListSerde(I32Serde), |v| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| int(i) as i32)
            .collect::<Vec<_>>()
    });
    check_rejected("list-integer", &ListSerde(Nullable(I32Serde)));
    check_rejected("list-string", &ListSerde(Nullable(StringSerde)));
}

/// The outer join store's lists (a `ListSerde` of byte arrays in Kafka
/// Streams' `ListValueStore`) read and write back the same.
#[test]
fn outer_join_store_lists_are_kafka_lists_of_bytes() {
    let serde = ListSerde(BytesSerde);
    for (inputs, bytes) in ["outer-list/left", "outer-list/right"]
        .into_iter()
        .flat_map(lines)
    {
        let bytes = hex(bytes);
        let list = serde
            .deserialize("t", &Headers::new(), Some(&bytes))
            .unwrap();
        assert_eq!(list.len(), inputs[0].split(',').count(), "{inputs:?}");
        round_trip(&serde, &format!("outer-list {inputs:?}"), list, &bytes);
    }
}

/// Reads and writes an `f32` as its bits, so NaN payloads compare.
struct Bits(F32Serde);

impl Serde<u32> for Bits {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &u32,
    ) -> Result<Option<Vec<u8>>, kstreams_record::SerdeError> {
        self.0.serialize(topic, headers, &f32::from_bits(*value))
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<u32, kstreams_record::SerdeError> {
        self.0.deserialize(topic, headers, bytes).map(f32::to_bits)
    }
}
