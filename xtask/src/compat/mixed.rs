//! `cargo xtask compat <scenario> --mixed`: Kafka Streams and kstreams in
//! one streams group (KIP-1071), sharing the tasks of one topology.
//!
//! Both sides start with the same application id, `group.protocol=streams`
//! and exactly_once_v2, each with its own state directory and an
//! `application.server` naming it (`java-side`, `kstreams-side`). The
//! broker assigns the tasks from the topology the members register: the
//! run waits until the group is stable with both members, each running
//! active tasks, and only then produces the input, so that both process
//! part of it. Once the group has committed the end of the input (and of
//! its internal topics) the assignment is described again (it must still
//! be shared), both stop, and the output topic, written by both, must equal
//! the expected output of one application.
//!
//! A task runs on one side and hands its repartition, subscription and
//! changelog records to tasks on the other: the run holds only if both
//! register the same topology (sub-topology ids, topics) and write the
//! same bytes to every internal topic.

use std::process::Child;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::java::JavaHarness;
use super::kstreams_side::{self, KstreamsSide};
use super::migrate::shared_output;
use super::records;
use super::scenario::Scenario;
use super::verdict;
use super::{input_file, run_dir, write_input_and_expected, Options, Side, Topics};

/// Each side's `application.server`; the host names the side in the
/// group's description. Nothing listens there: the run makes no query.
const JAVA_ENDPOINT: &str = "java-side:9001";
const KSTREAMS_ENDPOINT: &str = "kstreams-side:9002";

/// How long a task waits for a partition with no data before processing
/// the others (`max.task.idle.ms`). The apps are running, caught up, when
/// the input arrives, and a partition's records may come a fetch after
/// another's: with the default 0 a task would not wait for them, and a
/// join or cogroup would see its inputs in another order than a run that
/// starts after the input (where the partitions are known to lag, so the
/// task waits, KIP-695). Both sides honour it alike.
const MAX_TASK_IDLE_MS: u64 = 2000;

/// The scenarios `cargo xtask ci` runs on a mixed group: a repartition
/// (wordcount), a table repartition (table-aggregate), co-partitioned
/// joins (stream-table-join, table-table-join-cached over three
/// partitions), a cogroup, and the foreign-key join's two round trips.
pub(super) const CI_SCENARIOS: &[&str] = &[
    "wordcount",
    "table-aggregate",
    "stream-table-join",
    "table-table-join-cached",
    "cogroup",
    "foreign-key-join",
];

