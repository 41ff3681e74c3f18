//! Forwarding what a caching store writes down: the flag that says whether
//! old values are sent, and the cache flush listener of stateful operators.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kstreams_record::Record;
use kstreams_state::{CachedChange, ValueAndTimestamp};

use crate::Change;
use crate::{ProcessorContext, StreamsError};

/// Whether a table operator sends old values, decided when the topology is
/// built (a downstream group_by or join asks) and read by each task.
pub(crate) type OldValuesFlag = Arc<AtomicBool>;

pub(crate) fn sends_old(flag: &OldValuesFlag) -> bool {
    flag.load(Ordering::Relaxed)
}

/// Hands what a caching store writes down at flush or eviction to the
/// processor that owns the store, which forwards it: Kafka Streams'
/// `TimestampedCacheFlushListener`. Without a cache the processor forwards
/// itself.
pub(crate) struct CacheForwarder<K, SV> {
    queue: Rc<RefCell<VecDeque<CachedChange<K, SV>>>>,
    caching: bool,
}

impl<K: 'static, SV: 'static> CacheForwarder<K, SV> {
    /// Listens to `set_listener`, which installs a flush listener on a store
    /// and says whether the store caches.
    pub(crate) fn attach(
        set_listener: impl FnOnce(kstreams_state::FlushListener<K, SV>) -> bool,
    ) -> Self {
        let queue: Rc<RefCell<VecDeque<CachedChange<K, SV>>>> = Rc::default();
        let sink = queue.clone();
        let caching = set_listener(Box::new(move |change| sink.borrow_mut().push_back(change)));
        CacheForwarder { queue, caching }
    }

    /// Whether the store caches (then the forwarder forwards).
    pub(crate) fn caching(&self) -> bool {
        self.caching
    }

    /// Forwards everything the store wrote down since the last call.
    pub(crate) fn drain<KO: Clone + 'static, VO: Clone + 'static>(
        &self,
        ctx: &mut ProcessorContext<'_, KO, VO>,
        to_record: impl Fn(CachedChange<K, SV>) -> Record<KO, VO>,
    ) -> Result<(), StreamsError> {
        loop {
            // Popped one at a time: forwarding may reach code that flushes.
            let next = self.queue.borrow_mut().pop_front();
            match next {
                Some(change) => ctx.forward(to_record(change))?,
                None => return Ok(()),
            }
        }
    }
}

/// A timestamped table change as the cache hands it over.
pub(crate) fn timestamped_change<K, V>(
    change: CachedChange<K, ValueAndTimestamp<V>>,
) -> Record<K, Change<V>> {
    let timestamp = change
        .new_value
        .as_ref()
        .map_or(change.timestamp, |v| v.timestamp);
    Record {
        key: change.key,
        value: Change::new(
            change.new_value.map(|v| v.value),
            change.old_value.map(|v| v.value),
        ),
        timestamp,
        headers: change.headers,
    }
}
