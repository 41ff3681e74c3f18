//! `describe()` against the text Apache Kafka Streams 4.4 prints for the same
//! programs (fixtures made by compat/topology-describe; see PROGRAMS.md).

use std::time::Duration;

use kstreams_dsl::{
    Branched, BufferConfig, Consumed, ForeignKeyExtractor, Grouped, Joined, KTable, Materialized,
    Named, Printed, Processor, ProcessorContext, ProcessorError, Produced, RecordContext,
    Repartitioned, StreamJoined, StreamsBuilder, Suppressed, TableJoined, TopicNameExtractor,
    Topology,
};
use kstreams_record::{Headers, I32Serde, I64Serde, Nullable, Record, StringSerde};
use kstreams_state::{SessionWindowedSerde, Stores, TimeWindowedSerde, Windowed};
use kstreams_time::{EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, TimeWindows};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/describe/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_describes_as(topology: &Topology, name: &str) {
    let got = topology.describe().to_string();
    let want = fixture(name);
    assert_eq!(
        got, want,
        "\n--- ours\n{got}--- Kafka Streams ({name})\n{want}"
    );
}

struct PassThrough;

impl Processor<String, String, String, String> for PassThrough {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        record: Record<String, String>,
    ) -> Result<(), ProcessorError> {
        ctx.forward(record)?;
        Ok(())
    }
}

#[test]
fn filter_map_to() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .filter(|_, v| !v.is_empty())
        .map_values(|v| v.to_uppercase())
        .to("output");
    assert_describes_as(&b.build().unwrap(), "filter_map_to");
}

#[test]
fn two_topics_flat_map() {
    let b = StreamsBuilder::new();
    b.stream_topics::<String, String>(&["a", "b"], Consumed::default())
        .flat_map_values(|v| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .select_key(|_, v| v.clone())
        .peek(|_, _| {})
        .to("out");
    assert_describes_as(&b.build().unwrap(), "two_topics_flat_map");
}

#[test]
fn pattern_source() {
    let b = StreamsBuilder::new();
    b.stream_pattern::<String, String>("in-.*", Consumed::default())
        .map(|k, v| (v, k))
        .foreach(|_, _| {});
    assert_describes_as(&b.build().unwrap(), "pattern_source");
}

#[test]
fn split_merge() {
    let b = StreamsBuilder::new();
    let branches = b
        .stream::<String, String>("input")
        .split_named("branch-")
        .branch(|_, v| v.starts_with('a'), Branched::named("a"))
        .branch(|_, v| v.starts_with('b'), Branched::named("b"))
        .default_branch(Branched::named("other"));
    branches["branch-a"]
        .merge(&branches["branch-b"])
        .filter_not(|_, v| v.is_empty())
        .to("merged");
    branches["branch-other"].to("other");
    assert_describes_as(&b.build().unwrap(), "split_merge");
}

#[test]
fn repartition() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .select_key(|_, v| v.clone())
        .repartition()
        .map_values(|v| v.to_uppercase())
        .to("output");
    assert_describes_as(&b.build().unwrap(), "repartition");
}

#[test]
fn named_repartition() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .map(|k, v| (v, k))
        .repartition_with(Repartitioned::default().with_name("by-user"))
        .filter(|_, v| !v.is_empty())
        .to("output");
    assert_describes_as(&b.build().unwrap(), "named_repartition");
}

#[test]
fn named_operators() {
    let b = StreamsBuilder::new();
    b.stream_with::<String, String>("input", Consumed::default().with_name("my-source"))
        .filter_named(|_, v| !v.is_empty(), "only-valid")
        .map_values_named(|_, v| v.to_uppercase(), Named::new("upper"))
        .to_with("output", Produced::default().with_name("my-sink"));
    assert_describes_as(&b.build().unwrap(), "named_operators");
}

#[test]
fn process_with_store() {
    let b = StreamsBuilder::new();
    b.add_state_store(Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("counts"),
        StringSerde,
        I64Serde,
    ));
    b.stream::<String, String>("input")
        .process(|| PassThrough, &["counts"])
        .to("output");
    assert_describes_as(&b.build().unwrap(), "process_with_store");
}

struct OutPrefixExtractor;

impl TopicNameExtractor<String, String> for OutPrefixExtractor {
    fn extract(&self, key: &String, _: &String, _: &RecordContext<'_>) -> String {
        format!("out-{key}")
    }
    fn description(&self) -> String {
        "OutPrefixExtractor".to_string()
    }
}

#[test]
fn topic_extractor_named() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .map_values(|v| v.to_uppercase())
        .to_dynamic(OutPrefixExtractor, Produced::default());
    assert_describes_as(&b.build().unwrap(), "topic_extractor_named");
}

#[test]
fn topic_extractor_closure_matches_up_to_the_class_name() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .map_values(|v| v.to_uppercase())
        .to_dynamic(
            |k: &String, _: &String, _: &RecordContext<'_>| format!("out-{k}"),
            Produced::default(),
        );
    let got = b.build().unwrap().describe().to_string();
    let want = fixture("topic_extractor");
    // Java prints the lambda's generated class; we print the closure's type.
    let cut = |s: &str| {
        s.lines()
            .map(|l| l.split("extractor class:").next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(cut(&got), cut(&want));
    assert!(got.contains("extractor class: describe::"), "{got}");
}

#[test]
fn print_and_flat_map() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .flat_map(|k, v| vec![(k.clone(), v.clone()), (v, k)])
        .print(Printed::to_sys_out());
    b.stream::<String, String>("other")
        .filter(|_, v| !v.is_empty())
        .to("other-out");
    assert_describes_as(&b.build().unwrap(), "print_and_flat_map");
}

#[test]
fn topology_papi() {
    let mut t = Topology::new();
    t.add_source::<String, String>("Source", &["src-topic"], StringSerde, StringSerde)
        .unwrap()
        .add_processor("Process", || PassThrough, &["Source"])
        .unwrap()
        .add_state_store(
            Stores::key_value_store_builder(
                Stores::in_memory_key_value_store("Counts"),
                StringSerde,
                I64Serde,
            ),
            &["Process"],
        )
        .unwrap()
        .add_sink::<String, String>("Sink", "sink-topic", StringSerde, StringSerde, &["Process"])
        .unwrap();
    assert_describes_as(&t, "topology_papi");
}