/// Runs one scenario on a mixed group; true when the output is the
/// expected one and both sides ran tasks throughout.
pub(super) fn run(
    scenario: &'static Scenario,
    options: &Options,
    java: &JavaHarness,
    kstreams: &KstreamsSide,
    bootstrap: &str,
) -> Result<bool> {
    if !kstreams.supports(scenario.app()) {
        bail!("the kstreams side cannot run {} yet", scenario.name);
    }
    if !scenario.global_input_topics().is_empty() {
        // Not a difference between the sides: in any running application,
        // global-table updates race with the stream (the global thread is
        // not time-synchronized with the tasks), and here all the input
        // arrives while both are running.
        bail!(
            "{} reads a global table, which only a run started after its input is deterministic for",
            scenario.name
        );
    }
    let began = Instant::now();
    let dir = run_dir(scenario)?;
    let (input, Some(expected)) = write_input_and_expected(scenario, options, &dir)? else {
        bail!(
            "{} has no expected output of its own (Kafka Streams is its reference), \
             so a mixed run has nothing to be compared with",
            scenario.name
        );
    };
    let topics = Topics::new(scenario);
    // One output topic both sides write, as one application's would be.
    java.create_topics(bootstrap, &topics.all(scenario, &[Side::Java]))?;
    let output = topics.output(Side::Java);

    let mut shared = topics.app_run(scenario, Side::Java, &dir);
    shared.app_id = format!("{}-mixed", topics.prefix);
    shared.output = output.clone();
    shared.processing_guarantee = Some("exactly_once_v2");
    shared.group_protocol = Some("streams");
    shared.max_task_idle_ms = Some(MAX_TASK_IDLE_MS);
    let side_run = |side: Side, endpoint: &str| {
        let mut run = shared.clone();
        run.state_dir = dir.join(format!("{}-state", side.name()));
        run.describe_to = dir.join(format!("{}-topology.txt", side.name()));
        run.application_server = Some(endpoint.to_owned());
        run
    };
    let java_run = side_run(Side::Java, JAVA_ENDPOINT);
    let kstreams_run = side_run(Side::Kstreams, KSTREAMS_ENDPOINT);

    let mut apps = Apps {
        java: Some(java.start_held(bootstrap, &java_run)?),
        kstreams: Some(kstreams.start(bootstrap, &kstreams_run)?),
    };
    let before = shared_assignment(java, bootstrap, &shared.app_id)?;
    eprintln!(
        "compat: {}: one streams group, tasks shared before the input: {before}",
        scenario.name
    );
    // In one transaction: both sides read committed records only (they run
    // exactly_once_v2), so each task sees its whole input at once, as in a
    // run started after the input was there.
    let mut files = Vec::new();
    for ((suffix, records), topic) in scenario.split_input(&input).into_iter().zip(&topics.inputs) {
        let file = dir.join(format!("all-{}", input_file(scenario, suffix)));
        records::write_input(&file, &records)?;
        files.push((topic.clone(), file));
    }
    java.produce_atomically(bootstrap, &files)?;
    let inputs: Vec<&str> = shared.group_inputs.iter().map(String::as_str).collect();
    java.await_idle(bootstrap, &shared.app_id, &inputs)?;
    let after = shared_assignment(java, bootstrap, &shared.app_id)?;
    eprintln!(
        "compat: {}: the group processed its input, tasks shared: {after}",
        scenario.name
    );
    apps.stop()?;

    let combined = shared_output(scenario, java, bootstrap, &output, &dir.join("mixed.tsv"))?;
    let agree = verdict::against_expected(
        scenario,
        "java and kstreams in one streams group",
        &expected,
        &combined,
    );
    verdict::conclude(scenario, "mixed group", agree, began, &dir);
    Ok(agree)
}

/// Waits for the group to settle with both sides running active tasks;
/// returns who runs what, as text. Fails when a side runs none (one side
/// alone would prove nothing about sharing).
fn shared_assignment(java: &JavaHarness, bootstrap: &str, group: &str) -> Result<String> {
    let members = java.streams_group_members(bootstrap, group, 2)?;
    let mut described = Vec::new();
    for endpoint in [JAVA_ENDPOINT, KSTREAMS_ENDPOINT] {
        let host = endpoint.split(':').next().unwrap_or(endpoint);
        let tasks = members
            .lines()
            .find_map(|line| line.strip_prefix(host)?.strip_prefix('\t'))
            .with_context(|| format!("no member of group {group} is {host}:\n{members}"))?;
        described.push(format!("{host} runs {tasks}"));
    }
    Ok(described.join("; "))
}

/// The two running apps; whatever happens, neither outlives the run.
struct Apps {
    java: Option<Child>,
    kstreams: Option<Child>,
}

impl Apps {
    /// kstreams closes (SIGTERM); the held Java app is killed, its output
    /// being complete once the group has committed the end of its input.
    fn stop(&mut self) -> Result<()> {
        if let Some(mut java) = self.java.take() {
            let _ = java.kill();
            let _ = java.wait();
        }
        match self.kstreams.take() {
            Some(mut kstreams) => kstreams_side::stop(&mut kstreams),
            None => Ok(()),
        }
    }
}

impl Drop for Apps {
    fn drop(&mut self) {
        for child in [self.java.as_mut(), self.kstreams.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
