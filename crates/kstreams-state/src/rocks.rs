//! The RocksDB backend (its options are in `rocks_settings`).
//!
//! One RocksDB instance per store and task, opened at init in the task
//! directory: `<task dir>/rocksdb/<store>` for key-value and versioned
//! stores, `<task dir>/<store>` for window and session stores, whose time
//! segments are column families that expiry drops whole. Writes skip the
//! write-ahead log as in Kafka Streams: the changelog is what makes state
//! durable, and a flush at commit puts the memtables on disk.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::path::PathBuf;

use rocksdb::{
    ColumnFamilyDescriptor, FlushOptions, IteratorMode, Options, ReadOptions, WriteBatch,
    WriteOptions, DB,
};

use crate::engine::backend::{BytesIter, DirLayout, Keyspaces};
use crate::rocks_settings::RocksDbSettings;
use crate::{Error, StoreContext};

/// A RocksDB instance whose keyspaces are column families (keyspace 0 is
/// the default family).
pub(crate) struct RocksKeyspaces {
    layout: DirLayout,
    name: String,
    db: Option<DB>,
    options: Options,
    write: WriteOptions,
    spaces: BTreeSet<i64>,
    settings: RocksDbSettings,
}

fn cf_name(ks: i64) -> String {
    format!("ks.{ks}")
}

fn parse_cf_name(name: &str) -> Option<i64> {
    name.strip_prefix("ks.")?.parse().ok()
}

impl RocksKeyspaces {
    pub(crate) fn new(layout: DirLayout) -> Self {
        let mut write = WriteOptions::default();
        write.disable_wal(true);
        RocksKeyspaces {
            layout,
            name: String::new(),
            db: None,
            options: Options::default(),
            write,
            spaces: BTreeSet::new(),
            settings: RocksDbSettings::default(),
        }
    }

    fn db(&self) -> Result<&DB, Error> {
        self.db.as_ref().ok_or_else(|| Error::NotOpen {
            store: self.name.clone(),
        })
    }

    fn err(&self, e: rocksdb::Error) -> Error {
        Error::engine(&self.name, e)
    }

