//! `cargo xtask compat <scenario>`: differential runs of the reference
//! scenarios.
//!
//! A run generates a seeded input, computes the expected output here, produces
//! the input to a fresh topic, lets each side (Apache Kafka Streams from
//! compat/, kstreams from compat/kstreams) process it into its own output
//! topic, dumps those with read_committed, and diffs them record by record
//! (partition, order within the partition, timestamp, key, value) against the
//! expected output and against each other.
//!
//! The files of the last run stay in compat/target/runs/<scenario>/.

mod consumed;
mod dead_letters;
pub(crate) mod java;
mod kstreams_side;
mod migrate;
mod mixed;
mod partitioner;
mod records;
mod scenario;
mod verdict;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use self::java::{AppRun, JavaHarness};
use self::kstreams_side::KstreamsSide;
pub(crate) use self::kstreams_side::CARGO_BUILD;
use self::records::Record;
use self::scenario::{Scenario, SCENARIOS};
use crate::cli::{exit_code, Args};
use crate::kafka::Lease;
use crate::paths;

const DEFAULT_SEED: u64 = 42;

/// Which implementation(s) run a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Java,
    Kstreams,
}

impl Side {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Side::Java => "java",
            Side::Kstreams => "kstreams",
        }
    }
}

/// What the user asked for.
pub(crate) struct Options {
    scenarios: Vec<&'static Scenario>,
    sides: Vec<Side>,
    seed: u64,
    records: Option<usize>,
    /// `--migrate`: move the application from one side to the other
    /// halfway through the input (see migrate.rs).
    migrate: Option<migrate::Migration>,
    /// `--mixed`: Kafka Streams and kstreams in one streams group, sharing
    /// the tasks (see mixed.rs).
    mixed: bool,
}

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    let options = parse(args)?;
    let lease = Lease::acquire()?;
    Ok(exit_code(run_all(&options, lease.bootstrap())?))
}

/// Every scenario on both sides against `bootstrap`, as `cargo xtask ci`
/// runs them (the kstreams side skips what it cannot run yet); true when all
/// outputs match the expected ones and each other.
pub(crate) fn run_all_both(bootstrap: &str) -> Result<bool> {
    let options = Options {
        scenarios: SCENARIOS.iter().collect(),
        sides: vec![Side::Java, Side::Kstreams],
        seed: DEFAULT_SEED,
        records: None,
        migrate: None,
        mixed: false,
    };
    run_all(&options, bootstrap)
}

/// [`mixed::CI_SCENARIOS`], each with Kafka Streams and kstreams in one
/// streams group, as `cargo xtask ci` runs them; true when all match.
pub(crate) fn run_mixed_ci(bootstrap: &str) -> Result<bool> {
    let options = Options {
        scenarios: mixed::CI_SCENARIOS
            .iter()
            .map(|name| scenario::find(name).with_context(|| format!("no scenario {name}")))
            .collect::<Result<_>>()?,
        sides: vec![Side::Java, Side::Kstreams],
        seed: DEFAULT_SEED,
        records: None,
        migrate: None,
        mixed: true,
    };
    run_all(&options, bootstrap)
}

/// [`migrate::CI_MIGRATIONS`], as `cargo xtask ci` runs them; true when
/// every combined output is the expected one and each side consumed
/// exactly its half.
pub(crate) fn run_migrations_ci(bootstrap: &str) -> Result<bool> {
    let mut all_agree = true;
    for (name, migration) in migrate::CI_MIGRATIONS {
        let options = Options {
            scenarios: vec![scenario::find(name).with_context(|| format!("no scenario {name}"))?],
            sides: vec![Side::Java, Side::Kstreams],
            seed: DEFAULT_SEED,
            records: None,
            migrate: Some(*migration),
            mixed: false,
        };
        all_agree &= run_all(&options, bootstrap)?;
    }
    Ok(all_agree)
}

fn run_all(options: &Options, bootstrap: &str) -> Result<bool> {
    let java = JavaHarness::build()?;
    let kstreams =
        if options.sides.contains(&Side::Kstreams) || options.migrate.is_some() || options.mixed {
            Some(KstreamsSide::build()?)
        } else {
            None
        };
    let mut failed = Vec::new();
    for scenario in &options.scenarios {
        let agree = match (options.migrate, &kstreams) {
            (Some(migration), Some(kstreams)) => {
                migrate::run(scenario, options, migration, &java, kstreams, bootstrap)?
            }
            (None, Some(kstreams)) if options.mixed => {
                mixed::run(scenario, options, &java, kstreams, bootstrap)?
            }
            _ => run(scenario, options, &java, kstreams.as_ref(), bootstrap)?,
        };
        if !agree {
            failed.push(scenario.name);
        }
    }
    if !failed.is_empty() {
        eprintln!("compat: output differs in: {}", failed.join(", "));
    }
    Ok(failed.is_empty())
}

