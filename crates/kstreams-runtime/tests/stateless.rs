//! Every stateless operator through the TopologyTestDriver: values, keys,
//! timestamps and headers carried through; branching and merging; null keys
//! and values; errors from user code surfaced with the node that failed.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_dsl::{
    Branched, Consumed, FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord, Printed,
    Processor, ProcessorContext, ProcessorError, Produced, RecordContext, Repartitioned,
    StreamsBuilder, StreamsError, Topology,
};
use kstreams_record::{Headers, I64Serde, Nullable, Record, StringSerde};
use kstreams_runtime::{
    DeserializationHandling, ProcessingHandling, TaskConfig, TopologyTestDriver,
};

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn driver(builder: StreamsBuilder) -> TopologyTestDriver {
    TopologyTestDriver::with_config(builder.build().unwrap(), TaskConfig::new("app"), 0).unwrap()
}

#[test]
fn filter_and_filter_not_keep_key_timestamp_and_headers() {
    let b = StreamsBuilder::new();
    let input = b.stream::<S, S>("in");
    input.filter(|_, v| v.len() > 2).to("long");
    input.filter_not(|_, v| v.len() > 2).to("short");
    let d = driver(b);
    let topic = d.create_input_topic("in", StringSerde, StringSerde);
    let long = d.create_output_topic("long", StringSerde, StringSerde);
    let short = d.create_output_topic("short", StringSerde, StringSerde);
    topic.pipe_record(
        Record::new(s("a"), s("abcd"), 10).with_headers(Headers::new().with("h", "1")),
    );
    topic.pipe_input_at(s("b"), s("ab"), 20);
    assert_eq!(
        long.read_record(),
        Record::new(s("a"), s("abcd"), 10).with_headers(Headers::new().with("h", "1"))
    );
    assert_eq!(short.read_record(), Record::new(s("b"), s("ab"), 20));
    assert!(long.is_empty() && short.is_empty());
}

#[test]
fn map_changes_key_and_value_types() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .map(|k, v| (v.len() as i64, format!("{k}:{v}")))
        .to_with("out", Produced::with(I64Serde, StringSerde));
    let d = driver(b);
    let input = d.create_input_topic("in", StringSerde, StringSerde);
    let out = d.create_output_topic("out", I64Serde, StringSerde);
    input.pipe_input_at(s("k"), s("hello"), 5);
    assert_eq!(out.read_record(), Record::new(5, s("k:hello"), 5));
}

#[test]
fn map_values_and_map_values_with_key() {
    let b = StreamsBuilder::new();
    let input = b.stream::<S, S>("in");
    input
        .map_values(|v| v.len() as i64)
        .to_with("lengths", Produced::with(StringSerde, I64Serde));
    input
        .map_values_with_key(|k, v| format!("{k}={v}"))
        .to("pairs");
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let lengths = d.create_output_topic("lengths", StringSerde, I64Serde);
    let pairs = d.create_output_topic("pairs", StringSerde, StringSerde);
    t.pipe_key_value_list([(s("a"), s("xyz")), (s("b"), s(""))]);
    assert_eq!(
        lengths.read_key_values_to_list(),
        vec![(s("a"), 3), (s("b"), 0)]
    );
    assert_eq!(pairs.read_values_to_list(), vec![s("a=xyz"), s("b=")]);
}

