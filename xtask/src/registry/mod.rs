//! `cargo xtask registry start|stop|status`: a real schema registry with the
//! Confluent REST API, for the real-registry tests of crates/kstreams-avro,
//! crates/kstreams-protobuf and crates/kstreams-json-schema, and their
//! independent peers: Apicurio's Java Avro serde, and Confluent's own
//! Python Protobuf and JSON Schema serializers ([`python_peer`]).
//!
//! Confluent's own Schema Registry is not on Maven Central; Apicurio
//! Registry is, and it serves the Confluent API at `/apis/ccompat/v7`. Its
//! 2.x app runs from one archive (a Quarkus runner jar and its lib/) with
//! in-memory (H2) storage, so every start is a fresh, empty registry.
//!
//! The archive is unpacked once into `~/.cache/kstreams/apicurio-registry-<version>/`.
//! Run files live in `<repo>/target/schema-registry/` (gitignored with
//! target/): `pid`, `url` and `registry.log`.

mod probe;

use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::cli::Args;
use crate::maven;
use crate::paths;
use crate::process::{self, secs};

/// The variable through which the Avro tests find the registry: the base
/// URL of its Confluent-compatible API.
pub(crate) const REGISTRY_ENV: &str = "KSTREAMS_TEST_SCHEMA_REGISTRY";

/// The variable through which the Avro tests find the Java peer's classpath
/// (xtask/registry/AvroPeer.java runs on it).
pub(crate) const JAVA_PEER_ENV: &str = "KSTREAMS_TEST_AVRO_JAVA_CLASSPATH";

/// The variable through which the Protobuf and JSON Schema tests find a
/// Python interpreter with Confluent's serializers
/// (xtask/registry/confluent_peer.py runs on it).
pub(crate) const PYTHON_PEER_ENV: &str = "KSTREAMS_TEST_CONFLUENT_PYTHON";

/// The `confluent-kafka` release of the Python peer, with the extras its
/// Schema Registry serializers need.
const CONFLUENT_KAFKA_PYTHON: &str = "confluent-kafka[schemaregistry,protobuf,json]==2.16.1";

/// The Apicurio Registry release, from Maven Central (the server, and the
/// Java serde of xtask/registry/pom.xml, which defaults to it too).
pub(crate) const APICURIO_VERSION: &str = "2.6.13.Final";
const ARTIFACT: &str = "io.apicurio:apicurio-registry-app";
/// The Confluent-compatible API under the registry's root.
const CCOMPAT_PATH: &str = "/apis/ccompat/v7";
/// A cold Quarkus start on a busy 2-core machine takes 5-15 s.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_GRACE: Duration = Duration::from_secs(20);
const JVM_OPTIONS: &[&str] = &["-Xms64m", "-Xmx512m", "-Djava.awt.headless=true"];

pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let action = args.next();
    match action.as_deref() {
        Some("start") => {
            let port = args.option::<u16>("port")?;
            args.finish()?;
            let url = start(port)?;
            // Stdout carries only export lines, so `eval "$(cargo xtask registry start)"` works.
            println!("export {REGISTRY_ENV}={url}");
            print_java_peer_export();
            print_python_peer_export();
            Ok(ExitCode::SUCCESS)
        }
        Some("stop") => {
            args.finish()?;
            stop()?;
            Ok(ExitCode::SUCCESS)
        }
        Some("status") => {
            args.finish()?;
            Ok(status())
        }
        _ => bail!("usage: cargo xtask registry start [--port P] | stop | status"),
    }
}

/// Starts the registry, or finds the one already running; returns the base
/// URL of its Confluent-compatible API. It runs until [`stop`].
pub(crate) fn start(port: Option<u16>) -> Result<String> {
    if let Some(url) = running_url() {
        eprintln!("registry: already running at {url}");
        return Ok(url);
    }
    if live_pid().is_some() {
        bail!("a registry is still starting; wait for it, or `cargo xtask registry stop` it");
    }
    maven::require_java_and_maven()?;
    let runner = runner_jar()?;
    let dir = run_dir();
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    remove_run_files();
    let port = match port {
        Some(port) => port,
        None => free_port()?,
    };
    launch_and_wait(&runner, port)
}

/// Stops the registry `start` recorded; returns whether one ran.
pub(crate) fn stop() -> Result<bool> {
    let Some(pid) = live_pid() else {
        eprintln!("registry: not running");
        remove_run_files();
        return Ok(false);
    };
    let began = Instant::now();
    process::signal(pid, libc::SIGTERM);
    if !process::wait_until(STOP_GRACE, || live_pid().is_none()) {
        eprintln!("registry: did not stop in time; killing it");
        process::signal(pid, libc::SIGKILL);
        process::wait_until(Duration::from_secs(5), || live_pid().is_none());
    }
    remove_run_files();
    eprintln!("registry: stopped in {}", secs(began.elapsed()));
    Ok(true)
}

