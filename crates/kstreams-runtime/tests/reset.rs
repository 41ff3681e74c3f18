//! The reset runbook (issue 49): `KafkaStreams::clean_up` (Kafka Streams'
//! `cleanUp`), refused while the application runs, deleting the local state
//! but not the process id, and respecting another instance's lock; and on a
//! real broker (`cargo xtask kafka start`, KSTREAMS_BOOTSTRAP; skipped
//! without it) allowed in ERROR, the next start restoring from the
//! changelog, and Kafka's own
//! reset tool (`org.apache.kafka.tools.StreamsResetter`, run with java;
//! skipped without java or the kafka-tools jar) followed by a restart: with
//! `clean_up`, and without it, where kstreams finds the stores checkpointed
//! past the end of their re-created changelogs and rebuilds them. Either
//! way the counts are those of a fresh start, not doubled.

use crate::common::{self, FreshRun, Input};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::types::RDKafkaErrorCode;
use kstreams_embedded::rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use kstreams_embedded::{test_broker, unique_name};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    KafkaStreams, ProcessingGuarantee, RuntimeError, State, StreamsConfig,
};
use kstreams_state::__private::{StateDirectory, PROCESS_FILE_NAME};
use kstreams_state::{StateRestoreListener, TopicPartition};

const KEYS: usize = 10;
const PARTITIONS: i32 = 2;

fn counting_app(bootstrap: &str, run: &FreshRun, guarantee: ProcessingGuarantee) -> KafkaStreams {
    counting_app_on(
        bootstrap,
        &run.app_id,
        &run.input,
        &run.output,
        &run.state_dir,
        guarantee,
    )
}

/// Counts per key into store `counts`, every update to `output` (no
/// cache), committing every 100 ms.
fn counting_app_on(
    bootstrap: &str,
    app_id: &str,
    input: &str,
    output: &str,
    state_dir: &Path,
    guarantee: ProcessingGuarantee,
) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
    let mut config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(guarantee)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir);
    config.set("statestore.cache.max.bytes", "0").unwrap();
    KafkaStreams::new(builder.build().unwrap(), config)
}

fn produce(bootstrap: &str, topic: &str, records: usize) {
    let inputs = (0..records).map(|i| Input::new(format!("k{}", i % KEYS), i.to_string()));
    common::produce(bootstrap, topic, inputs);
}

/// The task directories (`<subtopology>_<partition>`) in the application's
/// state directory.
fn task_dirs(state_dir: &Path, app_id: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(state_dir.join(app_id)) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.split_once('_'))
                    .is_some_and(|(a, b)| {
                        [a, b]
                            .iter()
                            .all(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
                    })
        })
        .collect();
    dirs.sort();
    dirs
}

fn wait_for(app: &KafkaStreams, state: State) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.state() != state {
        assert!(
            Instant::now() < deadline,
            "still {:?} after 60 s, waiting for {state:?}: {:?}",
            app.state(),
            app.errors()
        );
        assert_ne!(app.state(), State::Error, "{:?}", app.errors());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The end offsets of `topic`'s partitions now.
fn end_offsets(bootstrap: &str, topic: &str) -> Vec<i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    (0..PARTITIONS)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap()
                .1
        })
        .collect()
}

/// Reads the count topic from `from` (an offset per partition) until every
/// key's latest count is `want`, a count passes it (it never comes back),
/// or 60 s; returns the latest counts read.
fn counts_from(bootstrap: &str, topic: &str, from: &[i64], want: i64) -> BTreeMap<String, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("reset-reader"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    for (partition, offset) in from.iter().enumerate() {
        assignment
            .add_partition_offset(topic, partition as i32, Offset::Offset(*offset))
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut latest = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline
        && !(latest.len() == KEYS && latest.values().all(|&c| c == want))
        && !latest.values().any(|&c| c > want)
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            if let Some(bytes) = m.payload().and_then(|p| <[u8; 8]>::try_from(p).ok()) {
                latest.insert(key, i64::from_be_bytes(bytes));
            }
        }
    }
    latest
}