#[test]
fn flat_map_and_flat_map_values_emit_in_order_with_the_input_timestamp() {
    let b = StreamsBuilder::new();
    let input = b.stream::<S, S>("in");
    input
        .flat_map_values(|v| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .to("words");
    input
        .flat_map(|k, v| {
            v.chars()
                .map(move |c| (c.to_string(), k.clone()))
                .collect::<Vec<_>>()
        })
        .to("chars");
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let words = d.create_output_topic("words", StringSerde, StringSerde);
    let chars = d.create_output_topic("chars", StringSerde, StringSerde);
    t.pipe_record(
        Record::new(s("k"), s("to be"), 42).with_headers(Headers::new().with("trace", "t1")),
    );
    let got = words.read_records_to_list();
    assert_eq!(
        got.iter().map(|r| r.value.as_str()).collect::<Vec<_>>(),
        ["to", "be"]
    );
    assert!(got
        .iter()
        .all(|r| r.key == "k" && r.timestamp == 42 && r.headers.last("trace").is_some()));
    let got = chars.read_key_values_to_list();
    assert_eq!(
        got,
        vec![
            (s("t"), s("k")),
            (s("o"), s("k")),
            (s(" "), s("k")),
            (s("b"), s("k")),
            (s("e"), s("k"))
        ]
    );
    // An empty result forwards nothing.
    t.pipe_input(s("k"), s(""));
    assert_eq!(words.read_values_to_list(), vec![s("")]);
    assert!(chars.is_empty());
}

#[test]
fn select_key_peek_and_foreach() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let peeked = Arc::new(Mutex::new(Vec::new()));
    let b = StreamsBuilder::new();
    let (seen2, peeked2) = (seen.clone(), peeked.clone());
    let rekeyed = b
        .stream::<S, S>("in")
        .select_key(|_, v| v.to_uppercase())
        .peek(move |k, v| peeked2.lock().unwrap().push((k.clone(), v.clone())));
    rekeyed.foreach(move |k, _| seen2.lock().unwrap().push(k.clone()));
    rekeyed.to("out");
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let out = d.create_output_topic("out", StringSerde, StringSerde);
    t.pipe_input_at(s("old"), s("x"), 7);
    assert_eq!(out.read_record(), Record::new(s("X"), s("x"), 7));
    assert_eq!(*peeked.lock().unwrap(), vec![(s("X"), s("x"))]);
    assert_eq!(*seen.lock().unwrap(), vec![s("X")]);
}

#[test]
fn split_routes_to_the_first_matching_branch_and_the_default() {
    let b = StreamsBuilder::new();
    let branches = b
        .stream::<S, i64>("in")
        .split_named("n-")
        .branch(|_, v| *v < 0, Branched::named("negative"))
        .branch(|_, v| *v % 2 == 0, Branched::named("even"))
        .branch(|_, v| *v == 0, Branched::named("zero-never")) // 0 is even: earlier branch wins
        .default_branch(Branched::named("odd"));
    assert_eq!(
        {
            let mut k: Vec<_> = branches.keys().cloned().collect();
            k.sort();
            k
        },
        ["n-even", "n-negative", "n-odd", "n-zero-never"]
    );
    for (name, stream) in &branches {
        stream.to(&format!("out-{name}"));
    }
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, I64Serde);
    t.pipe_key_value_list([(s("a"), -3), (s("b"), 4), (s("c"), 0), (s("d"), 7)]);
    let read = |n: &str| {
        d.create_output_topic(&format!("out-{n}"), StringSerde, I64Serde)
            .read_values_to_list()
    };
    assert_eq!(read("n-negative"), vec![-3]);
    assert_eq!(read("n-even"), vec![4, 0]);
    assert_eq!(read("n-zero-never"), Vec::<i64>::new());
    assert_eq!(read("n-odd"), vec![7]);
}

#[test]
fn split_without_default_drops_unmatched_and_runs_branch_functions() {
    let b = StreamsBuilder::new();
    let branches = b
        .stream::<S, S>("in")
        .split()
        .branch(
            |_, v| v.starts_with('x'),
            Branched::with_consumer(|s| s.to("x")),
        )
        .branch(
            |_, v| v.starts_with('y'),
            Branched::with_function(|s| s.map_values(|v: S| v.to_uppercase())),
        )
        .no_default_branch();
    let (name, y) = branches.into_iter().next().unwrap();
    assert_eq!(name, "KSTREAM-BRANCH-00000000012");
    y.to("y");
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    t.pipe_key_value_list([(s("k"), s("x1")), (s("k"), s("y1")), (s("k"), s("z1"))]);
    assert_eq!(
        d.create_output_topic("x", StringSerde, StringSerde)
            .read_values_to_list(),
        [s("x1")]
    );
    assert_eq!(
        d.create_output_topic("y", StringSerde, StringSerde)
            .read_values_to_list(),
        [s("Y1")]
    );
}

#[test]
fn merge_interleaves_both_streams_in_processing_order() {
    let b = StreamsBuilder::new();
    let a = b.stream::<S, S>("a");
    let c = b.stream::<S, S>("b").map_values(|v| format!("b:{v}"));
    a.merge(&c).to("out");
    let d = driver(b);
    let ta = d.create_input_topic("a", StringSerde, StringSerde);
    let tb = d.create_input_topic("b", StringSerde, StringSerde);
    let out = d.create_output_topic("out", StringSerde, StringSerde);
    ta.pipe_input_at(s("1"), s("x"), 1);
    tb.pipe_input_at(s("2"), s("y"), 2);
    ta.pipe_input_at(s("3"), s("z"), 3);
    let got: Vec<_> = out
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![
            (s("1"), s("x"), 1),
            (s("2"), s("b:y"), 2),
            (s("3"), s("z"), 3)
        ]
    );
}

