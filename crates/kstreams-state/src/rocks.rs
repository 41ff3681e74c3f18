//! The RocksDB backend (its options are in `rocks_settings`).
//!
//! One RocksDB instance per store and task, opened at init in the task
//! directory: `<task dir>/rocksdb/<store>` for key-value stores, as Kafka
//! Streams; `<task dir>/kstreams/<store>` for versioned, window and session
//! stores, whose segments are column families that expiry drops whole.
//! Kafka Streams lays those out otherwise (one RocksDB per window segment
//! in `<task dir>/<store>/`, versioned segments as key prefixes in
//! `rocksdb/<store>`), so they live where it does not look, and their
//! offsets only in their own `offsets` family, not in the task's
//! `.checkpoint`: Kafka Streams taking over restores them from their
//! changelogs, and kstreams taking over restores Kafka Streams' ones. Writes skip the
//! write-ahead log as in Kafka Streams: the changelog is what makes state
//! durable, and a flush at commit puts the memtables on disk.
//!
//! A key-value store has Kafka Streams 4.4's files, so that an application
//! moved from one to the other on the same state directory resumes its
//! stores: values in `default` (plain) or `keyValueWithTimestamp`
//! (timestamped), and the `offsets` column family of KIP-1035 with the
//! changelog offset the data reaches under `"<topic>-<partition>"` (i64
//! big-endian) and `"status"` = 1 while open, 0 once closed cleanly (every
//! store here keeps that family). A store with column families Kafka Streams
//! or kstreams would not have written for it is refused, and the task
//! rebuilds it from its changelog.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, FlushOptions, IteratorMode, Options, ReadOptions,
    WriteBatch, WriteOptions, DB,
};

use crate::engine::backend::{prefix_successor, BytesIter, DirLayout, Keyspaces, ValueFamily};
use crate::pending_writes::{PendingWrites, MAX_HELD_BYTES};
use crate::rocks_metrics::PropertyMetrics;
use crate::rocks_settings::RocksDbSettings;
use crate::uncommitted::{merged, Drained, Lookup, Uncommitted};
use crate::{BackgroundFlush, Error, RecordedOffset, StoreContext};

const DEFAULT_FAMILY: &str = "default";
/// Kafka Streams' `RocksDBTimestampedStore` column family.
const TIMESTAMPED_FAMILY: &str = "keyValueWithTimestamp";
/// Kafka Streams' column family of changelog offsets (KIP-1035).
const OFFSETS_FAMILY: &str = "offsets";
/// The segment keyspaces of versioned, window and session stores, each
/// under its [`segment_prefix`].
const SEGMENTS_FAMILY: &str = "kstreams.segments";
/// Kafka Streams 4.4's headers-aware store (KIP-1271): not opened here.
const HEADERS_FAMILY: &str = "keyValueWithTimestampAndHeaders";
const STATUS_KEY: &[u8] = b"status";
const STATUS_OPEN: i64 = 1;
const STATUS_CLOSED: i64 = 0;
/// The held writes' family slots: keyspace 0's family, and the segments
/// family.
const DATA_SLOT: u8 = 0;
const SEGMENTS_SLOT: u8 = 1;
/// Entries moved per write batch when an earlier layout is converted.
const MOVE_BATCH: usize = 10_000;
/// A file in the store's directory while transactional runs write it
/// (KIP-892): its offsets then describe its data even after a crash.
/// RocksDB leaves files it does not name alone, and Kafka Streams does not
/// look for it (it wipes such a store under exactly-once, as it wipes any
/// store not closed cleanly).
const TRANSACTIONAL_MARKER: &str = "kstreams-transactional";

/// A RocksDB instance with keyspaces: keyspace 0 is the data family
/// (`default`, or `keyValueWithTimestamp` for a timestamped key-value
/// store); the others are key prefixes in the segments family.
pub(crate) struct RocksKeyspaces {
    layout: DirLayout,
    /// Kafka Streams' metrics scope of the store (`rocksdb`,
    /// `rocksdb-window`, `rocksdb-session`): its metrics' `store_type`.
    scope: &'static str,
    name: String,
    /// Shared with a flush running on a thread of its own, if one is.
    db: Option<Arc<DB>>,
    options: Options,
    write: WriteOptions,
    /// A transaction's commit batch goes through RocksDB's write-ahead log
    /// (not synced): a killed process loses no committed batch, so its
    /// task resumes at its last commit. One append per commit, where
    /// Kafka Streams' skipped log would cost one per write.
    commit_write: WriteOptions,
    /// The segment keyspaces that may hold entries.
    spaces: BTreeSet<i64>,
    /// A prefixed key being built, reused so a read allocates nothing.
    scratch: RefCell<Vec<u8>>,
    /// Puts and deletes not yet handed to RocksDB: written as one sorted
    /// batch before the next read, drop, flush or close.
    pending: RefCell<PendingWrites>,
    settings: RocksDbSettings,
    /// Whether the store's last run closed it (its `status` was 0 or
    /// absent when it was opened): only then, or if that run wrote it
    /// transactionally, do its offsets describe its data.
    closed_cleanly: bool,
    /// Whether the store's last run wrote it transactionally (the marker
    /// file was there when it was opened).
    written_transactionally: bool,
    /// Opened for transactions ([`StoreContext::transactional_stores`]):
    /// RocksDB flushes all its column families at once, so that the
    /// offsets on disk never run ahead of the data.
    transactional: bool,
    /// The writes since the last commit, once transactions started: they
    /// reach RocksDB only with the offsets of a committed transaction.
    uncommitted: Option<Uncommitted>,
    /// Its RocksDB property metrics while open, when the task has a
    /// registry for them. Declared after `db`: dropped with it.
    property_metrics: Option<PropertyMetrics>,
    /// The flushes started by [`Keyspaces::flush_in_background`], each on
    /// a thread of its own: joined before the store flushes in place or is
    /// dropped, so that the database is closed when the store is (a task
    /// opened again on this thread finds its lock free).
    flushing: Vec<JoinHandle<()>>,
}

/// A keyspace's column family in an open database.
enum Family<'a> {
    Default,
    Named(&'a ColumnFamily),
}

/// Where a keyspace's entries are: their column family, and for a segment
/// keyspace the prefix of their keys there.
struct Place<'a> {
    family: Family<'a>,
    prefix: Option<[u8; 8]>,
}

impl Place<'_> {
    /// `key` as stored: behind the prefix, in `buf`.
    fn key<'b>(&self, key: &'b [u8], buf: &'b mut Vec<u8>) -> &'b [u8] {
        match &self.prefix {
            None => key,
            Some(prefix) => {
                buf.clear();
                buf.extend_from_slice(prefix);
                buf.extend_from_slice(key);
                buf
            }
        }
    }
}

