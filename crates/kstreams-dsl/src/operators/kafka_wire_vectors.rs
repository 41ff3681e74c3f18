//! The internal topics' and changelogs' byte layouts checked against the
//! bytes Kafka Streams' own serializers wrote (compat's `wire-vectors`
//! command, tests/fixtures/wire/kafka_wire_vectors.tsv): each vector is
//! decoded and encoded back to the same bytes.

use std::sync::Arc;

use kstreams_record::{Headers, Serde, StringSerde};

use crate::change::{Change, ChangeSerde};
use crate::operators::fk_format::{
    murmur3_hash128, parse_response, parse_subscription, response, subscription, ValueHash,
};
use crate::operators::outer_join_format::{
    encode_list, outer_key, parse_list, parse_outer_key, parse_side_value, side_value,
};

const VECTORS: &str = include_str!("../../tests/fixtures/wire/kafka_wire_vectors.tsv");

/// Each vector as its name, inputs and bytes.
fn vectors(prefix: &str) -> Vec<(String, Vec<String>, Vec<u8>)> {
    let found: Vec<_> = VECTORS
        .lines()
        .filter(|line| !line.starts_with('#') && line.starts_with(prefix))
        .map(|line| {
            let mut fields: Vec<String> = line.split('\t').map(str::to_string).collect();
            let hex = fields.pop().expect("a vector line has bytes");
            let name = fields.remove(0);
            (name, fields, decode_hex(&hex))
        })
        .collect();
    assert!(!found.is_empty(), "no vector named {prefix}...");
    found
}

fn decode_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn optional(text: &str) -> Option<String> {
    (text != "null").then(|| text.to_string())
}

fn hash_of(input: &str) -> Option<ValueHash> {
    let inner = input.strip_prefix("hash(")?.strip_suffix(')')?;
    Some(murmur3_hash128(inner.as_bytes()))
}

#[test]
fn table_repartition_values_are_kafkas() {
    let serde = ChangeSerde(Arc::new(StringSerde));
    for (name, inputs, bytes) in vectors("changed/") {
        let change = Change::new(optional(&inputs[0]), optional(&inputs[1]));
        let written = serde
            .serialize("t", &mut Headers::new(), &change)
            .unwrap()
            .unwrap();
        assert_eq!(written, bytes, "{name}");
        let read = serde
            .deserialize("t", &Headers::new(), Some(&bytes))
            .unwrap();
        assert_eq!(read, change, "{name}");
    }
}

#[test]
fn outer_join_store_keys_and_values_are_kafkas() {
    for (name, inputs, bytes) in vectors("outer-key/") {
        let left = name.ends_with("left");
        let timestamp: i64 = inputs[0].parse().unwrap();
        assert_eq!(
            outer_key(timestamp, left, inputs[1].as_bytes()),
            bytes,
            "{name}"
        );
        assert_eq!(
            parse_outer_key(&bytes),
            Some((timestamp, left, inputs[1].as_bytes())),
            "{name}"
        );
    }
    for (name, inputs, bytes) in vectors("outer-value/") {
        let left = name.ends_with("left");
        assert_eq!(side_value(left, inputs[0].as_bytes()), bytes, "{name}");
        assert_eq!(parse_side_value(&bytes), Some((left, inputs[0].as_bytes())));
    }
    for (name, inputs, bytes) in vectors("outer-list/") {
        let left = name.ends_with("left");
        let entries: Vec<Vec<u8>> = inputs[0]
            .split(',')
            .map(|v| side_value(left, v.as_bytes()))
            .collect();
        let refs: Vec<&[u8]> = entries.iter().map(Vec::as_slice).collect();
        assert_eq!(encode_list(&refs), bytes, "{name}");
        assert_eq!(parse_list(&bytes), Some(refs), "{name}");
    }
}

#[test]
fn value_hashes_are_kafkas_murmur3() {
    for (name, _, bytes) in vectors("murmur3/") {
        let input = decode_hex(name.strip_prefix("murmur3/").unwrap());
        assert_eq!(murmur3_hash128(&input).to_vec(), bytes, "{name}");
    }
}

#[test]
fn foreign_key_join_topics_are_kafkas() {
    let instructions = [
        ("DELETE_KEY_NO_PROPAGATE", 0),
        ("DELETE_KEY_AND_PROPAGATE", 1),
        ("PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE", 2),
        ("PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE", 3),
    ];
    for (name, inputs, bytes) in vectors("subscription/") {
        let label = name.strip_prefix("subscription/").unwrap();
        let instruction = instructions
            .iter()
            .find(|(n, _)| label.starts_with(n) && label[n.len()..].chars().all(|c| c != '_'))
            .map(|(_, i)| *i)
            .unwrap_or_else(|| panic!("unknown instruction in {name}"));
        let hash = hash_of(&inputs[0]);
        let partition: i32 = inputs[2].parse().unwrap();
        let written = subscription(instruction, hash.as_ref(), inputs[1].as_bytes(), partition);
        assert_eq!(written, bytes, "{name}");
        let read = parse_subscription(&bytes).unwrap();
        assert_eq!(read.instruction, instruction, "{name}");
        assert_eq!(read.hash, hash, "{name}");
        assert_eq!(read.primary_key, inputs[1].as_bytes(), "{name}");
        assert_eq!(read.primary_partition, Some(partition), "{name}");
    }
    for (name, inputs, bytes) in vectors("response/") {
        let hash = hash_of(&inputs[0]);
        let right = optional(&inputs[1]);
        let written = response(hash.as_ref(), right.as_deref().map(str::as_bytes));
        assert_eq!(written, bytes, "{name}");
        assert_eq!(
            parse_response(&bytes),
            Some((hash, right.as_deref().map(str::as_bytes))),
            "{name}"
        );
    }
}
