//! What each fuzz target runs: one decoder of bytes that come from outside
//! the process (topics, changelogs, committed offsets, files in the state
//! directory) and the properties its result must keep.
//!
//! A decoder may refuse any input, with an error; it must never panic,
//! hang or allocate without bound, and what it accepts must survive a
//! round trip (written back, it reads the same). Each function here is the
//! whole body of one target in `fuzz/fuzz_targets/` (run on nightly by
//! cargo-fuzz) and is also called, on stable, by this crate's
//! `tests/corpora.rs` on every file of the target's corpus, so CI replays
//! the corpora, and every crash input kept there, on each run.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use kstreams_avro::apache_avro::Schema;
use kstreams_avro::{GenericAvroSerde, MockSchemaRegistryClient, SchemaId};
use kstreams_json_schema::{JsonSchema, JsonSchemaSerde};
use kstreams_protobuf::{ProtoFile, ProtobufSchema, ProtobufSerde};
use kstreams_record::{
    BytesSerde, F64Serde, Headers, I32Serde, I64Serde, JsonSerde, Nullable, Serde, SharedSerde,
    StringSerde, UnitSerde,
};
use kstreams_schema_registry::{RegistrySchema, SchemaType};
use kstreams_state::__private::{OffsetCheckpoint, StateDirectory};
use kstreams_state::format;
use kstreams_state::{SessionWindowedSerde, TimeWindowedSerde, ValueAndTimestampSerde};

/// What a fuzz target runs on one input.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, each with the function it runs: the corpus of
/// target `name` is `fuzz/corpus/<name>/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("serdes", serdes),
    ("store_formats", store_formats),
    ("state_files", state_files),
    ("offset_metadata", offset_metadata),
    ("avro", avro),
    ("protobuf", protobuf),
    ("json_schema", json_schema),
];

const TOPIC: &str = "fuzzed";

/// Decodes `bytes` with `serde`; what it accepts must serialize back to the
/// same bytes (the built-in serdes have one encoding per value).
fn exact_round_trip<T: 'static>(serde: &dyn Serde<T>, bytes: Option<&[u8]>) {
    let headers = Headers::new();
    if let Ok(value) = serde.deserialize(TOPIC, &headers, bytes) {
        let written = serde
            .serialize(TOPIC, &mut Headers::new(), &value)
            .expect("a value the serde read serializes");
        assert_eq!(written.as_deref(), bytes, "round trip changed the bytes");
    }
}

/// The built-in serdes of kstreams-record (record keys and values as they
/// come from topics); the first byte picks the serde.
pub fn serdes(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let headers = Headers::new();
    match pick % 8 {
        0 => exact_round_trip(&StringSerde, Some(bytes)),
        1 => exact_round_trip(&BytesSerde, Some(bytes)),
        2 => {
            // Unit reads only nulls: any bytes are an error.
            assert!(UnitSerde.deserialize(TOPIC, &headers, Some(bytes)).is_err());
            exact_round_trip(&UnitSerde, None);
        }
        3 => exact_round_trip(&I32Serde, Some(bytes)),
        4 => exact_round_trip(&I64Serde, Some(bytes)),
        5 => {
            // F64 writes every NaN as the canonical one: compare bits of
            // what it reads, not bytes.
            if let Ok(value) = F64Serde.deserialize(TOPIC, &headers, Some(bytes)) {
                let written = F64Serde
                    .serialize(TOPIC, &mut Headers::new(), &value)
                    .expect("an f64 serializes")
                    .expect("an f64 is never null");
                let again = F64Serde
                    .deserialize(TOPIC, &headers, Some(&written))
                    .expect("written bytes read back");
                assert!(again.to_bits() == value.to_bits() || value.is_nan() && again.is_nan());
            }
        }
        6 => {
            exact_round_trip(&Nullable(StringSerde), Some(bytes));
            exact_round_trip(&Nullable(StringSerde), None);
        }
        _ => {
            // JSON: any document serde_json reads must write and read back
            // to the same value (bytes differ: whitespace, escapes; floats
            // may move by an ulp: serde_json's fast float parser is not
            // exact without its `float_roundtrip` feature).
            let serde = JsonSerde::<serde_json::Value>::new();
            if let Ok(value) = serde.deserialize(TOPIC, &headers, Some(bytes)) {
                let written = serde
                    .serialize(TOPIC, &mut Headers::new(), &value)
                    .expect("a JSON value serializes")
                    .expect("a JSON value is never null");
                let again = serde
                    .deserialize(TOPIC, &headers, Some(&written))
                    .expect("written JSON reads back");
                assert!(json_close(&again, &value), "{again} is not {value}");
            }
        }
    }
}

