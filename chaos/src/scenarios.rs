//! The scenarios: each runs the chaos app as child processes, injects its
//! faults, and checks the output from outside under read_committed.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::app::{AppSpec, Mode};
use crate::kafka_io::{create_topic, unique_name, Input, Reader, Seen};
use crate::listener::Listener;
use crate::verify;

mod rolling_restart;
mod secured_failover;

pub(crate) use rolling_restart::rolling_restart;
pub(crate) use secured_failover::secured_failover;

/// How big a run is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size<'a> {
    pub long: bool,
    pub seed: u64,
    /// Only the runs of a scenario whose name contains this.
    pub only: Option<&'a str>,
}

/// The figures of one run, printed as one line.
pub(crate) struct Outcome {
    pub name: String,
    pub passed: bool,
    pub figures: String,
}

impl Outcome {
    /// Prints the outcome as soon as it is known: long runs take a while.
    fn print(self) -> Outcome {
        let verdict = if self.passed { "ok" } else { "FAILED" };
        println!("chaos: {} {verdict}: {}", self.name, self.figures);
        self
    }
}

/// A small xorshift generator: the kill times must be reproducible from the
/// printed seed, not cryptographic.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

/// One running instance of the chaos app.
struct Instance {
    child: Child,
}

impl Instance {
    fn start(spec: &AppSpec, log: &Path) -> Instance {
        let stderr = File::options()
            .create(true)
            .append(true)
            .open(log)
            .expect("the run directory is writable");
        let child = Command::new(std::env::current_exe().expect("the running binary"))
            .args(spec.to_args())
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("the chaos app starts");
        Instance { child }
    }

    /// Writes one request line to the app's stdin ([`crate::app`]).
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin already closed")
        })?;
        stdin.write_all(format!("{line}\n").as_bytes())?;
        stdin.flush()
    }

    /// SIGKILL: no close, no commit, transactions left open.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin, which makes the app close cleanly; its exit status.
    fn stop(mut self, timeout: Duration) -> Option<i32> {
        drop(self.child.stdin.take());
        self.wait(timeout)
    }

    /// Whether the process ended (it should run until stopped).
    fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    fn wait(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A fresh run: topics, application id and state directory.
struct Run {
    dir: PathBuf,
    spec: AppSpec,
}

impl Run {
    fn new(bootstrap: &str, name: &str, mode: Mode, exactly_once: bool, cache_bytes: u64) -> Run {
        let input = unique_name(&format!("chaos-{name}-in"));
        let output = unique_name(&format!("chaos-{name}-out"));
        // The broker's default replication factor (-1): 1 on one broker,
        // 3 on three (xtask's cluster), where a partition outlives a broker.
        for topic in [&input, &output] {
            create_topic(bootstrap, topic, 4, -1).expect("creating the scenario's topics");
        }
        let dir = std::env::temp_dir()
            .join("kstreams-chaos")
            .join(unique_name(name));
        std::fs::create_dir_all(&dir).expect("the temp directory is writable");
        let spec = AppSpec {
            bootstrap: bootstrap.to_string(),
            application_id: unique_name(&format!("chaos-{name}")),
            input,
            output,
            mode,
            exactly_once,
            cache_bytes,
            state_dir: dir.join("state"),
            dead_letter_queue: None,
            group_protocol: None,
            static_member: Some("member".to_string()),
            standby_replicas: None,
            transactional_stores: false,
            security: None,
            application_server: None,
        };
        Run { dir, spec }
    }

    fn log(&self) -> PathBuf {
        self.dir.join("app.log")
    }

    fn start(&self) -> Instance {
        Instance::start(&self.spec, &self.log())
    }

    /// The changelog records the instances restored, from their log
    /// ([`crate::app::RESTORED`] lines).
    fn restored(&self) -> u64 {
        let log = std::fs::read_to_string(self.log()).unwrap_or_default();
        log.lines()
            .filter_map(|line| line.split_once(crate::app::RESTORED))
            .filter_map(|(_, rest)| rest.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    fn app_dir(&self) -> PathBuf {
        self.spec.state_dir.join(&self.spec.application_id)
    }

    /// The task directories of the application.
    fn task_dirs(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.app_dir()) else {
            return Vec::new();
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_dir()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.contains('_'))
            })
            .collect();
        dirs.sort();
        dirs
    }
}

/// Keyed sequences: the n-th record of each key has value n.
struct Sequences {
    keys: u64,
    next: BTreeMap<String, u64>,
}

impl Sequences {
    fn new(keys: u64) -> Sequences {
        Sequences {
            keys,
            next: BTreeMap::new(),
        }
    }

    fn produce(&mut self, input: &Input, records: u64, start_index: u64) {
        for i in start_index..start_index + records {
            let key = format!("k{}", i % self.keys);
            let sequence = self.next.entry(key.clone()).or_default();
            input.send(&key, sequence.to_string().as_bytes());
            *sequence += 1;
        }
    }
}