    /// Creates the column family of `ks` if it is missing.
    fn ensure(&mut self, ks: i64) -> Result<(), Error> {
        if ks == 0 || self.spaces.contains(&ks) {
            return Ok(());
        }
        let db = self.db.as_mut().ok_or_else(|| Error::NotOpen {
            store: self.name.clone(),
        })?;
        db.create_cf(cf_name(ks), &self.options)
            .map_err(|e| Error::engine(&self.name, e))?;
        self.spaces.insert(ks);
        Ok(())
    }
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
            DirLayout::KeyValue => task_dir.join("rocksdb").join(store),
            DirLayout::Segmented => task_dir.join(store),
        };
        std::fs::create_dir_all(&path).map_err(|e| Error::io("creating", &path, e))?;
        self.settings = context.rocksdb().clone();
        self.options = self.settings.options(store);
        let existing = DB::list_cf(&self.options, &path).unwrap_or_default();
        self.spaces = existing.iter().filter_map(|n| parse_cf_name(n)).collect();
        let descriptors: Vec<ColumnFamilyDescriptor> = existing
            .iter()
            .filter(|n| n.as_str() != "default")
            .map(|n| ColumnFamilyDescriptor::new(n, self.options.clone()))
            .collect();
        let db = DB::open_cf_descriptors(&self.options, &path, descriptors)
            .map_err(|e| Error::engine(store, format!("opening {}: {e}", path.display())))?;
        self.db = Some(db);
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
        let db = self.db()?;
        // A pinned read lends RocksDB's block: one copy into `out`, no
        // allocation once the buffer has grown.
        let found = if ks == 0 {
            db.get_pinned(key)
        } else {
            match db.cf_handle(&cf_name(ks)) {
                Some(cf) => db.get_pinned_cf(cf, key),
                None => return Ok(false),
            }
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
        self.ensure(ks)?;
        let db = self.db()?;
        let result = if ks == 0 {
            db.put_opt(key, value, &self.write)
        } else {
            let cf = db.cf_handle(&cf_name(ks)).expect("ensured");
            db.put_cf_opt(cf, key, value, &self.write)
        };
        result.map_err(|e| self.err(e))
    }

    fn delete(&mut self, ks: i64, key: &[u8]) -> Result<(), Error> {
        let db = self.db()?;
        let result = if ks == 0 {
            db.delete_opt(key, &self.write)
        } else {
            match db.cf_handle(&cf_name(ks)) {
                Some(cf) => db.delete_cf_opt(cf, key, &self.write),
                None => return Ok(()),
            }
        };
        result.map_err(|e| self.err(e))
    }

    fn write_all(&mut self, ks: i64, entries: &[(&[u8], Option<&[u8]>)]) -> Result<(), Error> {
        self.ensure(ks)?;
        let db = self.db()?;
        let mut batch = WriteBatch::default();
        if ks == 0 {
            for (k, v) in entries {
                match v {
                    Some(v) => batch.put(k, v),
                    None => batch.delete(k),
                }
            }
        } else {
            let cf = db.cf_handle(&cf_name(ks)).expect("ensured");
            for (k, v) in entries {
                match v {
                    Some(v) => batch.put_cf(cf, k, v),
                    None => batch.delete_cf(cf, k),
                }
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
        let db = self.db()?;
        let mut read = ReadOptions::default();
        let lower = match from {
            Bound::Included(k) => Some(k.to_vec()),
            Bound::Excluded(k) => Some(after(k)),
            Bound::Unbounded => None,
        };
        let upper = match to {
            Bound::Included(k) => Some(after(k)),
            Bound::Excluded(k) => Some(k.to_vec()),
            Bound::Unbounded => None,
        };
        if let (Some(l), Some(u)) = (&lower, &upper) {
            if l >= u {
                return Ok(Box::new(std::iter::empty()));
            }
        }
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
        let iter = if ks == 0 {
            db.iterator_opt(mode, read)
        } else {
            match db.cf_handle(&cf_name(ks)) {
                Some(cf) => db.iterator_cf_opt(cf, read, mode),
                None => return Ok(Box::new(std::iter::empty())),
            }
        };
        let name = self.name.clone();
        Ok(Box::new(iter.map(move |item| {
            item.map(|(k, v)| (k.into_vec(), v.into_vec()))
                .map_err(|e| Error::engine(&name, e))
        })))
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
        if ks == 0 || !self.spaces.remove(&ks) {
            return Ok(());
        }
        let name = self.name.clone();
        let db = self.db.as_mut().ok_or(Error::NotOpen {
            store: name.clone(),
        })?;
        db.drop_cf(&cf_name(ks))
            .map_err(|e| Error::engine(&name, e))
    }

    fn approximate_len(&self, ks: i64) -> Result<u64, Error> {
        let db = self.db()?;
        let prop = "rocksdb.estimate-num-keys";
        let n = if ks == 0 {
            db.property_int_value(prop)
        } else {
            match db.cf_handle(&cf_name(ks)) {
                Some(cf) => db.property_int_value_cf(cf, prop),
                None => return Ok(0),
            }
        };
        Ok(n.map_err(|e| self.err(e))?.unwrap_or(0))
    }

    fn flush(&mut self) -> Result<(), Error> {
        let Some(db) = &self.db else {
            return Ok(());
        };
        let mut opts = FlushOptions::default();
        opts.set_wait(true);
        db.flush_opt(&opts).map_err(|e| self.err(e))?;
        for ks in &self.spaces {
            if let Some(cf) = db.cf_handle(&cf_name(*ks)) {
                db.flush_cf_opt(cf, &opts).map_err(|e| self.err(e))?;
            }
        }
        Ok(())
    }

    fn close(&mut self) -> Result<(), Error> {
        if self.db.take().is_some() {
            if let Some(setter) = &self.settings.config_setter {
                setter.close(&self.name);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_across_threads<T: Send + Sync + Clone>() {}

    #[test]
    fn settings_can_be_shared_by_stream_threads() {
        shared_across_threads::<RocksDbSettings>();
        shared_across_threads::<crate::RocksDbMemoryBounds>();
    }
}
