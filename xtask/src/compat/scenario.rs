//! The reference scenarios: their topics, a seeded input generator, and the
//! expected output computed here, independently of either Streams library.
//!
//! Each scenario has a Kafka Streams twin in compat/.../Scenarios.java and a
//! kstreams one in compat/kstreams; the three must describe the same topology.
//!
//! Expected outputs hold because the Streams side runs with the record cache
//! off (every update is forwarded) and because each output partition is fed by
//! one upstream task that reads a single input partition in order.

use std::collections::{BTreeMap, HashMap};

use super::partitioner::partition_for_key;
use super::records::Record;

mod aggregations;
pub(super) mod joins;
pub(super) mod streams;

/// Input timestamps start here (2023-11-14T22:13:20Z) and advance one second a
/// record: fixed, so that reruns give byte-identical outputs.
const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

/// One reference scenario.
pub(crate) struct Scenario {
    pub name: &'static str,
    pub input_partitions: i32,
    pub output_partitions: i32,
    /// Key and value serdes the `dump` tool decodes the output with.
    pub output_serdes: (&'static str, &'static str),
    pub default_records: usize,
    generate: fn(&mut Rng, usize, i32) -> Vec<Record>,
    expect: Expect,
}

/// What a scenario's output is checked against, besides the other side.
#[derive(Clone, Copy)]
pub(super) enum Expect {
    /// Every record, in order within each partition, as computed here.
    Records(fn(&[Record], i32) -> Vec<Record>),
    /// The final value of each key (the table the output topic stands for),
    /// computed here from the full output this function returns. For
    /// topologies whose update order depends on timing (the record cache,
    /// foreign-key subscriptions meeting table updates), both sides are
    /// compared this way too.
    FinalValues(fn(&[Record], i32) -> Vec<Record>),
    /// No expectation of our own: Apache Kafka Streams is the reference and
    /// the kstreams side must equal it record for record. For operators
    /// whose exact output (session merges, sliding windows, suppression,
    /// punctuation, grace buffers) an independent model here would only
    /// restate one of the two implementations.
    KafkaStreams,
}

impl Scenario {
    /// The input: `records` records from `seed`, always the same for the same pair.
    pub(crate) fn input(&self, seed: u64, records: usize) -> Vec<Record> {
        (self.generate)(&mut Rng::new(seed), records, self.input_partitions)
    }

    /// What a correct implementation writes to the output topic for
    /// `input` (reduced to its final values for [`Expect::FinalValues`]);
    /// `None` when Kafka Streams is the only reference.
    pub(crate) fn expected(&self, input: &[Record]) -> Option<Vec<Record>> {
        match self.expect {
            Expect::Records(expect) => Some(expect(input, self.output_partitions)),
            Expect::FinalValues(expect) => Some(super::records::final_values(&expect(
                input,
                self.output_partitions,
            ))),
            Expect::KafkaStreams => None,
        }
    }

    /// Whether outputs are compared by their final value per key rather
    /// than record by record.
    pub(crate) fn compares_final_values(&self) -> bool {
        matches!(self.expect, Expect::FinalValues(_))
    }