fn assert_counted(counts: &BTreeMap<String, i64>, want: i64, what: &str) {
    assert!(
        counts.len() == KEYS && counts.values().all(|&c| c == want),
        "{what}: every key counted {want} times, got {counts:?}"
    );
}

/// Counts the changelog records restored.
#[derive(Default)]
struct Restored(AtomicU64);

impl StateRestoreListener for Restored {
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, num_restored: u64) {
        self.0.fetch_add(num_restored, Ordering::SeqCst);
    }
}

#[test]
fn clean_up_before_start_deletes_the_tasks_state_keeps_the_process_id_and_spares_a_running_instance(
) {
    let root = tempfile::tempdir().unwrap();
    let dirs = StateDirectory::new(root.path(), "app").unwrap();
    // What an earlier run left: two tasks, the global stores, a process id.
    let id = {
        let lock = dirs.lock_application_directory().unwrap();
        for task in ["0_0", "0_1", "global"] {
            let path = dirs.lock_task(task).unwrap().path().to_path_buf();
            std::fs::create_dir_all(path.join("rocksdb/counts")).unwrap();
            std::fs::write(
                path.join(".checkpoint"),
                "0\n1\napp-counts-changelog 0 41\n",
            )
            .unwrap();
        }
        lock.initialize_process_id().unwrap()
    };
    // No broker is asked.
    let run = FreshRun {
        input: "in".into(),
        output: "out".into(),
        app_id: "app".into(),
        state_dir: root.path().to_path_buf(),
    };
    let mut app = counting_app("127.0.0.1:1", &run, ProcessingGuarantee::AtLeastOnce);

    // Another instance runs on this state directory: nothing is deleted.
    let running = StateDirectory::new(root.path(), "app")
        .unwrap()
        .lock_application_directory()
        .unwrap();
    let error = app.clean_up().unwrap_err();
    assert!(
        matches!(
            error,
            RuntimeError::State(kstreams_state::Error::StateDirectoryLocked { .. })
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("is locked by another instance"),
        "{error}"
    );
    assert_eq!(task_dirs(root.path(), "app").len(), 2);
    drop(running);

    app.clean_up().unwrap();
    assert!(task_dirs(root.path(), "app").is_empty());
    assert!(!root.path().join("app/global").exists());
    // KIP-1283: the process id stays, so does the lock file.
    let process = std::fs::read_to_string(root.path().join("app").join(PROCESS_FILE_NAME)).unwrap();
    assert!(process.contains(&id.to_string()), "{process}");
    assert!(root.path().join("app/.lock").exists());
    assert_eq!(app.state(), State::Created);
    // Again, with nothing left: fine.
    app.clean_up().unwrap();
}

#[test]
fn clean_up_in_error_joins_the_stopped_threads_and_deletes_the_state() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "clean-up-error");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .map_values(|v| {
            assert_ne!(v, "poison", "a poison record");
            v
        })
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(&run.output, Produced::with(StringSerde, Nullable(I64Serde)));
    let config = StreamsConfig::new(&run.app_id, &bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&run.state_dir);
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let inputs = ["a", "b", "poison"].map(|v| Input::new("k", v));
    common::produce(&bootstrap, &run.input, inputs);
    app.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.state() != State::Error {
        assert!(Instant::now() < deadline, "still {:?}", app.state());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!task_dirs(&run.state_dir, &run.app_id).is_empty());
    app.clean_up().unwrap();
    assert!(task_dirs(&run.state_dir, &run.app_id).is_empty());
    assert_eq!(app.state(), State::Error);
    assert!(app.close(Duration::from_secs(10)));
    let _ = std::fs::remove_dir_all(&run.state_dir);
}

