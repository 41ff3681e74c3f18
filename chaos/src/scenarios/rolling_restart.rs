//! `rolling-restart`: a rolling restart of static members moves no task
//! (issue 47). Three instances of an exactly-once count under
//! `group.protocol=streams` with one standby replica of each task, each a
//! static member with a `group.instance.id` of its own, the group's session
//! timeout 30 s. Once the group has settled, each instance in turn closes
//! cleanly (a static member leaves with epoch -2: the broker keeps its
//! tasks for it until its session times out) and starts again on its state
//! directory; the next goes once all three answer again. No task may move
//! meanwhile (no instance promotes a standby: with dynamic members each
//! close hands the tasks to their standbys and back), and the task owners
//! must be the same before and after, as the instances' key metadata and
//! Kafka's own `kafka-streams-groups.sh --describe --members` show them;
//! the counts must be exact under read_committed; the figures give each
//! partition's longest pause in the output during the restarts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::secured_failover::{
    log_between, log_lengths, placement, server_of, stop_all, Round, Setup, INSTANCES,
};
use super::{
    clean_up, count_of, counts_reached, produce_paced, secs, set_streams_session_timeout_to,
    Outcome, Size,
};
use crate::kafka_io::{Reader, Seen};
use crate::listener::{Listener, Security};
use crate::queries::RoundReport;
use crate::verify;

/// The group's session timeout: each instance is down for a few seconds,
/// well within it (the broker allows up to 60 s).
const SESSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The variable holding the test cluster's classpath (`cargo xtask chaos`
/// passes it), for Kafka's `StreamsGroupCommand`.
const KAFKA_CLASSPATH_ENV: &str = "KSTREAMS_KAFKA_CLASSPATH";

/// One run on the plaintext listener.
pub(crate) fn rolling_restart(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    let name = "rolling-restart".to_string();
    let outcome = match Listener::of(Security::Plaintext, bootstrap)
        .and_then(|listener| restart_each(&listener, size))
    {
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
    };
    vec![outcome.print()]
}

/// Every instance answers, alike, with an active and a standby host for
/// every key, and every instance runs a task.
fn settled(round: &Round, report: &RoundReport) -> bool {
    let placed = placement(round);
    report.answered()
        && report.without_standby == 0
        && (0..INSTANCES).all(|slot| placed.values().any(|(a, _)| *a == server_of(slot)))
}

