//! How a measured process knows it is done: its group has committed the
//! end offset of every input partition. Judged from the committed offsets
//! (not from the output) so that a run is timed the same way on every
//! implementation, Kafka Streams' included (compat/'s `bench` does the same).

use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::{ClientConfig, Offset, TopicPartitionList};

use crate::verify::watermarks;
use crate::Error;

/// Share of the input after which the steady state is taken to begin:
/// start-up (group join, store opening, the JVM's warm-up) is before it.
pub const STEADY_FROM: f64 = 0.25;

/// CPU seconds (user + system) this process has used so far.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes a `rusage` into the pointer it is given;
    // the zeroed value is a valid `rusage` (plain integers) and outlives
    // the call.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// This process's peak resident set so far, in KiB (`VmHWM` of
/// /proc/self/status; the Kafka Streams side reads the same line): what
/// `wait4` would report had the process ended here.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Watches a group's committed offsets of its input topics.
pub struct Progress {
    consumer: BaseConsumer,
    partitions: TopicPartitionList,
    target: i64,
    started: Instant,
}

impl Progress {
    /// `target`: the number of input records to wait for; `None`: the
    /// input's end offsets now (the input was produced before the run).
    pub fn new(
        bootstrap: &str,
        group: &str,
        topics: &[&str],
        target: Option<i64>,
    ) -> Result<Progress, Error> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .create()?;
        let mut partitions = TopicPartitionList::new();
        let mut end = 0;
        for topic in topics {
            for (partition, _, high) in watermarks(&consumer, topic)? {
                partitions.add_partition(topic, partition);
                end += high;
            }
        }
        Ok(Progress {
            consumer,
            partitions,
            target: target.unwrap_or(end),
            started: Instant::now(),
        })
    }

    fn committed(&self) -> Result<i64, Error> {
        let offsets = self
            .consumer
            .committed_offsets(self.partitions.clone(), Duration::from_secs(10))?;
        Ok(offsets
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => o,
                _ => 0,
            })
            .sum())
    }

    /// Whether the target is committed.
    pub fn reached(&self) -> Result<bool, Error> {
        Ok(self.committed()? >= self.target)
    }

    /// Blocks until every input record is committed, then prints the
    /// `DONE` line that xtask reads, ending with `extra`'s figures.
    /// `failed` is asked between checks.
    pub fn wait_and_report(
        &self,
        mut failed: impl FnMut() -> Option<String>,
        extra: impl FnOnce() -> String,
    ) -> Result<(), Error> {
        let mut steady: Option<(Instant, Duration, i64)> = None;
        loop {
            if let Some(why) = failed() {
                return Err(why.into());
            }
            let committed = self.committed()?;
            let now = Instant::now();
            if steady.is_none() && committed as f64 >= self.target as f64 * STEADY_FROM {
                steady = Some((now, cpu_time(), committed));
            }
            if committed >= self.target {
                let cpu = cpu_time();
                let (from, cpu_from, records_from) = steady.unwrap_or((now, cpu, committed));
                println!(
                    "DONE wall_ms={} cpu_ms={} steady_records={} steady_cpu_ms={} steady_wall_ms={}{}",
                    self.started.elapsed().as_millis(),
                    cpu.as_millis(),
                    committed - records_from,
                    (cpu - cpu_from).as_millis(),
                    (now - from).as_millis(),
                    extra(),
                );
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Blocks until `target` input records are committed, then prints
    /// `CAUGHT_UP` (restore: the records fed after it served are
    /// processed). `failed` is asked between checks.
    pub fn wait_for(
        &self,
        target: i64,
        mut failed: impl FnMut() -> Option<String>,
    ) -> Result<(), Error> {
        loop {
            if let Some(why) = failed() {
                return Err(why.into());
            }
            if self.committed()? >= target {
                println!("CAUGHT_UP");
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Milliseconds since the epoch now.
fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

/// How long after a kill [`watch_recovery`] waits before it takes its
/// baselines: a transaction whose commit the killed process had sent may
/// still complete at the coordinator meanwhile, which is not the restart's.
const SETTLE: Duration = Duration::from_millis(500);

/// When, after a crash, `group` committed `input` records again and when
/// `output` held a record readable under read_committed again, in
/// milliseconds since the epoch; both against what they held when this
/// was called (and [`SETTLE`] passed). Prints `WATCHING` once the baselines
/// are taken, before which the restart must not begin.
pub fn watch_recovery(
    bootstrap: &str,
    group: &str,
    input: &str,
    output: &str,
    timeout: Duration,
) -> Result<(i64, i64), Error> {
    std::thread::sleep(SETTLE);
    let progress = Progress::new(bootstrap, group, &[input], None)?;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-recovery-{output}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("fetch.wait.max.ms", "10")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for (partition, _, high) in watermarks(&consumer, output)? {
        assignment.add_partition_offset(output, partition, Offset::Offset(high))?;
    }
    consumer.assign(&assignment)?;
    let baseline = progress.committed()?;
    println!("WATCHING");
    std::io::Write::flush(&mut std::io::stdout())?;
    let began = Instant::now();
    let (mut committed_at, mut readable_at) = (None, None);
    loop {
        if readable_at.is_none() {
            if let Some(message) = consumer.poll(Duration::from_millis(10)) {
                message?;
                readable_at = Some(epoch_ms());
            }
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
        if committed_at.is_none() && progress.committed()? > baseline {
            committed_at = Some(epoch_ms());
        }
        if let (Some(committed), Some(readable)) = (committed_at, readable_at) {
            return Ok((committed, readable));
        }
        if began.elapsed() > timeout {
            return Err(format!(
                "no recovery after {} s (input committed again: {committed_at:?}, output readable: {readable_at:?})",
                timeout.as_secs()
            )
            .into());
        }
    }
}
