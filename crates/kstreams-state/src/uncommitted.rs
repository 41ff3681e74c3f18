//! The writes of a transactional store (KIP-892) since its last commit.
//!
//! Under exactly-once, a RocksDB store that writes into its database
//! before the Kafka transaction commits may be left after a crash with
//! writes of a transaction that was then aborted; Kafka Streams (without
//! KIP-892) and kstreams without transactional stores therefore wipe such
//! a store and restore its whole changelog. A transactional store keeps
//! its writes here instead, in key order so that it reads its own writes,
//! and hands them to RocksDB in one batch with the changelog offsets they
//! reach only once the transaction has committed. Its database then only
//! ever holds committed states, each with its offset: after a crash the
//! task restores the changelog's tail from that offset, not the whole
//! changelog.

use std::collections::{BTreeMap, BTreeSet};
use std::iter::Peekable;
use std::ops::Bound;

use crate::engine::backend::{bounds_empty, BytesIter};
use crate::Error;

/// One write held: a value, or `None` for a delete.
type Held = Option<Vec<u8>>;

/// The uncommitted writes of one store, by keyspace, and the keyspaces
/// dropped since the last commit (whose entries in the database no longer
/// count).
#[derive(Debug, Default)]
pub(crate) struct Uncommitted {
    spaces: BTreeMap<i64, BTreeMap<Vec<u8>, Held>>,
    dropped: BTreeSet<i64>,
    bytes: usize,
}

/// What a read finds among the uncommitted writes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<'a> {
    /// A write of the key: its value, or `None` if it was deleted.
    Written(Option<&'a [u8]>),
    /// The keyspace was dropped since the last commit and the key not
    /// written again: it is absent, whatever the database holds.
    Dropped,
    /// No uncommitted write: the database answers.
    Unwritten,
}

/// What a commit writes, in order.
pub(crate) enum Drained<'a> {
    /// Every entry of a keyspace on disk goes.
    Dropped(i64),
    /// A put (`Some`) or delete (`None`) of a key in a keyspace.
    Write(i64, &'a [u8], Option<&'a [u8]>),
}

/// The memory an entry costs beyond its key and value (a map node).
const ENTRY_OVERHEAD: usize = 48;

impl Uncommitted {
    pub(crate) fn write(&mut self, ks: i64, key: &[u8], value: Option<&[u8]>) {
        let space = self.spaces.entry(ks).or_default();
        let added = key.len() + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD;
        match space.insert(key.to_vec(), value.map(<[u8]>::to_vec)) {
            Some(previous) => {
                let replaced = key.len() + previous.map_or(0, |v| v.len()) + ENTRY_OVERHEAD;
                self.bytes = self.bytes + added - replaced;
            }
            None => self.bytes += added,
        }
    }

    pub(crate) fn lookup(&self, ks: i64, key: &[u8]) -> Lookup<'_> {
        match self.spaces.get(&ks).and_then(|space| space.get(key)) {
            Some(held) => Lookup::Written(held.as_deref()),
            None if self.dropped.contains(&ks) => Lookup::Dropped,
            None => Lookup::Unwritten,
        }
    }

    /// Whether the database's entries of keyspace `ks` are hidden (the
    /// keyspace was dropped since the last commit).
    pub(crate) fn hides(&self, ks: i64) -> bool {
        self.dropped.contains(&ks)
    }

    /// Drops keyspace `ks`: its uncommitted writes go, and its entries in
    /// the database are deleted at the next commit.
    pub(crate) fn drop_keyspace(&mut self, ks: i64) {
        if let Some(space) = self.spaces.remove(&ks) {
            let freed: usize = space
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD)
                .sum();
            self.bytes -= freed;
        }
        self.dropped.insert(ks);
    }

    /// The uncommitted writes of `ks` between the bounds, in key order (or
    /// reversed), copied: a range read merges them with the database's.
    pub(crate) fn range(
        &self,
        ks: i64,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Vec<(Vec<u8>, Held)> {
        let Some(space) = self.spaces.get(&ks) else {
            return Vec::new();
        };
        if bounds_empty(from, to) {
            return Vec::new();
        }
        let range = space
            .range::<[u8], _>((from, to))
            .map(|(k, v)| (k.clone(), v.clone()));
        if reverse {
            range.rev().collect()
        } else {
            range.collect()
        }
    }

    /// The memory the writes hold (keys, values and an estimate of the
    /// map's own).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spaces.is_empty() && self.dropped.is_empty()
    }

    /// Hands everything over for the commit's batch: first each dropped
    /// keyspace, then every write by keyspace and key (a write after a
    /// drop lands after it). Afterwards nothing is held.
    pub(crate) fn drain(&mut self, mut into: impl FnMut(Drained<'_>)) {
        for ks in std::mem::take(&mut self.dropped) {
            into(Drained::Dropped(ks));
        }
        for (ks, space) in std::mem::take(&mut self.spaces) {
            for (key, value) in &space {
                into(Drained::Write(ks, key, value.as_deref()));
            }
        }
        self.bytes = 0;
    }
}

/// A range read of a transactional store: the database's entries (in the
/// range's order) merged with the uncommitted writes of the same range
/// (same order), a write winning over the database's entry of its key and
/// a delete hiding it.
pub(crate) fn merged<'a>(
    committed: BytesIter<'a>,
    written: Vec<(Vec<u8>, Held)>,
    reverse: bool,
) -> BytesIter<'a> {
    if written.is_empty() {
        return committed;
    }
    Box::new(Merged {
        committed: committed.peekable(),
        written: written.into_iter().peekable(),
        reverse,
    })
}