#[test]
fn merge_of_three() {
    let b = StreamsBuilder::new();
    let a = b.stream::<String, String>("a");
    let bs = b.stream::<String, String>("b");
    let c = b.stream::<String, String>("c");
    a.merge(&bs)
        .merge(&c)
        .map_values(|v| v.to_uppercase())
        .to("out");
    assert_describes_as(&b.build().unwrap(), "merge_of_three");
}

#[test]
fn split_no_default() {
    let b = StreamsBuilder::new();
    let rest = b
        .stream::<String, String>("input")
        .split()
        .branch(
            |_, v| v.starts_with('x'),
            Branched::with_consumer(|s| s.to("x")),
        )
        .branch(
            |_, v| v.starts_with('y'),
            Branched::with_consumer(|s| s.to("y")),
        )
        .no_default_branch();
    assert!(rest.is_empty(), "consumed branches are not returned");
    assert_describes_as(&b.build().unwrap(), "split_no_default");
}

/// Builds a Processor API topology from the operation lists the Java side
/// recorded, so node-level ordering is checked on many shapes.
fn topology_from_ops(ops: &[serde_json::Value]) -> Topology {
    let mut t = Topology::new();
    let strs = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|x| x.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    for op in ops {
        let name = op["name"].as_str().unwrap_or_default();
        let parents = strs(&op["parents"]);
        let parents: Vec<&str> = parents.iter().map(String::as_str).collect();
        match op["op"].as_str().unwrap() {
            "source" => {
                if let Some(pattern) = op["pattern"].as_str() {
                    t.add_pattern_source::<String, String>(name, pattern, StringSerde, StringSerde)
                        .unwrap();
                } else {
                    let topics = strs(&op["topics"]);
                    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
                    t.add_source::<String, String>(name, &topics, StringSerde, StringSerde)
                        .unwrap();
                }
            }
            "processor" => {
                t.add_processor(name, || PassThrough, &parents).unwrap();
            }
            "sink" => {
                t.add_sink::<String, String>(
                    name,
                    op["topic"].as_str().unwrap(),
                    StringSerde,
                    StringSerde,
                    &parents,
                )
                .unwrap();
            }
            "store" => {
                let store = op["store"].as_str().unwrap();
                let procs = strs(&op["processors"]);
                let procs: Vec<&str> = procs.iter().map(String::as_str).collect();
                if t.add_state_store(
                    Stores::key_value_store_builder(
                        Stores::in_memory_key_value_store(store),
                        StringSerde,
                        StringSerde,
                    ),
                    &procs,
                )
                .is_err()
                {
                    for p in procs {
                        t.connect_processor_and_state_stores(p, &[store]).unwrap();
                    }
                }
            }
            other => panic!("unknown op {other}"),
        }
    }
    t
}

fn check_jsonl(file: &str) -> usize {
    let path = format!(
        "{}/tests/fixtures/describe/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let ops = case["ops"].as_array().unwrap();
        if ops.iter().any(|op| op.get("extractor").is_some()) {
            continue; // Java prints a lambda class name we cannot reproduce.
        }
        if ops.iter().any(|op| op.get("global").is_some()) {
            continue; // The Processor API has no global stores; the DSL tests cover them.
        }
        let got = topology_from_ops(ops).describe().to_string();
        let want = case["describe"].as_str().unwrap();
        assert_eq!(
            got, want,
            "case {} of {file}\n--- ours\n{got}--- Kafka Streams\n{want}",
            case["case"]
        );
        checked += 1;
    }
    checked
}

#[test]
fn random_processor_api_topologies_match_kafka_streams() {
    assert_eq!(check_jsonl("papi_random.jsonl"), 60);
}

#[test]
fn dsl_programs_as_processor_api_ops_match_kafka_streams() {
    assert_eq!(check_jsonl("dsl_programs.jsonl"), 73);
}

#[test]
fn empty_topology_prints_like_kafka_streams() {
    assert_eq!(Topology::new().describe().to_string(), "Topologies:\n ");
}

// ---------------------------------------------------------------- stateful DSL

fn min(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

fn time_windowed(size: Duration) -> Produced<Windowed<String>, Option<i64>> {
    Produced::with(
        TimeWindowedSerde::new(StringSerde, size.as_millis() as i64),
        Nullable(I64Serde),
    )
}

#[test]
fn word_count() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("sentences")
        .flat_map_values(|v| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .group_by(|_, v| v.clone())
        .count()
        .to_stream()
        .to("word-counts");
    assert_describes_as(&b.build().unwrap(), "word_count");
}

#[test]
fn word_count_materialized() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("sentences")
        .flat_map_values(|v| v.split(' ').map(str::to_owned).collect::<Vec<_>>())
        .group_by(|_, v| v.clone())
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to("word-counts");
    assert_describes_as(&b.build().unwrap(), "word_count_materialized");
}

#[test]
fn select_key_group_by_key() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .select_key(|_, v| v.clone())
        .group_by_key()
        .count()
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "select_key_group_by_key");
}

#[test]
fn select_key_group_by_key_grouped() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .select_key(|_, v| v.clone())
        .group_by_key_with(Grouped::as_("by-value"))
        .count()
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "select_key_group_by_key_grouped");
}

#[test]
fn stream_aggregations() {
    let b = StreamsBuilder::new();
    let grouped = b.stream::<String, String>("input").group_by_key();
    grouped.count().to_stream().to("counts");
    grouped.reduce(|a, b| a + &b).to_stream().to("reduced");
    grouped
        .aggregate(|| 0i64, |_, v, agg| agg + v.len() as i64)
        .to_stream()
        .to("lengths");
    assert_describes_as(&b.build().unwrap(), "stream_aggregations");
}

#[test]
fn stream_aggregations_named() {
    let b = StreamsBuilder::new();
    let grouped = b.stream::<String, String>("input").group_by_key();
    grouped
        .count_with("count-op", Materialized::new())
        .to_stream()
        .to("counts");
    grouped
        .reduce_with(
            |a, b| a + &b,
            "reduce-op",
            Materialized::with(StringSerde, StringSerde),
        )
        .to_stream()
        .to("reduced");
    grouped
        .aggregate_with(
            || 0i64,
            |_, v, agg| agg + v.len() as i64,
            "aggregate-op",
            Materialized::with(StringSerde, I64Serde),
        )
        .to_stream()
        .to("lengths");
    assert_describes_as(&b.build().unwrap(), "stream_aggregations_named");
}