fn parse(mut args: Args) -> Result<Options> {
    let kill = args.flag("kill");
    let mixed = args.flag("mixed");
    let names = std::iter::from_fn(|| args.next()).collect::<Vec<_>>();
    let sides = match args.option::<String>("side")?.as_deref() {
        None | Some("java") => vec![Side::Java],
        Some("kstreams") => vec![Side::Kstreams],
        Some("both") => vec![Side::Java, Side::Kstreams],
        Some(other) => bail!("--side must be java, kstreams or both, not {other}"),
    };
    let seed = args.option("seed")?.unwrap_or(DEFAULT_SEED);
    let records = args.option("records")?;
    let migrate = match args.option::<String>("migrate")? {
        Some(direction) => Some(migrate::Migration {
            direction: migrate::Direction::parse(&direction)?,
            state: migrate::StateDir::parse(
                args.option::<String>("state")?.as_deref().unwrap_or("same"),
            )?,
            stop: if kill {
                migrate::Stop::Kill
            } else {
                migrate::Stop::Clean
            },
        }),
        None if kill => bail!("--kill goes with --migrate: it kills the side that hands over"),
        None => None,
    };
    if mixed && migrate.is_some() {
        bail!("--mixed and --migrate are two different runs: choose one");
    }
    args.finish()?;
    Ok(Options {
        scenarios: select(&names)?,
        sides,
        seed,
        records,
        migrate,
        mixed,
    })
}

fn select(names: &[String]) -> Result<Vec<&'static Scenario>> {
    let known = || {
        SCENARIOS
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match names {
        [] => bail!("name a scenario ({}) or all", known()),
        [all] if all == "all" => Ok(SCENARIOS.iter().collect()),
        names => names
            .iter()
            .map(|name| {
                scenario::find(name)
                    .with_context(|| format!("unknown scenario {name} (known: {})", known()))
            })
            .collect(),
    }
}

/// Runs one scenario on every requested side; true when all outputs agree.
fn run(
    scenario: &'static Scenario,
    options: &Options,
    java: &JavaHarness,
    kstreams: Option<&KstreamsSide>,
    bootstrap: &str,
) -> Result<bool> {
    let began = Instant::now();
    let dir = run_dir(scenario)?;
    let (_, expected) = write_input_and_expected(scenario, options, &dir)?;
    let topics = Topics::new(scenario);
    java.create_topics(bootstrap, &topics.all(scenario, &options.sides))?;
    for (suffix, topic) in scenario.input_topics().iter().zip(&topics.inputs) {
        java.produce(
            bootstrap,
            topic,
            &dir.join(input_file(scenario, suffix)),
            scenario.input_codecs(),
        )?;
    }

    let mut outputs: Vec<(Side, Vec<Record>)> = Vec::new();
    let mut app_ids: Vec<(Side, String)> = Vec::new();
    for &side in &options.sides {
        let run = topics.app_run(scenario, side, &dir);
        if let Some(output) = run_side(side, &run, java, kstreams, bootstrap, &dir)? {
            outputs.push((side, output));
            app_ids.push((side, run.app_id));
        }
    }

    let mut agree = compare(scenario, expected.as_deref(), &outputs)
        & same_topology(scenario, &topics, &outputs, &dir);
    if scenario.compares_internal_topics() {
        agree &= same_internal_topics(scenario, &app_ids, java, bootstrap, &dir)?;
    }
    if scenario.has_dead_letter_queue() {
        let sides: Vec<Side> = outputs.iter().map(|(side, _)| *side).collect();
        agree &= dead_letters::compare(scenario, options, &topics, &sides, java, bootstrap, &dir)?;
    }
    verdict::conclude(scenario, "", agree, began, &dir);
    Ok(agree)
}

/// Generates the input into `input.tsv` and returns it with the expected
/// output, also written to `expected.tsv` for a look with any diff tool;
/// `None` for a scenario whose only reference is Kafka Streams.
pub(crate) fn write_input_and_expected(
    scenario: &Scenario,
    options: &Options,
    dir: &Path,
) -> Result<(Vec<Record>, Option<Vec<Record>>)> {
    let input = scenario_input(scenario, options);
    let expected = scenario.expected(&input);
    for (suffix, records) in scenario.split_input(&input) {
        records::write_input(&dir.join(input_file(scenario, suffix)), &records)?;
    }
    let described = match &expected {
        Some(expected) => {
            records::write_dump(&dir.join("expected.tsv"), expected)?;
            format!("{} expected output records", expected.len())
        }
        None => "Kafka Streams' output is the reference".to_owned(),
    };
    eprintln!(
        "compat: {} with seed {}: {} input records, {described}",
        scenario.name,
        options.seed,
        input.len(),
    );
    Ok((input, expected))
}

