//! The registry: metric families by name, labelled handles, exposition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus::core::Collector;
use prometheus::{Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts};

use crate::names::{self, MetricDef, MetricKind};
use crate::{Counter, Error, Gauge, Histogram};

/// Where kstreams' metrics live: metric families, created on first use
/// from their [`MetricDef`], and the labelled series under them.
///
/// Cheap to clone (clones share everything) and `Send + Sync`: one
/// registry per application, handed to every stream thread and task.
/// Asking for a handle takes a lock and a lookup; recording into the
/// handle takes neither, so callers ask once (when a task or store is
/// created) and keep the handle.
///
/// ```
/// use kstreams_metrics::{names, MetricsRegistry};
///
/// let registry = MetricsRegistry::new();
/// let lag = registry.gauge(&names::CONSUMER_RECORDS_LAG, &["clicks", "3"]).unwrap();
/// lag.set(42);
/// assert!(registry
///     .gather_text()
///     .contains(r#"kstreams_consumer_records_lag{partition="3",topic="clicks"} 42"#));
/// ```
#[derive(Clone, Default)]
pub struct MetricsRegistry {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    registry: prometheus::Registry,
    families: Mutex<HashMap<&'static str, Family>>,
}

struct Family {
    def: MetricDef,
    vec: FamilyVec,
}

#[derive(Clone)]
enum FamilyVec {
    Counter(IntCounterVec),
    Gauge(IntGaugeVec),
    Histogram(HistogramVec),
}

impl FamilyVec {
    fn collector(&self) -> Box<dyn Collector> {
        match self {
            FamilyVec::Counter(v) => Box::new(v.clone()),
            FamilyVec::Gauge(v) => Box::new(v.clone()),
            FamilyVec::Histogram(v) => Box::new(v.clone()),
        }
    }
    fn remove(&self, values: &[&str]) -> bool {
        match self {
            FamilyVec::Counter(v) => v.remove_label_values(values).is_ok(),
            FamilyVec::Gauge(v) => v.remove_label_values(values).is_ok(),
            FamilyVec::Histogram(v) => v.remove_label_values(values).is_ok(),
        }
    }
}

impl std::fmt::Debug for MetricsRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let families = self.lock().len();
        f.debug_struct("MetricsRegistry")
            .field("families", &families)
            .finish()
    }
}

fn prometheus_error(def: &MetricDef) -> impl FnOnce(prometheus::Error) -> Error + '_ {
    move |source| Error::Prometheus {
        name: def.name.to_string(),
        source,
    }
}