#[test]
fn stream_aggregations_materialized() {
    let b = StreamsBuilder::new();
    let grouped = b
        .stream::<String, String>("input")
        .group_by(|_, v| v.clone());
    grouped
        .count_with(None, Materialized::as_("count-store"))
        .to_stream()
        .to("counts");
    grouped
        .reduce_with(|a, b| a + &b, None, Materialized::as_("reduce-store"))
        .to_stream()
        .to("reduced");
    grouped
        .aggregate_with(
            || 0i64,
            |_, v, agg| agg + v.len() as i64,
            None,
            Materialized::as_("aggregate-store"),
        )
        .to_stream()
        .to("lengths");
    assert_describes_as(&b.build().unwrap(), "stream_aggregations_materialized");
}

#[test]
fn stream_aggregations_named_materialized() {
    let b = StreamsBuilder::new();
    let grouped = b.stream::<String, String>("input").group_by_key();
    grouped
        .count_with("count-op", Materialized::as_("count-store"))
        .to_stream()
        .to("counts");
    grouped
        .reduce_with(
            |a, b| a + &b,
            "reduce-op",
            Materialized::as_("reduce-store"),
        )
        .to_stream()
        .to("reduced");
    grouped
        .aggregate_with(
            || 0i64,
            |_, v, agg| agg + v.len() as i64,
            "aggregate-op",
            Materialized::as_("aggregate-store"),
        )
        .to_stream()
        .to("lengths");
    assert_describes_as(
        &b.build().unwrap(),
        "stream_aggregations_named_materialized",
    );
}

#[test]
fn named_grouping_two_aggregations() {
    let b = StreamsBuilder::new();
    let grouped = b
        .stream::<String, String>("input")
        .group_by_with(|_, v| v.clone(), Grouped::as_("by-value"));
    grouped.count().to_stream().to("counts");
    grouped.reduce(|a, b| a + &b).to_stream().to("reduced");
    assert_describes_as(&b.build().unwrap(), "named_grouping_two_aggregations");
}

#[test]
fn table_ops() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("users")
        .filter(|_, v| !v.is_empty())
        .filter_not(|_, v| v.is_empty())
        .map_values(|_, v| v.to_uppercase())
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "table_ops");
}

#[test]
fn table_materialized() {
    let b = StreamsBuilder::new();
    b.table_with::<String, String>(
        "users",
        Consumed::default(),
        Materialized::as_("users-store"),
    )
    .filter_with(
        |_, v| !v.is_empty(),
        None,
        Some(Materialized::as_("filtered")),
    )
    .map_values_with(
        |_, v| v.to_uppercase(),
        "upper",
        Some(Materialized::as_("upper-store")),
    )
    .to_stream_named("to-stream")
    .to("output");
    assert_describes_as(&b.build().unwrap(), "table_materialized");
}

#[test]
fn table_consumed_named() {
    let b = StreamsBuilder::new();
    b.table_with::<String, String>(
        "users",
        Consumed::default().with_name("users-source"),
        Materialized::new(),
    )
    .filter_with(|_, v| !v.is_empty(), "non-empty", None)
    .map_values_with(
        |_, v| v.len() as i32,
        None,
        Some(Materialized::with(StringSerde, I32Serde)),
    )
    .filter_with(
        |_, v| *v > 1,
        None,
        Some(Materialized::with(StringSerde, I32Serde)),
    )
    .to_stream()
    .to("output");
    assert_describes_as(&b.build().unwrap(), "table_consumed_named");
}

#[test]
fn stream_to_table() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .to_table()
        .filter(|_, v| !v.is_empty())
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "stream_to_table");
}

#[test]
fn stream_to_table_named() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .to_table_with("as-table", Materialized::as_("table-store"))
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "stream_to_table_named");
}

#[test]
fn select_key_to_table() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .select_key(|_, v| v.clone())
        .to_table()
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "select_key_to_table");
}

#[test]
fn select_key_to_table_named() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .select_key(|_, v| v.clone())
        .to_table_with("as-table", Materialized::as_("table-store"))
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "select_key_to_table_named");
}

#[test]
fn table_group_by_count() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("users")
        .group_by(|k, v| (v, k.clone()))
        .count()
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "table_group_by_count");
}

#[test]
fn table_group_by_reduce() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("users")
        .group_by(|k, v| (v, k.clone()))
        .reduce(|a, b| a + &b, |a, _| a)
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "table_group_by_reduce");
}

#[test]
fn table_group_by_aggregate_named() {
    let b = StreamsBuilder::new();
    b.table_with::<String, String>(
        "users",
        Consumed::default(),
        Materialized::as_("users-store"),
    )
    .group_by_with(
        |k, v| (v, k.clone()),
        Grouped::as_("by-region")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    )
    .aggregate_with(
        || 0i64,
        |_, _, agg| agg + 1,
        |_, _, agg| agg - 1,
        "region-count",
        Materialized::as_("region-counts"),
    )
    .to_stream()
    .to("output");
    assert_describes_as(&b.build().unwrap(), "table_group_by_aggregate_named");
}

#[test]
fn table_group_by_reduce_materialized() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("users")
        .group_by(|k, v| (v, k.clone()))
        .reduce_with(|a, b| a + &b, |a, _| a, None, Materialized::as_("reduced"))
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "table_group_by_reduce_materialized");
}

#[test]
fn windowed_count() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(min(5)))
        .count()
        .to_stream()
        .to_with("windowed-counts", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "windowed_count");
}

#[test]
fn windowed_count_named() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by(|_, v| v.clone())
        .windowed_by(TimeWindows::of_size_and_grace(min(5), min(1)).advance_by(min(1)))
        .count_with("hopping-count", Materialized::as_("hopping-counts"))
        .to_stream()
        .to_with("windowed-counts", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "windowed_count_named");
}

#[test]
fn sliding_count() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_no_grace(min(5)))
        .count()
        .to_stream()
        .to_with("sliding-counts", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "sliding_count");
}