/// The input of a run: the scenario's generator with the run's seed and size.
pub(crate) fn scenario_input(scenario: &Scenario, options: &Options) -> Vec<Record> {
    scenario.input(
        options.seed,
        options.records.unwrap_or(scenario.default_records),
    )
}

/// `input.tsv`, or for a scenario reading several topics `input-<topic>.tsv`.
pub(crate) fn input_file(scenario: &Scenario, suffix: &str) -> String {
    match scenario.input_topics() {
        [_] => "input.tsv".to_owned(),
        _ => format!("input-{suffix}.tsv"),
    }
}

/// Lets one side process the input and reads back its output; `None` for a
/// side that cannot run yet.
fn run_side(
    side: Side,
    run: &AppRun,
    java: &JavaHarness,
    kstreams: Option<&KstreamsSide>,
    bootstrap: &str,
    dir: &Path,
) -> Result<Option<Vec<Record>>> {
    match (side, kstreams) {
        (Side::Java, _) => java.run_scenario(bootstrap, run)?,
        (Side::Kstreams, Some(kstreams)) if kstreams.supports(run.scenario) => {
            kstreams.run_scenario(bootstrap, run, java)?
        }
        (Side::Kstreams, _) => {
            eprintln!(
                "compat: {}: the kstreams side cannot run this scenario yet; skipped",
                run.scenario
            );
            return Ok(None);
        }
    }
    // Both sides' outputs are read by the same tool, so they are decoded alike.
    let dump = dir.join(format!("{}.tsv", side.name()));
    java.dump(bootstrap, &run.output, run.output_serdes, &dump)?;
    records::read_dump(&dump).map(Some)
}

/// Diffs each side against the expected output, and the sides against each
/// other: record by record, or by final values where the scenario says so.
fn compare(
    scenario: &Scenario,
    expected: Option<&[Record]>,
    outputs: &[(Side, Vec<Record>)],
) -> bool {
    let reduced: Vec<(Side, Vec<Record>)>;
    let outputs = if scenario.compares_final_values() {
        reduced = outputs
            .iter()
            .map(|(side, output)| (*side, records::final_values(output)))
            .collect();
        &reduced[..]
    } else {
        outputs
    };
    let mut agree = true;
    let mut check = |left: &str, l: &[Record], right: &str, r: &[Record]| match records::diff(
        left, l, right, r,
    ) {
        None => eprintln!(
            "compat: {}: {right} == {left} ({} records)",
            scenario.name,
            r.len()
        ),
        Some(report) => {
            eprintln!(
                "compat: {}: {right} differs from {left}:\n{report}",
                scenario.name
            );
            agree = false;
        }
    };
    if let Some(expected) = expected {
        for (side, output) in outputs {
            check("expected", expected, side.name(), output);
        }
    }
    if let [(a, a_out), (b, b_out)] = outputs {
        check(a.name(), a_out, b.name(), b_out);
    }
    agree
}

/// Whether the sides that ran describe the same topology (Kafka Streams'
/// `describe()` text, output topic names aside): same generated names, same
/// sub-topologies, same edges.
fn same_topology(
    scenario: &Scenario,
    topics: &Topics,
    outputs: &[(Side, Vec<Record>)],
    dir: &Path,
) -> bool {
    let [(a, _), (b, _)] = outputs else {
        return true;
    };
    let read = |side: Side| {
        fs::read_to_string(dir.join(format!("{}-topology.txt", side.name())))
            .map(|text| text.replace(&topics.output(side), "<output>"))
    };
    match (read(*a), read(*b)) {
        (Ok(left), Ok(right)) if left == right => {
            eprintln!(
                "compat: {}: both sides describe the same topology",
                scenario.name
            );
            true
        }
        (Ok(left), Ok(right)) => {
            eprintln!(
                "compat: {}: the topologies differ:\n--- {}\n{left}--- {}\n{right}",
                scenario.name,
                a.name(),
                b.name()
            );
            false
        }
        (left, right) => {
            eprintln!(
                "compat: {}: a topology description is missing ({}: {}, {}: {})",
                scenario.name,
                a.name(),
                left.is_ok(),
                b.name(),
                right.is_ok()
            );
            false
        }
    }
}

