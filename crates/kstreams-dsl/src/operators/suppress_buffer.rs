//! The suppression buffer's entries and their bytes: Kafka Streams 4.4's
//! `InMemoryTimeOrderedKeyValueChangeBuffer` changelog format, version 3
//! (records marked with the header `v` = 3), so that either side restores
//! the other's buffer.
//!
//! Value bytes: the record context of the latest update (`ProcessorRecordContext`:
//! timestamp i64, offset i64, topic as i32 length and UTF-8, partition
//! i32, header count i32 and per header its key and value, each an i32
//! length, -1 for a null value, and the bytes), then the `BufferValue`
//! (prior value, old value, new value, each an i32 length, -1 for none, and
//! the bytes; an old value equal to the prior one is written as length -2
//! and no bytes), then the buffer time (i64). All big-endian.
//!
//! Entries kstreams wrote before (time, record timestamp and size as i64,
//! new and prior value, optional headers) are still read: a value that is
//! not exactly one version-3 entry is read in that layout.

use kstreams_record::{ByteReader, Headers, Serde, SerdeError, SharedSerde, Timestamp};
use kstreams_state::ChangelogHeader;

/// The headers of every buffer changelog record, as Kafka Streams writes
/// them.
pub(crate) const BUFFER_CHANGELOG_HEADERS: &[ChangelogHeader] = &[("v", &[3])];

/// Where the latest buffered update of a key came from (Kafka Streams'
/// `ProcessorRecordContext`): its emission gets the timestamp and headers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BufferedContext {
    pub(crate) timestamp: Timestamp,
    pub(crate) offset: i64,
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) headers: Headers,
}

/// A buffered update.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Buffered<V> {
    /// When it is due (its place in the buffer).
    pub(crate) time: Timestamp,
    pub(crate) context: BufferedContext,
    /// The value before the key's first buffered update: what downstream
    /// last saw.
    pub(crate) prior_value: Option<V>,
    /// The latest update's old value, emitted as the old one (as Kafka
    /// Streams' buffer does).
    pub(crate) old_value: Option<V>,
    pub(crate) new_value: Option<V>,
}

/// An entry's serialized parts, as Kafka Streams' `BufferValue` holds them.
struct Parts {
    prior: Option<Vec<u8>>,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
}

impl Parts {
    /// Whether the old value is written as "same as prior".
    fn old_is_prior(&self) -> bool {
        self.old.is_some() && self.old == self.prior
    }
}

/// The buffer store's value serde.
pub(crate) struct BufferedSerde<V>(pub(crate) SharedSerde<V>);

impl<V: 'static> BufferedSerde<V> {
    fn parts(&self, topic: &str, value: &Buffered<V>) -> Result<Parts, SerdeError> {
        let mut headers = value.context.headers.clone();
        let mut bytes = |v: &Option<V>| match v {
            Some(v) => self.0.serialize(topic, &mut headers, v),
            None => Ok(None),
        };
        Ok(Parts {
            prior: bytes(&value.prior_value)?,
            old: bytes(&value.old_value)?,
            new: bytes(&value.new_value)?,
        })
    }

    /// What Kafka Streams counts of an entry against the buffer's byte
    /// bound (`computeRecordSize`): the time, the key, the values (the old
    /// one only if it differs from the prior one) and the record context.
    pub(crate) fn size(
        &self,
        topic: &str,
        key: &[u8],
        value: &Buffered<V>,
    ) -> Result<u64, SerdeError> {
        let parts = self.parts(topic, value)?;
        let len = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, Vec::len);
        let old = if parts.old_is_prior() {
            0
        } else {
            len(&parts.old)
        };
        let context = &value.context;
        // Java counts a string's UTF-16 units (`toCharArray().length`).
        let chars = |s: &str| s.encode_utf16().count();
        let headers: usize = context
            .headers
            .iter()
            .map(|h| chars(&h.key) + h.value.as_ref().map_or(0, Vec::len))
            .sum();
        let size = 8 + key.len() + len(&parts.prior) + old + len(&parts.new);
        Ok((size + 8 + 8 + chars(&context.topic) + 4 + headers) as u64)
    }
}