#[test]
fn session_count() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(min(5)))
        .count()
        .to_stream()
        .to_with(
            "session-counts",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    assert_describes_as(&b.build().unwrap(), "session_count");
}

#[test]
fn suppress_windowed() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(min(5), min(1)))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with("final-counts", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "suppress_windowed");
}

#[test]
fn suppress_named() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_and_grace(min(5), min(1)))
        .count_with(None, Materialized::as_("sessions"))
        .suppress(
            Suppressed::until_window_closes(BufferConfig::unbounded()).with_name("final-sessions"),
        )
        .to_stream()
        .to_with(
            "final-counts",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    assert_describes_as(&b.build().unwrap(), "suppress_named");
}

#[test]
fn cogroup_two() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks").group_by_key();
    let views = b.stream::<String, String>("views").group_by_key();
    clicks
        .cogroup(|_, _, agg: i64| agg + 1)
        .cogroup(&views, |_, _, agg| agg + 10)
        .aggregate(|| 0)
        .to_stream()
        .to("activity");
    assert_describes_as(&b.build().unwrap(), "cogroup_two");
}

#[test]
fn cogroup_three_windowed() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks").group_by_key();
    let views = b.stream::<String, String>("views").group_by_key();
    let buys = b
        .stream::<String, String>("buys")
        .group_by(|_, v| v.clone());
    clicks
        .cogroup(|_, _, agg: i64| agg + 1)
        .cogroup(&views, |_, _, agg| agg + 10)
        .cogroup(&buys, |_, _, agg| agg + 100)
        .windowed_by(TimeWindows::of_size_with_no_grace(min(5)))
        .aggregate(|| 0)
        .to_stream()
        .to_with("activity", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "cogroup_three_windowed");
}

#[test]
fn cogroup_named() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks").group_by_key();
    let views = b
        .stream::<String, String>("views")
        .group_by_with(|_, v| v.clone(), Grouped::as_("views-by-value"));
    clicks
        .cogroup(|_, _, agg: i64| agg + 1)
        .cogroup(&views, |_, _, agg| agg + 10)
        .aggregate_with(|| 0, "activity", Materialized::as_("activity-store"))
        .to_stream()
        .to("activity");
    assert_describes_as(&b.build().unwrap(), "cogroup_named");
}

#[test]
fn cogroup_session() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks").group_by_key();
    let views = b.stream::<String, String>("views").group_by_key();
    clicks
        .cogroup(|_, _, agg: i64| agg + 1)
        .cogroup(&views, |_, _, agg| agg + 10)
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(min(5)))
        .aggregate(|| 0, |_, a, b| a + b)
        .to_stream()
        .to_with(
            "activity",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    assert_describes_as(&b.build().unwrap(), "cogroup_session");
}

#[test]
fn windowed_reduce_aggregate() {
    let b = StreamsBuilder::new();
    let grouped = b.stream::<String, String>("clicks").group_by_key();
    let tumbling = TimeWindows::of_size_with_no_grace(min(5));
    let session = SessionWindows::of_inactivity_gap_with_no_grace(min(5));
    let time_windowed_string = || {
        Produced::with(
            TimeWindowedSerde::new(StringSerde, min(5).as_millis() as i64),
            Nullable(StringSerde),
        )
    };
    let session_windowed =
        || Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde));
    grouped
        .windowed_by(tumbling)
        .reduce(|a, b| a + &b)
        .to_stream()
        .to_with("tumbling-reduced", time_windowed_string());
    grouped
        .windowed_by_sliding(SlidingWindows::of_time_difference_with_no_grace(min(5)))
        .aggregate_with(
            || 0i64,
            |_, v, agg| agg + v.len() as i64,
            "sliding-agg",
            Materialized::as_("sliding-store"),
        )
        .to_stream()
        .to_with("sliding-lengths", time_windowed(min(5)));
    grouped
        .windowed_by_session(session)
        .reduce_with(|a, b| a + &b, "session-reduce", Materialized::new())
        .to_stream()
        .to_with(
            "session-reduced",
            Produced::with(
                SessionWindowedSerde::new(StringSerde),
                Nullable(StringSerde),
            ),
        );
    grouped
        .windowed_by_session(session)
        .aggregate(|| 0i64, |_, v, agg| agg + v.len() as i64, |_, a, b| a + b)
        .to_stream()
        .to_with("session-lengths", session_windowed());
    assert_describes_as(&b.build().unwrap(), "windowed_reduce_aggregate");
}

#[test]
fn windowed_emit_final() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("clicks")
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(min(5), min(1)))
        .emit_strategy(EmitStrategy::OnWindowClose)
        .count()
        .to_stream()
        .to_with("final-counts", time_windowed(min(5)));
    assert_describes_as(&b.build().unwrap(), "windowed_emit_final");
}

#[test]
fn table_suppress_time_limit() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("users")
        .suppress(Suppressed::until_time_limit(
            min(1),
            BufferConfig::max_records(100).emit_early_when_full(),
        ))
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "table_suppress_time_limit");
}

#[test]
fn table_group_by_named_ops() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    users
        .group_by(|k, v| (v, k.clone()))
        .count_with("count-op", Materialized::new())
        .to_stream()
        .to("counts");
    users
        .group_by(|k, v| (k.clone(), v))
        .reduce_with(
            |a, b| a + &b,
            |a, _| a,
            "reduce-op",
            Materialized::with(StringSerde, StringSerde),
        )
        .to_stream()
        .to("reduced");
    assert_describes_as(&b.build().unwrap(), "table_group_by_named_ops");
}

#[test]
fn table_named_grouping_two_aggregations() {
    let b = StreamsBuilder::new();
    let grouped = b.table::<String, String>("users").group_by_with(
        |k, v| (v, k.clone()),
        Grouped::as_("by-value")
            .with_key_serde(StringSerde)
            .with_value_serde(StringSerde),
    );
    grouped.count().to_stream().to("counts");
    grouped
        .reduce(|a, b| a + &b, |a, _| a)
        .to_stream()
        .to("reduced");
    assert_describes_as(&b.build().unwrap(), "table_named_grouping_two_aggregations");
}