    /// The input topics, by the suffix of their names, in the order they
    /// are produced. Most scenarios read one, `input`; the joins read two,
    /// and their input numbers the partitions of both topics in turn (see
    /// [`Scenario::split_input`]).
    pub(crate) fn input_topics(&self) -> &'static [&'static str] {
        match self.name {
            "stream-table-join"
            | "foreign-key-join"
            | "foreign-key-join-options"
            | "global-table-join"
            | "global-table-join-named"
            | "versioned-join-grace" => &["customers", "orders"],
            "table-table-join"
            | "table-table-outer-join"
            | "table-table-join-cached"
            | "table-table-join-materialized"
            | "stream-stream-join"
            | "stream-stream-outer-join"
            | "cogroup" => &["left", "right"],
            _ => &["input"],
        }
    }

    /// The input topics read into a global table: its global thread reads
    /// them without the group, so the group commits no offsets for them.
    pub(crate) fn global_input_topics(&self) -> &'static [&'static str] {
        match self.name {
            "global-table-join" | "global-table-join-named" => &["customers"],
            _ => &[],
        }
    }

    /// Whether a run on both sides also compares the bytes of every
    /// internal topic (repartition topics, changelogs). Only for topologies
    /// whose internal records do not depend on when each side commits: the
    /// record cache is off, but a suppression buffer (windowed-count's, for
    /// one) writes its changelog at commits. Windowed stores' changelogs
    /// are in: both sides run with
    /// `windowstore.changelog.additional.retention.ms` at a hundred years,
    /// without which the broker's cleaner deletes their records (stamped in
    /// 2023 by the generators) whenever it passes.
    pub(crate) fn compares_internal_topics(&self) -> bool {
        matches!(
            self.name,
            "wordcount"
                | "table-aggregate"
                | "cogroup"
                | "punctuation"
                | "windowed-count-histogram"
                | "session-windows"
                | "sliding-windows"
                | "stream-stream-join"
                | "stream-stream-outer-join"
                | "custom-partitioner"
                | "suppress-logging-disabled"
                | "table-table-join-materialized"
        )
    }

    /// `statestore.cache.max.bytes` for both sides: 0 (every update
    /// forwarded) except where the scenario is about the record cache.
    pub(crate) fn cache_max_bytes(&self) -> u64 {
        match self.name {
            "table-table-join-cached" => 10 * 1024 * 1024,
            _ => 0,
        }
    }

    /// Whether the sides run with a dead-letter queue (KIP-1034) and
    /// log-and-continue deserialization and processing handlers, and their
    /// dead-letter records are compared too.
    pub(crate) fn has_dead_letter_queue(&self) -> bool {
        matches!(
            self.name,
            "dead-letter-queue" | "processing-dead-letters" | "processing-handler-by-type"
        )
    }

    /// The topology both sides run: the scenario's own, or for a scenario
    /// that varies only how its input is written or how the application is
    /// configured, the one it reuses.
    pub(crate) fn app(&self) -> &'static str {
        match self.name {
            "codecs" => "filter-map",
            "table-table-join-cached" => "table-table-join",
            name => name,
        }
    }

    /// The codecs the Java producer writes the input with, one producer
    /// each: input partition `p` is written by the producer of codec
    /// `p % len`. Empty: uncompressed.
    pub(crate) fn input_codecs(&self) -> &'static [&'static str] {
        match self.name {
            "codecs" => &["gzip", "snappy", "lz4", "zstd"],
            _ => &[],
        }
    }

    /// The input of each topic of [`Scenario::input_topics`]: record
    /// partition `n` of a scenario reading several topics is partition
    /// `n % input_partitions` of topic `n / input_partitions`.
    pub(crate) fn split_input(&self, input: &[Record]) -> Vec<(&'static str, Vec<Record>)> {
        self.input_topics()
            .iter()
            .enumerate()
            .map(|(topic, &name)| {
                let records = input
                    .iter()
                    .filter(|r| r.partition / self.input_partitions == topic as i32)
                    .map(|r| Record {
                        partition: r.partition % self.input_partitions,
                        ..r.clone()
                    })
                    .collect();
                (name, records)
            })
            .collect()
    }
}

pub(super) const SCENARIOS: &[Scenario] = &[
    WORDCOUNT,
    FILTER_MAP,
    WINDOWED_COUNT,
    TABLE_AGGREGATE,
    STREAM_TABLE_JOIN,
    TABLE_TABLE_JOIN,
    TABLE_TABLE_OUTER_JOIN,
    joins::TABLE_TABLE_JOIN_MATERIALIZED,
    STREAM_STREAM_JOIN,
    CODECS,
    aggregations::COGROUP,
    aggregations::SESSION_WINDOWS,
    aggregations::SESSION_SUPPRESS,
    aggregations::SLIDING_WINDOWS,
    aggregations::WINDOWED_COUNT_HISTOGRAM,
    aggregations::SUPPRESS_TIME_LIMIT,
    aggregations::SUPPRESS_LOGGING_DISABLED,
    aggregations::PUNCTUATION,
    joins::FOREIGN_KEY_JOIN,
    joins::FOREIGN_KEY_JOIN_OPTIONS,
    joins::GLOBAL_TABLE_JOIN,
    joins::GLOBAL_TABLE_JOIN_NAMED,
    joins::VERSIONED_JOIN_GRACE,
    joins::TABLE_TABLE_JOIN_CACHED,
    joins::STREAM_STREAM_OUTER_JOIN,
    streams::DEAD_LETTER_QUEUE,
    streams::PROCESSING_DEAD_LETTERS,
    streams::PROCESSING_HANDLER_BY_TYPE,
    streams::BRANCH_MERGE,
    streams::CUSTOM_PARTITIONER,
];

pub(super) fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Lines of text, split into lower-case words, grouped by word and counted;
/// every count update is a record `(word, count)` with a Long value.
///
/// One input partition: the repartition topic then has one partition too, so
/// the per-word update order is the input order. With more input partitions it
/// would depend on how the tasks interleave their writes.
const WORDCOUNT: Scenario = Scenario {
    name: "wordcount",
    input_partitions: 1,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_lines,
    expect: Expect::Records(expect_wordcount),
};

/// Keyed sentences; keep the values that contain [`FILTER_CHAR`], upper-case
/// them. Stateless, so each output partition mirrors an input partition.
const FILTER_MAP: Scenario = Scenario {
    name: "filter-map",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_keyed_sentences,
    expect: Expect::Records(expect_filter_map),
};

/// filter-map over input the Java producer wrote in each codec Kafka has
/// (gzip, snappy, lz4, zstd; one partition each): a consumer built without
/// one of them cannot read that partition.
const CODECS: Scenario = Scenario {
    name: "codecs",
    input_partitions: 4,
    output_partitions: 4,
    output_serdes: ("string", "string"),
    default_records: 400,
    generate: generate_keyed_sentences,
    expect: Expect::Records(expect_filter_map),
};

/// filter-map keeps the values that contain this character (Scenarios.java
/// has the same constant).
const FILTER_CHAR: char = 'a';

