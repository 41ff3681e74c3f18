//! `cargo xtask kafka start|stop|status`: a real Apache Kafka cluster (KRaft,
//! combined broker+controller nodes on 127.0.0.1) for tests and demos.
//!
//! Layout under `<repo>/.kafka/` (gitignored), made fresh by every start:
//! `bootstrap` (the address list), and per node `node-<id>/` with
//! `server.properties`, `data/`, `broker.log` and `pid`. The jars come from
//! Maven (xtask/kafka/pom.xml); their classpath is cached under
//! `~/.cache/kstreams/kafka-<version>/`.

mod config;
mod probe;
mod tls;

use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use self::config::Node;
use crate::cli::Args;
use crate::maven;
use crate::paths;
use crate::process::{self, secs};

/// The variable through which tests find a real broker.
pub(crate) const BOOTSTRAP_ENV: &str = "KSTREAMS_BOOTSTRAP";
/// The same cluster's SASL_SSL listeners (SCRAM-SHA-256 and SCRAM-SHA-512
/// over TLS).
pub(crate) const SASL_SSL_BOOTSTRAP_ENV: &str = "KSTREAMS_SASL_SSL_BOOTSTRAP";
/// The CA certificate (PEM) that signed the brokers' certificates.
pub(crate) const SASL_SSL_CA_ENV: &str = "KSTREAMS_SASL_SSL_CA";
/// The SCRAM user and its password.
pub(crate) const SASL_USERNAME_ENV: &str = "KSTREAMS_SASL_USERNAME";
pub(crate) const SASL_PASSWORD_ENV: &str = "KSTREAMS_SASL_PASSWORD";
/// The classpath of the cluster's Kafka jars, for Kafka's own clients and
/// tools (`kafka-streams-groups.sh` is
/// `org.apache.kafka.tools.streams.StreamsGroupCommand` on it).
pub(crate) const KAFKA_CLASSPATH_ENV: &str = "KSTREAMS_KAFKA_CLASSPATH";
/// The same cluster's OAUTHBEARER listeners (SASL_SSL, same CA; the
/// broker's unsecured-JWT validator) and the scope they require.
pub(crate) const OAUTH_BOOTSTRAP_ENV: &str = "KSTREAMS_OAUTH_BOOTSTRAP";
pub(crate) const OAUTH_SCOPE_ENV: &str = "KSTREAMS_OAUTH_SCOPE";
/// The same cluster's mutual-TLS listeners (security protocol SSL, same CA,
/// a client certificate signed by it required), and the client's
/// certificate and key: as PEM files, and as a PKCS12 store with its
/// password.
pub(crate) const MTLS_BOOTSTRAP_ENV: &str = "KSTREAMS_MTLS_BOOTSTRAP";
pub(crate) const MTLS_CA_ENV: &str = "KSTREAMS_MTLS_CA";
pub(crate) const MTLS_CERTIFICATE_ENV: &str = "KSTREAMS_MTLS_CERTIFICATE";
pub(crate) const MTLS_KEY_ENV: &str = "KSTREAMS_MTLS_KEY";
pub(crate) const MTLS_KEYSTORE_ENV: &str = "KSTREAMS_MTLS_KEYSTORE";
pub(crate) const MTLS_KEYSTORE_PASSWORD_ENV: &str = "KSTREAMS_MTLS_KEYSTORE_PASSWORD";

/// How long a fresh cluster may take to answer metadata requests. A cold JVM
/// on a busy 2-core machine needs ~10 s per node; three nodes start together.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long nodes get to shut down cleanly before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(20);
const JVM_OPTIONS: &[&str] = &[
    "-Xms256m",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Djava.awt.headless=true",
];