impl MetricsRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry that adds `labels` to every series it exposes,
    /// for example `application_id`, to tell applications apart when one
    /// process runs several.
    pub fn with_constant_labels<K, V>(
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, Error>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let labels: HashMap<String, String> = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let registry = prometheus::Registry::new_custom(None, Some(labels)).map_err(|source| {
            Error::Prometheus {
                name: "constant labels".to_string(),
                source,
            }
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                registry,
                families: Mutex::default(),
            }),
        })
    }

    /// The `prometheus` registry underneath, to register collectors of
    /// your own next to kstreams' metrics.
    pub fn prometheus_registry(&self) -> &prometheus::Registry {
        &self.inner.registry
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, Family>> {
        // A panic while holding the lock leaves the map consistent: every
        // insert is a single call.
        self.inner
            .families
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn family(&self, def: &MetricDef, requested: MetricKind) -> Result<FamilyVec, Error> {
        if def.kind != requested {
            return Err(Error::WrongKind {
                name: def.name.to_string(),
                actual: def.kind,
                requested,
            });
        }
        let mut families = self.lock();
        if let Some(family) = families.get(def.name) {
            if family.def != *def {
                return Err(Error::Conflict {
                    name: def.name.to_string(),
                });
            }
            return Ok(family.vec.clone());
        }
        let vec = match def.kind {
            MetricKind::Counter => FamilyVec::Counter(
                IntCounterVec::new(Opts::new(def.name, def.help), def.labels)
                    .map_err(prometheus_error(def))?,
            ),
            MetricKind::Gauge => FamilyVec::Gauge(
                IntGaugeVec::new(Opts::new(def.name, def.help), def.labels)
                    .map_err(prometheus_error(def))?,
            ),
            MetricKind::Histogram => FamilyVec::Histogram(
                HistogramVec::new(
                    HistogramOpts::new(def.name, def.help).buckets(def.buckets.to_vec()),
                    def.labels,
                )
                .map_err(prometheus_error(def))?,
            ),
        };
        self.inner
            .registry
            .register(vec.collector())
            .map_err(prometheus_error(def))?;
        families.insert(
            def.name,
            Family {
                def: *def,
                vec: vec.clone(),
            },
        );
        Ok(vec)
    }

    /// The counter of `def` (a [`MetricKind::Counter`]) with these label
    /// values, in the order of `def.labels`. The same labels give the same
    /// series: handles from two calls count together.
    pub fn counter(&self, def: &MetricDef, label_values: &[&str]) -> Result<Counter, Error> {
        let FamilyVec::Counter(vec) = self.family(def, MetricKind::Counter)? else {
            unreachable!("the kind was checked")
        };
        vec.get_metric_with_label_values(label_values)
            .map(Counter::from_prometheus)
            .map_err(prometheus_error(def))
    }

    /// The gauge of `def` (a [`MetricKind::Gauge`]) with these label values.
    pub fn gauge(&self, def: &MetricDef, label_values: &[&str]) -> Result<Gauge, Error> {
        let FamilyVec::Gauge(vec) = self.family(def, MetricKind::Gauge)? else {
            unreachable!("the kind was checked")
        };
        vec.get_metric_with_label_values(label_values)
            .map(Gauge)
            .map_err(prometheus_error(def))
    }

    /// The histogram of `def` (a [`MetricKind::Histogram`]) with these
    /// label values.
    pub fn histogram(&self, def: &MetricDef, label_values: &[&str]) -> Result<Histogram, Error> {
        let FamilyVec::Histogram(vec) = self.family(def, MetricKind::Histogram)? else {
            unreachable!("the kind was checked")
        };
        vec.get_metric_with_label_values(label_values)
            .map(Histogram)
            .map_err(prometheus_error(def))
    }

    /// Stops exposing one series. Handles to it keep working but are no
    /// longer read; asking again starts a new series at zero. Returns
    /// whether the series existed.
    pub fn remove(&self, def: &MetricDef, label_values: &[&str]) -> bool {
        let families = self.lock();
        match families.get(def.name) {
            Some(family) => family.vec.remove(label_values),
            None => false,
        }
    }

    /// Stops exposing every series whose label `label` is `value`, in every
    /// family; returns how many there were.
    pub fn remove_matching(&self, label: &str, value: &str) -> usize {
        let families = self.lock();
        let mut removed = 0;
        for family in families.values() {
            let Some(position) = family.def.labels.iter().position(|l| *l == label) else {
                continue;
            };
            for collected in family.vec.collector().collect() {
                for metric in collected.get_metric() {
                    let pairs = metric.get_label();
                    let values: Option<Vec<&str>> = family
                        .def
                        .labels
                        .iter()
                        .map(|name| pairs.iter().find(|p| p.name() == *name).map(|p| p.value()))
                        .collect();
                    let Some(values) = values else { continue };
                    if values[position] == value && family.vec.remove(&values) {
                        removed += 1;
                    }
                }
            }
        }
        removed
    }

    /// Stops exposing every series of task `task_id` (task, node and store
    /// metrics): call it when a task is closed for good on this instance
    /// (revoked, migrated), as Kafka Streams removes a task's sensors.
    pub fn remove_task(&self, task_id: &str) -> usize {
        self.remove_matching(names::TASK_ID, task_id)
    }

    /// Every series of `def` as it stands: its labels and value (a
    /// counter's or gauge's value, a histogram's number of samples), as
    /// Kafka Streams' `KafkaStreams#metrics()` lets a program read its
    /// own metrics without a scrape. Empty when nothing created the family.
    ///
    /// ```
    /// use kstreams_metrics::{names, MetricsRegistry};
    ///
    /// let registry = MetricsRegistry::new();
    /// let consumed = &names::CONSUMER_RECORDS_CONSUMED_TOTAL;
    /// registry.counter(consumed, &["clicks", "0"]).unwrap().add(3);
    /// let samples = registry.samples(consumed);
    /// assert_eq!(samples.len(), 1);
    /// assert_eq!(samples[0].label("topic"), Some("clicks"));
    /// assert_eq!(samples[0].value, 3.0);
    /// ```
    pub fn samples(&self, def: &MetricDef) -> Vec<Sample> {
        let Some(vec) = self.lock().get(def.name).map(|family| family.vec.clone()) else {
            return Vec::new();
        };
        vec.collector()
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|metric| Sample {
                labels: metric
                    .get_label()
                    .iter()
                    .map(|pair| (pair.name().to_owned(), pair.value().to_owned()))
                    .collect(),
                value: match &vec {
                    FamilyVec::Counter(_) => metric.get_counter().get_value(),
                    FamilyVec::Gauge(_) => metric.get_gauge().get_value(),
                    FamilyVec::Histogram(_) => metric.get_histogram().get_sample_count() as f64,
                },
            })
            .collect()
    }

    /// Everything, in the Prometheus text exposition format (version 0.0.4).
    pub fn gather_text(&self) -> String {
        let mut out = Vec::new();
        let encoder = prometheus::TextEncoder::new();
        if let Err(e) = encoder.encode(&self.inner.registry.gather(), &mut out) {
            log::warn!("encoding metrics failed: {e}");
        }
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into())
    }

    /// The metrics of one stream thread.
    pub fn thread_sensors(&self, thread_id: &str) -> Result<ThreadSensors, Error> {
        let labels = [thread_id];
        Ok(ThreadSensors {
            poll_latency: self.histogram(&names::THREAD_POLL_LATENCY, &labels)?,
            poll_records: self.counter(&names::THREAD_POLL_RECORDS_TOTAL, &labels)?,
            commit_latency: self.histogram(&names::THREAD_COMMIT_LATENCY, &labels)?,
            task_created: self.counter(&names::THREAD_TASK_CREATED_TOTAL, &labels)?,
            task_closed: self.counter(&names::THREAD_TASK_CLOSED_TOTAL, &labels)?,
        })
    }

    /// Changelog records a stream thread applied to its standby tasks.
    pub fn standby_updates(&self, thread_id: &str) -> Result<Counter, Error> {
        self.counter(&names::THREAD_STANDBY_UPDATES_TOTAL, &[thread_id])
    }

    /// The metrics of one task on one stream thread.
    pub fn task_sensors(&self, thread_id: &str, task_id: &str) -> Result<TaskSensors, Error> {
        let labels = [thread_id, task_id];
        Ok(TaskSensors {
            process: self.counter(&names::TASK_PROCESS_TOTAL, &labels)?,
            process_latency: self.histogram(&names::TASK_PROCESS_LATENCY, &labels)?,
            dropped_records: self.counter(&names::TASK_DROPPED_RECORDS_TOTAL, &labels)?,
            punctuate: self.counter(&names::TASK_PUNCTUATE_TOTAL, &labels)?,
            punctuate_latency: self.histogram(&names::TASK_PUNCTUATE_LATENCY, &labels)?,
            enforced_processing: self.counter(&names::TASK_ENFORCED_PROCESSING_TOTAL, &labels)?,
            restore_records: self.counter(&names::TASK_RESTORE_TOTAL, &labels)?,
            restore_remaining_records: self
                .gauge(&names::TASK_RESTORE_REMAINING_RECORDS, &labels)?,
            record_lateness: self.histogram(&names::TASK_RECORD_LATENESS, &labels)?,
        })
    }

    /// The restore metrics of one task (`kstreams_task_restore_*`, KIP-869):
    /// its stores restoring from their changelogs.
    pub fn task_restore_sensors(
        &self,
        thread_id: &str,
        task_id: &str,
    ) -> Result<RestoreSensors, Error> {
        self.restore_sensors(
            &names::TASK_RESTORE_TOTAL,
            &names::TASK_RESTORE_REMAINING_RECORDS,
            &[thread_id, task_id],
        )
    }

    /// The bootstrap metrics of one task (`kstreams_task_bootstrap_*`):
    /// its bootstrap tables read to their end before its other partitions.
    pub fn task_bootstrap_sensors(
        &self,
        thread_id: &str,
        task_id: &str,
    ) -> Result<RestoreSensors, Error> {
        self.restore_sensors(
            &names::TASK_BOOTSTRAP_TOTAL,
            &names::TASK_BOOTSTRAP_REMAINING_RECORDS,
            &[thread_id, task_id],
        )
    }

    /// The load metrics of one global store (`kstreams_global_restore_*`).
    pub fn global_restore_sensors(&self, store: &str) -> Result<RestoreSensors, Error> {
        self.restore_sensors(
            &names::GLOBAL_RESTORE_TOTAL,
            &names::GLOBAL_RESTORE_REMAINING_RECORDS,
            &[store],
        )
    }

    fn restore_sensors(
        &self,
        restored: &MetricDef,
        remaining: &MetricDef,
        labels: &[&str],
    ) -> Result<RestoreSensors, Error> {
        Ok(RestoreSensors {
            restored: self.counter(restored, labels)?,
            remaining: self.gauge(remaining, labels)?,
        })
    }

    /// The metrics of one processor node of one task.
    pub fn node_sensors(
        &self,
        thread_id: &str,
        task_id: &str,
        node: &str,
    ) -> Result<NodeSensors, Error> {
        let labels = [thread_id, task_id, node];
        Ok(NodeSensors {
            process: self.counter(&names::NODE_PROCESS_TOTAL, &labels)?,
            record_e2e_latency: self.histogram(&names::RECORD_E2E_LATENCY, &labels)?,
        })
    }

    /// The metrics of one consumed partition.
    pub fn partition_sensors(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionSensors, Error> {
        let partition = partition.to_string();
        let labels = [topic, partition.as_str()];
        Ok(PartitionSensors {
            records_lag: self.gauge(&names::CONSUMER_RECORDS_LAG, &labels)?,
            records_consumed: self.counter(&names::CONSUMER_RECORDS_CONSUMED_TOTAL, &labels)?,
        })
    }
}

