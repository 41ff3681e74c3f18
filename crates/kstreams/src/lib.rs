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
//! The crates behind the facade, bottom up: [`record`] (records, headers,
//! serdes), [`metrics`], [`time`] (timestamps, punctuation), [`state`]
//! (stores), [`dsl`] (Processor API and DSL), [`runtime`] (the engine, the
//! `TopologyTestDriver` and `KafkaStreams`), and [`embedded`] (an in-process
//! Kafka for examples and tests).

pub use kstreams_dsl as dsl;
pub use kstreams_embedded as embedded;
pub use kstreams_metrics as metrics;
pub use kstreams_record as record;
pub use kstreams_runtime as runtime;
pub use kstreams_state as state;
pub use kstreams_time as time;

/// Everything an application usually needs, in one import.
pub mod prelude {
    pub use kstreams_dsl::{
        late_headers, Branched, BranchedKStream, Change, Consumed, FixedKeyProcessor,
        FixedKeyProcessorContext, FixedKeyRecord, Grouped, KGroupedStream, KGroupedTable, KStream,
        KTable, Materialized, Named, Printed, Processor, ProcessorContext, ProcessorError,
        Produced, PunctuationId, RecordContext, Repartitioned, SessionWindowedKStream, StoreType,
        StreamsBuilder, StreamsError, TimeWindowedKStream, TopicNameExtractor, Topology,
        TopologyError,
    };
    pub use kstreams_embedded::EmbeddedKafka;
    pub use kstreams_record::{
        BytesSerde, DefaultSerde, F64Serde, Headers, I32Serde, I64Serde, JsonSerde, Nullable,
        Record, RecordMetadata, Serde, SerdeError, StringSerde, UnitSerde,
    };
    pub use kstreams_runtime::kafka::{
        KafkaStreams, ProcessingGuarantee, State, StreamThreadExceptionResponse, StreamsConfig,
    };
    pub use kstreams_runtime::{
        DeserializationHandling, ProcessingHandling, TaskConfig, TestInputTopic, TestOutputTopic,
        TopologyTestDriver,
    };
    pub use kstreams_state::{
        KeyValueStore, KeyValueStoreHandle, ReadOnlyKeyValueStore, ReadOnlySessionStore,
        ReadOnlyWindowStore, SessionStore, SessionStoreHandle, SessionWindowedSerde, Stores,
        TimeWindowedSerde, TimestampedKeyValueStoreHandle, TimestampedWindowStoreHandle,
        ValueAndTimestamp, VersionedKeyValueStore, VersionedKeyValueStoreHandle, VersionedRecord,
        Window, WindowStore, WindowStoreHandle, Windowed,
    };
    pub use kstreams_time::{
        EmitStrategy, PunctuationType, SessionWindows, SlidingWindows, TimeWindows,
        TimestampExtractor, UnlimitedWindows,
    };
}
