//! The record files shared with the Java tools (compat/.../Tsv.java) and the
//! record-by-record diff.
//!
//! One record a line, tab-separated; inside a field `\\`, `\t`, `\n`, `\r`
//! are escaped and `\N` is null. Input files: `partition timestamp key value`.
//! Dumps: `partition offset timestamp key value`; the offset is ignored when
//! comparing, since two correct runs may place records at different offsets
//! (transaction markers take offsets too).

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A record as the scenarios see it: where, when, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub partition: i32,
    pub timestamp: i64,
    pub key: Option<String>,
    pub value: Option<String>,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |field: &Option<String>| match field {
            Some(text) => format!("{text:?}"),
            None => "null".to_owned(),
        };
        write!(
            f,
            "ts={} key={} value={}",
            self.timestamp,
            show(&self.key),
            show(&self.value)
        )
    }
}

/// Writes records in the input-file layout.
pub(super) fn write_input(path: &Path, records: &[Record]) -> Result<()> {
    let text: String = records
        .iter()
        .map(|r| {
            format!(
                "{}\t{}\t{}\t{}\n",
                r.partition,
                r.timestamp,
                escape(r.key.as_deref()),
                escape(r.value.as_deref())
            )
        })
        .collect();
    fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a dump written by the Java `dump` tool.
pub(super) fn read_dump(path: &Path) -> Result<Vec<Record>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            parse_dump_line(line)
                .with_context(|| format!("{}:{}: bad record line", path.display(), n + 1))
        })
        .collect()
}

/// Writes records in the dump layout (offsets are positions per partition), so
/// expected and actual files can be compared with any diff tool.
pub(super) fn write_dump(path: &Path, records: &[Record]) -> Result<()> {
    let mut offsets: BTreeMap<i32, u64> = BTreeMap::new();
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by_key(|r| r.partition);
    let text: String = sorted
        .into_iter()
        .map(|r| {
            let offset = offsets.entry(r.partition).or_default();
            *offset += 1;
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                r.partition,
                *offset - 1,
                r.timestamp,
                escape(r.key.as_deref()),
                escape(r.value.as_deref())
            )
        })
        .collect();
    fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn parse_dump_line(line: &str) -> Result<Record> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [partition, _offset, timestamp, key, value] = fields[..] else {
        bail!("expected 5 tab-separated fields, got {}", fields.len());
    };
    parse_record(partition, timestamp, key, value)
}

fn parse_record(partition: &str, timestamp: &str, key: &str, value: &str) -> Result<Record> {
    Ok(Record {
        partition: partition.parse()?,
        timestamp: timestamp.parse()?,
        key: unescape(key)?,
        value: unescape(value)?,
    })
}

/// A record's headers, in order: name and value (`None`: a null value).
pub(super) type Headers = Vec<(String, Option<Vec<u8>>)>;

/// Reads a dump written by `dump --headers true`: the five fields, then
/// the headers as `name=HEX` (a null value: `name` alone), comma-separated.
pub(super) fn read_dump_with_headers(path: &Path) -> Result<Vec<(Record, Headers)>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            parse_headers_line(line)
                .with_context(|| format!("{}:{}: bad record line", path.display(), n + 1))
        })
        .collect()
}

fn parse_headers_line(line: &str) -> Result<(Record, Headers)> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [partition, _offset, timestamp, key, value, headers] = fields[..] else {
        bail!("expected 6 tab-separated fields, got {}", fields.len());
    };
    let record = parse_record(partition, timestamp, key, value)?;
    let headers = headers
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|header| match header.split_once('=') {
            Some((name, hex)) => Ok((name.to_owned(), Some(decode_hex(hex)?))),
            None => Ok((header.to_owned(), None)),
        })
        .collect::<Result<_>>()?;
    Ok((record, headers))
}

fn decode_hex(hex: &str) -> Result<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        bail!("odd-length hex {hex:?}");
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).with_context(|| format!("bad hex {hex:?}")))
        .collect()
}

/// The table an output topic stands for: per partition, the last value
/// written for each key, keys whose last record is a tombstone left out,
/// in key order. Timestamps are zeroed: which update came last, and so its
/// timestamp, may depend on timing where only the values are fixed.
pub(super) fn final_values(records: &[Record]) -> Vec<Record> {
    let mut last: BTreeMap<(i32, Option<String>), &Record> = BTreeMap::new();
    for record in records {
        last.insert((record.partition, record.key.clone()), record);
    }
    last.into_values()
        .filter(|r| r.value.is_some())
        .map(|r| Record {
            timestamp: 0,
            ..r.clone()
        })
        .collect()
}

fn escape(field: Option<&str>) -> String {
    let Some(text) = field else {
        return "\\N".to_owned();
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ => out.push(c),
        }
    }
    out
}

fn unescape(field: &str) -> Result<Option<String>> {
    if field == "\\N" {
        return Ok(None);
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('\\') => '\\',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('r') => '\r',
            other => bail!("bad escape \\{other:?} in {field:?}"),
        });
    }
    Ok(Some(out))
}

/// How many differing positions a diff shows around the first one.
const CONTEXT: usize = 3;