/// A stream thread's handles (label `thread_id`).
#[derive(Clone, Debug)]
pub struct ThreadSensors {
    /// `kstreams_thread_poll_latency_seconds`: each consumer poll.
    pub poll_latency: Histogram,
    /// `kstreams_thread_poll_records_total`: records the polls returned.
    pub poll_records: Counter,
    /// `kstreams_thread_commit_latency_seconds`: each commit of the thread's tasks.
    pub commit_latency: Histogram,
    /// `kstreams_thread_task_created_total`.
    pub task_created: Counter,
    /// `kstreams_thread_task_closed_total`.
    pub task_closed: Counter,
}

/// A task's handles (labels `thread_id`, `task_id`).
#[derive(Clone, Debug)]
pub struct TaskSensors {
    /// `kstreams_task_process_total`: records run through the topology.
    pub process: Counter,
    /// `kstreams_task_process_latency_seconds`: one record through the topology.
    pub process_latency: Histogram,
    /// `kstreams_task_dropped_records_total`.
    pub dropped_records: Counter,
    /// `kstreams_task_punctuate_total`.
    pub punctuate: Counter,
    /// `kstreams_task_punctuate_latency_seconds`.
    pub punctuate_latency: Histogram,
    /// `kstreams_task_enforced_processing_total`.
    pub enforced_processing: Counter,
    /// `kstreams_task_restore_records_total`.
    pub restore_records: Counter,
    /// `kstreams_task_restore_remaining_records`.
    pub restore_remaining_records: Gauge,
    /// `kstreams_task_record_lateness_seconds`.
    pub record_lateness: Histogram,
}

