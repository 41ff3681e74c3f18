//! Eight stream threads, a stream joined to two tables, six grouped streams
//! cogrouped into one aggregate: the "projekte" topology of the seed post,
//! with and without table bootstrap.
//!
//! Projects (`projekte`) are left-joined with two tables
//! (`wirtschaftseinheiten`, `mietobjekte`), then cogrouped with five more
//! streams of the same key (status, findings, tasks, executions, groups)
//! into one `ProjektAggregat` per project. Every topic is loaded before the
//! application starts, as when it is (re)deployed: the projects' history has
//! old timestamps, the tables' current rows newer ones. Kafka Streams'
//! timestamp synchronization then processes the older project records
//! before the table rows they need, and the joins come out empty, on each of
//! the eight threads; more threads only make it worse. A GlobalKTable would
//! hide it but copies both tables to every instance.
//!
//! `Consumed::with_bootstrap()` on the two tables makes each task read its
//! table partitions to the end before it processes a project: no unmatched
//! join. Both applications run side by side on the same input.
//!
//! ```text
//! cargo run -p kstreams-examples --example projekte
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use kstreams::prelude::*;
use kstreams_examples::{
    read_topic, wait_until_running, BoxError, Cluster, Incoming, InputProducer, Outgoing, StateDir,
};
use serde::{Deserialize, Serialize};

const PARTITIONS: i32 = 8;
const THREADS: usize = 8;
const PROJEKTE: usize = 400;
const BASE_TS: i64 = 1_750_000_000_000;
/// How much newer the tables' rows are than the projects' history.
const TABLES_NEWER_BY_MS: i64 = 86_400_000;

const PROJEKTE_TOPIC: &str = "projekte";
const WIRTSCHAFTSEINHEITEN: &str = "wirtschaftseinheiten";
const MIETOBJEKTE: &str = "mietobjekte";
/// The five streams cogrouped with the joined projects.
const OTHER_STREAMS: [&str; 5] = [
    "projektstatus",
    "befunde",
    "aufgaben",
    "durchfuehrungen",
    "gruppen",
];

/// A project with what the two tables had for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ProjektMitBezug {
    projekt: String,
    wirtschaftseinheit: Option<String>,
    mietobjekt: Option<String>,
}

/// Everything known about one project.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjektAggregat {
    projekt: Option<String>,
    wirtschaftseinheit: Option<String>,
    mietobjekt: Option<String>,
    /// Events per cogrouped stream, in [`OTHER_STREAMS`] order.
    events: [u32; 5],
}

impl ProjektAggregat {
    fn unmatched(&self) -> bool {
        self.projekt.is_some() && (self.wirtschaftseinheit.is_none() || self.mietobjekt.is_none())
    }

    fn complete(&self) -> bool {
        self.events.iter().all(|&n| n >= 1)
    }

    /// Whether an event was counted twice: at-least-once redelivery, when a
    /// rebalance moved a task before its progress was committed.
    fn recounted(&self) -> bool {
        self.events.iter().any(|&n| n > 1)
    }

    fn counted(mut self, stream: usize) -> Self {
        self.events[stream] += 1;
        self
    }
}