/// Compares two outputs partition by partition, in order. `None` when equal,
/// else a readable report: record counts per partition and, for each partition
/// that differs, the records around the first difference on both sides.
pub(super) fn diff(
    left_name: &str,
    left: &[Record],
    right_name: &str,
    right: &[Record],
) -> Option<String> {
    let (left, right) = (by_partition(left), by_partition(right));
    let partitions: std::collections::BTreeSet<i32> =
        left.keys().chain(right.keys()).copied().collect();
    let empty = Vec::new();
    let mut report = String::new();
    for partition in partitions {
        let l = left.get(&partition).unwrap_or(&empty);
        let r = right.get(&partition).unwrap_or(&empty);
        if let Some(first) = first_difference(l, r) {
            report.push_str(&partition_report(
                partition,
                first,
                (left_name, l),
                (right_name, r),
            ));
        }
    }
    (!report.is_empty()).then_some(report)
}

fn by_partition(records: &[Record]) -> BTreeMap<i32, Vec<&Record>> {
    let mut map: BTreeMap<i32, Vec<&Record>> = BTreeMap::new();
    for record in records {
        map.entry(record.partition).or_default().push(record);
    }
    map
}

fn first_difference(left: &[&Record], right: &[&Record]) -> Option<usize> {
    let common = left.len().min(right.len());
    (0..common)
        .find(|&i| left[i] != right[i])
        .or((left.len() != right.len()).then_some(common))
}

fn partition_report(
    partition: i32,
    first: usize,
    (left_name, left): (&str, &[&Record]),
    (right_name, right): (&str, &[&Record]),
) -> String {
    let mut out = format!(
        "partition {partition}: {left_name} has {} records, {right_name} has {}; first difference at position {first}\n",
        left.len(),
        right.len()
    );
    let from = first.saturating_sub(CONTEXT);
    for (name, side) in [(left_name, left), (right_name, right)] {
        out.push_str(&format!("  {name}:\n"));
        for (i, record) in side.iter().enumerate().skip(from).take(2 * CONTEXT + 1) {
            let mark = if i == first { '>' } else { ' ' };
            out.push_str(&format!("   {mark}{i:>6}  {record}\n"));
        }
        if side.len() <= first {
            out.push_str(&format!("   >{first:>6}  (no record)\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(partition: i32, timestamp: i64, key: &str, value: &str) -> Record {
        Record {
            partition,
            timestamp,
            key: Some(key.to_owned()),
            value: Some(value.to_owned()),
        }
    }

    #[test]
    fn escaping_round_trips() {
        for text in [
            "plain",
            "tab\there",
            "new\nline\r",
            "back\\slash",
            "\\N",
            "",
        ] {
            assert_eq!(
                unescape(&escape(Some(text))).unwrap().as_deref(),
                Some(text)
            );
        }
        assert_eq!(unescape(&escape(None)).unwrap(), None);
        assert!(unescape("bad\\x").is_err());
    }

    #[test]
    fn dump_files_round_trip() {
        let records = vec![rec(1, 5, "b", "2"), rec(0, 7, "a\tb", "1")];
        let path = std::env::temp_dir().join(format!("xtask-dump-{}", std::process::id()));
        write_dump(&path, &records).unwrap();
        let read = read_dump(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert_eq!(read, vec![records[1].clone(), records[0].clone()]);
    }

    #[test]
    fn final_values_keep_the_last_live_value_per_key() {
        let mut tombstone = rec(0, 4, "b", "x");
        tombstone.value = None;
        let records = vec![
            rec(0, 1, "a", "1"),
            rec(0, 2, "b", "1"),
            rec(1, 3, "a", "9"),
            rec(0, 3, "a", "2"),
            tombstone,
        ];
        assert_eq!(
            final_values(&records),
            vec![rec(0, 0, "a", "2"), rec(1, 0, "a", "9")]
        );
    }

    #[test]
    fn header_lines_parse() {
        let (record, headers) =
            parse_headers_line("0\t5\t7\tk\tv\tcount=3132,empty=,gone").unwrap();
        assert_eq!(record, rec(0, 7, "k", "v"));
        assert_eq!(
            headers,
            vec![
                ("count".to_owned(), Some(b"12".to_vec())),
                ("empty".to_owned(), Some(Vec::new())),
                ("gone".to_owned(), None)
            ]
        );
    }

    #[test]
    fn equal_outputs_have_no_diff() {
        let a = vec![rec(0, 1, "a", "1"), rec(1, 2, "b", "1")];
        // Interleaving across partitions does not matter; order within does.
        let b = vec![a[1].clone(), a[0].clone()];
        assert_eq!(diff("expected", &a, "actual", &b), None);
    }

    #[test]
    fn diff_points_at_the_first_difference() {
        let expected = vec![
            rec(0, 1, "a", "1"),
            rec(0, 2, "a", "2"),
            rec(1, 3, "b", "1"),
        ];
        let actual = vec![rec(0, 1, "a", "1"), rec(0, 2, "a", "3")];
        let report = diff("expected", &expected, "java", &actual).unwrap();
        assert!(
            report.contains(
                "partition 0: expected has 2 records, java has 2; first difference at position 1"
            ),
            "{report}"
        );
        assert!(
            report.contains("partition 1: expected has 1 records, java has 0"),
            "{report}"
        );
        assert!(
            report.contains(">     1  ts=2 key=\"a\" value=\"3\""),
            "{report}"
        );
    }
}