/// A registry for one run of the tests: the running one, or one started
/// now and stopped when the lease drops.
pub(crate) struct Lease {
    url: String,
    started: bool,
}

impl Lease {
    /// Finds the running registry or starts one.
    pub(crate) fn acquire() -> Result<Lease> {
        let started = running_url().is_none();
        let url = start(None)?;
        Ok(Lease { url, started })
    }

    /// The registry's Confluent-compatible API.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.started {
            if let Err(error) = stop() {
                eprintln!("registry: stopping it failed: {error:#}");
            }
        }
    }
}

/// The URL of the registry `start` left running, if it is up.
pub(crate) fn running_url() -> Option<String> {
    live_pid()?;
    let url = fs::read_to_string(url_file()).ok()?;
    Some(url.trim().to_owned())
}

fn status() -> ExitCode {
    match (live_pid(), running_url()) {
        (Some(pid), Some(url)) => {
            let answer = match probe::get_status(&url, Duration::from_secs(2)) {
                Ok(200) => "answers".to_owned(),
                Ok(status) => format!("answers HTTP {status}"),
                Err(error) => format!("does not answer: {error}"),
            };
            println!("registry: Apicurio Registry {APICURIO_VERSION} running at {url} (pid {pid}); {answer}");
            println!("export {REGISTRY_ENV}={url}");
            print_java_peer_export();
            print_python_peer_export();
            ExitCode::SUCCESS
        }
        (Some(pid), None) => {
            println!("registry: starting (pid {pid}), not answering yet");
            ExitCode::FAILURE
        }
        (None, _) => {
            println!("registry: not running");
            ExitCode::FAILURE
        }
    }
}

/// The Java peer's classpath as an export line; without it (Maven failed)
/// the cross-language test skips itself, and stderr says why.
fn print_java_peer_export() {
    match java_peer_classpath() {
        Ok(classpath) => println!("export {JAVA_PEER_ENV}={classpath}"),
        Err(error) => eprintln!("registry: no Java peer for the Avro tests: {error:#}"),
    }
}

/// The Python peer's interpreter as an export line; without it the
/// cross-client tests skip themselves, and stderr says why.
fn print_python_peer_export() {
    match python_peer() {
        Ok(python) => println!("export {PYTHON_PEER_ENV}={}", python.display()),
        Err(error) => eprintln!("registry: no Python peer for the Protobuf/JSON tests: {error:#}"),
    }
}

/// A Python virtual environment with Confluent's `confluent-kafka`
/// serializers, made once (a few wheels, pip-installed) and cached under
/// `~/.cache/kstreams/`; returns its interpreter.
pub(crate) fn python_peer() -> Result<PathBuf> {
    let version = CONFLUENT_KAFKA_PYTHON
        .rsplit("==")
        .next()
        .unwrap_or("unknown");
    let venv = paths::cache_dir().join(format!("confluent-python-peer-{version}"));
    let python = venv.join("bin").join("python");
    // The marker is written last: an interrupted install is redone.
    let marker = venv.join("installed");
    if marker.exists() && python.exists() {
        return Ok(python);
    }
    let began = Instant::now();
    let _ = fs::remove_dir_all(&venv);
    process::run_captured(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "making the Python peer's virtual environment (python3 -m venv)",
    )?;
    process::run_captured(
        Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            CONFLUENT_KAFKA_PYTHON,
        ]),
        "installing Confluent's Python serializers with pip",
    )?;
    fs::write(&marker, CONFLUENT_KAFKA_PYTHON)?;
    eprintln!(
        "registry: Python peer ({CONFLUENT_KAFKA_PYTHON}) installed ({})",
        secs(began.elapsed())
    );
    Ok(python)
}

/// The runtime classpath of xtask/registry/pom.xml (Apicurio's Avro serde
/// and kafka-clients), resolved once and cached.
pub(crate) fn java_peer_classpath() -> Result<String> {
    let began = Instant::now();
    let pom = paths::repo_root().join("xtask/registry/pom.xml");
    let cache = paths::cache_dir()
        .join(format!("avro-java-peer-{APICURIO_VERSION}"))
        .join("classpath.txt");
    // The pom's own apicurio.version is APICURIO_VERSION (a test checks).
    let (classpath, resolved) = maven::classpath(&pom, &cache)?;
    if resolved {
        eprintln!(
            "registry: Java peer's jars resolved with Maven ({})",
            secs(began.elapsed())
        );
    }
    Ok(classpath)
}

fn run_dir() -> PathBuf {
    paths::repo_root().join("target").join("schema-registry")
}