/// Orders (key: customer id) left-joined with a table of customers (key:
/// customer id, value: name; tombstones delete): `order|name`, or
/// `order|null` when the table has no such customer at the order's time.
///
/// Topics `customers` (the table, produced first) and `orders`, both with
/// three partitions and keyed as the producer keys them (co-partitioned).
/// Every record of the input has its own timestamp, later than the one
/// generated before it, and each task processes its two partitions in
/// timestamp order (it waits for a partition that has data on the broker),
/// so an order sees exactly the table updates generated before it.
const STREAM_TABLE_JOIN: Scenario = Scenario {
    name: "stream-table-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_orders_and_customers,
    expect: Expect::Records(expect_stream_table_join),
};

/// Two tables (`left`, `right`; tombstones delete) joined inner,
/// `left|right`, toStream: an update on either side with the other side
/// present writes the new result, a delete there writes a tombstone.
/// Input as in stream-table-join: co-partitioned, one timestamp a record,
/// processed in timestamp order per task.
const TABLE_TABLE_JOIN: Scenario = Scenario {
    name: "table-table-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_tables,
    expect: Expect::Records(expect_table_table_join),
};

/// table-table-join's input joined outer: `left|right` with `null` for a
/// side that has no value; a key leaving both sides writes a tombstone.
const TABLE_TABLE_OUTER_JOIN: Scenario = Scenario {
    name: "table-table-outer-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_tables,
    expect: Expect::Records(expect_table_table_outer_join),
};

/// Two streams (`left`, `right`) left-joined within
/// [`JOIN_DIFFERENCE_MS`] and a grace of [`JOIN_GRACE_MS`]: `left|right`
/// for each pair, and `left|null` for a left record without a match, written
/// only once its window has closed (KIP-633). Timestamps grow by a random
/// step a record; last, one right record per partition far enough ahead
/// that every window closes.
const STREAM_STREAM_JOIN: Scenario = Scenario {
    name: "stream-stream-join",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_two_streams,
    expect: Expect::Records(expect_stream_stream_left_join),
};

/// stream-stream-join's window (Scenarios.java has the same constants).
const JOIN_DIFFERENCE_MS: i64 = 3_000;
const JOIN_GRACE_MS: i64 = 2_000;

/// Events keyed by user, counted per user in tumbling windows of
/// [`WINDOW_SIZE_MS`] with a grace of [`WINDOW_GRACE_MS`]; only each
/// window's final count is written (suppressed until the window closes),
/// with the time-windowed String key (`dump` shows it as `user@start`).
///
/// Three input partitions, keyed as the producer would key them: a windowed
/// key goes to the partition of its plain key, so each output partition is
/// fed by the one task that reads the same input partition, and stream time
/// (which closes windows) is that task's own.
const WINDOWED_COUNT: Scenario = Scenario {
    name: "windowed-count",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("windowed-string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::Records(expect_windowed_count),
};

/// windowed-count's windows (Scenarios.java has the same constants).
const WINDOW_SIZE_MS: i64 = 10_000;
const WINDOW_GRACE_MS: i64 = 5_000;

/// A table of user -> region (null values delete the user), grouped by
/// region and counted; every count update is a record `(region, count)`.
///
/// One input partition, as wordcount: the repartition topic then has one
/// partition too, so the order of the updates is the input order.
const TABLE_AGGREGATE: Scenario = Scenario {
    name: "table-aggregate",
    input_partitions: 1,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_region_moves,
    expect: Expect::Records(expect_region_counts),
};

const REGIONS: &[&str] = &["north", "south", "east", "west", "central", "islands"];

fn generate_lines(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    (0..records)
        .map(|i| Record {
            partition: i as i32 % partitions,
            timestamp: timestamp(i),
            key: None,
            value: Some(sentence(rng)),
        })
        .collect()
}

fn generate_keyed_sentences(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    (0..records)
        .map(|i| {
            let key = format!("user-{}", rng.below(20));
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: timestamp(i),
                key: Some(key),
                value: Some(sentence(rng)),
            }
        })
        .collect()
}

/// Events of 12 users. Most are stamped with the clock (one second a record
/// across all partitions); some are stamped up to a grace period earlier
/// (out of order, still counted), some 15 to 45 seconds earlier (mostly
/// late: their windows closed and they are dropped). Last, one record per
/// partition a window and a grace after the last clock tick, so that every
/// window before it closes and is written.
fn generate_user_events(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    const EVENTS: &[&str] = &["view", "click", "scroll", "buy"];
    let event = |key: String, timestamp: i64, value: &str| Record {
        partition: partition_for_key(key.as_bytes(), partitions),
        timestamp,
        key: Some(key),
        value: Some(value.to_owned()),
    };
    let mut input: Vec<Record> = (0..records)
        .map(|i| {
            let key = format!("user-{}", rng.below(12));
            let clock = timestamp(i);
            let timestamp = match rng.below(10) {
                0 | 1 => clock - 1 - rng.below(WINDOW_GRACE_MS as usize - 1) as i64,
                2 => clock - 15_000 - rng.below(30_000) as i64,
                _ => clock,
            };
            event(key, timestamp, EVENTS[rng.below(EVENTS.len())])
        })
        .collect();
    let closing = timestamp(records) + WINDOW_SIZE_MS + WINDOW_GRACE_MS;
    for partition in 0..partitions {
        let key = (0..)
            .map(|n| format!("user-{n}"))
            .find(|key| partition_for_key(key.as_bytes(), partitions) == partition)
            .expect("some user lands in every partition");
        input.push(event(key, closing, "close"));
    }
    input
}

