//! The dead-letter queues of a scenario run with one (KIP-1034): each
//! side's dead letters are read with their headers and compared with the
//! records that could not be deserialized or processed, and with each
//! other.
//!
//! A dead letter is the consumed record as it was (key, value, timestamp)
//! with `__streams.errors.*` headers: the exception's class, its message,
//! the stack trace, and the record's topic, partition and offset. The
//! stack trace is compared by its first line (`class: message`): Kafka
//! Streams' carries Java frames that a Rust program does not have.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;

use super::java::JavaHarness;
use super::records::{self, Headers, Record};
use super::scenario::streams::{is_int, rejection};
use super::scenario::Scenario;
use super::{scenario_input, Options, Side, Topics};

const PREFIX: &str = "__streams.errors.";
/// The headers Kafka Streams 4.4 adds, in its order.
const HEADERS: [&str; 6] = [
    "exception",
    "message",
    "stacktrace",
    "topic",
    "partition",
    "offset",
];
const SERIALIZATION_EXCEPTION: &str = "org.apache.kafka.common.errors.SerializationException";
const RUNTIME_EXCEPTION: &str = "java.lang.RuntimeException";
const ILLEGAL_ARGUMENT_EXCEPTION: &str = "java.lang.IllegalArgumentException";

/// A dead letter reduced to what must match: where it came from, the
/// record, and the failure's class, message and first stack-trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeadLetter {
    record: Record,
    /// Header name (without the prefix) and value, in the order written.
    headers: Vec<(String, String)>,
}

/// Dead letters by the input partition and offset of their record.
type Letters = BTreeMap<(i32, i64), DeadLetter>;

/// True when every side's dead letters are the expected ones and the
/// sides' failure descriptions agree.
pub(super) fn compare(
    scenario: &Scenario,
    options: &Options,
    topics: &Topics,
    sides: &[Side],
    java: &JavaHarness,
    bootstrap: &str,
    dir: &Path,
) -> Result<bool> {
    let expected = expected(scenario, options, &topics.inputs[0]);
    let mut agree = true;
    let mut read: Vec<(Side, Letters)> = Vec::new();
    for &side in sides {
        let Some(topic) = topics.dead_letter_queue(scenario, side) else {
            continue;
        };
        let file = dir.join(format!("{}-dlq.tsv", side.name()));
        java.dump_with_headers(bootstrap, &topic, ("string", "string"), &file)?;
        let letters = by_origin(records::read_dump_with_headers(&file)?);
        agree &= report(
            scenario,
            "expected",
            &expected,
            side.name(),
            &letters,
            false,
        );
        read.push((side, letters));
    }
    if let [(a, a_letters), (b, b_letters)] = &read[..] {
        agree &= report(scenario, a.name(), a_letters, b.name(), b_letters, true);
    }
    Ok(agree)
}

/// How the scenario fails on a record, if it does: the headers naming the
/// failure whose values are known here (the exception's class, and the
/// message where it is the scenario's own rather than a serde's).
fn failure(scenario: &Scenario, record: &Record) -> Option<Vec<(String, String)>> {
    let header = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    match scenario.name {
        "processing-dead-letters" => rejection(record.value.as_deref()).map(|message| {
            vec![
                header("exception", RUNTIME_EXCEPTION),
                header("message", &message),
            ]
        }),
        // The application's own handler dead-letters only the multiples of
        // seven, as the IllegalArgumentException they are on the Java side.
        "processing-handler-by-type" => rejection(record.value.as_deref()).map(|message| {
            vec![
                header("exception", ILLEGAL_ARGUMENT_EXCEPTION),
                header("message", &message),
                header(
                    "stacktrace",
                    &format!("{ILLEGAL_ARGUMENT_EXCEPTION}: {message}"),
                ),
            ]
        }),
        _ => (!is_int(record.value.as_deref()))
            .then(|| vec![header("exception", SERIALIZATION_EXCEPTION)]),
    }
}

