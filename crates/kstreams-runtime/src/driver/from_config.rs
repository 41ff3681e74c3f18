//! The driver configured as the application is: from its [`StreamsConfig`]
//! or its `.properties`, as Kafka Streams' `TopologyTestDriver(topology,
//! properties)` takes them.

use std::path::Path;

use kstreams_dsl::Topology;
use kstreams_record::Timestamp;

use super::{now, TopologyTestDriver, DEFAULT_APPLICATION_ID};
use crate::kafka::{RuntimeError, StreamsConfig};

/// The bootstrap servers the driver's properties get unless they say
/// (Kafka Streams' driver uses the same): the driver connects nowhere.
pub const DEFAULT_BOOTSTRAP_SERVERS: &str = "dummy-bootstrap-host:0";

/// What the driver's properties hold unless they say otherwise: the driver
/// needs neither key, the configuration does.
const DEFAULTS: [(&str, &str); 2] = [
    ("application.id", DEFAULT_APPLICATION_ID),
    ("bootstrap.servers", DEFAULT_BOOTSTRAP_SERVERS),
];

impl TopologyTestDriver {
    /// A driver whose tasks are configured as `config` configures the
    /// application's: its application id (the prefix of internal topics),
    /// default timestamp extractor, exception handlers (built-in or the
    /// application's own, by name too), dead-letter queue, record cache
    /// (the whole `statestore.cache.max.bytes`: the driver is one thread),
    /// tracing and `metrics.recording.level`. The wall clock starts at `wall_clock` (ms). A
    /// configuration that does not validate, or names a handler nothing
    /// registered, is an error.
    ///
    /// ```
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::kafka::StreamsConfig;
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("in").to("out");
    /// let config = StreamsConfig::new("orders", "localhost:9092")
    ///     .client_config("default.deserialization.exception.handler", "LogAndContinueExceptionHandler");
    /// let driver = TopologyTestDriver::with_streams_config(builder.build().unwrap(), &config, 0).unwrap();
    /// assert_eq!(driver.application_id(), "orders");
    /// ```
    pub fn with_streams_config(
        topology: Topology,
        config: &StreamsConfig,
        wall_clock: Timestamp,
    ) -> Result<Self, RuntimeError> {
        config.validate()?;
        config.exception_handlers.resolve()?;
        let mut task = config.task_config();
        // The driver runs every task on one thread: Kafka Streams' driver
        // gives that thread the whole budget.
        task.cache_max_bytes = usize::try_from(config.cache_max_bytes).unwrap_or(usize::MAX);
        Ok(Self::build(
            topology,
            task,
            wall_clock,
            config.metrics_recording_level,
        )?)
    }

    /// A driver configured by Kafka-style properties (as
    /// [`StreamsConfig::from_properties`] reads them), the wall clock at
    /// now. `application.id` defaults to [`DEFAULT_APPLICATION_ID`] and
    /// `bootstrap.servers` to [`DEFAULT_BOOTSTRAP_SERVERS`], as in Kafka
    /// Streams' driver.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        topology: Topology,
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, RuntimeError> {
        let defaults = DEFAULTS.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let given = properties
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()));
        let config = StreamsConfig::from_properties(defaults.chain(given))?;
        Self::with_streams_config(topology, &config, now())
    }

    /// A driver configured by the application's Java `.properties` file (as
    /// [`StreamsConfig::from_properties_file`] reads it, errors naming the
    /// file and line), with [`TopologyTestDriver::from_properties`]'
    /// defaults; the wall clock at now.
    pub fn from_properties_file(
        topology: Topology,
        path: impl AsRef<Path>,
    ) -> Result<Self, RuntimeError> {
        let config = StreamsConfig::from_properties_file_with_defaults(path, &DEFAULTS)?;
        Self::with_streams_config(topology, &config, now())
    }
}