/// The key prefix of a segment keyspace: big-endian with the sign bit
/// flipped, so that prefixes sort as their keyspaces do.
fn segment_prefix(ks: i64) -> [u8; 8] {
    ((ks as u64) ^ (1 << 63)).to_be_bytes()
}

fn prefix_keyspace(key: &[u8]) -> Option<i64> {
    let prefix: [u8; 8] = key.get(..8)?.try_into().ok()?;
    Some((u64::from_be_bytes(prefix) ^ (1 << 63)) as i64)
}

/// The partition's key in the offsets family, as Kafka's
/// `TopicPartition.toString()`.
fn offsets_key(topic: &str, partition: i32) -> Vec<u8> {
    format!("{topic}-{partition}").into_bytes()
}

fn read_i64(bytes: &[u8]) -> Option<i64> {
    Some(i64::from_be_bytes(bytes.try_into().ok()?))
}

/// A directory kstreams' segmented store had at `<task dir>/<store>`
/// before it moved out of Kafka Streams' way: a RocksDB right there
/// (Kafka Streams keeps one RocksDB per segment below it, never one at its
/// top).
fn earlier_segmented_dir(task_dir: &Path, store: &str) -> Option<PathBuf> {
    let dir = task_dir.join(store);
    dir.join("CURRENT").is_file().then_some(dir)
}

/// The column family of a segment keyspace in kstreams' earlier layout
/// (one family per segment), converted at open.
fn parse_cf_name(name: &str) -> Option<i64> {
    name.strip_prefix("ks.")?.parse().ok()
}

impl RocksKeyspaces {
    pub(crate) fn new(layout: DirLayout, scope: &'static str) -> Self {
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        RocksKeyspaces {
            layout,
            scope,
            name: String::new(),
            db: None,
            options: Options::default(),
            write,
            commit_write: WriteOptions::default(),
            spaces: BTreeSet::new(),
            scratch: RefCell::new(Vec::new()),
            pending: RefCell::new(PendingWrites::default()),
            settings: RocksDbSettings::default(),
            closed_cleanly: false,
            written_transactionally: false,
            transactional: false,
            uncommitted: None,
            property_metrics: None,
            flushing: Vec::new(),
        }
    }

    /// The column families open besides `default`.
    fn named_families(db: &DB) -> Vec<&ColumnFamily> {
        [TIMESTAMPED_FAMILY, SEGMENTS_FAMILY, OFFSETS_FAMILY]
            .into_iter()
            .filter_map(|family| db.cf_handle(family))
            .collect()
    }

    /// Sets the property metrics from RocksDB: at open (`now`), else
    /// unless they were set less than a second ago.
    fn refresh_metrics(&mut self, now: bool) {
        let (Some(db), Some(metrics)) = (&self.db, &mut self.property_metrics) else {
            return;
        };
        let families = Self::named_families(db);
        if now {
            metrics.read_at_open(db, &families);
        } else {
            metrics.refresh(db, &families);
        }
    }

    /// A column family the open should have made is not there (a bug).
    fn missing(&self, family: &str) -> Error {
        Error::engine(&self.name, format!("no column family {family}"))
    }

    fn uses_segments(&self) -> bool {
        matches!(self.layout, DirLayout::Versioned | DirLayout::Segmented)
    }