/// Equal JSON values, floats within a relative 1e-12.
fn json_close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                _ => false,
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_close(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}

/// Kafka Streams' store and windowed formats (kstreams-state's `format` and
/// windowed serdes): windowed and session keys on topics and changelogs,
/// window store changelog keys, timestamped values. The first byte picks
/// the format.
pub fn store_formats(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let string: SharedSerde<String> = Arc::new(StringSerde);
    let int: SharedSerde<i32> = Arc::new(I32Serde);
    match pick % 8 {
        0 => {
            if let Some((key, start, seq)) = format::parse_window_store_key(bytes) {
                assert_eq!(format::window_store_key(key, start, seq), bytes);
            }
        }
        1 => {
            if let Some((key, start)) = format::parse_windowed_key(bytes) {
                assert_eq!(format::windowed_key(key, start), bytes);
            }
        }
        2 => {
            if let Some((key, start, end)) = format::parse_session_key(bytes) {
                assert_eq!(format::session_key(key, start, end), bytes);
            }
        }
        3 => {
            if let Some((value, timestamp)) = format::parse_value_and_timestamp(bytes) {
                assert_eq!(format::value_and_timestamp(value, timestamp), bytes);
            }
        }
        // A window size from the input too: the end is start + size,
        // saturating, and must not overflow whatever both are.
        4 => {
            let (size, key) = bytes.split_at(bytes.len().min(8));
            let mut size_bytes = [0u8; 8];
            size_bytes[..size.len()].copy_from_slice(size);
            let size_ms = i64::from_be_bytes(size_bytes);
            exact_round_trip(&TimeWindowedSerde::shared(string, size_ms), Some(key));
        }
        5 => exact_round_trip(&TimeWindowedSerde::shared(int, 60_000), Some(bytes)),
        6 => exact_round_trip(&SessionWindowedSerde::shared(string), Some(bytes)),
        _ => {
            exact_round_trip(&ValueAndTimestampSerde(string), Some(bytes));
            exact_round_trip(&ValueAndTimestampSerde(int), Some(bytes));
        }
    }
}

/// A directory of this process for the files the state targets write (one
/// per process: the fuzzer runs a target millions of times).
fn scratch_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("kstreams-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory in the temp dir");
        dir
    })
}

/// The files of the state directory: a task's `.checkpoint` (first byte
/// even) or the application's process metadata file (odd), read from
/// whatever bytes a crash, a full disk or an operator left there.
pub fn state_files(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        let checkpoint = OffsetCheckpoint::new(scratch_dir().join(".checkpoint"));
        std::fs::write(checkpoint.path(), bytes).expect("writing the fuzzed checkpoint");
        if let Ok(offsets) = checkpoint.read() {
            // What it read, written and read again, is the same offsets
            // (an empty set removes the file, which reads as empty).
            checkpoint
                .write(&offsets)
                .expect("offsets read from a checkpoint write back");
            assert_eq!(
                checkpoint.read().expect("a written checkpoint reads"),
                offsets
            );
        }
    } else {
        let dir = StateDirectory::new(scratch_dir(), "app").expect("the application directory");
        let lock = dir
            .lock_application_directory()
            .expect("only this process uses the scratch directory");
        let file = dir
            .application_directory()
            .join(kstreams_state::__private::PROCESS_FILE_NAME);
        std::fs::write(&file, bytes).expect("writing the fuzzed process file");
        // Whatever the file held, the instance gets an id, and the same one
        // on its next start.
        let id = lock
            .initialize_process_id()
            .expect("a process id whatever the file holds");
        assert_eq!(
            lock.initialize_process_id().expect("the id is read back"),
            id
        );
    }
}

/// The metadata committed beside each offset (Kafka Streams'
/// `TopicPartitionMetadata`, base64), as the broker returns it; what
/// decodes must encode to a string that decodes to the same metadata.
pub fn offset_metadata(data: &[u8]) {
    use kstreams_time::PartitionMetadata;

    let committed = String::from_utf8_lossy(data);
    if let Some(metadata) = PartitionMetadata::decode(&committed) {
        let encoded = metadata.encode();
        assert_eq!(PartitionMetadata::decode(&encoded), Some(metadata));
    }
}

