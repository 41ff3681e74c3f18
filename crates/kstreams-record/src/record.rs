use crate::{Headers, Timestamp};

/// A typed record inside a topology: key, value, timestamp and headers.
///
/// This is Kafka Streams' `api.Record`: processors receive one and forward
/// new ones built with the `with_*` methods, which keep the other fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<K, V> {
    /// The key; use `Option<K>` for topics with null keys.
    pub key: K,
    /// The value; use `Option<V>` for topics with tombstones.
    pub value: V,
    /// Event time in milliseconds since the epoch.
    pub timestamp: Timestamp,
    /// The record headers.
    pub headers: Headers,
}

impl<K, V> Record<K, V> {
    /// A record with no headers.
    pub fn new(key: K, value: V, timestamp: Timestamp) -> Self {
        Self {
            key,
            value,
            timestamp,
            headers: Headers::new(),
        }
    }

    /// The same record with another key (possibly of another type).
    pub fn with_key<K2>(self, key: K2) -> Record<K2, V> {
        Record {
            key,
            value: self.value,
            timestamp: self.timestamp,
            headers: self.headers,
        }
    }

    /// The same record with another value (possibly of another type).
    pub fn with_value<V2>(self, value: V2) -> Record<K, V2> {
        Record {
            key: self.key,
            value,
            timestamp: self.timestamp,
            headers: self.headers,
        }
    }

    /// The same record with another timestamp.
    pub fn with_timestamp(mut self, timestamp: Timestamp) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// The same record with other headers.
    pub fn with_headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }
}

/// Where the record being processed came from.
///
/// Absent for records produced by a punctuation, as in Kafka Streams.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RecordMetadata {
    /// Source topic: the consumed record's shared name, not a copy.
    pub topic: std::sync::Arc<str>,
    /// Source partition.
    pub partition: i32,
    /// Offset in the source partition.
    pub offset: i64,
}
