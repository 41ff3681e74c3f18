//! `cargo xtask compat <scenario> --migrate java-to-kstreams|kstreams-to-java
//! [--state same|empty] [--kill]`: an application moves between Kafka Streams
//! and kstreams in the middle of its input.
//!
//! With `--kill` both sides run under exactly_once_v2 and the first one is
//! killed with SIGKILL once its group has committed the end of its half
//! instead of closing: it leaves no final checkpoint (under exactly-once a
//! store on disk is trusted only after a clean close), holds its state
//! directory's locks and stays in the group until its session times out.
//!
//! The first side runs the scenario with application id A over the first
//! half of the input (the first half of the records as generated, each
//! topic's share), waits until its group has committed the end of it and
//! stops cleanly. Then the second half is produced and the other side starts
//! with the same application id A, on the same state directory (`same`: it
//! reads the checkpoints and task directories the first side left) or on an
//! empty one (`empty`: it restores every store from the changelogs), and
//! finishes. The output topic, written by both, must equal the output of one
//! uninterrupted run (the expected output, which both sides match alone):
//! a record reprocessed past the first side's last commit would show up as
//! a duplicate update, a store not resumed as a wrong count. Each side also
//! counts the input records it consumed ([`consumed`]): the first side must
//! have read exactly the first half, the second exactly the second.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};

use super::consumed;
use super::java::{AppRun, JavaHarness};
use super::kstreams_side::KstreamsSide;
use super::records::{self, Record};
use super::scenario::Scenario;
use super::verdict;
use super::{input_file, run_dir, write_input_and_expected, Options, Side, Topics};
use crate::process::secs;

/// How long a killed first side's group member outlives it: the default
/// `session.timeout.ms` (45 s) of both sides' consumers, and a margin.
const KILLED_SESSION_WAIT: std::time::Duration = std::time::Duration::from_secs(50);

/// The migrations `cargo xtask ci` runs (about a minute each, most of it
/// the wait for the first side's group session): both directions, killed
/// and clean, on the same and on an empty state directory, through a
/// repartition topic, a foreign-key join's internal topics and a table
/// aggregation's changelog.
pub(super) const CI_MIGRATIONS: &[(&str, Migration)] = &[
    (
        "wordcount",
        Migration {
            direction: Direction::JavaToKstreams,
            state: StateDir::Same,
            stop: Stop::Kill,
        },
    ),
    (
        "foreign-key-join",
        Migration {
            direction: Direction::KstreamsToJava,
            state: StateDir::Empty,
            stop: Stop::Kill,
        },
    ),
    (
        "table-aggregate",
        Migration {
            direction: Direction::KstreamsToJava,
            state: StateDir::Same,
            stop: Stop::Clean,
        },
    ),
];

/// Which way the application moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Direction {
    JavaToKstreams,
    KstreamsToJava,
}

impl Direction {
    pub(super) fn parse(text: &str) -> Result<Self> {
        match text {
            "java-to-kstreams" => Ok(Direction::JavaToKstreams),
            "kstreams-to-java" => Ok(Direction::KstreamsToJava),
            other => bail!("--migrate must be java-to-kstreams or kstreams-to-java, not {other}"),
        }
    }

    fn sides(self) -> (Side, Side) {
        match self {
            Direction::JavaToKstreams => (Side::Java, Side::Kstreams),
            Direction::KstreamsToJava => (Side::Kstreams, Side::Java),
        }
    }
}

/// How the first side hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// A clean close (SIGTERM for kstreams; Kafka Streams' `close()`).
    Clean,
    /// SIGKILL once its group has committed the end of its half: no close,
    /// no final checkpoint, the group not left. Both sides then run under
    /// exactly_once_v2, as an application that must survive a crash would,
    /// and the second side must restore what it cannot trust on disk.
    Kill,
}

/// One migration: which way, on which state directory, how the first side
/// stops.
#[derive(Debug, Clone, Copy)]
pub(super) struct Migration {
    pub direction: Direction,
    pub state: StateDir,
    pub stop: Stop,
}

/// Where the second side keeps its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StateDir {
    /// The directory the first side used.
    Same,
    /// A new, empty directory: every store restores from its changelog.
    Empty,
}

impl StateDir {
    pub(super) fn parse(text: &str) -> Result<Self> {
        match text {
            "same" => Ok(StateDir::Same),
            "empty" => Ok(StateDir::Empty),
            other => bail!("--state must be same or empty, not {other}"),
        }
    }
}