pub(crate) fn cli(mut args: Args) -> Result<ExitCode> {
    let action = args.next();
    match action.as_deref() {
        Some("start") => {
            let brokers = args.option::<usize>("brokers")?.unwrap_or(1);
            let port = args.option::<u16>("port")?;
            args.finish()?;
            let cluster = start(brokers, port, Lifetime::Detached)?;
            // Stdout carries only these lines, so `eval "$(cargo xtask kafka start)"` works.
            print_exports(&cluster.bootstrap);
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
        _ => bail!("usage: cargo xtask kafka start [--brokers N] [--port P] | stop | status"),
    }
}

/// Whether a cluster outlives the xtask process that started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// `kafka start`: runs until `kafka stop`.
    Detached,
    /// A [`Lease`]: stopped when the lease drops, and on Linux also when xtask
    /// dies without dropping it (killed, say), so CI never leaks a broker.
    ThisProcess,
}

/// `export` lines for the cluster's addresses (and its SASL_SSL listener's
/// keys and user, when it has one).
fn print_exports(bootstrap: &str) {
    println!("export {BOOTSTRAP_ENV}={bootstrap}");
    for (key, value) in sasl_ssl_env() {
        println!("export {key}={value}");
    }
}

/// The variables of the running cluster's SASL_SSL listener, if it has one,
/// and of its OAUTHBEARER and mutual-TLS listeners (also what `cargo xtask
/// chaos` hands its scenarios, whichever caller leased the cluster), and
/// where its jars' classpath is.
pub(crate) fn sasl_ssl_env() -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = classpath_file()
        .and_then(|file| Ok(fs::read_to_string(file)?))
        .ok()
        .map(|classpath| (KAFKA_CLASSPATH_ENV, classpath.trim().to_owned()))
        .into_iter()
        .collect();
    let Ok(bootstrap) = fs::read_to_string(sasl_ssl_file()) else {
        return env;
    };
    // The keys the running cluster was started with: never remade here.
    let keys = tls::cached();
    env.extend([
        (SASL_SSL_BOOTSTRAP_ENV, bootstrap.trim().to_owned()),
        (SASL_SSL_CA_ENV, keys.ca_pem.display().to_string()),
        (SASL_USERNAME_ENV, tls::USER.to_owned()),
        (SASL_PASSWORD_ENV, tls::PASSWORD.to_owned()),
    ]);
    if let Ok(oauth) = fs::read_to_string(oauth_file()) {
        env.push((OAUTH_BOOTSTRAP_ENV, oauth.trim().to_owned()));
        env.push((OAUTH_SCOPE_ENV, tls::OAUTH_SCOPE.to_owned()));
    }
    if let Ok(mtls) = fs::read_to_string(mtls_file()) {
        let path = |file: &Path| file.display().to_string();
        env.extend([
            (MTLS_BOOTSTRAP_ENV, mtls.trim().to_owned()),
            (MTLS_CA_ENV, path(&keys.ca_pem)),
            (MTLS_CERTIFICATE_ENV, path(&keys.client_certificate)),
            (MTLS_KEY_ENV, path(&keys.client_key)),
            (MTLS_KEYSTORE_ENV, path(&keys.client_keystore)),
            (
                MTLS_KEYSTORE_PASSWORD_ENV,
                tls::CLIENT_STORE_PASSWORD.to_owned(),
            ),
        ]);
    }
    env
}

/// A cluster this process started; its children are reaped by [`Lease`].
pub(crate) struct Started {
    pub bootstrap: String,
    children: Vec<Child>,
}

