//! Suppression options (KIP-328): `Suppressed` and its `BufferConfig`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kstreams_record::Timestamp;
use kstreams_state::Windowed;
use kstreams_time::duration_ms;

/// What a full suppression buffer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WhenFull {
    /// Emit the oldest entries early, before their time.
    EmitEarly,
    /// Stop the application with an error: results are never emitted early.
    ShutDown,
}

/// The bounds of a suppression buffer and its changelog: Kafka Streams'
/// `BufferConfig`.
///
/// The buffer is logged by default: its changelog topic
/// `<application.id>-<store>-changelog` (compacted) brings the held-back
/// updates back after a restart or on another instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferConfig {
    pub(crate) max_records: Option<u64>,
    pub(crate) max_bytes: Option<u64>,
    pub(crate) when_full: WhenFull,
    /// `None`: no changelog; else the extra configs of its topic.
    pub(crate) logging: Option<BTreeMap<String, String>>,
}

impl BufferConfig {
    /// No bound: the buffer grows as needed (final results stay exact).
    pub fn unbounded() -> Self {
        BufferConfig {
            max_records: None,
            max_bytes: None,
            when_full: WhenFull::ShutDown,
            logging: Some(BTreeMap::new()),
        }
    }

    /// At most `n` keys; emits early when full unless
    /// [`BufferConfig::shut_down_when_full`] says otherwise.
    pub fn max_records(n: u64) -> Self {
        BufferConfig {
            max_records: Some(n),
            max_bytes: None,
            when_full: WhenFull::EmitEarly,
            logging: Some(BTreeMap::new()),
        }
    }

    /// At most `n` bytes of serialized keys and values; emits early when
    /// full unless [`BufferConfig::shut_down_when_full`] says otherwise.
    pub fn max_bytes(n: u64) -> Self {
        BufferConfig {
            max_records: None,
            max_bytes: Some(n),
            when_full: WhenFull::EmitEarly,
            logging: Some(BTreeMap::new()),
        }
    }

    /// Also bounds the number of keys.
    pub fn with_max_records(mut self, n: u64) -> Self {
        self.max_records = Some(n);
        self
    }

    /// Also bounds the bytes.
    pub fn with_max_bytes(mut self, n: u64) -> Self {
        self.max_bytes = Some(n);
        self
    }

    /// When full, emit the oldest entries before their time.
    pub fn emit_early_when_full(mut self) -> Self {
        self.when_full = WhenFull::EmitEarly;
        self
    }

    /// When full, fail instead of emitting anything early.
    pub fn shut_down_when_full(mut self) -> Self {
        self.when_full = WhenFull::ShutDown;
        self
    }

    /// No changelog topic: Kafka Streams' `withLoggingDisabled()`. Nothing
    /// is written about the buffer, and its held-back updates are lost
    /// when the task moves or the application stops (a restart emits
    /// nothing for them).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use kstreams_dsl::{BufferConfig, StreamsBuilder, Suppressed};
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .table::<String, String>("prices")
    ///     .suppress(
    ///         Suppressed::until_time_limit(
    ///             Duration::from_secs(60),
    ///             BufferConfig::unbounded().with_logging_disabled(),
    ///         )
    ///         .with_name("quiet"),
    ///     )
    ///     .to_stream()
    ///     .to("quiet-prices");
    /// let topology = builder.build()?;
    /// // Only the source table's store has a changelog; the buffer
    /// // (`quiet-store`) has none.
    /// let changelogs: Vec<String> = topology
    ///     .changelog_topics("app")
    ///     .into_iter()
    ///     .map(|c| c.store)
    ///     .collect();
    /// assert!(!changelogs.contains(&"quiet-store".to_string()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = None;
        self
    }

    /// A changelog topic (the default) with these extra topic configs over
    /// its own (`cleanup.policy=compact`): Kafka Streams'
    /// `withLoggingEnabled(Map)`.
    ///
    /// # Example
    ///
    /// ```
    /// use std::collections::BTreeMap;
    ///
    /// use kstreams_dsl::BufferConfig;
    ///
    /// let buffer = BufferConfig::max_records(10_000)
    ///     .with_logging_enabled(BTreeMap::from([(
    ///         "min.compaction.lag.ms".to_string(),
    ///         "60000".to_string(),
    ///     )]));
    /// # let _ = buffer;
    /// ```
    pub fn with_logging_enabled(mut self, config: BTreeMap<String, String>) -> Self {
        self.logging = Some(config);
        self
    }

    pub(crate) fn bounded(&self) -> bool {
        self.max_records.is_some() || self.max_bytes.is_some()
    }
}

/// The time by which a buffered entry is ordered and released.
pub(crate) type BufferTime<K> = Arc<dyn Fn(&K, Timestamp) -> Timestamp + Send + Sync>;

/// How `suppress` holds updates back: Kafka Streams' `Suppressed`.
///
/// ```
/// use std::time::Duration;
/// use kstreams_dsl::{BufferConfig, Suppressed};
/// use kstreams_state::Windowed;
///
/// // Only each window's final count, once the window and its grace are over.
/// let finals = Suppressed::<Windowed<String>>::until_window_closes(BufferConfig::unbounded());
/// // Each key's latest value a minute after its first held-back update, at
/// // most 1000 keys.
/// let quiet = Suppressed::<String>::until_time_limit(
///     Duration::from_secs(60),
///     BufferConfig::max_records(1000).emit_early_when_full(),
/// );
/// # let _ = (finals, quiet);
/// ```
pub struct Suppressed<K> {
    pub(crate) name: Option<String>,
    pub(crate) buffer: BufferConfig,
    /// `None`: until the window closes (the delay comes from the table).
    pub(crate) limit_ms: Option<i64>,
    pub(crate) time: BufferTime<K>,
    pub(crate) final_results: bool,
}

impl<K> Suppressed<Windowed<K>> {
    /// Emits each window's result once, when stream time has passed the
    /// window's end plus its grace period; for session windows, the end
    /// plus the inactivity gap and the grace, since until then a record can
    /// still merge into the session. Needs a table from a windowed
    /// aggregation; the buffer may not emit early.
    pub fn until_window_closes(buffer: BufferConfig) -> Self {
        Suppressed {
            name: None,
            buffer,
            limit_ms: None,
            time: Arc::new(|key: &Windowed<K>, _| key.window.end),
            final_results: true,
        }
    }
}

impl<K> Suppressed<K> {
    /// Emits a key's latest value once stream time is `limit` past the
    /// timestamp of its first held-back update (later updates do not
    /// restart the timer).
    pub fn until_time_limit(limit: Duration, buffer: BufferConfig) -> Self {
        Suppressed {
            name: None,
            buffer,
            limit_ms: Some(duration_ms(limit)),
            time: Arc::new(|_: &K, timestamp| timestamp),
            final_results: false,
        }
    }

    /// Names the processor (and its store `<name>-store`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}
