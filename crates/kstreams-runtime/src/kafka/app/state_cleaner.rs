//! The state directory cleaner: Kafka Streams' `stateDirCleaner`, which
//! every `state.cleanup.delay.ms` while the application is RUNNING deletes
//! the directories of tasks the instance no longer owns. A task moved to
//! another instance leaves its stores behind; without the cleaner they stay
//! on disk for good.
//!
//! A directory goes only when no live task of the instance (active,
//! restoring or standby) is its own, its lock is free (no thread or process
//! holds it) and it was not modified for the delay: a task that moves back
//! soon after finds its state still there, as in Kafka Streams.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use kstreams_state::__private::StateDirectory;

use crate::kafka::RuntimeError;

/// The cleaner's thread, stopped when dropped.
pub(super) struct StateCleaner {
    stop: Option<mpsc::Sender<()>>,
    join: Option<JoinHandle<()>>,
}

impl StateCleaner {
    /// Starts the cleaner of `application_id`'s directory under
    /// `state_dir`: every `delay`, while `running()` says so, the
    /// directories of tasks `owned()` does not list are deleted once their
    /// lock is free and they are `delay` old.
    pub(super) fn start(
        state_dir: PathBuf,
        application_id: &str,
        delay: Duration,
        running: impl Fn() -> bool + Send + 'static,
        owned: impl Fn() -> HashSet<String> + Send + 'static,
    ) -> Result<Self, RuntimeError> {
        let directory = StateDirectory::new(&state_dir, application_id)?;
        let (stop, stopped) = mpsc::channel::<()>();
        let name = format!("{application_id}-CleanupThread");
        let join = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || loop {
                match stopped.recv_timeout(delay) {
                    Err(RecvTimeoutError::Timeout) if running() => {
                        match directory.clean_unowned_task_directories(&owned(), delay) {
                            Ok(removed) if !removed.is_empty() => log::info!(
                                "deleted the state of tasks no longer owned here, idle for \
                                 {delay:?} (state.cleanup.delay.ms): {removed:?}"
                            ),
                            Ok(_) => {}
                            // The next round tries again; the stream
                            // threads are not concerned.
                            Err(e) => log::warn!("cleaning the state directory: {e}"),
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })
            .map_err(|source| RuntimeError::Spawn { name, source })?;
        Ok(Self {
            stop: Some(stop),
            join: Some(join),
        })
    }
}

impl Drop for StateCleaner {
    fn drop(&mut self) {
        // Hanging up wakes the thread at once, whatever the delay.
        drop(self.stop.take());
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    #[test]
    fn only_unowned_directories_go_and_only_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDirectory::new(dir.path(), "app").unwrap();
        let kept_locked = state.lock_task("0_0").unwrap();
        for id in ["0_1", "0_2", "1_3"] {
            std::fs::create_dir_all(state.task_directory_path(id)).unwrap();
        }
        let running = Arc::new(AtomicBool::new(false));
        let cleaner = {
            let running = running.clone();
            StateCleaner::start(
                dir.path().to_path_buf(),
                "app",
                Duration::from_millis(50),
                move || running.load(Ordering::Acquire),
                || HashSet::from(["0_2".to_string()]),
            )
            .unwrap()
        };
        // Not RUNNING (a rebalance, say): nothing goes.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            state.task_ids_on_disk().unwrap(),
            ["0_0", "0_1", "0_2", "1_3"]
        );
        running.store(true, Ordering::Release);
        let began = Instant::now();
        while state.task_ids_on_disk().unwrap().len() > 2 {
            assert!(began.elapsed() < Duration::from_secs(10), "not cleaned");
            std::thread::sleep(Duration::from_millis(20));
        }
        // 0_0 is locked by a task, 0_2 is owned (a standby, say).
        assert_eq!(state.task_ids_on_disk().unwrap(), ["0_0", "0_2"]);
        let began = Instant::now();
        drop(cleaner);
        assert!(began.elapsed() < Duration::from_secs(1), "the drop waited");
        drop(kept_locked);
    }

    #[test]
    fn a_long_delay_does_not_hold_up_the_close() {
        let dir = tempfile::tempdir().unwrap();
        let cleaner = StateCleaner::start(
            dir.path().to_path_buf(),
            "app",
            Duration::from_secs(600),
            || true,
            HashSet::new,
        )
        .unwrap();
        let began = Instant::now();
        drop(cleaner);
        assert!(began.elapsed() < Duration::from_secs(1));
    }
}
