//! The Java tools of compat/ (dev.kstreams.compat.Main), built with Maven.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use anyhow::Result;

use super::consumed;
use crate::maven;
use crate::paths;
use crate::process::{self, secs};

/// The compiled compat project and its classpath.
pub(crate) struct JavaHarness {
    classpath: String,
}

impl JavaHarness {
    /// Compiles compat/ unless its classes are newer than its sources.
    pub(crate) fn build() -> Result<Self> {
        maven::require_java_and_maven()?;
        let project = paths::repo_root().join("compat");
        let target = project.join("target");
        let classpath_file = target.join("classpath.txt");
        let began = Instant::now();
        if is_stale(&project, &classpath_file) {
            process::run_captured(
                maven::mvn(&project.join("pom.xml"))
                    .arg("compile")
                    .arg("dependency:build-classpath")
                    .arg(format!("-Dmdep.outputFile={}", classpath_file.display())),
                "building compat/ with Maven",
            )?;
            maven::touch(&classpath_file)?;
            maven::stamp_kafka_version(&classpath_file)?;
            eprintln!("compat: built the Java harness ({})", secs(began.elapsed()));
        }
        let dependencies = fs::read_to_string(&classpath_file)?;
        let classes: PathBuf = target.join("classes");
        let classpath = std::env::join_paths(
            std::iter::once(classes).chain(std::env::split_paths(dependencies.trim())),
        )?
        .into_string()
        .expect("classpath built from UTF-8 paths");
        Ok(JavaHarness { classpath })
    }

    pub(crate) fn create_topics(&self, bootstrap: &str, topics: &[(String, i32)]) -> Result<()> {
        let mut command = self.tool("create-topics", bootstrap);
        for (name, partitions) in topics {
            command.arg("--topic").arg(format!("{name}:{partitions}"));
        }
        process::run(&mut command, "creating the compat topics")
    }

    /// Writes `input` to `topic`; with `codecs`, partition `p` through a
    /// producer compressing with `codecs[p % len]`.
    pub(crate) fn produce(
        &self,
        bootstrap: &str,
        topic: &str,
        input: &Path,
        codecs: &[&str],
    ) -> Result<()> {
        let mut command = self.tool("produce", bootstrap);
        command.args(["--topic", topic, "--input"]).arg(input);
        if !codecs.is_empty() {
            command.args(["--compression", &codecs.join(",")]);
        }
        process::run(&mut command, "producing the compat input")
    }

    /// Writes each `(topic, file)` in one transaction: a read_committed
    /// application sees all of it at once.
    pub(crate) fn produce_atomically(
        &self,
        bootstrap: &str,
        inputs: &[(String, PathBuf)],
    ) -> Result<()> {
        let topics: Vec<&str> = inputs.iter().map(|(t, _)| t.as_str()).collect();
        let files: Vec<String> = inputs
            .iter()
            .map(|(_, f)| f.display().to_string())
            .collect();
        process::run(
            self.tool("produce-atomically", bootstrap).args([
                "--topics",
                &topics.join(","),
                "--inputs",
                &files.join(","),
            ]),
            "producing the compat input in one transaction",
        )
    }

    /// Runs `scenario` on Kafka Streams until it has processed its input.
    pub(crate) fn run_scenario(&self, bootstrap: &str, run: &AppRun) -> Result<()> {
        let mut command = self.tool("run", bootstrap);
        command.arg(run.scenario).args(run.app_args());
        process::run(&mut command, "the Kafka Streams reference app")
    }

    /// Runs `scenario` on Kafka Streams until its group has committed the
    /// end of its input, then kills the JVM with SIGKILL: no close, no
    /// final checkpoint, the group not left.
    pub(crate) fn run_scenario_and_kill(&self, bootstrap: &str, run: &AppRun) -> Result<()> {
        let mut child = self.start_held(bootstrap, run)?;
        let inputs: Vec<&str> = run.group_inputs.iter().map(String::as_str).collect();
        let idle = self.await_idle(bootstrap, &run.app_id, &inputs);
        if let Some(file) = &run.consumed_to {
            consumed::await_settled(file);
        }
        let _ = child.kill();
        let _ = child.wait();
        idle
    }

    /// Starts the scenario's app, which runs until killed (`--hold true`:
    /// once idle it neither closes nor leaves its group).
    pub(crate) fn start_held(&self, bootstrap: &str, run: &AppRun) -> Result<Child> {
        let mut command = self.tool("run", bootstrap);
        command
            .arg(run.scenario)
            .args(run.app_args())
            .args(["--hold", "true"]);
        command
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start the Kafka Streams reference app: {e}"))
    }

    /// Waits until streams group `group` is stable with at least `members`
    /// members, each running active tasks; returns one line per member:
    /// its endpoint host and its active tasks, tab-separated.
    pub(crate) fn streams_group_members(
        &self,
        bootstrap: &str,
        group: &str,
        members: usize,
    ) -> Result<String> {
        process::output(
            self.tool("streams-group-members", bootstrap).args([
                "--group",
                group,
                "--members",
                &members.to_string(),
                "--timeout-secs",
                "120",
            ]),
            "describing the streams group",
        )
    }

