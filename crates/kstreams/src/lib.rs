//! # kstreams: Kafka Streams for Rust
//!
//! Streams and tables over Kafka topics, with local state, event-time
//! windows, joins and exactly-once processing, in the Kafka Streams model:
//! same operators, same semantics, same topic layout. An application scales
//! out by running more instances with the same `application.id`.
//!
//! `use kstreams::prelude::*;` brings in everything an application needs:
//!
//! ```
//! use kstreams::prelude::*;
//!
//! let builder = StreamsBuilder::new();
//! builder
//!     .stream::<String, String>("sentences")
//!     .flat_map_values(|s| s.split_whitespace().map(str::to_lowercase).collect::<Vec<_>>())
//!     .filter(|_, word| word.len() > 4)
//!     .to("long-words");
//! let topology = builder.build().unwrap();
//!
//! let driver = TopologyTestDriver::new(topology).unwrap();
//! let input = driver.create_input_topic("sentences", StringSerde, StringSerde);
//! let output = driver.create_output_topic("long-words", StringSerde, StringSerde);
//! input.pipe_input("k".to_string(), "Streams over Kafka".to_string());
//! assert_eq!(output.read_values_to_list(), ["streams", "kafka"]);
//! ```
//!
//! Tables, aggregations and windows in event time:
//!
//! ```
//! use std::time::Duration;
//! use kstreams::prelude::*;
//!
//! let builder = StreamsBuilder::new();
//! builder
//!     .stream::<String, String>("clicks")
//!     .group_by_key()
//!     .windowed_by(TimeWindows::of_size_and_grace(Duration::from_millis(10), Duration::ZERO))
//!     .count()
//!     .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
//!     .to_stream()
//!     .to_with("per-window", Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)));
//!
//! let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
//! let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
//! let counts = driver.create_output_topic("per-window", TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde));
//! for ts in [1, 4, 12] {
//!     clicks.pipe_input_at("alice".to_string(), "click".to_string(), ts);
//! }
//! // Only the window [0, 10) is closed (stream time 12): its final count.
//! let (window, count) = counts.read_key_value();
//! assert_eq!((window.key.as_str(), window.window.start, count), ("alice", 0, Some(2)));
//! assert!(counts.is_empty());
//! ```
//!
//! The crates behind the facade, bottom up: [`record`] (records, headers,
//! serdes), [`metrics`], [`time`] (timestamps, punctuation), [`state`]
//! (stores), [`dsl`] (Processor API and DSL), [`runtime`] (the engine, the
//! `TopologyTestDriver` and `KafkaStreams`), and, with the `embedded`
//! feature, `embedded` (an in-process Kafka for examples and tests); with
//! the `avro` feature, `avro` (Avro serdes in the Confluent wire format and
//! a Schema Registry client); with the `protobuf` and `json-schema`
//! features, `protobuf` and `json_schema` (the same for prost messages and
//! for serde types under a JSON Schema); with the `http` feature, `http` (the
//! operator's endpoints: `http::HttpServer::start(&app, address)` serves
//! metrics, health probes, the topology picture and the instance's state);
//! with the `otlp` feature, `otlp` (the record spans of
//! `kstreams.tracing.enabled` as OpenTelemetry spans, exported over
//! OTLP/HTTP: `otlp::OtlpTracing::builder().build()?.layer()` goes into a
//! `tracing` subscriber).
//!
//! The `rocksdb` feature (on by default) compiles RocksDB, Kafka Streams'
//! default store engine. Turned off (`default-features = false`), every
//! store is in memory and rebuilt from its changelog at each start: a store
//! left at the default store type is kept in memory, and one that asks for
//! `StoreType::RocksDb` by name fails `StreamsBuilder::build` with an error
//! naming the store (see [`dsl::StoreType`] for why it is refused rather
//! than kept in memory).

#![forbid(unsafe_code)]