/// Runs one migration; true when the combined output is the expected one.
pub(super) fn run(
    scenario: &'static Scenario,
    options: &Options,
    Migration {
        direction,
        state,
        stop,
    }: Migration,
    java: &JavaHarness,
    kstreams: &KstreamsSide,
    bootstrap: &str,
) -> Result<bool> {
    if !kstreams.supports(scenario.app()) {
        bail!(
            "the kstreams side cannot run {} yet, so it cannot take it over",
            scenario.name
        );
    }
    let began = Instant::now();
    let dir = run_dir(scenario)?;
    let (input, Some(expected)) = write_input_and_expected(scenario, options, &dir)? else {
        bail!(
            "{} has no expected output of its own (Kafka Streams is its reference), \
             so a migration has nothing to be compared with",
            scenario.name
        );
    };
    let (first_half, second_half) = input.split_at(input.len() / 2);

    let topics = Topics::new(scenario);
    // One output topic both sides write, as one application's would be.
    java.create_topics(bootstrap, &topics.all(scenario, &[Side::Java]))?;
    let output = topics.output(Side::Java);

    let (from, to) = direction.sides();
    let mut run = topics.app_run(scenario, Side::Java, &dir);
    run.app_id = format!("{}-migrated", topics.prefix);
    run.output = output.clone();
    run.state_dir = dir.join("state");
    if stop == Stop::Kill {
        run.processing_guarantee = Some("exactly_once_v2");
    }

    produce_half(
        scenario, java, bootstrap, &topics, first_half, &dir, "first",
    )?;
    run.describe_to = dir.join(format!("{}-topology.txt", from.name()));
    run.consumed_to = Some(dir.join(format!("{}-consumed.tsv", from.name())));
    match (stop, from) {
        (Stop::Clean, _) => run_on(from, &run, java, kstreams, bootstrap)?,
        (Stop::Kill, Side::Java) => java.run_scenario_and_kill(bootstrap, &run)?,
        (Stop::Kill, Side::Kstreams) => kstreams.run_scenario_and_kill(bootstrap, &run, java)?,
    }
    eprintln!(
        "compat: {}: {} processed the first half ({} records) and {}",
        scenario.name,
        from.name(),
        first_half.len(),
        match stop {
            Stop::Clean => "stopped",
            Stop::Kill => "was killed with SIGKILL",
        }
    );

    if stop == Stop::Kill {
        // The killed member stays in the (classic) group until its session
        // times out, and the two sides' assignors differ: Kafka Streams
        // takes the mismatch (InconsistentGroupProtocol) as fatal, so the
        // second side starts once the session (45 s by default on both
        // sides) is over.
        eprintln!(
            "compat: {}: waiting {} for the killed member's session to end",
            scenario.name,
            secs(KILLED_SESSION_WAIT)
        );
        std::thread::sleep(KILLED_SESSION_WAIT);
    }
    produce_half(
        scenario,
        java,
        bootstrap,
        &topics,
        second_half,
        &dir,
        "second",
    )?;
    if state == StateDir::Empty {
        run.state_dir = dir.join("state-empty");
    }
    run.describe_to = dir.join(format!("{}-topology.txt", to.name()));
    run.consumed_to = Some(dir.join(format!("{}-consumed.tsv", to.name())));
    run_on(to, &run, java, kstreams, bootstrap)?;

    let combined = shared_output(
        scenario,
        java,
        bootstrap,
        &output,
        &dir.join("migrated.tsv"),
    )?;
    let what = format!(
        "{} then {} ({state:?} state dir, {stop:?} stop)",
        from.name(),
        to.name()
    );
    let mut agree = verdict::against_expected(scenario, &what, &expected, &combined);
    agree &= consumed_halves(
        scenario,
        &topics,
        &run,
        &dir,
        [(from, first_half), (to, second_half)],
    )?;
    verdict::conclude(scenario, "migration", agree, began, &dir);
    Ok(agree)
}

/// Checks that each side consumed exactly its half of the group's input
/// topics (a global table's topic is read by every instance in full, and
/// counted by neither); prints the counts.
fn consumed_halves(
    scenario: &Scenario,
    topics: &Topics,
    run: &AppRun,
    dir: &Path,
    halves: [(Side, &[Record]); 2],
) -> Result<bool> {
    let mut agree = true;
    for (side, half) in halves {
        let expected: consumed::Counts = scenario
            .split_input(half)
            .into_iter()
            .zip(&topics.inputs)
            .filter(|(_, topic)| run.group_inputs.contains(topic))
            .map(|((_, records), topic)| (topic.clone(), records.len() as u64))
            .collect();
        let counts = consumed::read(&dir.join(format!("{}-consumed.tsv", side.name())))?;
        let total: u64 = counts
            .iter()
            .filter(|(topic, _)| expected.contains_key(*topic))
            .map(|(_, count)| count)
            .sum();
        match consumed::differences(side.name(), &counts, &expected) {
            None => eprintln!(
                "compat: {}: {} consumed {total} input records, exactly its half",
                scenario.name,
                side.name()
            ),
            Some(differences) => {
                eprintln!("compat: {}: {differences}", scenario.name);
                agree = false;
            }
        }
    }
    Ok(agree)
}

/// The output topic one application wrote from two sides, as the
/// scenario compares it (record by record, or its final values); dumped to
/// `dump`.
pub(super) fn shared_output(
    scenario: &Scenario,
    java: &JavaHarness,
    bootstrap: &str,
    output: &str,
    dump: &Path,
) -> Result<Vec<Record>> {
    java.dump(bootstrap, output, scenario.output_serdes, dump)?;
    let combined = records::read_dump(dump)?;
    Ok(if scenario.compares_final_values() {
        records::final_values(&combined)
    } else {
        combined
    })
}

fn produce_half(
    scenario: &Scenario,
    java: &JavaHarness,
    bootstrap: &str,
    topics: &Topics,
    half: &[Record],
    dir: &Path,
    which: &str,
) -> Result<()> {
    for ((suffix, records), topic) in scenario.split_input(half).into_iter().zip(&topics.inputs) {
        let file = dir.join(format!("{which}-{}", input_file(scenario, suffix)));
        records::write_input(&file, &records)?;
        java.produce(bootstrap, topic, &file, scenario.input_codecs())?;
    }
    Ok(())
}

fn run_on(
    side: Side,
    run: &AppRun,
    java: &JavaHarness,
    kstreams: &KstreamsSide,
    bootstrap: &str,
) -> Result<()> {
    match side {
        Side::Java => java.run_scenario(bootstrap, run),
        Side::Kstreams => kstreams.run_scenario(bootstrap, run, java),
    }
}