/// Users placed in, moved between and removed from regions: mostly to a
/// random region, sometimes to the region they are in already (the count
/// goes through the subtractor and the adder in one update), sometimes a
/// delete (of a user who may not be there). Some records are stamped up to
/// 30 seconds early, out of order.
fn generate_region_moves(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    let mut regions: HashMap<String, &str> = HashMap::new();
    (0..records)
        .map(|i| {
            let user = format!("user-{}", rng.below(25));
            let region = match rng.below(10) {
                0 => None,
                1 | 2 if regions.contains_key(&user) => regions.get(&user).copied(),
                _ => Some(REGIONS[rng.below(REGIONS.len())]),
            };
            match region {
                Some(region) => regions.insert(user.clone(), region),
                None => regions.remove(&user),
            };
            let timestamp = match rng.below(8) {
                0 => timestamp(i) - rng.below(30_000) as i64,
                _ => timestamp(i),
            };
            Record {
                partition: i as i32 % partitions,
                timestamp,
                key: Some(user),
                value: region.map(str::to_owned),
            }
        })
        .collect()
}

fn timestamp(index: usize) -> i64 {
    BASE_TIMESTAMP + 1000 * index as i64
}

/// Running counts in input order; each update keeps the timestamp of the line
/// that caused it and lands where the default partitioner puts the word.
fn expect_wordcount(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut counts: HashMap<String, i64> = HashMap::new();
    let mut output = Vec::new();
    for record in input {
        for word in words(record.value.as_deref().unwrap_or_default()) {
            let count = counts.entry(word.clone()).or_default();
            *count += 1;
            output.push(Record {
                partition: partition_for_key(word.as_bytes(), partitions),
                timestamp: record.timestamp,
                value: Some(count.to_string()),
                key: Some(word),
            });
        }
    }
    output
}

/// Java's `line.toLowerCase(Locale.ROOT).split("\\W+")` for the ASCII lines
/// the generator writes (which never start with a separator, so Java yields no
/// empty leading word either).
fn words(line: &str) -> Vec<String> {
    line.to_ascii_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

fn expect_filter_map(input: &[Record], partitions: i32) -> Vec<Record> {
    input
        .iter()
        .filter(|r| r.value.as_deref().unwrap_or_default().contains(FILTER_CHAR))
        .map(|r| {
            let key = r.key.as_deref().unwrap_or_default();
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: r.timestamp,
                key: r.key.clone(),
                value: r.value.as_deref().map(str::to_ascii_uppercase),
            }
        })
        .collect()
}

/// The partition number a record of topic `topic` (an index into
/// [`Scenario::input_topics`]) carries in a scenario's input.
fn on_topic(topic: i32, partition: i32, partitions: i32) -> i32 {
    topic * partitions + partition
}

/// A record of one input topic, at the partition the producer would pick for `key`.
fn keyed(
    topic: i32,
    partitions: i32,
    timestamp: i64,
    key: String,
    value: Option<String>,
) -> Record {
    Record {
        partition: on_topic(
            topic,
            partition_for_key(key.as_bytes(), partitions),
            partitions,
        ),
        timestamp,
        key: Some(key),
        value,
    }
}

/// The input of a scenario reading several topics, topic by topic, each
/// record back at its partition of its topic.
fn by_topic(input: &[Record], partitions: i32) -> Vec<(i32, Record)> {
    input
        .iter()
        .map(|r| {
            (
                r.partition / partitions,
                Record {
                    partition: r.partition % partitions,
                    ..r.clone()
                },
            )
        })
        .collect()
}

/// In time order (which is the order of the input within each topic, as
/// every generated timestamp is later than the one before): the records of
/// both topics as each task processes them.
fn in_time_order(input: &[Record], partitions: i32) -> Vec<(i32, Record)> {
    let mut records = by_topic(input, partitions);
    records.sort_by_key(|(_, r)| r.timestamp);
    records
}

const NAMES: &[&str] = &[
    "ada", "alan", "barbara", "dennis", "edsger", "frances", "grace", "john", "ken", "leslie",
    "margaret", "niklaus", "radia", "tony",
];

