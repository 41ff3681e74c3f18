//! A real Prometheus for the dashboard check: built once from its Go module
//! with the Go toolchain (cached under `~/.cache/kstreams/prometheus-<v>/`),
//! run with a scrape config of ours, and asked through its HTTP API.

pub(crate) mod json;

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use self::json::Json;
use crate::paths;
use crate::process::{self, secs};

/// The Go module of Prometheus' server and the version built: Prometheus
/// 3.x tags its Go module v0.3xx.y.
const MODULE: &str = "github.com/prometheus/prometheus/cmd/prometheus";
pub(crate) const VERSION: &str = "v0.316.0";

/// How long a fresh Prometheus may take to answer `/-/ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The cached binary, built first if it is not there: a cold build
/// downloads the modules and compiles for minutes; later runs (and CI
/// after its first) find it.
pub(crate) fn binary() -> Result<PathBuf> {
    let dir = paths::cache_dir().join(format!("prometheus-{VERSION}"));
    let binary = dir.join("prometheus");
    if binary.is_file() {
        return Ok(binary);
    }
    process::require_tool(
        "go",
        "version",
        "Prometheus is built from its Go module: install Go 1.26 or newer",
    )?;
    // Built beside the cache entry and moved in whole, so an interrupted
    // build never leaves a binary that looks done.
    let partial = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).with_context(|| format!("cannot create {}", partial.display()))?;
    eprintln!("prometheus: building {MODULE}@{VERSION} with Go (once; minutes when cold)");
    let started = Instant::now();
    let mut build = Command::new("go");
    build
        // Without the cloud service discoveries (AWS, Azure, GCE,
        // Kubernetes...: static targets are all the check scrapes), which
        // are most of the build's CPU time and much of the binary
        // (BENCHMARKS.md, "xtask: Prometheus build").
        .args(["install", "-tags", "remove_all_sd"])
        .arg(format!("{MODULE}@{VERSION}"))
        .env("GOBIN", &partial)
        // A module path@version is built in module mode whatever the
        // current directory holds.
        .env("GO111MODULE", "on")
        .current_dir(&partial);
    process::run(&mut build, "go install (Prometheus)")?;
    if !partial.join("prometheus").is_file() {
        bail!(
            "go install left no prometheus binary in {}",
            partial.display()
        );
    }
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir)
        .with_context(|| format!("cannot move {} to {}", partial.display(), dir.display()))?;
    eprintln!("prometheus: built in {}", secs(started.elapsed()));
    Ok(binary)
}

/// A Prometheus server of ours, stopped on drop.
pub(crate) struct Server {
    child: Child,
    address: String,
    log: PathBuf,
}

