//! The ordered byte maps every engine is built on.
//!
//! A backend holds numbered keyspaces, each an ordered map of bytes to
//! bytes. A key-value store uses keyspace 0; window and session stores put
//! each time segment in a keyspace of its own, so expiry drops a whole
//! keyspace (a RocksDB column family, or one `BTreeMap`). The store logic on
//! top is written once and runs on both engines.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::{Error, StoreContext};

/// Key-value pairs from an engine, in the order asked for.
pub type BytesIter<'a> = Box<dyn Iterator<Item = Result<(Vec<u8>, Vec<u8>), Error>> + 'a>;

/// Where a persistent backend keeps its files inside the task directory,
/// and how.
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DirLayout {
    /// `<task dir>/rocksdb/<store>`, Kafka Streams 4.4's key-value store:
    /// the data in the column family of `ValueFamily`, the changelog
    /// offsets in `offsets` (KIP-1035). Either side opens the other's.
    KeyValue(ValueFamily),
    /// `<task dir>/kstreams/<store>` with keyspaces as column families
    /// (versioned stores; not Kafka Streams' layout).
    Versioned,
    /// `<task dir>/kstreams/<store>`, segments as column families of one
    /// RocksDB (Kafka Streams has one RocksDB per segment in `<store>/`).
    Segmented,
}

/// Which column family holds a key-value store's data, as in Kafka Streams.
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueFamily {
    /// `default`: plain values (`RocksDBStore`).
    Plain,
    /// `keyValueWithTimestamp`: timestamp and value
    /// (`RocksDBTimestampedStore`).
    Timestamped,
}

pub(crate) trait Keyspaces: 'static {
    fn persistent(&self) -> bool;
    /// Opens the backend (persistent ones in the task directory).
    fn open(&mut self, store: &str, context: &StoreContext) -> Result<(), Error>;
    fn get(&self, ks: i64, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// `get` appending the value to `out`; whether the key was found.
    fn get_into(&self, ks: i64, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        match self.get(ks, key)? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn put(&mut self, ks: i64, key: &[u8], value: &[u8]) -> Result<(), Error>;
    fn delete(&mut self, ks: i64, key: &[u8]) -> Result<(), Error>;
    /// Writes many entries of one keyspace (`None` deletes).
    fn write_all(&mut self, ks: i64, entries: &[(&[u8], Option<&[u8]>)]) -> Result<(), Error> {
        for (k, v) in entries {
            match v {
                Some(v) => self.put(ks, k, v)?,
                None => self.delete(ks, k)?,
            }
        }
        Ok(())
    }
    fn range(
        &self,
        ks: i64,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error>;
    /// The keyspaces that exist, ascending.
    fn keyspaces(&self) -> Vec<i64>;
    fn drop_keyspace(&mut self, ks: i64) -> Result<(), Error>;
    fn approximate_len(&self, ks: i64) -> Result<u64, Error>;
    fn flush(&mut self) -> Result<(), Error>;
    /// [`Keyspaces::flush`] without waiting for it, when the backend can:
    /// `None` when it flushed in place.
    fn flush_in_background(&mut self) -> Result<Option<crate::BackgroundFlush>, Error> {
        self.flush().map(|()| None)
    }
    fn close(&mut self) -> Result<(), Error>;
    fn is_open(&self) -> bool;
    /// Records the changelog offsets the flushed data reaches, for
    /// backends that keep them beside the data (Kafka Streams 4.4's RocksDB
    /// stores do).
    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<(), Error> {
        let _ = offsets;
        Ok(())
    }
    /// The changelog offset recorded for a partition, if the backend keeps
    /// offsets.
    fn committed_offset(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<crate::RecordedOffset>, Error> {
        let _ = (topic, partition);
        Ok(None)
    }
    /// Whether the task's `.checkpoint` holds the store's offset (Kafka
    /// Streams' layouts) rather than only the backend.
    fn checkpointed_in_task_file(&self) -> bool {
        self.persistent()
    }
    /// See [`crate::StateStore::start_transactions`].
    fn start_transactions(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// See [`crate::StateStore::uncommitted_bytes`].
    fn uncommitted_bytes(&self) -> usize {
        0
    }
}

/// The in-memory backend: one `BTreeMap` per keyspace.
#[derive(Debug, Default)]
pub(crate) struct MemoryKeyspaces {
    spaces: BTreeMap<i64, BTreeMap<Vec<u8>, Vec<u8>>>,
}

pub(crate) fn bounds_empty(from: Bound<&[u8]>, to: Bound<&[u8]>) -> bool {
    match (from, to) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

impl Keyspaces for MemoryKeyspaces {
    fn persistent(&self) -> bool {
        false
    }
    fn open(&mut self, _: &str, _: &StoreContext) -> Result<(), Error> {
        Ok(())
    }
    fn is_open(&self) -> bool {
        true
    }
    fn get(&self, ks: i64, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.spaces.get(&ks).and_then(|m| m.get(key)).cloned())
    }
    fn get_into(&self, ks: i64, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        match self.spaces.get(&ks).and_then(|m| m.get(key)) {
            Some(value) => {
                out.extend_from_slice(value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn put(&mut self, ks: i64, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let space = self.spaces.entry(ks).or_default();
        match space.get_mut(key) {
            Some(existing) => {
                existing.clear();
                existing.extend_from_slice(value);
            }
            None => {
                space.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }
    fn delete(&mut self, ks: i64, key: &[u8]) -> Result<(), Error> {
        if let Some(space) = self.spaces.get_mut(&ks) {
            space.remove(key);
        }
        Ok(())
    }
    fn range(
        &self,
        ks: i64,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error> {
        let Some(space) = self.spaces.get(&ks) else {
            return Ok(Box::new(std::iter::empty()));
        };
        if bounds_empty(from, to) {
            return Ok(Box::new(std::iter::empty()));
        }
        let range = space
            .range::<[u8], _>((from, to))
            .map(|(k, v)| Ok((k.clone(), v.clone())));
        Ok(if reverse {
            Box::new(range.rev())
        } else {
            Box::new(range)
        })
    }
    fn keyspaces(&self) -> Vec<i64> {
        self.spaces.keys().copied().collect()
    }
    fn drop_keyspace(&mut self, ks: i64) -> Result<(), Error> {
        self.spaces.remove(&ks);
        Ok(())
    }
    fn approximate_len(&self, ks: i64) -> Result<u64, Error> {
        Ok(self.spaces.get(&ks).map_or(0, |m| m.len() as u64))
    }
    fn flush(&mut self) -> Result<(), Error> {
        Ok(())
    }
    fn close(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` when no such key exists (all `0xFF`).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}
