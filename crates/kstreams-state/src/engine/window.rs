//! The window engine: Kafka Streams' segmented window store, on any backend.
//!
//! Layout inside a segment: ordered key, ordered window start, seqnum (4
//! bytes BE). Segment `s` holds windows starting in
//! `[s * interval, (s + 1) * interval)`.

use std::ops::Bound;

use kstreams_time::expiry::RetainedTime;

use super::backend::prefix_successor;
use super::segmented::{SegmentLayout, Segmented};
use super::{corrupt, keyspace_segment, Keyspaces, WindowBytesEntry, WindowBytesStore};
use crate::format::{
    ordered_key, parse_window_store_key, push_ordered_ts, read_ordered_key, read_ordered_ts,
};
use crate::{ChangelogRecord, Error, Timestamp};

/// The window engine: a segmented backend keyed by window start.
pub(crate) type WindowEngine<B> = Segmented<B, WindowLayout>;

/// What a window engine adds to its segments.
pub(crate) struct WindowLayout {
    window_size: Timestamp,
    retain_duplicates: bool,
    /// The last sequence number given to a duplicate.
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
    pub(crate) fn window(
        name: impl Into<String>,
        backend: B,
        retention: Timestamp,
        window_size: Timestamp,
        retain_duplicates: bool,
        segment_interval: Timestamp,
    ) -> Self {
        let layout = WindowLayout {
            window_size,
            retain_duplicates,
            seqnum: 0,
        };
        Segmented::new(
            name,
            backend,
            retention,
            segment_interval,
            RetainedTime::WindowStart,
            layout,
        )
    }

    fn write(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        start: Timestamp,
        seq: u32,
    ) -> Result<(), Error> {
        let ks = self.keyspace(start);
        let k = layout_key(key, start, seq);
        match value {
            Some(v) => self.backend.put(ks, &k, v),
            None => self.backend.delete(ks, &k),
        }
    }

    fn live_keyspaces(&self, from: Timestamp, to: Timestamp) -> Vec<i64> {
        let (lo, hi) = (self.segment(from), self.segment(to));
        self.segment_keyspaces()
            .filter(|&ks| (lo..=hi).contains(&keyspace_segment(ks)))
            .collect()
    }
}

impl SegmentLayout for WindowLayout {
    fn restore_record<B: Keyspaces>(
        engine: &mut Segmented<B, Self>,
        index: usize,
        record: &ChangelogRecord<'_>,
    ) -> Result<(), Error> {
        let (key, start, seq) = parse_window_store_key(record.key)
            .ok_or_else(|| corrupt(&engine.name, index, "window key shorter than 12 bytes"))?;
        engine.put_with_seqnum(key, record.value, start, seq)
    }
}

impl<B: Keyspaces> WindowBytesStore for WindowEngine<B> {
    fn window_size(&self) -> Timestamp {
        self.layout.window_size
    }
    fn retention_period(&self) -> Timestamp {
        self.retention
    }
    fn retain_duplicates(&self) -> bool {
        self.layout.retain_duplicates
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
        let seq = if self.layout.retain_duplicates {
            let layout = &mut self.layout;
            layout.seqnum = (layout.seqnum + 1) & 0x7FFF_FFFF;
            if value.is_none() {
                // Nothing to delete among duplicates, but the changelog
                // still carries the record (and its stream time), as Kafka
                // Streams logs it.
                return Ok(Some(layout.seqnum));
            }
            layout.seqnum
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
        if self.layout.retain_duplicates {
            // New puts after a restore must not reuse a restored seqnum.
            self.layout.seqnum = self.layout.seqnum.max(seqnum);
        }
        self.write(key, value, window_start, seqnum)
    }
    fn fetch(&self, key: &[u8], window_start: Timestamp) -> Result<Option<Vec<u8>>, Error> {
        if self.expired(window_start) {
            return Ok(None);
        }
        let ks = self.keyspace(window_start);
        if !self.layout.retain_duplicates {
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
