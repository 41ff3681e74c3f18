//! Byte formats: Kafka Streams' (changelog keys and values, windowed keys)
//! and the engines' own ordered layouts.
//!
//! The Kafka Streams formats are written exactly as its `WindowKeySchema`,
//! `SessionKeySchema` and `ValueAndTimestampSerializer` write them, so a
//! changelog written here restores in Kafka Streams and the other way round:
//!
//! | what | bytes |
//! |---|---|
//! | window store changelog key | `key ++ window start (8, BE) ++ sequence number (4, BE)` |
//! | windowed key (time windows, output topics) | `key ++ window start (8, BE)` |
//! | session store changelog key, session windowed key | `key ++ end (8, BE) ++ start (8, BE)` |
//! | timestamped store value | `timestamp (8, BE) ++ value` |
//!
//! Inside the engines, window, session and versioned keys are laid out so
//! that byte order is (key, time) order with no key a prefix of another's
//! layout: key bytes with `0x00` escaped as `0x00 0xFF` and ended by
//! `0x00 0x01`, then timestamps with the sign bit flipped. Changelogs never
//! see that layout.

use crate::Timestamp;

/// Bytes of a window store changelog key: `key ++ start ++ seqnum`.
pub fn window_store_key(key: &[u8], window_start: Timestamp, seqnum: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 12);
    out.extend_from_slice(key);
    out.extend_from_slice(&window_start.to_be_bytes());
    out.extend_from_slice(&seqnum.to_be_bytes());
    out
}

/// Splits a window store changelog key into key, window start and seqnum.
pub fn parse_window_store_key(bytes: &[u8]) -> Option<(&[u8], Timestamp, u32)> {
    let key_len = bytes.len().checked_sub(12)?;
    let (key, rest) = bytes.split_at(key_len);
    let start = i64::from_be_bytes(rest[..8].try_into().ok()?);
    let seq = u32::from_be_bytes(rest[8..].try_into().ok()?);
    Some((key, start, seq))
}

/// Bytes of a time-windowed key on a topic (Kafka's `TimeWindowedSerializer`):
/// `key ++ start`.
pub fn windowed_key(key: &[u8], window_start: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 8);
    out.extend_from_slice(key);
    out.extend_from_slice(&window_start.to_be_bytes());
    out
}

/// Splits a time-windowed key into key and window start.
pub fn parse_windowed_key(bytes: &[u8]) -> Option<(&[u8], Timestamp)> {
    let key_len = bytes.len().checked_sub(8)?;
    let (key, rest) = bytes.split_at(key_len);
    Some((key, i64::from_be_bytes(rest.try_into().ok()?)))
}

/// Bytes of a session key (changelog and topics): `key ++ end ++ start`.
pub fn session_key(key: &[u8], start: Timestamp, end: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 16);
    out.extend_from_slice(key);
    out.extend_from_slice(&end.to_be_bytes());
    out.extend_from_slice(&start.to_be_bytes());
    out
}

/// Splits a session key into key, start and end.
pub fn parse_session_key(bytes: &[u8]) -> Option<(&[u8], Timestamp, Timestamp)> {
    let key_len = bytes.len().checked_sub(16)?;
    let (key, rest) = bytes.split_at(key_len);
    let end = i64::from_be_bytes(rest[..8].try_into().ok()?);
    let start = i64::from_be_bytes(rest[8..].try_into().ok()?);
    Some((key, start, end))
}

/// A timestamped store value: `timestamp ++ value`.
pub fn value_and_timestamp(value: &[u8], timestamp: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 8);
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Splits a timestamped store value into value and timestamp.
pub fn parse_value_and_timestamp(bytes: &[u8]) -> Option<(&[u8], Timestamp)> {
    if bytes.len() < 8 {
        return None;
    }
    let (ts, value) = bytes.split_at(8);
    Some((value, i64::from_be_bytes(ts.try_into().ok()?)))
}

// ---- the engines' ordered layout ----

/// Appends `key` escaped so that byte order of the output is the byte order
/// of keys and no output is a prefix of another.
pub(crate) fn push_ordered_key(out: &mut Vec<u8>, key: &[u8]) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Reads an escaped key; returns it and the rest of the bytes.
pub(crate) fn read_ordered_key(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut key = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == 0 {
            match bytes.get(i + 1)? {
                0xFF => key.push(0),
                0x01 => return Some((key, &bytes[i + 2..])),
                _ => return None,
            }
            i += 2;
        } else {
            key.push(b);
            i += 1;
        }
    }
    None
}

/// A timestamp whose big-endian bytes sort like the number.
pub(crate) fn push_ordered_ts(out: &mut Vec<u8>, ts: Timestamp) {
    out.extend_from_slice(&((ts as u64) ^ (1 << 63)).to_be_bytes());
}

pub(crate) fn read_ordered_ts(bytes: &[u8]) -> Option<(Timestamp, &[u8])> {
    if bytes.len() < 8 {
        return None;
    }
    let (ts, rest) = bytes.split_at(8);
    let raw = u64::from_be_bytes(ts.try_into().ok()?);
    Some(((raw ^ (1 << 63)) as i64, rest))
}

/// The ordered prefix of every layout entry of `key`.
pub(crate) fn ordered_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 20);
    push_ordered_key(&mut out, key);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn window_key_matches_kafka_layout() {
        // WindowKeySchema.toStoreKeyBinary("a", 1, 2)
        assert_eq!(
            window_store_key(b"a", 1, 2),
            vec![b'a', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]
        );
        assert_eq!(
            parse_window_store_key(&window_store_key(b"ab", 7, 9)),
            Some((&b"ab"[..], 7, 9))
        );
        assert_eq!(parse_window_store_key(b"short"), None);
    }

    #[test]
    fn session_key_puts_end_before_start() {
        // SessionKeySchema.toBinary(Windowed("k", SessionWindow(3, 5)))
        assert_eq!(
            session_key(b"k", 3, 5),
            vec![b'k', 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3]
        );
        assert_eq!(
            parse_session_key(&session_key(b"", 3, 5)),
            Some((&b""[..], 3, 5))
        );
    }

    #[test]
    fn value_and_timestamp_leads_with_the_timestamp() {
        assert_eq!(
            value_and_timestamp(b"v", 258),
            vec![0, 0, 0, 0, 0, 0, 1, 2, b'v']
        );
        assert_eq!(
            parse_value_and_timestamp(&[0, 0, 0, 0, 0, 0, 1, 2]),
            Some((&b""[..], 258))
        );
    }

    proptest! {
        #[test]
        fn ordered_layout_sorts_by_key_then_time(
            a in proptest::collection::vec(0u8..3, 0..4), ta in any::<i64>(),
            b in proptest::collection::vec(0u8..3, 0..4), tb in any::<i64>(),
        ) {
            let enc = |k: &[u8], t: i64| {
                let mut out = ordered_key(k);
                push_ordered_ts(&mut out, t);
                out
            };
            prop_assert_eq!(enc(&a, ta).cmp(&enc(&b, tb)), (&a, ta).cmp(&(&b, tb)));
            let e = enc(&a, ta);
            let (k, rest) = read_ordered_key(&e).unwrap();
            prop_assert_eq!(&k, &a);
            prop_assert_eq!(read_ordered_ts(rest).unwrap().0, ta);
        }
    }
}
