//! The reference scenarios: their topics, a seeded input generator, and the
//! expected output computed here, independently of either Streams library.
//!
//! Each scenario has a Kafka Streams twin in compat/.../Scenarios.java and a
//! kstreams one in compat/kstreams; the three must describe the same topology.
//!
//! Expected outputs hold because the Streams side runs with the record cache
//! off (every update is forwarded) and because each output partition is fed by
//! one upstream task that reads a single input partition in order.

use std::collections::HashMap;

use super::partitioner::partition_for_key;
use super::records::Record;

/// Input timestamps start here (2023-11-14T22:13:20Z) and advance one second a
/// record: fixed, so that reruns give byte-identical outputs.
const BASE_TIMESTAMP: i64 = 1_700_000_000_000;

/// One reference scenario.
pub struct Scenario {
    pub name: &'static str,
    pub input_partitions: i32,
    pub output_partitions: i32,
    /// Key and value serdes the `dump` tool decodes the output with.
    pub output_serdes: (&'static str, &'static str),
    pub default_records: usize,
    generate: fn(&mut Rng, usize, i32) -> Vec<Record>,
    expect: fn(&[Record], i32) -> Vec<Record>,
}

impl Scenario {
    /// The input: `records` records from `seed`, always the same for the same pair.
    pub fn input(&self, seed: u64, records: usize) -> Vec<Record> {
        (self.generate)(&mut Rng::new(seed), records, self.input_partitions)
    }

    /// What a correct implementation writes to the output topic for `input`.
    pub fn expected(&self, input: &[Record]) -> Vec<Record> {
        (self.expect)(input, self.output_partitions)
    }
}

pub const SCENARIOS: &[Scenario] = &[WORDCOUNT, FILTER_MAP];

pub fn find(name: &str) -> Option<&'static Scenario> {
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
    expect: expect_wordcount,
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
    expect: expect_filter_map,
};

/// filter-map keeps the values that contain this character (Scenarios.java
/// has the same constant).
const FILTER_CHAR: char = 'a';

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
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` for test data (n is tiny next to 2^64).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