fn topology(bootstrap: bool, output: &str) -> Result<Topology, TopologyError> {
    let builder = StreamsBuilder::new();
    let table = |topic: &str| {
        let consumed = Consumed::with(StringSerde, StringSerde);
        let consumed = if bootstrap {
            consumed.with_bootstrap()
        } else {
            consumed
        };
        builder.table_with(topic, consumed, Materialized::as_(format!("{topic}-store")))
    };
    let wirtschaftseinheiten = table(WIRTSCHAFTSEINHEITEN);
    let mietobjekte = table(MIETOBJEKTE);
    let stream = |topic: &str| builder.stream_with(topic, Consumed::with(StringSerde, StringSerde));

    let projekte = stream(PROJEKTE_TOPIC)
        .left_join(&wirtschaftseinheiten, |projekt, we| ProjektMitBezug {
            projekt: projekt.clone(),
            wirtschaftseinheit: we.cloned(),
            mietobjekt: None,
        })
        .left_join(&mietobjekte, |projekt, mo| ProjektMitBezug {
            mietobjekt: mo.cloned(),
            ..projekt.clone()
        });
    let mut cogrouped = projekte.group_by_key().cogroup(
        |_, current: ProjektMitBezug, previous: ProjektAggregat| ProjektAggregat {
            projekt: Some(current.projekt),
            wirtschaftseinheit: current.wirtschaftseinheit,
            mietobjekt: current.mietobjekt,
            ..previous
        },
    );
    for (i, topic) in OTHER_STREAMS.into_iter().enumerate() {
        cogrouped = cogrouped.cogroup(&stream(topic).group_by_key(), move |_, _event, agg| {
            ProjektAggregat::counted(agg, i)
        });
    }
    cogrouped
        .aggregate_with(
            ProjektAggregat::default,
            Named::new("projekt-aggregat"),
            Materialized::as_("projekt-store")
                .with_key_serde(StringSerde)
                .with_value_serde(JsonSerde::<ProjektAggregat>::new()),
        )
        .to_stream()
        .filter(|_, aggregat| aggregat.as_ref().is_some_and(|a| a.projekt.is_some()))
        .to_with(
            output,
            Produced::with(StringSerde, Nullable(JsonSerde::<ProjektAggregat>::new())),
        );
    builder.build()
}

fn projekt_key(i: usize) -> String {
    format!("projekt-{i:03}")
}

/// The whole input, before either application starts.
fn produce_everything(producer: &InputProducer) -> Result<(), BoxError> {
    let send = |topic: &str, key: &str, value: String, timestamp: i64| {
        producer.send(
            topic,
            PARTITIONS,
            Outgoing {
                key,
                value: Some(value.as_bytes()),
                timestamp,
            },
        )
    };
    for i in 0..PROJEKTE {
        let key = projekt_key(i);
        let history = BASE_TS + i as i64 * 1000;
        send(PROJEKTE_TOPIC, &key, format!("Projekt {i}"), history)?;
        for (s, topic) in OTHER_STREAMS.iter().enumerate() {
            send(topic, &key, format!("{topic} {i}"), history + 1 + s as i64)?;
        }
        let current = history + TABLES_NEWER_BY_MS;
        send(WIRTSCHAFTSEINHEITEN, &key, format!("WE {i}"), current)?;
        send(MIETOBJEKTE, &key, format!("MO {i}"), current)?;
    }
    producer.flush()
}

/// The latest aggregate per project on `output`, read until every project
/// has one with all five streams in.
fn latest_aggregates(
    bootstrap: &str,
    output: &str,
) -> Result<BTreeMap<String, ProjektAggregat>, BoxError> {
    let latest = |records: &[Incoming]| {
        let mut latest = BTreeMap::new();
        for r in records {
            if let Ok(aggregat) =
                serde_json::from_slice::<ProjektAggregat>(r.value.as_deref().unwrap_or_default())
            {
                latest.insert(r.key.clone(), aggregat);
            }
        }
        latest
    };
    let records = read_topic(bootstrap, output, Duration::from_secs(30), |read| {
        let latest = latest(read);
        latest.len() == PROJEKTE && latest.values().all(ProjektAggregat::complete)
    })?;
    Ok(latest(&records))
}

/// What one application made of the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Projects with an aggregate.
    pub projekte: usize,
    /// Of them, those whose join missed a table row.
    pub unmatched: usize,
    /// Of them, those with every cogrouped stream's event in.
    pub complete: usize,
    /// Of them, those with an event counted twice.
    pub recounted: usize,
    /// Stream threads that had at least one task.
    pub busy_threads: usize,
}

/// Both runs.
#[derive(Debug)]
pub struct Summary {
    /// Tables not bootstrapped.
    pub without_bootstrap: Outcome,
    /// Tables bootstrapped.
    pub with_bootstrap: Outcome,
}