#[test]
fn to_table_filter_group_by() {
    let b = StreamsBuilder::new();
    b.stream::<String, String>("input")
        .to_table()
        .filter(|_, v| !v.is_empty())
        .group_by(|k, v| (v, k.clone()))
        .count()
        .to_stream()
        .to("output");
    assert_describes_as(&b.build().unwrap(), "to_table_filter_group_by");
}

// ---------------------------------------------------------------- joins

fn pair(a: &String, b: &String) -> String {
    format!("{a}/{b}")
}

fn pair_left(a: &String, b: Option<&String>) -> String {
    format!("{a}/{b:?}")
}

fn pair_outer(a: Option<&String>, b: Option<&String>) -> String {
    format!("{a:?}/{b:?}")
}

#[test]
fn stream_table_join() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .join(&customers, pair)
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_join");
}

#[test]
fn stream_table_left_join() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .left_join(&customers, pair_left)
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_left_join");
}

#[test]
fn stream_table_join_named() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .join_with(&customers, pair, Joined::as_("enrich"))
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_join_named");
}

#[test]
fn stream_table_left_join_named() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .left_join_with(&customers, pair_left, Joined::as_("enrich"))
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_left_join_named");
}

#[test]
fn stream_table_join_repartitioned() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .select_key(|_, v| v.clone())
        .join(&customers, pair)
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_join_repartitioned");
}

#[test]
fn stream_table_left_join_repartitioned_named() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    b.stream::<String, String>("orders")
        .select_key(|_, v| v.clone())
        .left_join_with(&customers, pair_left, Joined::as_("enrich"))
        .to("enriched");
    assert_describes_as(
        &b.build().unwrap(),
        "stream_table_left_join_repartitioned_named",
    );
}

fn versioned_customers(b: &StreamsBuilder) -> KTable<String, String> {
    b.table_with::<String, String>(
        "customers",
        Consumed::default(),
        Materialized::as_("customers-versioned").with_versioned_history(min(10)),
    )
}

#[test]
fn stream_table_join_versioned_grace() {
    let b = StreamsBuilder::new();
    let customers = versioned_customers(&b);
    b.stream::<String, String>("orders")
        .join_with(
            &customers,
            pair,
            Joined::default()
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde)
                .with_grace_period(min(1)),
        )
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "stream_table_join_versioned_grace");
}

#[test]
fn stream_table_left_join_versioned_grace_named() {
    let b = StreamsBuilder::new();
    let customers = versioned_customers(&b);
    b.stream::<String, String>("orders")
        .select_key(|_, v| v.clone())
        .left_join_with(
            &customers,
            pair_left,
            Joined::as_("enrich")
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde)
                .with_grace_period(min(1)),
        )
        .to("enriched");
    assert_describes_as(
        &b.build().unwrap(),
        "stream_table_left_join_versioned_grace_named",
    );
}

#[test]
fn table_table_join() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users.join(&regions, pair).to_stream().to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_join");
}

#[test]
fn table_table_left_join() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .left_join(&regions, pair_left)
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_left_join");
}

#[test]
fn table_table_outer_join() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .outer_join(&regions, pair_outer)
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_outer_join");
}

#[test]
fn table_table_join_named() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .join_named(&regions, pair, "user-regions")
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_join_named");
}

#[test]
fn table_table_left_join_named() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .left_join_named(&regions, pair_left, "user-regions")
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_left_join_named");
}

#[test]
fn table_table_outer_join_named() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .outer_join_named(&regions, pair_outer, "user-regions")
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_outer_join_named");
}

/// Table-table joins with `Named` and `Materialized`: the merge node owns
/// the result's store, named or generated before the join's names.
#[test]
fn table_table_join_named_materialized() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .join_with(
            &regions,
            pair,
            "user-regions",
            Some(Materialized::as_("user-regions-store")),
        )
        .to_stream()
        .to("joined");
    assert_describes_as(&b.build().unwrap(), "table_table_join_named_materialized");
}

#[test]
fn table_table_left_join_materialized_unnamed() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    users
        .left_join_with(
            &regions,
            pair_left,
            None,
            Some(Materialized::with(StringSerde, StringSerde)),
        )
        .to_stream()
        .to("joined");
    assert_describes_as(
        &b.build().unwrap(),
        "table_table_left_join_materialized_unnamed",
    );
}

fn string_joined() -> StreamJoined<String, String, String> {
    StreamJoined::with(StringSerde, StringSerde, StringSerde)
}

#[test]
fn stream_stream_join() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .join_windowed(
            &views,
            pair,
            JoinWindows::of_time_difference_with_no_grace(min(5)),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_join");
}

#[test]
fn stream_stream_left_join() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .left_join_windowed(
            &views,
            pair_left,
            JoinWindows::of_time_difference_and_grace(min(5), min(1)),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_left_join");
}

#[test]
fn stream_stream_outer_join() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .outer_join_windowed(
            &views,
            pair_outer,
            JoinWindows::of_time_difference_and_grace(min(5), min(1)),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_outer_join");
}

#[test]
fn stream_stream_join_named() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .join_windowed_with(
            &views,
            pair,
            JoinWindows::of_time_difference_with_no_grace(min(5)),
            string_joined().with_name("click-views"),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_join_named");
}

#[test]
fn stream_stream_left_join_store_name() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .left_join_windowed_with(
            &views,
            pair_left,
            JoinWindows::of_time_difference_and_grace(min(5), min(1)),
            string_joined().with_store_name("click-views-store"),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_left_join_store_name");
}

#[test]
fn stream_stream_outer_join_named_store_name() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b.stream::<String, String>("views");
    clicks
        .outer_join_windowed_with(
            &views,
            pair_outer,
            JoinWindows::of_time_difference_and_grace(min(5), min(1)),
            string_joined()
                .with_name("click-views")
                .with_store_name("click-views-store"),
        )
        .to("pairs");
    assert_describes_as(
        &b.build().unwrap(),
        "stream_stream_outer_join_named_store_name",
    );
}

#[test]
fn stream_stream_join_repartitioned() {
    let b = StreamsBuilder::new();
    let clicks = b
        .stream::<String, String>("clicks")
        .select_key(|_, v| v.clone());
    let views = b.stream::<String, String>("views");
    clicks
        .join_windowed(
            &views,
            pair,
            JoinWindows::of_time_difference_with_no_grace(min(5)),
        )
        .to("pairs");
    assert_describes_as(&b.build().unwrap(), "stream_stream_join_repartitioned");
}

