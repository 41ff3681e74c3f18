//! Helpers shared by the store tests.
#![allow(dead_code)]

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use kstreams_state::{
    BuiltStore, ChangelogRecord, OwnedChangelogRecord, StoreContext, ThreadCache,
};

/// Which engine a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Memory,
    Rocks,
}

pub(crate) const ENGINES: [Engine; 2] = [Engine::Memory, Engine::Rocks];

pub(crate) type Changelog = Rc<RefCell<Vec<OwnedChangelogRecord>>>;

/// A task context in `dir` with a collecting changelog and a cache budget.
pub(crate) fn context(dir: &Path, cache_bytes: usize) -> (StoreContext, Changelog) {
    let changelog: Changelog = Rc::new(RefCell::new(Vec::new()));
    let ctx = StoreContext::new("app", "0_0", 0)
        .with_task_directory(dir)
        .with_changelog_writer(changelog.clone())
        .with_thread_cache(Rc::new(ThreadCache::new(cache_bytes)));
    (ctx, changelog)
}

/// Restores `records` into a freshly initialized store.
pub(crate) fn restore(built: &BuiltStore, records: &[OwnedChangelogRecord]) {
    let batch: Vec<ChangelogRecord<'_>> = records.iter().map(|r| r.as_record()).collect();
    for chunk in batch.chunks(7) {
        built.lifecycle.borrow_mut().restore_batch(chunk).unwrap();
    }
}