    /// The column family keyspace 0 lives in.
    fn data_family(&self) -> &'static str {
        match self.layout {
            DirLayout::KeyValue(ValueFamily::Timestamped) => TIMESTAMPED_FAMILY,
            _ => DEFAULT_FAMILY,
        }
    }

    fn place<'a>(&self, db: &'a DB, ks: i64) -> Result<Place<'a>, Error> {
        let (name, prefix) = if ks == 0 {
            (self.data_family(), None)
        } else {
            (SEGMENTS_FAMILY, Some(segment_prefix(ks)))
        };
        let family = match name {
            DEFAULT_FAMILY => Family::Default,
            named => Family::Named(db.cf_handle(named).ok_or_else(|| self.missing(named))?),
        };
        Ok(Place { family, prefix })
    }

    /// The column families to open besides `default`, after checking that
    /// the ones on disk are what this store writes. Anything else was
    /// written by another kind of store (or by Kafka Streams in a layout
    /// kstreams does not share): an error, and the task rebuilds the store.
    fn families_to_open(&self, existing: &[String], path: &Path) -> Result<Vec<String>, Error> {
        let foreign = |family: &str| {
            Error::engine(
                &self.name,
                format!(
                    "{} holds a column family '{family}' that this store does not write \
                     (another store type, or Kafka Streams' own layout of it)",
                    path.display()
                ),
            )
        };
        let mut open: Vec<String> = Vec::new();
        for family in existing.iter().filter(|f| f.as_str() != DEFAULT_FAMILY) {
            let expected = match self.layout {
                DirLayout::KeyValue(kind) => {
                    family == OFFSETS_FAMILY
                        || (kind == ValueFamily::Timestamped && family == TIMESTAMPED_FAMILY)
                }
                DirLayout::Versioned | DirLayout::Segmented => {
                    family == OFFSETS_FAMILY
                        || family == SEGMENTS_FAMILY
                        || parse_cf_name(family).is_some()
                }
            };
            if !expected || family == HEADERS_FAMILY {
                return Err(foreign(family));
            }
            open.push(family.clone());
        }
        let segments = self.uses_segments().then_some(SEGMENTS_FAMILY);
        for family in [self.data_family(), OFFSETS_FAMILY]
            .into_iter()
            .chain(segments)
        {
            if family != DEFAULT_FAMILY && !open.iter().any(|f| f == family) {
                open.push(family.to_string());
            }
        }
        Ok(open)
    }

    /// A timestamped store whose values are in `default`: the layout of
    /// kstreams before it wrote Kafka Streams' (only `default` on disk), whose
    /// values move as they are. Values in `default` beside Kafka Streams'
    /// families (its pre-2.3 upgrade mode, or an earlier kstreams on its
    /// files) cannot be told apart: an error, rebuilt from the changelog.
    fn move_earlier_layout(&self, db: &DB, existing: &[String]) -> Result<(), Error> {
        if self.data_family() == DEFAULT_FAMILY || db.iterator(IteratorMode::Start).next().is_none()
        {
            return Ok(());
        }
        if existing.iter().any(|f| f != DEFAULT_FAMILY) {
            return Err(Error::engine(
                &self.name,
                "values in both the default and the keyValueWithTimestamp column families",
            ));
        }
        let target = db
            .cf_handle(TIMESTAMPED_FAMILY)
            .ok_or_else(|| self.missing(TIMESTAMPED_FAMILY))?;
        let mut moved = 0usize;
        let mut batch = WriteBatch::default();
        for item in db.iterator(IteratorMode::Start) {
            let (key, value) = item.map_err(|e| self.err(e))?;
            batch.put_cf(target, &key, &value);
            batch.delete(&key);
            moved += 1;
            if batch.len() >= 2 * MOVE_BATCH {
                db.write_opt(std::mem::take(&mut batch), &self.write)
                    .map_err(|e| self.err(e))?;
            }
        }
        db.write_opt(batch, &self.write).map_err(|e| self.err(e))?;
        let mut flush = FlushOptions::default();
        flush.set_wait(true);
        db.flush_cf_opt(target, &flush)
            .and_then(|()| db.flush_opt(&flush))
            .map_err(|e| self.err(e))?;
        log::info!(
            "state store {}: moved {moved} values from the default column family to {TIMESTAMPED_FAMILY}, \
             as Kafka Streams keeps them",
            self.name
        );
        Ok(())
    }

    /// Deletes the versioned store kstreams kept at `rocksdb/<store>` before
    /// it moved under `kstreams/`: Kafka Streams opens that path for its own
    /// versioned store and fails on kstreams' column families (`ks.N` each
    /// segment then, `kstreams.segments` now). Only kstreams writes those (Kafka Streams' files there are left alone);
    /// the store restores from its changelog once.
    fn remove_earlier_versioned(&self, earlier: &Path) -> Result<(), Error> {
        let families = DB::list_cf(&Options::default(), earlier).unwrap_or_default();
        if !families
            .iter()
            .any(|f| f == SEGMENTS_FAMILY || parse_cf_name(f).is_some())
        {
            return Ok(());
        }
        std::fs::remove_dir_all(earlier).map_err(|e| Error::io("removing", earlier, e))?;
        log::info!(
            "state store {}: removed its earlier files at {}; it restores from its changelog",
            self.name,
            earlier.display()
        );
        Ok(())
    }

    /// Reads the last run's status and marks the store open, on disk at
    /// once: data flushed later must never sit beside a `closed` status.
    fn mark_open(&mut self) -> Result<(), Error> {
        let db = self.db()?;
        let Some(offsets) = db.cf_handle(OFFSETS_FAMILY) else {
            return Ok(());
        };
        let status = db.get_cf(offsets, STATUS_KEY).map_err(|e| self.err(e))?;
        let closed_cleanly = status
            .as_deref()
            .is_none_or(|s| read_i64(s) == Some(STATUS_CLOSED));
        db.put_cf_opt(offsets, STATUS_KEY, STATUS_OPEN.to_be_bytes(), &self.write)
            .map_err(|e| self.err(e))?;
        let mut flush = FlushOptions::default();
        flush.set_wait(true);
        db.flush_cf_opt(offsets, &flush).map_err(|e| self.err(e))?;
        self.closed_cleanly = closed_cleanly;
        Ok(())
    }

    /// Reads whether the last run wrote the store transactionally, and
    /// says whether this one does, before anything is written: a run
    /// without transactions removes the marker first, since its writes may
    /// then run ahead of the offsets.
    fn mark_transactional(&mut self, path: &Path) -> Result<(), Error> {
        let marker = path.join(TRANSACTIONAL_MARKER);
        self.written_transactionally = marker.is_file();
        match (self.transactional, self.written_transactionally) {
            (true, false) => {
                std::fs::write(&marker, b"").map_err(|e| Error::io("creating", &marker, e))
            }
            (false, true) => {
                std::fs::remove_file(&marker).map_err(|e| Error::io("removing", &marker, e))
            }
            _ => Ok(()),
        }
    }

    /// Adds the uncommitted writes to `batch` (segment drops first), and
    /// leaves none held.
    fn drain_uncommitted(&mut self, batch: &mut WriteBatch) -> Result<(), Error> {
        let Some(mut uncommitted) = self.uncommitted.take() else {
            return Ok(());
        };
        let result = (|| {
            let db = self.db()?;
            let segments = match self.uses_segments() {
                true => db.cf_handle(SEGMENTS_FAMILY),
                false => None,
            };
            let data = self.place(db, 0)?.family;
            let mut key_buf = Vec::new();
            uncommitted.drain(|drained| match drained {
                Drained::Dropped(ks) => {
                    if let Some(family) = segments {
                        let from = segment_prefix(ks);
                        let to = prefix_successor(&from).unwrap_or_else(|| vec![0xFF; 9]);
                        batch.delete_range_cf(family, &from[..], &to[..]);
                    }
                }
                Drained::Write(0, key, value) => match (&data, value) {
                    (Family::Default, Some(v)) => batch.put(key, v),
                    (Family::Default, None) => batch.delete(key),
                    (Family::Named(cf), Some(v)) => batch.put_cf(*cf, key, v),
                    (Family::Named(cf), None) => batch.delete_cf(*cf, key),
                },
                Drained::Write(ks, key, value) => {
                    // `check_writable` lets segment writes in only where
                    // the layout has segments.
                    let Some(family) = segments else {
                        return;
                    };
                    key_buf.clear();
                    key_buf.extend_from_slice(&segment_prefix(ks));
                    key_buf.extend_from_slice(key);
                    match value {
                        Some(v) => batch.put_cf(family, &key_buf, v),
                        None => batch.delete_cf(family, &key_buf),
                    }
                }
            });
            Ok(())
        })();
        self.uncommitted = Some(uncommitted);
        result
    }

    /// What a flush writes out, once the store's held writes reached
    /// RocksDB: `None` when there is nothing to write out.
    fn flush_prepared(&mut self) -> Result<Option<Arc<DB>>, Error> {
        // Nothing is held once closed: writes are held only while open.
        self.write_pending()?;
        // Before the memtables are written out: what they held between
        // two commits is what an operator needs to see.
        self.refresh_metrics(false);
        if self.uncommitted.is_some() {
            // The writes wait for the transaction's commit. The memtables
            // hold committed batches only, which the write-ahead log keeps
            // until RocksDB writes them out (all families at once) as they
            // fill: nothing to write out at each commit.
            return Ok(None);
        }
        Ok(self.db.clone())
    }

    /// Waits for the flush running on a thread of its own, if one is; its
    /// outcome went to whoever started it.
    fn join_background_flush(&mut self) {
        for thread in self.flushing.drain(..) {
            if thread.join().is_err() {
                log::warn!("state store {}: its flush thread panicked", self.name);
            }
        }
    }

    fn db(&self) -> Result<&DB, Error> {
        self.db.as_deref().ok_or_else(|| Error::NotOpen {
            store: self.name.clone(),
        })
    }

    fn err(&self, e: rocksdb::Error) -> Error {
        Error::engine(&self.name, e)
    }

    /// Holds a put (`Some`) or delete (`None`) of `key` in keyspace `ks`
    /// (the caller checked it is writable), writing what is held once it
    /// reaches [`MAX_HELD_BYTES`].
    fn hold(&mut self, ks: i64, key: &[u8], value: Option<&[u8]>) -> Result<(), Error> {
        if let Some(uncommitted) = &mut self.uncommitted {
            uncommitted.write(ks, key, value);
            return Ok(());
        }
        let pending = self.pending.get_mut();
        match ks {
            0 => pending.hold(DATA_SLOT, &[], key, value),
            _ => pending.hold(SEGMENTS_SLOT, &segment_prefix(ks), key, value),
        }
        if pending.bytes_held() >= MAX_HELD_BYTES {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Whether keyspace `ks` can be written: the store is open, and a
    /// segment keyspace needs a layout with segments.
    fn check_writable(&self, ks: i64) -> Result<(), Error> {
        self.db()?;
        if ks != 0 && !self.uses_segments() {
            return Err(self.missing(SEGMENTS_FAMILY));
        }
        Ok(())
    }

    /// Hands the held writes to RocksDB as one batch; every read, drop and
    /// flush calls this first, so the store reads its own writes.
    fn write_pending(&self) -> Result<(), Error> {
        let mut pending = self.pending.borrow_mut();
        if pending.is_empty() {
            return Ok(());
        }
        let db = self.db()?;
        let data = self.place(db, 0)?.family;
        // `hold` keeps segment writes only where the layout has segments.
        let segments = match self.uses_segments() {
            true => self.place(db, 1)?.family,
            false => Family::Default,
        };
        let mut batch = WriteBatch::with_capacity_bytes(pending.bytes_held() + 4096);
        pending.drain_sorted(|slot, key, value| {
            let family = match slot {
                DATA_SLOT => &data,
                _ => &segments,
            };
            match (family, value) {
                (Family::Default, Some(v)) => batch.put(key, v),
                (Family::Default, None) => batch.delete(key),
                (Family::Named(cf), Some(v)) => batch.put_cf(*cf, key, v),
                (Family::Named(cf), None) => batch.delete_cf(*cf, key),
            }
        });
        db.write_opt(batch, &self.write).map_err(|e| self.err(e))
    }

    /// The entries RocksDB holds in keyspace `ks` between the bounds.
    fn committed_range(
        &self,
        ks: i64,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error> {
        self.write_pending()?;
        let db = self.db()?;
        let place = self.place(db, ks)?;
        if place.prefix.is_some() && !self.spaces.contains(&ks) {
            return Ok(Box::new(std::iter::empty()));
        }
        let prefixed = |key: &[u8]| -> Vec<u8> {
            let mut out = place.prefix.map_or_else(Vec::new, |p| p.to_vec());
            out.extend_from_slice(key);
            out
        };
        let lower = match from {
            Bound::Included(k) => Some(prefixed(k)),
            Bound::Excluded(k) => Some(prefixed(&after(k))),
            Bound::Unbounded => place.prefix.map(|p| p.to_vec()),
        };
        let upper = match to {
            Bound::Included(k) => Some(prefixed(&after(k))),
            Bound::Excluded(k) => Some(prefixed(k)),
            Bound::Unbounded => place.prefix.and_then(|p| prefix_successor(&p)),
        };
        if let (Some(l), Some(u)) = (&lower, &upper) {
            if l >= u {
                return Ok(Box::new(std::iter::empty()));
            }
        }
        let mut read = ReadOptions::default();
        if let Some(l) = lower {
            read.set_iterate_lower_bound(l);
        }
        if let Some(u) = upper {
            read.set_iterate_upper_bound(u);
        }
        let mode = if reverse {
            IteratorMode::End
        } else {
            IteratorMode::Start
        };
        let iter = match place.family {
            Family::Default => db.iterator_opt(mode, read),
            Family::Named(cf) => db.iterator_cf_opt(cf, read, mode),
        };
        let name = self.name.clone();
        let strip = if place.prefix.is_some() { 8 } else { 0 };
        Ok(Box::new(iter.map(move |item| {
            item.map(|(k, v)| {
                let key = if strip == 0 {
                    k.into_vec()
                } else {
                    k[strip..].to_vec()
                };
                (key, v.into_vec())
            })
            .map_err(|e| Error::engine(&name, e))
        })))
    }

    /// Notes that segment keyspace `ks` may now hold entries.
    fn ensure(&mut self, ks: i64) {
        if ks != 0 {
            self.spaces.insert(ks);
        }
    }

    /// The segment keyspaces that hold entries: one seek per keyspace.
    fn stored_keyspaces(&self, db: &DB) -> Result<BTreeSet<i64>, Error> {
        let mut spaces = BTreeSet::new();
        let Some(family) = db.cf_handle(SEGMENTS_FAMILY) else {
            return Ok(spaces);
        };
        let mut iter = db.raw_iterator_cf(family);
        iter.seek_to_first();
        while let Some(key) = iter.key() {
            let ks = prefix_keyspace(key)
                .ok_or_else(|| Error::engine(&self.name, "a key without its segment prefix"))?;
            spaces.insert(ks);
            match ks.checked_add(1) {
                Some(next) => iter.seek(segment_prefix(next)),
                None => break,
            }
        }
        iter.status().map_err(|e| self.err(e))?;
        Ok(spaces)
    }

    /// Converts kstreams' earlier layout of segments, a column family each
    /// (`ks.N`), to key prefixes in the segments family: copied, flushed,
    /// then the old families dropped, so that a conversion cut short is
    /// done again from the start.
    fn convert_segment_families(&self, db: &mut DB, existing: &[String]) -> Result<(), Error> {
        let earlier: Vec<(&String, i64)> = existing
            .iter()
            .filter_map(|f| Some((f, parse_cf_name(f)?)))
            .collect();
        if earlier.is_empty() {
            return Ok(());
        }
        let target = db
            .cf_handle(SEGMENTS_FAMILY)
            .ok_or_else(|| self.missing(SEGMENTS_FAMILY))?;
        let mut moved = 0usize;
        let mut batch = WriteBatch::default();
        let mut key = Vec::new();
        for (family, ks) in &earlier {
            let source = db.cf_handle(family).ok_or_else(|| self.missing(family))?;
            let place = Place {
                family: Family::Named(target),
                prefix: Some(segment_prefix(*ks)),
            };
            for item in db.iterator_cf(source, IteratorMode::Start) {
                let (k, v) = item.map_err(|e| self.err(e))?;
                batch.put_cf(target, place.key(&k, &mut key), &v);
                moved += 1;
                if batch.len() >= MOVE_BATCH {
                    db.write_opt(std::mem::take(&mut batch), &self.write)
                        .map_err(|e| self.err(e))?;
                }
            }
        }
        db.write_opt(batch, &self.write).map_err(|e| self.err(e))?;
        let mut flush = FlushOptions::default();
        flush.set_wait(true);
        db.flush_cf_opt(target, &flush).map_err(|e| self.err(e))?;
        for (family, _) in &earlier {
            db.drop_cf(family).map_err(|e| self.err(e))?;
        }
        log::info!(
            "state store {}: moved {moved} entries of {} segment column families into {SEGMENTS_FAMILY}",
            self.name,
            earlier.len()
        );
        Ok(())
    }
}

/// RocksDB writes its memtables out when it is closed without a flush;
/// the writes still held here go to it first, so that they do too.
impl Drop for RocksKeyspaces {
    fn drop(&mut self) {
        self.join_background_flush();
        // Uncommitted writes are forgotten: the transaction they belong to
        // never committed here.
        self.uncommitted = None;
        if let Err(e) = self.write_pending() {
            log::warn!("state store {}: writes lost at drop: {e}", self.name);
        }
    }
}

/// A background flush's outcome holder: a flush thread that ends without
/// an outcome (it panicked) leaves a failure, not a flush pending forever.
struct FinishOnDrop(BackgroundFlush);

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.finish(Err(
            "the flush thread ended without writing the memtables out".to_string(),
        ));
    }
}

