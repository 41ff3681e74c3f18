//! A stream-table join under load, where the table update comes after the
//! stream record it should serve but carries an earlier timestamp.
//!
//! Each operation is followed, a moment later, by the context it needs,
//! with a timestamp 5 ms *before* the operation's (its producer stamped it
//! first, but it reached the broker later: offsets out of timestamp order).
//! Two applications read the same topics side by side:
//!
//! - the plain join (a KTable as Kafka Streams has it): an operation joins
//!   the table as it is when the operation is processed, so it misses the
//!   context that has not arrived yet;
//! - a versioned table (a versioned store, KIP-889) with join grace
//!   (KIP-923): operations are held back for the grace period of stream time,
//!   then joined with the context valid at their own timestamp, so the late
//!   update is found.
//!
//! ```text
//! cargo run -p kstreams-examples --example versioned_join
//! ```

use std::time::Duration;

use kstreams::prelude::*;
use kstreams_examples::{
    create_internal_topics, partition_of, read_topic, wait_until_running, BoxError, InputProducer,
    Outgoing, StateDir,
};

const OPERATIONS: &str = "operations";
const CONTEXTS: &str = "contexts";
const PARTITIONS: i32 = 3;
/// Operations (and so contexts) per burst, and bursts.
const BURST: usize = 20;
const BURSTS: usize = 5;
/// Event time between two operations.
const STEP_MS: i64 = 10;
/// How long after its operation a context reaches the broker: longer than
/// the application needs to process a burst, as under load.
const CONTEXT_DELAY: Duration = Duration::from_millis(400);
/// The versioned join's grace: stream time that covers two bursts and more.
const GRACE: Duration = Duration::from_millis(500);
const BASE_TS: i64 = 1_750_000_000_000;
const UNMATCHED: &str = "UNMATCHED";

/// What one join did with the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinOutcome {
    /// Operations that found their context.
    pub hits: usize,
    /// Operations joined with no context.
    pub misses: usize,
}

/// Both joins over the same input.
#[derive(Debug)]
pub struct Summary {
    /// Operations produced.
    pub operations: usize,
    /// The plain KTable join.
    pub plain: JoinOutcome,
    /// The versioned table with join grace.
    pub versioned: JoinOutcome,
}

/// The application: operations left-joined with the context table; the
/// versioned variant keeps each key's history for a minute and joins with
/// grace.
fn topology(versioned: bool, output: &str) -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    let store = Materialized::as_("contexts-store").with_store_type(StoreType::InMemory);
    let (store, joined) = if versioned {
        (
            store.with_versioned_history(Duration::from_secs(60)),
            Joined::as_("join-context").with_grace_period(GRACE),
        )
    } else {
        (store, Joined::as_("join-context"))
    };
    let contexts = builder.table_with(CONTEXTS, Consumed::with(StringSerde, StringSerde), store);
    builder
        .stream_with(OPERATIONS, Consumed::with(StringSerde, StringSerde))
        .left_join_with(
            &contexts,
            |operation: &String, context: Option<&String>| match context {
                Some(context) => format!("{operation} in {context}"),
                None => format!("{operation} {UNMATCHED}"),
            },
            joined,
        )
        .to_with(output, Produced::with(StringSerde, StringSerde));
    builder.build()
}

fn operation_key(i: usize) -> String {
    format!("op-{i:03}")
}

/// Keys that land one on each partition: records that move every task's
/// stream time past the grace of the last operations.
fn tick_keys() -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in 0..PARTITIONS {
        let key = (0..)
            .map(|j| format!("tick-{j}"))
            .find(|k| partition_of(k, PARTITIONS) == p)
            .expect("some key lands on each partition");
        keys.push(key);
    }
    keys
}