/// Starts a cluster of `brokers` nodes, or returns the one already running.
pub(crate) fn start(
    brokers: usize,
    first_port: Option<u16>,
    lifetime: Lifetime,
) -> Result<Started> {
    if !(1..=5).contains(&brokers) {
        bail!("--brokers must be between 1 and 5, got {brokers}");
    }
    match state() {
        State::Running { bootstrap, pids } if pids.len() == brokers => {
            eprintln!("kafka: already running at {bootstrap}");
            return Ok(Started {
                bootstrap,
                children: Vec::new(),
            });
        }
        State::Running { pids, .. } => bail!(
            "a cluster of {} node(s) is running; `cargo xtask kafka stop` it first",
            pids.len()
        ),
        State::Starting { pids } => bail!(
            "a cluster is still starting (pids {pids:?}); wait for it, or `cargo xtask kafka stop` it"
        ),
        State::Degraded { down } => bail!(
            "the cluster is partly down ({}); `cargo xtask kafka stop` it first",
            down.join(", ")
        ),
        State::Stopped => {}
    }
    maven::require_java_and_maven()?;
    let classpath = broker_classpath()?;
    let release = maven::release(&maven::kafka_version()?);
    // The plaintext listener is what tests need; a failure to make keys
    // leaves the TLS ones out, said here, rather than no broker at all.
    let keys = match tls::keys() {
        Ok(keys) => Some(keys),
        Err(error) => {
            eprintln!("kafka: no SASL_SSL, OAUTHBEARER or mutual-TLS listener: {error:#}");
            None
        }
    };
    let nodes = prepare(brokers, first_port, release, keys.as_ref())?;
    format_storage(&nodes, &classpath, keys.is_some())?;
    launch_and_wait(&nodes, &classpath, lifetime)
}

/// Stops the nodes that `start` recorded in pid files; returns how many ran.
pub(crate) fn stop() -> Result<usize> {
    let running: Vec<(Node, i32)> = node_dirs()
        .into_iter()
        .filter_map(|dir| live_pid(&dir).map(|pid| (node_at(dir), pid)))
        .collect();
    if running.is_empty() {
        eprintln!("kafka: not running");
        remove_run_files();
        return Ok(0);
    }
    let began = Instant::now();
    for (_, pid) in &running {
        process::signal(*pid, libc::SIGTERM);
    }
    let all_gone = || {
        running
            .iter()
            .all(|(node, _)| live_pid(&node.dir).is_none())
    };
    if !process::wait_until(STOP_GRACE, all_gone) {
        // A node left without a controller quorum can wait a long time for its
        // controlled shutdown; the data is throwaway, so do not wait for it.
        for (node, pid) in &running {
            if live_pid(&node.dir).is_some() {
                eprintln!("kafka: node-{} did not stop in time; killing it", node.id);
                process::signal(*pid, libc::SIGKILL);
            }
        }
        process::wait_until(Duration::from_secs(5), all_gone);
    }
    remove_run_files();
    eprintln!(
        "kafka: stopped {} node(s) in {}",
        running.len(),
        secs(began.elapsed())
    );
    Ok(running.len())
}

/// The address of the cluster `start` left running, if it is fully up.
pub(crate) fn running_bootstrap() -> Option<String> {
    match state() {
        State::Running { bootstrap, .. } => Some(bootstrap),
        _ => None,
    }
}

/// The broker a task should use: `KSTREAMS_BOOTSTRAP`, else the running xtask
/// cluster, else a single-node cluster started now and stopped on drop.
pub(crate) struct Lease {
    bootstrap: String,
    started: Option<Started>,
    sasl_ssl: Vec<(&'static str, String)>,
}

impl Lease {
    pub(crate) fn acquire() -> Result<Lease> {
        if let Some(bootstrap) = std::env::var(BOOTSTRAP_ENV).ok().filter(|b| !b.is_empty()) {
            eprintln!("kafka: using {BOOTSTRAP_ENV}={bootstrap}");
            return Ok(Lease {
                bootstrap,
                started: None,
                // The caller's own variables, if any, reach the tests as
                // they are.
                sasl_ssl: Vec::new(),
            });
        }
        if let Some(bootstrap) = running_bootstrap() {
            eprintln!("kafka: using the running cluster at {bootstrap}");
            return Ok(Lease {
                bootstrap,
                started: None,
                sasl_ssl: sasl_ssl_env(),
            });
        }
        let started = start(1, None, Lifetime::ThisProcess)?;
        Ok(Lease {
            bootstrap: started.bootstrap.clone(),
            started: Some(started),
            sasl_ssl: sasl_ssl_env(),
        })
    }