/// The handles of one restoration scope: a task's restore or bootstrap,
/// or a global store's load. Kafka's `restore-rate` is
/// `rate(<restored>[1m])`.
#[derive(Clone, Debug)]
pub struct RestoreSensors {
    /// Records restored (a counter).
    pub restored: Counter,
    /// Records still to restore (a gauge).
    pub remaining: Gauge,
}

/// A processor node's handles (labels `thread_id`, `task_id`, `node`).
#[derive(Clone, Debug)]
pub struct NodeSensors {
    /// `kstreams_node_process_total`.
    pub process: Counter,
    /// `kstreams_record_e2e_latency_seconds`: wall clock minus record timestamp.
    pub record_e2e_latency: Histogram,
}

/// A consumed partition's handles (labels `topic`, `partition`).
#[derive(Clone, Debug)]
pub struct PartitionSensors {
    /// `kstreams_consumer_records_lag`.
    pub records_lag: Gauge,
    /// `kstreams_consumer_records_consumed_total`.
    pub records_consumed: Counter,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + Clone>() {}

    #[test]
    fn handles_and_registry_are_send_sync() {
        assert_send_sync::<MetricsRegistry>();
        assert_send_sync::<Counter>();
        assert_send_sync::<Gauge>();
        assert_send_sync::<Histogram>();
        assert_send_sync::<TaskSensors>();
    }