fn put_part(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// Headers as `ProcessorRecordContext` writes them: per header its key
/// and its value, each an i32 length (-1: null value) and the bytes.
fn read_headers(r: &mut ByteReader<'_>, count: i32) -> Option<Headers> {
    let mut headers = Headers::new();
    for _ in 0..count {
        let key = std::str::from_utf8(r.nullable_part()??).ok()?.to_string();
        headers.add(key, r.nullable_part()?.map(<[u8]>::to_vec));
    }
    Some(headers)
}

/// A version-3 entry's pieces, still as bytes.
struct Kafka<'a> {
    context: BufferedContext,
    prior: Option<&'a [u8]>,
    old: Option<&'a [u8]>,
    new: Option<&'a [u8]>,
    time: Timestamp,
}

fn read_kafka(bytes: &[u8]) -> Option<Kafka<'_>> {
    let mut r = ByteReader::new(bytes);
    let timestamp = r.i64()?;
    let offset = r.i64()?;
    let topic = std::str::from_utf8(r.nullable_part()??).ok()?.to_string();
    let partition = r.i32()?;
    let count = r.i32()?;
    // Kafka Streams writes -1 for no headers in an older context layout.
    let headers = if count == -1 {
        Headers::new()
    } else {
        read_headers(&mut r, count)?
    };
    let prior = r.nullable_part()?;
    let old = match r.i32()? {
        -2 => prior,
        -1 => None,
        n if n >= 0 => Some(r.take(n as usize)?),
        _ => return None,
    };
    let new = r.nullable_part()?;
    let time = r.i64()?;
    r.is_empty().then_some(Kafka {
        context: BufferedContext {
            timestamp,
            offset,
            topic,
            partition,
            headers,
        },
        prior,
        old,
        new,
        time,
    })
}

/// An entry in kstreams' earlier layout: time, record timestamp, size, new
/// value, prior value, then optionally the headers.
fn read_earlier(bytes: &[u8]) -> Option<Kafka<'_>> {
    let mut r = ByteReader::new(bytes);
    let (time, timestamp, _size) = (r.i64()?, r.i64()?, r.i64()?);
    let new = r.nullable_part()?;
    let prior = r.nullable_part()?;
    let headers = if r.is_empty() {
        Headers::new()
    } else {
        let count = r.i32()?;
        read_headers(&mut r, count)?
    };
    r.is_empty().then_some(Kafka {
        context: BufferedContext {
            timestamp,
            offset: -1,
            topic: String::new(),
            partition: -1,
            headers,
        },
        prior,
        // Those versions emitted the prior value as the old one.
        old: prior,
        new,
        time,
    })
}

