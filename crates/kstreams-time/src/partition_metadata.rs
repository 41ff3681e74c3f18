//! What a task commits next to each partition's offset: Kafka Streams'
//! `TopicPartitionMetadata`, in its exact bytes, so a restarted task (here
//! or in Kafka Streams, for the same application id) resumes with the
//! partition's time and its operators' metadata.
//!
//! The committed string is base64 (standard alphabet, padded) of
//! `version (1 byte) ++ partition time (i64 BE) ++ processor metadata`,
//! version 2; the processor metadata is empty, or `count (i32 BE)` then per
//! entry `key length (i32 BE) ++ key (UTF-8) ++ value (i64 BE)`. Version 1
//! has the partition time only.

use std::collections::BTreeMap;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use kstreams_record::Timestamp;

const VERSION: u8 = 2;

/// A partition's committed metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// The largest timestamp processed from the partition (-1: none).
    pub partition_time: Timestamp,
    /// Operators' values by key (emit-final operators' last emitted close
    /// time under their store's name).
    pub processor: BTreeMap<String, i64>,
}

impl PartitionMetadata {
    /// The string committed with the offset.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(9);
        bytes.push(VERSION);
        bytes.extend_from_slice(&self.partition_time.to_be_bytes());
        if !self.processor.is_empty() {
            bytes.extend_from_slice(&(self.processor.len() as i32).to_be_bytes());
            for (key, value) in &self.processor {
                bytes.extend_from_slice(&(key.len() as i32).to_be_bytes());
                bytes.extend_from_slice(key.as_bytes());
                bytes.extend_from_slice(&value.to_be_bytes());
            }
        }
        base64_encode(&bytes)
    }

    /// Reads a committed string; `None` for an empty one or one this
    /// version does not know (logged: the task then starts without it, as
    /// Kafka Streams does).
    pub fn decode(committed: &str) -> Option<Self> {
        if committed.is_empty() {
            return None;
        }
        let decoded = base64_decode(committed).and_then(|bytes| {
            let mut reader = kstreams_record::ByteReader::new(&bytes);
            let version = reader.take(1)?[0];
            let partition_time = reader.i64()?;
            let mut processor = BTreeMap::new();
            match version {
                1 => {}
                2 if reader.is_empty() => {}
                2 => {
                    let count = reader.i32()?;
                    for _ in 0..count {
                        let len = usize::try_from(reader.i32()?).ok()?;
                        let key = String::from_utf8(reader.take(len)?.to_vec()).ok()?;
                        processor.insert(key, reader.i64()?);
                    }
                }
                _ => return None,
            }
            Some(PartitionMetadata {
                partition_time,
                processor,
            })
        });
        if decoded.is_none() {
            log::warn!("unsupported offset metadata {committed:?}: starting without it");
        }
        decoded
    }
}

/// Base64 with the standard alphabet and padding (Java's
/// `Base64.getEncoder()`).
fn base64_encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// What Java's `Base64.getDecoder()` reads: padding may be left out, as
/// kstreams has always read it.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    STANDARD_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings computed independently (Python's struct + base64,
    // which write what Java's ByteBuffer + Base64 write).
    #[test]
    fn encodes_kafka_streams_bytes() {
        let plain = PartitionMetadata {
            partition_time: 0,
            processor: BTreeMap::new(),
        };
        assert_eq!(plain.encode(), "AgAAAAAAAAAA");
        let with_close = PartitionMetadata {
            partition_time: 1_700_000_000_123,
            processor: BTreeMap::from([("counts".to_string(), 60_000)]),
        };
        assert_eq!(
            with_close.encode(),
            "AgAAAYvP5Wh7AAAAAQAAAAZjb3VudHMAAAAAAADqYA=="
        );
        assert_eq!(
            PartitionMetadata::decode(&with_close.encode()),
            Some(with_close)
        );
    }

    #[test]
    fn reads_version_one_and_rejects_what_it_does_not_know() {
        assert_eq!(
            PartitionMetadata::decode("AQAAAAAAAAAq"),
            Some(PartitionMetadata {
                partition_time: 42,
                processor: BTreeMap::new()
            })
        );
        assert_eq!(PartitionMetadata::decode(""), None);
        assert_eq!(PartitionMetadata::decode("not base64!"), None);
        // Version 3 is unknown; a truncated version 2 is refused.
        assert_eq!(PartitionMetadata::decode(&base64_encode(&[3; 9])), None);
        assert_eq!(PartitionMetadata::decode(&base64_encode(&[2, 0, 0])), None);
    }

    #[test]
    fn base64_round_trips_every_length() {
        for len in 0..40u8 {
            let bytes: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
            assert_eq!(base64_decode(&base64_encode(&bytes)), Some(bytes));
        }
    }
}
