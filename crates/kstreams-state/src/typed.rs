//! What typed stores share: serdes bound to a store, the timestamped value
//! type and its serde.

use std::sync::Arc;

use kstreams_record::{Headers, Serde, SerdeError, SharedSerde};

use crate::{Error, Timestamp};

/// A value with the timestamp of the record that last set it: Kafka
/// Streams' `ValueAndTimestamp`, what timestamped stores hold. In bytes it
/// is `timestamp (8 bytes, BE) ++ value`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ValueAndTimestamp<V> {
    /// The value.
    pub value: V,
    /// The timestamp.
    pub timestamp: Timestamp,
}

impl<V> ValueAndTimestamp<V> {
    /// A value at a timestamp.
    pub fn make(value: V, timestamp: Timestamp) -> Self {
        ValueAndTimestamp { value, timestamp }
    }
}

/// The serde of [`ValueAndTimestamp`] around the value's serde (Kafka
/// Streams' `ValueAndTimestampSerde`).
pub struct ValueAndTimestampSerde<V>(pub SharedSerde<V>);

impl<V: 'static> Serde<ValueAndTimestamp<V>> for ValueAndTimestampSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &ValueAndTimestamp<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(self
            .0
            .serialize(topic, headers, &value.value)?
            .map(|raw| crate::format::value_and_timestamp(&raw, value.timestamp)))
    }
    /// In place, as the caches and changelogs of timestamped stores write
    /// every value: no buffer of its own for the inner value.
    fn serialize_into(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &ValueAndTimestamp<V>,
        out: &mut Vec<u8>,
    ) -> Result<bool, SerdeError> {
        let start = out.len();
        out.extend_from_slice(&value.timestamp.to_be_bytes());
        match self.0.serialize_into(topic, headers, &value.value, out) {
            Ok(true) => Ok(true),
            written => {
                out.truncate(start);
                written
            }
        }
    }
    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<ValueAndTimestamp<V>, SerdeError> {
        let bytes = bytes.ok_or_else(|| SerdeError::UnexpectedNull {
            topic: topic.to_string(),
            type_name: std::any::type_name::<ValueAndTimestamp<V>>(),
        })?;
        let (raw, timestamp) =
            crate::format::parse_value_and_timestamp(bytes).ok_or_else(|| SerdeError::Custom {
                topic: topic.to_string(),
                message: format!(
                    "a timestamped value needs at least 8 bytes, got {}",
                    bytes.len()
                ),
            })?;
        Ok(ValueAndTimestamp {
            value: self.0.deserialize(topic, headers, Some(raw))?,
            timestamp,
        })
    }
}

/// A key serde and a value serde, bound to a store: errors name the store,
/// and serdes see the changelog topic as their topic, as in Kafka Streams.
pub(crate) struct StoreSerdes<K, V> {
    pub(crate) store: String,
    pub(crate) topic: String,
    key: SharedSerde<K>,
    value: SharedSerde<V>,
    headers: Headers,
}

impl<K: 'static, V: 'static> StoreSerdes<K, V> {
    pub(crate) fn new(store: &str, key: SharedSerde<K>, value: SharedSerde<V>) -> Self {
        StoreSerdes {
            store: store.to_string(),
            topic: format!("{store}-changelog"),
            key,
            value,
            headers: Headers::new(),
        }
    }

    fn err(&self, source: SerdeError) -> Error {
        Error::Serde {
            store: self.store.clone(),
            source,
        }
    }

    pub(crate) fn key_to_bytes(&self, key: &K) -> Result<Vec<u8>, Error> {
        self.key
            .serialize(&self.topic, &mut Headers::new(), key)
            .map_err(|e| self.err(e))?
            .ok_or_else(|| Error::NullKey {
                store: self.store.clone(),
            })
    }

    /// Appends the key's bytes to `out` (a reused buffer).
    pub(crate) fn key_into(&self, key: &K, out: &mut Vec<u8>) -> Result<(), Error> {
        let written = self
            .key
            .serialize_into(&self.topic, &mut Headers::new(), key, out)
            .map_err(|e| self.err(e))?;
        if written {
            Ok(())
        } else {
            Err(Error::NullKey {
                store: self.store.clone(),
            })
        }
    }

