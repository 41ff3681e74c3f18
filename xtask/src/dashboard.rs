//! `cargo xtask dashboard`: the Grafana dashboard (docs/grafana/kstreams.json)
//! checked against a real Prometheus.
//!
//! Runs the dashboard app (crates/kstreams-http/examples/dashboard_app.rs:
//! a count in RocksDB, a stream-table join, a windowed count, late and
//! malformed records, on librdkafka's in-process mock cluster), lets a
//! Prometheus built from its Go module scrape its `/metrics` every second,
//! then evaluates every query of every panel through Prometheus' HTTP API.
//! A panel fails when a query returns no series, or only zeros and NaN
//! unless [`MAY_BE_ZERO`] says why that is right for the check's app.
//! Work files (prometheus.yml, its storage and log, the app's log) are in
//! `<target>/dashboard/`.

use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cargo::{self, cargo_bin};
use crate::cli::{exit_code, Args};
use crate::paths;
use crate::process::{self, secs};
use crate::prometheus::json::Json;
use crate::prometheus::{self, Sample, Server};

/// The dashboard, relative to the repository.
const DASHBOARD: &str = "docs/grafana/kstreams.json";
/// The app under scrape: an example of kstreams-http.
const APP: &str = "dashboard_app";
/// Scrapes to wait for before the first evaluation: enough samples for
/// every `rate()` window.
const SCRAPES: u32 = 15;
/// How long a panel may take to show data after that, before it fails
/// (a histogram quantile needs a record in its window, a commit its
/// interval).
const SETTLE: Duration = Duration::from_secs(30);
/// What Grafana's range variables stand for in the check: windows that
/// cover the app's whole run.
const RATE_INTERVAL: &str = "1m";
const RANGE: &str = "5m";
/// How long the app may take from its start to /health/ready.
const APP_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Panels whose queries may return only zeros (or NaN) for the check's
/// app, with the reason; their series must still be there.
pub(crate) const MAY_BE_ZERO: &[(&str, &str)] = &[
    (
        "Consumer lag per partition",
        "the app keeps up with its producer, so the lag is often 0 at the moment of the query",
    ),
    (
        "Lag skew per topic",
        "with the lag at 0 the skew is 0 too",
    ),
    (
        "Records still to restore: changelogs, bootstraps, global stores",
        "the app restores, bootstraps and loads before Prometheus' first scrape: 0 remains",
    ),
    (
        "Records restored per second: changelogs, bootstraps, global stores",
        "the app restores, bootstraps and loads before Prometheus' first scrape: the counters \
         no longer move (\"Records restored since each instance started\" shows their figures)",
    ),
    (
        "Tasks created and closed per second (rebalances)",
        "the tasks are created before Prometheus' first scrape and no rebalance happens while the check runs",
    ),
];

pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let dashboard = args
        .option::<PathBuf>("dashboard")?
        .unwrap_or_else(default_path);
    args.finish()?;
    Ok(exit_code(check(&dashboard)?))
}

/// The repository's dashboard.
pub(crate) fn default_path() -> PathBuf {
    paths::repo_root().join(DASHBOARD)
}

/// One panel's queries, with Grafana's variables replaced.
#[derive(Debug)]
struct Panel {
    title: String,
    queries: Vec<String>,
}

/// Runs the whole check on `dashboard`; true when every panel has data.
pub(crate) fn check(dashboard: &Path) -> Result<bool> {
    let started = Instant::now();
    let panels = read_panels(dashboard)?;
    let queries: usize = panels.iter().map(|p| p.queries.len()).sum();
    eprintln!(
        "dashboard: {} panels, {queries} queries in {}",
        panels.len(),
        dashboard.display()
    );
    let binary = prometheus::binary()?;
    let work = paths::cargo_target_dir(&cargo_bin())?.join("dashboard");
    fs::create_dir_all(&work)?;
    let app = App::start(&work)?;
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: kstreams\n    static_configs:\n      - targets: ['{}']\n",
        app.address
    );
    let server = Server::start(&binary, &work.join("prometheus"), &config)?;
    eprintln!(
        "dashboard: prometheus at {} scrapes the app at http://{}/metrics",
        server.url(),
        app.address
    );
    wait_for_scrapes(&server, &app)?;

    // Each panel's latest verdict; those without data are asked again
    // until they have it or the time is up.
    let mut verdicts: Vec<Option<Verdict>> = panels.iter().map(|_| None).collect();
    let deadline = Instant::now() + SETTLE;
    loop {
        for (panel, verdict) in panels.iter().zip(&mut verdicts) {
            if !matches!(verdict, Some(Verdict::Ok(_))) {
                *verdict = Some(evaluate(&server, panel)?);
            }
        }
        let all_ok = verdicts.iter().all(|v| matches!(v, Some(Verdict::Ok(_))));
        if all_ok || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    app.stop();
    drop(server);

    let mut failed = 0;
    for (panel, verdict) in panels.iter().zip(&verdicts) {
        let title = &panel.title;
        match verdict {
            Some(Verdict::Ok(seen)) => eprintln!("dashboard: ok     {title}: {seen}"),
            Some(Verdict::Failed(why)) => {
                failed += 1;
                eprintln!("dashboard: FAILED panel \"{title}\": {why}");
            }
            None => unreachable!("every panel is evaluated at least once"),
        }
    }
    eprintln!(
        "dashboard: {} of {} panels have data ({failed} failed) in {}",
        panels.len() - failed,
        panels.len(),
        secs(started.elapsed())
    );
    Ok(failed == 0)
}

