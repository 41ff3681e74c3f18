//! Serdes for windowed keys, in the bytes of Kafka Streams' windowed serdes,
//! so a windowed result topic reads the same from either library.

use kstreams_record::{Headers, Serde, SerdeError, SharedSerde};

use crate::format::{parse_session_key, parse_windowed_key, session_key, windowed_key};
use crate::{Timestamp, Window, Windowed};

fn malformed(topic: &str, what: &str, len: usize) -> SerdeError {
    SerdeError::Custom {
        topic: topic.to_string(),
        message: format!("{what}: {len} bytes are too few for a windowed key"),
    }
}

fn inner_key<K: 'static>(
    inner: &SharedSerde<K>,
    topic: &str,
    headers: &mut Headers,
    key: &K,
) -> Result<Vec<u8>, SerdeError> {
    inner
        .serialize(topic, headers, key)?
        .ok_or_else(|| SerdeError::Custom {
            topic: topic.to_string(),
            message: "the key of a windowed key serialized to null".to_string(),
        })
}

/// Time-windowed keys: `key ++ window start (8 bytes, big-endian)`, as
/// Kafka Streams' `TimeWindowedSerializer`. The end is not written; the
/// deserializer adds the window size to the start (saturating), as
/// `TimeWindowedDeserializer` does.
pub struct TimeWindowedSerde<K> {
    inner: SharedSerde<K>,
    window_size_ms: i64,
}

impl<K: 'static> TimeWindowedSerde<K> {
    /// Windowed keys of windows `window_size_ms` long.
    pub fn new(inner: impl Serde<K>, window_size_ms: i64) -> Self {
        Self::shared(std::sync::Arc::new(inner), window_size_ms)
    }

    /// [`TimeWindowedSerde::new`] over a shared serde.
    pub fn shared(inner: SharedSerde<K>, window_size_ms: i64) -> Self {
        TimeWindowedSerde {
            inner,
            window_size_ms,
        }
    }
}

impl<K: 'static> Serde<Windowed<K>> for TimeWindowedSerde<K> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Windowed<K>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let key = inner_key(&self.inner, topic, headers, &value.key)?;
        Ok(Some(windowed_key(&key, value.window.start)))
    }

    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        parse_windowed_key(serialized).map(|(key, _)| key.len())
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Windowed<K>, SerdeError> {
        let bytes = bytes.ok_or_else(|| SerdeError::UnexpectedNull {
            topic: topic.to_string(),
            type_name: std::any::type_name::<Windowed<K>>(),
        })?;
        let (key, start) = parse_windowed_key(bytes)
            .ok_or_else(|| malformed(topic, "time-windowed", bytes.len()))?;
        let key = self.inner.deserialize(topic, headers, Some(key))?;
        let end: Timestamp = start.saturating_add(self.window_size_ms);
        Ok(Windowed::new(key, Window::new(start, end)))
    }
}

/// Session-windowed keys: `key ++ end ++ start` (8 bytes each,
/// big-endian), as Kafka Streams' `SessionWindowedSerializer`.
pub struct SessionWindowedSerde<K> {
    inner: SharedSerde<K>,
}

impl<K: 'static> SessionWindowedSerde<K> {
    /// Session-windowed keys over `inner`.
    pub fn new(inner: impl Serde<K>) -> Self {
        Self::shared(std::sync::Arc::new(inner))
    }

    /// [`SessionWindowedSerde::new`] over a shared serde.
    pub fn shared(inner: SharedSerde<K>) -> Self {
        SessionWindowedSerde { inner }
    }
}

impl<K: 'static> Serde<Windowed<K>> for SessionWindowedSerde<K> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Windowed<K>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let key = inner_key(&self.inner, topic, headers, &value.key)?;
        Ok(Some(session_key(
            &key,
            value.window.start,
            value.window.end,
        )))
    }

    fn base_key_len(&self, serialized: &[u8]) -> Option<usize> {
        parse_session_key(serialized).map(|(key, _, _)| key.len())
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Windowed<K>, SerdeError> {
        let bytes = bytes.ok_or_else(|| SerdeError::UnexpectedNull {
            topic: topic.to_string(),
            type_name: std::any::type_name::<Windowed<K>>(),
        })?;
        let (key, start, end) = parse_session_key(bytes)
            .ok_or_else(|| malformed(topic, "session-windowed", bytes.len()))?;
        let key = self.inner.deserialize(topic, headers, Some(key))?;
        Ok(Windowed::new(key, Window::new(start, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_record::StringSerde;

    #[test]
    fn time_windowed_keys_are_key_then_start() {
        let serde = TimeWindowedSerde::new(StringSerde, 10);
        let w = Windowed::new("k".to_string(), Window::new(5, 15));
        let bytes = serde
            .serialize("t", &mut Headers::new(), &w)
            .unwrap()
            .unwrap();
        assert_eq!(bytes, [b"k".as_slice(), &5i64.to_be_bytes()].concat());
        assert_eq!(
            serde
                .deserialize("t", &Headers::new(), Some(&bytes))
                .unwrap(),
            w
        );
        assert!(serde.deserialize("t", &Headers::new(), Some(b"k")).is_err());
        assert_eq!(serde.base_key_len(&bytes), Some(1));
    }

    #[test]
    fn session_windowed_keys_are_key_end_start() {
        let serde = SessionWindowedSerde::new(StringSerde);
        let w = Windowed::new("k".to_string(), Window::new(3, 5));
        let bytes = serde
            .serialize("t", &mut Headers::new(), &w)
            .unwrap()
            .unwrap();
        let expected = [b"k".as_slice(), &5i64.to_be_bytes(), &3i64.to_be_bytes()].concat();
        assert_eq!(bytes, expected);
        assert_eq!(serde.base_key_len(&bytes), Some(1));
        assert_eq!(
            serde
                .deserialize("t", &Headers::new(), Some(&bytes))
                .unwrap(),
            w
        );
    }
}
