//! `secured-failover`: high availability on the listeners production
//! clusters run. Three instances of an exactly-once count under
//! `group.protocol=streams` with one standby replica of each task, every
//! client (the app's librdkafka clients and its streams group member, the
//! input's producer, the verifier's reader, the admin calls) on one
//! listener: plaintext, SASL_SSL with SCRAM-SHA-512, mutual TLS,
//! OAUTHBEARER. Once the group has settled (every key's task has an active
//! and a standby instance, as all three instances answer), one instance
//! that runs active tasks is SIGKILLed mid-input; the other two finish. Its
//! tasks must move to the instances keeping their standbys (promoted, a
//! small restore), the counts must be exact under read_committed, and after
//! the input each surviving instance must answer `query_metadata_for_key`
//! for every key of the run alike, naming a live active host whose own
//! store holds the key's final count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    clean_up, count_of, counts_reached, produce_paced, secs, set_streams_session_timeout, Instance,
    Outcome, Random, Size,
};
use crate::app::{AppSpec, Mode, PROMOTED, RESTORED};
use crate::kafka_io::{unique_name, Reader, Seen};
use crate::listener::{Listener, Security};
use crate::queries::{self, Answer, RoundReport};
use crate::verify;

pub(super) const INSTANCES: usize = 3;
/// Partitions of the input and output: one task per instance. The broker's
/// sticky assignor hands a moved task to the instance keeping its standby
/// only while that instance is below its share of active tasks (balance
/// first); with three tasks each survivor has room for one more, so the
/// victim's task always goes to its standby. With four, the standby of a
/// victim's task may sit on the instance that already runs two, and the
/// task is rebuilt from its changelog on the other one (seen: 1 443
/// records restored).
const PARTITIONS: i32 = 3;
/// How long one round of queries may take each instance.
const ROUND_TIMEOUT: Duration = Duration::from_secs(30);

/// Answers by instance (`host:port`), each by key.
pub(super) type Round = BTreeMap<String, BTreeMap<String, Answer>>;

/// One run per listener ([`Security::ALL`]; `--only` picks by name).
pub(crate) fn secured_failover(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    Security::ALL
        .into_iter()
        .filter(|security| size.only.is_none_or(|only| security.name().contains(only)))
        .map(|security| {
            let name = format!("secured-failover {}", security.name());
            let figures = Listener::of(security, bootstrap)
                .and_then(|listener| failover(&listener, size, security));
            match figures {
                Ok((passed, figures)) => Outcome {
                    name,
                    passed,
                    figures,
                },
                Err(figures) => Outcome {
                    name,
                    passed: false,
                    figures,
                },
            }
            .print()
        })
        .collect()
}

/// `application.server` of the instance in `slot`: no instance serves it
/// (the scenario asks the instances through their stdin), it only has to
/// tell them apart in the group's endpoints.
pub(super) fn server_of(slot: usize) -> String {
    format!("instance-{slot}:{}", 7000 + slot)
}

/// The run's application, its directory and its keys.
pub(super) struct Setup {
    pub(super) dir: PathBuf,
    pub(super) spec: AppSpec,
    /// The file of every key of the run, one a line, that the instances
    /// answer for.
    keys_file: PathBuf,
    keys: Vec<String>,
}