    /// A cluster of `brokers` nodes started now and stopped on drop, or the
    /// xtask cluster of that size already running (left running). Not
    /// `KSTREAMS_BOOTSTRAP`: the scenarios that need a size also restart its
    /// nodes, which only a cluster of xtask's can.
    pub(crate) fn cluster(brokers: usize) -> Result<Lease> {
        let started = start(brokers, None, Lifetime::ThisProcess)?;
        Ok(Lease {
            bootstrap: started.bootstrap.clone(),
            // Empty: the running cluster was found, not started here.
            started: (!started.children.is_empty()).then_some(started),
            sasl_ssl: sasl_ssl_env(),
        })
    }

    pub(crate) fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The variables that point tests at the SASL_SSL listener (none when
    /// the cluster has none).
    pub(crate) fn sasl_ssl_env(&self) -> &[(&'static str, String)] {
        &self.sasl_ssl
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut started) = self.started.take() else {
            return;
        };
        if let Err(error) = stop() {
            eprintln!("kafka: stopping the cluster failed: {error:#}");
        }
        for child in &mut started.children {
            // Reap, so no zombie outlives us; stop() already ended them.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn status() -> ExitCode {
    match state() {
        State::Running { bootstrap, pids } => {
            let first = bootstrap.split(',').next().unwrap_or_default();
            let answer = match probe::broker_count(first, Duration::from_secs(2)) {
                Ok(count) => format!("{count} broker(s) answer metadata requests"),
                Err(error) => format!("not answering at {first}: {error}"),
            };
            println!(
                "kafka: running, {} node(s) at {bootstrap} (pids {pids:?}); {answer}",
                pids.len()
            );
            print_exports(&bootstrap);
            ExitCode::SUCCESS
        }
        State::Starting { pids } => {
            println!("kafka: starting (pids {pids:?}), not answering yet");
            ExitCode::FAILURE
        }
        State::Degraded { down } => {
            println!("kafka: degraded, not running: {}", down.join(", "));
            ExitCode::FAILURE
        }
        State::Stopped => {
            println!("kafka: not running");
            ExitCode::FAILURE
        }
    }
}

enum State {
    Stopped,
    /// Every node runs but `start` has not yet seen them answer.
    Starting {
        pids: Vec<i32>,
    },
    Running {
        bootstrap: String,
        pids: Vec<i32>,
    },
    Degraded {
        down: Vec<String>,
    },
}

fn state() -> State {
    let dirs = node_dirs();
    let pids: Vec<Option<i32>> = dirs.iter().map(|dir| live_pid(dir)).collect();
    let bootstrap = fs::read_to_string(bootstrap_file()).ok();
    match (pids.iter().flatten().count(), bootstrap) {
        (0, _) => State::Stopped,
        (up, Some(bootstrap)) if up == dirs.len() => State::Running {
            bootstrap: bootstrap.trim().to_owned(),
            pids: pids.into_iter().flatten().collect(),
        },
        (up, None) if up == dirs.len() => State::Starting {
            pids: pids.into_iter().flatten().collect(),
        },
        _ => State::Degraded {
            down: dirs
                .iter()
                .zip(&pids)
                .filter(|(_, pid)| pid.is_none())
                .map(|(dir, _)| dir.display().to_string())
                .collect(),
        },
    }
}

fn bootstrap_file() -> PathBuf {
    paths::kafka_dir().join("bootstrap")
}

/// The SASL_SSL listeners' address list, written when the cluster has them.
fn sasl_ssl_file() -> PathBuf {
    paths::kafka_dir().join("sasl_ssl_bootstrap")
}

/// The OAUTHBEARER listeners' address list, written when the cluster has them.
fn oauth_file() -> PathBuf {
    paths::kafka_dir().join("oauth_bootstrap")
}

/// The mutual-TLS listeners' address list, written when the cluster has them.
fn mtls_file() -> PathBuf {
    paths::kafka_dir().join("mtls_bootstrap")
}

/// `.kafka/node-*` directories, in node order.
fn node_dirs() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(paths::kafka_dir()) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && node_id(p).is_some())
        .collect();
    dirs.sort_by_key(|p| node_id(p));
    dirs
}

fn node_id(dir: &Path) -> Option<u32> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("node-")?
        .parse()
        .ok()
}

/// A node as far as stop needs it: its directory and id.
fn node_at(dir: PathBuf) -> Node {
    Node {
        id: node_id(&dir).unwrap_or_default(),
        port: 0,
        controller_port: 0,
        sasl_ssl_port: None,
        oauth_port: None,
        mtls_port: None,
        dir,
    }
}

/// The pid in `dir/pid` if that process is alive and is this node's broker
/// (its command line names this node's config file).
fn live_pid(dir: &Path) -> Option<i32> {
    let node = node_at(dir.to_path_buf());
    let pid = fs::read_to_string(node.pid_file())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let marker = node.config_file().display().to_string();
    process::is_ours(pid, &marker).then_some(pid)
}

fn remove_run_files() {
    for dir in node_dirs() {
        let _ = fs::remove_file(node_at(dir).pid_file());
    }
    let _ = fs::remove_file(bootstrap_file());
    let _ = fs::remove_file(sasl_ssl_file());
    let _ = fs::remove_file(oauth_file());
    let _ = fs::remove_file(mtls_file());
}

/// Where the Kafka jars' classpath is cached.
fn classpath_file() -> Result<PathBuf> {
    let version = maven::kafka_version()?;
    Ok(paths::cache_dir()
        .join(format!("kafka-{version}"))
        .join("classpath.txt"))
}

fn broker_classpath() -> Result<String> {
    let began = Instant::now();
    let version = maven::kafka_version()?;
    let pom = paths::repo_root().join("xtask/kafka/pom.xml");
    let (classpath, resolved) = maven::classpath(&pom, &classpath_file()?)?;
    let how = if resolved {
        "resolved with Maven"
    } else {
        "cached"
    };
    eprintln!(
        "kafka: Apache Kafka {version} jars {how} ({})",
        secs(began.elapsed())
    );
    Ok(classpath)
}

/// Makes a fresh `.kafka/`, picks ports and writes each node's config.
fn prepare(
    brokers: usize,
    first_port: Option<u16>,
    release: Option<(u32, u32, u32)>,
    keys: Option<&tls::Keys>,
) -> Result<Vec<Node>> {
    let root = paths::kafka_dir();
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("cannot clear {}", root.display()))?;
    }
    let nodes = allocate_nodes(&root, brokers, first_port, keys.is_some())?;
    for node in &nodes {
        fs::create_dir_all(node.data_dir())
            .with_context(|| format!("cannot create {}", node.dir.display()))?;
        fs::write(
            node.config_file(),
            config::server_properties(node, &nodes, release, keys),
        )?;
    }
    Ok(nodes)
}

