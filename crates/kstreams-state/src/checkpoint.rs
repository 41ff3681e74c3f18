//! The `.checkpoint` file, in Kafka Streams' format (`OffsetCheckpoint`,
//! version 0):
//!
//! ```text
//! 0
//! <number of entries>
//! <topic> <partition> <offset>
//! ...
//! ```
//!
//! The offset of an entry is the offset of the last changelog record the
//! store has, so restoration resumes right after it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, TopicPartition};

/// A checkpoint file: changelog partitions and their offsets.
#[derive(Clone, Debug)]
pub struct OffsetCheckpoint {
    path: PathBuf,
}

/// Changelog offsets by partition.
pub type Offsets = BTreeMap<TopicPartition, i64>;

impl OffsetCheckpoint {
    /// The only version Kafka Streams writes.
    pub const VERSION: i32 = 0;
    /// Kafka Streams' marker for a store whose offset is not known.
    pub const OFFSET_UNKNOWN: i64 = -4;

    /// The checkpoint at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        OffsetCheckpoint { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn valid(offset: i64) -> bool {
        offset >= 0 || offset == Self::OFFSET_UNKNOWN
    }

    /// Replaces the file atomically (written aside, synced, renamed). No
    /// offsets removes the file, as Kafka Streams does.
    pub fn write(&self, offsets: &Offsets) -> Result<(), Error> {
        if offsets.is_empty() {
            return self.delete();
        }
        let valid: Vec<_> = offsets
            .iter()
            .filter(|(tp, o)| {
                let ok = Self::valid(**o);
                if !ok {
                    log::warn!("not checkpointing invalid offset {o} of {tp}");
                }
                ok
            })
            .collect();
        let mut text = format!("{}\n{}\n", Self::VERSION, valid.len());
        for (tp, offset) in valid {
            text.push_str(&format!("{} {} {offset}\n", tp.topic, tp.partition));
        }
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        };
        write().map_err(|e| Error::io("writing checkpoint", &self.path, e))
    }

    /// The offsets in the file; none if it does not exist.
    pub fn read(&self) -> Result<Offsets, Error> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Offsets::new()),
            Err(e) => return Err(Error::io("reading checkpoint", &self.path, e)),
        };
        let corrupt = |message: String| Error::CorruptCheckpoint {
            path: self.path.clone(),
            message,
        };
        let mut lines = text.lines();
        let version: i32 = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| corrupt("no version line".into()))?;
        if version != Self::VERSION {
            return Err(corrupt(format!(
                "unknown offset checkpoint version {version}"
            )));
        }
        let expected: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| corrupt("no entry count line".into()))?;
        let mut offsets = Offsets::new();
        let mut seen = 0;
        for line in lines {
            if line.trim().is_empty() {
                continue;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [topic, partition, offset] = parts[..] else {
                return Err(corrupt(format!(
                    "malformed line in offset checkpoint file: '{line}'"
                )));
            };
            let (Ok(partition), Ok(offset)) = (partition.parse::<i32>(), offset.parse::<i64>())
            else {
                return Err(corrupt(format!(
                    "malformed line in offset checkpoint file: '{line}'"
                )));
            };
            seen += 1;
            if Self::valid(offset) {
                offsets.insert(TopicPartition::new(topic, partition), offset);
            } else {
                log::warn!(
                    "ignoring invalid offset {offset} of {topic}-{partition} in {}",
                    self.path.display()
                );
            }
        }
        if seen != expected {
            return Err(corrupt(format!(
                "expected {expected} entries but found {seen}"
            )));
        }
        Ok(offsets)
    }

    /// Removes the file (missing is fine).
    pub fn delete(&self) -> Result<(), Error> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("deleting checkpoint", &self.path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_kafka_streams_version_0_text() {
        let dir = tempfile::tempdir().unwrap();
        let cp = OffsetCheckpoint::new(dir.path().join(".checkpoint"));
        let offsets = Offsets::from([
            (TopicPartition::new("app-counts-changelog", 3), 42),
            (
                TopicPartition::new("app-other-changelog", 0),
                OffsetCheckpoint::OFFSET_UNKNOWN,
            ),
        ]);
        cp.write(&offsets).unwrap();
        assert_eq!(
            std::fs::read_to_string(cp.path()).unwrap(),
            "0\n2\napp-counts-changelog 3 42\napp-other-changelog 0 -4\n"
        );
        assert_eq!(cp.read().unwrap(), offsets);
        cp.write(&Offsets::new()).unwrap();
        assert!(!cp.path().exists());
        assert!(cp.read().unwrap().is_empty());
    }

    #[test]
    fn reads_what_kafka_streams_writes_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let cp = OffsetCheckpoint::new(dir.path().join(".checkpoint"));
        std::fs::write(cp.path(), "0\n1\nt  7   100\n").unwrap();
        assert_eq!(
            cp.read().unwrap(),
            Offsets::from([(TopicPartition::new("t", 7), 100)])
        );
        std::fs::write(cp.path(), "1\n0\n").unwrap();
        assert!(cp.read().unwrap_err().to_string().contains("version 1"));
        std::fs::write(cp.path(), "0\n2\nt 0 1\n").unwrap();
        assert!(cp
            .read()
            .unwrap_err()
            .to_string()
            .contains("expected 2 entries"));
        std::fs::write(cp.path(), "0\n1\nt 0\n").unwrap();
        assert!(cp.read().unwrap_err().to_string().contains("malformed"));
    }
}