#[test]
fn stream_stream_outer_join_repartitioned_named() {
    let b = StreamsBuilder::new();
    let clicks = b.stream::<String, String>("clicks");
    let views = b
        .stream::<String, String>("views")
        .select_key(|_, v| v.clone());
    clicks
        .outer_join_windowed_with(
            &views,
            pair_outer,
            JoinWindows::of_time_difference_and_grace(min(5), min(1)),
            string_joined().with_name("click-views"),
        )
        .to("pairs");
    assert_describes_as(
        &b.build().unwrap(),
        "stream_stream_outer_join_repartitioned_named",
    );
}

#[test]
fn global_table_join() {
    let b = StreamsBuilder::new();
    let orders = b.stream::<String, String>("orders");
    let products = b.global_table::<String, String>("products");
    orders
        .join_global(&products, |_, v| v.clone(), pair)
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "global_table_join");
}

#[test]
fn global_table_left_join() {
    let b = StreamsBuilder::new();
    let products = b.global_table::<String, String>("products");
    b.stream::<String, String>("orders")
        .left_join_global(&products, |_, v| v.clone(), pair_left)
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "global_table_left_join");
}

/// Named global-table joins (Kafka Streams' `Named` overloads) and joiners
/// with the key (KIP-149): the names replace the generated ones, whose
/// indexes are used up all the same.
#[test]
fn global_table_joins_named_with_key() {
    let b = StreamsBuilder::new();
    let products = b.global_table::<String, String>("products");
    b.stream::<String, String>("orders")
        .join_global_named(&products, |_, v| v.clone(), pair, "with-product")
        .left_join_global_with_key(
            &products,
            |_, v| v.clone(),
            |k, order, product| format!("{k}:{order}/{}", product.map_or("null", |p| p.as_str())),
            "maybe-product",
        )
        .join_global_with_key(
            &products,
            |_, v| v.clone(),
            |k, order, _| format!("{k}:{order}"),
            None,
        )
        .to("enriched");
    assert_describes_as(&b.build().unwrap(), "global_table_joins_named_with_key");
}

#[test]
fn global_tables_interleaved() {
    let b = StreamsBuilder::new();
    let products = b.global_table_with::<String, String>(
        "products",
        Consumed::default().with_name("products"),
        Materialized::as_("products-store"),
    );
    let orders = b.stream::<String, String>("orders");
    let customers = b.global_table::<String, String>("customers");
    b.stream::<String, String>("returns")
        .left_join_global(&products, |_, v| v.clone(), pair_left)
        .to("returns-enriched");
    orders
        .join_global(&customers, |k, _| k.clone(), pair)
        .join_global(&products, |_, v| v.clone(), pair)
        .to("orders-enriched");
    assert_describes_as(&b.build().unwrap(), "global_tables_interleaved");
}

#[test]
fn stream_tables_cogroup() {
    let b = StreamsBuilder::new();
    let users = b.table::<String, String>("users");
    let regions = b.table::<String, String>("regions");
    let clicks = b
        .stream::<String, String>("clicks")
        .left_join(&users, pair_left)
        .left_join(&regions, pair_left)
        .group_by_key();
    let views = b.stream::<String, String>("views").group_by_key();
    let buys = b.stream::<String, String>("buys").group_by_key();
    clicks
        .cogroup(|_, _, agg: i64| agg + 1)
        .cogroup(&views, |_, _, agg| agg + 10)
        .cogroup(&buys, |_, _, agg| agg + 100)
        .aggregate(|| 0)
        .to_stream()
        .to("activity");
    assert_describes_as(&b.build().unwrap(), "stream_tables_cogroup");
}

/// What Kafka Streams 4.4 prints for the foreign-key joins below (printed
/// by `builder.build().describe()` on kafka-streams-4.4.0.jar, the same
/// programs in Java; compat/topology-describe's fixtures have none).
const KAFKA_FK_JOIN: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [customers])
      --> KTABLE-SOURCE-0000000002
    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012
      <-- KTABLE-SOURCE-0000000009
    Processor: KTABLE-SOURCE-0000000002 (stores: [customers-STATE-STORE-0000000000])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [customers-STATE-STORE-0000000000])
      --> KTABLE-SINK-0000000015
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])
      --> KTABLE-SINK-0000000015
      <-- KTABLE-SOURCE-0000000002
    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013

  Sub-topology: 1
    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017
    Source: KSTREAM-SOURCE-0000000004 (topics: [orders])
      --> KTABLE-SOURCE-0000000005
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [orders-STATE-STORE-0000000003])
      --> KTABLE-FK-JOIN-OUTPUT-0000000018
      <-- KTABLE-SOURCE-0000000016
    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])
      --> KTABLE-TOSTREAM-0000000020
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017
    Processor: KTABLE-SOURCE-0000000005 (stores: [orders-STATE-STORE-0000000003])
      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007
      <-- KSTREAM-SOURCE-0000000004
    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])
      --> KTABLE-SINK-0000000008
      <-- KTABLE-SOURCE-0000000005
    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])
      --> KSTREAM-SINK-0000000021
      <-- KTABLE-FK-JOIN-OUTPUT-0000000018
    Sink: KSTREAM-SINK-0000000021 (topic: out)
      <-- KTABLE-TOSTREAM-0000000020
    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)
      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007

"#;

