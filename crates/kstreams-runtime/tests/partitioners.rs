//! Partitioners of the application's own (`StreamPartitioner`) in the
//! TopologyTestDriver, whose topics have one partition: the default when
//! the partitioner declines, a record dropped when it chooses no
//! partition, duplicates written once, a partition the topic does not have
//! an error naming the sink and the topic. The broker side (partitions
//! chosen among many, multicast copies, a repartition topic) is the
//! `custom-partitioner` compat scenario against Kafka Streams.

use std::sync::{Arc, Mutex};

use kstreams_dsl::{Produced, Repartitioned, StreamsBuilder, StreamsError, Topology};
use kstreams_record::{Headers, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

/// What the partitioner saw: topic, key, value, a header, partition count.
type Seen = Arc<Mutex<Vec<(String, String, String, Option<String>, i32)>>>;

/// Keys name the partitioner's answer: "default", "none", "twice",
/// "beyond", else partition 0.
fn by_key(seen: Seen) -> impl Fn(&str, &S, &S, &Headers, i32) -> Option<Vec<i32>> {
    move |topic, key, value, headers, partitions| {
        let header = headers
            .last("tenant")
            .and_then(|h| h.value.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned());
        seen.lock().unwrap().push((
            topic.to_string(),
            key.clone(),
            value.clone(),
            header,
            partitions,
        ));
        match key.as_str() {
            "default" => None,
            "none" => Some(vec![]),
            "twice" => Some(vec![0, 0]),
            "beyond" => Some(vec![0, partitions]),
            _ => Some(vec![0]),
        }
    }
}

fn driver(topology: Topology) -> TopologyTestDriver {
    TopologyTestDriver::with_config(topology, TaskConfig::new("app"), 0).unwrap()
}

#[test]
fn a_sinks_partitioner_sees_the_typed_record_and_its_answer_is_kept() {
    let seen = Seen::default();
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in").to_with(
        "out",
        Produced::with(StringSerde, StringSerde).with_partitioner(by_key(seen.clone())),
    );
    let driver = driver(b.build().unwrap());
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    let mut headers = Headers::new();
    headers.add("tenant", Some(b"acme".to_vec()));
    input.pipe_record(kstreams_record::Record {
        key: s("zero"),
        value: s("a"),
        timestamp: 5,
        headers,
    });
    for key in ["default", "none", "twice"] {
        input.pipe_input_at(s(key), s("b"), 6);
    }
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("zero"), s("a")),
            (s("default"), s("b")),
            (s("twice"), s("b"))
        ],
        "none is dropped; twice is one partition, written once"
    );
    assert_eq!(driver.dropped_records(), 1, "the record for no partition");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        (s("out"), s("zero"), s("a"), Some(s("acme")), 1),
        "topic, typed key and value, headers (KIP-1321), the driver's one partition"
    );
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_partition_the_topic_does_not_have_fails_the_sink_naming_it() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in").to_with(
        "out",
        Produced::with(StringSerde, StringSerde)
            .with_name("to-out")
            .with_partitioner(by_key(Seen::default())),
    );
    let driver = driver(b.build().unwrap());
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let error = input.try_pipe_input(s("beyond"), s("x")).unwrap_err();
    assert!(
        matches!(&error, StreamsError::Partitioning { node, topic, .. } if node == "to-out" && topic == "out"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("chose partition 1, but the topic has 1"),
        "{error}"
    );
}

#[test]
fn repartition_and_processor_api_sinks_take_a_partitioner() {
    let seen = Seen::default();
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .repartition_with(
            Repartitioned::with(StringSerde, StringSerde)
                .with_name("spread")
                .with_partitioner(by_key(seen.clone())),
        )
        .to("out");
    let dsl = driver(b.build().unwrap());
    let input = dsl.create_input_topic("in", StringSerde, StringSerde);
    let output = dsl.create_output_topic("out", StringSerde, StringSerde);
    input.pipe_input_at(s("none"), s("x"), 1);
    input.pipe_input_at(s("k"), s("y"), 2);
    assert_eq!(output.read_key_values_to_list(), vec![(s("k"), s("y"))]);
    let topics: Vec<String> = seen.lock().unwrap().iter().map(|t| t.0.clone()).collect();
    assert_eq!(topics, vec![s("app-spread-repartition"); 2]);

    let seen = Seen::default();
    let mut topology = Topology::new();
    topology
        .add_source("source", &["in"], StringSerde, StringSerde)
        .unwrap()
        .add_sink_with_partitioner(
            "sink",
            "out",
            StringSerde,
            StringSerde,
            by_key(seen.clone()),
            &["source"],
        )
        .unwrap();
    let api = driver(topology);
    let input = api.create_input_topic("in", StringSerde, StringSerde);
    let output = api.create_output_topic("out", StringSerde, StringSerde);
    input.pipe_input_at(s("none"), s("x"), 1);
    input.pipe_input_at(s("twice"), s("y"), 2);
    assert_eq!(output.read_key_values_to_list(), vec![(s("twice"), s("y"))]);
    assert_eq!(seen.lock().unwrap().len(), 2);
}
