//! Expiry boundaries in the TopologyTestDriver: records exactly at, one
//! millisecond before and one after each boundary of every windowed or
//! time-bounded operator, with caching on (any budget) and off. Each
//! expected output says which comparison of Kafka Streams' (4.x) source
//! decides it.

use std::time::Duration;

use kstreams_dsl::{Materialized, Produced, StoreType, StreamsBuilder, Topology};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{SessionWindowedSerde, Window, Windowed};
use kstreams_time::SessionWindows;

type S = String;

fn s(x: &str) -> String {
    x.to_string()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn w(key: &str, start: i64, end: i64) -> Windowed<String> {
    Windowed::new(s(key), Window::new(start, end))
}

/// How a test runs a store: its engine and its cache.
#[derive(Debug, Clone, Copy)]
struct StoreSetup {
    store_type: StoreType,
    caching: bool,
    /// `statestore.cache.max.bytes`; 0 still puts the caching layer in the
    /// path, writing through.
    cache_max_bytes: usize,
}

/// Every engine, with the cache off, writing through, and holding.
fn store_setups() -> Vec<StoreSetup> {
    let mut out = Vec::new();
    for store_type in [StoreType::InMemory, StoreType::RocksDb] {
        for (caching, cache_max_bytes) in [(false, 0), (true, 0), (true, 10 << 20)] {
            out.push(StoreSetup {
                store_type,
                caching,
                cache_max_bytes,
            });
        }
    }
    out
}

impl StoreSetup {
    fn materialized<K: 'static, V: 'static>(&self, name: &str) -> Materialized<K, V> {
        let m = Materialized::as_(name).with_store_type(self.store_type);
        if self.caching {
            m.with_caching_enabled()
        } else {
            m.with_caching_disabled()
        }
    }

    fn driver(&self, topology: Topology) -> TopologyTestDriver {
        let mut config = TaskConfig::new("app");
        config.cache_max_bytes = self.cache_max_bytes;
        TopologyTestDriver::with_config(topology, config, 0).unwrap()
    }
}

fn session_count(windows: SessionWindows, setup: StoreSetup) -> Topology {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("clicks")
        .group_by_key()
        .windowed_by_session(windows)
        .count_with(None, setup.materialized("sessions"))
        .to_stream()
        .to_with(
            "sessions",
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
    b.build().unwrap()
}

/// Gap 5 s, grace 0, stream time 20000: the close time is 15000.
/// `KStreamSessionWindowAggregate.process` drops a record only when
/// `mergedWindow.end() < windowCloseTime` (windowCloseTime =
/// observedStreamTime - grace - gap), so a session ending exactly at 15000
/// is accepted, stored and forwarded; one ending at 14999 is dropped and
/// counted. The store's retention (gap + grace) keeps what the processor
/// accepts: a second record at 15000 finds the session and counts 2
/// (RocksDB's segments keep it; `CachingSessionStore.put` never drops).
#[test]
fn a_session_ending_exactly_at_the_close_time_is_kept_with_caching_on_and_off() {
    let windows = SessionWindows::of_inactivity_gap_with_no_grace(ms(5000));
    for setup in store_setups() {
        let driver = setup.driver(session_count(windows, setup));
        let input = driver.create_input_topic("clicks", StringSerde, StringSerde);
        let output = driver.create_output_topic(
            "sessions",
            SessionWindowedSerde::new(StringSerde),
            Nullable(I64Serde),
        );
        input.pipe_input_at(s("a"), s("c"), 20000);
        input.pipe_input_at(s("at"), s("c"), 15000);
        input.pipe_input_at(s("before"), s("c"), 14999);
        input.pipe_input_at(s("after"), s("c"), 15001);
        input.pipe_input_at(s("at"), s("c"), 15000);
        let got: Vec<_> = output
            .read_records_to_list()
            .into_iter()
            .map(|r| (r.key, r.value, r.timestamp))
            .collect();
        assert_eq!(
            got,
            vec![
                (w("a", 20000, 20000), Some(1), 20000),
                (w("at", 15000, 15000), Some(1), 15000),
                (w("after", 15001, 15001), Some(1), 15001),
                (w("at", 15000, 15000), Some(2), 15000),
            ],
            "{setup:?}"
        );
        assert_eq!(driver.dropped_records(), 1, "{setup:?}");
    }
}