#[derive(Debug)]
enum Verdict {
    /// What its queries returned, in short.
    Ok(String),
    Failed(String),
}

/// A panel passes when each query returns a series, and one with a value
/// other than 0 and NaN unless the panel is in [`MAY_BE_ZERO`].
fn evaluate(server: &Server, panel: &Panel) -> Result<Verdict> {
    let zero_allowed = MAY_BE_ZERO.iter().any(|(title, _)| *title == panel.title);
    let mut seen = Vec::new();
    for query in &panel.queries {
        let samples = match server.query(query) {
            Ok(samples) => samples,
            Err(error) => return Ok(Verdict::Failed(format!("{error:#}; query: {query}"))),
        };
        if let Some(verdict) = judge(&samples, zero_allowed, query) {
            return Ok(verdict);
        }
        let largest = samples
            .iter()
            .map(|s| s.value)
            .filter(|v| !v.is_nan())
            .fold(f64::NAN, f64::max);
        seen.push(format!("{} series, max {largest:.3e}", samples.len()));
    }
    if zero_allowed {
        seen.push("(may be 0 here)".to_string());
    }
    Ok(Verdict::Ok(seen.join("; ")))
}

fn judge(samples: &[Sample], zero_allowed: bool, query: &str) -> Option<Verdict> {
    if samples.is_empty() {
        return Some(Verdict::Failed(format!("no series for {query}")));
    }
    let has_value = samples.iter().any(|s| s.value != 0.0 && !s.value.is_nan());
    if !has_value && !zero_allowed {
        let shown: Vec<String> = samples
            .iter()
            .take(3)
            .map(|s| format!("{} {}", s.labels, s.value))
            .collect();
        return Some(Verdict::Failed(format!(
            "{} series, all 0 or NaN ({}) for {query}",
            samples.len(),
            shown.join("; ")
        )));
    }
    None
}

/// Every panel with queries (rows, collapsed or not, searched too), in
/// the dashboard's order.
fn read_panels(dashboard: &Path) -> Result<Vec<Panel>> {
    let text = fs::read_to_string(dashboard)
        .with_context(|| format!("cannot read {}", dashboard.display()))?;
    let json = Json::parse(&text).with_context(|| format!("in {}", dashboard.display()))?;
    let variables = all_values(&json);
    let mut panels = Vec::new();
    collect_panels(json.get("panels"), &variables, &mut panels)?;
    if panels.is_empty() {
        bail!("{} has no panel with a query", dashboard.display());
    }
    for (title, _) in MAY_BE_ZERO {
        if !panels.iter().any(|p| p.title == *title) {
            bail!("MAY_BE_ZERO names \"{title}\", which the dashboard has no more");
        }
    }
    Ok(panels)
}

fn collect_panels(
    list: Option<&Json>,
    variables: &[(String, String)],
    out: &mut Vec<Panel>,
) -> Result<()> {
    for panel in list.map(Json::elements).unwrap_or_default() {
        collect_panels(panel.get("panels"), variables, out)?;
        let targets = panel.get("targets").map(Json::elements).unwrap_or_default();
        if targets.is_empty() {
            continue;
        }
        let title = panel
            .get("title")
            .and_then(Json::as_str)
            .unwrap_or("(untitled)")
            .to_string();
        let mut queries = Vec::new();
        for target in targets {
            let expr = target
                .get("expr")
                .and_then(Json::as_str)
                .with_context(|| format!("panel \"{title}\" has a target without expr"))?;
            queries
                .push(substitute(expr, variables).with_context(|| format!("panel \"{title}\""))?);
        }
        out.push(Panel { title, queries });
    }
    Ok(())
}