impl<V: 'static> Serde<Buffered<V>> for BufferedSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        _headers: &mut Headers,
        value: &Buffered<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let parts = self.parts(topic, value)?;
        let context = &value.context;
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&context.timestamp.to_be_bytes());
        out.extend_from_slice(&context.offset.to_be_bytes());
        put_part(&mut out, Some(context.topic.as_bytes()));
        out.extend_from_slice(&context.partition.to_be_bytes());
        out.extend_from_slice(&(context.headers.len() as i32).to_be_bytes());
        for header in context.headers.iter() {
            put_part(&mut out, Some(header.key.as_bytes()));
            put_part(&mut out, header.value.as_deref());
        }
        put_part(&mut out, parts.prior.as_deref());
        if parts.old_is_prior() {
            out.extend_from_slice(&(-2i32).to_be_bytes());
        } else {
            put_part(&mut out, parts.old.as_deref());
        }
        put_part(&mut out, parts.new.as_deref());
        out.extend_from_slice(&value.time.to_be_bytes());
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        _headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Buffered<V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed suppression buffer entry".to_string(),
        };
        let bytes = bytes.ok_or_else(malformed)?;
        let entry = read_kafka(bytes)
            .or_else(|| read_earlier(bytes))
            .ok_or_else(malformed)?;
        let headers = &entry.context.headers;
        let value = |b: Option<&[u8]>| match b {
            Some(b) => self.0.deserialize(topic, headers, Some(b)).map(Some),
            None => Ok(None),
        };
        Ok(Buffered {
            time: entry.time,
            prior_value: value(entry.prior)?,
            old_value: value(entry.old)?,
            new_value: value(entry.new)?,
            context: entry.context,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kstreams_record::{Headers, I64Serde, Serde, StringSerde};

    use super::*;

    fn serde() -> BufferedSerde<i64> {
        BufferedSerde(Arc::new(I64Serde))
    }

    fn context(headers: Headers) -> BufferedContext {
        BufferedContext {
            timestamp: 7,
            offset: 42,
            topic: "in".to_string(),
            partition: 3,
            headers,
        }
    }

    #[test]
    fn entries_are_kafka_streams_version_3_bytes() {
        let entry = Buffered {
            time: 10,
            context: context(Headers::new().with("h", "x")),
            prior_value: Some(1),
            old_value: Some(1),
            new_value: Some(2),
        };
        let bytes = serde()
            .serialize("t", &mut Headers::new(), &entry)
            .unwrap()
            .unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(&7i64.to_be_bytes());
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 2, b'i', b'n']);
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, b'h', 0, 0, 0, 1, b'x']);
        want.extend_from_slice(&8i32.to_be_bytes());
        want.extend_from_slice(&1i64.to_be_bytes());
        // The old value equals the prior one: -2, no bytes.
        want.extend_from_slice(&(-2i32).to_be_bytes());
        want.extend_from_slice(&8i32.to_be_bytes());
        want.extend_from_slice(&2i64.to_be_bytes());
        want.extend_from_slice(&10i64.to_be_bytes());
        assert_eq!(bytes, want);
        let back = serde()
            .deserialize("t", &Headers::new(), Some(&bytes))
            .unwrap();
        assert_eq!(back, entry);
        // Kafka Streams' size: time 8, key 1, prior 8, new 8 (old = prior),
        // context 8 + 8 + "in" 2 + 4 + "h" 1 + "x" 1.
        assert_eq!(serde().size("t", b"k", &entry).unwrap(), 8 + 1 + 16 + 24);
    }

    #[test]
    fn entries_round_trip_with_every_value_missing_or_different() {
        for (prior, old, new) in [
            (None, None, None),
            (None, Some(5), Some(6)),
            (Some(4), Some(5), None),
            (Some(4), None, Some(6)),
        ] {
            let mut headers = Headers::new();
            headers.add("null", None::<Vec<u8>>);
            let entry = Buffered {
                time: -3,
                context: context(headers),
                prior_value: prior,
                old_value: old,
                new_value: new,
            };
            let bytes = serde().serialize("t", &mut Headers::new(), &entry).unwrap();
            let back = serde()
                .deserialize("t", &Headers::new(), bytes.as_deref())
                .unwrap();
            assert_eq!(back, entry);
        }
        let strings = BufferedSerde::<String>(Arc::new(StringSerde));
        let entry = Buffered {
            time: 1,
            context: context(Headers::new()),
            prior_value: Some(String::new()),
            old_value: Some("é".to_string()),
            new_value: Some("z".to_string()),
        };
        let bytes = strings.serialize("t", &mut Headers::new(), &entry).unwrap();
        assert_eq!(
            strings
                .deserialize("t", &Headers::new(), bytes.as_deref())
                .unwrap(),
            entry
        );
    }

    #[test]
    fn entries_kstreams_wrote_before_are_still_read() {
        let mut earlier = Vec::new();
        for n in [10i64, 7, 33] {
            earlier.extend_from_slice(&n.to_be_bytes());
        }
        earlier.extend_from_slice(&8i32.to_be_bytes());
        earlier.extend_from_slice(&2i64.to_be_bytes());
        earlier.extend_from_slice(&(-1i32).to_be_bytes());
        let back = serde()
            .deserialize("t", &Headers::new(), Some(&earlier))
            .unwrap();
        assert_eq!((back.time, back.context.timestamp), (10, 7));
        assert_eq!(
            (back.new_value, back.prior_value, back.old_value),
            (Some(2), None, None)
        );
        assert!(back.context.headers.is_empty());
        // With headers, as the last layout wrote them.
        let mut with_headers = earlier.clone();
        with_headers.extend_from_slice(&1i32.to_be_bytes());
        with_headers.extend_from_slice(&[0, 0, 0, 1, b'h', 0, 0, 0, 1, b'x']);
        let back = serde()
            .deserialize("t", &Headers::new(), Some(&with_headers))
            .unwrap();
        assert_eq!(back.context.headers, Headers::new().with("h", "x"));
        // A truncated entry is an error, not a panic.
        earlier.extend_from_slice(&1i32.to_be_bytes());
        assert!(serde()
            .deserialize("t", &Headers::new(), Some(&earlier))
            .is_err());
    }
}