    /// Appends the value's bytes to `out`; `false` for a null.
    pub(crate) fn value_into(&self, value: &V, out: &mut Vec<u8>) -> Result<bool, Error> {
        self.value
            .serialize_into(&self.topic, &mut Headers::new(), value, out)
            .map_err(|e| self.err(e))
    }

    pub(crate) fn value_to_bytes(&self, value: &V) -> Result<Option<Vec<u8>>, Error> {
        self.value
            .serialize(&self.topic, &mut Headers::new(), value)
            .map_err(|e| self.err(e))
    }

    pub(crate) fn key_from_bytes(&self, bytes: &[u8]) -> Result<K, Error> {
        self.key
            .deserialize(&self.topic, &self.headers, Some(bytes))
            .map_err(|e| self.err(e))
    }

    pub(crate) fn value_from_bytes(&self, bytes: &[u8]) -> Result<V, Error> {
        self.value
            .deserialize(&self.topic, &self.headers, Some(bytes))
            .map_err(|e| self.err(e))
    }
}

impl<K, V> Clone for StoreSerdes<K, V> {
    fn clone(&self) -> Self {
        StoreSerdes {
            store: self.store.clone(),
            topic: self.topic.clone(),
            key: Arc::clone(&self.key),
            value: Arc::clone(&self.value),
            headers: Headers::new(),
        }
    }
}

/// How a store's values map to changelog values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueFormat {
    /// The value as it is; the record's timestamp.
    Plain,
    /// `timestamp ++ value` in the store; the changelog gets the plain value
    /// with that timestamp as the record timestamp.
    Timestamped,
}

impl ValueFormat {
    /// The changelog value and timestamp of a store value.
    pub(crate) fn changelog_value(
        self,
        value: Option<&[u8]>,
        record_timestamp: Timestamp,
    ) -> (Option<&[u8]>, Timestamp) {
        match (self, value) {
            (ValueFormat::Timestamped, Some(v)) => {
                match crate::format::parse_value_and_timestamp(v) {
                    Some((raw, ts)) => (Some(raw), ts),
                    None => (Some(v), record_timestamp),
                }
            }
            _ => (value, record_timestamp),
        }
    }

    /// The store value of a changelog record.
    pub(crate) fn store_value(self, value: Option<&[u8]>, timestamp: Timestamp) -> Option<Vec<u8>> {
        match self {
            ValueFormat::Plain => value.map(<[u8]>::to_vec),
            ValueFormat::Timestamped => {
                value.map(|v| crate::format::value_and_timestamp(v, timestamp))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kstreams_record::{I64Serde, Nullable};

    use super::*;

    #[test]
    fn a_timestamped_value_written_in_place_is_the_bytes_serialize_gives() {
        let serde = ValueAndTimestampSerde::<i64>(Arc::new(I64Serde));
        let value = ValueAndTimestamp::make(-2, 1_700_000_000_123);
        let whole = serde.serialize("t", &mut Headers::new(), &value).unwrap();
        let mut out = b"before".to_vec();
        assert!(serde
            .serialize_into("t", &mut Headers::new(), &value, &mut out)
            .unwrap());
        assert_eq!(&out[..6], b"before");
        assert_eq!(Some(out[6..].to_vec()), whole);
    }

    #[test]
    fn a_null_inner_value_writes_nothing_in_place() {
        let serde = ValueAndTimestampSerde::<Option<i64>>(Arc::new(Nullable(I64Serde)));
        let value = ValueAndTimestamp::make(None, 5);
        assert_eq!(
            serde.serialize("t", &mut Headers::new(), &value).unwrap(),
            None
        );
        let mut out = b"kept".to_vec();
        assert!(!serde
            .serialize_into("t", &mut Headers::new(), &value, &mut out)
            .unwrap());
        assert_eq!(out, b"kept");
    }
}