/// Whether both sides wrote the same internal topics (repartition topics
/// and changelogs, named after each side's application id) with the same
/// bytes: the same records per partition in the same order, keys and values
/// compared as raw bytes. This is what lets an application move between
/// Kafka Streams and kstreams and resume from the other's topics.
fn same_internal_topics(
    scenario: &Scenario,
    app_ids: &[(Side, String)],
    java: &JavaHarness,
    bootstrap: &str,
    dir: &Path,
) -> Result<bool> {
    let [(a, a_id), (b, b_id)] = app_ids else {
        return Ok(true);
    };
    let suffixes = |app_id: &str| -> Result<Vec<String>> {
        let prefix = format!("{app_id}-");
        let listed = crate::process::output(
            java.tool("list-topics", bootstrap)
                .args(["--prefix", &prefix]),
            "listing the internal topics",
        )?;
        Ok(listed
            .lines()
            .filter_map(|name| name.strip_prefix(&prefix))
            .map(str::to_owned)
            .collect())
    };
    let (a_topics, b_topics) = (suffixes(a_id)?, suffixes(b_id)?);
    if a_topics != b_topics {
        eprintln!(
            "compat: {}: the internal topics differ:
  {}: {a_topics:?}
  {}: {b_topics:?}",
            scenario.name,
            a.name(),
            b.name()
        );
        return Ok(false);
    }
    let internal = dir.join("internal");
    fs::create_dir_all(&internal)
        .with_context(|| format!("cannot create {}", internal.display()))?;
    let mut agree = true;
    for suffix in &a_topics {
        let mut dumped = Vec::new();
        for (side, app_id) in [(a, a_id), (b, b_id)] {
            let file = internal.join(format!("{}-{suffix}.tsv", side.name()));
            java.dump(
                bootstrap,
                &format!("{app_id}-{suffix}"),
                ("bytes", "bytes"),
                &file,
            )?;
            dumped.push(records::read_dump(&file)?);
        }
        match records::diff(a.name(), &dumped[0], b.name(), &dumped[1]) {
            None => eprintln!(
                "compat: {}: {suffix}: same bytes on both sides ({} records)",
                scenario.name,
                dumped[0].len()
            ),
            Some(report) => {
                eprintln!(
                    "compat: {}: {suffix}: the sides wrote different bytes:\n{report}",
                    scenario.name
                );
                agree = false;
            }
        }
    }
    Ok(agree)
}

/// compat/target/runs/<scenario>/, emptied for this run.
pub(crate) fn run_dir(scenario: &Scenario) -> Result<PathBuf> {
    let dir = paths::repo_root()
        .join("compat/target/runs")
        .join(scenario.name);
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// Fresh topic and application names for one run, so that runs against a
/// long-lived broker never see each other's records or committed offsets.
pub(crate) struct Topics {
    pub(crate) prefix: String,
    /// One topic per [`Scenario::input_topics`], in that order.
    pub(crate) inputs: Vec<String>,
}

impl Topics {
    pub(crate) fn new(scenario: &Scenario) -> Self {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let prefix = format!("compat-{}-{millis}", scenario.name);
        Topics {
            inputs: scenario
                .input_topics()
                .iter()
                .map(|suffix| format!("{prefix}-{suffix}"))
                .collect(),
            prefix,
        }
    }

    pub(crate) fn output(&self, side: Side) -> String {
        format!("{}-output-{}", self.prefix, side.name())
    }

    /// A side's dead-letter queue, for a scenario that has one.
    pub(crate) fn dead_letter_queue(&self, scenario: &Scenario, side: Side) -> Option<String> {
        scenario
            .has_dead_letter_queue()
            .then(|| format!("{}-dlq-{}", self.prefix, side.name()))
    }

    /// Every topic a run needs, with its partition count: the inputs, and
    /// each side's output and dead-letter queue (one partition: the
    /// producer picks a dead letter's partition from its key).
    pub(crate) fn all(&self, scenario: &Scenario, sides: &[Side]) -> Vec<(String, i32)> {
        self.inputs
            .iter()
            .map(|input| (input.clone(), scenario.input_partitions))
            .chain(
                sides
                    .iter()
                    .map(|&side| (self.output(side), scenario.output_partitions)),
            )
            .chain(
                sides
                    .iter()
                    .filter_map(|&side| self.dead_letter_queue(scenario, side))
                    .map(|topic| (topic, 1)),
            )
            .collect()
    }

    pub(crate) fn app_run(&self, scenario: &'static Scenario, side: Side, dir: &Path) -> AppRun {
        AppRun {
            scenario: scenario.app(),
            output_serdes: scenario.output_serdes,
            app_id: format!("{}-{}", self.prefix, side.name()),
            input: self.inputs.join(","),
            group_inputs: scenario
                .input_topics()
                .iter()
                .zip(&self.inputs)
                .filter(|(suffix, _)| !scenario.global_input_topics().contains(suffix))
                .map(|(_, topic)| topic.clone())
                .collect(),
            output: self.output(side),
            state_dir: dir.join(format!("{}-state", side.name())),
            describe_to: dir.join(format!("{}-topology.txt", side.name())),
            cache_max_bytes: scenario.cache_max_bytes(),
            dead_letter_queue: self.dead_letter_queue(scenario, side),
            processing_guarantee: None,
            group_protocol: None,
            application_server: None,
            max_task_idle_ms: None,
            consumed_to: None,
        }
    }
}
