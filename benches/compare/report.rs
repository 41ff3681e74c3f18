//! The report of a `cargo xtask bench compare` run: medians of each
//! workload, thread count and implementation as a markdown table and a
//! chart (SVG, drawn with plotters), from the results xtask recorded.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use plotters::prelude::*;

use crate::Error;

/// One line of the results file that xtask writes.
struct Row {
    /// `throughput`, `restore` (records: the records restored; wall, CPU
    /// and peak RSS: from the process's start until it served again) or
    /// `latency`.
    kind: String,
    workload: String,
    threads: u32,
    implementation: String,
    records: f64,
    wall_s: f64,
    /// From the process's start to its first and to its last output
    /// record's append time (pass-through and join), NaN where not measured.
    first_output_s: f64,
    output_s: f64,
    cpu_s: f64,
    rss_mib: f64,
    steady_records: f64,
    steady_cpu_s: f64,
    latency_ms: [f64; 3],
}

fn parse(results: &str) -> Result<Vec<Row>, Error> {
    let mut lines = results.lines();
    let header: Vec<&str> = lines.next().ok_or("empty results")?.split('\t').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("results lack column {name}"))
    };
    let (kind, workload, threads, implementation, records) = (
        column("kind")?,
        column("workload")?,
        column("threads")?,
        column("impl")?,
        column("records")?,
    );
    // Results written before the output-complete figures lack their columns.
    let first_output_s = column("first_output_s").ok();
    let output_s = column("output_s").ok();
    let figures = [
        "wall_s",
        "cpu_s",
        "rss_mib",
        "steady_records",
        "steady_cpu_s",
        "p50_ms",
        "p99_ms",
        "p999_ms",
    ]
    .map(column);
    let mut rows = Vec::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let cells: Vec<&str> = line.split('\t').collect();
        let number = |i: usize| {
            cells
                .get(i)
                .and_then(|c| c.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let mut f = [0.0; 8];
        for (slot, index) in f.iter_mut().zip(&figures) {
            *slot = number(*index.as_ref().map_err(|e| e.clone())?);
        }
        rows.push(Row {
            kind: cells[kind].to_owned(),
            workload: cells[workload].to_owned(),
            threads: cells[threads].parse()?,
            implementation: cells[implementation].to_owned(),
            records: number(records),
            wall_s: f[0],
            first_output_s: first_output_s.map_or(f64::NAN, number),
            output_s: output_s.map_or(f64::NAN, number),
            cpu_s: f[1],
            rss_mib: f[2],
            steady_records: f[3],
            steady_cpu_s: f[4],
            latency_ms: [f[5], f[6], f[7]],
        });
    }
    Ok(rows)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Medians of the runs of one workload, thread count and implementation.
struct Summary {
    runs: usize,
    records: f64,
    wall_s: f64,
    wall_range: (f64, f64),
    first_output_s: f64,
    output_s: f64,
    /// From the first output record's append to the last's: the processing
    /// alone, start-up left out.
    output_span_s: f64,
    records_per_s: f64,
    cpu_s: f64,
    records_per_cpu_s: f64,
    steady_records_per_cpu_s: f64,
    rss_mib: f64,
}

/// A run's records per CPU-second in its steady window (from the first
/// commit past a quarter of the input to the end), or NaN (left out of the
/// median) when that window holds under a quarter of the run's CPU: the
/// run ended a commit or two after the quarter mark, and the records that
/// the last commit counted were mostly processed before the window began
/// (processing runs up to a commit interval ahead of the commits).
fn steady_records_per_cpu_s(r: &Row) -> f64 {
    if r.steady_cpu_s < r.cpu_s / 4.0 {
        return f64::NAN;
    }
    r.steady_records / r.steady_cpu_s
}

fn summarize(rows: &[&Row]) -> Summary {
    let of = |f: fn(&Row) -> f64| median(rows.iter().map(|r| f(r)).collect());
    let walls: Vec<f64> = rows.iter().map(|r| r.wall_s).collect();
    Summary {
        runs: rows.len(),
        records: of(|r| r.records),
        wall_s: of(|r| r.wall_s),
        wall_range: (
            walls.iter().copied().fold(f64::INFINITY, f64::min),
            walls.iter().copied().fold(0.0, f64::max),
        ),
        first_output_s: of(|r| r.first_output_s),
        output_s: of(|r| r.output_s),
        output_span_s: of(|r| r.output_s - r.first_output_s),
        records_per_s: of(|r| r.records / r.wall_s),
        cpu_s: of(|r| r.cpu_s),
        records_per_cpu_s: of(|r| r.records / r.cpu_s),
        steady_records_per_cpu_s: of(steady_records_per_cpu_s),
        rss_mib: of(|r| r.rss_mib),
    }
}

const IMPLEMENTATIONS: [&str; 4] = ["kstreams", "kstreams-baseline", "kafka-streams", "raw"];
/// kstreams watched (`bench compare --only` names them): DEBUG metrics,
/// and INFO with /metrics scraped every second. In the table, not the chart.
const OBSERVED: [&str; 2] = ["kstreams-debug-metrics", "kstreams-scraped"];

type Groups<'a> = BTreeMap<(u32, String), BTreeMap<String, Summary>>;

fn group(rows: &[Row]) -> Groups<'_> {
    let mut by: BTreeMap<(u32, String, String), Vec<&Row>> = BTreeMap::new();
    // A restore row reads as a throughput row: records restored, from the
    // start until serving.
    for row in rows
        .iter()
        .filter(|r| r.kind == "throughput" || r.kind == "restore")
    {
        by.entry((
            row.threads,
            row.workload.clone(),
            row.implementation.clone(),
        ))
        .or_default()
        .push(row);
    }
    let mut groups: Groups = BTreeMap::new();
    for ((threads, workload, implementation), rows) in by {
        groups
            .entry((threads, workload))
            .or_default()
            .insert(implementation, summarize(&rows));
    }
    groups
}

