//! The versioned key-value engine (KIP-889 semantics), on any backend.
//!
//! Every version of a key is one entry, `ordered key ++ ordered valid-from`
//! -> `flag ++ value` (flag 0 marks a tombstone), so a version's valid-to is
//! the timestamp of the entry after it. A second keyspace indexes versions
//! by the time at which they expire (their valid-to; a latest tombstone
//! expires at its own timestamp; a latest value never does), so expiry is
//! a scan of the index's head rather than of the whole store.

use std::ops::Bound;

use kstreams_time::expiry;

use super::backend::prefix_successor;
use super::{
    flush_in_background_with_observed, flush_with_observed, open_with_observed, Keyspaces,
    VersionedBytes, VersionedBytesStore,
};
use crate::format::{
    ordered_key, push_ordered_key, push_ordered_ts, read_ordered_key, read_ordered_ts,
};
use crate::{ChangelogRecord, Error, StateStore, StoreContext, Timestamp};

/// What `VersionedKeyValueStore::put` returns when the put was older than
/// the history retention and was dropped.
pub const PUT_RETURN_CODE_NOT_PUT: Timestamp = i64::MIN;
/// What `VersionedKeyValueStore::put` returns when the new version is the
/// latest (its valid-to is open).
pub const PUT_RETURN_CODE_VALID_TO_UNDEFINED: Timestamp = i64::MAX;

const VERSIONS: i64 = 1;
const EXPIRY: i64 = 2;

pub(crate) struct VersionedEngine<B> {
    name: String,
    backend: B,
    history_retention: Timestamp,
    observed: Timestamp,
}

/// A stored version.
struct Version {
    timestamp: Timestamp,
    value: Option<Vec<u8>>,
}

fn version_key(prefix: &[u8], ts: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 8);
    out.extend_from_slice(prefix);
    push_ordered_ts(&mut out, ts);
    out
}

fn encode_value(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        Some(v) => {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.push(1);
            out.extend_from_slice(v);
            out
        }
        None => vec![0],
    }
}

fn decode_version(prefix_len: usize, k: &[u8], v: Vec<u8>) -> Option<Version> {
    let (ts, _) = read_ordered_ts(&k[prefix_len..])?;
    let value = match v.first()? {
        1 => Some(v[1..].to_vec()),
        _ => None,
    };
    Some(Version {
        timestamp: ts,
        value,
    })
}

fn expiry_key(expiry: Timestamp, key: &[u8], valid_from: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 20);
    push_ordered_ts(&mut out, expiry);
    push_ordered_key(&mut out, key);
    push_ordered_ts(&mut out, valid_from);
    out
}

/// When a version stops mattering: its valid-to; a latest tombstone at
/// its own timestamp; a latest value never.
fn expiry_of(ts: Timestamp, tombstone: bool, next: Option<Timestamp>) -> Option<Timestamp> {
    match next {
        Some(n) => Some(n),
        None if tombstone => Some(ts),
        None => None,
    }
}

impl<B: Keyspaces> VersionedEngine<B> {
    pub(crate) fn new(name: impl Into<String>, backend: B, history_retention: Timestamp) -> Self {
        VersionedEngine {
            name: name.into(),
            backend,
            history_retention,
            observed: i64::MIN,
        }
    }

    fn horizon(&self) -> Timestamp {
        expiry::retention_horizon(self.observed, self.history_retention)
    }

    /// Whether history retention has let `time` go.
    fn expired(&self, time: Timestamp) -> bool {
        expiry::history_expired(time, self.observed, self.history_retention)
    }

    /// The version valid at `ts` (the last one starting at or before it).
    fn version_at(&self, prefix: &[u8], ts: Timestamp) -> Result<Option<Version>, Error> {
        let hi = version_key(prefix, ts);
        let mut it = self.backend.range(
            VERSIONS,
            Bound::Included(prefix),
            Bound::Included(&hi),
            true,
        )?;
        Ok(match it.next().transpose()? {
            Some((k, v)) => decode_version(prefix.len(), &k, v),
            None => None,
        })
    }

    /// The first version starting after `ts`.
    fn version_after(&self, prefix: &[u8], ts: Timestamp) -> Result<Option<Version>, Error> {
        let lo = version_key(prefix, ts);
        let hi = prefix_successor(prefix);
        let hi_bound = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut it = self
            .backend
            .range(VERSIONS, Bound::Excluded(&lo), hi_bound, false)?;
        Ok(match it.next().transpose()? {
            Some((k, v)) => decode_version(prefix.len(), &k, v),
            None => None,
        })
    }

    fn latest(&self, prefix: &[u8]) -> Result<Option<Version>, Error> {
        self.version_at(prefix, i64::MAX)
    }

    fn reindex(
        &mut self,
        key: &[u8],
        valid_from: Timestamp,
        old: Option<Timestamp>,
        new: Option<Timestamp>,
    ) -> Result<(), Error> {
        if old == new {
            return Ok(());
        }
        if let Some(e) = old {
            self.backend
                .delete(EXPIRY, &expiry_key(e, key, valid_from))?;
        }
        if let Some(e) = new {
            self.backend
                .put(EXPIRY, &expiry_key(e, key, valid_from), &[])?;
        }
        Ok(())
    }