/// Writes every column family's memtables out to files, waiting for it.
fn write_out(db: &DB) -> Result<(), rocksdb::Error> {
    let mut opts = FlushOptions::default();
    opts.set_wait(true);
    db.flush_opt(&opts)?;
    for cf in RocksKeyspaces::named_families(db) {
        db.flush_cf_opt(cf, &opts)?;
    }
    Ok(())
}

fn after(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.extend_from_slice(key);
    out.push(0);
    out
}

impl Keyspaces for RocksKeyspaces {
    fn persistent(&self) -> bool {
        true
    }

    fn open(&mut self, store: &str, context: &StoreContext) -> Result<(), Error> {
        self.name = store.to_string();
        if self.db.is_some() {
            return Ok(());
        }
        let task_dir = context
            .task_directory()
            .ok_or_else(|| Error::NoStateDirectory {
                store: store.to_string(),
            })?;
        let path: PathBuf = match self.layout {
            DirLayout::KeyValue(_) => task_dir.join("rocksdb").join(store),
            DirLayout::Versioned | DirLayout::Segmented => task_dir.join("kstreams").join(store),
        };
        if let Some(earlier) = earlier_segmented_dir(task_dir, store)
            .filter(|_| self.layout == DirLayout::Segmented && !path.exists())
        {
            // Its segments move as they are; its offsets were in the
            // task's `.checkpoint`, which still has them this once.
            let parent = task_dir.join("kstreams");
            std::fs::create_dir_all(&parent).map_err(|e| Error::io("creating", &parent, e))?;
            std::fs::rename(&earlier, &path).map_err(|e| Error::io("moving", &earlier, e))?;
            log::info!(
                "state store {store}: moved {} to {}",
                earlier.display(),
                path.display()
            );
        }
        if self.layout == DirLayout::Versioned {
            self.remove_earlier_versioned(&task_dir.join("rocksdb").join(store))?;
        }
        std::fs::create_dir_all(&path).map_err(|e| Error::io("creating", &path, e))?;
        self.settings = context.rocksdb().clone();
        self.options = self.settings.options(store);
        self.options.create_missing_column_families(true);
        self.transactional = context.transactional_stores();
        if self.transactional {
            self.options.set_atomic_flush(true);
        }
        let existing = DB::list_cf(&self.options, &path).unwrap_or_default();
        let families = self.families_to_open(&existing, &path)?;
        // `default` too: the `rocksdb` crate opens an unlisted `default`
        // with RocksDB's own options (a 32 MiB cache of its own, level
        // compaction, 64 MiB memtables), which would leave a plain store's
        // data outside Kafka Streams' defaults, the config setter and the
        // bounded memory.
        let descriptors: Vec<ColumnFamilyDescriptor> = std::iter::once(DEFAULT_FAMILY)
            .chain(families.iter().map(String::as_str))
            .map(|n| ColumnFamilyDescriptor::new(n, self.options.clone()))
            .collect();
        let mut db = DB::open_cf_descriptors(&self.options, &path, descriptors)
            .map_err(|e| Error::engine(store, format!("opening {}: {e}", path.display())))?;
        self.move_earlier_layout(&db, &existing)?;
        self.convert_segment_families(&mut db, &existing)?;
        self.spaces = self.stored_keyspaces(&db)?;
        self.db = Some(Arc::new(db));
        self.mark_transactional(&path)?;
        self.mark_open()?;
        if let Some(registry) = context.rocksdb_metrics() {
            self.property_metrics = Some(PropertyMetrics::new(
                registry,
                self.scope,
                store,
                context.task_id(),
            ));
            self.refresh_metrics(true);
        }
        Ok(())
    }

