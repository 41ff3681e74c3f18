//! The metered layer: Kafka Streams' `MeteredKeyValueStore` and friends,
//! as one wrapper, [`Metered`], around any store.
//!
//! It times each call as the processor sees it (serdes, cache, changelog
//! and engine included) into latency histograms labelled with the store's
//! type, name and task. The typed store traits are implemented on
//! `Metered<..>` of each store type (one line a method, naming the
//! operation); the `StateStore` plumbing is here, once. Range queries are timed from the
//! call until their iterator is dropped, as Kafka Streams times them until
//! the iterator is closed. A store without a registry (or with metrics
//! turned off on its builder) holds no histogram: each call then costs one
//! branch on an empty option, and no clock is read.

use std::time::Instant;

use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::{Histogram, MetricsRegistry};

use crate::{ChangelogRecord, Error, StateStore, StoreContext, StoreIter, StoreOptions};

/// One operation's latency histogram, if the store is metered.
#[derive(Default)]
pub(crate) struct Sensor(Option<Histogram>);

impl Sensor {
    /// The clock at the start of a call, read only when metered.
    #[inline]
    pub(crate) fn start(&self) -> Option<Instant> {
        self.0.as_ref().map(|_| Instant::now())
    }

    /// Records the call that began at `start`.
    #[inline]
    pub(crate) fn record(&self, start: Option<Instant>) {
        if let (Some(histogram), Some(start)) = (&self.0, start) {
            histogram.observe_since(start);
        }
    }

    /// Records a query when its iterator is dropped (or now, if it failed).
    pub(crate) fn record_iter<'a, T: 'a>(
        &'a self,
        start: Option<Instant>,
        result: Result<StoreIter<'a, T>, Error>,
    ) -> Result<StoreIter<'a, T>, Error> {
        let (Some(histogram), Some(start)) = (&self.0, start) else {
            return result;
        };
        match result {
            Ok(inner) => Ok(Box::new(TimedIter {
                inner,
                histogram,
                start,
            })),
            Err(e) => {
                histogram.observe_since(start);
                Err(e)
            }
        }
    }
}

struct TimedIter<'a, T> {
    inner: StoreIter<'a, T>,
    histogram: &'a Histogram,
    start: Instant,
}

impl<T> Iterator for TimedIter<'_, T> {
    type Item = Result<T, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<T> Drop for TimedIter<'_, T> {
    fn drop(&mut self) {
        self.histogram.observe_since(self.start);
    }
}

/// The operations a store meters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Op {
    Put,
    PutIfAbsent,
    PutAll,
    Get,
    Delete,
    Range,
    All,
    PrefixScan,
    Flush,
    Fetch,
    Remove,
}

impl Op {
    const COUNT: usize = Op::Remove as usize + 1;

    fn def(self) -> &'static MetricDef {
        match self {
            Op::Put => &names::STATE_PUT_LATENCY,
            Op::PutIfAbsent => &names::STATE_PUT_IF_ABSENT_LATENCY,
            Op::PutAll => &names::STATE_PUT_ALL_LATENCY,
            Op::Get => &names::STATE_GET_LATENCY,
            Op::Delete => &names::STATE_DELETE_LATENCY,
            Op::Range => &names::STATE_RANGE_LATENCY,
            Op::All => &names::STATE_ALL_LATENCY,
            Op::PrefixScan => &names::STATE_PREFIX_SCAN_LATENCY,
            Op::Flush => &names::STATE_FLUSH_LATENCY,
            Op::Fetch => &names::STATE_FETCH_LATENCY,
            Op::Remove => &names::STATE_REMOVE_LATENCY,
        }
    }
}

/// What each kind of store meters (Kafka Streams' sensors per metered store).
pub(crate) const KEY_VALUE_OPS: &[Op] = &[
    Op::Put,
    Op::PutIfAbsent,
    Op::PutAll,
    Op::Get,
    Op::Delete,
    Op::Range,
    Op::All,
    Op::PrefixScan,
    Op::Flush,
];
pub(crate) const WINDOW_OPS: &[Op] = &[Op::Put, Op::Fetch, Op::Flush];
pub(crate) const SESSION_OPS: &[Op] = &[Op::Put, Op::Remove, Op::Fetch, Op::Flush];
pub(crate) const VERSIONED_OPS: &[Op] = &[Op::Put, Op::Get, Op::Delete, Op::Flush];

/// Where a metered store's series live, to remove them at close.
struct Registered {
    registry: MetricsRegistry,
    labels: [String; 3],
}

