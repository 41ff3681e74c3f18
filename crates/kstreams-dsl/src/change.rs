//! `Change`: a table update (new and old value), what crosses the edges
//! between table operators, and its serde for repartition topics.

use kstreams_record::{Headers, Serde, SerdeError, SharedSerde};

/// A table update: the value a key has now and, when a downstream operator
/// asked for it, the value it had before. `None` is absent (a tombstone).
/// Kafka Streams' `Change`; it is what crosses the edges between table
/// operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change<V> {
    /// The value now.
    pub new_value: Option<V>,
    /// The value before (only when old values are sent).
    pub old_value: Option<V>,
}

impl<V> Change<V> {
    /// An update from `old_value` to `new_value`.
    pub fn new(new_value: Option<V>, old_value: Option<V>) -> Self {
        Change {
            new_value,
            old_value,
        }
    }
}

/// A serde for table changes on a repartition topic, in the layout of
/// Kafka Streams' `ChangedSerializer`/`ChangedDeserializer` (4.4), so a
/// repartition topic written by one is read by the other. The last byte
/// says what precedes it:
///
/// - `0`: the old value's bytes; `1`: the new value's bytes;
/// - `2`: the new value's length (a zig-zag varint), the new value's bytes,
///   the old value's bytes;
/// - `3`, `4`, `5`: as `0`, `1`, `2` with an `isLatest` byte (0 or 1,
///   KIP-914) before the flag. Kafka Streams reads these but writes only
///   `0` to `2`, and so does kstreams; `isLatest` only matters to versioned
///   tables, whose out-of-order rows never reach a repartition topic.
pub(crate) struct ChangeSerde<V>(pub SharedSerde<V>);

impl<V: 'static> Serde<Change<V>> for ChangeSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Change<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut part = |v: &Option<V>| -> Result<Option<Vec<u8>>, SerdeError> {
            match v {
                Some(v) => self.0.serialize(topic, headers, v),
                None => Ok(None),
            }
        };
        let new_bytes = part(&value.new_value)?;
        let old_bytes = part(&value.old_value)?;
        let out = match (new_bytes, old_bytes) {
            (Some(new), Some(old)) => {
                let len = i32::try_from(new.len()).map_err(|_| SerdeError::Custom {
                    topic: topic.to_string(),
                    message: "a table value over 2 GiB".to_string(),
                })?;
                let mut out = Vec::with_capacity(5 + new.len() + old.len() + 1);
                write_zigzag_varint(len, &mut out);
                out.extend_from_slice(&new);
                out.extend_from_slice(&old);
                out.push(2);
                out
            }
            (Some(mut new), None) => {
                new.push(1);
                new
            }
            (None, Some(mut old)) => {
                old.push(0);
                old
            }
            (None, None) => {
                return Err(SerdeError::Custom {
                    topic: topic.to_string(),
                    message: "both old and new values of a table change are null".to_string(),
                })
            }
        };
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Change<V>, SerdeError> {
        let malformed = |what: &str| SerdeError::Custom {
            topic: topic.to_string(),
            message: format!("malformed table change on a repartition topic: {what}"),
        };
        let bytes = bytes.ok_or_else(|| malformed("null"))?;
        let (&flag, body) = bytes.split_last().ok_or_else(|| malformed("empty"))?;
        let body = match flag {
            0..=2 => body,
            3..=5 => match body.split_last() {
                Some((0 | 1, body)) => body,
                _ => return Err(malformed("isLatest is neither 0 nor 1")),
            },
            other => return Err(malformed(&format!("unknown encoding flag {other}"))),
        };
        let (new_bytes, old_bytes) = match flag % 3 {
            0 => (None, Some(body)),
            1 => (Some(body), None),
            _ => {
                let (len, rest) = read_zigzag_varint(body).ok_or_else(|| malformed("length"))?;
                let len = usize::try_from(len).map_err(|_| malformed("negative length"))?;
                if rest.len() < len {
                    return Err(malformed("length past the end"));
                }
                let (new, old) = rest.split_at(len);
                (Some(new), Some(old))
            }
        };
        let part = |b: Option<&[u8]>| -> Result<Option<V>, SerdeError> {
            match b {
                Some(b) => Ok(Some(self.0.deserialize(topic, headers, Some(b))?)),
                None => Ok(None),
            }
        };
        let new_value = part(new_bytes)?;
        let old_value = part(old_bytes)?;
        Ok(Change::new(new_value, old_value))
    }
}

/// Kafka's `ByteUtils.writeVarint`: zig-zag, then 7 bits a byte, low first.
fn write_zigzag_varint(value: i32, out: &mut Vec<u8>) {
    let mut v = ((value << 1) ^ (value >> 31)) as u32;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Kafka's `ByteUtils.readVarint` and the bytes after it.
fn read_zigzag_varint(bytes: &[u8]) -> Option<(i32, &[u8])> {
    let mut v: u32 = 0;
    for (i, &b) in bytes.iter().enumerate().take(5) {
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let value = ((v >> 1) as i32) ^ -((v & 1) as i32);
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kstreams_record::StringSerde;

    use super::*;

    fn serde() -> ChangeSerde<String> {
        ChangeSerde(Arc::new(StringSerde))
    }

    fn write(new: Option<&str>, old: Option<&str>) -> Vec<u8> {
        let change = Change::new(new.map(str::to_string), old.map(str::to_string));
        serde()
            .serialize("t", &mut Headers::new(), &change)
            .unwrap()
            .unwrap()
    }

    fn read(bytes: &[u8]) -> Change<String> {
        serde()
            .deserialize("t", &Headers::new(), Some(bytes))
            .unwrap()
    }

    #[test]
    fn writes_kafka_layouts() {
        assert_eq!(write(Some("ab"), None), b"ab\x01");
        assert_eq!(write(None, Some("ab")), b"ab\x00");
        // 3 as a zig-zag varint is 6.
        assert_eq!(write(Some("new"), Some("ol")), b"\x06newol\x02");
        assert!(serde()
            .serialize("t", &mut Headers::new(), &Change::new(None, None))
            .is_err());
        let long = "x".repeat(200);
        let bytes = write(Some(&long), Some("o"));
        // 200 zig-zagged is 400: 0x90 0x03.
        assert_eq!(&bytes[..2], &[0x90, 0x03]);
        assert_eq!(read(&bytes), Change::new(Some(long), Some("o".to_string())));
    }

    #[test]
    fn reads_every_flag_kafka_reads() {
        let both = Change::new(Some("new".to_string()), Some("ol".to_string()));
        assert_eq!(read(b"\x06newol\x02"), both);
        assert_eq!(read(b"\x06newol\x01\x05"), both);
        assert_eq!(
            read(b"ab\x00\x03"),
            Change::new(None, Some("ab".to_string()))
        );
        assert_eq!(
            read(b"ab\x01\x04"),
            Change::new(Some("ab".to_string()), None)
        );
        assert_eq!(read(b"\x01"), Change::new(Some(String::new()), None));
        for bad in [&b""[..], b"ab\x02\x04", b"ab\x06", b"\x20ab\x02"] {
            assert!(serde()
                .deserialize("t", &Headers::new(), Some(bad))
                .is_err());
        }
    }
}
