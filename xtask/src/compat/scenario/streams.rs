//! Stateless stream scenarios: branches merged back, records that do not
//! deserialize and records a processor rejects sent to a dead-letter queue,
//! partitioners of the application's own.

use super::{generate_keyed_sentences, generate_user_events, Expect, Rng, Scenario};
use crate::compat::partitioner::partition_for_key;
use crate::compat::records::Record;

/// Keyed sentences split in three branches by length modulo 3 (one maps
/// its values to `three:<value>`, one passes them, the default branch
/// upper-cases them) and merged back into one stream.
pub(crate) const BRANCH_MERGE: Scenario = Scenario {
    name: "branch-merge",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_keyed_sentences,
    expect: Expect::Records(expect_branch_merge),
};

/// User events through partitioners of the application's own: a
/// repartition topic of 3 partitions by the user's number N (N % 3, not
/// Kafka's hash), then the output by a multicast partitioner (KIP-837):
/// N % 7 == 0 dropped, 1 copied to N % 3 and N % 3 + 3, 2 moved to
/// N % 3 + 3, the others at N % 3. One input partition, so each output
/// partition holds its records in input order.
pub(crate) const CUSTOM_PARTITIONER: Scenario = Scenario {
    name: "custom-partitioner",
    input_partitions: 1,
    output_partitions: 6,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_user_events,
    expect: Expect::Records(expect_custom_partitions),
};

/// Values read with Kafka's Integer serde (exactly 4 bytes, big-endian)
/// and written back as decimal text. One value in six has another length:
/// the log-and-continue handler drops it and the dead-letter queue gets it,
/// as consumed, with the failure in its headers (KIP-1034); both sides'
/// dead-letter records are compared too.
pub(crate) const DEAD_LETTER_QUEUE: Scenario = Scenario {
    name: "dead-letter-queue",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_ints_and_garbage,
    expect: Expect::Records(expect_decoded_ints),
};

/// Numbers as decimal text through a processor (the Processor API) that
/// doubles them and fails on a multiple of seven: a `RuntimeException`
/// thrown in Kafka Streams, an error returned in kstreams. The
/// log-and-continue processing handler drops the record and the
/// dead-letter queue gets the consumed record with the failure in its
/// headers (KIP-1034); both sides' dead letters are compared.
pub(crate) const PROCESSING_DEAD_LETTERS: Scenario = Scenario {
    name: "processing-dead-letters",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_numbers,
    expect: Expect::Records(expect_doubled),
};

/// Numbers as decimal text through a processor that fails two ways: a
/// multiple of seven with one kind of error (Java's
/// `IllegalArgumentException`), another multiple of eleven with another
/// (`IllegalStateException`). The application's own processing handler,
/// named by its class in the properties (registered under that name on the
/// kstreams side), dead-letters the first kind with Kafka Streams' headers
/// and drops the second without one; both sides' dead letters are compared.
pub(crate) const PROCESSING_HANDLER_BY_TYPE: Scenario = Scenario {
    name: "processing-handler-by-type",
    input_partitions: 3,
    output_partitions: 3,
    output_serdes: ("string", "string"),
    default_records: 1000,
    generate: generate_numbers,
    expect: Expect::Records(expect_doubled_by_type),
};

/// The message of the exception the processor of processing-dead-letters
/// fails with for `value`, or `None` when it doubles it.
pub(crate) fn rejection(value: Option<&str>) -> Option<String> {
    let value = value.unwrap_or_default();
    let n: i64 = value.parse().ok()?;
    (n % 7 == 0).then(|| format!("cannot process {value}: a multiple of seven"))
}

/// Keys `user-0` to `user-19`; values 0 to 999 as decimal text.
fn generate_numbers(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    (0..records)
        .map(|i| {
            let key = format!("user-{}", rng.below(20));
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: super::timestamp(i),
                value: Some(rng.below(1000).to_string()),
                key: Some(key),
            }
        })
        .collect()
}

fn expect_doubled(input: &[Record], partitions: i32) -> Vec<Record> {
    doubled_unless(input, partitions, |value| rejection(value).is_some())
}

/// processing-handler-by-type's output: the numbers neither a multiple of
/// seven (dead-lettered) nor of eleven (dropped), doubled.
fn expect_doubled_by_type(input: &[Record], partitions: i32) -> Vec<Record> {
    doubled_unless(input, partitions, |value| {
        rejection(value).is_some() || eleven_fold(value)
    })
}

/// Whether processing-handler-by-type's processor rejects `value` as a
/// multiple of eleven (and not of seven, which it checks first).
pub(crate) fn eleven_fold(value: Option<&str>) -> bool {
    let n: Option<i64> = value.and_then(|v| v.parse().ok());
    n.is_some_and(|n| n % 7 != 0 && n % 11 == 0)
}

