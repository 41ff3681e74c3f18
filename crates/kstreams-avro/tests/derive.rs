//! Rust types whose schema comes from `#[derive(AvroSchema)]` (the `derive`
//! feature): `cargo test -p kstreams-avro --features derive`.
#![cfg(feature = "derive")]

use std::sync::Arc;

use apache_avro::AvroSchema;
use kstreams_avro::{AvroSerde, MockSchemaRegistryClient, SchemaRegistryClient, Version};
use kstreams_record::{Headers, Serde};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, AvroSchema)]
struct Reading {
    sensor: String,
    celsius: f64,
    unit: Option<String>,
}

#[test]
fn a_derived_schema_registers_and_round_trips() {
    let registry = Arc::new(MockSchemaRegistryClient::new());
    let serde = AvroSerde::<Reading>::derived(registry.clone());
    for unit in [None, Some("C".to_owned())] {
        let reading = Reading {
            sensor: "s1".into(),
            celsius: 21.5,
            unit,
        };
        let bytes = serde
            .serialize("readings", &mut Headers::new(), &reading)
            .unwrap();
        let read = serde
            .deserialize("readings", &Headers::new(), bytes.as_deref())
            .unwrap();
        assert_eq!(read, reading);
    }
    let registered = registry
        .schema_by_version("readings-value", Version::Latest)
        .unwrap();
    assert!(
        registered.schema.contains("\"Reading\""),
        "{}",
        registered.schema
    );
}