/// Produces `records` of [`Sequences`] over `keys` keys to `topic` through
/// `listener`, `per_second` of them each second (in batches every 100 ms),
/// on a thread of its own; the thread returns each key's number of records
/// once the broker acknowledged them all.
fn produce_paced(
    listener: Listener,
    topic: &str,
    keys: u64,
    records: u64,
    per_second: u64,
) -> std::thread::JoinHandle<BTreeMap<String, u64>> {
    let topic = topic.to_string();
    std::thread::spawn(move || {
        let input = Input::on(&listener, &topic);
        let mut sequences = Sequences::new(keys);
        let began = Instant::now();
        let batch = per_second / 10;
        for step in 0..records.div_ceil(batch) {
            let due = began + Duration::from_millis(step * 100);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            sequences.produce(&input, batch.min(records - step * batch), step * batch);
        }
        input.flush();
        sequences.next
    })
}

fn count_of(seen: &Seen) -> Option<i64> {
    let bytes: [u8; 8] = seen.value.as_deref()?.try_into().ok()?;
    Some(i64::from_be_bytes(bytes))
}

fn counts_reached(seen: &[Seen], expected: &BTreeMap<String, u64>) -> bool {
    let latest = verify::latest_counts(seen.iter().map(|s| (s.key.as_str(), count_of(s))));
    expected
        .iter()
        .all(|(k, &n)| latest.get(k.as_str()) == Some(&(n as i64)))
}

/// Whether every key's latest count has reached its number of records (at
/// least once: reprocessed records may have counted twice).
fn counts_at_least(seen: &[Seen], expected: &BTreeMap<String, u64>) -> bool {
    let latest = verify::latest_counts(seen.iter().map(|s| (s.key.as_str(), count_of(s))));
    expected
        .iter()
        .all(|(k, &n)| latest.get(k.as_str()).is_some_and(|&c| c >= n as i64))
}