#[test]
fn null_keys_and_tombstones_flow_through_option_types() {
    let b = StreamsBuilder::new();
    b.stream::<Option<S>, Option<S>>("in")
        .map_values(|v| v.map(|v| v.to_uppercase()))
        .to("out");
    let d = driver(b);
    let t = d.create_input_topic("in", Nullable(StringSerde), Nullable(StringSerde));
    let out = d.create_output_topic("out", Nullable(StringSerde), Nullable(StringSerde));
    t.pipe_input(None, Some(s("v")));
    t.pipe_input(Some(s("k")), None);
    assert_eq!(
        out.read_key_values_to_list(),
        vec![(None, Some(s("V"))), (Some(s("k")), None)]
    );
    // A tombstone removes its key from the table view of a topic.
    t.pipe_input(Some(s("k")), Some(s("a")));
    t.pipe_input(Some(s("j")), Some(s("b")));
    t.pipe_input(Some(s("k")), None);
    assert_eq!(
        out.read_key_values_to_map(),
        HashMap::from([(Some(s("j")), Some(s("B")))])
    );
}

#[test]
fn a_null_for_a_non_nullable_type_fails_naming_source_record_and_fix() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in").to("out");
    let d = driver(b);
    let t = d.create_input_topic("in", Nullable(StringSerde), Nullable(StringSerde));
    let err = t.try_pipe_input(Some(s("k")), None).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, StreamsError::Deserialization { part: "value", .. }),
        "{text}"
    );
    assert!(
        text.contains("KSTREAM-SOURCE-0000000000")
            && text.contains("in-0@0")
            && text.contains("Option<_>"),
        "{text}"
    );
}

#[test]
fn bad_bytes_are_skipped_under_log_and_continue() {
    let b = StreamsBuilder::new();
    b.stream::<S, i64>("in").to("out");
    let mut config = TaskConfig::new("app");
    config.deserialization = DeserializationHandling::LogAndContinue;
    let d = TopologyTestDriver::with_config(b.build().unwrap(), config, 0).unwrap();
    let t = d.create_input_topic("in", StringSerde, I64Serde);
    let out = d.create_output_topic("out", StringSerde, I64Serde);
    t.try_pipe_raw(Some(b"k".to_vec()), Some(vec![1, 2, 3]), 1)
        .unwrap();
    t.pipe_input(s("k"), 9);
    assert_eq!(out.read_values_to_list(), vec![9]);
    assert_eq!(d.dropped_records(), 1);
}

#[test]
fn a_panicking_user_function_is_an_error_naming_node_and_record() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .map_values_named(
            |_, v: S| {
                if v == "boom" {
                    panic!("cannot map {v}")
                } else {
                    v
                }
            },
            "risky",
        )
        .to("out");
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let out = d.create_output_topic("out", StringSerde, StringSerde);
    t.pipe_input(s("k"), s("fine"));
    let err = t.try_pipe_input(s("k"), s("boom")).unwrap_err();
    match &err {
        StreamsError::Panic {
            node,
            position,
            message,
        } => {
            assert_eq!(node, "risky");
            assert_eq!(position.as_ref().unwrap().offset, 1);
            assert_eq!(message, "cannot map boom");
        }
        other => panic!("expected a panic error, got {other}"),
    }
    assert_eq!(
        err.to_string(),
        "processor \"risky\" panicked on record in-0@1: cannot map boom"
    );
    // The task goes on with the next record.
    t.pipe_input(s("k"), s("after"));
    assert_eq!(out.read_values_to_list(), vec![s("fine"), s("after")]);
}

/// Fails on values that do not parse; the error keeps its type.
struct Parse;

impl Processor<S, S, S, i64> for Parse {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        record: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        let n: i64 = record.value.parse()?;
        ctx.forward(record.with_value(n))?;
        Ok(())
    }
}

#[test]
fn an_error_returned_by_a_processor_names_that_processor_not_its_parents() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .filter(|_, _| true)
        .process_named(|| Parse, &[], "parse")
        .to_with("out", Produced::with(StringSerde, I64Serde));
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let err = t.try_pipe_input(s("k"), s("12x")).unwrap_err();
    match &err {
        StreamsError::Processing { node, source, .. } => {
            assert_eq!(node, "parse");
            assert!(source.downcast_ref::<std::num::ParseIntError>().is_some());
        }
        other => panic!("expected a processing error, got {other}"),
    }
}

