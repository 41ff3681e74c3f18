//! The state directory: `<state.dir>/<application.id>/<task id>/...`, a
//! lock per task directory, and cleanup of tasks no longer owned.
//!
//! Inside a task directory: `.lock` (held while a stream thread owns the
//! task), `.checkpoint` ([`OffsetCheckpoint`]), `rocksdb/<store>` for
//! key-value stores as Kafka Streams lays them out, and `kstreams/<store>`
//! for versioned, window and session stores, whose layouts are kstreams'
//! own (out of the way of Kafka Streams' `<store>/` segments).
//!
//! In the application directory: `.lock` (held while an instance runs),
//! `kafka-streams-process-metadata`, the instance's process id, kept across
//! restarts so that a restarted instance has the transactional ids of the
//! one it replaces and fences it, and `global/`, the global stores' state
//! (locked as a task directory is).

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use crate::checkpoint::OffsetCheckpoint;
use crate::Error;

/// The checkpoint file of a task directory.
pub const CHECKPOINT_FILE_NAME: &str = ".checkpoint";
/// The file of the application directory that keeps the process id.
pub const PROCESS_FILE_NAME: &str = "kafka-streams-process-metadata";
const LOCK_FILE_NAME: &str = ".lock";

/// The process file's JSON, as Kafka Streams' `StateDirectoryProcessFile`
/// writes it (`{"processId":"<uuid>"}`). Unknown fields are ignored, as
/// Kafka Streams does, so a file written by a later version still reads.
#[derive(serde::Serialize, serde::Deserialize)]
struct ProcessFile {
    #[serde(rename = "processId", default)]
    process_id: Option<Uuid>,
}

/// An application's directory under `state.dir`.
#[derive(Clone, Debug)]
pub struct StateDirectory {
    app_dir: PathBuf,
}

fn is_task_id(name: &str) -> bool {
    let mut parts = name.split('_');
    let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    digits(a) && digits(b)
}

impl StateDirectory {
    /// `<state_dir>/<application_id>`, created if missing.
    pub fn new(state_dir: impl AsRef<Path>, application_id: &str) -> Result<Self, Error> {
        let app_dir = state_dir.as_ref().join(application_id);
        std::fs::create_dir_all(&app_dir).map_err(|e| Error::io("creating", &app_dir, e))?;
        Ok(StateDirectory { app_dir })
    }

    /// The application directory.
    pub fn application_directory(&self) -> &Path {
        &self.app_dir
    }

    /// Takes the application directory's lock, held while the instance
    /// runs: a second instance on the same `state.dir` gets
    /// [`Error::StateDirectoryLocked`], as in Kafka Streams.
    pub fn lock_application_directory(&self) -> Result<ApplicationDirectoryLock, Error> {
        let lock = try_lock(&self.app_dir)?.ok_or_else(|| Error::StateDirectoryLocked {
            path: self.app_dir.clone(),
        })?;
        Ok(ApplicationDirectoryLock {
            app_dir: self.app_dir.clone(),
            _lock: lock,
        })
    }

    /// Where a task's directory is (it may not exist).
    pub fn task_directory_path(&self, task_id: &str) -> PathBuf {
        self.app_dir.join(task_id)
    }

    /// Creates the task's directory and takes its lock. Another stream
    /// thread or process holding it gets [`Error::TaskDirectoryLocked`].
    pub fn lock_task(&self, task_id: &str) -> Result<TaskDirectory, Error> {
        let path = self.task_directory_path(task_id);
        std::fs::create_dir_all(&path).map_err(|e| Error::io("creating", &path, e))?;
        let lock =
            try_lock(&path)?.ok_or_else(|| Error::TaskDirectoryLocked { path: path.clone() })?;
        Ok(TaskDirectory {
            path,
            task_id: task_id.to_string(),
            _lock: lock,
        })
    }