#[test]
fn clean_up_is_refused_while_running_and_the_next_start_restores_from_the_changelog() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "clean-up");
    let per_round = 200;
    let want = (per_round / KEYS) as i64;
    produce(&bootstrap, &run.input, per_round);
    let mut app = counting_app(&bootstrap, &run, ProcessingGuarantee::AtLeastOnce);
    app.clean_up().unwrap(); // CREATED: allowed, nothing to delete
    app.start().unwrap();
    assert_counted(
        &counts_from(&bootstrap, &run.output, &[0, 0], want),
        want,
        "first run",
    );
    wait_for(&app, State::Running);
    let refused = app.clean_up().unwrap_err();
    assert!(
        matches!(refused, RuntimeError::CleanUpWhileRunning(State::Running)),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("cannot clean up while running"),
        "{refused}"
    );
    assert!(app.close(Duration::from_secs(30)));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_eq!(app.state(), State::NotRunning);
    let process_file = run.state_dir.join(&run.app_id).join(PROCESS_FILE_NAME);
    let process_id = std::fs::read_to_string(&process_file).unwrap();
    assert_eq!(
        task_dirs(&run.state_dir, &run.app_id).len(),
        PARTITIONS as usize
    );

    // NOT_RUNNING: allowed. The tasks' state goes, the process id stays.
    app.clean_up().unwrap();
    assert!(task_dirs(&run.state_dir, &run.app_id).is_empty());
    assert_eq!(std::fs::read_to_string(&process_file).unwrap(), process_id);

    // The next start restores the stores from the changelog, and counts on.
    produce(&bootstrap, &run.input, per_round);
    let marks = end_offsets(&bootstrap, &run.output);
    let restored = Arc::new(Restored::default());
    let mut app = counting_app(&bootstrap, &run, ProcessingGuarantee::AtLeastOnce);
    app.set_global_state_restore_listener(restored.clone())
        .unwrap();
    app.start().unwrap();
    let counts = counts_from(&bootstrap, &run.output, &marks, 2 * want);
    assert!(app.close(Duration::from_secs(30)));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_counted(&counts, 2 * want, "after clean_up and a restart");
    // One changelog record per input record at least was restored
    // (compaction may have removed some: not all of them).
    assert!(
        restored.0.load(Ordering::SeqCst) >= KEYS as u64,
        "restored {} records",
        restored.0.load(Ordering::SeqCst)
    );
    assert_eq!(std::fs::read_to_string(&process_file).unwrap(), process_id);
    let _ = std::fs::remove_dir_all(&run.state_dir);
}

