//! Writes a RocksDB store holds back until it next reads, and then hands
//! to RocksDB as one batch in key order.
//!
//! A cache flush writes every dirty entry of a store at once, in the order
//! they were dirtied. One `Put` each pays RocksDB's write path every time
//! (the write group, a sequence number, a one-entry batch), and inserts
//! keys in no order, so each insert searches the memtable's skip list from
//! its top. One batch pays the write path once, and keys in order let the
//! skip list start each insert where the last one ended.

use std::ops::Range;

/// Memory held (bytes and entries) before the writes go to RocksDB even
/// without a read, so that a store written without reading holds a bounded
/// amount.
pub(crate) const MAX_HELD_BYTES: usize = 4 << 20;
/// Buffer capacity kept after a batch: a store that wrote a large flush
/// gives the memory back, one that writes small batches reuses it.
const KEPT_CAPACITY: usize = 64 << 10;

/// One write held: its column family slot, and its key and value (`None`
/// deletes) as ranges of the shared buffer.
struct Held {
    family: u8,
    /// The key's first 16 bytes, zero-padded: most comparisons end here,
    /// without reaching into the buffer.
    head: u128,
    /// Arrival number: orders writes of one key.
    arrival: u32,
    key: Range<usize>,
    value: Option<Range<usize>>,
}

/// The first 16 bytes of `key` as a big-endian number, zero-padded: keys
/// compare as their heads do, unless the heads are equal.
fn head(key: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key[..n]);
    u128::from_be_bytes(bytes)
}

/// Writes held in one buffer, to be written in (family slot, key) order.
#[derive(Default)]
pub(crate) struct PendingWrites {
    bytes: Vec<u8>,
    held: Vec<Held>,
}

impl PendingWrites {
    /// Holds a write of `prefix` + `key` in the family numbered `family`
    /// (numbers chosen by the caller; batches go family by family).
    pub(crate) fn hold(&mut self, family: u8, prefix: &[u8], key: &[u8], value: Option<&[u8]>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(prefix);
        self.bytes.extend_from_slice(key);
        let key = start..self.bytes.len();
        let head = head(&self.bytes[key.clone()]);
        let arrival = self.held.len() as u32;
        let value = value.map(|v| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(v);
            start..self.bytes.len()
        });
        self.held.push(Held {
            family,
            head,
            arrival,
            key,
            value,
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The memory the held writes take: their bytes and their entries (an
    /// entry outweighs a small key and value).
    pub(crate) fn bytes_held(&self) -> usize {
        self.bytes.len() + self.held.len() * std::mem::size_of::<Held>()
    }

    /// Every held write, in (family, key) order; writes of one key keep
    /// the order they came in, so the last one wins as it would have.
    /// Afterwards nothing is held.
    pub(crate) fn drain_sorted(&mut self, mut write: impl FnMut(u8, &[u8], Option<&[u8]>)) {
        let bytes = &self.bytes;
        // Arrival breaks ties: equal keys stay in the order they came.
        self.held.sort_unstable_by(|a, b| {
            (a.family, a.head)
                .cmp(&(b.family, b.head))
                .then_with(|| bytes[a.key.clone()].cmp(&bytes[b.key.clone()]))
                .then(a.arrival.cmp(&b.arrival))
        });
        for h in &self.held {
            write(
                h.family,
                &bytes[h.key.clone()],
                h.value.clone().map(|v| &bytes[v]),
            );
        }
        self.held.clear();
        self.bytes.clear();
        self.bytes.shrink_to(KEPT_CAPACITY);
        self.held.shrink_to(KEPT_CAPACITY / 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Written = Vec<(u8, Vec<u8>, Option<Vec<u8>>)>;

    fn drain(p: &mut PendingWrites) -> Written {
        let mut out = Vec::new();
        p.drain_sorted(|f, k, v| out.push((f, k.to_vec(), v.map(<[u8]>::to_vec))));
        out
    }

    #[test]
    fn writes_come_out_by_family_then_key_with_their_prefix() {
        let mut p = PendingWrites::default();
        p.hold(1, b"P", b"b", Some(b"2"));
        p.hold(0, b"", b"z", Some(b"9"));
        p.hold(1, b"P", b"a", None);
        p.hold(0, b"", b"c", Some(b""));
        assert_eq!(p.bytes_held(), 8 + 4 * std::mem::size_of::<Held>());
        assert_eq!(
            drain(&mut p),
            vec![
                (0, b"c".to_vec(), Some(Vec::new())),
                (0, b"z".to_vec(), Some(b"9".to_vec())),
                (1, b"Pa".to_vec(), None),
                (1, b"Pb".to_vec(), Some(b"2".to_vec())),
            ]
        );
        assert!(p.is_empty());
        assert_eq!(p.bytes_held(), 0);
        assert!(drain(&mut p).is_empty());
    }

    #[test]
    fn writes_of_one_key_keep_their_order_so_the_last_wins() {
        let mut p = PendingWrites::default();
        p.hold(0, b"", b"k", Some(b"1"));
        p.hold(0, b"", b"a", Some(b"x"));
        p.hold(0, b"", b"k", None);
        p.hold(0, b"", b"k", Some(b"3"));
        let written = drain(&mut p);
        let of_k: Vec<_> = written
            .iter()
            .filter(|(_, k, _)| k == b"k")
            .map(|(_, _, v)| v.clone())
            .collect();
        assert_eq!(of_k, vec![Some(b"1".to_vec()), None, Some(b"3".to_vec())]);
        assert_eq!(written[0].1, b"a".to_vec());
    }

    #[test]
    fn keys_sharing_their_first_16_bytes_sort_by_the_rest() {
        let mut p = PendingWrites::default();
        let long = |tail: &[u8]| [[9u8; 16].as_slice(), tail].concat();
        p.hold(0, b"", &long(b"b"), Some(b"2"));
        p.hold(0, b"", &long(b""), Some(b"0"));
        p.hold(0, b"", &long(b"a\0"), Some(b"1"));
        p.hold(0, b"", b"ab", Some(b"x"));
        p.hold(0, b"", b"ab\0", Some(b"y"));
        p.hold(0, b"", b"ab", Some(b"z"));
        let written: Vec<(Vec<u8>, Vec<u8>)> = drain(&mut p)
            .into_iter()
            .map(|(_, k, v)| (k, v.unwrap()))
            .collect();
        let pair = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
        assert_eq!(
            written,
            vec![
                pair(&long(b""), b"0"),
                pair(&long(b"a\0"), b"1"),
                pair(&long(b"b"), b"2"),
                pair(b"ab", b"x"),
                pair(b"ab", b"z"),
                pair(b"ab\0", b"y"),
            ]
        );
    }

    #[test]
    fn a_large_batch_gives_its_memory_back() {
        let mut p = PendingWrites::default();
        let value = vec![7u8; 1024];
        for i in 0u32..4096 {
            // 4 096 × (4 + 1 024) bytes and the entries: over the limit.
            p.hold(0, b"", &i.to_be_bytes(), Some(&value));
        }
        assert!(p.bytes_held() > MAX_HELD_BYTES);
        assert_eq!(drain(&mut p).len(), 4096);
        assert!(p.bytes.capacity() <= KEPT_CAPACITY);
    }
}