/// A figure with `decimals`, or a dash where no run measured it.
fn or_dash(value: f64, decimals: usize) -> String {
    if value.is_finite() {
        format!("{value:.decimals$}")
    } else {
        "–".to_owned()
    }
}

/// A ratio as "2.50×", or a dash where a side was not measured (no run
/// of kstreams had a steady window to count).
fn times(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{ratio:.2}×")
    } else {
        "–".to_owned()
    }
}

fn markdown(rows: &[Row], groups: &Groups) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| workload | threads | implementation | runs | wall s (min–max) | output s, first–last | records/s | CPU s | records/CPU-s | steady records/CPU-s | peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for ((threads, workload), by_impl) in groups {
        for name in IMPLEMENTATIONS.into_iter().chain(OBSERVED) {
            let Some(s) = by_impl.get(name) else { continue };
            let _ = writeln!(
                out,
                "| {workload} | {threads} | {name} | {} | {:.2} ({:.2}–{:.2}) | {} | {:.0} | {:.2} | {:.0} | {} | {:.0} |",
                s.runs, s.wall_s, s.wall_range.0, s.wall_range.1,
                if s.output_s.is_finite() {
                    format!("{:.2}–{:.2}", s.first_output_s, s.output_s)
                } else {
                    "–".to_owned()
                },
                s.records_per_s, s.cpu_s, s.records_per_cpu_s,
                or_dash(s.steady_records_per_cpu_s, 0), s.rss_mib
            );
        }
    }
    let _ = writeln!(
        out,
        "\nkstreams against Kafka Streams (above 1 is better for kstreams). The steady \
         ratio leans towards kstreams, whose short runs end one or two commits after the \
         quarter mark (see the steady column's rule); the last column does not: \
         kstreams' whole run, start-up included, against Kafka Streams' steady state, \
         a lower bound of the steady ratio. Output complete: the same speed from the \
         process's start to the last output record's append, which commit steps do not \
         coarsen (pass-through and join); output span: from the first output record's \
         append to the last's, start-up left out. Without Kafka Streams in the run, only \
         the columns against the raw loop are filled. restore: the count's app started again \
         after its local state was deleted; records are the records restored from its \
         changelog, wall, CPU and peak RSS run from the process's start until it serves \
         again (RUNNING, every changelog partition restored).\n\n| workload | threads | speed (wall) | speed (output complete) | records/CPU-s | steady records/CPU-s | RSS (kstreams / Kafka Streams) | kstreams / raw (wall) | kstreams / raw (output complete) | kstreams / raw (output span) | records/CPU-s, kstreams' whole run / Kafka Streams' steady |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for ((threads, workload), by_impl) in groups {
        let Some(k) = by_impl.get("kstreams") else {
            continue;
        };
        // A side not in the run gives NaN, shown as a dash.
        let against = |other: &str, ratio: fn(&Summary, &Summary) -> f64| {
            by_impl.get(other).map_or(f64::NAN, |o| ratio(k, o))
        };
        let kafka_streams = |ratio| against("kafka-streams", ratio);
        let raw = |ratio| or_dash(against("raw", ratio), 2);
        let _ = writeln!(
            out,
            "| {workload} | {threads} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            times(kafka_streams(|k, j| j.wall_s / k.wall_s)),
            times(kafka_streams(|k, j| j.output_s / k.output_s)),
            times(kafka_streams(
                |k, j| k.records_per_cpu_s / j.records_per_cpu_s
            )),
            times(kafka_streams(
                |k, j| k.steady_records_per_cpu_s / j.steady_records_per_cpu_s
            )),
            or_dash(kafka_streams(|k, j| k.rss_mib / j.rss_mib), 2),
            raw(|k, r| r.wall_s / k.wall_s),
            raw(|k, r| r.output_s / k.output_s),
            raw(|k, r| r.output_span_s / k.output_span_s),
            times(kafka_streams(
                |k, j| k.records_per_cpu_s / j.steady_records_per_cpu_s
            )),
        );
    }
    restore_table(&mut out, groups);
    baseline_table(&mut out, groups);
    recovery_table(&mut out, rows);
    let latency: Vec<&Row> = rows.iter().filter(|r| r.kind == "latency").collect();
    if !latency.is_empty() {
        let _ = writeln!(
            out,
            "\nEnd-to-end latency (producer send to output append; a count's: to a live reader's receipt), rate-limited:\n\n| workload | threads | implementation | rate records/s | runs | p50 ms | p99 ms | p99.9 ms |\n|---|---|---|---|---|---|---|---|"
        );
        // By rate too: a run may measure more than one.
        let mut by: BTreeMap<(String, u32, u64, String), Vec<&Row>> = BTreeMap::new();
        for row in latency {
            let rate = (row.records / row.wall_s).round() as u64;
            by.entry((
                row.workload.clone(),
                row.threads,
                rate,
                row.implementation.clone(),
            ))
            .or_default()
            .push(row);
        }
        for ((workload, threads, rate, name), rows) in by {
            let q = |i: usize| median(rows.iter().map(|r| r.latency_ms[i]).collect());
            let _ = writeln!(
                out,
                "| {workload} | {threads} | {name} | {rate} | {} | {:.1} | {:.1} | {:.1} |",
                rows.len(),
                q(0),
                q(1),
                q(2)
            );
        }
    }
    out
}