    #[test]
    fn every_definition_registers() {
        let registry = MetricsRegistry::new();
        for def in names::ALL {
            let values: Vec<&str> = def.labels.iter().map(|_| "x").collect();
            match def.kind {
                MetricKind::Counter => registry.counter(def, &values).map(|_| ()),
                MetricKind::Gauge => registry.gauge(def, &values).map(|_| ()),
                MetricKind::Histogram => registry.histogram(def, &values).map(|_| ()),
            }
            .unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert!(def.name.starts_with("kstreams_"), "{}", def.name);
            match def.kind {
                MetricKind::Counter => assert!(def.name.ends_with("_total"), "{}", def.name),
                MetricKind::Histogram => assert!(def.name.ends_with("_seconds"), "{}", def.name),
                MetricKind::Gauge => assert!(!def.name.ends_with("_total"), "{}", def.name),
            }
        }
        let text = registry.gather_text();
        for def in names::ALL {
            assert!(
                text.contains(&format!("# TYPE {} ", def.name)),
                "{}",
                def.name
            );
        }
    }

    #[test]
    fn same_labels_share_a_series() {
        let registry = MetricsRegistry::new();
        let a = registry.task_sensors("t1", "0_0").unwrap();
        let b = registry.task_sensors("t1", "0_0").unwrap();
        let other = registry.task_sensors("t1", "0_1").unwrap();
        a.process.inc();
        b.process.add(2);
        other.process.inc();
        assert_eq!(a.process.get(), 3);
        let text = registry.gather_text();
        assert!(
            text.contains(r#"kstreams_task_process_total{task_id="0_0",thread_id="t1"} 3"#),
            "{text}"
        );
        assert!(text.contains(r#"kstreams_task_process_total{task_id="0_1",thread_id="t1"} 1"#));
        assert!(text.contains("# HELP kstreams_task_process_total Records a task ran"));
        assert!(text.contains("# TYPE kstreams_task_process_total counter"));
    }

    #[test]
    fn text_has_labelled_histograms_and_gauges() {
        let registry = MetricsRegistry::new();
        let put = registry
            .histogram(&names::STATE_PUT_LATENCY, &["rocksdb", "counts", "0_2"])
            .unwrap();
        put.observe(0.000_003);
        put.observe(0.2);
        let e2e = registry
            .node_sensors("t1", "0_2", "KSTREAM-SOURCE-0000000000")
            .unwrap();
        e2e.record_e2e_latency.observe(1.5);
        let lag = registry.partition_sensors("clicks", 2).unwrap();
        lag.records_lag.set(17);
        let text = registry.gather_text();
        let labels = r#"store="counts",store_type="rocksdb",task_id="0_2""#;
        assert!(text.contains("# TYPE kstreams_state_put_latency_seconds histogram"));
        assert!(
            text.contains(&format!(
                "kstreams_state_put_latency_seconds_bucket{{{labels},le=\"0.000005\"}} 1"
            )),
            "{text}"
        );
        assert!(text.contains(&format!(
            "kstreams_state_put_latency_seconds_count{{{labels}}} 2"
        )));
        assert!(text.contains(&format!(
            "kstreams_state_put_latency_seconds_bucket{{{labels},le=\"+Inf\"}} 2"
        )));
        assert!(text.contains(
            r#"kstreams_record_e2e_latency_seconds_count{node="KSTREAM-SOURCE-0000000000",task_id="0_2",thread_id="t1"} 1"#
        ));
        assert!(text.contains(r#"kstreams_consumer_records_lag{partition="2",topic="clicks"} 17"#));
        assert!(text.contains("# TYPE kstreams_consumer_records_lag gauge"));
    }

    #[test]
    fn constant_labels_are_added() {
        let registry = MetricsRegistry::with_constant_labels([("application_id", "shop")]).unwrap();
        registry
            .task_sensors("t", "1_0")
            .unwrap()
            .dropped_records
            .inc();
        let text = registry.gather_text();
        assert!(
            text.contains(
                r#"kstreams_task_dropped_records_total{task_id="1_0",thread_id="t",application_id="shop"} 1"#
            ),
            "{text}"
        );
    }

    #[test]
    fn wrong_kind_label_count_and_conflicts_are_errors() {
        let registry = MetricsRegistry::new();
        assert!(matches!(
            registry.gauge(&names::TASK_PROCESS_TOTAL, &["t", "0_0"]),
            Err(Error::WrongKind { .. })
        ));
        assert!(matches!(
            registry.counter(&names::TASK_PROCESS_TOTAL, &["t"]),
            Err(Error::Prometheus { .. })
        ));
        let clash = MetricDef {
            labels: &["other"],
            ..names::TASK_PROCESS_TOTAL
        };
        registry
            .counter(&names::TASK_PROCESS_TOTAL, &["t", "0_0"])
            .unwrap();
        assert!(matches!(
            registry.counter(&clash, &["x"]),
            Err(Error::Conflict { .. })
        ));
    }

    #[test]
    fn removing_a_task_drops_its_series_only() {
        let registry = MetricsRegistry::new();
        let gone = registry.task_sensors("t", "0_0").unwrap();
        let kept = registry.task_sensors("t", "0_1").unwrap();
        let store = registry
            .histogram(&names::STATE_GET_LATENCY, &["in-memory", "s", "0_0"])
            .unwrap();
        let lag = registry.partition_sensors("clicks", 0).unwrap();
        gone.process.inc();
        kept.process.inc();
        store.observe(0.001);
        lag.records_lag.set(1);
        // The task's nine series and the store's one.
        assert_eq!(registry.remove_task("0_0"), 10);
        let text = registry.gather_text();
        assert!(!text.contains(r#"task_id="0_0""#), "{text}");
        assert!(text.contains(r#"task_id="0_1""#));
        assert!(text.contains("kstreams_consumer_records_lag"));
        assert!(registry.remove(&names::TASK_PROCESS_TOTAL, &["t", "0_1"]));
        assert!(!registry.remove(&names::TASK_PROCESS_TOTAL, &["t", "0_1"]));
        // Asking again starts over.
        let again = registry.task_sensors("t", "0_0").unwrap();
        assert_eq!(again.process.get(), 0);
    }
}

/// One series of a metric, as [`MetricsRegistry::samples`] reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Label names and values, the registry's constant labels included.
    pub labels: Vec<(String, String)>,
    /// A counter's or gauge's value; a histogram's number of samples.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the series has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