#[cfg(feature = "avro")]
pub use kstreams_avro as avro;
pub use kstreams_dsl as dsl;
#[cfg(feature = "embedded")]
pub use kstreams_embedded as embedded;
#[cfg(feature = "http")]
pub use kstreams_http as http;
#[cfg(feature = "json-schema")]
pub use kstreams_json_schema as json_schema;
pub use kstreams_metrics as metrics;
#[cfg(feature = "otlp")]
pub use kstreams_otlp as otlp;
#[cfg(feature = "protobuf")]
pub use kstreams_protobuf as protobuf;
pub use kstreams_record as record;
pub use kstreams_runtime as runtime;
pub use kstreams_state as state;
pub use kstreams_time as time;

/// Everything an application usually needs, in one import.
pub mod prelude {
    pub use kstreams_dsl::{
        late_headers, AsyncOptions, AsyncOrder, AsyncTimeout, AutoOffsetReset, Branched,
        BranchedKStream, BufferConfig, Change, CogroupedKStream, Consumed, FixedKeyProcessor,
        FixedKeyProcessorContext, FixedKeyRecord, ForeignKeyExtractor, GlobalKTable, Grouped,
        Joined, KGroupedStream, KGroupedTable, KStream, KTable, Materialized, MockProcessorContext,
        Named, Printed, Processor, ProcessorContext, ProcessorError, Produced, PunctuationId,
        RecordContext, Repartitioned, SessionWindowedKStream, StoreType, StreamJoined,
        StreamPartitioner, StreamsBuilder, StreamsError, Suppressed, TableJoined,
        TimeWindowedKStream, TopicNameExtractor, Topology, TopologyError,
    };
    #[cfg(feature = "embedded")]
    pub use kstreams_embedded::EmbeddedKafka;
    pub use kstreams_record::{
        BoolSerde, BytesSerde, DefaultSerde, F32Serde, F64Serde, Headers, I16Serde, I32Serde,
        I64Serde, JsonSerde, ListSerde, Nullable, Record, RecordMetadata, Serde, SerdeError,
        StringSerde, UnitSerde, UuidSerde, VoidSerde,
    };
    pub use kstreams_runtime::kafka::{
        AsyncKafkaStreams, CloseOptions, GroupMembershipOperation, HostInfo, IsolationLevel,
        KafkaStreams, KeyQueryMetadata, LagInfo, ProcessingGuarantee, QueryError,
        QueryableStoreTypes, ReadOnlyKeyValueView, ReadOnlySessionView, ReadOnlyVersionedView,
        ReadOnlyWindowView, State, StateRestoreListener, StoreQueryParameters,
        StreamThreadExceptionResponse, StreamsConfig, StreamsMetadata, TopicPartition,
    };
    pub use kstreams_runtime::{
        DeserializationHandling, ProcessingHandling, ProductionHandling, TaskConfig,
        TestInputTopic, TestOutputTopic, TopologyTestDriver,
    };
    pub use kstreams_state::{
        KeyValueStore, KeyValueStoreHandle, ReadOnlyKeyValueStore, ReadOnlySessionStore,
        ReadOnlyWindowStore, SessionStore, SessionStoreHandle, SessionWindowedSerde, Stores,
        TimeWindowedSerde, TimestampedKeyValueStoreHandle, TimestampedWindowStoreHandle,
        ValueAndTimestamp, VersionedKeyValueStore, VersionedKeyValueStoreHandle, VersionedRecord,
        Window, WindowStore, WindowStoreHandle, Windowed,
    };
    pub use kstreams_time::{
        EmitStrategy, FailOnInvalidTimestamp, FixedSizeWindows, JoinWindows,
        LogAndSkipOnInvalidTimestamp, PunctuationType, SessionWindows, SlidingWindows, TimeWindows,
        TimestampExtractor, UnlimitedWindows, UsePartitionTimeOnInvalidTimestamp,
        ValueTimestampExtractor, WallclockTimestampExtractor, Windows,
    };
}

/// README.md's Rust snippets, compiled (and, unless marked `no_run`, run)
/// as doctests of the facade, so the front page cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The test-only `EmbeddedKafka` stays out of the prelude unless the
/// `embedded` feature asks for it:
///
/// ```compile_fail
/// use kstreams::prelude::*;
/// let _: Option<EmbeddedKafka> = None;
/// ```
#[cfg(all(doctest, not(feature = "embedded")))]
pub struct PreludeWithoutEmbeddedKafka;