/// The restore rows again with the records restored, which the tables
/// above leave out, and kstreams' restore rate against Kafka Streams'.
fn restore_table(out: &mut String, groups: &Groups) {
    let restores: Vec<_> = groups
        .iter()
        // "restore", or "restore, RocksDB bound …".
        .filter(|((_, workload), _)| workload.split(',').next() == Some("restore"))
        .collect();
    if restores.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nRestore: from the start of the application, its local state deleted, until it \
         serves again (medians):\n\n| threads | implementation | runs | records restored | \
         wall s | restored records/s | CPU s | peak RSS MiB | restore rate, kstreams / Kafka \
         Streams |\n|---|---|---|---|---|---|---|---|---|"
    );
    for ((threads, _), by_impl) in restores {
        let kafka_streams = by_impl.get("kafka-streams");
        for name in IMPLEMENTATIONS.into_iter().chain(OBSERVED) {
            let Some(s) = by_impl.get(name) else { continue };
            let ratio = match (name, kafka_streams) {
                ("kafka-streams", _) | (_, None) => "–".to_owned(),
                (_, Some(j)) => times(s.records_per_s / j.records_per_s),
            };
            let _ = writeln!(
                out,
                "| {threads} | {name} | {} | {:.0} | {:.2} | {:.0} | {:.2} | {:.0} | {ratio} |",
                s.runs, s.records, s.wall_s, s.records_per_s, s.cpu_s, s.rss_mib
            );
        }
    }
}