impl Server {
    /// Starts `binary` with `config` (a prometheus.yml) written into `dir`,
    /// its storage and log there too, listening on a free port of this
    /// host; returns once it is ready.
    pub(crate) fn start(binary: &Path, dir: &Path, config: &str) -> Result<Server> {
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let config_file = dir.join("prometheus.yml");
        fs::write(&config_file, config)
            .with_context(|| format!("cannot write {}", config_file.display()))?;
        let address = format!("127.0.0.1:{}", free_port()?);
        let log = dir.join("prometheus.log");
        let log_file = File::create(&log)?;
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let mut server = Server {
            child,
            address,
            log,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok((200, _)) = http_get(&server.address, "/-/ready") {
                return Ok(server);
            }
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "prometheus exited ({status}) before it was ready:\n{}",
                    process::tail(&server.log, 20)
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "prometheus was not ready within {}:\n{}",
                    secs(READY_TIMEOUT),
                    process::tail(&server.log, 20)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `http://<address>`, for the operator to look at while it runs.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// An instant query at the current time (`/api/v1/query`): the series
    /// it returned, each as its labels and value.
    pub(crate) fn query(&self, expr: &str) -> Result<Vec<Sample>> {
        let path = format!("/api/v1/query?query={}", percent_encode(expr));
        let (status, body) = http_get(&self.address, &path)?;
        parse_query_answer(status, &body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM lets it close its storage; a kill follows if it lingers.
        process::signal(self.child.id() as i32, libc::SIGTERM);
        if !process::wait_until(Duration::from_secs(10), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// One series of an instant vector: its labels as Prometheus prints them
/// and its value (NaN and infinities included).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    pub labels: String,
    pub value: f64,
}

fn parse_query_answer(status: u16, body: &str) -> Result<Vec<Sample>> {
    let answer = Json::parse(body)
        .with_context(|| format!("prometheus answered {status} with no JSON: {body}"))?;
    if answer.get("status").and_then(Json::as_str) != Some("success") {
        let error = answer.get("error").and_then(Json::as_str).unwrap_or(body);
        bail!("prometheus refused the query ({status}): {error}");
    }
    let data = answer.get("data").context("no data in the answer")?;
    let kind = data.get("resultType").and_then(Json::as_str);
    let result = data.get("result").context("no result in the answer")?;
    match kind {
        Some("vector") => result.elements().iter().map(vector_sample).collect(),
        // A scalar expression (`1 + 1`) is one unlabelled value.
        Some("scalar") => Ok(vec![Sample {
            labels: "{}".to_string(),
            value: sample_value(result)?,
        }]),
        other => bail!("unexpected result type {other:?}"),
    }
}

fn vector_sample(series: &Json) -> Result<Sample> {
    let labels = match series.get("metric") {
        Some(Json::Object(members)) => {
            let pairs: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or_default()))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        _ => "{}".to_string(),
    };
    let value = sample_value(series.get("value").context("a series without a value")?)?;
    Ok(Sample { labels, value })
}

/// `[<unix time>, "<value>"]`; Prometheus spells NaN and infinities as
/// `NaN`, `+Inf` and `-Inf`, which Rust's parser reads.
fn sample_value(pair: &Json) -> Result<f64> {
    let text = pair
        .elements()
        .get(1)
        .and_then(Json::as_str)
        .context("a sample without a value")?;
    text.parse()
        .with_context(|| format!("a sample value that is no number: {text}"))
}

/// Every byte but the unreserved ones of RFC 3986 escaped: the query
/// string of a GET.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A port nobody listens on now (the OS's pick; free again once dropped).
pub(crate) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `GET path` from `address` (`host:port`): its status and body. HTTP/1.0,
/// so the server closes after the body and sends it unchunked.
pub(crate) fn http_get(address: &str, path: &str) -> Result<(u16, String)> {
    let timeout = Duration::from_secs(30);
    let socket = address
        .to_socket_addrs()?
        .next()
        .with_context(|| format!("no address for {address}"))?;
    let mut stream = TcpStream::connect_timeout(&socket, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n")?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("not an HTTP answer from {address}{path}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_answers() {
        let vector = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"topic":"clicks","partition":"0"},"value":[1764600000.1,"12.5"]},
            {"metric":{},"value":[1764600000.1,"NaN"]}]}}"#;
        let samples = parse_query_answer(200, vector).unwrap();
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].labels, r#"{topic="clicks", partition="0"}"#);
        assert_eq!(samples[0].value, 12.5);
        assert!(samples[1].value.is_nan());
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert!(parse_query_answer(200, empty).unwrap().is_empty());
        let scalar = r#"{"status":"success","data":{"resultType":"scalar","result":[1.0,"+Inf"]}}"#;
        assert_eq!(
            parse_query_answer(200, scalar).unwrap()[0].value,
            f64::INFINITY
        );
        let refused =
            r#"{"status":"error","errorType":"bad_data","error":"parse error: unexpected"}"#;
        let error = parse_query_answer(400, refused).unwrap_err().to_string();
        assert!(error.contains("parse error"), "{error}");
    }

    #[test]
    fn queries_are_escaped_whole() {
        assert_eq!(
            percent_encode(r#"sum by (topic) (rate(x{job=~".*"}[1m]))"#),
            "sum%20by%20%28topic%29%20%28rate%28x%7Bjob%3D~%22.%2A%22%7D%5B1m%5D%29%29"
        );
    }
}