struct Merged<'a> {
    committed: Peekable<BytesIter<'a>>,
    written: Peekable<std::vec::IntoIter<(Vec<u8>, Held)>>,
    reverse: bool,
}

impl Iterator for Merged<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::cmp::Ordering;
        loop {
            // Less: the database's entry comes first; Equal: the write
            // answers for the database's key (overwritten or deleted);
            // Greater: the write comes first.
            let order = match (self.committed.peek(), self.written.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(Ok(_)), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(Ok((db_key, _))), Some((key, _))) => match self.reverse {
                    false => db_key.cmp(key),
                    true => key.cmp(db_key),
                },
            };
            match order {
                Ordering::Less => return self.committed.next(),
                Ordering::Equal => {
                    self.committed.next();
                }
                Ordering::Greater => {}
            }
            match self.written.next()? {
                (key, Some(value)) => return Some(Ok((key, value))),
                // A delete: nothing to yield for the key.
                (_, None) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn db(entries: &[(&[u8], &[u8])], reverse: bool) -> BytesIter<'static> {
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        if reverse {
            v.reverse();
        }
        Box::new(v.into_iter().map(Ok))
    }

    fn collect(iter: BytesIter<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
        iter.map(Result::unwrap).collect()
    }

    #[test]
    fn writes_win_over_the_database_and_deletes_hide_its_entries() {
        let mut held = Uncommitted::default();
        held.write(0, b"b", Some(b"B2"));
        held.write(0, b"c", None);
        held.write(0, b"e", Some(b"E"));
        let committed: &[(&[u8], &[u8])] =
            &[(b"a", b"A"), (b"b", b"B"), (b"c", b"C"), (b"d", b"D")];
        for reverse in [false, true] {
            let all = held.range(0, Bound::Unbounded, Bound::Unbounded, reverse);
            let mut got = collect(merged(db(committed, reverse), all, reverse));
            if reverse {
                got.reverse();
            }
            let want: Vec<(Vec<u8>, Vec<u8>)> = [("a", "A"), ("b", "B2"), ("d", "D"), ("e", "E")]
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect();
            assert_eq!(got, want, "reverse: {reverse}");
        }
    }

    #[test]
    fn a_dropped_keyspace_hides_the_database_until_written_again() {
        let mut held = Uncommitted::default();
        held.write(3, b"k", Some(b"v"));
        held.drop_keyspace(3);
        assert_eq!(held.lookup(3, b"k"), Lookup::Dropped);
        assert!(held.hides(3));
        held.write(3, b"k", Some(b"w"));
        assert_eq!(held.lookup(3, b"k"), Lookup::Written(Some(&b"w"[..])));
        assert_eq!(held.lookup(4, b"k"), Lookup::Unwritten);
        let mut order = Vec::new();
        held.drain(|drained| match drained {
            Drained::Dropped(ks) => order.push(format!("drop {ks}")),
            Drained::Write(ks, k, _) => {
                order.push(format!("put {ks} {}", String::from_utf8_lossy(k)))
            }
        });
        assert_eq!(order, ["drop 3", "put 3 k"]);
        assert!(held.is_empty());
        assert_eq!(held.bytes(), 0);
    }

    #[test]
    fn the_bytes_held_follow_overwrites_drops_and_commits() {
        let mut held = Uncommitted::default();
        held.write(0, b"key", Some(&[0; 100]));
        let one = held.bytes();
        assert!(one >= 103, "{one}");
        held.write(0, b"key", Some(&[0; 10]));
        assert_eq!(held.bytes(), one - 90);
        held.write(1, b"key", None);
        held.drop_keyspace(1);
        assert_eq!(held.bytes(), one - 90);
        held.drain(|_| {});
        assert_eq!(held.bytes(), 0);
        assert!(held.is_empty());
    }

    proptest! {
        /// A merged range read answers as one map holding the database's
        /// entries with the writes applied on top, in both directions.
        #[test]
        fn a_merged_read_equals_the_writes_applied_to_the_database(
            committed in proptest::collection::btree_map(0u8..32, 0u8..8, 0..20),
            writes in proptest::collection::vec((0u8..32, proptest::option::of(0u8..8)), 0..20),
            from in 0u8..32,
            span in 0u8..32,
            reverse: bool,
        ) {
            let to = from.saturating_add(span);
            let mut held = Uncommitted::default();
            let mut expected: BTreeMap<Vec<u8>, Vec<u8>> =
                committed.iter().map(|(k, v)| (vec![*k], vec![*v])).collect();
            for (k, v) in &writes {
                held.write(0, &[*k], v.as_ref().map(std::slice::from_ref));
                match v {
                    Some(v) => expected.insert(vec![*k], vec![*v]),
                    None => expected.remove(&vec![*k]),
                };
            }
            let (lo, hi) = (vec![from], vec![to]);
            let in_range: Vec<(Vec<u8>, Vec<u8>)> = committed
                .iter()
                .filter(|(k, _)| **k >= from && **k < to)
                .map(|(k, v)| (vec![*k], vec![*v]))
                .collect();
            let mut db_side = in_range;
            if reverse {
                db_side.reverse();
            }
            let written = held.range(0, Bound::Included(&lo), Bound::Excluded(&hi), reverse);
            let mut got = collect(merged(Box::new(db_side.into_iter().map(Ok)), written, reverse));
            if reverse {
                got.reverse();
            }
            let want: Vec<(Vec<u8>, Vec<u8>)> = expected
                .range(lo.clone()..hi.clone())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