/// How to run Kafka's `StreamsResetter`: java and a classpath with the
/// kafka-tools jar. `KSTREAMS_KAFKA_TOOLS_CLASSPATH` gives the classpath;
/// else the jar from the local Maven repository with the test broker's
/// classpath (what `cargo xtask kafka start` resolved, kafka-tools among
/// its jars, as in a Kafka distribution's libs/), for
/// `KSTREAMS_KAFKA_VERSION` or 4.4.0. `None` (after saying why) when
/// either is missing.
fn streams_resetter() -> Option<(PathBuf, String)> {
    let skip = |why: String| {
        let test = std::thread::current().name().unwrap_or("test").to_owned();
        let line = format!("skipped {test}: {why}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        None
    };
    let java = std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|java| java.is_file())
        .unwrap_or_else(|| PathBuf::from("java"));
    match Command::new(&java).arg("-version").output() {
        Ok(output) if output.status.success() => {}
        _ => {
            return skip(format!(
                "no java ({}) to run Kafka's reset tool",
                java.display()
            ))
        }
    }
    if let Ok(classpath) = std::env::var("KSTREAMS_KAFKA_TOOLS_CLASSPATH") {
        return Some((java, classpath));
    }
    let version = std::env::var("KSTREAMS_KAFKA_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "4.4.0".to_string());
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let jar = home.join(format!(
        ".m2/repository/org/apache/kafka/kafka-tools/{version}/kafka-tools-{version}.jar"
    ));
    if !jar.is_file() {
        return skip(format!(
            "no {} (cargo xtask kafka start fetches it with the broker's jars, \
             xtask/kafka/pom.xml)",
            jar.display()
        ));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache"));
    let broker = cache.join(format!("kstreams/kafka-{version}/classpath.txt"));
    let classpath = match std::fs::read_to_string(&broker) {
        Ok(classpath) if std::env::split_paths(classpath.trim()).all(|p| p.exists()) => classpath,
        _ => {
            return skip(format!(
                "no broker classpath at {} with the jars the reset tool needs (cargo xtask \
                 kafka start resolves it)",
                broker.display()
            ))
        }
    };
    Some((java, format!("{}:{}", classpath.trim(), jar.display())))
}

/// Runs Kafka's reset tool on `run`'s application, its input topic to
/// the earliest offsets; checks that it deleted the changelog, and waits
/// until the broker no longer has it.
fn reset(bootstrap: &str, run: &FreshRun, (java, classpath): &(PathBuf, String)) {
    let output = Command::new(java)
        .arg("-cp")
        .arg(classpath)
        .arg("org.apache.kafka.tools.StreamsResetter")
        .args(["--bootstrap-server", bootstrap])
        .args(["--application-id", &run.app_id])
        .args(["--input-topics", &run.input])
        // Every instance is stopped: members the broker still lists go.
        .arg("--force")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "StreamsResetter failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let changelog = format!("{}-counts-changelog", run.app_id);
    assert!(
        stdout.contains(&changelog),
        "StreamsResetter did not delete {changelog}:\n{stdout}\n{stderr}"
    );
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metadata = consumer
            .fetch_metadata(Some(&changelog), Duration::from_secs(10))
            .unwrap();
        let gone = metadata.topics().iter().all(|t| {
            t.error().map(RDKafkaErrorCode::from) == Some(RDKafkaErrorCode::UnknownTopicOrPartition)
        });
        if gone {
            return;
        }
        assert!(Instant::now() < deadline, "{changelog} still exists");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The runbook: count, stop, reset with Kafka's tool, (clean up,) count
/// again: the second run's counts are a fresh start's.
fn runbook(name: &str, guarantee: ProcessingGuarantee, clean_up: bool) {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let Some(resetter) = streams_resetter() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, name);
    let records = 300;
    let want = (records / KEYS) as i64;
    produce(&bootstrap, &run.input, records);
    let mut app = counting_app(&bootstrap, &run, guarantee);
    app.start().unwrap();
    let counts = counts_from(&bootstrap, &run.output, &[0, 0], want);
    assert!(app.close(Duration::from_secs(30)));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_counted(&counts, want, "first run");
    assert!(!task_dirs(&run.state_dir, &run.app_id).is_empty());

    reset(&bootstrap, &run, &resetter);
    let mut app = counting_app(&bootstrap, &run, guarantee);
    if clean_up {
        app.clean_up().unwrap();
        assert!(task_dirs(&run.state_dir, &run.app_id).is_empty());
    }
    let marks = end_offsets(&bootstrap, &run.output);
    app.start().unwrap();
    let counts = counts_from(&bootstrap, &run.output, &marks, want);
    assert!(app.close(Duration::from_secs(30)));
    assert!(app.errors().is_empty(), "{:?}", app.errors());
    assert_counted(
        &counts,
        want,
        &format!("{guarantee:?}, reset and restarted (clean_up: {clean_up}), as a fresh start"),
    );
    let _ = std::fs::remove_dir_all(&run.state_dir);
}

#[test]
fn the_reset_runbook_with_clean_up_counts_as_a_fresh_start() {
    runbook("runbook", ProcessingGuarantee::AtLeastOnce, true);
}

#[test]
fn without_clean_up_stores_checkpointed_past_their_reset_changelogs_are_rebuilt_at_least_once() {
    runbook(
        "runbook-stale-alos",
        ProcessingGuarantee::AtLeastOnce,
        false,
    );
}

#[test]
fn without_clean_up_stores_checkpointed_past_their_reset_changelogs_are_rebuilt_exactly_once() {
    runbook(
        "runbook-stale-eos",
        ProcessingGuarantee::ExactlyOnceV2,
        false,
    );
}
