//! The suppression buffer across a restart, on a real broker
//! (`cargo xtask kafka start`, KSTREAMS_BOOTSTRAP; skipped without it):
//! windows buffered when the application stopped come back from the
//! buffer's changelog and are emitted once they close.

use crate::common::{self, Input};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::FreshRun;
use kstreams_dsl::{BufferConfig, Produced, StreamsBuilder, Suppressed};
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::test_broker;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
use kstreams_state::TimeWindowedSerde;
use kstreams_time::TimeWindows;

const WINDOW_MS: i64 = 1_000;

fn final_counts_app(bootstrap: &str, run: &FreshRun) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(
            WINDOW_MS as u64,
        )))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            &run.output,
            Produced::with(
                TimeWindowedSerde::new(StringSerde, WINDOW_MS),
                Nullable(I64Serde),
            ),
        );
    let config = StreamsConfig::new(&run.app_id, bootstrap)
        .commit_interval(Duration::from_millis(200))
        .state_dir(&run.state_dir);
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// Sends `(key, timestamp)` records to partition 0, in order.
fn produce(bootstrap: &str, topic: &str, records: &[(&str, i64)]) {
    let inputs = records
        .iter()
        .map(|&(key, timestamp)| Input::new(key, "x").in_partition(0).at(timestamp));
    common::produce(bootstrap, topic, inputs);
}

/// The final counts read within `wait`, by key and window start.
fn finals(bootstrap: &str, topic: &str, wait: Duration) -> BTreeMap<(String, i64), i64> {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let mut out = BTreeMap::new();
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let key = m.key().unwrap_or_default();
            let (name, start) = key.split_at(key.len() - 8);
            let start = i64::from_be_bytes(start.try_into().unwrap());
            let count = m
                .payload()
                .and_then(|p| <[u8; 8]>::try_from(p).ok())
                .map_or(-1, i64::from_be_bytes);
            out.insert((String::from_utf8_lossy(name).into_owned(), start), count);
        }
    }
    out
}

#[test]
fn windows_buffered_at_a_restart_are_emitted_once_they_close() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "suppress-restart");
    let base = 1_700_000_000_000;
    // Window [base, base + 1 s) of "a" gets two records; "b" at base + 1.5 s
    // closes it (no grace) and opens its own, which stays buffered.
    produce(
        &bootstrap,
        &run.input,
        &[("a", base + 100), ("a", base + 200), ("b", base + 1_500)],
    );
    let mut app = final_counts_app(&bootstrap, &run);
    app.start().unwrap();
    let first = finals(&bootstrap, &run.output, Duration::from_secs(8));
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(first, BTreeMap::from([(("a".to_string(), base), 2)]));

    // After the restart, a record at base + 2.5 s closes b's window, which
    // only the restored buffer holds.
    produce(&bootstrap, &run.input, &[("c", base + 2_500)]);
    let mut app = final_counts_app(&bootstrap, &run);
    app.start().unwrap();
    let all = finals(&bootstrap, &run.output, Duration::from_secs(8));
    assert!(app.close(Duration::from_secs(30)));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_eq!(
        all,
        BTreeMap::from([
            (("a".to_string(), base), 2),
            (("b".to_string(), base + 1_000), 1),
        ])
    );
    let _ = std::fs::remove_dir_all(&run.state_dir);
}