/// The records of the input the scenario fails on, keyed by their input
/// partition and offset (the producer writes each partition's records in
/// order from offset 0), with the headers whose values are known here.
fn expected(scenario: &Scenario, options: &Options, input_topic: &str) -> Letters {
    let mut offsets: BTreeMap<i32, i64> = BTreeMap::new();
    let mut letters = BTreeMap::new();
    for record in scenario_input(scenario, options) {
        let offset = offsets.entry(record.partition).or_default();
        let at = (record.partition, *offset);
        *offset += 1;
        let Some(mut headers) = failure(scenario, &record) else {
            continue;
        };
        headers.extend([
            ("topic".to_owned(), input_topic.to_owned()),
            ("partition".to_owned(), at.0.to_string()),
            ("offset".to_owned(), at.1.to_string()),
        ]);
        let record = Record {
            partition: 0,
            ..record
        };
        letters.insert(at, DeadLetter { record, headers });
    }
    letters
}

/// A side's dead letters by the input partition and offset their headers
/// name (their order in the one-partition queue depends on how the tasks
/// interleaved). Header values are read as UTF-8 text; the stack trace is
/// cut to its first line.
fn by_origin(dumped: Vec<(Record, Headers)>) -> Letters {
    dumped
        .into_iter()
        .map(|(record, headers)| {
            let headers: Vec<(String, String)> = headers
                .into_iter()
                .map(|(name, value)| {
                    let text = value.map_or_else(
                        || "null".to_owned(),
                        |v| String::from_utf8_lossy(&v).into_owned(),
                    );
                    let text = match name.as_str() {
                        "__streams.errors.stacktrace" => {
                            text.lines().next().unwrap_or_default().to_owned()
                        }
                        _ => text,
                    };
                    (name.strip_prefix(PREFIX).unwrap_or(&name).to_owned(), text)
                })
                .collect();
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, v)| v.parse::<i64>().ok())
                    .unwrap_or(-1)
            };
            let origin = (header("partition") as i32, header("offset"));
            (origin, DeadLetter { record, headers })
        })
        .collect()
}

/// Compares two sets of dead letters and prints the result. Against the
/// expectation (`both_complete` false) only the headers it knows are
/// checked, and that every header is there in Kafka Streams' order;
/// between the sides, everything.
fn report(
    scenario: &Scenario,
    left_name: &str,
    left: &Letters,
    right_name: &str,
    right: &Letters,
    both_complete: bool,
) -> bool {
    let mut problems = Vec::new();
    for (origin, l) in left {
        let Some(r) = right.get(origin) else {
            problems.push(format!("{origin:?}: missing on {right_name}"));
            continue;
        };
        if l.record != r.record {
            problems.push(format!(
                "{origin:?}: {left_name} {} / {right_name} {}",
                l.record, r.record
            ));
        }
        let names: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
        if names != HEADERS {
            problems.push(format!("{origin:?}: {right_name} headers {names:?}"));
        }
        let mismatched = l
            .headers
            .iter()
            .filter(|h| !r.headers.contains(h))
            .collect::<Vec<_>>();
        if !mismatched.is_empty() || (both_complete && l.headers != r.headers) {
            problems.push(format!(
                "{origin:?}: headers differ:\n    {left_name}: {:?}\n    {right_name}: {:?}",
                l.headers, r.headers
            ));
        }
    }
    for origin in right.keys().filter(|o| !left.contains_key(o)) {
        problems.push(format!("{origin:?}: only on {right_name}"));
    }
    if let Some(first) = right.values().next() {
        let stack_top = first.headers.iter().find(|(n, _)| n == "stacktrace");
        let class = first.headers.iter().find(|(n, _)| n == "exception");
        let message = first.headers.iter().find(|(n, _)| n == "message");
        if let (Some((_, top)), Some((_, class)), Some((_, message))) = (stack_top, class, message)
        {
            if *top != format!("{class}: {message}") {
                problems.push(format!(
                    "{right_name}: the stack trace starts {top:?}, not with the exception"
                ));
            }
        }
    }
    if problems.is_empty() {
        eprintln!(
            "compat: {}: dead letters: {right_name} == {left_name} ({} records)",
            scenario.name,
            right.len()
        );
        return true;
    }
    eprintln!(
        "compat: {}: dead letters: {right_name} differs from {left_name} ({} problems; first 10):",
        scenario.name,
        problems.len()
    );
    for problem in problems.iter().take(10) {
        eprintln!("  {problem}");
    }
    false
}