const KAFKA_FK_LEFT_JOIN_NAMED_MATERIALIZED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [customers])
      --> KTABLE-SOURCE-0000000002
    Source: orders-with-customers-subscription-registration-source (topics: [orders-with-customers-subscription-registration-topic])
      --> orders-with-customers-subscription-receive
    Processor: KTABLE-SOURCE-0000000002 (stores: [customers-STATE-STORE-0000000000])
      --> orders-with-customers-foreign-join-subscription
      <-- KSTREAM-SOURCE-0000000001
    Processor: orders-with-customers-subscription-receive (stores: [orders-with-customers-subscription-store])
      --> orders-with-customers-subscription-join-foreign
      <-- orders-with-customers-subscription-registration-source
    Processor: orders-with-customers-foreign-join-subscription (stores: [orders-with-customers-subscription-store])
      --> orders-with-customers-subscription-response-sink
      <-- KTABLE-SOURCE-0000000002
    Processor: orders-with-customers-subscription-join-foreign (stores: [customers-STATE-STORE-0000000000])
      --> orders-with-customers-subscription-response-sink
      <-- orders-with-customers-subscription-receive
    Sink: orders-with-customers-subscription-response-sink (topic: orders-with-customers-subscription-response-topic)
      <-- orders-with-customers-subscription-join-foreign, orders-with-customers-foreign-join-subscription

  Sub-topology: 1
    Source: orders-with-customers-subscription-response-source (topics: [orders-with-customers-subscription-response-topic])
      --> orders-with-customers-subscription-response-resolver
    Source: KSTREAM-SOURCE-0000000004 (topics: [orders])
      --> KTABLE-SOURCE-0000000005
    Processor: orders-with-customers-subscription-response-resolver (stores: [orders-STATE-STORE-0000000003])
      --> orders-with-customers-result
      <-- orders-with-customers-subscription-response-source
    Processor: KTABLE-SOURCE-0000000005 (stores: [orders-STATE-STORE-0000000003])
      --> orders-with-customers-subscription-registration-processor
      <-- KSTREAM-SOURCE-0000000004
    Processor: orders-with-customers-result (stores: [joined-orders])
      --> KTABLE-TOSTREAM-0000000019
      <-- orders-with-customers-subscription-response-resolver
    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])
      --> KSTREAM-SINK-0000000020
      <-- orders-with-customers-result
    Processor: orders-with-customers-subscription-registration-processor (stores: [])
      --> orders-with-customers-subscription-registration-sink
      <-- KTABLE-SOURCE-0000000005
    Sink: KSTREAM-SINK-0000000020 (topic: out)
      <-- KTABLE-TOSTREAM-0000000019
    Sink: orders-with-customers-subscription-registration-sink (topic: orders-with-customers-subscription-registration-topic)
      <-- orders-with-customers-subscription-registration-processor

"#;

const KAFKA_FK_JOIN_NAMED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [customers])
      --> KTABLE-SOURCE-0000000002
    Source: fk-subscription-registration-source (topics: [fk-subscription-registration-topic])
      --> fk-subscription-receive
    Processor: KTABLE-SOURCE-0000000002 (stores: [customers-STATE-STORE-0000000000])
      --> fk-foreign-join-subscription
      <-- KSTREAM-SOURCE-0000000001
    Processor: fk-subscription-receive (stores: [fk-subscription-store])
      --> fk-subscription-join-foreign
      <-- fk-subscription-registration-source
    Processor: fk-foreign-join-subscription (stores: [fk-subscription-store])
      --> fk-subscription-response-sink
      <-- KTABLE-SOURCE-0000000002
    Processor: fk-subscription-join-foreign (stores: [customers-STATE-STORE-0000000000])
      --> fk-subscription-response-sink
      <-- fk-subscription-receive
    Sink: fk-subscription-response-sink (topic: fk-subscription-response-topic)
      <-- fk-subscription-join-foreign, fk-foreign-join-subscription

  Sub-topology: 1
    Source: fk-subscription-response-source (topics: [fk-subscription-response-topic])
      --> fk-subscription-response-resolver
    Source: KSTREAM-SOURCE-0000000004 (topics: [orders])
      --> KTABLE-SOURCE-0000000005
    Processor: fk-subscription-response-resolver (stores: [orders-STATE-STORE-0000000003])
      --> fk-result
      <-- fk-subscription-response-source
    Processor: KTABLE-SOURCE-0000000005 (stores: [orders-STATE-STORE-0000000003])
      --> fk-subscription-registration-processor
      <-- KSTREAM-SOURCE-0000000004
    Processor: fk-result (stores: [])
      --> KTABLE-TOSTREAM-0000000020
      <-- fk-subscription-response-resolver
    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])
      --> KSTREAM-SINK-0000000021
      <-- fk-result
    Processor: fk-subscription-registration-processor (stores: [])
      --> fk-subscription-registration-sink
      <-- KTABLE-SOURCE-0000000005
    Sink: KSTREAM-SINK-0000000021 (topic: out)
      <-- KTABLE-TOSTREAM-0000000020
    Sink: fk-subscription-registration-sink (topic: fk-subscription-registration-topic)
      <-- fk-subscription-registration-processor

"#;

fn assert_describes_as_text(topology: &Topology, want: &str) {
    let got = topology.describe().to_string();
    assert_eq!(got, want, "\n--- ours\n{got}--- Kafka Streams\n{want}");
}

/// `orders.leftJoin(customers, v -> v, (o, c) -> o + c)`: generated names.
#[test]
fn foreign_key_left_join() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    let orders = b.table::<String, String>("orders");
    orders
        .left_join_fk(&customers, |v: &String| v.clone(), pair_left)
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_FK_JOIN);
}

/// `orders.leftJoin(customers, (k, v) -> v, (o, c) -> o + c,
/// TableJoined.with(p, p).withName("orders-with-customers"),
/// Materialized.as("joined-orders"))`: every name from the join's, the
/// result store the Materialized's (no index drawn for it).
#[test]
fn foreign_key_left_join_named_materialized() {
    let first_partition = |_: &str, _: &String, _: &(), _: &Headers, _: i32| Some(vec![0]);
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    let orders = b.table::<String, String>("orders");
    orders
        .left_join_fk_with(
            &customers,
            ForeignKeyExtractor::from_key_and_value(|_: &String, v: &String| Some(v.clone())),
            pair_left,
            TableJoined::with(first_partition, first_partition).with_name("orders-with-customers"),
            Materialized::as_("joined-orders")
                .with_key_serde(StringSerde)
                .with_value_serde(StringSerde),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_FK_LEFT_JOIN_NAMED_MATERIALIZED);
}

/// `orders.join(customers, v -> v, (o, c) -> o + c, TableJoined.as("fk"))`:
/// the result store's index is drawn although the join is named.
#[test]
fn foreign_key_join_named() {
    let b = StreamsBuilder::new();
    let customers = b.table::<String, String>("customers");
    let orders = b.table::<String, String>("orders");
    orders
        .join_fk_with(
            &customers,
            ForeignKeyExtractor::from_value(|v: &String| Some(v.clone())),
            pair,
            TableJoined::as_("fk"),
            Materialized::new(),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_FK_JOIN_NAMED);
}