/// Node ids 1..=brokers with a client and a controller port each. Ports are
/// held open until all are chosen so that no two nodes get the same one; the
/// short window before the JVMs bind them is accepted.
fn allocate_nodes(
    root: &Path,
    brokers: usize,
    first_port: Option<u16>,
    sasl_ssl: bool,
) -> Result<Vec<Node>> {
    let mut held = Vec::new();
    let mut nodes = Vec::new();
    for id in 1..=brokers as u32 {
        let port = match first_port {
            Some(first) => {
                let port = first
                    .checked_add(id as u16 - 1)
                    .context("--port is too high")?;
                hold_port(&mut held, port)?
            }
            None => hold_port(&mut held, 0)?,
        };
        let controller_port = hold_port(&mut held, 0)?;
        let (sasl_ssl_port, oauth_port, mtls_port) = if sasl_ssl {
            (
                Some(hold_port(&mut held, 0)?),
                Some(hold_port(&mut held, 0)?),
                Some(hold_port(&mut held, 0)?),
            )
        } else {
            (None, None, None)
        };
        nodes.push(Node {
            id,
            port,
            controller_port,
            sasl_ssl_port,
            oauth_port,
            mtls_port,
            dir: root.join(format!("node-{id}")),
        });
    }
    Ok(nodes)
}

