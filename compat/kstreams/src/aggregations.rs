//! The scenarios that aggregate without windows: wordcount,
//! table-aggregate, cogroup and suppress-time-limit.

use kstreams::prelude::*;

use crate::{COGROUP_LEFT_STEP, COGROUP_RIGHT_STEP, SUPPRESS_MAX_RECORDS, SUPPRESS_TIME_LIMIT};

/// wordcount: `flatMapValues(lowercase, split \W+)`, `groupBy(word)`,
/// `count` (store `counts`), `toStream`, `to`.
pub(crate) fn wordcount(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        // The input has null keys, hence the nullable key serde.
        .stream_with(input, Consumed::with(Nullable(StringSerde), StringSerde))
        .flat_map_values(|line| java_split_non_word(&line.to_lowercase()))
        .group_by_with(
            |_, word| word.clone(),
            Grouped::with(StringSerde, StringSerde),
        )
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// table-aggregate: `table`, `groupBy((user, region) -> (region, region))`,
/// `count`, `toStream`, `to`.
pub(crate) fn table_aggregate(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .table_with(
            input,
            Consumed::with(StringSerde, StringSerde),
            Materialized::new(),
        )
        .group_by_with(
            |_user, region| (region.clone(), region),
            Grouped::with(StringSerde, StringSerde),
        )
        .count()
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// cogroup: both inputs grouped by key, each with its own aggregator
/// (+1 per left record, +1000 per right one) into one aggregate per key
/// in the store `cogrouped`.
pub(crate) fn cogroup(builder: &StreamsBuilder, (left, right): (&str, &str), output: &str) {
    let strings = || Consumed::with(StringSerde, StringSerde);
    // Both groupings first, then the cogroup: Java's statement order, which
    // draws the generated names in the same order.
    let left = builder.stream_with(left, strings()).group_by_key();
    let right = builder.stream_with(right, strings()).group_by_key();
    left.cogroup(|_, _, count: i64| count + COGROUP_LEFT_STEP)
        .cogroup(&right, |_, _, count| count + COGROUP_RIGHT_STEP)
        .aggregate_with(
            || 0,
            None,
            Materialized::as_("cogrouped")
                .with_key_serde(StringSerde)
                .with_value_serde(I64Serde),
        )
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// suppress-time-limit: `groupByKey`, `count`, then each key's latest
/// count held back until stream time is 5 s past its first held update
/// (at most 1000 keys, the oldest emitted early when full).
pub(crate) fn suppress_time_limit(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .count()
        .suppress(Suppressed::until_time_limit(
            SUPPRESS_TIME_LIMIT,
            BufferConfig::max_records(SUPPRESS_MAX_RECORDS).emit_early_when_full(),
        ))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// suppress-logging-disabled: suppress-time-limit with the buffer's
/// changelog off (`BufferConfig::with_logging_disabled`): the count's
/// changelog is the only internal topic.
pub(crate) fn suppress_logging_disabled(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .count()
        .suppress(Suppressed::until_time_limit(
            SUPPRESS_TIME_LIMIT,
            BufferConfig::max_records(SUPPRESS_MAX_RECORDS)
                .emit_early_when_full()
                .with_logging_disabled(),
        ))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// Java's `line.split("\\W+")`: the pieces between runs of non-word
/// characters (`\w` is `[a-zA-Z_0-9]`), trailing empty pieces dropped but a
/// leading one kept; a line without separators is one piece, even if empty.
fn java_split_non_word(line: &str) -> Vec<String> {
    let separator = |c: char| !(c.is_ascii_alphanumeric() || c == '_');
    if !line.contains(separator) {
        return vec![line.to_owned()];
    }
    // Rust splits at each separator, Java at each run of them: only the piece
    // before the first run may be empty.
    let mut words: Vec<String> = line
        .split(separator)
        .enumerate()
        .filter(|(i, word)| *i == 0 || !word.is_empty())
        .map(|(_, word)| word.to_owned())
        .collect();
    if words.iter().all(String::is_empty) {
        words.clear();
    }
    words
}

#[cfg(test)]
mod tests {
    use super::java_split_non_word as split;

    #[test]
    fn splits_like_java_on_non_word_runs() {
        // Expected values are what Java's "...".split("\\W+") returns.
        assert_eq!(split("hello, kafka world!"), ["hello", "kafka", "world"]);
        assert_eq!(split("snake_case x9"), ["snake_case", "x9"]);
        assert_eq!(split(", leading"), ["", "leading"]);
        assert_eq!(split("trailing.."), ["trailing"]);
        assert_eq!(split("word"), ["word"]);
        assert_eq!(split(""), [""]);
        assert!(split("!?, ").is_empty());
        assert_eq!(split("caf\u{e9} ol\u{e9}"), ["caf", "ol"]);
    }
}