#[test]
fn processing_handler_continue_drops_the_failed_record() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .process(|| Parse, &[])
        .to_with("out", Produced::with(StringSerde, I64Serde));
    let mut config = TaskConfig::new("app");
    config.processing = ProcessingHandling::Continue;
    let d = TopologyTestDriver::with_config(b.build().unwrap(), config, 0).unwrap();
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let out = d.create_output_topic("out", StringSerde, I64Serde);
    t.pipe_key_value_list([(s("k"), s("1")), (s("k"), s("x")), (s("k"), s("3"))]);
    assert_eq!(out.read_values_to_list(), vec![1, 3]);
    assert_eq!(d.dropped_records(), 1);
}

#[test]
fn to_dynamic_chooses_the_topic_per_record() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in").to_dynamic(
        |k: &S, _: &S, ctx: &RecordContext<'_>| format!("out-{k}-{}", ctx.metadata.unwrap().topic),
        Produced::default(),
    );
    let d = driver(b);
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    t.pipe_input(s("a"), s("1"));
    t.pipe_input(s("b"), s("2"));
    assert_eq!(
        d.create_output_topic("out-a-in", StringSerde, StringSerde)
            .read_value(),
        "1"
    );
    assert_eq!(
        d.create_output_topic("out-b-in", StringSerde, StringSerde)
            .read_value(),
        "2"
    );
    assert_eq!(
        d.produced_topic_names().into_iter().collect::<Vec<_>>(),
        ["out-a-in", "out-b-in"]
    );
}

#[test]
fn stream_of_several_topics_and_of_a_pattern() {
    let b = StreamsBuilder::new();
    b.stream_topics::<S, S>(&["t1", "t2"], Consumed::default())
        .to("joined");
    b.stream_pattern::<S, S>("metrics-.*", Consumed::default())
        .to("metrics");
    let d = driver(b);
    d.create_input_topic("t1", StringSerde, StringSerde)
        .pipe_input(s("a"), s("1"));
    d.create_input_topic("t2", StringSerde, StringSerde)
        .pipe_input(s("b"), s("2"));
    d.create_input_topic("metrics-cpu", StringSerde, StringSerde)
        .pipe_input(s("c"), s("3"));
    let err = d
        .create_input_topic("xmetrics-cpu", StringSerde, StringSerde)
        .try_pipe_input(s("c"), s("3"));
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("unknown topic \"xmetrics-cpu\""));
    assert_eq!(
        d.create_output_topic("joined", StringSerde, StringSerde)
            .read_values_to_list(),
        [s("1"), s("2")]
    );
    assert_eq!(
        d.create_output_topic("metrics", StringSerde, StringSerde)
            .read_values_to_list(),
        [s("3")]
    );
}

#[test]
fn repartition_goes_through_the_internal_topic_and_drops_null_keys() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .map(|_, v| (if v.is_empty() { None } else { Some(v.clone()) }, v))
        .repartition_with(
            Repartitioned::with(Nullable(StringSerde), StringSerde).with_name("by-value"),
        )
        .peek(|_, _| {})
        .to_with("out", Produced::with(Nullable(StringSerde), StringSerde));
    let topology = b.build().unwrap();
    assert_eq!(topology.subtopology_count(), 2);
    assert_eq!(
        topology.source_topics("app")[1].topics,
        ["app-by-value-repartition"]
    );
    let d = TopologyTestDriver::with_config(topology, TaskConfig::new("app"), 0).unwrap();
    let t = d.create_input_topic("in", StringSerde, StringSerde);
    let out = d.create_output_topic("out", Nullable(StringSerde), StringSerde);
    t.pipe_input_at(s("x"), s("v1"), 3);
    t.pipe_input_at(s("y"), s(""), 4);
    assert_eq!(out.read_record(), Record::new(Some(s("v1")), s("v1"), 3));
    assert!(
        out.is_empty(),
        "the null-keyed record must not be repartitioned"
    );
    // The repartition topic itself can be read, as in Kafka Streams' driver.
    let repartition = d.create_output_topic(
        "app-by-value-repartition",
        Nullable(StringSerde),
        StringSerde,
    );
    assert_eq!(
        repartition.read_key_values_to_list(),
        vec![(Some(s("v1")), s("v1"))]
    );
}