/// The writer schema registered as id 1, and as id 2 an evolution of it
/// (a field added with a default, int promoted to long) that the reading
/// serde of odd inputs resolves every record into.
const WRITER_SCHEMA: &str = r#"{
  "type": "record", "name": "Event", "namespace": "fuzz",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "count", "type": "int"},
    {"name": "score", "type": ["null", "double"], "default": null},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
    {"name": "payload", "type": "bytes"},
    {"name": "inner", "type": {"type": "record", "name": "Inner",
      "fields": [{"name": "flag", "type": "boolean"}, {"name": "ratio", "type": "float"}]}}
  ]
}"#;

/// [`WRITER_SCHEMA`] evolved: `count` promoted to long, a field added with
/// a default.
fn reader_schema() -> String {
    let promoted = WRITER_SCHEMA.replace(
        r#"{"name": "count", "type": "int"}"#,
        r#"{"name": "count", "type": "long"}"#,
    );
    let end = promoted
        .rfind(']')
        .expect("the writer schema's field list ends");
    format!(
        r#"{}, {{"name": "added", "type": "string", "default": "none"}}{}"#,
        &promoted[..end].trim_end(),
        &promoted[end..]
    )
}

struct AvroSerdes {
    writer_only: GenericAvroSerde,
    resolving: GenericAvroSerde,
}

fn avro_serdes() -> &'static AvroSerdes {
    static SERDES: OnceLock<AvroSerdes> = OnceLock::new();
    SERDES.get_or_init(|| {
        let registry = Arc::new(MockSchemaRegistryClient::new());
        registry
            .add_with_id(SchemaId(1), WRITER_SCHEMA)
            .expect("the writer schema parses");
        registry
            .add_with_id(SchemaId(2), &reader_schema())
            .expect("the reader schema parses");
        let reader =
            Arc::new(Schema::parse_str(&reader_schema()).expect("the reader schema parses"));
        AvroSerdes {
            writer_only: GenericAvroSerde::new(registry.clone()),
            resolving: GenericAvroSerde::new(registry).with_reader_schema(reader),
        }
    })
}

/// Avro in the Confluent wire format (magic byte, schema id, Avro binary),
/// read by `GenericAvroSerde` as written (first byte even) or resolved into
/// an evolved reader schema (odd). A record it reads must serialize, and
/// what that writes must read back to the same value. (Not the same bytes:
/// a map's entries are written in hash order.)
pub fn avro(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let serdes = avro_serdes();
    let serde = if pick % 2 == 0 {
        &serdes.writer_only
    } else {
        &serdes.resolving
    };
    let headers = Headers::new();
    if let Ok(record) = serde.deserialize(TOPIC, &headers, Some(bytes)) {
        let written = serde
            .serialize(TOPIC, &mut Headers::new(), &record)
            .expect("a record the serde read serializes")
            .expect("a record is never null");
        let again = serde
            .deserialize(TOPIC, &headers, Some(&written))
            .expect("a written record reads back");
        assert!(
            same_avro(&again.value, &record.value),
            "{:?} read back as {:?}",
            record.value,
            again.value
        );
    }
}

/// Equal Avro values, floats by their bits (a NaN read back is the same
/// NaN), maps whatever their order.
fn same_avro(
    a: &kstreams_avro::apache_avro::types::Value,
    b: &kstreams_avro::apache_avro::types::Value,
) -> bool {
    use kstreams_avro::apache_avro::types::Value;
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_avro(x, y))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_avro(v, w)))
        }
        (Value::Record(x), Value::Record(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((n, v), (m, w))| n == m && same_avro(v, w))
        }
        (Value::Union(i, x), Value::Union(j, y)) => i == j && same_avro(x, y),
        _ => a == b,
    }
}

/// The Protobuf schema of the `protobuf` target: the message it reads is
/// nested, so a record's indexes must name `[1, 0]`.
const PROTO_SCHEMA: &str = r#"syntax = "proto3";
package fuzz;
message Other { string s = 1; }
message Outer {
  message Event {
    string name = 1;
    bytes payload = 2;
    repeated sint64 counts = 3;
    Other other = 4;
    map<string, int32> tags = 5;
    oneof pick { uint32 small = 6; fixed64 large = 7; }
  }
}
"#;

/// `fuzz.Outer.Event` as prost derives it.
#[derive(Clone, PartialEq, prost::Message)]
struct FuzzEvent {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(bytes = "vec", tag = "2")]
    payload: Vec<u8>,
    #[prost(sint64, repeated, tag = "3")]
    counts: Vec<i64>,
    #[prost(message, optional, tag = "4")]
    other: Option<FuzzOther>,
    #[prost(map = "string, int32", tag = "5")]
    tags: std::collections::HashMap<String, i32>,
    #[prost(oneof = "FuzzPick", tags = "6, 7")]
    pick: Option<FuzzPick>,
}