/// Removes a passed run's directory, unless KSTREAMS_CHAOS_KEEP is set (to
/// read the app's log of a run that passed).
fn clean_up(dir: &Path) {
    if std::env::var_os("KSTREAMS_CHAOS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// `sigkill`: SIGKILLs at random moments of an exactly-once run.
/// The last, with transactional stores (KIP-892), resumes each restarted
/// task from its own store instead of restoring its whole changelog.
pub(crate) fn sigkill(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    [
        (Mode::PassThrough, 10 * 1024 * 1024, "passthrough", false),
        (Mode::Count, 10 * 1024 * 1024, "count-cache-on", false),
        (Mode::Count, 0, "count-cache-off", false),
        (Mode::Count, 10 * 1024 * 1024, "count-transactional", true),
    ]
    .into_iter()
    .filter(|(_, _, name, _)| size.only.is_none_or(|only| name.contains(only)))
    .map(|(mode, cache, name, transactional)| {
        sigkill_one(bootstrap, size, mode, cache, name, transactional).print()
    })
    .collect()
}

fn sigkill_one(
    bootstrap: &str,
    size: Size<'_>,
    mode: Mode,
    cache: u64,
    name: &str,
    transactional: bool,
) -> Outcome {
    let (records, kills, per_second) = if size.long {
        (1_000_000u64, 20u64, 8_000u64)
    } else {
        (50_000, 3, 2_500)
    };
    let mut random = Random(size.seed ^ 0x9e37_79b9_7f4a_7c15 ^ (cache + mode as u64));
    let mut run = Run::new(bootstrap, &format!("sigkill-{name}"), mode, true, cache);
    run.spec.transactional_stores = transactional;
    let reader = Reader::start(bootstrap, &run.spec.output);
    let keys = 100;
    let producing = produce_paced(
        Listener::plaintext(bootstrap),
        &run.spec.input,
        keys,
        records,
        per_second,
    );
    // Every kill falls while input still arrives, so that each restart
    // has new records to show it recovered.
    let producing_for = Duration::from_millis(records * 1000 / per_second);
    let slot = producing_for.saturating_sub(Duration::from_secs(4)) / kills as u32;
    let began = Instant::now();
    let mut instance = run.start();
    let mut recoveries = Vec::new();
    for kill in 0..kills {
        // A random moment in the kill's slot, at least 2 s after the last
        // restart so the instance is processing again.
        let at = slot * kill as u32
            + Duration::from_millis(2_000 + random.below(slot.as_millis() as u64 * 6 / 10));
        if at > producing_for {
            break;
        }
        if let Some(wait) = (began + at).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        instance.kill();
        // What the dead instance committed reaches the reader meanwhile, so
        // the next record read comes from the restarted one.
        std::thread::sleep(Duration::from_secs(1));
        let before = reader.len();
        let restarted = Instant::now();
        instance = run.start();
        let first_new = reader.wait_unless(
            Duration::from_secs(60),
            || instance.exited(),
            |seen| seen.len() > before,
        );
        recoveries.push(
            first_new
                .then(|| reader.arrival(before))
                .flatten()
                .map(|at| at.duration_since(restarted)),
        );
    }
    let expected = producing.join().expect("the producer thread");
    let caught_up = reader.wait_unless(
        Duration::from_secs(300),
        || instance.exited(),
        |seen| match mode {
            Mode::Count => counts_reached(seen, &expected),
            _ => seen.len() as u64 >= records,
        },
    );
    // Duplicates would arrive right after: give them the time to.
    std::thread::sleep(Duration::from_secs(3));
    let exit = instance.stop(Duration::from_secs(60));
    let seen = reader.snapshot();
    drop(reader);
    let recovered: Vec<Duration> = recoveries.iter().flatten().copied().collect();
    let unrecovered = recoveries.len() - recovered.len();
    let kills_done = recoveries.len();
    let worst = recovered.iter().max().copied().unwrap_or_default();
    let mean = recovered.iter().sum::<Duration>() / recovered.len().max(1) as u32;
    let (passed, result) = match mode {
        Mode::Count => {
            let report = verify::count(
                &expected,
                seen.iter().map(|s| (s.key.as_str(), count_of(s))),
                cache == 0,
            );
            (
                report.exact(),
                format!(
                    "keys={} wrong_final={} recounted={} lost_updates={}",
                    report.keys,
                    report.wrong.len(),
                    report.not_increasing,
                    report.missing_updates
                ),
            )
        }
        _ => {
            let report = verify::pass_through(
                &expected,
                seen.iter().map(|s| (s.key.as_str(), s.value.as_deref())),
            );
            (
                report.exactly_once(),
                format!(
                    "seen={} lost={} duplicated={} out_of_order={} foreign={}",
                    report.seen,
                    report.lost,
                    report.duplicated,
                    report.out_of_order,
                    report.foreign
                ),
            )
        }
    };
    let passed = passed && caught_up && unrecovered == 0 && exit == Some(0);
    // Changelog records the restarts restored (without transactional
    // stores, each restart under exactly-once restores whole changelogs).
    let restored = run.restored();
    if passed {
        clean_up(&run.dir);
    }
    Outcome {
        name: format!("sigkill {name}"),
        passed,
        figures: format!(
            "records={records} kills={kills_done} {result} restored={restored} recovery_max={} \
             recovery_mean={} unrecovered={unrecovered} clean_exit={exit:?} total={} (log {})",
            secs(worst),
            secs(mean),
            secs(began.elapsed()),
            run.log().display()
        ),
    }
}

/// A fault `disk` injects into a stopped instance's state directory.
#[derive(Debug, Clone, Copy)]
enum DiskFault {
    None,
    GarbageCheckpoint,
    TruncatedCheckpoint,
    DeletedStore,
    CorruptedStore,
    LockedStateDirectory,
}

impl DiskFault {
    fn name(self) -> &'static str {
        match self {
            DiskFault::None => "clean start",
            DiskFault::GarbageCheckpoint => "garbage .checkpoint",
            DiskFault::TruncatedCheckpoint => "truncated .checkpoint",
            DiskFault::DeletedStore => "deleted RocksDB directory",
            DiskFault::CorruptedStore => "corrupted RocksDB directory",
            DiskFault::LockedStateDirectory => "state directory locked by another process",
        }
    }

    /// Damages the task directories; returns how many it damaged.
    fn inject(self, run: &Run) -> usize {
        let mut damaged = 0;
        for task in run.task_dirs() {
            let checkpoint = task.join(".checkpoint");
            let store = task.join("rocksdb");
            let hit = match self {
                DiskFault::None | DiskFault::LockedStateDirectory => false,
                DiskFault::GarbageCheckpoint => {
                    checkpoint.exists()
                        && std::fs::write(&checkpoint, b"\x00\xffnot a checkpoint\n7\n").is_ok()
                }
                DiskFault::TruncatedCheckpoint => std::fs::read(&checkpoint)
                    .ok()
                    .filter(|bytes| bytes.len() > 4)
                    .is_some_and(|bytes| {
                        // Half a file, as a crash mid-write without an
                        // atomic rename leaves it.
                        std::fs::write(&checkpoint, &bytes[..bytes.len() / 2]).is_ok()
                    }),
                DiskFault::DeletedStore => {
                    store.exists() && std::fs::remove_dir_all(&store).is_ok()
                }
                DiskFault::CorruptedStore => corrupt_rocksdb(&store),
            };
            damaged += usize::from(hit);
        }
        damaged
    }
}

/// Garbage over every RocksDB store's CURRENT and MANIFEST files: the
/// store cannot open.
fn corrupt_rocksdb(rocksdb: &Path) -> bool {
    let mut hit = false;
    let Ok(stores) = std::fs::read_dir(rocksdb) else {
        return false;
    };
    for store in stores.flatten() {
        let Ok(files) = std::fs::read_dir(store.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name().to_string_lossy().into_owned();
            if name == "CURRENT" || name.starts_with("MANIFEST") {
                hit |= std::fs::write(file.path(), b"garbage\x00\x01\x02").is_ok();
            }
        }
    }
    hit
}

/// `disk`: a count under exactly-once, stopped cleanly between phases;
/// before each phase one fault goes into its state directory. Every phase
/// must end with exact counts, rebuilt from the changelog where the local
/// state was bad, and the fault must be logged.
pub(crate) fn disk(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    let per_phase = if size.long { 20_000 } else { 2_000 };
    let run = Run::new(bootstrap, "disk", Mode::Count, true, 10 * 1024 * 1024);
    let reader = Reader::start(bootstrap, &run.spec.output);
    let input = Input::new(bootstrap, &run.spec.input);
    let mut sequences = Sequences::new(20);
    let mut produced = 0;
    let mut outcomes = Vec::new();
    for fault in [
        DiskFault::None,
        DiskFault::GarbageCheckpoint,
        DiskFault::TruncatedCheckpoint,
        DiskFault::DeletedStore,
        DiskFault::CorruptedStore,
        DiskFault::LockedStateDirectory,
    ] {
        let log_before = std::fs::read_to_string(run.log()).unwrap_or_default().len();
        let damaged = fault.inject(&run);
        let began = Instant::now();
        let mut notes = String::new();
        if let DiskFault::LockedStateDirectory = fault {
            // Another process (this one) holds the application directory's
            // lock: the app must refuse to start, saying why.
            let lock = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(run.app_dir().join(".lock"))
                .expect("the state directory exists");
            lock.try_lock().expect("nobody else holds the lock");
            let mut refused = run.start();
            let exit = refused.wait(Duration::from_secs(60));
            let log = std::fs::read_to_string(run.log()).unwrap_or_default();
            let said = log[log_before..].contains("locked");
            notes = format!("second instance exit={exit:?} said_locked={said} ");
            if exit != Some(3) || !said {
                outcomes.push(
                    Outcome {
                        name: format!("disk {}", fault.name()),
                        passed: false,
                        figures: notes,
                    }
                    .print(),
                );
                continue;
            }
            drop(lock);
        }
        sequences.produce(&input, per_phase, produced);
        produced += per_phase;
        input.flush();
        let mut instance = run.start();
        let exact = reader.wait_unless(
            Duration::from_secs(120),
            || instance.exited(),
            |seen| counts_reached(seen, &sequences.next),
        );
        let recovered_in = began.elapsed();
        let exit = instance.stop(Duration::from_secs(60));
        let log = std::fs::read_to_string(run.log()).unwrap_or_default();
        let logged = &log[log_before.min(log.len())..];
        let detected = match fault {
            DiskFault::None => true,
            DiskFault::LockedStateDirectory => true,
            _ => damaged > 0 && logged.contains("rebuilding"),
        };
        outcomes.push(
            Outcome {
                name: format!("disk {}", fault.name()),
                passed: exact && exit == Some(0) && detected,
                figures: format!(
                    "{notes}tasks_damaged={damaged} records={produced} counts_exact={exact} \
                 logged={detected} clean_exit={exit:?} time_to_exact={} (log {})",
                    secs(recovered_in),
                    run.log().display()
                ),
            }
            .print(),
        );
    }
    // Across every phase and restart, no count went backwards or repeated:
    // no state was lost and no record counted twice.
    let seen = reader.snapshot();
    drop(reader);
    let report = verify::count(
        &sequences.next,
        seen.iter().map(|s| (s.key.as_str(), count_of(s))),
        false,
    );
    outcomes.push(
        Outcome {
            name: "disk whole run".to_string(),
            passed: report.exact(),
            figures: format!(
                "records={produced} keys={} wrong_final={} recounted={}",
                report.keys,
                report.wrong.len(),
                report.not_increasing
            ),
        }
        .print(),
    );
    if outcomes.iter().all(|o| o.passed) {
        clean_up(&run.dir);
    }
    outcomes
}

/// `malformed`: values that do not deserialize, interleaved with valid
/// ones, under log-and-continue with a dead-letter queue.
pub(crate) fn malformed(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    let bad = if size.long { 10_000u64 } else { 1_000 };
    let every = 5; // one bad record in five
    let mut run = Run::new(bootstrap, "malformed", Mode::Increment, true, 0);
    let dlq = unique_name("chaos-malformed-dlq");
    create_topic(bootstrap, &dlq, 1, 1).expect("creating the dead-letter queue");
    run.spec.dead_letter_queue = Some(dlq.clone());
    let output = Reader::start(bootstrap, &run.spec.output);
    let dead = Reader::start(bootstrap, &dlq);
    let input = Input::new(bootstrap, &run.spec.input);
    let began = Instant::now();
    let mut instance = run.start();
    let total = bad * every;
    for i in 0..total {
        if i % every == every - 1 {
            let n = i / every;
            input.send(&format!("bad-{n}"), format!("malformed-{n}").as_bytes());
        } else {
            input.send(&format!("k{}", i % 20), &(i as i64).to_be_bytes());
        }
    }
    input.flush();
    let valid = total - bad;
    let all_out = output.wait_unless(
        Duration::from_secs(180),
        || instance.exited(),
        |s| s.len() as u64 >= valid,
    );
    let all_dead = dead.wait_for(Duration::from_secs(60), |s| s.len() as u64 >= bad);
    std::thread::sleep(Duration::from_secs(2));
    let exit = instance.stop(Duration::from_secs(60));
    let out = output.snapshot();
    let dead_letters = dead.snapshot();

    // Valid: each index once, incremented, under its key.
    let mut processed = BTreeMap::new();
    let mut wrong_output = 0;
    for s in &out {
        match count_of(s) {
            Some(v)
                if (v - 1) % every as i64 != every as i64 - 1
                    && s.key == format!("k{}", (v - 1) % 20) =>
            {
                *processed.entry(v - 1).or_insert(0u64) += 1
            }
            _ => wrong_output += 1,
        }
    }
    let duplicated = processed.values().filter(|&&n| n > 1).count();
    let missing = valid - processed.len() as u64;
    // Bad: each in the DLQ once, its bytes kept, the failure in headers.
    let mut in_dlq = BTreeMap::new();
    let mut without_headers = 0;
    for s in &dead_letters {
        let header = |name: &str| {
            s.headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let complete = header("__streams.errors.exception").is_some()
            && header("__streams.errors.message").is_some()
            && header("__streams.errors.topic").as_deref() == Some(run.spec.input.as_str())
            && header("__streams.errors.partition").is_some()
            && header("__streams.errors.offset").is_some();
        without_headers += u64::from(!complete);
        let n = s.key.strip_prefix("bad-").unwrap_or("?").to_string();
        let bytes_kept = s.value.as_deref() == Some(format!("malformed-{n}").as_bytes());
        if bytes_kept {
            *in_dlq.entry(n).or_insert(0u64) += 1;
        }
    }
    let dlq_missing = bad - in_dlq.len() as u64;
    let dlq_duplicated = in_dlq.values().filter(|&&n| n > 1).count();
    let passed = all_out
        && all_dead
        && exit == Some(0)
        && wrong_output == 0
        && duplicated == 0
        && missing == 0
        && dlq_missing == 0
        && dlq_duplicated == 0
        && without_headers == 0;
    if passed {
        clean_up(&run.dir);
    }
    vec![Outcome {
        name: "malformed".to_string(),
        passed,
        figures: format!(
            "valid={valid} malformed={bad} processed={} missing={missing} duplicated={duplicated} \
             wrong={wrong_output} dlq={} dlq_missing={dlq_missing} dlq_duplicated={dlq_duplicated} \
             dlq_without_headers={without_headers} clean_exit={exit:?} total={} (log {})",
            processed.len(),
            dead_letters.len(),
            secs(began.elapsed()),
            run.log().display()
        ),
    }
    .print()]
}

/// A broker node that `cargo xtask kafka start` runs, known by its
/// directory under `.kafka/` (its `pid` file and `broker.log`).
struct BrokerNode {
    dir: PathBuf,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    cwd: PathBuf,
}

impl BrokerNode {
    /// The running nodes under `kafka_dir`, with the command line that
    /// started each, read from /proc so that a node can be started again
    /// the same way, on its data (xtask's start would format it afresh).
    fn running(kafka_dir: &Path, bootstrap: &str) -> Result<Vec<BrokerNode>, String> {
        // Never kill a broker the scenario was not given.
        let runs = std::fs::read_to_string(kafka_dir.join("bootstrap")).unwrap_or_default();
        if runs.trim() != bootstrap {
            return Err(format!(
                "{} runs {:?}, not the broker under test {bootstrap}",
                kafka_dir.display(),
                runs.trim()
            ));
        }
        let mut nodes = Vec::new();
        let entries = std::fs::read_dir(kafka_dir)
            .map_err(|e| format!("{}: {e} (is the broker xtask's?)", kafka_dir.display()))?;
        for entry in entries.flatten() {
            let dir = entry.path();
            let Ok(pid) = std::fs::read_to_string(dir.join("pid")) else {
                continue;
            };
            let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
            let split = |bytes: Vec<u8>| -> Vec<String> {
                bytes
                    .split(|&b| b == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            };
            let mut command = split(
                std::fs::read(proc_dir.join("cmdline"))
                    .map_err(|e| format!("node {} is not running: {e}", dir.display()))?,
            );
            let env = split(std::fs::read(proc_dir.join("environ")).unwrap_or_default())
                .into_iter()
                .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.into(), v.into())))
                .collect();
            let cwd = std::fs::read_link(proc_dir.join("cwd")).unwrap_or_else(|_| "/".into());
            if command.is_empty() {
                return Err(format!("node {}: empty command line", dir.display()));
            }
            let program = command.remove(0);
            nodes.push(BrokerNode {
                dir,
                program,
                args: command,
                env,
                cwd,
            });
        }
        if nodes.is_empty() {
            return Err(format!("no running node under {}", kafka_dir.display()));
        }
        // By directory: node 1 first, so that faults go round in order.
        nodes.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(nodes)
    }

    fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// SIGKILL, as a crash: no controlled shutdown.
    fn crash(&self) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) with a pid read from the node's own pid file
            // and a constant signal; it touches no memory of ours.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            let proc_dir = PathBuf::from(format!("/proc/{pid}"));
            let deadline = Instant::now() + Duration::from_secs(10);
            while proc_dir.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Starts the node again with its command line, logging where it did,
    /// and records its new pid where `cargo xtask kafka stop` finds it.
    fn restart(&self) -> Result<(), String> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.dir.join("broker.log"))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().cloned())
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("restarting {}: {e}", self.dir.display()))?;
        std::fs::write(self.dir.join("pid"), child.id().to_string()).map_err(|e| e.to_string())
    }
}