fn restart_each(listener: &Listener, size: Size<'_>) -> Result<(bool, String), String> {
    let (records, keys, per_second) = if size.long {
        (300_000u64, 5_000u64, 5_000u64)
    } else {
        (60_000, 2_000, 2_000)
    };
    let mut setup = Setup::new(listener, "rolling-restart", Security::Plaintext, keys)?;
    setup.spec.static_member = Some("slot".to_string());
    set_streams_session_timeout_to(listener, &setup.spec.application_id, SESSION_TIMEOUT)
        .map_err(|e| format!("setting the group's session timeout: {e}"))?;
    let group = setup.spec.application_id.clone();
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
    let mut instances: Vec<_> = (0..INSTANCES).map(|slot| Some(setup.start(slot))).collect();

    let mut rounds = 0;
    let before = setup.ask_until(
        &mut instances,
        "before",
        &mut rounds,
        began + producing_for / 3,
        None,
        settled,
    );
    let before = match before {
        Ok((round, report)) if settled(&round, &report) => placement(&round),
        Ok((round, report)) => {
            stop_all(instances);
            return Err(format!(
                "the group never settled before the restarts: {:?} {report:?} (logs {})",
                placement(&round),
                setup.dir.display()
            ));
        }
        Err(error) => {
            stop_all(instances);
            return Err(format!(
                "before the restarts: {error} (logs {})",
                setup.dir.display()
            ));
        }
    };
    let owners_before = group_owners(&listener.bootstrap, &group)?;

    // One at a time: close, start again on the same state directory and
    // instance id, and wait until every instance answers again.
    let restarts_began = Instant::now();
    let logs_before = log_lengths(&setup);
    let mut unclean_stops = 0;
    let mut longest_down = Duration::ZERO;
    let mut unsettled = Vec::new();
    for slot in 0..INSTANCES {
        let down = Instant::now();
        let instance = instances[slot].take().expect("running");
        if instance.stop(Duration::from_secs(60)) != Some(0) {
            unclean_stops += 1;
        }
        instances[slot] = Some(setup.start(slot));
        let again = setup.ask_until(
            &mut instances,
            &format!("after-{slot}"),
            &mut rounds,
            Instant::now() + SESSION_TIMEOUT,
            None,
            settled,
        );
        longest_down = longest_down.max(down.elapsed());
        if !again.is_ok_and(|(round, report)| settled(&round, &report)) {
            unsettled.push(slot);
        }
    }
    let restarts_ended = Instant::now();
    // A task that moved while its instance was down went to the standby:
    // its log says it promoted one.
    let logs_after = log_lengths(&setup);
    let (mut promoted, mut restored) = (std::collections::BTreeSet::new(), 0);
    for slot in 0..INSTANCES {
        let (theirs, records) = log_between(&setup.log(slot), logs_before[slot], logs_after[slot]);
        promoted.extend(theirs);
        restored += records;
    }
    let after = setup.ask_until(
        &mut instances,
        "after",
        &mut rounds,
        Instant::now() + Duration::from_secs(30),
        None,
        settled,
    );
    let after = after.map(|(round, _)| placement(&round));
    let owners_after = group_owners(&listener.bootstrap, &group)?;

    let expected = producing.join().expect("the producer thread");
    let caught_up = reader.wait_unless(
        Duration::from_secs(180),
        || instances.iter_mut().flatten().any(|i| i.exited()),
        |seen| counts_reached(seen, &expected),
    );
    // Duplicates would arrive right after: give them the time to.
    std::thread::sleep(Duration::from_secs(3));
    for instance in instances.into_iter().flatten() {
        if instance.stop(Duration::from_secs(60)) != Some(0) {
            unclean_stops += 1;
        }
    }
    let seen = reader.snapshot();
    drop(reader);
    let count = verify::count(
        &expected,
        seen.iter().map(|s| (s.key.as_str(), count_of(s))),
        false,
    );
    let pauses = longest_pauses(&seen, restarts_began, restarts_ended);
    let longest_pause = pauses.values().max().copied().unwrap_or_default();
    let same_placement = after.as_ref().is_ok_and(|a| *a == before);
    let same_owners = owners_before == owners_after;
    let passed = caught_up
        && count.exact()
        && same_placement
        && same_owners
        && promoted.is_empty()
        && unsettled.is_empty()
        && unclean_stops == 0
        && longest_pause < SESSION_TIMEOUT;
    let figures = format!(
        "records={records} keys={keys} instances={INSTANCES} same_placement={same_placement} \
         same_owners={same_owners} (kafka-streams-groups.sh: {}) longest_down={} \
         longest_pause={} pauses={} promoted={promoted:?} restored={restored} \
         unsettled={unsettled:?} wrong_final={} recounted={} \
         caught_up={caught_up} unclean_stops={unclean_stops} total={} (logs {})",
        owners_before.as_ref().map_or_else(
            || format!("{KAFKA_CLASSPATH_ENV} not set"),
            |o| format!("{} members", o.len())
        ),
        secs(longest_down),
        secs(longest_pause),
        pauses
            .iter()
            .map(|(p, d)| format!("{p}:{}", secs(*d)))
            .collect::<Vec<_>>()
            .join(","),
        count.wrong.len(),
        count.not_increasing,
        secs(began.elapsed()),
        setup.dir.display()
    );
    let figures = if same_placement {
        figures
    } else {
        format!("{figures} placement before {before:?} after {after:?}")
    };
    let figures = if same_owners {
        figures
    } else {
        format!("{figures} owners before {owners_before:?} after {owners_after:?}")
    };
    if passed {
        clean_up(&setup.dir);
    }
    Ok((passed, figures))
}

