//! Aggregation scenarios beyond counting: cogrouped streams, session and
//! sliding windows, suppression by time limit, and a Processor API count
//! emitted by stream-time punctuation.

use std::collections::HashMap;

use super::{generate_two_streams, generate_user_events, in_time_order, Expect, Scenario};
use crate::compat::partitioner::partition_for_key;
use crate::compat::records::Record;

/// Two streams (`left`, `right`: the stream-stream join's input) grouped by
/// key and cogrouped into one running total: a left record adds 1, a right
/// record 1000. Every update is a record `(key, total)`.
pub(super) const COGROUP: Scenario = Scenario {
    name: "cogroup",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_two_streams,
    expect: Expect::Records(expect_cogroup),
};

/// User events counted per session (inactivity gap 5 s, grace 2 s): a
/// record that bridges two sessions merges them, which deletes both
/// (tombstones for their windowed keys) and writes the merged one.
pub(super) const SESSION_WINDOWS: Scenario = Scenario {
    name: "session-windows",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("session-string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// session-windows' sessions suppressed until they close: one final count
/// per session, once stream time passes its end + gap (5 s) + grace (2 s).
/// A session that a later record merges away before then is never written.
pub(super) const SESSION_SUPPRESS: Scenario = Scenario {
    name: "session-suppress",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("session-string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// windowed-count's counts (tumbling windows, no suppression) regrouped by
/// count and counted: how many (user, window) pairs have each count. Kafka
/// Streams forwards a window's first update with the initializer's 0 as
/// the old value, which the regrouping takes out of count "0". One input
/// partition, so that the repartition topic's order is the input's.
pub(super) const WINDOWED_COUNT_HISTOGRAM: Scenario = Scenario {
    name: "windowed-count-histogram",
    input_partitions: 1,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// User events counted in sliding windows (time difference 5 s, grace
/// 2 s): a record updates every window it falls in and creates the windows
/// that start or end at it.
pub(super) const SLIDING_WINDOWS: Scenario = Scenario {
    name: "sliding-windows",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("windowed-string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// A running count per user, suppressed until 5 s of stream time have
/// passed since the key was buffered (at most 1000 keys, then emitted
/// early): rate limiting of updates, not final results.
pub(super) const SUPPRESS_TIME_LIMIT: Scenario = Scenario {
    name: "suppress-time-limit",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// suppress-time-limit with the buffer's changelog off
/// (`withLoggingDisabled()`): the outputs as suppress-time-limit's, and the
/// count's changelog the only internal topic on both sides, compared byte
/// for byte (no buffer changelog, written at commits, to differ).
pub(super) const SUPPRESS_LOGGING_DISABLED: Scenario = Scenario {
    name: "suppress-logging-disabled",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::KafkaStreams,
};

/// The Processor API: a processor counts events per user in a state store
/// it was connected to, and a stream-time punctuation every 10 s writes
/// every count, at the punctuation's time, in the store's key order.
///
/// Kafka Streams checks stream-time punctuations between batches of
/// records (`TaskExecutor` processes a number of records per task that
/// grows with the thread's speed), so which counts an intermediate
/// punctuation sees depends on timing; kstreams checks after every
/// record. The last punctuation follows each partition's closing record,
/// 15 s past the others, so the final value of every key is its full
/// count on both sides: compared by final values. The store's changelog
/// is compared byte for byte.
pub(super) const PUNCTUATION: Scenario = Scenario {
    name: "punctuation",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "long"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::FinalValues(expect_punctuated_counts),
};

/// Kafka Streams' cogroup aggregate with the cache off: each record, in
/// its task's time order, adds its side's amount to its key's total and
/// writes the new total at its own timestamp.
fn expect_cogroup(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut totals: HashMap<String, i64> = HashMap::new();
    in_time_order(input, COGROUP.input_partitions)
        .into_iter()
        .map(|(topic, record)| {
            let key = record.key.unwrap_or_default();
            let total = totals.entry(key.clone()).or_insert(0);
            *total += if topic == 0 { 1 } else { 1000 };
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: record.timestamp,
                value: Some(total.to_string()),
                key: Some(key),
            }
        })
        .collect()
}

/// The count of every key: what the last punctuation writes.
fn expect_punctuated_counts(input: &[Record], partitions: i32) -> Vec<Record> {
    let mut counts: std::collections::BTreeMap<String, i64> = Default::default();
    for record in input {
        *counts
            .entry(record.key.clone().unwrap_or_default())
            .or_insert(0) += 1;
    }
    counts
        .into_iter()
        .map(|(key, count)| Record {
            partition: partition_for_key(key.as_bytes(), partitions),
            timestamp: 0,
            value: Some(count.to_string()),
            key: Some(key),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cogroup_adds_each_sides_amount() {
        let record = |partition, timestamp, key: &str| Record {
            partition,
            timestamp,
            key: Some(key.to_owned()),
            value: Some("v".to_owned()),
        };
        // Partitions 0..3 are `left`, 3..6 `right`.
        let input = [record(0, 1, "a"), record(3, 2, "a"), record(0, 3, "a")];
        let totals: Vec<_> = expect_cogroup(&input, 3)
            .into_iter()
            .map(|r| (r.timestamp, r.value.unwrap()))
            .collect();
        assert_eq!(
            totals,
            [(1, "1".into()), (2, "1001".into()), (3, "1002".into())]
        );
    }
}