#[test]
fn a_topic_written_and_read_by_the_topology_is_fed_back() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .map_values(|v| format!("{v}!"))
        .to("loop");
    b.stream::<S, S>("loop")
        .map_values(|v| v.to_uppercase())
        .to("out");
    let d = driver(b);
    d.create_input_topic("in", StringSerde, StringSerde)
        .pipe_input(s("k"), s("hi"));
    assert_eq!(
        d.create_output_topic("loop", StringSerde, StringSerde)
            .read_value(),
        "hi!"
    );
    assert_eq!(
        d.create_output_topic("out", StringSerde, StringSerde)
            .read_value(),
        "HI!"
    );
}

#[test]
fn print_writes_labelled_lines() {
    let buffer: Arc<Mutex<Vec<u8>>> = Arc::default();
    let writer: Arc<Mutex<dyn std::io::Write + Send>> = buffer.clone();
    let b = StreamsBuilder::new();
    let input = b.stream::<S, S>("in");
    input.print(Printed::to_writer(writer.clone()).with_label("words"));
    input.print(Printed::to_writer(writer).with_key_value_mapper(|k, v| format!("{k}->{v}")));
    let d = driver(b);
    d.create_input_topic("in", StringSerde, StringSerde)
        .pipe_input(s("k"), s("v"));
    let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text,
        "[words]: \"k\", \"v\"\n[KSTREAM-PRINTER-0000000002]: k->v\n"
    );
}

/// Counts per key in a store and forwards the running count; punctuates
/// the total on stream time.
struct Counter {
    store: Option<kstreams_state::KeyValueStoreHandle<S, i64>>,
}

impl Processor<S, S, S, i64> for Counter {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, S, i64>) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store("counts")?);
        ctx.schedule(
            Duration::from_millis(10),
            kstreams_time::PunctuationType::StreamTime,
        );
        Ok(())
    }
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        record: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        let store = self.store.as_ref().expect("init ran");
        let count = store.borrow().get(&record.key)?.unwrap_or(0) + 1;
        store.borrow_mut().put(record.key.clone(), count)?;
        ctx.forward(record.with_value(count))?;
        Ok(())
    }
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        _: kstreams_dsl::PunctuationId,
        timestamp: i64,
    ) -> Result<(), ProcessorError> {
        let total: i64 = self
            .store
            .as_ref()
            .unwrap()
            .borrow()
            .all()?
            .map(|entry| entry.map(|(_, c)| c))
            .sum::<Result<i64, _>>()?;
        ctx.forward_to("totals", Record::new(s("total"), total, timestamp))?;
        Ok(())
    }
}

#[test]
fn processor_api_with_store_punctuation_and_named_children() {
    let mut t = Topology::new();
    t.add_source::<S, S>("src", &["in"], StringSerde, StringSerde)
        .unwrap()
        .add_processor("count", || Counter { store: None }, &["src"])
        .unwrap()
        .add_state_store(
            kstreams_state::Stores::key_value_store_builder(
                kstreams_state::Stores::in_memory_key_value_store("counts"),
                StringSerde,
                I64Serde,
            ),
            &["count"],
        )
        .unwrap()
        .add_sink::<S, i64>("counts-out", "counts", StringSerde, I64Serde, &["count"])
        .unwrap()
        .add_sink::<S, i64>("totals", "totals", StringSerde, I64Serde, &["count"])
        .unwrap();
    let d = TopologyTestDriver::with_config(t, TaskConfig::new("app"), 0).unwrap();
    let input = d.create_input_topic("in", StringSerde, StringSerde);
    let counts = d.create_output_topic("counts", StringSerde, I64Serde);
    let totals = d.create_output_topic("totals", StringSerde, I64Serde);
    input.pipe_input_at(s("a"), s("x"), 0); // first stream time: punctuates at 0
    input.pipe_input_at(s("a"), s("x"), 5);
    input.pipe_input_at(s("b"), s("x"), 12); // passes 10: punctuates at 12
    input.pipe_input_at(s("b"), s("x"), 3); // out of order: stream time stays 12
                                            // forward(record) goes to every child, totals included.
    let count_values: Vec<_> = counts.read_key_values_to_list();
    assert_eq!(
        count_values,
        vec![(s("a"), 1), (s("a"), 2), (s("b"), 1), (s("b"), 2)]
    );
    let totals: Vec<_> = totals
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        totals,
        vec![
            (s("a"), 1, 0),
            (s("total"), 1, 0),
            (s("a"), 2, 5),
            (s("b"), 1, 12),
            (s("total"), 3, 12),
            (s("b"), 2, 3)
        ]
    );
    let store = d.get_key_value_store::<S, i64>("counts").unwrap();
    assert_eq!(store.borrow().get(&s("b")).unwrap(), Some(2));
}