impl Setup {
    /// Topics, keys files and the group's session timeout, all made over
    /// `listener`.
    pub(super) fn new(
        listener: &Listener,
        scenario: &str,
        security: Security,
        keys: u64,
    ) -> Result<Setup, String> {
        let name = format!("{scenario}-{}", security.name());
        let dir = std::env::temp_dir()
            .join("kstreams-chaos")
            .join(unique_name(&name));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let (input, output) = (
            unique_name(&format!("chaos-{name}-in")),
            unique_name(&format!("chaos-{name}-out")),
        );
        for topic in [&input, &output] {
            listener
                .admin(|admin| async move { admin.create_topic(topic, PARTITIONS).await })
                .map_err(|e| format!("creating topic {topic} over the listener: {e}"))?;
        }
        let security_keys = (!listener.keys.is_empty()).then(|| dir.join("client.keys"));
        if let Some(path) = &security_keys {
            listener
                .write_keys(path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let keys: Vec<String> = (0..keys).map(|k| format!("k{k}")).collect();
        let keys_file = dir.join("keys.txt");
        std::fs::write(&keys_file, keys.join("\n") + "\n")
            .map_err(|e| format!("{}: {e}", keys_file.display()))?;
        let spec = AppSpec {
            bootstrap: listener.bootstrap.clone(),
            application_id: unique_name(&format!("chaos-{name}")),
            input,
            output,
            mode: Mode::Count,
            exactly_once: true,
            cache_bytes: 10 * 1024 * 1024,
            state_dir: dir.join("state"),
            dead_letter_queue: None,
            group_protocol: Some("streams".to_string()),
            // Dynamic members: the killed one is gone once its session
            // times out, as a crashed machine is.
            static_member: None,
            standby_replicas: Some("1".to_string()),
            transactional_stores: false,
            security: security_keys,
            application_server: None,
        };
        // A killed member keeps its tasks until its session times out: the
        // shortest the broker allows, set before any member joins.
        set_streams_session_timeout(listener, &spec.application_id)
            .map_err(|e| format!("setting the group's session timeout over the listener: {e}"))?;
        Ok(Setup {
            dir,
            spec,
            keys_file,
            keys,
        })
    }

    /// The instance in `slot`: a machine of its own (state directory, log,
    /// `application.server`).
    pub(super) fn start(&self, slot: usize) -> Instance {
        let mut spec = self.spec.clone();
        // A static member's `group.instance.id` is the slot's own: two
        // members with one id fence each other.
        spec.static_member = self
            .spec
            .static_member
            .as_ref()
            .map(|m| format!("{m}-{slot}"));
        spec.state_dir = self.dir.join(format!("state-{slot}"));
        spec.application_server = Some(server_of(slot));
        Instance::start(&spec, &self.log(slot))
    }

    pub(super) fn log(&self, slot: usize) -> PathBuf {
        self.dir.join(format!("app-{slot}.log"))
    }

    /// Asks every running instance for the metadata of every key, all at
    /// once, and reads their answers (files named after `round`, which
    /// names no earlier round: an old file is never read as an answer).
    fn ask(&self, instances: &mut [Option<Instance>], round: &str) -> Result<Round, String> {
        let mut waiting = Vec::new();
        for (slot, instance) in instances.iter_mut().enumerate() {
            let Some(instance) = instance else { continue };
            let answers = self.dir.join(format!("answers-{round}-{slot}.tsv"));
            let request = format!(
                "{}\t{}\t{}",
                queries::COMMAND,
                self.keys_file.display(),
                answers.display()
            );
            instance
                .send(&request)
                .map_err(|e| format!("asking {}: {e}", server_of(slot)))?;
            waiting.push((slot, answers));
        }
        let deadline = Instant::now() + ROUND_TIMEOUT;
        let mut round_answers = Round::new();
        for (slot, answers) in waiting {
            loop {
                if let Ok(text) = std::fs::read_to_string(&answers) {
                    round_answers.insert(server_of(slot), queries::parse(&text)?);
                    break;
                }
                let exited = instances[slot].as_mut().is_some_and(Instance::exited);
                if exited || Instant::now() > deadline {
                    return Err(format!(
                        "{} wrote no answers ({}; see {})",
                        server_of(slot),
                        if exited { "it exited" } else { "timed out" },
                        self.log(slot).display()
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(round_answers)
    }

    /// Rounds of queries (`phase`-1, -2, ..., counted in `rounds`) until
    /// `good` holds for one, or `deadline`: the last round and its report;
    /// an error if an instance did not answer.
    pub(super) fn ask_until(
        &self,
        instances: &mut [Option<Instance>],
        phase: &str,
        rounds: &mut u32,
        deadline: Instant,
        expected: Option<&BTreeMap<String, u64>>,
        good: impl Fn(&Round, &RoundReport) -> bool,
    ) -> Result<(Round, RoundReport), String> {
        loop {
            *rounds += 1;
            let answers = self.ask(instances, &format!("{phase}-{rounds}"))?;
            let report = queries::check_round(&self.keys, &answers, expected);
            if good(&answers, &report) || Instant::now() > deadline {
                return Ok((answers, report));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Where the group placed each partition's task, as the instances agreed:
/// partition -> (active host, standby hosts).
pub(super) fn placement(round: &Round) -> BTreeMap<i32, (String, Vec<String>)> {
    round
        .values()
        .next()
        .into_iter()
        .flat_map(|answers| answers.values())
        .filter_map(|answer| answer.as_ref().ok())
        .map(|a| (a.partition, (a.active.clone(), a.standbys.clone())))
        .collect()
}

/// The length of each instance's log now.
pub(super) fn log_lengths(setup: &Setup) -> Vec<usize> {
    (0..INSTANCES)
        .map(|slot| std::fs::metadata(setup.log(slot)).map_or(0, |m| m.len() as usize))
        .collect()
}

/// What an instance's log says between bytes `from` and `to`: the changelog
/// partitions whose standby it promoted, and the changelog records it
/// restored.
pub(super) fn log_between(path: &Path, from: usize, to: usize) -> (BTreeSet<i32>, u64) {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let after = log.get(from..to.min(log.len())).unwrap_or_default();
    let promoted = after
        .lines()
        .filter_map(|line| line.split_once(PROMOTED))
        .filter_map(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .collect();
    let restored = after
        .lines()
        .filter_map(|line| line.split_once(RESTORED))
        .filter_map(|(_, rest)| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    (promoted, restored)
}

/// How long after `killed` the first record past `offsets` (the last
/// offsets each partition had shortly after the kill) came out of each of
/// `partitions`: the longest, or `None` if one never moved on.
fn failover_time(
    seen: &[Seen],
    partitions: &BTreeSet<i32>,
    offsets: &BTreeMap<i32, i64>,
    killed: Instant,
) -> Option<Duration> {
    partitions
        .iter()
        .map(|p| {
            seen.iter()
                .filter(|s| s.partition == *p && s.offset > offsets.get(p).copied().unwrap_or(-1))
                .map(|s| s.arrived.saturating_duration_since(killed))
                .min()
        })
        .try_fold(Duration::ZERO, |longest, time| Some(longest.max(time?)))
}

/// One run on `listener`: whether it passed, and its figures.
fn failover(
    listener: &Listener,
    size: Size<'_>,
    security: Security,
) -> Result<(bool, String), String> {
    let (records, keys, per_second) = if size.long {
        (300_000u64, 5_000u64, 5_000u64)
    } else {
        (24_000, 2_000, 2_000)
    };
    let mut random = Random(size.seed ^ 0x5851_f42d_4c95_7f2d ^ (security as u64 + 1));
    let setup = Setup::new(listener, "secured-failover", security, keys)?;
    let reader = Reader::on(listener, &setup.spec.output);
    let producing = produce_paced(
        listener.clone(),
        &setup.spec.input,
        keys,
        records,
        per_second,
    );
    let producing_for = Duration::from_millis(records * 1000 / per_second);
    let began = Instant::now();
    let mut instances: Vec<Option<Instance>> =
        (0..INSTANCES).map(|slot| Some(setup.start(slot))).collect();

    // The kill comes once every instance runs a task and every key has an
    // active and a standby instance that all three agree on, and not before
    // a third of the input, so that the standbys have state to carry over;
    // and while input still arrives, so that the moved tasks have records
    // to process.
    let settled = |round: &Round, report: &RoundReport| {
        let placed = placement(round);
        report.answered()
            && report.without_standby == 0
            && (0..INSTANCES).all(|slot| placed.values().any(|(a, _)| *a == server_of(slot)))
    };
    let mut rounds_before = 0;
    std::thread::sleep(producing_for / 3);
    let before = match setup.ask_until(
        &mut instances,
        "before",
        &mut rounds_before,
        began + producing_for * 8 / 10,
        None,
        settled,
    ) {
        Ok((round, report)) if settled(&round, &report) => round,
        Ok((round, report)) => {
            stop_all(instances);
            return Err(format!(
                "the group never placed a task on each instance and a standby for every \
                 key before the kill: {:?} {report:?} (logs {})",
                placement(&round),
                setup.dir.display()
            ));
        }
        Err(error) => {
            stop_all(instances);
            return Err(format!(
                "before the kill: {error} (logs {})",
                setup.dir.display()
            ));
        }
    };
    let placed = placement(&before);
    // Every instance runs a task (the settled round says so).
    let victim = random.below(INSTANCES as u64) as usize;
    let moved: BTreeSet<i32> = placed
        .iter()
        .filter(|(_, (active, _))| *active == server_of(victim))
        .map(|(partition, _)| *partition)
        .collect();
    let logs_at_kill = log_lengths(&setup);
    let killed_at = Instant::now();
    let killed_after = killed_at.duration_since(began);
    instances[victim].take().expect("the victim runs").kill();
    // What the victim committed reaches the reader meanwhile: a record past
    // these offsets comes from the task's new owner.
    std::thread::sleep(Duration::from_secs(1));
    let mut offsets_after_kill: BTreeMap<i32, i64> = BTreeMap::new();
    for s in reader.snapshot() {
        let offset = offsets_after_kill.entry(s.partition).or_insert(-1);
        *offset = (*offset).max(s.offset);
    }

    let expected = producing.join().expect("the producer thread");
    let caught_up = reader.wait_unless(
        Duration::from_secs(180),
        || instances.iter_mut().flatten().all(Instance::exited),
        |seen| counts_reached(seen, &expected),
    );
    // Duplicates would arrive right after: give them the time to.
    std::thread::sleep(Duration::from_secs(3));
    let mut rounds_after = 0;
    let after = setup.ask_until(
        &mut instances,
        "after",
        &mut rounds_after,
        Instant::now() + Duration::from_secs(60),
        Some(&expected),
        |_, report| report.answered(),
    );
    // What the logs say from the kill to here: the stops below move tasks
    // again (a closing instance's task goes to the other one's standby).
    let logs_at_end = log_lengths(&setup);
    let mut survivors_died = 0;
    let mut unclean_exits = 0;
    for instance in instances.iter_mut().flatten() {
        survivors_died += usize::from(instance.exited());
    }
    for instance in instances.into_iter().flatten() {
        if instance.stop(Duration::from_secs(60)) != Some(0) {
            unclean_exits += 1;
        }
    }
    let seen = reader.snapshot();
    drop(reader);

    let count = verify::count(
        &expected,
        seen.iter().map(|s| (s.key.as_str(), count_of(s))),
        false,
    );
    let (mut promoted, mut restored) = (BTreeSet::new(), 0);
    for slot in (0..INSTANCES).filter(|&slot| slot != victim) {
        let (theirs, records) =
            log_between(&setup.log(slot), logs_at_kill[slot], logs_at_end[slot]);
        promoted.extend(theirs);
        restored += records;
    }
    let queried = after.as_ref().ok().map(|(round, _)| placement(round));
    // A moved task's new active instance kept its standby before the kill.
    let to_standby = moved
        .iter()
        .filter(|p| {
            let now_active = queried.as_ref().and_then(|q| q.get(p)).map(|(a, _)| a);
            let standbys = placed.get(p).map(|(_, s)| s);
            now_active.zip(standbys).is_some_and(|(a, s)| s.contains(a))
        })
        .count();
    let failover = failover_time(&seen, &moved, &offsets_after_kill, killed_at);
    let passed = caught_up
        && count.exact()
        && after.as_ref().is_ok_and(|(_, report)| report.answered())
        && !moved.is_empty()
        && to_standby == moved.len()
        && moved.is_subset(&promoted)
        && failover.is_some()
        && survivors_died == 0
        && unclean_exits == 0;
    let queries = match &after {
        Ok((_, r)) => format!(
            "queried_keys={} unanswered={} disagreeing={} dead_active={} wrong_local={} \
             with_standby={} rounds={rounds_before}+{rounds_after}{}",
            r.keys,
            r.unanswered,
            r.disagreeing,
            r.dead_active,
            r.wrong_local,
            r.keys - r.without_standby,
            r.first_problem
                .as_deref()
                .map(|p| format!(" first_problem=({p})"))
                .unwrap_or_default()
        ),
        Err(error) => format!("queries failed: {error}"),
    };
    let figures = format!(
        "records={records} keys={keys} instances={INSTANCES} killed={} at {} moved={moved:?} \
         to_standby={to_standby} promoted={promoted:?} restored={restored} failover={} \
         wrong_final={} recounted={} caught_up={caught_up} {queries} died={survivors_died} \
         unclean_exits={unclean_exits} total={} (logs {})",
        server_of(victim),
        secs(killed_after),
        failover.map_or_else(|| "never".to_string(), secs),
        count.wrong.len(),
        count.not_increasing,
        secs(began.elapsed()),
        setup.dir.display()
    );
    if passed {
        clean_up(&setup.dir);
    }
    Ok((passed, figures))
}

/// Stops the instances of a run given up on (their exit is not judged).
pub(super) fn stop_all(instances: Vec<Option<Instance>>) {
    for instance in instances.into_iter().flatten() {
        let _ = instance.stop(Duration::from_secs(30));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(partition: i32, offset: i64, arrived: Instant) -> Seen {
        Seen {
            key: "k".to_string(),
            value: None,
            headers: Vec::new(),
            arrived,
            partition,
            offset,
        }
    }

    #[test]
    fn failover_is_the_slowest_moved_partition_and_never_without_a_new_record() {
        let killed = Instant::now();
        let at = |ms| killed + Duration::from_millis(ms);
        let records = [
            seen(0, 5, at(100)),
            seen(0, 6, at(3_000)),
            seen(1, 9, at(200)),
            seen(1, 10, at(5_000)),
            seen(2, 1, at(50)),
        ];
        let offsets = [(0, 5), (1, 9), (2, 1)].into();
        let moved: BTreeSet<i32> = [0, 1].into();
        assert_eq!(
            failover_time(&records, &moved, &offsets, killed),
            Some(Duration::from_secs(5))
        );
        let stuck: BTreeSet<i32> = [0, 2].into();
        assert_eq!(failover_time(&records, &stuck, &offsets, killed), None);
    }
}
