//! The bytes of a stream-stream outer (or left) join's shared store of
//! unmatched records, as Kafka Streams 4.4 writes them to the store and its
//! changelog, so that an application moved between the two resumes its
//! unmatched records:
//!
//! - key (`TimestampedKeyAndJoinSideSerializer`): the record's timestamp
//!   (8 bytes, big-endian), a side byte (1 left, 0 right), the raw key;
//! - value (`ListValueStore` over `LeftOrRightValueSerializer`): every
//!   record of that key, side and timestamp, as `Serdes.ListSerde` of byte
//!   arrays writes them: a strategy byte (1, variable size), a 4-byte count,
//!   then per entry a 4-byte length and the entry; an entry is a side byte
//!   (1 left, 0 right) and the value's bytes.
//!
//! The changelog carries the whole list after each append and a tombstone
//! when the key's records are emitted or matched.

use kstreams_record::Timestamp;

/// `ListSerializer`'s strategy byte for an inner serde without a fixed size.
const VARIABLE_SIZE: u8 = 1;

/// The store key of one (timestamp, side, key): timestamp first, so the
/// store's order is time order.
pub(crate) fn outer_key(timestamp: Timestamp, left: bool, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + key.len());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.push(u8::from(left));
    out.extend_from_slice(key);
    out
}

/// A store key's parts: timestamp, side (true: left) and the raw key.
pub(crate) fn parse_outer_key(bytes: &[u8]) -> Option<(Timestamp, bool, &[u8])> {
    let timestamp = Timestamp::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let left = match *bytes.get(8)? {
        1 => true,
        0 => false,
        _ => return None,
    };
    Some((timestamp, left, &bytes[9..]))
}

/// One unmatched record's value with its side flag (`LeftOrRightValue`).
pub(crate) fn side_value(left: bool, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + value.len());
    out.push(u8::from(left));
    out.extend_from_slice(value);
    out
}

/// An entry's side (true: left) and value bytes.
pub(crate) fn parse_side_value(bytes: &[u8]) -> Option<(bool, &[u8])> {
    let (&side, value) = bytes.split_first()?;
    match side {
        1 => Some((true, value)),
        0 => Some((false, value)),
        _ => None,
    }
}

/// The list `existing` (a stored value, or none) with `entry` appended.
pub(crate) fn append_entry(existing: Option<&[u8]>, entry: &[u8]) -> Option<Vec<u8>> {
    let mut entries = match existing {
        Some(bytes) => parse_list(bytes)?,
        None => Vec::new(),
    };
    entries.push(entry);
    Some(encode_list(&entries))
}

/// `Serdes.ListSerde(ArrayList, ByteArray)`'s bytes of `entries`.
pub(crate) fn encode_list(entries: &[&[u8]]) -> Vec<u8> {
    let len: usize = entries.iter().map(|e| 4 + e.len()).sum();
    let mut out = Vec::with_capacity(5 + len);
    out.push(VARIABLE_SIZE);
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for entry in entries {
        out.extend_from_slice(&(entry.len() as i32).to_be_bytes());
        out.extend_from_slice(entry);
    }
    out
}

/// The entries of a stored list; `None` unless the bytes are exactly one
/// list of non-null entries.
pub(crate) fn parse_list(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    if *bytes.first()? != VARIABLE_SIZE {
        return None;
    }
    let count = i32::from_be_bytes(bytes.get(1..5)?.try_into().ok()?);
    let mut rest = &bytes[5..];
    let mut entries = Vec::with_capacity(usize::try_from(count).ok()?.min(rest.len() / 4));
    for _ in 0..count {
        let len = i32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
        // Kafka writes -1 for a null entry; the join never stores one.
        let len = usize::try_from(len).ok()?;
        let entry = rest.get(4..4 + len)?;
        entries.push(entry);
        rest = &rest[4 + len..];
    }
    rest.is_empty().then_some(entries)
}

/// An entry in the layout kstreams 0.1 wrote before it took Kafka's: key = timestamp, side, 4-byte key
/// length, key, 8-byte sequence number; value = the raw value. Returns the
/// Kafka layout's key and entry for it, so a store restored from an old
/// changelog is rewritten rather than misread.
pub(crate) fn legacy_entry(key: &[u8], value: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let (timestamp, left, rest) = parse_outer_key(key)?;
    let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    if rest.len() != 4 + len + 8 {
        return None;
    }
    // A Kafka-layout entry whose raw key merely looks like an old one has
    // a well-formed list of side-flagged entries as its value.
    if parse_list(value).is_some_and(|entries| {
        entries
            .iter()
            .all(|entry| parse_side_value(entry).is_some_and(|(side, _)| side == left))
    }) {
        return None;
    }
    Some((
        outer_key(timestamp, left, &rest[4..4 + len]),
        side_value(left, value),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_timestamp_side_and_raw_key() {
        let key = outer_key(1000, true, b"k1");
        assert_eq!(key, [0, 0, 0, 0, 0, 0, 3, 232, 1, b'k', b'1']);
        assert_eq!(parse_outer_key(&key), Some((1000, true, &b"k1"[..])));
        assert_eq!(outer_key(5, false, b"")[8], 0);
    }

    #[test]
    fn list_appends_and_reads_back() {
        let one = append_entry(None, &side_value(true, b"a")).unwrap();
        assert_eq!(one, [1, 0, 0, 0, 1, 0, 0, 0, 2, 1, b'a']);
        let two = append_entry(Some(&one), &side_value(true, b"bc")).unwrap();
        let entries = parse_list(&two).unwrap();
        assert_eq!(entries, vec![&[1, b'a'][..], &[1, b'b', b'c'][..]]);
        assert_eq!(parse_side_value(entries[1]), Some((true, &b"bc"[..])));
        assert!(parse_list(&two[..two.len() - 1]).is_none());
        assert!(parse_list(&[0, 0, 0, 0, 0]).is_none());
    }

    #[test]
    fn legacy_entries_are_rewritten_and_kafka_ones_left_alone() {
        let mut old_key = 7i64.to_be_bytes().to_vec();
        old_key.push(0);
        old_key.extend_from_slice(&2u32.to_be_bytes());
        old_key.extend_from_slice(b"ab");
        old_key.extend_from_slice(&3u64.to_be_bytes());
        let (key, entry) = legacy_entry(&old_key, b"v").unwrap();
        assert_eq!(key, outer_key(7, false, b"ab"));
        assert_eq!(entry, side_value(false, b"v"));
        let list = encode_list(&[&side_value(false, b"v")]);
        assert!(legacy_entry(&old_key, &list).is_none());
        assert!(legacy_entry(&outer_key(7, false, b"ab"), &list).is_none());
    }
}