fn pid_file() -> PathBuf {
    run_dir().join("pid")
}

fn url_file() -> PathBuf {
    run_dir().join("url")
}

fn log_file() -> PathBuf {
    run_dir().join("registry.log")
}

fn install_dir() -> PathBuf {
    paths::cache_dir().join(format!("apicurio-registry-{APICURIO_VERSION}"))
}

fn runner_path() -> PathBuf {
    install_dir().join(format!(
        "apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
    ))
}

/// The pid in the pid file, if that process is alive and runs our jar.
fn live_pid() -> Option<i32> {
    let pid = fs::read_to_string(pid_file()).ok()?.trim().parse().ok()?;
    let marker = runner_path().display().to_string();
    process::is_ours(pid, &marker).then_some(pid)
}

fn remove_run_files() {
    let _ = fs::remove_file(pid_file());
    let _ = fs::remove_file(url_file());
}

/// The runner jar, unpacked from Maven Central's archive on first use.
fn runner_jar() -> Result<PathBuf> {
    let runner = runner_path();
    if runner.exists() {
        return Ok(runner);
    }
    let began = Instant::now();
    let install = install_dir();
    // Unpacked beside the final place and renamed, so an interrupted unpack
    // never looks installed.
    let partial = install.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    // Without a project, the unpack goal leaves its marker files under a
    // literal `${project.basedir}/` of the working directory: a scratch one.
    let scratch = install.with_extension("maven");
    fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    let fetched = process::run_captured(
        Command::new("mvn")
            .current_dir(&scratch)
            .args(["-B", "-q", "-Dstyle.color=never"])
            .arg("org.apache.maven.plugins:maven-dependency-plugin:3.6.1:unpack")
            .arg(format!(
                "-Dartifact={ARTIFACT}:{APICURIO_VERSION}:tar.gz:all"
            ))
            .arg(format!("-DoutputDirectory={}", partial.display())),
        "fetching Apicurio Registry with Maven",
    );
    let _ = fs::remove_dir_all(&scratch);
    fetched?;
    let _ = fs::remove_dir_all(&install);
    fs::rename(&partial, &install)
        .with_context(|| format!("cannot move {} into place", partial.display()))?;
    if !runner.exists() {
        bail!(
            "the Apicurio Registry archive has no {}; its layout changed",
            runner.display()
        );
    }
    eprintln!(
        "registry: Apicurio Registry {APICURIO_VERSION} fetched with Maven ({})",
        secs(began.elapsed())
    );
    Ok(runner)
}

fn free_port() -> Result<u16> {
    // The window between closing this socket and the JVM binding the port
    // is accepted, as for the broker.
    let listener = TcpListener::bind("127.0.0.1:0").context("no free port on 127.0.0.1")?;
    Ok(listener.local_addr()?.port())
}

fn launch_and_wait(runner: &Path, port: u16) -> Result<String> {
    let began = Instant::now();
    let log = File::create(log_file())?;
    let mut child = Command::new("java")
        .args(JVM_OPTIONS)
        .arg("-Dquarkus.http.host=127.0.0.1")
        .arg(format!("-Dquarkus.http.port={port}"))
        // As Confluent's registry: a schema registered again in other JSON
        // formatting (another serializer's) keeps its id instead of
        // becoming a new version.
        .arg("-Dregistry.ccompat.use-canonical-hash=true")
        .arg("-jar")
        .arg(runner)
        .current_dir(run_dir())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("cannot start the registry's JVM")?;
    fs::write(pid_file(), child.id().to_string())?;
    let url = format!("http://127.0.0.1:{port}{CCOMPAT_PATH}");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            remove_run_files();
            bail!(not_up(&format!("exited ({status})")));
        }
        if probe::get_status(&url, Duration::from_secs(2)).is_ok_and(|s| s == 200) {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            remove_run_files();
            bail!(not_up(&format!(
                "did not answer within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    fs::write(url_file(), &url)?;
    eprintln!(
        "registry: Apicurio Registry {APICURIO_VERSION} up at {url} ({}); log in {}",
        secs(began.elapsed()),
        log_file().display()
    );
    Ok(url)
}

fn not_up(why: &str) -> String {
    let log = log_file();
    format!(
        "registry: {why}; last lines of {}:\n{}",
        log.display(),
        process::tail(&log, 40)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Java peer's serde and the server must be one Apicurio release.
    #[test]
    fn the_java_peer_pom_defaults_to_the_server_release() {
        let pom = fs::read_to_string(paths::repo_root().join("xtask/registry/pom.xml")).unwrap();
        let expected = format!("<apicurio.version>{APICURIO_VERSION}</apicurio.version>");
        assert!(
            pom.contains(&expected),
            "xtask/registry/pom.xml should say {expected}"
        );
    }
}
