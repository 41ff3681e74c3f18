//! The window engine: Kafka Streams' segmented window store, on any backend.
//!
//! Layout inside a segment: ordered key, ordered window start, seqnum (4
//! bytes BE). Segment `s` holds windows starting in
//! `[s * interval, (s + 1) * interval)`.

use std::ops::Bound;

use super::backend::prefix_successor;
use super::{
    corrupt, horizon, keyspace_segment, load_observed, save_observed, segment_keyspace, Keyspaces,
    WindowBytesEntry, WindowBytesStore, META_KEYSPACE,
};
use crate::format::{
    ordered_key, parse_window_store_key, push_ordered_ts, read_ordered_key, read_ordered_ts,
};
use crate::{ChangelogRecord, Error, StateStore, StoreContext, Timestamp};

pub(crate) struct WindowEngine<B> {
    name: String,
    backend: B,
    retention: Timestamp,
    window_size: Timestamp,
    retain_duplicates: bool,
    segment_interval: Timestamp,
    observed: Timestamp,
    min_live_segment: i64,
    seqnum: u32,
}

fn layout_key(key: &[u8], start: Timestamp, seqnum: u32) -> Vec<u8> {
    let mut out = ordered_key(key);
    push_ordered_ts(&mut out, start);
    out.extend_from_slice(&seqnum.to_be_bytes());
    out
}

fn parse_layout(bytes: &[u8]) -> Option<(Vec<u8>, Timestamp, u32)> {
    let (key, rest) = read_ordered_key(bytes)?;
    let (start, rest) = read_ordered_ts(rest)?;
    let seq = u32::from_be_bytes(rest.try_into().ok()?);
    Some((key, start, seq))
}

impl<B: Keyspaces> WindowEngine<B> {
    pub(crate) fn new(
        name: impl Into<String>,
        backend: B,
        retention: Timestamp,
        window_size: Timestamp,
        retain_duplicates: bool,
        segment_interval: Timestamp,
    ) -> Self {
        WindowEngine {
            name: name.into(),
            backend,
            retention,
            window_size,
            retain_duplicates,
            segment_interval: segment_interval.max(1),
            observed: i64::MIN,
            min_live_segment: i64::MIN,
            seqnum: 0,
        }
    }

    fn segment(&self, start: Timestamp) -> i64 {
        start.div_euclid(self.segment_interval)
    }

    fn expired(&self, start: Timestamp) -> bool {
        start <= horizon(self.observed, self.retention)
    }

    /// Advances stream time and drops the segments it left behind.
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

    fn write(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        start: Timestamp,
        seq: u32,
    ) -> Result<(), Error> {
        let ks = segment_keyspace(self.segment(start));
        let k = layout_key(key, start, seq);
        match value {
            Some(v) => self.backend.put(ks, &k, v),
            None => self.backend.delete(ks, &k),
        }
    }

    fn live_keyspaces(&self, from: Timestamp, to: Timestamp) -> Vec<i64> {
        let (lo, hi) = (self.segment(from), self.segment(to));
        self.backend
            .keyspaces()
            .into_iter()
            .filter(|&ks| ks != META_KEYSPACE)
            .filter(|&ks| (lo..=hi).contains(&keyspace_segment(ks)))
            .collect()
    }

    fn first_visible(&self, time_from: Timestamp) -> Timestamp {
        time_from.max(horizon(self.observed, self.retention).saturating_add(1))
    }
}

impl<B: Keyspaces> StateStore for WindowEngine<B> {
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
            let (key, start, seq) = parse_window_store_key(r.key)
                .ok_or_else(|| corrupt(&self.name, i, "window key shorter than 12 bytes"))?;
            self.put_with_seqnum(key, r.value, start, seq)?;
        }
        Ok(())
    }
}