/// Each template variable's value when "All" is selected (its `allValue`,
/// else a regex matching anything): the check looks at every job and
/// instance.
fn all_values(dashboard: &Json) -> Vec<(String, String)> {
    dashboard
        .get("templating")
        .and_then(|t| t.get("list"))
        .map(Json::elements)
        .unwrap_or_default()
        .iter()
        .filter_map(|variable| {
            let name = variable.get("name").and_then(Json::as_str)?;
            let value = variable
                .get("allValue")
                .and_then(Json::as_str)
                .unwrap_or(".*");
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

/// Replaces Grafana's `$name` and `${name}` in a query: its range
/// variables with windows that cover the check, template variables with
/// their "All" value. An unknown variable is an error.
fn substitute(expr: &str, variables: &[(String, String)]) -> Result<String> {
    let mut out = String::with_capacity(expr.len());
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').context("an unclosed ${")?;
            (&braced[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        let value = match name {
            "__rate_interval" | "__interval" => RATE_INTERVAL,
            "__range" => RANGE,
            _ => variables
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .with_context(|| format!("unknown variable ${name} in {expr}"))?,
        };
        out.push_str(value);
        rest = &after[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Waits until Prometheus scraped the app [`SCRAPES`] times, all of them
/// successfully.
fn wait_for_scrapes(server: &Server, app: &App) -> Result<()> {
    let query = format!("sum_over_time(up{{job=\"kstreams\"}}[{RANGE}])");
    let deadline = Instant::now() + Duration::from_secs(u64::from(SCRAPES) * 4 + 30);
    loop {
        let scraped = server
            .query(&query)?
            .first()
            .map_or(0.0, |sample| sample.value);
        if scraped >= f64::from(SCRAPES) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "prometheus scraped the app {scraped} times, not {SCRAPES}; its log:\n{}\nthe app's log:\n{}",
                process::tail(server.log(), 10),
                process::tail(&app.log, 10)
            );
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The dashboard app, running until [`App::stop`] closes its stdin.
struct App {
    child: Child,
    stdin: Option<ChildStdin>,
    address: String,
    log: PathBuf,
}

impl App {
    fn start(work: &Path) -> Result<App> {
        // The test build compiles the examples too, and it is the build CI
        // made already: nothing is linked twice.
        eprintln!("dashboard: cargo test --workspace --no-run (for examples/{APP})");
        process::run(
            &mut cargo::cargo(&cargo::TEST_NO_RUN),
            "building the dashboard app",
        )?;
        let binary = paths::cargo_target_dir(&cargo_bin())?
            .join("debug")
            .join("examples")
            .join(APP);
        let address = format!("127.0.0.1:{}", prometheus::free_port()?);
        let log = work.join("app.log");
        let log_file = File::create(&log)?;
        let mut child = Command::new(&binary)
            // A cap in case the pipe outlives this process somehow.
            .args(["--address", &address, "--seconds", "900"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let stdin = child.stdin.take();
        let app = App {
            child,
            stdin,
            address,
            log,
        };
        let started = Instant::now();
        let mut app = app;
        loop {
            if let Ok((200, _)) = prometheus::http_get(&app.address, "/health/ready") {
                eprintln!(
                    "dashboard: the app is ready after {}",
                    secs(started.elapsed())
                );
                return Ok(app);
            }
            if let Some(status) = app.child.try_wait()? {
                bail!(
                    "the dashboard app exited ({status}) before it was ready:\n{}",
                    process::tail(&app.log, 20)
                );
            }
            if started.elapsed() >= APP_READY_TIMEOUT {
                bail!(
                    "the dashboard app was not ready within {}:\n{}",
                    secs(APP_READY_TIMEOUT),
                    process::tail(&app.log, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Closes its stdin, its signal to shut down cleanly, and waits.
    fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(mut stdin) = self.stdin.take() else {
            return;
        };
        let _ = stdin.flush();
        drop(stdin);
        if !process::wait_until(Duration::from_secs(40), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            eprintln!("dashboard: the app did not stop within 40 s; killing it");
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.shut_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables() -> Vec<(String, String)> {
        vec![
            ("job".to_string(), ".*".to_string()),
            ("instance".to_string(), "a|b".to_string()),
        ]
    }

    #[test]
    fn grafana_variables_are_replaced() {
        let expr = r#"sum(rate(x{job=~"$job", instance=~"${instance}"}[$__rate_interval])) + increase(y[$__range])"#;
        assert_eq!(
            substitute(expr, &variables()).unwrap(),
            r#"sum(rate(x{job=~".*", instance=~"a|b"}[1m])) + increase(y[5m])"#
        );
        assert!(substitute("x{a=\"$nope\"}", &variables()).is_err());
        assert!(substitute("x{a=\"${job\"}", &variables()).is_err());
    }

    #[test]
    fn empty_zero_and_nan_answers_fail_unless_allowed() {
        let sample = |value| Sample {
            labels: "{}".to_string(),
            value,
        };
        assert!(matches!(judge(&[], true, "q"), Some(Verdict::Failed(_))));
        let zeros = [sample(0.0), sample(f64::NAN)];
        assert!(matches!(
            judge(&zeros, false, "q"),
            Some(Verdict::Failed(_))
        ));
        assert!(judge(&zeros, true, "q").is_none());
        assert!(judge(&[sample(0.0), sample(3.0)], false, "q").is_none());
    }

    /// The repository's dashboard: every panel's queries read, every
    /// variable known, every exception naming a panel that exists.
    #[test]
    fn the_dashboard_reads() {
        let panels = read_panels(&default_path()).unwrap();
        assert!(panels.len() >= 20, "{} panels", panels.len());
        for panel in &panels {
            for query in &panel.queries {
                assert!(!query.contains('$'), "{}: {query}", panel.title);
                assert!(query.contains("kstreams_"), "{}: {query}", panel.title);
            }
        }
        let mut titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        titles.sort_unstable();
        titles.dedup();
        assert_eq!(titles.len(), panels.len(), "two panels share a title");
    }
}
