//! The client's own gauges, Kafka Streams' `stream-metrics` `state` and
//! `alive-stream-threads`: read from the application's metadata when
//! `/metrics` is scraped, as nothing records them while records flow.

use kstreams_metrics::names::{MetricDef, MetricKind};
use kstreams_metrics::{Gauge, MetricsRegistry};
use kstreams_runtime::kafka::{LocalMetadata, State};

use crate::state_json::state_name;

/// 1 for the state the application is in, 0 for the others, so a graph of
/// `kstreams_client_state == 1` shows when it rebalanced or failed.
const CLIENT_STATE: MetricDef = MetricDef {
    name: "kstreams_client_state",
    help: "1 for the application's current state (CREATED, REBALANCING, RUNNING, \
           PENDING_SHUTDOWN, NOT_RUNNING, PENDING_ERROR, ERROR), 0 for the others.",
    kind: MetricKind::Gauge,
    labels: &["state"],
    buckets: &[],
    kafka_name: "stream-metrics: state",
};

const CLIENT_ALIVE_STREAM_THREADS: MetricDef = MetricDef {
    name: "kstreams_client_alive_stream_threads",
    help: "Stream threads running; fewer than num.stream.threads once one died.",
    kind: MetricKind::Gauge,
    labels: &[],
    buckets: &[],
    kafka_name: "stream-metrics: alive-stream-threads",
};

const STATES: [State; 7] = [
    State::Created,
    State::Rebalancing,
    State::Running,
    State::PendingShutdown,
    State::NotRunning,
    State::PendingError,
    State::Error,
];

/// The gauges, registered once; [`ClientGauges::update`] sets them.
pub(crate) struct ClientGauges {
    states: Vec<(State, Gauge)>,
    alive_threads: Gauge,
}

impl ClientGauges {
    pub(crate) fn register(registry: &MetricsRegistry) -> Result<Self, kstreams_metrics::Error> {
        let states = STATES
            .iter()
            .map(|state| {
                Ok((
                    *state,
                    registry.gauge(&CLIENT_STATE, &[state_name(*state)])?,
                ))
            })
            .collect::<Result<_, kstreams_metrics::Error>>()?;
        Ok(Self {
            states,
            alive_threads: registry.gauge(&CLIENT_ALIVE_STREAM_THREADS, &[])?,
        })
    }

    pub(crate) fn update(&self, metadata: &LocalMetadata) {
        for (state, gauge) in &self.states {
            gauge.set(i64::from(*state == metadata.state));
        }
        self.alive_threads.set(metadata.threads_alive as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_state_at_a_time_and_the_live_threads() {
        let registry = MetricsRegistry::new();
        let gauges = ClientGauges::register(&registry).unwrap();
        let mut metadata = LocalMetadata {
            state: State::Rebalancing,
            threads_configured: 2,
            threads_alive: 2,
            threads: vec![],
            paused: false,
        };
        gauges.update(&metadata);
        metadata.state = State::Running;
        metadata.threads_alive = 1;
        gauges.update(&metadata);
        let text = registry.gather_text();
        assert!(
            text.contains("kstreams_client_state{state=\"RUNNING\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kstreams_client_state{state=\"REBALANCING\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("kstreams_client_state{state=\"ERROR\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("kstreams_client_alive_stream_threads 1"),
            "{text}"
        );
        // A second server on the same registry shares the series.
        assert!(ClientGauges::register(&registry).is_ok());
    }
}