/// Customers 0 to 19 (three in four of them at first), then orders of
/// customers 0 to 24, one in ten records a customer renamed and one in ten
/// deleted (some of them absent already). Customers are topic 0, orders
/// topic 1; one timestamp a record, growing.
fn generate_orders_and_customers(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    let mut clock = 0;
    let mut tick = || {
        clock += 1;
        timestamp(clock - 1)
    };
    let name = |rng: &mut Rng| Some(NAMES[rng.below(NAMES.len())].to_owned());
    let mut input = Vec::new();
    for customer in 0..20 {
        if rng.below(4) != 0 {
            let key = format!("customer-{customer}");
            let value = name(rng);
            input.push(keyed(0, partitions, tick(), key, value));
        }
    }
    for i in 0..records {
        let record = match rng.below(10) {
            0 => keyed(0, partitions, tick(), customer(rng, 20), name(rng)),
            1 => keyed(0, partitions, tick(), customer(rng, 20), None),
            _ => {
                let key = customer(rng, 25);
                keyed(1, partitions, tick(), key, Some(format!("order-{i}")))
            }
        };
        input.push(record);
    }
    input
}

fn customer(rng: &mut Rng, customers: usize) -> String {
    format!("customer-{}", rng.below(customers))
}

fn expect_stream_table_join(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut customers: HashMap<String, String> = HashMap::new();
    let mut output = Vec::new();
    for (topic, record) in in_time_order(input, STREAM_TABLE_JOIN.input_partitions) {
        let key = record.key.clone().unwrap_or_default();
        if topic == 0 {
            match record.value {
                Some(name) => customers.insert(key, name),
                None => customers.remove(&key),
            };
            continue;
        }
        let order = record.value.as_deref().unwrap_or_default();
        let name = customers.get(&key).map_or("null", String::as_str);
        output.push(Record {
            partition: partition_for_key(key.as_bytes(), partitions),
            timestamp: record.timestamp,
            value: Some(format!("{order}|{name}")),
            key: Some(key),
        });
    }
    output
}

/// Updates of keys `item-0` to `item-14` on two tables (topic 0 left,
/// topic 1 right), one in five a tombstone (some for absent keys); one
/// timestamp a record, growing.
fn generate_two_tables(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    (0..records)
        .map(|i| {
            let topic = rng.below(2) as i32;
            let key = format!("item-{}", rng.below(15));
            let side = if topic == 0 { "l" } else { "r" };
            let value = (rng.below(5) != 0).then(|| format!("{side}{i}"));
            keyed(topic, partitions, timestamp(i), key, value)
        })
        .collect()
}

/// A side of a table-table join: its values with their timestamps.
type TableSide = HashMap<String, (String, i64)>;

fn expect_table_table_join(input: &[Record], partitions: i32) -> Vec<Record> {
    table_table_join(input, partitions, false)
}

fn expect_table_table_outer_join(input: &[Record], partitions: i32) -> Vec<Record> {
    table_table_join(input, partitions, true)
}

/// Kafka Streams' KTableKTableInnerJoin and KTableKTableOuterJoin without
/// old values: each update looks up the other side and writes the result
/// at the later of the two timestamps. Inner: nothing while the other side
/// lacks the key, else the joined value or, for a delete, a tombstone.
/// Outer: nothing when neither side has or had a value, a tombstone when
/// the key left the only side that had it, else the joined value.
fn table_table_join(input: &[Record], partitions: i32, outer: bool) -> Vec<Record> {
    let mut sides: [TableSide; 2] = [HashMap::new(), HashMap::new()];
    let mut output = Vec::new();
    for (topic, record) in in_time_order(input, TABLE_TABLE_JOIN.input_partitions) {
        let key = record.key.clone().unwrap_or_default();
        let this = topic as usize;
        let old = match &record.value {
            Some(value) => sides[this].insert(key.clone(), (value.clone(), record.timestamp)),
            None => sides[this].remove(&key),
        };
        let other = sides[1 - this].get(&key);
        let timestamp = other.map_or(record.timestamp, |(_, ts)| record.timestamp.max(*ts));
        let value = match (outer, other, &record.value) {
            (false, None, _) => continue,
            (true, None, None) if old.is_none() => continue,
            (true, None, None) => None,
            (false, Some(_), None) => None,
            (_, other, new) => {
                let other = other.map(|(v, _)| v.as_str());
                let (left, right) = if this == 0 {
                    (new.as_deref(), other)
                } else {
                    (other, new.as_deref())
                };
                Some(format!(
                    "{}|{}",
                    left.unwrap_or("null"),
                    right.unwrap_or("null")
                ))
            }
        };
        output.push(Record {
            partition: partition_for_key(key.as_bytes(), partitions),
            timestamp,
            key: Some(key),
            value,
        });
    }
    output
}

/// Records of keys `key-0` to `key-5` on two streams (topic 0 left, topic 1
/// right, three in five left), each 100 ms to 2.5 s after the one before;
/// last, per partition, a right record with a key of its own far enough
/// ahead that every window and grace period has passed.
fn generate_two_streams(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    let mut time = BASE_TIMESTAMP;
    let mut input: Vec<Record> = (0..records)
        .map(|i| {
            time += 100 + rng.below(2_400) as i64;
            let topic = i32::from(rng.below(5) >= 3);
            let key = format!("key-{}", rng.below(6));
            let value = format!("{}{i}", if topic == 0 { "L" } else { "R" });
            keyed(topic, partitions, time, key, Some(value))
        })
        .collect();
    let closing = time + JOIN_DIFFERENCE_MS + JOIN_GRACE_MS + 1;
    for partition in 0..partitions {
        let key = (0..)
            .map(|n| format!("closer-{n}"))
            .find(|key| partition_for_key(key.as_bytes(), partitions) == partition)
            .expect("some key lands in every partition");
        input.push(keyed(
            1,
            partitions,
            closing + i64::from(partition),
            key,
            Some("close".to_owned()),
        ));
    }
    input
}

