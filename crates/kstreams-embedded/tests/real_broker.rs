//! The same round trip against the real broker of `cargo xtask kafka start`;
//! skipped without KSTREAMS_BOOTSTRAP (and failing in CI without it).

mod common;

use kstreams_embedded::{create_topic, test_broker, unique_name};

#[test]
fn records_come_back_to_their_partitions_in_order() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let topic = unique_name("round-trip");
    create_topic(&bootstrap, &topic, 3, 1).unwrap();
    common::round_trip(&bootstrap, &topic, 3, 5_000);
}

#[test]
fn creating_an_existing_topic_is_an_error() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let topic = unique_name("twice");
    create_topic(&bootstrap, &topic, 1, 1).unwrap();
    let error = create_topic(&bootstrap, &topic, 1, 1).unwrap_err();
    assert!(error.to_string().contains(&topic), "{error}");
}