/// The metered layer over a store `S`: Kafka Streams' `Metered*Store`.
///
/// Without a registry (or with metrics off on the builder) it holds no
/// histogram: a call then costs one branch on an empty option, and no
/// clock is read.
pub(crate) struct Metered<S> {
    inner: S,
    /// The builder's switch (on unless `with_metrics_disabled`).
    enabled: bool,
    /// The `store_type` label: the supplier's metrics scope.
    store_type: String,
    /// What this store type meters.
    ops: &'static [Op],
    sensors: [Sensor; Op::COUNT],
    registered: Option<Registered>,
}

impl<S: StateStore> Metered<S> {
    /// `inner`, metered for `ops` if `options` allow it, under the
    /// `store_type` label.
    pub(crate) fn new(
        inner: S,
        options: &StoreOptions,
        store_type: &str,
        ops: &'static [Op],
    ) -> Self {
        Metered {
            inner,
            enabled: options.metrics_enabled(),
            store_type: store_type.to_string(),
            ops,
            sensors: Default::default(),
            registered: None,
        }
    }

    /// The store under the metered layer.
    pub(crate) fn inner(&self) -> &S {
        &self.inner
    }

    /// The store under the metered layer, for calls that are not timed.
    pub(crate) fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Times a read as `op`.
    #[inline]
    pub(crate) fn timed<R>(&self, op: Op, call: impl FnOnce(&S) -> R) -> R {
        let sensor = &self.sensors[op as usize];
        let start = sensor.start();
        let result = call(&self.inner);
        sensor.record(start);
        result
    }

    /// Times a write as `op`.
    #[inline]
    pub(crate) fn timed_mut<R>(&mut self, op: Op, call: impl FnOnce(&mut S) -> R) -> R {
        let sensor = &self.sensors[op as usize];
        let start = sensor.start();
        let result = call(&mut self.inner);
        sensor.record(start);
        result
    }

    /// Times a query as `op`, until its iterator is dropped.
    pub(crate) fn timed_iter<'a, T: 'a>(
        &'a self,
        op: Op,
        call: impl FnOnce(&'a S) -> Result<StoreIter<'a, T>, Error>,
    ) -> Result<StoreIter<'a, T>, Error> {
        let sensor = &self.sensors[op as usize];
        let start = sensor.start();
        sensor.record_iter(start, call(&self.inner))
    }

    /// Creates the sensors if the builder allows it and the context has a
    /// registry.
    fn register(&mut self, context: &StoreContext) -> Result<(), Error> {
        // A second init keeps the series (same labels, same series).
        self.sensors = Default::default();
        self.registered = None;
        let Some(registry) = context.metrics().filter(|_| self.enabled) else {
            return Ok(());
        };
        let store = self.inner.name();
        let labels = [
            self.store_type.clone(),
            store.to_string(),
            context.task_id().to_string(),
        ];
        let values = [labels[0].as_str(), labels[1].as_str(), labels[2].as_str()];
        for op in self.ops {
            let histogram =
                registry
                    .histogram(op.def(), &values)
                    .map_err(|source| Error::Metrics {
                        store: store.to_string(),
                        source,
                    })?;
            self.sensors[*op as usize] = Sensor(Some(histogram));
        }
        self.registered = Some(Registered {
            registry: registry.clone(),
            labels,
        });
        Ok(())
    }

    /// Drops the sensors and the store's series, as Kafka Streams removes a
    /// store's sensors when it closes.
    fn unregister(&mut self) {
        if let Some(Registered { registry, labels }) = self.registered.take() {
            let values = [labels[0].as_str(), labels[1].as_str(), labels[2].as_str()];
            for op in self.ops {
                registry.remove(op.def(), &values);
            }
        }
        self.sensors = Default::default();
    }

    /// Closes the inner store with `close` (clean or dirty), then drops
    /// the sensors whatever came of it.
    fn close_with(&mut self, close: fn(&mut S) -> Result<(), Error>) -> Result<(), Error> {
        let closed = close(&mut self.inner);
        self.unregister();
        closed
    }
}

impl<S: StateStore> StateStore for Metered<S> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn persistent(&self) -> bool {
        self.inner.persistent()
    }
    fn logging_enabled(&self) -> bool {
        self.inner.logging_enabled()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        self.inner.init(context)?;
        self.register(context)
    }
    fn flush_cache(&mut self) -> Result<(), Error> {
        self.inner.flush_cache()
    }
    fn flush(&mut self) -> Result<(), Error> {
        self.timed_mut(Op::Flush, S::flush)
    }
    fn flush_in_background(&mut self) -> Result<crate::BackgroundFlush, Error> {
        self.inner.flush_in_background()
    }
    fn close(&mut self) -> Result<(), Error> {
        self.close_with(S::close)
    }
    fn close_dirty(&mut self) -> Result<(), Error> {
        self.close_with(S::close_dirty)
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        self.inner.restore_batch(records)
    }
    forward_offsets!(inner);
}
