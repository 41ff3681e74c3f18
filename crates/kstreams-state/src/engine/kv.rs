//! The key-value engine: keyspace 0 of a backend.

use std::ops::Bound;

use super::{BytesIter, KeyValueBytesStore, Keyspaces};
use crate::{ChangelogRecord, Error, StateStore, StoreContext};

const KS: i64 = 0;

pub(crate) struct KvEngine<B> {
    name: String,
    backend: B,
}

impl<B: Keyspaces> KvEngine<B> {
    pub(crate) fn new(name: impl Into<String>, backend: B) -> Self {
        KvEngine {
            name: name.into(),
            backend,
        }
    }
}

impl<B: Keyspaces> StateStore for KvEngine<B> {
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        self.backend.persistent()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        self.backend.open(&self.name, context)
    }
    fn flush(&mut self) -> Result<(), Error> {
        self.backend.flush()
    }
    fn flush_in_background(&mut self) -> Result<crate::BackgroundFlush, Error> {
        Ok(self
            .backend
            .flush_in_background()?
            .unwrap_or_else(|| crate::BackgroundFlush::done(&self.name)))
    }
    fn close(&mut self) -> Result<(), Error> {
        self.backend.close()
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        let mut entries: Vec<(&[u8], Option<&[u8]>)> =
            records.iter().map(|r| (r.key, r.value)).collect();
        // In key order (RocksDB's bytewise order; stable, so a key's last
        // write stays last and wins): the store ends the same, but the
        // memtable, a skip list that inserts each key of a batch from where
        // the one before went in, walks only a few of its levels for keys
        // in order where random ones search it from the top (restoring a
        // count's changelog spent a third of its time there; BENCHMARKS.md,
        // "The restore").
        entries.sort_by(|a, b| a.0.cmp(b.0));
        self.backend.write_all(KS, &entries)
    }
    forward_offsets!(backend);
}

impl<B: Keyspaces> KeyValueBytesStore for KvEngine<B> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.backend.get(KS, key)
    }
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        self.backend.get_into(KS, key, out)
    }
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), Error> {
        match value {
            Some(v) => self.backend.put(KS, key, v),
            None => self.backend.delete(KS, key),
        }
    }
    fn put_all(&mut self, entries: &[(&[u8], Option<&[u8]>)]) -> Result<(), Error> {
        self.backend.write_all(KS, entries)
    }
    fn range(
        &self,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error> {
        self.backend.range(KS, from, to, reverse)
    }
    fn approximate_num_entries(&self) -> Result<u64, Error> {
        self.backend.approximate_len(KS)
    }
}