// Issue 48: `KTable#filterNot` with Named and Materialized, and
// `KTable#transformValues`. The texts are Kafka Streams 4.4's for the Java
// programs quoted above each test (`describe()` of `StreamsBuilder#build`).

/// No transformation: the transformer's value is its input's.
struct SameValue;

impl kstreams_dsl::ValueTransformerWithKey<String, String, String> for SameValue {
    fn transform(
        &mut self,
        _: &String,
        value: Option<String>,
    ) -> Result<Option<String>, ProcessorError> {
        Ok(value)
    }
}

fn seen_store() -> impl kstreams_state::StoreBuilder {
    Stores::key_value_store_builder(
        Stores::in_memory_key_value_store("seen"),
        StringSerde,
        I64Serde,
    )
}

const KAFKA_FILTER_NOT_NAMED_MATERIALIZED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> drop-x
      <-- KSTREAM-SOURCE-0000000001
    Processor: drop-x (stores: [kept])
      --> KTABLE-TOSTREAM-0000000004
      <-- KTABLE-SOURCE-0000000002
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- drop-x
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KTABLE-TOSTREAM-0000000004

"#;

/// `table.filterNot((k, v) -> v.startsWith("x"), Named.as("drop-x"),
/// Materialized.as("kept")).toStream().to("out")`.
#[test]
fn table_filter_not_named_materialized() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("input")
        .filter_not_with(
            |_, v| v.starts_with('x'),
            Named::new("drop-x"),
            Some(Materialized::as_("kept")),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_FILTER_NOT_NAMED_MATERIALIZED);
}

const KAFKA_FILTER_NOT_UNNAMED_MATERIALIZED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> KTABLE-FILTER-0000000004
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-FILTER-0000000004 (stores: [])
      --> none
      <-- KTABLE-SOURCE-0000000002
    Processor: none (stores: [])
      --> KTABLE-TOSTREAM-0000000006
      <-- KTABLE-FILTER-0000000004
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- none
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

"#;

/// `table.filterNot(p, Materialized.with(String, String))
/// .filterNot((k, v) -> false, Named.as("none")).toStream().to("out")`:
/// an unnamed store draws its index and keeps no store.
#[test]
fn table_filter_not_unnamed_materialized() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("input")
        .filter_not_with(
            |_, v| v.starts_with('x'),
            None,
            Some(Materialized::with(StringSerde, StringSerde)),
        )
        .filter_not_with(|_, _| false, Named::new("none"), None)
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_FILTER_NOT_UNNAMED_MATERIALIZED);
}

const KAFKA_TRANSFORM_VALUES_STORES: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> KTABLE-TRANSFORMVALUES-0000000003
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-TRANSFORMVALUES-0000000003 (stores: [seen])
      --> KTABLE-TOSTREAM-0000000004
      <-- KTABLE-SOURCE-0000000002
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KTABLE-TRANSFORMVALUES-0000000003
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KTABLE-TOSTREAM-0000000004

"#;

/// `builder.addStateStore(seen); table.transformValues(VT::new, "seen")
/// .toStream().to("out")`.
#[test]
fn table_transform_values_with_a_store() {
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    b.table::<String, String>("input")
        .transform_values(|| SameValue, &["seen"])
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(&b.build().unwrap(), KAFKA_TRANSFORM_VALUES_STORES);
}

const KAFKA_TRANSFORM_VALUES_NAMED_MATERIALIZED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> tv
      <-- KSTREAM-SOURCE-0000000001
    Processor: tv (stores: [tv-store, seen])
      --> KTABLE-TOSTREAM-0000000004
      <-- KTABLE-SOURCE-0000000002
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- tv
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KTABLE-TOSTREAM-0000000004

"#;

/// `table.transformValues(VT::new, Materialized.as("tv-store"),
/// Named.as("tv"), "seen").toStream().to("out")`.
#[test]
fn table_transform_values_named_materialized() {
    let b = StreamsBuilder::new();
    b.add_state_store(seen_store());
    b.table::<String, String>("input")
        .transform_values_with(
            || SameValue,
            &["seen"],
            Named::new("tv"),
            Some(Materialized::as_("tv-store").with_value_serde(StringSerde)),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(
        &b.build().unwrap(),
        KAFKA_TRANSFORM_VALUES_NAMED_MATERIALIZED,
    );
}

const KAFKA_TRANSFORM_VALUES_UNNAMED_MATERIALIZED: &str = r#"Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> KTABLE-TRANSFORMVALUES-0000000003
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-TRANSFORMVALUES-0000000003 (stores: [])
      --> KTABLE-MAPVALUES-0000000005
      <-- KTABLE-SOURCE-0000000002
    Processor: KTABLE-MAPVALUES-0000000005 (stores: [])
      --> KTABLE-TOSTREAM-0000000006
      <-- KTABLE-TRANSFORMVALUES-0000000003
    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])
      --> KSTREAM-SINK-0000000007
      <-- KTABLE-MAPVALUES-0000000005
    Sink: KSTREAM-SINK-0000000007 (topic: out)
      <-- KTABLE-TOSTREAM-0000000006

"#;

/// `table.transformValues(VT::new, Materialized.with(String, String))
/// .mapValues(v -> v, Materialized.with(String, String))
/// .toStream().to("out")`: transformValues draws no store index for an
/// unnamed store, mapValues does.
#[test]
fn table_transform_values_unnamed_materialized() {
    let b = StreamsBuilder::new();
    b.table::<String, String>("input")
        .transform_values_with(
            || SameValue,
            &[],
            None,
            Some(Materialized::with(StringSerde, StringSerde)),
        )
        .map_values_with(
            |_, v| v,
            None,
            Some(Materialized::with(StringSerde, StringSerde)),
        )
        .to_stream()
        .to_with("out", Produced::with(StringSerde, Nullable(StringSerde)));
    assert_describes_as_text(
        &b.build().unwrap(),
        KAFKA_TRANSFORM_VALUES_UNNAMED_MATERIALIZED,
    );
}