    /// Waits until `group` has committed the end offsets of `topics` (and of
    /// its repartition topics): the app has processed its whole input.
    pub(crate) fn await_idle(&self, bootstrap: &str, group: &str, topics: &[&str]) -> Result<()> {
        process::run(
            self.tool("await-idle", bootstrap).args([
                "--group",
                group,
                "--topics",
                &topics.join(","),
                "--timeout-secs",
                "180",
            ]),
            "waiting for the kstreams app to process its input",
        )
    }

    pub(crate) fn dump(
        &self,
        bootstrap: &str,
        topic: &str,
        serdes: (&str, &str),
        out: &Path,
    ) -> Result<()> {
        self.dump_topic(bootstrap, topic, serdes, out, false)
    }

    /// As [`JavaHarness::dump`], with each record's headers in a sixth field.
    pub(crate) fn dump_with_headers(
        &self,
        bootstrap: &str,
        topic: &str,
        serdes: (&str, &str),
        out: &Path,
    ) -> Result<()> {
        self.dump_topic(bootstrap, topic, serdes, out, true)
    }

    fn dump_topic(
        &self,
        bootstrap: &str,
        topic: &str,
        (key, value): (&str, &str),
        out: &Path,
        headers: bool,
    ) -> Result<()> {
        let mut command = self.tool("dump", bootstrap);
        command.args(["--topic", topic, "--key", key, "--value", value]);
        if headers {
            command.args(["--headers", "true"]);
        }
        process::run(command.arg("--out").arg(out), "reading a topic")
    }

    /// A `java` command running tool `name` of compat/'s Main.
    pub(crate) fn tool(&self, name: &str, bootstrap: &str) -> Command {
        let mut command = Command::new("java");
        command
            .arg("-cp")
            .arg(&self.classpath)
            .arg("dev.kstreams.compat.Main")
            .arg(name)
            .args(["--bootstrap", bootstrap]);
        command
    }
}

/// One run of a scenario's app on one side.
#[derive(Clone)]
pub(crate) struct AppRun {
    /// The topology to run ([`Scenario::app`](super::scenario::Scenario::app)).
    pub scenario: &'static str,
    pub app_id: String,
    /// The input topics, comma-separated (two for the joins).
    pub input: String,
    /// The input topics the application's group consumes and commits (all
    /// but a global table's).
    pub group_inputs: Vec<String>,
    pub output: String,
    /// Key and value serdes of the output topic, as `dump` names them.
    pub output_serdes: (&'static str, &'static str),
    pub state_dir: PathBuf,
    /// Where the side writes its `Topology#describe()` text.
    pub describe_to: PathBuf,
    /// `statestore.cache.max.bytes` (0: every update forwarded).
    pub cache_max_bytes: u64,
    /// The dead-letter queue, which also turns on the log-and-continue
    /// deserialization handler.
    pub dead_letter_queue: Option<String>,
    /// `processing.guarantee` when not the default at_least_once.
    pub processing_guarantee: Option<&'static str>,
    /// `group.protocol` when not the default classic.
    pub group_protocol: Option<&'static str>,
    /// `application.server` (host:port), which a streams group shows for
    /// each member.
    pub application_server: Option<String>,
    /// `max.task.idle.ms` when not the default 0.
    pub max_task_idle_ms: Option<u64>,
    /// Where the side writes how many records it consumed from each input
    /// topic ([`consumed`](super::consumed)).
    pub consumed_to: Option<PathBuf>,
}

impl AppRun {
    /// The arguments both sides' `run` commands take after the scenario name.
    pub(crate) fn app_args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--app-id".into(),
            self.app_id.clone().into(),
            "--input".into(),
            self.input.clone().into(),
            "--output".into(),
            self.output.clone().into(),
            "--state-dir".into(),
            self.state_dir.clone().into(),
            "--describe-to".into(),
            self.describe_to.clone().into(),
            "--cache-max-bytes".into(),
            self.cache_max_bytes.to_string().into(),
        ];
        if let Some(topic) = &self.dead_letter_queue {
            args.extend(["--dlq".into(), topic.into()]);
        }
        if let Some(guarantee) = self.processing_guarantee {
            args.extend(["--processing-guarantee".into(), guarantee.into()]);
        }
        if let Some(protocol) = self.group_protocol {
            args.extend(["--group-protocol".into(), protocol.into()]);
        }
        if let Some(server) = &self.application_server {
            args.extend(["--application-server".into(), server.into()]);
        }
        if let Some(idle) = self.max_task_idle_ms {
            args.extend(["--max-task-idle-ms".into(), idle.to_string().into()]);
        }
        if let Some(file) = &self.consumed_to {
            args.extend(["--consumed-to".into(), file.into()]);
        }
        args
    }
}

fn is_stale(project: &Path, classpath_file: &Path) -> bool {
    let built = maven::modified(classpath_file);
    let sources = maven::newest_under(&project.join("src"));
    let pom = maven::modified(&project.join("pom.xml"));
    let jars_present = fs::read_to_string(classpath_file)
        .is_ok_and(|classpath| maven::all_exist(classpath.trim()));
    built.is_none()
        || built < sources.max(pom)
        || !maven::stamped_with_kafka_version(classpath_file)
        || !jars_present
        || !project.join("target/classes").exists()
}