/// Per output partition, the longest time between two records arriving
/// (or between `from` and the first) from `from` to `to`.
fn longest_pauses(seen: &[Seen], from: Instant, to: Instant) -> BTreeMap<i32, Duration> {
    let mut arrivals: BTreeMap<i32, Vec<Instant>> = BTreeMap::new();
    for s in seen.iter().filter(|s| s.arrived >= from && s.arrived <= to) {
        arrivals.entry(s.partition).or_default().push(s.arrived);
    }
    arrivals
        .into_iter()
        .map(|(partition, mut at)| {
            at.sort();
            let mut last = from;
            let mut longest = Duration::ZERO;
            for t in at.into_iter().chain([to]) {
                longest = longest.max(t.saturating_duration_since(last));
                last = t;
            }
            (partition, longest)
        })
        .collect()
}

/// The tasks of each member of `group` by its process id, as Kafka's
/// `kafka-streams-groups.sh --describe --members --verbose` shows them (a
/// restarted member has a new member id and epoch, and the same process id,
/// which kstreams keeps in its state directory); `None` without the
/// cluster's classpath.
fn group_owners(bootstrap: &str, group: &str) -> Result<Option<BTreeMap<String, String>>, String> {
    let Ok(classpath) = std::env::var(KAFKA_CLASSPATH_ENV) else {
        return Ok(None);
    };
    let output = std::process::Command::new("java")
        .args(["-cp", classpath.trim()])
        .arg("org.apache.kafka.tools.streams.StreamsGroupCommand")
        .args(["--bootstrap-server", bootstrap])
        .args(["--describe", "--group", group, "--members", "--verbose"])
        .output()
        .map_err(|e| format!("running kafka-streams-groups.sh: {e}"))?;
    let printed = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "kafka-streams-groups.sh --describe failed: {printed}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    members_by_process(&printed).map(Some)
}

/// The table of `--describe --members --verbose`: per PROCESS, its
/// assignment (from the ACTIVE column on, which holds spaces).
fn members_by_process(printed: &str) -> Result<BTreeMap<String, String>, String> {
    let mut lines = printed.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().ok_or_else(|| format!("no table: {printed}"))?;
    let columns: Vec<&str> = header.split_whitespace().collect();
    let process = columns
        .iter()
        .position(|c| *c == "PROCESS")
        .ok_or_else(|| format!("no PROCESS column: {printed}"))?;
    let mut members = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let tasks = line
            .find("ACTIVE:")
            .map(|at| line[at..].split_whitespace().collect::<Vec<_>>().join(" "))
            .ok_or_else(|| format!("no ACTIVE tasks in {line:?}"))?;
        let id = fields
            .get(process)
            .ok_or_else(|| format!("no process in {line:?}"))?;
        members.insert(id.to_string(), tasks);
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_counts_from_the_start_to_the_first_record_and_to_the_end() {
        let from = Instant::now();
        let at = |ms| from + Duration::from_millis(ms);
        let seen = |partition, ms| Seen {
            key: "k".to_string(),
            value: None,
            headers: Vec::new(),
            arrived: at(ms),
            partition,
            offset: 0,
        };
        let records = [seen(0, 100), seen(0, 4_100), seen(0, 4_200), seen(1, 2_000)];
        let pauses = longest_pauses(&records, from, at(5_000));
        assert_eq!(pauses[&0], Duration::from_millis(4_000));
        assert_eq!(pauses[&1], Duration::from_millis(3_000));
    }

    #[test]
    fn members_are_keyed_by_their_process() {
        let printed = "GROUP MEMBER PROCESS CLIENT-ID ASSIGNMENTS\n\
             g m1 p-1 c1 ACTIVE: 0:[0]; STANDBY: 0:[1];\n\
             g m2 p-2 c2 ACTIVE: 0:[1]; STANDBY: 0:[0];\n";
        let members = members_by_process(printed).unwrap();
        assert_eq!(members["p-1"], "ACTIVE: 0:[0]; STANDBY: 0:[1];");
        assert_eq!(members["p-2"], "ACTIVE: 0:[1]; STANDBY: 0:[0];");
        assert!(members_by_process("GROUP MEMBER\ng m\n").is_err());
    }
}