impl<B: Keyspaces> WindowBytesStore for WindowEngine<B> {
    fn window_size(&self) -> Timestamp {
        self.window_size
    }
    fn retention_period(&self) -> Timestamp {
        self.retention
    }
    fn retain_duplicates(&self) -> bool {
        self.retain_duplicates
    }
    fn put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        window_start: Timestamp,
    ) -> Result<Option<u32>, Error> {
        self.observe(window_start)?;
        if self.expired(window_start) {
            log::warn!("store {}: skipping record for expired window", self.name);
            return Ok(None);
        }
        let seq = if self.retain_duplicates {
            self.seqnum = (self.seqnum + 1) & 0x7FFF_FFFF;
            if value.is_none() {
                // Nothing to delete among duplicates, but the changelog
                // still carries the record (and its stream time), as Kafka
                // Streams logs it.
                return Ok(Some(self.seqnum));
            }
            self.seqnum
        } else {
            0
        };
        self.write(key, value, window_start, seq)?;
        Ok(Some(seq))
    }
    fn put_with_seqnum(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        window_start: Timestamp,
        seqnum: u32,
    ) -> Result<(), Error> {
        self.observe(window_start)?;
        if self.expired(window_start) {
            return Ok(());
        }
        if self.retain_duplicates {
            // New puts after a restore must not reuse a restored seqnum.
            self.seqnum = self.seqnum.max(seqnum);
        }
        self.write(key, value, window_start, seqnum)
    }
    fn fetch(&self, key: &[u8], window_start: Timestamp) -> Result<Option<Vec<u8>>, Error> {
        if self.expired(window_start) {
            return Ok(None);
        }
        let ks = segment_keyspace(self.segment(window_start));
        if !self.retain_duplicates {
            return self.backend.get(ks, &layout_key(key, window_start, 0));
        }
        let from = layout_key(key, window_start, 0);
        let to = layout_key(key, window_start, u32::MAX);
        let mut it = self
            .backend
            .range(ks, Bound::Included(&from), Bound::Included(&to), false)?;
        Ok(it.next().transpose()?.map(|(_, v)| v))
    }
    fn fetch_key(
        &self,
        key: &[u8],
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<Vec<WindowBytesEntry>, Error> {
        let from_ts = self.first_visible(time_from);
        let mut out = Vec::new();
        if from_ts > time_to {
            return Ok(out);
        }
        let lo = layout_key(key, from_ts, 0);
        let hi = layout_key(key, time_to, u32::MAX);
        let mut spaces = self.live_keyspaces(from_ts, time_to);
        if reverse {
            spaces.reverse();
        }
        for ks in spaces {
            for item in
                self.backend
                    .range(ks, Bound::Included(&lo), Bound::Included(&hi), reverse)?
            {
                let (k, value) = item?;
                if let Some((key, start, seqnum)) = parse_layout(&k) {
                    out.push(WindowBytesEntry {
                        key,
                        start,
                        seqnum,
                        value,
                    });
                }
            }
        }
        Ok(out)
    }
    fn fetch_keys(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<Vec<WindowBytesEntry>, Error> {
        let from_ts = self.first_visible(time_from);
        let mut out = Vec::new();
        if from_ts > time_to {
            return Ok(out);
        }
        if let (Some(a), Some(b)) = (key_from, key_to) {
            if a > b {
                return Ok(out);
            }
        }
        let lo = key_from.map(ordered_key);
        let hi = key_to.and_then(|k| prefix_successor(&ordered_key(k)));
        let lo_bound = lo.as_deref().map_or(Bound::Unbounded, Bound::Included);
        let hi_bound = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        for ks in self.live_keyspaces(from_ts, time_to) {
            for item in self.backend.range(ks, lo_bound, hi_bound, false)? {
                let (k, value) = item?;
                if let Some((key, start, seqnum)) = parse_layout(&k) {
                    if (from_ts..=time_to).contains(&start) {
                        out.push(WindowBytesEntry {
                            key,
                            start,
                            seqnum,
                            value,
                        });
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.start, &a.key, a.seqnum).cmp(&(b.start, &b.key, b.seqnum)));
        if reverse {
            out.reverse();
        }
        Ok(out)
    }
}