    fn is_open(&self) -> bool {
        self.db.is_some()
    }

    fn get(&self, ks: i64, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let mut value = Vec::new();
        Ok(self.get_into(ks, key, &mut value)?.then_some(value))
    }

    fn get_into(&self, ks: i64, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        if let Some(uncommitted) = &self.uncommitted {
            match uncommitted.lookup(ks, key) {
                Lookup::Written(Some(value)) => {
                    out.extend_from_slice(value);
                    return Ok(true);
                }
                Lookup::Written(None) | Lookup::Dropped => return Ok(false),
                Lookup::Unwritten => {}
            }
        }
        self.write_pending()?;
        let db = self.db()?;
        let place = self.place(db, ks)?;
        if place.prefix.is_some() && !self.spaces.contains(&ks) {
            return Ok(false);
        }
        let mut buf = self.scratch.borrow_mut();
        let key = place.key(key, &mut buf);
        // A pinned read lends RocksDB's block: one copy into `out`, no
        // allocation once the buffer has grown.
        let found = match place.family {
            Family::Default => db.get_pinned(key),
            Family::Named(cf) => db.get_pinned_cf(cf, key),
        };
        match found.map_err(|e| self.err(e))? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn put(&mut self, ks: i64, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.check_writable(ks)?;
        self.ensure(ks);
        self.hold(ks, key, Some(value))
    }

    fn delete(&mut self, ks: i64, key: &[u8]) -> Result<(), Error> {
        self.check_writable(ks)?;
        if ks != 0 && !self.spaces.contains(&ks) {
            return Ok(());
        }
        self.hold(ks, key, None)
    }

    fn write_all(&mut self, ks: i64, entries: &[(&[u8], Option<&[u8]>)]) -> Result<(), Error> {
        if self.uncommitted.is_some() {
            self.check_writable(ks)?;
            self.ensure(ks);
            if let Some(uncommitted) = &mut self.uncommitted {
                for (key, value) in entries {
                    uncommitted.write(ks, key, *value);
                }
            }
            return Ok(());
        }
        self.write_pending()?;
        self.ensure(ks);
        let db = self.db()?;
        let place = self.place(db, ks)?;
        let mut buf = self.scratch.borrow_mut();
        let mut batch = WriteBatch::default();
        for (k, v) in entries {
            let k = place.key(k, &mut buf);
            match (&place.family, v) {
                (Family::Default, Some(v)) => batch.put(k, v),
                (Family::Default, None) => batch.delete(k),
                (Family::Named(cf), Some(v)) => batch.put_cf(*cf, k, v),
                (Family::Named(cf), None) => batch.delete_cf(*cf, k),
            }
        }
        db.write_opt(batch, &self.write).map_err(|e| self.err(e))
    }

    fn range(
        &self,
        ks: i64,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error> {
        let Some(uncommitted) = &self.uncommitted else {
            return self.committed_range(ks, from, to, reverse);
        };
        let committed: BytesIter<'_> = match uncommitted.hides(ks) {
            true => Box::new(std::iter::empty()),
            false => self.committed_range(ks, from, to, reverse)?,
        };
        Ok(merged(
            committed,
            uncommitted.range(ks, from, to, reverse),
            reverse,
        ))
    }

    fn keyspaces(&self) -> Vec<i64> {
        let mut out: Vec<i64> = self.spaces.iter().copied().collect();
        if self.db.is_some() && !self.spaces.contains(&0) {
            out.push(0);
            out.sort_unstable();
        }
        out
    }

    fn drop_keyspace(&mut self, ks: i64) -> Result<(), Error> {
        self.write_pending()?;
        if ks == 0 || !self.spaces.remove(&ks) {
            return Ok(());
        }
        if let Some(uncommitted) = &mut self.uncommitted {
            // Its entries on disk go with the next commit.
            uncommitted.drop_keyspace(ks);
            return Ok(());
        }
        let db = self.db()?;
        let family = db
            .cf_handle(SEGMENTS_FAMILY)
            .ok_or_else(|| self.missing(SEGMENTS_FAMILY))?;
        let from = segment_prefix(ks);
        let to = prefix_successor(&from).unwrap_or_else(|| vec![0xFF; 9]);
        // One range tombstone; compaction then drops the segment's files.
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(family, &from[..], &to[..]);
        db.write_opt(batch, &self.write).map_err(|e| self.err(e))
    }

    fn approximate_len(&self, ks: i64) -> Result<u64, Error> {
        self.write_pending()?;
        let db = self.db()?;
        let place = self.place(db, ks)?;
        if place.prefix.is_some() {
            // RocksDB estimates per family only: a segment is counted.
            return Ok(self
                .range(ks, Bound::Unbounded, Bound::Unbounded, false)?
                .count() as u64);
        }
        let prop = "rocksdb.estimate-num-keys";
        let n = match place.family {
            Family::Default => db.property_int_value(prop),
            Family::Named(cf) => db.property_int_value_cf(cf, prop),
        };
        Ok(n.map_err(|e| self.err(e))?.unwrap_or(0))
    }

    fn flush(&mut self) -> Result<(), Error> {
        self.join_background_flush();
        let Some(db) = self.flush_prepared()? else {
            return Ok(());
        };
        write_out(&db).map_err(|e| self.err(e))
    }

    fn flush_in_background(&mut self) -> Result<Option<BackgroundFlush>, Error> {
        let Some(db) = self.flush_prepared()? else {
            return Ok(None);
        };
        self.flushing.retain(|thread| !thread.is_finished());
        let flush = BackgroundFlush::started(&self.name);
        // Ended as failed unless the flush says otherwise: a panic in it
        // is not a flush that never ends.
        let outcome = FinishOnDrop(flush.clone());
        // Beside a flush still running if there is one: RocksDB writes its
        // memtables out oldest first, so this one's end means everything
        // written before it is on disk.
        let in_flight = Arc::clone(&db);
        let started = std::thread::Builder::new()
            .name(format!("kstreams-flush-{}", self.name))
            .spawn(move || {
                outcome
                    .0
                    .finish(write_out(&in_flight).map_err(|e| e.to_string()))
            });
        match started {
            Ok(thread) => {
                self.flushing.push(thread);
                Ok(Some(flush))
            }
            Err(e) => {
                log::warn!(
                    "state store {}: no thread for a flush ({e}); flushing in place",
                    self.name
                );
                write_out(&db).map_err(|e| self.err(e))?;
                Ok(None)
            }
        }
    }

    fn close(&mut self) -> Result<(), Error> {
        // Writes no commit took belong to work that is thrown away (a dirty
        // close, an aborted transaction): what is on disk is the last
        // committed state, with its offsets.
        if let Some(uncommitted) = self.uncommitted.take() {
            if !uncommitted.is_empty() {
                log::debug!(
                    "state store {}: closing without a commit; {} bytes of uncommitted writes \
                     forgotten",
                    self.name,
                    uncommitted.bytes()
                );
            }
        }
        // The data on disk before the status says "closed".
        self.flush()?;
        if let Some(db) = &self.db {
            if let Some(offsets) = db.cf_handle(OFFSETS_FAMILY) {
                let mut flush = FlushOptions::default();
                flush.set_wait(true);
                db.put_cf_opt(
                    offsets,
                    STATUS_KEY,
                    STATUS_CLOSED.to_be_bytes(),
                    &self.write,
                )
                .and_then(|()| db.flush_cf_opt(offsets, &flush))
                .map_err(|e| self.err(e))?;
            }
        }
        self.property_metrics = None;
        if self.db.take().is_some() {
            if let Some(setter) = &self.settings.config_setter {
                setter.close(&self.name);
            }
        }
        Ok(())
    }

    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<(), Error> {
        self.write_pending()?;
        // The transaction's writes and the offsets they reach, in one
        // batch: RocksDB applies it whole or not at all.
        let mut batch = WriteBatch::default();
        self.drain_uncommitted(&mut batch)?;
        let db = self.db()?;
        let Some(family) = db.cf_handle(OFFSETS_FAMILY) else {
            return db
                .write_opt(batch, &self.commit_write)
                .map_err(|e| self.err(e));
        };
        if offsets.is_empty() {
            // Forget them all (Kafka Streams' commit of an empty map).
            for item in db.iterator_cf(family, IteratorMode::Start) {
                let (key, _) = item.map_err(|e| self.err(e))?;
                if &*key != STATUS_KEY {
                    batch.delete_cf(family, &key);
                }
            }
        }
        for (topic, partition, offset) in offsets {
            batch.put_cf(family, offsets_key(topic, *partition), offset.to_be_bytes());
        }
        let write = match self.uncommitted {
            Some(_) => &self.commit_write,
            None => &self.write,
        };
        db.write_opt(batch, write).map_err(|e| self.err(e))
    }

    fn committed_offset(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<RecordedOffset>, Error> {
        let db = self.db()?;
        let Some(family) = db.cf_handle(OFFSETS_FAMILY) else {
            return Ok(None);
        };
        let value = db
            .get_cf(family, offsets_key(topic, partition))
            .map_err(|e| self.err(e))?;
        Ok(value
            .as_deref()
            .and_then(read_i64)
            .map(|offset| RecordedOffset {
                offset,
                closed_cleanly: self.closed_cleanly,
                written_transactionally: self.written_transactionally,
            }))
    }

    fn checkpointed_in_task_file(&self) -> bool {
        matches!(self.layout, DirLayout::KeyValue(_))
    }

    fn start_transactions(&mut self) -> Result<(), Error> {
        if !self.transactional || self.uncommitted.is_some() {
            return Ok(());
        }
        self.db()?;
        // What the restore wrote skipped the write-ahead log: it goes to
        // disk now, or a crash would lose it from under the commits that
        // the log keeps.
        self.flush()?;
        self.uncommitted = Some(Uncommitted::default());
        Ok(())
    }

    fn uncommitted_bytes(&self) -> usize {
        self.uncommitted.as_ref().map_or(0, Uncommitted::bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_across_threads<T: Send + Sync + Clone>() {}

    fn opened(dir: &Path, layout: DirLayout) -> RocksKeyspaces {
        let mut store = RocksKeyspaces::new(layout, "rocksdb");
        let context = StoreContext::new("app", "0_0", 0).with_task_directory(dir);
        store.open("held", &context).unwrap();
        store
    }

    fn keys(store: &RocksKeyspaces, ks: i64) -> Vec<(Vec<u8>, Vec<u8>)> {
        store
            .range(ks, Bound::Unbounded, Bound::Unbounded, false)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn held_writes_are_read_back_before_they_reach_rocksdb() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = opened(dir.path(), DirLayout::Segmented);
        store.put(3, b"b", b"2").unwrap();
        store.put(3, b"a", b"1").unwrap();
        store.put(0, b"meta", b"m").unwrap();
        assert!(!store.pending.borrow().is_empty());
        assert_eq!(store.get(3, b"a").unwrap(), Some(b"1".to_vec()));
        assert!(store.pending.borrow().is_empty());
        store.put(3, b"a", b"one").unwrap();
        store.delete(3, b"b").unwrap();
        store.put(4, b"c", b"3").unwrap();
        assert_eq!(keys(&store, 3), vec![(b"a".to_vec(), b"one".to_vec())]);
        assert_eq!(keys(&store, 4), vec![(b"c".to_vec(), b"3".to_vec())]);
        assert_eq!(store.get(0, b"meta").unwrap(), Some(b"m".to_vec()));
        // A dropped segment loses its held writes with it.
        store.put(5, b"d", b"4").unwrap();
        store.drop_keyspace(5).unwrap();
        assert!(keys(&store, 5).is_empty());
    }

    #[test]
    fn held_writes_reach_disk_at_flush_and_at_a_drop_without_close() {
        let dir = tempfile::tempdir().unwrap();
        let layout = DirLayout::KeyValue(ValueFamily::Timestamped);
        let mut store = opened(dir.path(), layout);
        store.put(0, b"k", b"v").unwrap();
        store.flush().unwrap();
        store.put(0, b"later", b"w").unwrap();
        drop(store);
        let store = opened(dir.path(), layout);
        assert_eq!(
            keys(&store, 0),
            vec![
                (b"k".to_vec(), b"v".to_vec()),
                (b"later".to_vec(), b"w".to_vec())
            ]
        );
    }

    /// Entries in a store's memtables, all families: what a flush has not
    /// written out.
    fn in_memtables(store: &RocksKeyspaces) -> u64 {
        let db = store.db().unwrap();
        let prop = "rocksdb.num-entries-active-mem-table";
        let imm = "rocksdb.num-entries-imm-mem-tables";
        let mut n = db.property_int_value(prop).unwrap().unwrap_or(0)
            + db.property_int_value(imm).unwrap().unwrap_or(0);
        for cf in RocksKeyspaces::named_families(db) {
            n += db.property_int_value_cf(cf, prop).unwrap().unwrap_or(0);
            n += db.property_int_value_cf(cf, imm).unwrap().unwrap_or(0);
        }
        n
    }

    #[test]
    fn a_background_flush_writes_out_what_was_written_before_it_and_ends_before_close() {
        let dir = tempfile::tempdir().unwrap();
        let layout = DirLayout::KeyValue(ValueFamily::Timestamped);
        let mut store = opened(dir.path(), layout);
        for i in 0..1_000u32 {
            store.put(0, &i.to_be_bytes(), b"v").unwrap();
        }
        // Held writes reach RocksDB before the flush starts.
        let first = store
            .flush_in_background()
            .unwrap()
            .expect("a flush thread");
        // A second one while the first may run, beside it.
        store.put(0, b"after", b"w").unwrap();
        let second = store
            .flush_in_background()
            .unwrap()
            .expect("a flush thread");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !BackgroundFlush::all_done(&[first.clone(), second.clone()]).unwrap() {
            assert!(
                std::time::Instant::now() < deadline,
                "the flushes never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            in_memtables(&store),
            0,
            "the memtables were not written out"
        );
        // A third one runs when the store closes: close waits for it, and
        // the database's lock is free for the next open.
        store.put(0, b"last", b"x").unwrap();
        let third = store
            .flush_in_background()
            .unwrap()
            .expect("a flush thread");
        store.close().unwrap();
        assert!(third.outcome().expect("done at close").is_ok());
        let store = opened(dir.path(), layout);
        assert_eq!(keys(&store, 0).len(), 1_002);
    }

    #[test]
    fn a_key_value_layout_refuses_segment_writes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = opened(dir.path(), DirLayout::KeyValue(ValueFamily::Plain));
        let err = store.put(2, b"k", b"v").unwrap_err();
        assert!(err.to_string().contains(SEGMENTS_FAMILY), "{err}");
        let err = store.delete(2, b"k").unwrap_err();
        assert!(err.to_string().contains(SEGMENTS_FAMILY), "{err}");
        assert!(store.pending.borrow().is_empty());
    }

    fn opened_transactional(dir: &Path, layout: DirLayout, transactional: bool) -> RocksKeyspaces {
        let mut store = RocksKeyspaces::new(layout, "rocksdb");
        let context = StoreContext::new("app", "0_0", 0)
            .with_task_directory(dir)
            .with_transactional_stores(transactional);
        store.open("held", &context).unwrap();
        store.start_transactions().unwrap();
        store
    }

    fn pair(k: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
        (k.to_vec(), v.to_vec())
    }

    #[test]
    fn a_transactional_store_reads_its_uncommitted_writes_and_writes_them_only_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let layout = DirLayout::KeyValue(ValueFamily::Timestamped);
        let mut store = opened_transactional(dir.path(), layout, true);
        store.put(0, b"a", b"1").unwrap();
        store.put(0, b"b", b"2").unwrap();
        store.commit_offsets(&[("changelog", 0, 10)]).unwrap();
        assert_eq!(store.uncommitted_bytes(), 0);
        // Uncommitted: an overwrite, a delete and a new key.
        store.put(0, b"a", b"one").unwrap();
        store.delete(0, b"b").unwrap();
        store.put(0, b"c", b"3").unwrap();
        assert!(store.uncommitted_bytes() > 0);
        assert_eq!(store.get(0, b"a").unwrap(), Some(b"one".to_vec()));
        assert_eq!(store.get(0, b"b").unwrap(), None);
        assert_eq!(keys(&store, 0), vec![pair(b"a", b"one"), pair(b"c", b"3")]);
        let reversed: Vec<_> = store
            .range(0, Bound::Unbounded, Bound::Unbounded, true)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(reversed, vec![pair(b"c", b"3"), pair(b"a", b"one")]);
        // RocksDB itself still has the committed state.
        let db = store.db().unwrap();
        let family = db.cf_handle(TIMESTAMPED_FAMILY).unwrap();
        assert_eq!(db.get_cf(family, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get_cf(family, b"c").unwrap(), None);
        // A flush (a commit's first step) writes nothing uncommitted.
        store.flush().unwrap();
        let db = store.db().unwrap();
        let family = db.cf_handle(TIMESTAMPED_FAMILY).unwrap();
        assert_eq!(db.get_cf(family, b"c").unwrap(), None);
        // A close without a commit (the transaction aborted) forgets them.
        store.close().unwrap();
        let mut store = opened_transactional(dir.path(), layout, true);
        assert_eq!(keys(&store, 0), vec![pair(b"a", b"1"), pair(b"b", b"2")]);
        assert_eq!(
            store.committed_offset("changelog", 0).unwrap(),
            Some(RecordedOffset {
                offset: 10,
                closed_cleanly: true,
                written_transactionally: true,
            })
        );
        store.put(0, b"c", b"3").unwrap();
        store.commit_offsets(&[("changelog", 0, 12)]).unwrap();
        // Dropped without a close, as a crash leaves it: still a
        // transactional state, which the offset describes.
        drop(store);
        let store = opened_transactional(dir.path(), layout, false);
        let recorded = store.committed_offset("changelog", 0).unwrap().unwrap();
        assert_eq!(recorded.offset, 12);
        assert!(!recorded.closed_cleanly);
        assert!(recorded.describes_the_data());
        assert_eq!(keys(&store, 0).len(), 3);
        // That run was not transactional: the next one cannot trust a crash.
        drop(store);
        let store = opened_transactional(dir.path(), layout, true);
        let recorded = store.committed_offset("changelog", 0).unwrap().unwrap();
        assert!(!recorded.describes_the_data(), "{recorded:?}");
    }

    #[test]
    fn a_transactional_segment_drop_hides_its_entries_until_the_commit_deletes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = opened_transactional(dir.path(), DirLayout::Segmented, true);
        store.put(3, b"a", b"1").unwrap();
        store.put(4, b"b", b"2").unwrap();
        store.commit_offsets(&[("changelog", 0, 1)]).unwrap();
        store.drop_keyspace(3).unwrap();
        assert!(keys(&store, 3).is_empty());
        assert_eq!(store.get(3, b"a").unwrap(), None);
        // Written again after the drop: only the new entry is there.
        store.put(3, b"c", b"3").unwrap();
        assert_eq!(keys(&store, 3), vec![pair(b"c", b"3")]);
        store.commit_offsets(&[("changelog", 0, 2)]).unwrap();
        store.close().unwrap();
        let store = opened_transactional(dir.path(), DirLayout::Segmented, true);
        assert_eq!(keys(&store, 3), vec![pair(b"c", b"3")]);
        assert_eq!(keys(&store, 4), vec![pair(b"b", b"2")]);
    }

    #[test]
    fn without_transactions_started_writes_go_to_rocksdb_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let layout = DirLayout::KeyValue(ValueFamily::Plain);
        let mut store = RocksKeyspaces::new(layout, "rocksdb");
        let context = StoreContext::new("app", "0_0", 0)
            .with_task_directory(dir.path())
            .with_transactional_stores(true);
        store.open("held", &context).unwrap();
        // Restoring: committed records, written straight through.
        store.write_all(0, &[(b"r", Some(b"1"))]).unwrap();
        assert_eq!(store.uncommitted_bytes(), 0);
        store.start_transactions().unwrap();
        store.write_all(0, &[(b"p", Some(b"2"))]).unwrap();
        assert!(store.uncommitted_bytes() > 0);
        let db = store.db().unwrap();
        assert_eq!(db.get(b"r").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get(b"p").unwrap(), None);
        // A store not opened for transactions ignores the call.
        let other = tempfile::tempdir().unwrap();
        let mut plain = opened(other.path(), layout);
        plain.start_transactions().unwrap();
        plain.put(0, b"k", b"v").unwrap();
        assert_eq!(plain.uncommitted_bytes(), 0);
    }

    #[test]
    fn settings_can_be_shared_by_stream_threads() {
        shared_across_threads::<RocksDbSettings>();
        shared_across_threads::<crate::RocksDbMemoryBounds>();
    }
}