    /// Task ids that have a directory.
    pub fn task_ids_on_disk(&self) -> Result<Vec<String>, Error> {
        let entries =
            std::fs::read_dir(&self.app_dir).map_err(|e| Error::io("listing", &self.app_dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &self.app_dir, e))?;
            if !entry.path().is_dir() {
                continue;
            }
            if let Some(name) = entry.file_name().to_str() {
                if is_task_id(name) {
                    ids.push(name.to_string());
                }
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Each task directory's checkpointed changelog offsets, summed: Kafka
    /// Streams' task offset sums, which a member of a streams group reports
    /// so that the broker's assignor prefers the members with a task's
    /// state at hand. A directory without a readable checkpoint is left out
    /// (a corrupt one is logged); an offset that is no position (Kafka's
    /// `OFFSET_UNKNOWN`) adds nothing; a sum past `i64::MAX` stays there.
    /// Read without the task locks: checkpoints are replaced whole.
    pub fn task_offset_sums(&self) -> Result<Vec<(String, i64)>, Error> {
        let mut sums = Vec::new();
        for id in self.task_ids_on_disk()? {
            let checkpoint =
                OffsetCheckpoint::new(self.task_directory_path(&id).join(CHECKPOINT_FILE_NAME));
            let offsets = match checkpoint.read() {
                Ok(offsets) if !offsets.is_empty() => offsets,
                Ok(_) => continue,
                Err(e) => {
                    log::warn!("task {id}: its offsets are not reported: {e}");
                    continue;
                }
            };
            let sum = offsets
                .values()
                .filter(|offset| **offset >= 0)
                .fold(0i64, |sum, offset| sum.saturating_add(*offset));
            sums.push((id, sum));
        }
        Ok(sums)
    }

    /// Deletes the directories of tasks not in `owned` whose lock is free
    /// and that were not modified for `min_age` (Kafka Streams'
    /// `state.cleanup.delay.ms`). Returns the task ids removed.
    pub fn clean_unowned_task_directories(
        &self,
        owned: &HashSet<String>,
        min_age: Duration,
    ) -> Result<Vec<String>, Error> {
        let mut removed = Vec::new();
        let now = SystemTime::now();
        for id in self.task_ids_on_disk()? {
            if owned.contains(&id) {
                continue;
            }
            let path = self.task_directory_path(&id);
            let modified = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map_err(|e| Error::io("reading metadata of", &path, e))?;
            if now.duration_since(modified).unwrap_or_default() < min_age {
                continue;
            }
            let Some(lock) = try_lock(&path)? else {
                continue; // someone owns it after all
            };
            log::info!("deleting obsolete state directory {}", path.display());
            let result = std::fs::remove_dir_all(&path);
            drop(lock);
            result.map_err(|e| Error::io("deleting", &path, e))?;
            removed.push(id);
        }
        Ok(removed)
    }

    /// Deletes the application's local state: every task directory and the
    /// global stores' directory (`global`), each under its own lock. What
    /// Kafka Streams' `StateDirectory#clean` does for `KafkaStreams#cleanUp`.
    ///
    /// `held` is this directory's lock, which the caller holds: no instance
    /// runs on the directory meanwhile. A task directory whose lock another
    /// stream thread or process holds anyway (an instance that runs without
    /// the application directory's lock) is left alone: the others are
    /// deleted, then the first such [`Error::TaskDirectoryLocked`] (or I/O
    /// error) is returned. Kafka Streams deletes task directories its own
    /// threads still lock; kstreams' locks are the operating system's, so
    /// one that is held is held by someone running.
    ///
    /// As in Kafka Streams 4.4 (KIP-1283), the application directory stays,
    /// with its `.lock` and the process file (`kafka-streams-process-metadata`:
    /// the instance keeps its process id, and its transactional ids fence
    /// the producers of the instance it replaces). Other files there are
    /// left and logged. Returns the names of the directories deleted.
    pub fn clean(&self, held: &ApplicationDirectoryLock) -> Result<Vec<String>, Error> {
        debug_assert_eq!(held.app_dir, self.app_dir, "the lock of another directory");
        let entries =
            std::fs::read_dir(&self.app_dir).map_err(|e| Error::io("listing", &self.app_dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &self.app_dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push((name.to_string(), entry.path().is_dir()));
            }
        }
        names.sort();
        let mut removed = Vec::new();
        let mut first_error = None;
        let mut left = Vec::new();
        for (name, is_dir) in names {
            if !(is_dir && (is_task_id(&name) || name == GLOBAL_DIRECTORY_NAME)) {
                if name != LOCK_FILE_NAME && name != PROCESS_FILE_NAME {
                    left.push(name);
                }
                continue;
            }
            let path = self.app_dir.join(&name);
            let result = match try_lock(&path) {
                Ok(Some(lock)) => {
                    log::info!(
                        "deleting state directory {} as the application cleans up",
                        path.display()
                    );
                    let result =
                        std::fs::remove_dir_all(&path).map_err(|e| Error::io("deleting", &path, e));
                    drop(lock);
                    result
                }
                Ok(None) => Err(Error::TaskDirectoryLocked { path: path.clone() }),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => removed.push(name),
                Err(e) => {
                    log::error!("cleaning up the state directory: {e}");
                    first_error.get_or_insert(e);
                }
            }
        }
        if !left.is_empty() {
            log::warn!(
                "state directory {} was not fully cleaned up: files that are no task's state \
                 remain: {}",
                self.app_dir.display(),
                left.join(", ")
            );
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(removed),
        }
    }
}

/// The directory of the global stores' state in the application directory.
const GLOBAL_DIRECTORY_NAME: &str = "global";

/// The lock on an application directory; released on drop.
#[derive(Debug)]
pub struct ApplicationDirectoryLock {
    app_dir: PathBuf,
    _lock: File,
}

impl ApplicationDirectoryLock {
    /// The process id in the application directory's process file, or a
    /// new one, written there, when the file is missing or unreadable (as
    /// Kafka Streams' `StateDirectory#initializeProcessId`: an unreadable
    /// file is logged and replaced, since the id only needs to be stable,
    /// not recovered). Only I/O errors fail.
    pub fn initialize_process_id(&self) -> Result<Uuid, Error> {
        let path = self.app_dir.join(PROCESS_FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<ProcessFile>(&bytes) {
                Ok(ProcessFile {
                    process_id: Some(id),
                }) => {
                    log::info!("read process id {id} from {}", path.display());
                    return Ok(id);
                }
                Ok(ProcessFile { process_id: None }) => {
                    log::warn!("process file {} has no processId", path.display());
                }
                Err(e) => log::warn!(
                    "process file {} is not a process id in JSON ({e}); replacing it with a \
                     new process id",
                    path.display()
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("reading", &path, e)),
        }
        let id = Uuid::new_v4();
        let json = serde_json::to_vec(&ProcessFile {
            process_id: Some(id),
        })
        .expect("a UUID serializes");
        // Written aside and renamed over, so a crash mid-write leaves the
        // old file or the new one, never half of one.
        let tmp = self.app_dir.join(format!("{PROCESS_FILE_NAME}.tmp"));
        std::fs::write(&tmp, json).map_err(|e| Error::io("writing", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("renaming", &tmp, e))?;
        log::info!(
            "no process id found in {}, got fresh process id {id}",
            self.app_dir.display()
        );
        Ok(id)
    }
}

/// A locked task directory; the lock is released on drop.
#[derive(Debug)]
pub struct TaskDirectory {
    path: PathBuf,
    task_id: String,
    _lock: File,
}

impl TaskDirectory {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The task id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's `.checkpoint` file.
    pub fn checkpoint(&self) -> OffsetCheckpoint {
        OffsetCheckpoint::new(self.path.join(CHECKPOINT_FILE_NAME))
    }

    /// Deletes all local state of the task (stores and checkpoint), keeping
    /// the directory and its lock: what exactly-once does when a persistent
    /// store has no checkpoint.
    pub fn wipe_state(&self) -> Result<(), Error> {
        let entries =
            std::fs::read_dir(&self.path).map_err(|e| Error::io("listing", &self.path, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("listing", &self.path, e))?;
            if entry.file_name() == LOCK_FILE_NAME {
                continue;
            }
            let p = entry.path();
            let result = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            result.map_err(|e| Error::io("deleting", &p, e))?;
        }
        Ok(())
    }
}

/// Takes the exclusive lock of a task directory, or `None` if it is held.
fn try_lock(dir: &Path) -> Result<Option<File>, Error> {
    let path = dir.join(LOCK_FILE_NAME);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("opening", &path, e))?;
    if lock_exclusive_nonblocking(&file).map_err(|e| Error::io("locking", &path, e))? {
        Ok(Some(file))
    } else {
        Ok(None)
    }
}

/// Takes the exclusive lock without waiting; `false` if another holder has
/// it. std's lock is `flock` on Unix: it belongs to the open file, so a
/// second open in the same process conflicts too, and two stream threads are
/// told apart as well as two processes.
fn lock_exclusive_nonblocking(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_offset_sums_add_each_task_directorys_checkpointed_offsets() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let write = |task: &str, text: &str| {
            let path = dir.task_directory_path(task);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join(CHECKPOINT_FILE_NAME), text).unwrap();
        };
        write("0_1", "0\n2\napp-a-changelog 1 40\napp-b-changelog 1 2\n");
        // OFFSET_UNKNOWN adds nothing.
        write("1_0", "0\n2\napp-a-changelog 0 7\napp-b-changelog 0 -4\n");
        write("1_1", "0\n1\napp-a-changelog 1 9223372036854775807\n");
        write("2_0", "garbage");
        std::fs::create_dir_all(dir.task_directory_path("2_1")).unwrap();
        assert_eq!(
            dir.task_offset_sums().unwrap(),
            vec![
                ("0_1".to_string(), 42),
                ("1_0".to_string(), 7),
                ("1_1".to_string(), i64::MAX),
            ]
        );
    }

    #[test]
    fn task_directories_follow_kafka_streams_layout_and_lock() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let task = dir.lock_task("0_1").unwrap();
        assert_eq!(task.path(), root.path().join("app").join("0_1"));
        assert_eq!(
            task.checkpoint().path(),
            root.path().join("app/0_1/.checkpoint")
        );
        let err = dir.lock_task("0_1").unwrap_err();
        assert!(matches!(err, Error::TaskDirectoryLocked { .. }), "{err}");
        assert!(
            err.to_string().contains("another stream thread or process"),
            "{err}"
        );
        // A second StateDirectory (another instance on the same state.dir)
        // is refused the same way.
        let other = StateDirectory::new(root.path(), "app").unwrap();
        assert!(other.lock_task("0_1").is_err());
        drop(task);
        assert!(other.lock_task("0_1").is_ok());
    }

