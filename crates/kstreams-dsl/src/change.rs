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

/// A serde for table changes on a repartition topic: both values, each as
/// a 4-byte big-endian length (-1 for absent) and its bytes, new first.
/// Only kstreams reads these topics, so the layout is our own.
pub(crate) struct ChangeSerde<V>(pub SharedSerde<V>);

impl<V: 'static> Serde<Change<V>> for ChangeSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Change<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        for part in [&value.new_value, &value.old_value] {
            let bytes = match part {
                Some(v) => self.0.serialize(topic, headers, v)?,
                None => None,
            };
            match bytes {
                Some(b) => {
                    let len = i32::try_from(b.len()).map_err(|_| SerdeError::Custom {
                        topic: topic.to_string(),
                        message: "a table value over 2 GiB".to_string(),
                    })?;
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(&b);
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Change<V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed table change on a repartition topic".to_string(),
        };
        let mut rest = bytes.ok_or_else(malformed)?;
        let mut parts = [None, None];
        for part in &mut parts {
            if rest.len() < 4 {
                return Err(malformed());
            }
            let (len, tail) = rest.split_at(4);
            let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
            rest = tail;
            if len >= 0 {
                let len = len as usize;
                if rest.len() < len {
                    return Err(malformed());
                }
                let (value, tail) = rest.split_at(len);
                *part = Some(self.0.deserialize(topic, headers, Some(value))?);
                rest = tail;
            }
        }
        let [new_value, old_value] = parts;
        Ok(Change::new(new_value, old_value))
    }
}
