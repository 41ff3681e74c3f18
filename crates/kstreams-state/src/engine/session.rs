//! The session engine: Kafka Streams' segmented session store, on any
//! backend.
//!
//! Layout inside a segment: ordered key, ordered end, ordered start.
//! Segment `s` holds sessions ending in `[s * interval, (s + 1) * interval)`.

use std::ops::Bound;

use kstreams_time::expiry::RetainedTime;

use super::backend::prefix_successor;
use super::segmented::{SegmentLayout, Segmented};
use super::{corrupt, keyspace_segment, Keyspaces, SessionBytesEntry, SessionBytesStore};
use crate::format::{
    ordered_key, parse_session_key, push_ordered_ts, read_ordered_key, read_ordered_ts,
};
use crate::{ChangelogRecord, Error, Timestamp};

/// The session engine: a segmented backend keyed by session end.
pub(crate) type SessionEngine<B> = Segmented<B, SessionLayout>;

/// Sessions need nothing beyond their segments.
pub(crate) struct SessionLayout;

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
    pub(crate) fn session(
        name: impl Into<String>,
        backend: B,
        retention: Timestamp,
        segment_interval: Timestamp,
    ) -> Self {
        Segmented::new(
            name,
            backend,
            retention,
            segment_interval,
            RetainedTime::SessionEnd,
            SessionLayout,
        )
    }
}

impl SegmentLayout for SessionLayout {
    fn restore_record<B: Keyspaces>(
        engine: &mut Segmented<B, Self>,
        index: usize,
        record: &ChangelogRecord<'_>,
    ) -> Result<(), Error> {
        let (key, start, end) = parse_session_key(record.key)
            .ok_or_else(|| corrupt(&engine.name, index, "session key shorter than 16 bytes"))?;
        engine.put(key, start, end, record.value).map(|_| ())
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
        let ks = self.keyspace(end);
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
        if end < self.first_visible(end) {
            return Ok(None);
        }
        self.backend
            .get(self.keyspace(end), &layout_key(key, start, end))
    }
    fn find_sessions(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<Vec<SessionBytesEntry>, Error> {
        if let (Some(a), Some(b)) = (key_from, key_to) {
            if a > b {
                return Ok(Vec::new());
            }
        }
        let ends = (self.first_visible(earliest_end), i64::MAX);
        self.scan(key_from, key_to, ends, latest_start, reverse)
    }
    fn sessions_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<Vec<SessionBytesEntry>, Error> {
        let ends = (self.first_kept(earliest_end), latest_end);
        self.scan(None, None, ends, i64::MAX, false)
    }
}

impl<B: Keyspaces> SessionEngine<B> {
    /// Sessions of keys in `[key_from, key_to]` ending in `ends` (both
    /// inclusive) and starting at or before `latest_start`, in (end, key,
    /// start) order.
    fn scan(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        (min_end, max_end): (Timestamp, Timestamp),
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<Vec<SessionBytesEntry>, Error> {
        let mut out = Vec::new();
        let lo = key_from.map(ordered_key);
        let hi = key_to.and_then(|k| prefix_successor(&ordered_key(k)));
        let lo_bound = lo.as_deref().map_or(Bound::Unbounded, Bound::Included);
        let hi_bound = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let (first_segment, last_segment) = (self.segment(min_end), self.segment(max_end));
        for ks in self.segment_keyspaces() {
            let segment = keyspace_segment(ks);
            if segment < first_segment || segment > last_segment {
                continue;
            }
            for item in self.backend.range(ks, lo_bound, hi_bound, false)? {
                let (k, value) = item?;
                if let Some((key, start, end)) = parse_layout(&k) {
                    if (min_end..=max_end).contains(&end) && start <= latest_start {
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