/// `fuzz.Other`.
#[derive(Clone, PartialEq, prost::Message)]
struct FuzzOther {
    #[prost(string, tag = "1")]
    s: String,
}

/// The `pick` oneof of [`FuzzEvent`].
#[derive(Clone, PartialEq, prost::Oneof)]
enum FuzzPick {
    /// Field 6.
    #[prost(uint32, tag = "6")]
    Small(u32),
    /// Field 7.
    #[prost(fixed64, tag = "7")]
    Large(u64),
}

fn protobuf_serde() -> &'static ProtobufSerde<FuzzEvent> {
    static SERDE: OnceLock<ProtobufSerde<FuzzEvent>> = OnceLock::new();
    SERDE.get_or_init(|| {
        let registry = Arc::new(MockSchemaRegistryClient::new());
        registry
            .add_schema_with_id(
                SchemaId(1),
                RegistrySchema::new(SchemaType::Protobuf, PROTO_SCHEMA),
            )
            .expect("the mock takes the schema");
        let schema = ProtobufSchema::new(
            ProtoFile::new("fuzz.proto", PROTO_SCHEMA),
            "fuzz.Outer.Event",
        )
        .expect("the fuzz schema parses");
        ProtobufSerde::new(registry, schema)
    })
}

/// Protobuf in the Confluent wire format (magic byte, schema id, message
/// indexes, message), read by `ProtobufSerde`. A message it reads must
/// write and read back to the same message. (Not the same bytes: unknown
/// fields are dropped, a map's entries written in hash order.)
pub fn protobuf(data: &[u8]) {
    let serde = protobuf_serde();
    let headers = Headers::new();
    if let Ok(message) = serde.deserialize(TOPIC, &headers, Some(data)) {
        let written = serde
            .serialize(TOPIC, &mut Headers::new(), &message)
            .expect("a message the serde read serializes")
            .expect("a message is never null");
        let again = serde
            .deserialize(TOPIC, &headers, Some(&written))
            .expect("a written message reads back");
        assert_eq!(again, message);
    }
}

/// The JSON Schema of the `json_schema` target: every keyword kind a
/// validator walks (types, ranges, patterns, nesting, references inside).
const JSON_SCHEMA: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "fuzz.Event",
  "type": "object",
  "definitions": {"tag": {"type": "string", "pattern": "^[a-z]{1,8}$"}},
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 64},
    "count": {"type": "integer", "minimum": 0, "multipleOf": 3},
    "ratio": {"type": "number", "exclusiveMaximum": 1.5},
    "tags": {"type": "array", "items": {"$ref": "#/definitions/tag"}, "uniqueItems": true},
    "nested": {"oneOf": [{"type": "null"}, {"$ref": "#"}]}
  },
  "required": ["name"],
  "additionalProperties": {"type": ["boolean", "string"]}
}"##;

fn json_schema_serdes() -> &'static [JsonSchemaSerde<serde_json::Value>; 2] {
    static SERDES: OnceLock<[JsonSchemaSerde<serde_json::Value>; 2]> = OnceLock::new();
    SERDES.get_or_init(|| {
        let registry = Arc::new(MockSchemaRegistryClient::new());
        registry
            .add_schema_with_id(
                SchemaId(1),
                RegistrySchema::new(SchemaType::Json, JSON_SCHEMA),
            )
            .expect("the mock takes the schema");
        let serde = |validate| {
            let schema = JsonSchema::parse(JSON_SCHEMA).expect("the fuzz schema compiles");
            JsonSchemaSerde::new(registry.clone(), schema).with_validation(validate)
        };
        [serde(false), serde(true)]
    })
}

/// JSON Schema in the Confluent wire format (magic byte, schema id, JSON),
/// read by `JsonSchemaSerde` without validation (first byte even) or with
/// it (odd). A document it reads must write and read back to the same
/// document.
pub fn json_schema(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let serde = &json_schema_serdes()[usize::from(pick % 2)];
    let headers = Headers::new();
    if let Ok(document) = serde.deserialize(TOPIC, &headers, Some(bytes)) {
        let written = serde
            .serialize(TOPIC, &mut Headers::new(), &document)
            .expect("a document the serde read serializes")
            .expect("a document is never null");
        let again = serde
            .deserialize(TOPIC, &headers, Some(&written))
            .expect("a written document reads back");
        assert!(json_close(&again, &document), "{again} is not {document}");
    }
}