/// Runs both applications on the embedded cluster and counts unmatched
/// joins.
pub fn run() -> Result<Summary, BoxError> {
    let cluster = Cluster::start(false)?;
    let bootstrap = cluster.bootstrap_servers();
    let variants = [("without-bootstrap", false), ("with-bootstrap", true)];
    let inputs = [PROJEKTE_TOPIC, WIRTSCHAFTSEINHEITEN, MIETOBJEKTE]
        .into_iter()
        .chain(OTHER_STREAMS);
    for topic in inputs {
        cluster.create_topic(topic, PARTITIONS)?;
    }
    let producer = InputProducer::new(&bootstrap)?;
    produce_everything(&producer)?;
    println!(
        "embedded Kafka at {bootstrap}: {PROJEKTE} projects on {} topics of {PARTITIONS} partitions, \
         the tables' rows a day newer than the projects' history",
        3 + OTHER_STREAMS.len()
    );

    // One after the other: eight threads of each joining one group at the
    // same time on two shared cores would only slow both down.
    let mut outcomes = Vec::new();
    for (variant, bootstrapped) in variants {
        let application_id = format!("projekte-{variant}");
        let output = format!("projekt-aggregate-{variant}");
        cluster.create_topic(&output, PARTITIONS)?;
        let topology = topology(bootstrapped, &output)?;
        cluster.prepare_internal_topics(&topology, &application_id, PARTITIONS)?;
        let dir = StateDir::new(&application_id);
        let config = StreamsConfig::new(&application_id, &bootstrap)
            .num_stream_threads(THREADS)
            .commit_interval(Duration::from_millis(100))
            .state_dir(dir.path())
            // Now and then the mock cluster's group coordinator leaves all
            // eight members waiting in JoinGroup until some member's session
            // runs out: a short session keeps that wait short.
            .client_config("consumer.session.timeout.ms", "6000")
            .client_config("consumer.heartbeat.interval.ms", "500");
        let mut app = KafkaStreams::new(topology, config);
        app.start()?;
        let running = wait_until_running(&app, Duration::from_secs(30));
        if let Err(e) = running {
            app.close(Duration::from_secs(10));
            return Err(format!("{variant}: {e}").into());
        }
        let aggregates = latest_aggregates(&bootstrap, &output)?;
        let busy_threads = app
            .metadata()
            .threads
            .iter()
            .filter(|t| !t.active_tasks.is_empty())
            .count();
        app.close(Duration::from_secs(10));
        outcomes.push(Outcome {
            projekte: aggregates.len(),
            unmatched: aggregates.values().filter(|a| a.unmatched()).count(),
            complete: aggregates.values().filter(|a| a.complete()).count(),
            recounted: aggregates.values().filter(|a| a.recounted()).count(),
            busy_threads,
        });
    }
    for ((variant, _), outcome) in variants.iter().zip(&outcomes) {
        println!(
            "{variant:<17} ({} of {THREADS} threads with tasks): {:>3} of {} projects unmatched \
             (no Wirtschaftseinheit or Mietobjekt), {} with all 5 cogrouped streams in",
            outcome.busy_threads, outcome.unmatched, outcome.projekte, outcome.complete
        );
        if outcome.recounted > 0 {
            // At-least-once: a rebalance while the threads joined moved tasks
            // before their progress was committed; their records were
            // processed again, this time with the tables loaded.
            println!(
                "{:<17} ({} projects processed again after a rebalance, at-least-once)",
                "", outcome.recounted
            );
        }
    }
    Ok(Summary {
        without_bootstrap: outcomes[0],
        with_bootstrap: outcomes[1],
    })
}

fn main() -> Result<(), BoxError> {
    env_logger::init();
    run().map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::{PROJEKTE, THREADS};

    #[test]
    fn bootstrapped_tables_leave_no_join_unmatched_on_eight_threads() {
        let summary = super::run().unwrap();
        let with = summary.with_bootstrap;
        assert_eq!(
            (
                with.projekte,
                with.unmatched,
                with.complete,
                with.busy_threads
            ),
            (PROJEKTE, 0, PROJEKTE, THREADS),
            "{summary:?}"
        );
        let without = summary.without_bootstrap;
        assert_eq!(
            (without.projekte, without.complete, without.busy_threads),
            (PROJEKTE, PROJEKTE, THREADS),
            "{summary:?}"
        );
        assert!(without.unmatched > 0, "{summary:?}");
    }
}
