//! The options every store builder shares: Kafka Streams'
//! `AbstractStoreBuilder` (logging with its topic configs, caching,
//! metrics), written once for the four store builders and for the DSL's
//! `Materialized`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kstreams_record::SharedSerde;

use crate::ChangelogHeader;

/// Which layers a store gets over its engine, and the extra configs of its
/// changelog topic.
///
/// The default is Kafka Streams' store builders' default: logging on,
/// caching off, metrics on (they cost nothing until the task's
/// [`StoreContext`](crate::StoreContext) has a registry).
///
/// ```
/// use kstreams_state::StoreOptions;
///
/// let options = StoreOptions::default().with_caching_enabled();
/// assert!(options.caching_enabled() && options.logging_enabled());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    logging: bool,
    log_config: BTreeMap<String, String>,
    caching: bool,
    metrics: bool,
    changelog_headers: &'static [ChangelogHeader],
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            logging: true,
            log_config: BTreeMap::new(),
            caching: false,
            metrics: true,
            changelog_headers: &[],
        }
    }
}

impl StoreOptions {
    /// Turns the changelog off.
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }
    /// Turns the changelog on, with extra topic configs.
    pub fn with_logging_enabled(mut self, config: BTreeMap<String, String>) -> Self {
        self.logging = true;
        self.log_config = config;
        self
    }
    /// Puts a cache in front of the engine.
    pub fn with_caching_enabled(mut self) -> Self {
        self.caching = true;
        self
    }
    /// Removes the cache.
    pub fn with_caching_disabled(mut self) -> Self {
        self.caching = false;
        self
    }
    /// Records the store's latencies when its task has a metrics registry.
    pub fn with_metrics_enabled(mut self) -> Self {
        self.metrics = true;
        self
    }
    /// Never records the store's latencies, even when its task has a
    /// metrics registry.
    pub fn with_metrics_disabled(mut self) -> Self {
        self.metrics = false;
        self
    }
    /// Headers every changelog record of the store carries, as Kafka
    /// Streams' stores of some internal layouts mark their records with a
    /// format version.
    pub fn with_changelog_headers(mut self, headers: &'static [ChangelogHeader]) -> Self {
        self.changelog_headers = headers;
        self
    }
    /// The headers of [`StoreOptions::with_changelog_headers`].
    pub fn changelog_headers(&self) -> &'static [ChangelogHeader] {
        self.changelog_headers
    }
    /// Whether a changelog topic backs the store.
    pub fn logging_enabled(&self) -> bool {
        self.logging
    }
    /// The extra changelog topic configs given with
    /// [`StoreOptions::with_logging_enabled`].
    pub fn log_config(&self) -> &BTreeMap<String, String> {
        &self.log_config
    }
    /// Whether the cache is on.
    pub fn caching_enabled(&self) -> bool {
        self.caching
    }
    /// Whether the store records its latencies (given a registry).
    pub fn metrics_enabled(&self) -> bool {
        self.metrics
    }

    /// A windowed store's retention, to which the changelog adds
    /// `windowstore.changelog.additional.retention.ms`; `None` when the
    /// user's logging config sets `retention.ms` itself (Kafka Streams'
    /// `WindowedChangelogTopicConfig`).
    pub(crate) fn windowed_changelog_retention(
        &self,
        retention: crate::Timestamp,
    ) -> Option<crate::Timestamp> {
        (!self.log_config.contains_key("retention.ms")).then_some(retention)
    }

    /// The changelog topic configs: the store type's `defaults`, overridden
    /// by the user's.
    pub(crate) fn changelog_config<const N: usize>(
        &self,
        defaults: [(&str, String); N],
    ) -> BTreeMap<String, String> {
        let mut config: BTreeMap<String, String> = defaults
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        config.extend(self.log_config.clone());
        config
    }
}

/// What every store builder holds besides its store type's own settings:
/// the engine supplier, the serdes and the options.
pub(crate) struct BuilderParts<S: ?Sized, K, V> {
    pub(crate) supplier: Arc<S>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) options: StoreOptions,
}

impl<S: ?Sized, K, V> BuilderParts<S, K, V> {
    /// Parts with the default options.
    pub(crate) fn new(
        supplier: Arc<S>,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
    ) -> Self {
        BuilderParts {
            supplier,
            key_serde,
            value_serde,
            options: StoreOptions::default(),
        }
    }
}

/// The options' setters on a store builder that holds its
/// [`BuilderParts`] in a field `parts`, so that each builder has the same methods and they are
/// written once. `caching` adds the cache's switches (versioned stores
/// have no cache).
macro_rules! store_builder_options {
    ($builder:ident) => {
        impl<K: 'static, V: 'static> $builder<K, V> {
            /// Turns the changelog off.
            pub fn with_logging_disabled(mut self) -> Self {
                self.parts.options = self.parts.options.with_logging_disabled();
                self
            }
            /// Turns the changelog on, with extra topic configs.
            pub fn with_logging_enabled(
                mut self,
                config: std::collections::BTreeMap<String, String>,
            ) -> Self {
                self.parts.options = self.parts.options.with_logging_enabled(config);
                self
            }
            /// Records the store's latencies when its task has a metrics
            /// registry (the default).
            pub fn with_metrics_enabled(mut self) -> Self {
                self.parts.options = self.parts.options.with_metrics_enabled();
                self
            }
            /// Never records the store's latencies, even when its task has
            /// a metrics registry.
            pub fn with_metrics_disabled(mut self) -> Self {
                self.parts.options = self.parts.options.with_metrics_disabled();
                self
            }
            /// Whether the store records its latencies (given a registry).
            pub fn metrics_enabled(&self) -> bool {
                self.parts.options.metrics_enabled()
            }
            /// Replaces all the options at once (the DSL's `Materialized`
            /// hands its own over).
            pub fn with_options(mut self, options: $crate::StoreOptions) -> Self {
                self.parts.options = options;
                self
            }
            /// The builder's options.
            pub fn options(&self) -> &$crate::StoreOptions {
                &self.parts.options
            }
        }
    };
    ($builder:ident, caching) => {
        store_builder_options!($builder);
        impl<K: 'static, V: 'static> $builder<K, V> {
            /// Puts a cache in front of the engine.
            pub fn with_caching_enabled(mut self) -> Self {
                self.parts.options = self.parts.options.with_caching_enabled();
                self
            }
            /// Removes the cache.
            pub fn with_caching_disabled(mut self) -> Self {
                self.parts.options = self.parts.options.with_caching_disabled();
                self
            }
            /// Whether the cache is on.
            pub fn caching_enabled(&self) -> bool {
                self.parts.options.caching_enabled()
            }
        }
    };
}
pub(crate) use store_builder_options;

/// How long a changelog keeps what a store keeps for `retention_ms`:
/// Kafka Streams adds a day, so that a restore still finds what the store
/// has not expired yet.
pub(crate) fn changelog_retention(retention_ms: crate::Timestamp) -> String {
    retention_ms.saturating_add(24 * 60 * 60 * 1000).to_string()
}