/// Kafka Streams' KStreamKStreamJoin for a left join, per task (stream time
/// is the task's): a record first emits the unmatched left records whose
/// window and grace have passed (oldest first), then joins with the other
/// side's records of its key at most [`JOIN_DIFFERENCE_MS`] away; a left
/// record without a match waits for its window to close.
fn expect_stream_stream_left_join(input: &[Record], partitions: i32) -> Vec<Record> {
    struct Task {
        /// Both sides' records so far: (key, timestamp, value).
        seen: [Vec<(String, i64, String)>; 2],
        /// Unmatched left records: (timestamp, key, value).
        waiting: Vec<(i64, String, String)>,
    }
    let input_partitions = STREAM_STREAM_JOIN.input_partitions;
    let mut tasks: HashMap<i32, Task> = HashMap::new();
    let mut output = Vec::new();
    let mut emit = |key: &str, timestamp: i64, value: String| {
        output.push(Record {
            partition: partition_for_key(key.as_bytes(), partitions),
            timestamp,
            key: Some(key.to_owned()),
            value: Some(value),
        })
    };
    for (topic, record) in in_time_order(input, input_partitions) {
        let task = tasks.entry(record.partition).or_insert_with(|| Task {
            seen: [Vec::new(), Vec::new()],
            waiting: Vec::new(),
        });
        // Timestamps only grow within a task: this record's is its stream time.
        let now = record.timestamp;
        let (closed, open) = task
            .waiting
            .drain(..)
            .partition::<Vec<_>, _>(|(ts, _, _)| ts + JOIN_DIFFERENCE_MS + JOIN_GRACE_MS < now);
        task.waiting = open;
        for (ts, key, value) in closed {
            emit(&key, ts, format!("{value}|null"));
        }
        let key = record.key.clone().unwrap_or_default();
        let value = record.value.clone().unwrap_or_default();
        let this = topic as usize;
        let mut matched = false;
        for (other_key, ts, other) in &task.seen[1 - this] {
            if *other_key != key || now - ts > JOIN_DIFFERENCE_MS {
                continue;
            }
            matched = true;
            if this == 0 {
                emit(&key, now, format!("{value}|{other}"));
            } else {
                emit(&key, now, format!("{other}|{value}"));
                task.waiting.retain(|(w, k, _)| !(w == ts && *k == key));
            }
        }
        if this == 0 && !matched {
            task.waiting.push((now, key.clone(), value.clone()));
        }
        task.seen[this].push((key, now, value));
    }
    output
}

/// Final counts of the windows that closed, per input partition (a task:
/// its own stream time, its own output partition), in the order Kafka
/// Streams' suppression buffer releases them: by window end, then by the
/// serialized windowed key (the user's bytes, then the window start).
///
/// A record counts in its window unless the window has closed: its end is
/// at or before stream time minus the grace. A window's count carries the
/// largest timestamp of its records, and is released as soon as stream time
/// reaches its end plus the grace.
fn expect_windowed_count(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut output = Vec::new();
    let input_partitions: std::collections::BTreeSet<i32> =
        input.iter().map(|r| r.partition).collect();
    for input_partition in input_partitions {
        let mut stream_time = i64::MIN;
        let mut open: BTreeMap<(i64, Vec<u8>), OpenWindow> = BTreeMap::new();
        for record in input.iter().filter(|r| r.partition == input_partition) {
            let user = record.key.clone().unwrap_or_default();
            stream_time = stream_time.max(record.timestamp);
            let close = stream_time - WINDOW_GRACE_MS;
            let start = record.timestamp - record.timestamp.rem_euclid(WINDOW_SIZE_MS);
            let end = start + WINDOW_SIZE_MS;
            if end <= close {
                continue; // late: dropped
            }
            let mut windowed_key = user.clone().into_bytes();
            windowed_key.extend_from_slice(&start.to_be_bytes());
            let window = open.entry((end, windowed_key)).or_insert(OpenWindow {
                user,
                start,
                count: 0,
                timestamp: record.timestamp,
            });
            window.count += 1;
            window.timestamp = window.timestamp.max(record.timestamp);
            while let Some(entry) = open.first_entry() {
                if entry.key().0 > close {
                    break;
                }
                let window = entry.remove();
                output.push(Record {
                    partition: partition_for_key(window.user.as_bytes(), partitions),
                    timestamp: window.timestamp,
                    key: Some(format!("{}@{}", window.user, window.start)),
                    value: Some(window.count.to_string()),
                });
            }
        }
    }
    output
}