/// Binds 127.0.0.1:`port` (0 = any free port) and returns the bound port.
fn hold_port(held: &mut Vec<TcpListener>, port: u16) -> Result<u16> {
    let listener = TcpListener::bind(("127.0.0.1", port)).with_context(|| {
        format!("port {port} on 127.0.0.1 is taken; pick another with --port or stop what uses it")
    })?;
    let bound = listener.local_addr()?.port();
    held.push(listener);
    Ok(bound)
}

/// `kafka-storage format` on every node (in parallel: each is a JVM start),
/// with the SCRAM user when the nodes have a SASL_SSL listener.
fn format_storage(nodes: &[Node], classpath: &str, scram_user: bool) -> Result<()> {
    let began = Instant::now();
    let cluster_id = cluster_id();
    std::thread::scope(|scope| {
        let runs: Vec<_> = nodes
            .iter()
            .map(|node| {
                let cluster_id = &cluster_id;
                scope.spawn(move || {
                    let mut format = java(classpath);
                    format
                        .args(["kafka.tools.StorageTool", "format", "-t", cluster_id, "-c"])
                        .arg(node.config_file());
                    if scram_user {
                        // One credential per mechanism (--add-scram repeats).
                        for mechanism in tls::MECHANISMS {
                            format.arg("--add-scram").arg(format!(
                                "{mechanism}=[name={},password={}]",
                                tls::USER,
                                tls::PASSWORD
                            ));
                        }
                    }
                    process::run_captured(
                        &mut format,
                        &format!("formatting the storage of node-{}", node.id),
                    )
                })
            })
            .collect();
        runs.into_iter()
            .try_for_each(|run| run.join().expect("format thread panicked"))
    })?;
    eprintln!("kafka: storage formatted ({})", secs(began.elapsed()));
    Ok(())
}

/// Starts every node and waits until each lists all of them in its metadata.
fn launch_and_wait(nodes: &[Node], classpath: &str, lifetime: Lifetime) -> Result<Started> {
    let began = Instant::now();
    let mut children = Vec::new();
    for node in nodes {
        match launch(node, classpath, lifetime) {
            Ok(child) => children.push(child),
            Err(error) => {
                kill_all(&mut children);
                return Err(error);
            }
        }
    }
    if let Err(error) = wait_ready(nodes, &mut children) {
        kill_all(&mut children);
        remove_run_files();
        return Err(error);
    }
    let bootstrap = nodes
        .iter()
        .map(Node::address)
        .collect::<Vec<_>>()
        .join(",");
    fs::write(bootstrap_file(), &bootstrap)?;
    let sasl_ssl: Vec<String> = nodes.iter().filter_map(Node::sasl_ssl_address).collect();
    if !sasl_ssl.is_empty() {
        fs::write(sasl_ssl_file(), sasl_ssl.join(","))?;
        eprintln!(
            "kafka: SASL_SSL ({}) at {}",
            tls::MECHANISMS.join(", "),
            sasl_ssl.join(",")
        );
    }
    let oauth: Vec<String> = nodes.iter().filter_map(Node::oauth_address).collect();
    if !oauth.is_empty() {
        fs::write(oauth_file(), oauth.join(","))?;
        eprintln!(
            "kafka: OAUTHBEARER (SASL_SSL, unsecured JWT, scope {}) at {}",
            tls::OAUTH_SCOPE,
            oauth.join(",")
        );
    }
    let mtls: Vec<String> = nodes.iter().filter_map(Node::mtls_address).collect();
    if !mtls.is_empty() {
        fs::write(mtls_file(), mtls.join(","))?;
        eprintln!(
            "kafka: mutual TLS (SSL, client certificate of the test CA required) at {}",
            mtls.join(",")
        );
    }
    eprintln!(
        "kafka: {} node(s) up at {bootstrap} ({}); logs in {}",
        nodes.len(),
        secs(began.elapsed()),
        paths::kafka_dir().display()
    );
    Ok(Started {
        bootstrap,
        children,
    })
}

