//! The session engine: Kafka Streams' segmented session store, on any
//! backend.
//!
//! Layout inside a segment: ordered key, ordered end, ordered start.
//! Segment `s` holds sessions ending in `[s * interval, (s + 1) * interval)`.

use std::ops::Bound;

use super::backend::prefix_successor;
use super::{
    corrupt, horizon, keyspace_segment, load_observed, save_observed, segment_keyspace, Keyspaces,
    SessionBytesEntry, SessionBytesStore, META_KEYSPACE,
};
use crate::format::{
    ordered_key, parse_session_key, push_ordered_ts, read_ordered_key, read_ordered_ts,
};
use crate::{ChangelogRecord, Error, StateStore, StoreContext, Timestamp};

pub(crate) struct SessionEngine<B> {
    name: String,
    backend: B,
    retention: Timestamp,
    segment_interval: Timestamp,
    observed: Timestamp,
    min_live_segment: i64,
}

fn layout_key(key: &[u8], start: Timestamp, end: Timestamp) -> Vec<u8> {
    let mut out = ordered_key(key);
    push_ordered_ts(&mut out, end);
    push_ordered_ts(&mut out, start);
    out
}

fn parse_layout(bytes: &[u8]) -> Option<(Vec<u8>, Timestamp, Timestamp)> {
    let (key, rest) = read_ordered_key(bytes)?;
    let (end, rest) = read_ordered_ts(rest)?;
    let (start, _) = read_ordered_ts(rest)?;
    Some((key, start, end))
}

impl<B: Keyspaces> SessionEngine<B> {
    pub(crate) fn new(
        name: impl Into<String>,
        backend: B,
        retention: Timestamp,
        segment_interval: Timestamp,
    ) -> Self {
        SessionEngine {
            name: name.into(),
            backend,
            retention,
            segment_interval: segment_interval.max(1),
            observed: i64::MIN,
            min_live_segment: i64::MIN,
        }
    }

    fn segment(&self, end: Timestamp) -> i64 {
        end.div_euclid(self.segment_interval)
    }

    fn expired(&self, end: Timestamp) -> bool {
        end <= horizon(self.observed, self.retention)
    }

    fn observe(&mut self, ts: Timestamp) -> Result<(), Error> {
        if ts <= self.observed {
            return Ok(());
        }
        self.observed = ts;
        let first_live = horizon(self.observed, self.retention).saturating_add(1);
        let min_live = self.segment(first_live);
        if min_live > self.min_live_segment {
            self.min_live_segment = min_live;
            for ks in self.backend.keyspaces() {
                if ks != META_KEYSPACE && keyspace_segment(ks) < min_live {
                    self.backend.drop_keyspace(ks)?;
                }
            }
        }
        Ok(())
    }
}

impl<B: Keyspaces> StateStore for SessionEngine<B> {
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        self.backend.persistent()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        self.backend.open(&self.name, context)?;
        if let Some(observed) = load_observed(&self.backend, META_KEYSPACE)? {
            self.observe(observed)?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), Error> {
        save_observed(&mut self.backend, META_KEYSPACE, self.observed)?;
        self.backend.flush()
    }
    fn close(&mut self) -> Result<(), Error> {
        self.flush()?;
        self.backend.close()
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        for (i, r) in records.iter().enumerate() {
            let (key, start, end) = parse_session_key(r.key)
                .ok_or_else(|| corrupt(&self.name, i, "session key shorter than 16 bytes"))?;
            self.put(key, start, end, r.value)?;
        }
        Ok(())
    }
}

impl<B: Keyspaces> SessionBytesStore for SessionEngine<B> {
    fn retention_period(&self) -> Timestamp {
        self.retention
    }
    fn put(
        &mut self,
        key: &[u8],
        start: Timestamp,
        end: Timestamp,
        value: Option<&[u8]>,
    ) -> Result<bool, Error> {
        self.observe(end)?;
        if self.expired(end) {
            log::warn!("store {}: skipping record for expired session", self.name);
            return Ok(false);
        }
        let ks = segment_keyspace(self.segment(end));
        let k = layout_key(key, start, end);
        match value {
            Some(v) => self.backend.put(ks, &k, v)?,
            None => self.backend.delete(ks, &k)?,
        }
        Ok(true)
    }
    fn fetch_session(
        &self,
        key: &[u8],
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Option<Vec<u8>>, Error> {
        if self.expired(end) {
            return Ok(None);
        }
        let ks = segment_keyspace(self.segment(end));
        self.backend.get(ks, &layout_key(key, start, end))
    }
    fn find_sessions(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<Vec<SessionBytesEntry>, Error> {
        let min_end = earliest_end.max(horizon(self.observed, self.retention).saturating_add(1));
        let mut out = Vec::new();
        if let (Some(a), Some(b)) = (key_from, key_to) {
            if a > b {
                return Ok(out);
            }
        }
        let lo = key_from.map(ordered_key);
        let hi = key_to.and_then(|k| prefix_successor(&ordered_key(k)));
        let lo_bound = lo.as_deref().map_or(Bound::Unbounded, Bound::Included);
        let hi_bound = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let first_segment = self.segment(min_end);
        for ks in self.backend.keyspaces() {
            if ks == META_KEYSPACE || keyspace_segment(ks) < first_segment {
                continue;
            }
            for item in self.backend.range(ks, lo_bound, hi_bound, false)? {
                let (k, value) = item?;
                if let Some((key, start, end)) = parse_layout(&k) {
                    if end >= min_end && start <= latest_start {
                        out.push(SessionBytesEntry {
                            key,
                            start,
                            end,
                            value,
                        });
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.end, &a.key, a.start).cmp(&(b.end, &b.key, b.start)));
        if reverse {
            out.reverse();
        }
        Ok(out)
    }
}