/// A window of windowed-count not closed yet, kept under its end and the
/// serialized windowed key (the suppression buffer's order).
struct OpenWindow {
    user: String,
    start: i64,
    count: i64,
    /// The largest timestamp of the window's records.
    timestamp: i64,
}

/// Count updates per region in input order. A user's old region is counted
/// down before the new one is counted up; a user staying in the same region
/// is one update (subtract, then add: the same count). A region's count
/// stays (at 0 too) once it exists. Each update carries the larger of the
/// input timestamp and the timestamp of the region's previous count.
fn expect_region_counts(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut regions: HashMap<String, String> = HashMap::new();
    let mut counts: HashMap<String, (i64, i64)> = HashMap::new();
    let mut output = Vec::new();
    let mut update = |region: &str, delta: i64, timestamp: i64| {
        let (count, at) = counts
            .entry(region.to_owned())
            .and_modify(|(_, at)| *at = timestamp.max(*at))
            .or_insert((0, timestamp));
        *count += delta;
        output.push(Record {
            partition: partition_for_key(region.as_bytes(), partitions),
            timestamp: *at,
            key: Some(region.to_owned()),
            value: Some(count.to_string()),
        });
    };
    for record in input {
        let user = record.key.clone().unwrap_or_default();
        let old = match &record.value {
            Some(region) => regions.insert(user, region.clone()),
            None => regions.remove(&user),
        };
        match (old, &record.value) {
            (Some(old), Some(new)) if old == *new => update(new, 0, record.timestamp),
            (old, new) => {
                if let Some(old) = old {
                    update(&old, -1, record.timestamp);
                }
                if let Some(new) = new {
                    update(new, 1, record.timestamp);
                }
            }
        }
    }
    output
}

const VOCABULARY: &[&str] = &[
    "kafka",
    "stream",
    "table",
    "join",
    "window",
    "state",
    "store",
    "record",
    "topic",
    "partition",
    "offset",
    "commit",
    "task",
    "thread",
    "broker",
    "replica",
    "leader",
    "group",
    "rebalance",
    "changelog",
    "punctuate",
    "grace",
    "session",
    "tumbling",
    "hopping",
    "sliding",
    "count",
    "reduce",
    "aggregate",
    "filter",
    "map",
    "branch",
    "merge",
    "key",
    "value",
    "time",
    "event",
    "late",
    "river",
    "cloud",
    "quick",
    "brown",
    "fox",
    "lazy",
    "dog",
    "hello",
    "world",
    "data",
];

/// 1 to 8 vocabulary words, some capitalised or shouted, joined by spaces and
/// the odd comma, sometimes ending in a full stop or an exclamation mark.
fn sentence(rng: &mut Rng) -> String {
    let words = 1 + rng.below(8);
    let mut out = String::new();
    for i in 0..words {
        if i > 0 {
            out.push_str(if rng.below(8) == 0 { ", " } else { " " });
        }
        let word = VOCABULARY[rng.below(VOCABULARY.len())];
        match rng.below(10) {
            0 => out.push_str(&word.to_ascii_uppercase()),
            1 | 2 => {
                out.push(word.as_bytes()[0].to_ascii_uppercase() as char);
                out.push_str(&word[1..]);
            }
            _ => out.push_str(word),
        }
    }
    match rng.below(6) {
        0 => out.push('.'),
        1 => out.push('!'),
        _ => {}
    }
    out
}