fn launch(node: &Node, classpath: &str, lifetime: Lifetime) -> Result<Child> {
    let log = File::create(node.log_file())?;
    let mut command = java(classpath);
    if lifetime == Lifetime::ThisProcess {
        die_with_parent(&mut command);
    }
    let child = command
        .args(JVM_OPTIONS)
        .arg("kafka.Kafka")
        .arg(node.config_file())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start node-{}", node.id))?;
    fs::write(node.pid_file(), child.id().to_string())?;
    Ok(child)
}

/// Has the kernel send SIGTERM to the child when this thread exits.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls prctl(2),
    // which is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Elsewhere a killed xtask leaves the cluster running; `kafka stop` ends it.
#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

fn java(classpath: &str) -> Command {
    let log_config = paths::repo_root().join("xtask/kafka/log4j2.properties");
    let mut command = Command::new("java");
    command
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            log_config.display()
        ))
        .arg("-cp")
        .arg(classpath);
    command
}

fn wait_ready(nodes: &[Node], children: &mut [Child]) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        for (node, child) in nodes.iter().zip(children.iter_mut()) {
            if let Some(status) = child.try_wait()? {
                bail!(not_up(node, &format!("exited ({status})")));
            }
        }
        let ready = nodes.iter().all(|node| {
            probe::broker_count(&node.address(), Duration::from_secs(2))
                .is_ok_and(|count| count == nodes.len())
        });
        if ready {
            return Ok(());
        }
        if Instant::now() > deadline {
            let reports: Vec<String> = nodes
                .iter()
                .map(|node| not_up(node, "did not come up"))
                .collect();
            bail!(
                "the cluster did not answer within {} s\n{}",
                READY_TIMEOUT.as_secs(),
                reports.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn not_up(node: &Node, why: &str) -> String {
    let log = node.log_file();
    format!(
        "kafka: node-{} {why}; last lines of {}:\n{}",
        node.id,
        log.display(),
        process::tail(&log, 40)
    )
}

fn kill_all(children: &mut [Child]) {
    for child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A random KRaft cluster id: 16 bytes, base64url without padding, never
/// starting with `-` (kafka-storage's argument parser would take such an id
/// for an option and fail, as Kafka's own `Uuid.randomUuid` avoids too).
fn cluster_id() -> String {
    loop {
        let id = random_base64url_id();
        if !id.starts_with('-') {
            return id;
        }
    }
}

fn random_base64url_id() -> String {
    // RandomState is seeded randomly per process: good enough for a test
    // cluster id, and it needs no extra dependency.
    let random = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(Instant::now().elapsed().as_nanos());
        hasher.finish().to_be_bytes()
    };
    let bytes: Vec<u8> = random().into_iter().chain(random()).collect();
    base64url(&bytes)
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_without_padding() {
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn cluster_ids_are_22_chars_and_differ() {
        let (a, b) = (cluster_id(), cluster_id());
        assert_eq!(a.len(), 22);
        assert_ne!(a, b);
    }

    #[test]
    fn cluster_ids_never_look_like_an_option() {
        // One id in 64 would start with '-' without the retry.
        assert!((0..2000).all(|_| !cluster_id().starts_with('-')));
    }

    #[test]
    fn taken_port_is_reported() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let error = hold_port(&mut Vec::new(), port).unwrap_err();
        assert!(error.to_string().contains("is taken"), "{error}");
    }
}