/// The input's numbers doubled, but those `rejected`.
fn doubled_unless(
    input: &[Record],
    partitions: i32,
    rejected: impl Fn(Option<&str>) -> bool,
) -> Vec<Record> {
    input
        .iter()
        .filter(|r| !rejected(r.value.as_deref()))
        .map(|record| {
            let n: i64 = record.value.as_deref().unwrap_or("0").parse().unwrap_or(0);
            let key = record.key.clone().unwrap_or_default();
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: record.timestamp,
                key: Some(key),
                value: Some((2 * n).to_string()),
            }
        })
        .collect()
}

fn expect_branch_merge(input: &[Record], partitions: i32) -> Vec<Record> {
    input
        .iter()
        .map(|record| {
            let value = record.value.clone().unwrap_or_default();
            // Java's String.length() counts UTF-16 units; the sentences are ASCII.
            let value = match value.len() % 3 {
                0 => format!("three:{value}"),
                1 => value,
                _ => value.to_ascii_uppercase(),
            };
            let key = record.key.clone().unwrap_or_default();
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: record.timestamp,
                key: Some(key),
                value: Some(value),
            }
        })
        .collect()
}

/// Each input record at the partitions custom-partitioner's output
/// partitioner chooses for its user number, in input order.
fn expect_custom_partitions(input: &[Record], _partitions: i32) -> Vec<Record> {
    let mut output = Vec::new();
    for record in input {
        let key = record.key.clone().unwrap_or_default();
        let n: i32 = key
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .expect("user events are keyed user-N");
        let home = n % 3;
        let partitions = match n % 7 {
            0 => vec![],
            1 => vec![home, home + 3],
            2 => vec![home + 3],
            _ => vec![home],
        };
        for partition in partitions {
            output.push(Record {
                partition,
                ..record.clone()
            });
        }
    }
    output
}

/// Keys `user-0` to `user-19`; values of four ASCII characters, or, one in
/// six, of 0 to 9 characters but never 4 (a failed deserialization).
fn generate_ints_and_garbage(rng: &mut Rng, records: usize, partitions: i32) -> Vec<Record> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..records)
        .map(|i| {
            let key = format!("user-{}", rng.below(20));
            let len = match rng.below(6) {
                0 => [0, 1, 2, 3, 5, 6, 7, 8, 9][rng.below(9)],
                _ => 4,
            };
            let value: String = (0..len)
                .map(|_| ALPHABET[rng.below(ALPHABET.len())] as char)
                .collect();
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: super::timestamp(i),
                key: Some(key),
                value: Some(value),
            }
        })
        .collect()
}

/// Whether Kafka's IntegerDeserializer reads `value`: exactly 4 bytes.
pub(crate) fn is_int(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.len() == 4)
}

fn expect_decoded_ints(input: &[Record], partitions: i32) -> Vec<Record> {
    input
        .iter()
        .filter(|r| is_int(r.value.as_deref()))
        .map(|record| {
            let bytes: [u8; 4] = record
                .value
                .as_deref()
                .unwrap_or_default()
                .as_bytes()
                .try_into()
                .expect("is_int checked the length");
            let key = record.key.clone().unwrap_or_default();
            Record {
                partition: partition_for_key(key.as_bytes(), partitions),
                timestamp: record.timestamp,
                key: Some(key),
                value: Some(i32::from_be_bytes(bytes).to_string()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_decode_big_endian_and_garbage_is_dropped() {
        let rec = |value: &str| Record {
            partition: 0,
            timestamp: 1,
            key: Some("k".into()),
            value: Some(value.into()),
        };
        let out = expect_decoded_ints(&[rec("\0\0\u{1}\u{2}"), rec("abc"), rec("")], 1);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].value.as_deref(), Some("258"));
        let input = DEAD_LETTER_QUEUE.input(42, 600);
        let bad = input.iter().filter(|r| !is_int(r.value.as_deref())).count();
        assert!((50..150).contains(&bad), "{bad} malformed of 600");
    }

    #[test]
    fn multiples_of_seven_are_rejected_and_the_rest_doubled() {
        let rec = |value: &str| Record {
            partition: 0,
            timestamp: 1,
            key: Some("k".into()),
            value: Some(value.into()),
        };
        let out = expect_doubled(&[rec("14"), rec("15"), rec("0"), rec("999")], 1);
        let values: Vec<_> = out.into_iter().map(|r| r.value.unwrap()).collect();
        assert_eq!(values, ["30", "1998"]);
        assert_eq!(
            rejection(Some("14")).as_deref(),
            Some("cannot process 14: a multiple of seven")
        );
        let input = PROCESSING_DEAD_LETTERS.input(42, 700);
        let rejected = input
            .iter()
            .filter(|r| rejection(r.value.as_deref()).is_some())
            .count();
        assert!((60..150).contains(&rejected), "{rejected} rejected of 700");
    }

    #[test]
    fn branches_by_length() {
        let rec = |value: &str| Record {
            partition: 0,
            timestamp: 1,
            key: Some("k".into()),
            value: Some(value.into()),
        };
        let out: Vec<_> = expect_branch_merge(&[rec("abc"), rec("abcd"), rec("ab")], 1)
            .into_iter()
            .map(|r| r.value.unwrap())
            .collect();
        assert_eq!(out, ["three:abc", "abcd", "AB"]);
    }
}