#[test]
fn wall_clock_punctuation_follows_the_mocked_clock() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .process(|| common::Ticker(Duration::from_secs(1)), &[])
        .to("ticks");
    let d =
        TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 1_000).unwrap();
    let ticks = d.create_output_topic("ticks", StringSerde, StringSerde);
    d.advance_wall_clock_time(Duration::from_millis(999));
    assert!(ticks.is_empty());
    d.advance_wall_clock_time(Duration::from_millis(1));
    d.advance_wall_clock_time(Duration::from_millis(2_500)); // one tick, missed ones are not replayed
    assert_eq!(ticks.read_values_to_list(), vec![s("2000"), s("4500")]);
}

#[test]
fn a_store_not_connected_to_the_processor_is_refused() {
    let b = StreamsBuilder::new();
    b.add_state_store(kstreams_state::Stores::key_value_store_builder(
        kstreams_state::Stores::in_memory_key_value_store("counts"),
        StringSerde,
        I64Serde,
    ));
    b.stream::<S, S>("in")
        .process(|| Counter { store: None }, &[])
        .to_with("out", Produced::with(StringSerde, I64Serde));
    let err = TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0)
        .err()
        .unwrap();
    assert!(
        matches!(err, StreamsError::StoreNotConnected { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("has no access to state store \"counts\""),
        "{err}"
    );
}

struct Suffix;

impl FixedKeyProcessor<S, S, usize> for Suffix {
    fn process(
        &mut self,
        ctx: &mut FixedKeyProcessorContext<'_, '_, S, usize>,
        record: FixedKeyRecord<S, S>,
    ) -> Result<(), ProcessorError> {
        let len = record.value().len();
        ctx.forward(record.with_value(len))?;
        Ok(())
    }
}

#[test]
fn process_values_keeps_the_key() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .process_values(|| Suffix, &[])
        .map_values(|n| n as i64)
        .to_with("out", Produced::with(StringSerde, I64Serde));
    let d = driver(b);
    d.create_input_topic("in", StringSerde, StringSerde)
        .pipe_input_at(s("k"), s("four"), 9);
    assert_eq!(
        d.create_output_topic("out", StringSerde, I64Serde)
            .read_record(),
        Record::new(s("k"), 4, 9)
    );
}

#[test]
fn negative_timestamps_fail_by_default() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in").to("out");
    let d = driver(b);
    let err = d
        .create_input_topic("in", StringSerde, StringSerde)
        .try_pipe_record(Record::new(s("k"), s("v"), -5));
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("invalid timestamp -5"));
}

#[test]
fn input_topic_auto_advances_time() {
    let b = StreamsBuilder::new();
    b.stream::<Option<S>, S>("in").to("out");
    let d = driver(b);
    let t = d.create_input_topic_at(
        "in",
        Nullable(StringSerde),
        StringSerde,
        100,
        Duration::from_millis(10),
    );
    t.pipe_value_list([s("a"), s("b")]);
    t.advance_time(Duration::from_millis(1000));
    t.pipe_value(s("c"));
    let out = d.create_output_topic("out", Nullable(StringSerde), StringSerde);
    let times: Vec<_> = out
        .read_records_to_list()
        .into_iter()
        .map(|r| r.timestamp)
        .collect();
    assert_eq!(times, vec![100, 110, 1120]);
}

#[test]
fn operator_mistakes_are_reported_by_build() {
    let b = StreamsBuilder::new();
    let input = b.stream::<S, S>("in");
    input.filter_named(|_, _| true, "same").to("a");
    input.filter_named(|_, _| true, "same").to("b");
    let err = b.build().unwrap_err();
    assert!(err.to_string().contains("\"same\" already exists"), "{err}");
}

#[test]
fn processor_api_checks_edge_types_at_build_time() {
    let mut t = Topology::new();
    t.add_source::<S, i64>("src", &["in"], StringSerde, I64Serde)
        .unwrap();
    let err = t.add_processor("p", || Parse, &["src"]).err().unwrap();
    assert!(
        err.to_string()
            .contains("takes records of type (alloc::string::String, alloc::string::String)"),
        "{err}"
    );
    let err = t
        .add_sink::<S, S>("sink", "out", StringSerde, StringSerde, &["nope"])
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("parent \"nope\", which is not in the topology"),
        "{err}"
    );
}
