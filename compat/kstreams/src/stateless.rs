//! The scenarios without state: filter-map, branch-merge,
//! dead-letter-queue, processing-dead-letters and custom-partitioner.

use kstreams::prelude::*;

use crate::FILTER_CHAR;

/// filter-map: `filter(value contains 'a')`, `mapValues(uppercase)`, `to`.
pub(crate) fn filter_map(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .filter(|_, value| value.contains(FILTER_CHAR))
        // Java's toUpperCase(Locale.ROOT) and Rust's to_uppercase agree
        // on the generated (ASCII) sentences.
        .map_values(|value| value.to_uppercase())
        .to_with(output, Produced::with(StringSerde, StringSerde));
}

/// branch-merge: `split(Named.as("split-"))` into `split-three` (length
/// divisible by 3, prefixed), `split-one` (length 1 modulo 3, unchanged)
/// and the default `split-other` (upper-cased), merged back in that order.
pub(crate) fn branch_merge(builder: &StreamsBuilder, input: &str, output: &str) {
    let mut branches = builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .split_named("split-")
        .branch(
            |_, value| java_length(value).is_multiple_of(3),
            Branched::with_function(|s: KStream<String, String>| {
                s.map_values(|value| format!("three:{value}"))
            })
            .with_name("three"),
        )
        .branch(
            |_, value| java_length(value) % 3 == 1,
            Branched::named("one"),
        )
        .default_branch(
            Branched::with_function(|s: KStream<String, String>| {
                // As in filter-map: toUpperCase(Locale.ROOT) on ASCII.
                s.map_values(|value| value.to_uppercase())
            })
            .with_name("other"),
        );
    let mut branch = |name: &str| {
        branches
            .remove(name)
            .unwrap_or_else(|| panic!("split names a branch {name}"))
    };
    let (three, one, other) = (
        branch("split-three"),
        branch("split-one"),
        branch("split-other"),
    );
    three
        .merge(&one)
        .merge(&other)
        .to_with(output, Produced::with(StringSerde, StringSerde));
}

/// Java's `String.length()`: UTF-16 code units, not UTF-8 bytes, so that a
/// non-ASCII value lands in the same branch on both sides.
fn java_length(value: &str) -> usize {
    value.encode_utf16().count()
}

/// dead-letter-queue: values read as Integers (4 bytes big-endian) and
/// written back as their decimal text. A value of any other size fails to
/// deserialize; `run --dlq` makes that a skipped record sent to the dead
/// letter queue rather than a failed task.
pub(crate) fn dead_letter_queue(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, I32Serde))
        .map_values(|value| value.to_string())
        .to_with(output, Produced::with(StringSerde, StringSerde));
}

/// processing-dead-letters: numbers as decimal text doubled by
/// [`DoubleOrReject`]; `run --dlq` makes its failure on a multiple of seven
/// a skipped record sent to the dead-letter queue rather than a failed task.
pub(crate) fn processing_dead_letters(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .process(|| DoubleOrReject, &[])
        .to_with(output, Produced::with(StringSerde, StringSerde));
}

/// Doubles a number written as decimal text and fails on a multiple of
/// seven, as user code does: with an error, which the processing handler
/// gets (Java's `DoubleOrReject`, which throws a `RuntimeException`).
struct DoubleOrReject;

impl Processor<String, String, String, String> for DoubleOrReject {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        record: Record<String, String>,
    ) -> Result<(), ProcessorError> {
        let n: i64 = record.value.parse()?;
        if n % 7 == 0 {
            return Err(format!("cannot process {}: a multiple of seven", record.value).into());
        }
        ctx.forward(record.with_value((2 * n).to_string()))?;
        Ok(())
    }
}

/// Mirrors `Scenarios.PARTITIONED_BY_NUMBER` and its partition count.
const PARTITIONED_BY_NUMBER: &str = "by-user-number";
const PARTITIONED_BY_NUMBER_PARTITIONS: i32 = 3;

/// custom-partitioner: `repartition` by the user's number N (N % 3 of 3
/// partitions, not Kafka's hash), then `to` with a multicast partitioner:
/// N % 7 == 0 dropped, 1 copied to N % 3 and N % 3 + 3, 2 moved to
/// N % 3 + 3, the others at N % 3.
pub(crate) fn custom_partitioner(builder: &StreamsBuilder, input: &str, output: &str) {
    fn user_number(key: &str) -> i32 {
        key.rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
    let by_number = |_: &str, key: &String, _: &String, _: &Headers, partitions: i32| {
        Some(vec![user_number(key) % partitions])
    };
    let copies = |_: &str, key: &String, _: &String, _: &Headers, _: i32| {
        let n = user_number(key);
        let home = n % 3;
        Some(match n % 7 {
            0 => vec![],
            1 => vec![home, home + 3],
            2 => vec![home + 3],
            _ => vec![home],
        })
    };
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .repartition_with(
            Repartitioned::with(StringSerde, StringSerde)
                .with_name(PARTITIONED_BY_NUMBER)
                .with_partitions(PARTITIONED_BY_NUMBER_PARTITIONS)
                .with_partitioner(by_number),
        )
        .to_with(
            output,
            Produced::with(StringSerde, StringSerde).with_partitioner(copies),
        );
}