/// This build against `--baseline`'s (another commit's), where it ran:
/// the before and after of a change, from one run.
fn baseline_table(out: &mut String, groups: &Groups) {
    let pairs: Vec<_> = groups
        .iter()
        .filter_map(|(key, by_impl)| {
            Some((
                key,
                by_impl.get("kstreams")?,
                by_impl.get("kstreams-baseline")?,
            ))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nThis build against the baseline's (`--baseline`; above 1 is better for this \
         build):\n\n| workload | threads | speed (wall) | speed (output complete) | \
         records/CPU-s | RSS (this / baseline) |\n|---|---|---|---|---|---|"
    );
    for ((threads, workload), k, b) in pairs {
        let _ = writeln!(
            out,
            "| {workload} | {threads} | {} | {} | {} | {} |",
            times(b.wall_s / k.wall_s),
            times(b.output_s / k.output_s),
            times(k.records_per_cpu_s / b.records_per_cpu_s),
            or_dash(k.rss_mib / b.rss_mib, 2),
        );
    }
}

fn colour(implementation: &str) -> RGBColor {
    match implementation {
        "kstreams" => RGBColor(0xd9, 0x5f, 0x02),
        "kafka-streams" => RGBColor(0x1b, 0x9e, 0x77),
        _ => RGBColor(0x75, 0x70, 0xb3),
    }
}

/// One figure of a summary, as drawn.
type Metric = fn(&Summary) -> f64;

fn chart(groups: &Groups, path: &Path) -> Result<(), Error> {
    let threads: Vec<u32> = {
        let mut t: Vec<u32> = groups.keys().map(|(t, _)| *t).collect();
        t.dedup();
        t
    };
    let root = SVGBackend::new(path, (560 * threads.len().max(1) as u32, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let rows = root.split_evenly((2, threads.len().max(1)));
    let metrics: [(&str, Metric); 2] = [
        ("records/s (wall)", |s| s.records_per_s),
        ("steady records/CPU-s", |s| s.steady_records_per_cpu_s),
    ];
    for (m, (label, metric)) in metrics.iter().enumerate() {
        for (t, count) in threads.iter().enumerate() {
            let area = &rows[m * threads.len() + t];
            let workloads: Vec<(&String, &BTreeMap<String, Summary>)> = groups
                .iter()
                .filter(|((th, _), _)| th == count)
                .map(|((_, w), by)| (w, by))
                .collect();
            let top = workloads
                .iter()
                .flat_map(|(_, by)| by.values().map(metric))
                .filter(|v| v.is_finite())
                .fold(1.0, f64::max)
                * 1.15;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{label}, {count} thread(s)"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..workloads.len() as f64, 0f64..top)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(workloads.len() * 2 + 1)
                .x_label_formatter(&|x| {
                    let i = x.floor() as usize;
                    if (x - i as f64 - 0.5).abs() < 1e-6 {
                        workloads
                            .get(i)
                            .map_or(String::new(), |(w, _)| (*w).clone())
                    } else {
                        String::new()
                    }
                })
                .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
                .draw()?;
            for (i, (_, by)) in workloads.iter().enumerate() {
                for (j, name) in IMPLEMENTATIONS.iter().enumerate() {
                    let Some(value) = by.get(*name).map(metric).filter(|v| v.is_finite()) else {
                        continue;
                    };
                    let left = i as f64 + 0.1 + j as f64 * 0.27;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(left, 0.0), (left + 0.25, value)],
                        colour(name).filled(),
                    )))?;
                }
            }
            for name in IMPLEMENTATIONS {
                chart
                    .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
                    .label(name)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour(name).filled())
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

/// Writes `compare.md` and `compare.svg` into `out_dir`.
pub fn write(results: &Path, out_dir: &Path) -> Result<(), Error> {
    let rows = parse(&fs::read_to_string(results)?)?;
    let groups = group(&rows);
    fs::create_dir_all(out_dir)?;
    let table = markdown(&rows, &groups);
    fs::write(out_dir.join("compare.md"), &table)?;
    chart(&groups, &out_dir.join("compare.svg"))?;
    print!("{table}");
    Ok(())
}

/// The crash-recovery rows (xtask's `crash_run`): records are the records
/// the restart restored; wall, first output and output the seconds from
/// the restart until the group committed input again and until the output
/// was readable again, and from the kill until the latter.
fn recovery_table(out: &mut String, rows: &[Row]) {
    let mut by: BTreeMap<(String, u32, String), Vec<&Row>> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.kind == "recovery") {
        by.entry((
            row.workload.clone(),
            row.threads,
            row.implementation.clone(),
        ))
        .or_default()
        .push(row);
    }
    if by.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nCrash recovery under exactly-once: SIGKILL once half of the input is committed, \
         then a restart on the same state directory as the same static member (medians):\n\n\
         | workload | threads | implementation | runs | records restored | input committed \
         again, s after the restart | output readable, s after the restart | output readable, \
         s after the kill |\n|---|---|---|---|---|---|---|---|"
    );
    for ((workload, threads, name), rows) in by {
        let m = |f: fn(&Row) -> f64| median(rows.iter().map(|r| f(r)).collect());
        let _ = writeln!(
            out,
            "| {workload} | {threads} | {name} | {} | {:.0} | {:.2} | {:.2} | {:.2} |",
            rows.len(),
            m(|r| r.records),
            m(|r| r.wall_s),
            m(|r| r.first_output_s),
            m(|r| r.output_s),
        );
    }
}