fn produce_operations_and_late_contexts(producer: &InputProducer) -> Result<usize, BoxError> {
    let send = |topic: &str, key: &str, value: &str, timestamp: i64| {
        let value = Some(value.as_bytes());
        producer.send(
            topic,
            PARTITIONS,
            Outgoing {
                key,
                value,
                timestamp,
            },
        )
    };
    // Each burst's contexts go out with the next burst's operations:
    // stamped before their operations, sent after them.
    let send_contexts = |burst: usize| -> Result<(), BoxError> {
        for i in burst * BURST..(burst + 1) * BURST {
            let stamped = BASE_TS + i as i64 * STEP_MS - 5;
            send(
                CONTEXTS,
                &operation_key(i),
                &format!("context-{i}"),
                stamped,
            )?;
        }
        Ok(())
    };
    for burst in 0..BURSTS {
        if burst > 0 {
            send_contexts(burst - 1)?;
        }
        for i in burst * BURST..(burst + 1) * BURST {
            let stamped = BASE_TS + i as i64 * STEP_MS;
            send(
                OPERATIONS,
                &operation_key(i),
                &format!("operation-{i}"),
                stamped,
            )?;
        }
        producer.flush()?;
        std::thread::sleep(CONTEXT_DELAY);
    }
    send_contexts(BURSTS - 1)?;
    producer.flush()?;
    std::thread::sleep(CONTEXT_DELAY);
    let after_grace = BASE_TS + (BURSTS * BURST) as i64 * STEP_MS + 2 * GRACE.as_millis() as i64;
    for key in tick_keys() {
        send(OPERATIONS, &key, "tick", after_grace)?;
    }
    producer.flush()?;
    Ok(BURSTS * BURST)
}

fn outcome(bootstrap: &str, output: &str, operations: usize) -> Result<JoinOutcome, BoxError> {
    let is_operation = |r: &kstreams_examples::Incoming| r.key.starts_with("op-");
    let joined = read_topic(bootstrap, output, Duration::from_secs(20), |read| {
        read.iter().filter(|r| is_operation(r)).count() >= operations
    })?;
    let joined: Vec<_> = joined.iter().filter(|r| is_operation(r)).collect();
    let misses = joined
        .iter()
        .filter(|r| r.text().ends_with(UNMATCHED))
        .count();
    Ok(JoinOutcome {
        hits: joined.len() - misses,
        misses,
    })
}

/// Runs both joins on the embedded cluster and counts what they found.
pub fn run() -> Result<Summary, BoxError> {
    let kafka = EmbeddedKafka::start(1)?;
    let bootstrap = kafka.bootstrap_servers();
    let outputs = [("plain", "joined-plain"), ("versioned", "joined-versioned")];
    for topic in [OPERATIONS, CONTEXTS, outputs[0].1, outputs[1].1] {
        kafka.create_topic(topic, PARTITIONS, 1)?;
    }
    println!("embedded Kafka at {bootstrap}");

    let mut apps = Vec::new();
    let mut dirs = Vec::new();
    for (variant, output) in outputs {
        let application_id = format!("versioned-join-{variant}");
        let topology = topology(variant == "versioned", output)?;
        create_internal_topics(&kafka, &topology, &application_id, PARTITIONS)?;
        let dir = StateDir::new(&application_id);
        let config = StreamsConfig::new(&application_id, &bootstrap)
            .commit_interval(Duration::from_millis(100))
            .state_dir(dir.path());
        let mut app = KafkaStreams::new(topology, config);
        app.start()?;
        apps.push(app);
        dirs.push(dir);
    }
    for app in &apps {
        wait_until_running(app, Duration::from_secs(20))?;
    }

    let producer = InputProducer::new(&bootstrap)?;
    let operations = produce_operations_and_late_contexts(&producer)?;
    println!(
        "produced {operations} operations; each one's context {} ms later, stamped 5 ms earlier",
        CONTEXT_DELAY.as_millis()
    );
    let plain = outcome(&bootstrap, outputs[0].1, operations)?;
    let versioned = outcome(&bootstrap, outputs[1].1, operations)?;
    for mut app in apps {
        app.close(Duration::from_secs(10));
    }
    let versioned_label = format!("versioned table + {} ms join grace:", GRACE.as_millis());
    println!(
        "{:<40} {:>3} hits, {:>3} misses",
        "plain KTable join:", plain.hits, plain.misses
    );
    println!(
        "{versioned_label:<40} {:>3} hits, {:>3} misses",
        versioned.hits, versioned.misses
    );
    drop(dirs);
    Ok(Summary {
        operations,
        plain,
        versioned,
    })
}

fn main() -> Result<(), BoxError> {
    env_logger::init();
    run().map(|_| ())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_plain_join_misses_late_contexts_and_the_versioned_join_with_grace_finds_them_all() {
        let summary = super::run().unwrap();
        assert_eq!(
            summary.versioned,
            super::JoinOutcome {
                hits: summary.operations,
                misses: 0
            },
            "{summary:?}"
        );
        assert_eq!(
            summary.plain.hits + summary.plain.misses,
            summary.operations,
            "{summary:?}"
        );
        assert!(summary.plain.misses > 0, "{summary:?}");
    }
}
