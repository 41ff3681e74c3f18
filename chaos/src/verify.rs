//! The verifier: what the output must be, given what was produced.
//!
//! The input of the pass-through and count scenarios is a sequence per
//! key: the n-th record of key k has value n (from 0). Exactly once means,
//! for the pass-through, each key's output is 0, 1, 2, ... with nothing
//! missing, repeated or reordered; for the count, each key's last count
//! is its number of records, and no count goes backwards (a count repeated
//! or lowered is a record counted again after an aborted transaction leaked
//! or state was lost).

use std::collections::BTreeMap;

/// What a pass-through's output holds against its input.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PassThroughReport {
    pub expected: u64,
    pub seen: u64,
    /// Input records never seen in the output.
    pub lost: u64,
    /// Output records seen more than once (each extra copy counts).
    pub duplicated: u64,
    /// Records that came after a higher sequence number of their key.
    pub out_of_order: u64,
    /// Output records no input has (wrong key or value).
    pub foreign: u64,
}

impl PassThroughReport {
    pub(crate) fn exactly_once(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.out_of_order == 0 && self.foreign == 0
    }
}

/// `expected`: records per key; `seen`: the output's (key, value) in the
/// order one partition's consumer read them.
pub(crate) fn pass_through<'a>(
    expected: &BTreeMap<String, u64>,
    seen: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>,
) -> PassThroughReport {
    let mut report = PassThroughReport {
        expected: expected.values().sum(),
        ..PassThroughReport::default()
    };
    let mut times_seen: BTreeMap<&str, Vec<u32>> = expected
        .iter()
        .map(|(k, &n)| (k.as_str(), vec![0; n as usize]))
        .collect();
    let mut highest: BTreeMap<&str, u64> = BTreeMap::new();
    for (key, value) in seen {
        report.seen += 1;
        let sequence = value
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<u64>().ok());
        let (Some(slots), Some(sequence)) = (times_seen.get_mut(key), sequence) else {
            report.foreign += 1;
            continue;
        };
        let Some(slot) = slots.get_mut(sequence as usize) else {
            report.foreign += 1;
            continue;
        };
        *slot += 1;
        if *slot > 1 {
            report.duplicated += 1;
        } else if highest.get(key).is_some_and(|&h| sequence < h) {
            report.out_of_order += 1;
        }
        let h = highest.entry(key).or_insert(sequence);
        *h = (*h).max(sequence);
    }
    report.lost = times_seen
        .values()
        .flatten()
        .filter(|&&times| times == 0)
        .count() as u64;
    report
}

/// What a count's output holds against its input.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct CountReport {
    pub keys: u64,
    /// Keys whose last count is not their number of records: (key, last
    /// count seen, records).
    pub wrong: Vec<(String, Option<i64>, u64)>,
    /// Counts that were not above the previous count of their key: a record
    /// counted twice, or a lost update.
    pub not_increasing: u64,
    /// Without a cache every update is emitted: counts 1..=n of a key that
    /// never appeared (an update lost).
    pub missing_updates: u64,
}

impl CountReport {
    pub(crate) fn exact(&self) -> bool {
        self.wrong.is_empty() && self.not_increasing == 0 && self.missing_updates == 0
    }
}

/// `expected`: records per key; `seen`: the count stream's (key, count) in
/// read order; `every_update`: whether the cache was off, so each record
/// emitted its count.
pub(crate) fn count<'a>(
    expected: &BTreeMap<String, u64>,
    seen: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    every_update: bool,
) -> CountReport {
    let mut report = CountReport {
        keys: expected.len() as u64,
        ..CountReport::default()
    };
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    let mut distinct: BTreeMap<&str, std::collections::BTreeSet<i64>> = BTreeMap::new();
    for (key, value) in seen {
        let Some(value) = value else { continue };
        if last.get(key).is_some_and(|&previous| value <= previous) {
            report.not_increasing += 1;
        }
        last.insert(key, value);
        distinct.entry(key).or_default().insert(value);
    }
    for (key, &n) in expected {
        let got = last.get(key.as_str()).copied();
        if got != Some(n as i64) {
            report.wrong.push((key.clone(), got, n));
        }
        if every_update {
            let emitted = distinct.get(key.as_str());
            report.missing_updates += (1..=n as i64)
                .filter(|c| !emitted.is_some_and(|e| e.contains(c)))
                .count() as u64;
        }
    }
    report
}

/// The latest count per key, for waiting until the output caught up.
pub(crate) fn latest_counts<'a>(
    seen: impl IntoIterator<Item = (&'a str, Option<i64>)>,
) -> BTreeMap<&'a str, i64> {
    let mut latest = BTreeMap::new();
    for (key, value) in seen {
        if let Some(value) = value {
            latest.insert(key, value);
        }
    }
    latest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expected(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    fn records<'a>(pairs: &'a [(&'a str, &'a str)]) -> Vec<(&'a str, Option<&'a [u8]>)> {
        pairs
            .iter()
            .map(|(k, v)| (*k, Some(v.as_bytes())))
            .collect()
    }

    #[test]
    fn a_pass_through_exactly_once_passes() {
        let want = expected(&[("a", 2), ("b", 1)]);
        let report = pass_through(&want, records(&[("a", "0"), ("b", "0"), ("a", "1")]));
        assert!(report.exactly_once(), "{report:?}");
        assert_eq!(report.seen, 3);
    }

    #[test]
    fn lost_duplicated_reordered_and_foreign_records_are_counted() {
        let want = expected(&[("a", 4)]);
        let report = pass_through(
            &want,
            records(&[
                ("a", "0"),
                ("a", "2"),
                ("a", "1"),
                ("a", "2"),
                ("z", "0"),
                ("a", "x"),
            ]),
        );
        assert_eq!(report.lost, 1, "a/3");
        assert_eq!(report.duplicated, 1, "a/2 again");
        assert_eq!(report.out_of_order, 1, "a/1 after a/2");
        assert_eq!(report.foreign, 2);
        assert!(!report.exactly_once());
    }

    #[test]
    fn counts_must_end_exact_and_only_grow() {
        let want = expected(&[("a", 3), ("b", 1)]);
        let good = [
            ("a", Some(1)),
            ("b", Some(1)),
            ("a", Some(2)),
            ("a", Some(3)),
        ];
        assert!(count(&want, good, true).exact());
        // With a cache, updates between commits are folded.
        assert!(count(&want, [("a", Some(3)), ("b", Some(1))], false).exact());
        let recounted = [
            ("a", Some(1)),
            ("a", Some(2)),
            ("a", Some(2)),
            ("b", Some(1)),
        ];
        let report = count(&want, recounted, true);
        assert_eq!(report.not_increasing, 1);
        assert_eq!(report.wrong, vec![("a".to_string(), Some(2), 3)]);
        assert_eq!(report.missing_updates, 1);
        let report = count(&want, [("a", Some(3))], false);
        assert_eq!(report.wrong, vec![("b".to_string(), None, 1)]);
    }
}