/// SplitMix64: tiny, fast, and the same sequence on every platform, which is
/// all a seeded test input needs.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for test data (n is tiny next to 2^64).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::DEFAULT_SEED;

    #[test]
    fn same_seed_same_input() {
        for scenario in SCENARIOS {
            assert_eq!(scenario.input(7, 50), scenario.input(7, 50));
            assert_ne!(scenario.input(7, 50), scenario.input(8, 50));
        }
    }

    #[test]
    fn words_split_like_java() {
        assert_eq!(words("Hello, KAFKA world!"), ["hello", "kafka", "world"]);
        assert_eq!(words("snake_case stays"), ["snake_case", "stays"]);
    }

    #[test]
    fn wordcount_emits_running_counts() {
        let input = vec![
            Record {
                partition: 0,
                timestamp: 1,
                key: None,
                value: Some("a b".into()),
            },
            Record {
                partition: 0,
                timestamp: 2,
                key: None,
                value: Some("B".into()),
            },
        ];
        let out = expect_wordcount(&input, 1);
        let summary: Vec<_> = out
            .iter()
            .map(|r| {
                (
                    r.key.clone().unwrap(),
                    r.value.clone().unwrap(),
                    r.timestamp,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("a".into(), "1".into(), 1),
                ("b".into(), "1".into(), 1),
                ("b".into(), "2".into(), 2)
            ]
        );
    }

    #[test]
    fn filter_map_keeps_and_uppercases() {
        let input = vec![
            Record {
                partition: 0,
                timestamp: 1,
                key: Some("k".into()),
                value: Some("a cat".into()),
            },
            Record {
                partition: 0,
                timestamp: 2,
                key: Some("k".into()),
                value: Some("dog".into()),
            },
        ];
        let out = expect_filter_map(&input, 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].value.as_deref(), Some("A CAT"));
    }

    fn keyed(partition: i32, timestamp: i64, key: &str, value: Option<&str>) -> Record {
        Record {
            partition,
            timestamp,
            key: Some(key.into()),
            value: value.map(Into::into),
        }
    }

    fn summary(records: &[Record]) -> Vec<(i32, i64, String, String)> {
        records
            .iter()
            .map(|r| {
                (
                    r.partition,
                    r.timestamp,
                    r.key.clone().unwrap(),
                    r.value.clone().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn windowed_count_emits_closed_windows_by_end_then_key() {
        let e = |timestamp, key| keyed(0, timestamp, key, Some("x"));
        let input = vec![
            e(12_000, "b"),
            e(11_000, "a"),
            e(7_000, "b"),  // [0, 10 s) is still open: it closes at 15 s
            e(3_000, "b"),  // out of order too
            e(25_000, "a"), // closes [0, 10 s) and [10 s, 20 s), a before b
            e(9_000, "b"),  // late: [0, 10 s) has closed
            e(19_999, "b"), // late as well
            e(20_500, "b"), // out of order, within grace
            e(35_000, "c"), // closes [20 s, 30 s)
            e(39_999, "c"), // [30 s, 40 s) closes at 45 s, not yet
            e(45_000, "d"), // now
        ];
        let out = expect_windowed_count(&input, 1);
        let w =
            |timestamp, key: &str, count: &str| (0, timestamp, key.to_owned(), count.to_owned());
        assert_eq!(
            summary(&out),
            [
                w(7_000, "b@0", "2"),
                w(11_000, "a@10000", "1"),
                w(12_000, "b@10000", "1"),
                w(25_000, "a@20000", "1"),
                w(20_500, "b@20000", "1"),
                w(39_999, "c@30000", "2"),
            ]
        );
    }

    #[test]
    fn windowed_count_input_has_out_of_order_and_late_records() {
        let input = WINDOWED_COUNT.input(DEFAULT_SEED, WINDOWED_COUNT.default_records);
        let (mut out_of_order, mut late) = (0, 0);
        for partition in 0..WINDOWED_COUNT.input_partitions {
            let mut stream_time = i64::MIN;
            for r in input.iter().filter(|r| r.partition == partition) {
                stream_time = stream_time.max(r.timestamp);
                let end = r.timestamp - r.timestamp % WINDOW_SIZE_MS + WINDOW_SIZE_MS;
                if end <= stream_time - WINDOW_GRACE_MS {
                    late += 1;
                } else if r.timestamp < stream_time {
                    out_of_order += 1;
                }
            }
        }
        assert!(out_of_order > 50 && late > 20, "{out_of_order} {late}");
        let expected = WINDOWED_COUNT
            .expected(&input)
            .expect("windowed-count has its own expectation");
        let counted: i64 = expected
            .iter()
            .map(|r| r.value.as_deref().unwrap().parse::<i64>().unwrap())
            .sum();
        // Every record is counted in a closed window but the late ones and
        // the closing record of each partition.
        assert_eq!(
            counted as usize,
            input.len() - late - WINDOWED_COUNT.input_partitions as usize
        );
    }

    #[test]
    fn region_counts_move_users_and_keep_the_latest_timestamp() {
        let input = vec![
            keyed(0, 10, "alice", Some("north")),
            keyed(0, 20, "bob", Some("north")),
            keyed(0, 15, "alice", Some("north")), // same region: one update
            keyed(0, 30, "alice", Some("south")), // down north, up south
            keyed(0, 25, "carol", None),          // not there: no update
            keyed(0, 5, "bob", None),             // leaves north, earlier
        ];
        let u = |timestamp, region: &str, count: &str| {
            (0, timestamp, region.to_owned(), count.to_owned())
        };
        assert_eq!(
            summary(&expect_region_counts(&input, 1)),
            [
                u(10, "north", "1"),
                u(20, "north", "2"),
                u(20, "north", "2"),
                u(30, "north", "1"),
                u(30, "south", "1"),
                u(30, "north", "0"),
            ]
        );
    }

    #[test]
    fn generated_lines_start_with_a_word() {
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            let line = sentence(&mut rng);
            assert!(
                line.starts_with(|c: char| c.is_ascii_alphabetic()),
                "{line}"
            );
        }
    }

    #[test]
    fn the_codecs_scenario_writes_each_codec_to_a_partition_of_filter_map() {
        let codecs = find("codecs").unwrap();
        assert_eq!(codecs.app(), "filter-map");
        assert_eq!(codecs.input_codecs().len() as i32, codecs.input_partitions);
        assert_eq!(FILTER_MAP.app(), "filter-map");
        assert!(FILTER_MAP.input_codecs().is_empty());
        let input = codecs.input(DEFAULT_SEED, codecs.default_records);
        for partition in 0..codecs.input_partitions {
            assert!(
                input.iter().any(|r| r.partition == partition),
                "{partition}"
            );
        }
    }
}
