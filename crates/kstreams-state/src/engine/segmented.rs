//! What the window and session engines share: Kafka Streams' segmented
//! bytes store. Time segments live in keyspaces of their own, so expiry
//! drops whole keyspaces; the stream time that drives it is saved in the
//! metadata keyspace at flush and read back at init.

use kstreams_time::expiry::RetainedTime;

use super::{
    flush_in_background_with_observed, flush_with_observed, keyspace_segment, open_with_observed,
    segment_keyspace, Keyspaces, META_KEYSPACE,
};
use crate::{ChangelogRecord, Error, StateStore, StoreContext, Timestamp};

/// What a segmented engine keys its segments by and how it restores: the
/// window or the session layout.
pub(crate) trait SegmentLayout: Sized + 'static {
    /// Applies the changelog record at `index` of a restore batch.
    fn restore_record<B: Keyspaces>(
        engine: &mut Segmented<B, Self>,
        index: usize,
        record: &ChangelogRecord<'_>,
    ) -> Result<(), Error>;
}

/// A backend split into time segments, with the stream time that expires
/// them.
pub(crate) struct Segmented<B, L> {
    pub(crate) name: String,
    pub(crate) backend: B,
    pub(crate) retention: Timestamp,
    segment_interval: Timestamp,
    /// What `retention` counts from: window start or session end.
    retained: RetainedTime,
    /// The largest time (window start, session end) seen.
    observed: Timestamp,
    min_live_segment: i64,
    pub(crate) layout: L,
}

impl<B: Keyspaces, L> Segmented<B, L> {
    pub(crate) fn new(
        name: impl Into<String>,
        backend: B,
        retention: Timestamp,
        segment_interval: Timestamp,
        retained: RetainedTime,
        layout: L,
    ) -> Self {
        Segmented {
            name: name.into(),
            backend,
            retention,
            segment_interval: segment_interval.max(1),
            retained,
            observed: i64::MIN,
            min_live_segment: i64::MIN,
            layout,
        }
    }

    /// The segment that holds `time`.
    pub(crate) fn segment(&self, time: Timestamp) -> i64 {
        time.div_euclid(self.segment_interval)
    }

    /// The keyspace of the segment that holds `time`.
    pub(crate) fn keyspace(&self, time: Timestamp) -> i64 {
        segment_keyspace(self.segment(time))
    }

    /// Whether retention has dropped `time`.
    pub(crate) fn expired(&self, time: Timestamp) -> bool {
        self.retained.expired(time, self.observed, self.retention)
    }

    /// `time_from`, or the first time a lookup still sees if that is later
    /// ([`RetainedTime::first_readable`]).
    pub(crate) fn first_visible(&self, time_from: Timestamp) -> Timestamp {
        time_from.max(self.retained.first_readable(self.observed, self.retention))
    }

    /// `time_from`, or the first time not expired if that is later: what
    /// a scan by time (emit-on-close) still sees.
    pub(crate) fn first_kept(&self, time_from: Timestamp) -> Timestamp {
        time_from.max(self.retained.first_live(self.observed, self.retention))
    }

    /// The segment keyspaces, ascending, without the metadata keyspace.
    pub(crate) fn segment_keyspaces(&self) -> impl Iterator<Item = i64> {
        self.backend
            .keyspaces()
            .into_iter()
            .filter(|&ks| ks != META_KEYSPACE)
    }

    /// Advances stream time and drops the segments it left behind.
    pub(crate) fn observe(&mut self, time: Timestamp) -> Result<(), Error> {
        if time <= self.observed {
            return Ok(());
        }
        self.observed = time;
        let first_live = self.retained.first_live(self.observed, self.retention);
        let min_live = self.segment(first_live);
        if min_live > self.min_live_segment {
            self.min_live_segment = min_live;
            let expired: Vec<i64> = self
                .segment_keyspaces()
                .filter(|&ks| keyspace_segment(ks) < min_live)
                .collect();
            for ks in expired {
                self.backend.drop_keyspace(ks)?;
            }
        }
        Ok(())
    }
}

impl<B: Keyspaces, L: SegmentLayout> StateStore for Segmented<B, L> {
    forward_offsets!(backend);
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        self.backend.persistent()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        match open_with_observed(&mut self.backend, &self.name, context)? {
            Some(observed) => self.observe(observed),
            None => Ok(()),
        }
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
        for (index, record) in records.iter().enumerate() {
            L::restore_record(self, index, record)?;
        }
        Ok(())
    }
}