    /// Inserts a version; the caller checked the grace period.
    fn insert(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        ts: Timestamp,
    ) -> Result<Timestamp, Error> {
        let prefix = ordered_key(key);
        let prev = self.version_at(&prefix, ts)?;
        let next = self.version_after(&prefix, ts)?.map(|v| v.timestamp);
        self.backend
            .put(VERSIONS, &version_key(&prefix, ts), &encode_value(value))?;
        match prev {
            Some(p) if p.timestamp == ts => {
                let old = expiry_of(ts, p.value.is_none(), next);
                let new = expiry_of(ts, value.is_none(), next);
                self.reindex(key, ts, old, new)?;
            }
            other => {
                self.reindex(key, ts, None, expiry_of(ts, value.is_none(), next))?;
                if let Some(p) = other {
                    let tomb = p.value.is_none();
                    let old = expiry_of(p.timestamp, tomb, next);
                    let new = expiry_of(p.timestamp, tomb, Some(ts));
                    self.reindex(key, p.timestamp, old, new)?;
                }
            }
        }
        Ok(next.unwrap_or(PUT_RETURN_CODE_VALID_TO_UNDEFINED))
    }

    /// Drops versions no read can see any more.
    fn expire(&mut self) -> Result<(), Error> {
        let horizon = self.horizon();
        if horizon == i64::MIN {
            return Ok(());
        }
        let mut hi = Vec::new();
        push_ordered_ts(&mut hi, horizon);
        let Some(hi) = prefix_successor(&hi) else {
            return Ok(());
        };
        let expired: Vec<Vec<u8>> = self
            .backend
            .range(EXPIRY, Bound::Unbounded, Bound::Excluded(&hi), false)?
            .map(|r| r.map(|(k, _)| k))
            .collect::<Result<_, _>>()?;
        for ik in expired {
            let parsed = read_ordered_ts(&ik)
                .and_then(|(_, rest)| read_ordered_key(rest))
                .and_then(|(key, rest)| read_ordered_ts(rest).map(|(from, _)| (key, from)));
            if let Some((key, from)) = parsed {
                self.backend
                    .delete(VERSIONS, &version_key(&ordered_key(&key), from))?;
            }
            self.backend.delete(EXPIRY, &ik)?;
        }
        Ok(())
    }

    fn do_put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        ts: Timestamp,
    ) -> Result<Timestamp, Error> {
        if self.expired(ts) {
            log::warn!("store {}: skipping record for expired put", self.name);
            return Ok(PUT_RETURN_CODE_NOT_PUT);
        }
        self.observed = self.observed.max(ts);
        let valid_to = self.insert(key, value, ts)?;
        self.expire()?;
        Ok(valid_to)
    }
}

impl<B: Keyspaces> StateStore for VersionedEngine<B> {
    forward_offsets!(backend);
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        self.backend.persistent()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        if let Some(observed) = open_with_observed(&mut self.backend, &self.name, context)? {
            self.observed = self.observed.max(observed);
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), Error> {
        flush_with_observed(&mut self.backend, self.observed)
    }
    fn flush_in_background(&mut self) -> Result<crate::BackgroundFlush, Error> {
        flush_in_background_with_observed(&self.name, &mut self.backend, self.observed)
    }
    fn close(&mut self) -> Result<(), Error> {
        self.flush()?;
        self.backend.close()
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        for r in records {
            self.do_put(r.key, r.value, r.timestamp)?;
        }
        Ok(())
    }
}

impl<B: Keyspaces> VersionedBytesStore for VersionedEngine<B> {
    fn history_retention(&self) -> Timestamp {
        self.history_retention
    }
    fn put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<Timestamp, Error> {
        self.do_put(key, value, timestamp)
    }
    fn delete(
        &mut self,
        key: &[u8],
        timestamp: Timestamp,
    ) -> Result<Option<VersionedBytes>, Error> {
        if self.expired(timestamp) {
            log::warn!("store {}: skipping record for expired delete", self.name);
            return Ok(None);
        }
        let existing = self.get_as_of(key, timestamp)?;
        self.do_put(key, None, timestamp)?;
        Ok(existing)
    }
    fn get(&self, key: &[u8]) -> Result<Option<VersionedBytes>, Error> {
        let prefix = ordered_key(key);
        Ok(self.latest(&prefix)?.and_then(|v| {
            v.value.map(|value| VersionedBytes {
                value,
                timestamp: v.timestamp,
                valid_to: None,
            })
        }))
    }
    fn get_as_of(&self, key: &[u8], as_of: Timestamp) -> Result<Option<VersionedBytes>, Error> {
        let prefix = ordered_key(key);
        if self.expired(as_of) {
            // Older than the history: only the latest version, which never
            // expires, can still answer.
            return Ok(self.latest(&prefix)?.and_then(|v| {
                if v.timestamp > as_of {
                    return None;
                }
                v.value.map(|value| VersionedBytes {
                    value,
                    timestamp: v.timestamp,
                    valid_to: None,
                })
            }));
        }
        let Some(found) = self.version_at(&prefix, as_of)? else {
            return Ok(None);
        };
        let Some(value) = found.value else {
            return Ok(None);
        };
        let valid_to = self
            .version_after(&prefix, found.timestamp)?
            .map(|v| v.timestamp);
        Ok(Some(VersionedBytes {
            value,
            timestamp: found.timestamp,
            valid_to,
        }))
    }
}