    #[test]
    fn unowned_unlocked_task_directories_are_cleaned() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let owned_task = dir.lock_task("0_0").unwrap();
        drop(dir.lock_task("0_1").unwrap());
        let locked_elsewhere = dir.lock_task("1_0").unwrap();
        std::fs::create_dir_all(dir.application_directory().join("not-a-task")).unwrap();
        let owned = HashSet::from(["0_0".to_string()]);
        assert!(dir
            .clean_unowned_task_directories(&owned, Duration::from_secs(3600))
            .unwrap()
            .is_empty());
        let removed = dir
            .clean_unowned_task_directories(&owned, Duration::ZERO)
            .unwrap();
        assert_eq!(removed, vec!["0_1".to_string()]);
        assert!(owned_task.path().exists());
        assert!(locked_elsewhere.path().exists());
        assert!(dir.application_directory().join("not-a-task").exists());
    }

    #[test]
    fn a_new_process_id_is_written_and_read_back_after_a_restart() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let lock = dir.lock_application_directory().unwrap();
        let id = lock.initialize_process_id().unwrap();
        let file = root.path().join("app").join(PROCESS_FILE_NAME);
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(json, serde_json::json!({ "processId": id.to_string() }));
        drop(lock);
        let again = StateDirectory::new(root.path(), "app").unwrap();
        let lock = again.lock_application_directory().unwrap();
        assert_eq!(lock.initialize_process_id().unwrap(), id);
    }

    #[test]
    fn a_process_file_written_by_kafka_streams_is_read_and_unknown_fields_ignored() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let file = dir.application_directory().join(PROCESS_FILE_NAME);
        std::fs::write(
            &file,
            r#"{"processId":"1f6e41a0-9c32-4b8e-8a53-4e3c8f0b2d11","later":1}"#,
        )
        .unwrap();
        let lock = dir.lock_application_directory().unwrap();
        assert_eq!(
            lock.initialize_process_id().unwrap().to_string(),
            "1f6e41a0-9c32-4b8e-8a53-4e3c8f0b2d11"
        );
    }

    #[test]
    fn a_garbage_or_empty_process_file_is_replaced_by_a_new_id() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let file = dir.application_directory().join(PROCESS_FILE_NAME);
        let lock = dir.lock_application_directory().unwrap();
        for garbage in [
            &b"\x00\xffnot json"[..],
            b"",
            b"{\"processId\":\"not-a-uuid\"}",
            b"{\"processId\":null}",
            b"{\"processId\":\"1f6e41a0-9c32",
        ] {
            std::fs::write(&file, garbage).unwrap();
            let id = lock.initialize_process_id().unwrap();
            // The replacement is on disk: the next start reads it back.
            assert_eq!(lock.initialize_process_id().unwrap(), id);
        }
    }

    #[test]
    fn a_second_instance_on_the_same_state_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let lock = dir.lock_application_directory().unwrap();
        let other = StateDirectory::new(root.path(), "app").unwrap();
        let err = other.lock_application_directory().unwrap_err();
        assert!(matches!(err, Error::StateDirectoryLocked { .. }), "{err}");
        // Task locks are apart from the application directory's.
        assert!(other.lock_task("0_0").is_ok());
        drop(lock);
        assert!(other.lock_application_directory().is_ok());
    }

    #[test]
    fn wiping_keeps_the_lock() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let task = dir.lock_task("0_0").unwrap();
        std::fs::create_dir_all(task.path().join("rocksdb/s")).unwrap();
        std::fs::write(task.path().join(CHECKPOINT_FILE_NAME), "0\n0\n").unwrap();
        task.wipe_state().unwrap();
        let left: Vec<_> = std::fs::read_dir(task.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(".lock")]);
        assert!(dir.lock_task("0_0").is_err());
    }

    #[test]
    fn cleaning_deletes_every_task_and_the_global_state_and_keeps_the_process_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let held = dir.lock_application_directory().unwrap();
        let id = held.initialize_process_id().unwrap();
        for task in ["0_0", "1_3", "global"] {
            let path = dir.lock_task(task).unwrap().path().to_path_buf();
            std::fs::create_dir_all(path.join("rocksdb/counts")).unwrap();
            std::fs::write(path.join(CHECKPOINT_FILE_NAME), "0\n0\n").unwrap();
        }
        std::fs::write(dir.application_directory().join("notes.txt"), "mine").unwrap();
        assert_eq!(dir.clean(&held).unwrap(), ["0_0", "1_3", "global"]);
        let mut left: Vec<_> = std::fs::read_dir(dir.application_directory())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, [".lock", PROCESS_FILE_NAME, "notes.txt"]);
        // The instance keeps its process id (KIP-1283).
        assert_eq!(held.initialize_process_id().unwrap(), id);
        // Nothing left to delete: cleaning again is fine.
        assert!(dir.clean(&held).unwrap().is_empty());
    }

    #[test]
    fn cleaning_leaves_a_task_directory_someone_holds_and_says_so() {
        let root = tempfile::tempdir().unwrap();
        let dir = StateDirectory::new(root.path(), "app").unwrap();
        let held = dir.lock_application_directory().unwrap();
        drop(dir.lock_task("0_0").unwrap());
        drop(dir.lock_task("0_2").unwrap());
        // Another process (a second StateDirectory) runs task 0_1.
        let elsewhere = StateDirectory::new(root.path(), "app")
            .unwrap()
            .lock_task("0_1")
            .unwrap();
        let err = dir.clean(&held).unwrap_err();
        assert!(
            matches!(&err, Error::TaskDirectoryLocked { path } if path.ends_with("0_1")),
            "{err}"
        );
        // The others are deleted all the same.
        assert!(!dir.task_directory_path("0_0").exists());
        assert!(!dir.task_directory_path("0_2").exists());
        assert!(elsewhere.path().exists());
        drop(elsewhere);
        assert_eq!(dir.clean(&held).unwrap(), ["0_1"]);
    }
}