fn broker_answers(bootstrap: &str) -> bool {
    bootstrap.split(',').all(|address| {
        address
            .parse()
            .is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
    })
}

/// Which brokers a broker fault takes down.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerFault {
    /// `broker-restart`: every node crashes (SIGKILL) and comes back 3 s
    /// later; recovery counts from the cluster answering again.
    RestartAll,
    /// `leader-failover`: on a cluster of three or more (replication 3,
    /// min.insync.replicas 2), one node crashes, a different one each
    /// time, stays down for [`FAILOVER_DOWN`] while the others take over
    /// its partitions' leadership and the transaction coordinators, then
    /// comes back; recovery counts from the crash.
    LeaderFailover,
}

/// How long a crashed node stays down in `leader-failover`.
const FAILOVER_DOWN: Duration = Duration::from_secs(15);

/// `broker-restart` and `leader-failover`: brokers crash mid-run of an
/// exactly-once pass-through; the instance must ride it out, and every
/// record come out exactly once.
pub(crate) fn broker_faults(
    bootstrap: &str,
    size: Size<'_>,
    kafka_dir: &Path,
    fault: BrokerFault,
) -> Vec<Outcome> {
    let name = match fault {
        BrokerFault::RestartAll => "broker-restart",
        BrokerFault::LeaderFailover => "leader-failover",
    };
    let failed = |figures: String| {
        vec![Outcome {
            name: name.to_string(),
            passed: false,
            figures,
        }
        .print()]
    };
    let nodes = match BrokerNode::running(kafka_dir, bootstrap) {
        Ok(nodes) => nodes,
        Err(error) => return failed(format!("cannot restart the broker: {error}")),
    };
    if fault == BrokerFault::LeaderFailover && nodes.len() < 3 {
        return failed(format!(
            "needs a cluster of three brokers (cargo xtask kafka start --brokers 3), not {}",
            nodes.len()
        ));
    }
    let (records, restarts, per_second) = if size.long {
        (200_000u64, 3u32, 2_000u64)
    } else {
        (40_000, 1, 2_000)
    };
    let mut run = Run::new(bootstrap, name, Mode::PassThrough, true, 0);
    // A dynamic member, as Kafka Streams' default: nothing restarts the
    // instance here, so static membership buys nothing, and librdkafka
    // fences a static member whose session ran out while the brokers were
    // down (it rejoins under a new member id while a request with the old
    // one is in flight: FencedInstanceId, fatal), 1 run in 3 on this
    // machine.
    run.spec.static_member = None;
    let reader = Reader::start(bootstrap, &run.spec.output);
    let producing = produce_paced(
        Listener::plaintext(bootstrap),
        &run.spec.input,
        100,
        records,
        per_second,
    );
    let began = Instant::now();
    let mut instance = run.start();
    let producing_for = Duration::from_millis(records * 1000 / per_second);
    let slot = producing_for / (restarts + 1);
    let mut recoveries = Vec::new();
    let mut survived = true;
    for restart in 1..=restarts {
        if let Some(wait) = (began + slot * restart).checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (since, before) = match fault {
            BrokerFault::RestartAll => {
                for node in &nodes {
                    node.crash();
                }
                std::thread::sleep(Duration::from_secs(3));
                for node in &nodes {
                    if let Err(error) = node.restart() {
                        eprintln!("chaos: {error}");
                    }
                }
                let back = Instant::now();
                while !broker_answers(bootstrap) && back.elapsed() < Duration::from_secs(120) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                (Instant::now(), reader.len())
            }
            BrokerFault::LeaderFailover => {
                let node = &nodes[(restart as usize - 1) % nodes.len()];
                let (crashed, before) = (Instant::now(), reader.len());
                node.crash();
                std::thread::sleep(FAILOVER_DOWN);
                if let Err(error) = node.restart() {
                    eprintln!("chaos: {error}");
                }
                (crashed, before)
            }
        };
        let moved = reader.wait_unless(
            Duration::from_secs(120),
            || instance.exited(),
            |seen| seen.len() > before,
        );
        recoveries.push(
            moved
                .then(|| reader.arrival(before))
                .flatten()
                .map(|at| at.saturating_duration_since(since)),
        );
        if fault == BrokerFault::LeaderFailover {
            let back = Instant::now();
            while !broker_answers(bootstrap) && back.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if instance.exited() {
            // Recorded as a failure; a new instance still finishes the run,
            // so the output can be checked.
            survived = false;
            instance = run.start();
        }
    }
    let expected = producing.join().expect("the producer thread");
    let caught_up = reader.wait_unless(
        Duration::from_secs(300),
        || instance.exited(),
        |seen| seen.len() as u64 >= records,
    );
    std::thread::sleep(Duration::from_secs(3));
    survived &= !instance.exited();
    let exit = instance.stop(Duration::from_secs(60));
    let seen = reader.snapshot();
    drop(reader);
    let report = verify::pass_through(
        &expected,
        seen.iter().map(|s| (s.key.as_str(), s.value.as_deref())),
    );
    let recovered: Vec<Duration> = recoveries.iter().flatten().copied().collect();
    let worst = recovered.iter().max().copied().unwrap_or_default();
    let passed = report.exactly_once()
        && caught_up
        && survived
        && recovered.len() == recoveries.len()
        && exit == Some(0);
    if passed {
        clean_up(&run.dir);
    }
    let recovered_from = match fault {
        BrokerFault::RestartAll => "the brokers answering again",
        BrokerFault::LeaderFailover => "the crash",
    };
    if report.duplicated > 0 {
        eprintln!("chaos: {name}: {}", duplicate_places(&seen, 5));
    }
    vec![Outcome {
        name: name.to_string(),
        passed,
        figures: format!(
            "records={records} brokers={} faults={restarts} seen={} lost={} duplicated={} \
             out_of_order={} app_survived={survived} recovery_max={} (from {recovered_from}) \
             clean_exit={exit:?} total={} (log {})",
            nodes.len(),
            report.seen,
            report.lost,
            report.duplicated,
            report.out_of_order,
            secs(worst),
            secs(began.elapsed()),
            run.log().display()
        ),
    }
    .print()]
}

/// Where the first `limit` records written more than once are in the
/// output (partition@offset of each copy), to tell which transactions
/// carried them.
fn duplicate_places(seen: &[Seen], limit: usize) -> String {
    let mut places: BTreeMap<(&str, Option<&[u8]>), Vec<String>> = BTreeMap::new();
    for s in seen {
        places
            .entry((s.key.as_str(), s.value.as_deref()))
            .or_default()
            .push(format!("{}@{}", s.partition, s.offset));
    }
    let copies: Vec<String> = places
        .into_iter()
        .filter(|(_, at)| at.len() > 1)
        .take(limit)
        .map(|((key, value), at)| {
            let value = value.map(String::from_utf8_lossy).unwrap_or_default();
            format!("{key}={value} at {}", at.join(" and "))
        })
        .collect();
    format!("written more than once: {}", copies.join("; "))
}

/// The streams group's session timeout in the `-sigkill` churn: the
/// lowest the xtask broker allows (`group.streams.min.session.timeout.ms`).
const STREAMS_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// Sets `streams.session.timeout.ms` on the group before any member joins
/// (a group config of the streams protocol, not a client setting).
fn set_streams_session_timeout(listener: &Listener, group: &str) -> Result<(), String> {
    set_streams_session_timeout_to(listener, group, STREAMS_SESSION_TIMEOUT)
}

/// Sets the group's `streams.session.timeout.ms` to `timeout`.
fn set_streams_session_timeout_to(
    listener: &Listener,
    group: &str,
    timeout: Duration,
) -> Result<(), String> {
    let millis = timeout.as_millis().to_string();
    listener.admin(|admin| async move {
        admin
            .set_group_configs(group, &[("streams.session.timeout.ms", &millis)])
            .await
    })
}

/// The group protocols `churn` runs under, with the `protocol=` each
/// instance gets (none: classic).
const GROUP_PROTOCOLS: &[(&str, Option<&str>)] = &[
    ("classic", None),
    ("consumer", Some("consumer")),
    ("streams", Some("streams")),
    // The streams group with one standby replica of each task: a task that
    // moves goes to the member keeping its standby, promoted.
    ("streams-standby", Some("streams")),
    // As streams-standby, but the leaving instance is killed with SIGKILL:
    // its open transactions are fenced, its tasks move to the standbys
    // once its session times out (6 s, set on the group), and it comes
    // back on its old state directory.
    ("streams-standby-sigkill", Some("streams")),
    // As streams-standby-sigkill, under at-least-once: what the killed
    // instance processed after its last commit is processed again, so
    // nothing may be missing, and duplicates are allowed.
    ("streams-standby-sigkill-alos", Some("streams")),
];

/// `churn`: three instances of one application (a pass-through and a
/// count from one source, each instance with its own state directory,
/// dynamic members) under a steady input; in each round one instance
/// leaves (a clean close, or SIGKILL for the `-sigkill` runs) and joins
/// again, so every round is two rebalances. Once per group protocol.
/// Under exactly-once (all but the `-alos` run) both outputs must be
/// exactly once: every record once and in order, every final count exact
/// and no count repeated; under at-least-once nothing may be missing:
/// every record passed through, every final count at least its number of
/// records.
pub(crate) fn churn(bootstrap: &str, size: Size<'_>) -> Vec<Outcome> {
    GROUP_PROTOCOLS
        .iter()
        .filter(|(name, _)| size.only.is_none_or(|only| name.contains(only)))
        .map(|&(name, protocol)| churn_one(bootstrap, size, name, protocol).print())
        .collect()
}

fn churn_one(bootstrap: &str, size: Size<'_>, name: &str, protocol: Option<&str>) -> Outcome {
    const INSTANCES: usize = 3;
    let (rounds, per_second, settle) = if size.long {
        (10u32, 2_000u64, Duration::from_secs(4))
    } else {
        (2, 1_000, Duration::from_secs(2))
    };
    let mut random = Random(size.seed ^ 0x2545_f491_4f6c_dd1d ^ name.len() as u64);
    let exactly_once = !name.ends_with("-alos");
    let mut run = Run::new(
        bootstrap,
        &format!("churn-{name}"),
        Mode::Both,
        exactly_once,
        10 * 1024 * 1024,
    );
    run.spec.group_protocol = protocol.map(str::to_string);
    run.spec.static_member = None;
    if name.contains("-standby") {
        run.spec.standby_replicas = Some("1".to_string());
    }
    let sigkill = name.contains("-sigkill");
    // A killed member keeps its tasks until its session times out: wait
    // that out (and a rebalance) before it comes back.
    let after_leave = if sigkill {
        if let Err(e) =
            set_streams_session_timeout(&Listener::plaintext(bootstrap), &run.spec.application_id)
        {
            return Outcome {
                name: format!("churn {name}"),
                passed: false,
                figures: format!("could not set the group's session timeout: {e}"),
            };
        }
        STREAMS_SESSION_TIMEOUT + settle
    } else {
        settle
    };
    let counts = crate::app::counts_topic(&run.spec.output);
    create_topic(bootstrap, &counts, 4, -1).expect("creating the counts topic");
    let passed_through = Reader::start(bootstrap, &run.spec.output);
    let counted = Reader::start(bootstrap, &counts);
    // Each instance is its own machine: its own state directory, so a task
    // that moves restores from the changelog (or its old directory when it
    // comes back).
    let spec_of = |slot: usize| {
        let mut spec = run.spec.clone();
        spec.state_dir = run.dir.join(format!("state-{slot}"));
        spec
    };
    let start = |slot: usize| Instance::start(&spec_of(slot), &run.log());

    let stop_producing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producing = {
        let (bootstrap, topic) = (bootstrap.to_string(), run.spec.input.clone());
        let stop = stop_producing.clone();
        std::thread::spawn(move || {
            let input = Input::new(&bootstrap, &topic);
            let mut sequences = Sequences::new(100);
            let began = Instant::now();
            let batch = per_second / 10;
            let mut step = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let due = began + Duration::from_millis(step * 100);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                sequences.produce(&input, batch, step * batch);
                step += 1;
            }
            input.flush();
            (step * batch, sequences.next)
        })
    };

    let began = Instant::now();
    let mut instances: Vec<Option<Instance>> =
        (0..INSTANCES).map(|slot| Some(start(slot))).collect();
    let mut unclean_exits = 0;
    let mut died = 0;
    let mut leave_times = Vec::new();
    std::thread::sleep(settle * 2);
    for _ in 0..rounds {
        let slot = random.below(INSTANCES as u64) as usize;
        let leaving = instances[slot]
            .take()
            .expect("every slot runs between rounds");
        let left = Instant::now();
        if sigkill {
            leaving.kill();
        } else if leaving.stop(Duration::from_secs(60)) != Some(0) {
            unclean_exits += 1;
        }
        leave_times.push(left.elapsed());
        std::thread::sleep(after_leave);
        instances[slot] = Some(start(slot));
        std::thread::sleep(settle);
        for instance in instances.iter_mut().flatten() {
            if instance.exited() {
                died += 1;
            }
        }
    }
    stop_producing.store(true, std::sync::atomic::Ordering::Release);
    let (records, expected) = producing.join().expect("the producer thread");
    let caught_up = passed_through.wait_for(Duration::from_secs(180), |seen| {
        seen.len() as u64 >= records
    }) && counted.wait_for(Duration::from_secs(120), |seen| {
        if exactly_once {
            counts_reached(seen, &expected)
        } else {
            counts_at_least(seen, &expected)
        }
    });
    // Duplicates would arrive right after: give them the time to.
    std::thread::sleep(Duration::from_secs(3));
    for instance in instances.into_iter().flatten() {
        if instance.stop(Duration::from_secs(60)) != Some(0) {
            unclean_exits += 1;
        }
    }
    let seen = passed_through.snapshot();
    let counts_seen = counted.snapshot();
    drop((passed_through, counted));
    let through = verify::pass_through(
        &expected,
        seen.iter().map(|s| (s.key.as_str(), s.value.as_deref())),
    );
    let count = verify::count(
        &expected,
        counts_seen.iter().map(|s| (s.key.as_str(), count_of(s))),
        false,
    );
    let slowest_leave = leave_times.iter().max().copied().unwrap_or_default();
    let output_right = if exactly_once {
        through.exactly_once() && count.exact()
    } else {
        // Reprocessed records count again: a final count may be higher.
        let counted_all = count
            .wrong
            .iter()
            .all(|(_, got, n)| got.is_some_and(|got| got >= *n as i64));
        through.lost == 0 && through.foreign == 0 && counted_all
    };
    let passed = output_right && caught_up && unclean_exits == 0 && died == 0;
    if passed {
        clean_up(&run.dir);
    }
    Outcome {
        name: format!("churn {name}"),
        passed,
        figures: format!(
            "records={records} instances={INSTANCES} rounds={rounds} (a leave and a join \
             each) seen={} lost={} duplicated={} out_of_order={} foreign={} keys={} \
             wrong_final={} recounted={} caught_up={caught_up} unclean_exits={unclean_exits} \
             died={died} slowest_leave={} total={} (log {})",
            through.seen,
            through.lost,
            through.duplicated,
            through.out_of_order,
            through.foreign,
            count.keys,
            count.wrong.len(),
            count.not_increasing,
            secs(slowest_leave),
            secs(began.elapsed()),
            run.log().display()
        ),
    }
}
