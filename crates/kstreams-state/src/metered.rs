//! The metered layer: Kafka Streams' `MeteredKeyValueStore` and friends,
//! folded into the typed stores.
//!
//! Each typed store times its calls as the processor sees them (serdes,
//! cache, changelog and engine included) into latency histograms labelled
//! with the store's type, name and task. Range queries are timed from the
//! call until their iterator is dropped, as Kafka Streams times them until
//! the iterator is closed. A store without a registry (or with metrics
//! turned off on its builder) holds no histogram: each call then costs one
//! branch on an empty option, and no clock is read.

use std::time::Instant;

use kstreams_metrics::names::{self, MetricDef};
use kstreams_metrics::{Histogram, MetricsRegistry};

use crate::{Error, StoreContext, StoreIter};

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

/// A store's sensors; all empty until [`StoreSensors::init`] finds a
/// registry in the context.
#[derive(Default)]
pub(crate) struct StoreSensors {
    pub(crate) put: Sensor,
    pub(crate) put_if_absent: Sensor,
    pub(crate) put_all: Sensor,
    pub(crate) get: Sensor,
    pub(crate) delete: Sensor,
    pub(crate) range: Sensor,
    pub(crate) all: Sensor,
    pub(crate) prefix_scan: Sensor,
    pub(crate) flush: Sensor,
    pub(crate) fetch: Sensor,
    pub(crate) remove: Sensor,
    /// Where the series live, to remove them at close.
    registered: Option<(MetricsRegistry, [String; 3], &'static [Op])>,
}

/// Metering settings of one store, from its builder.
pub(crate) struct Metering {
    /// The builder's switch (on unless `with_metrics_disabled`).
    pub(crate) enabled: bool,
    /// The `store_type` label: the supplier's metrics scope.
    pub(crate) store_type: String,
    pub(crate) sensors: StoreSensors,
}

impl Metering {
    pub(crate) fn new(enabled: bool, store_type: &str) -> Self {
        Metering {
            enabled,
            store_type: store_type.to_string(),
            sensors: StoreSensors::default(),
        }
    }

    /// Creates the sensors of `ops` if the builder allows it and the
    /// context has a registry.
    pub(crate) fn init(
        &mut self,
        store: &str,
        context: &StoreContext,
        ops: &'static [Op],
    ) -> Result<(), Error> {
        // A second init keeps the series (same labels, same series).
        self.sensors = StoreSensors::default();
        let Some(registry) = context.metrics().filter(|_| self.enabled) else {
            return Ok(());
        };
        let labels = [
            self.store_type.clone(),
            store.to_string(),
            context.task_id().to_string(),
        ];
        let values = [labels[0].as_str(), labels[1].as_str(), labels[2].as_str()];
        let mut sensors = StoreSensors::default();
        for op in ops {
            let histogram =
                registry
                    .histogram(op.def(), &values)
                    .map_err(|source| Error::Metrics {
                        store: store.to_string(),
                        source,
                    })?;
            *sensors.slot(*op) = Sensor(Some(histogram));
        }
        sensors.registered = Some((registry.clone(), labels, ops));
        self.sensors = sensors;
        Ok(())
    }

    /// Drops the sensors and the store's series, as Kafka Streams removes a
    /// store's sensors when it closes.
    pub(crate) fn close(&mut self) {
        if let Some((registry, labels, ops)) = self.sensors.registered.take() {
            let values = [labels[0].as_str(), labels[1].as_str(), labels[2].as_str()];
            for op in ops {
                registry.remove(op.def(), &values);
            }
        }
        self.sensors = StoreSensors::default();
    }
}

impl StoreSensors {
    fn slot(&mut self, op: Op) -> &mut Sensor {
        match op {
            Op::Put => &mut self.put,
            Op::PutIfAbsent => &mut self.put_if_absent,
            Op::PutAll => &mut self.put_all,
            Op::Get => &mut self.get,
            Op::Delete => &mut self.delete,
            Op::Range => &mut self.range,
            Op::All => &mut self.all,
            Op::PrefixScan => &mut self.prefix_scan,
            Op::Flush => &mut self.flush,
            Op::Fetch => &mut self.fetch,
            Op::Remove => &mut self.remove,
        }
    }
}
