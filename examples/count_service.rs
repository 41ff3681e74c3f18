//! Interactive queries: a click count served over HTTP straight from the
//! application's state store, `GET /count/{user}`, with no database beside
//! the stream.
//!
//! Each instance runs the counting topology and an HTTP server (axum). A
//! request reads the count from the local store (`KafkaStreams::store`)
//! when this instance's task holds the user's partition, and otherwise
//! forwards it to the instance that does, found with
//! `KafkaStreams::query_metadata_for_key` in the endpoints the streams
//! group (KIP-1071) hands every member.
//!
//! ```text
//! cargo run -p kstreams-examples --example count_service
//! eval "$(cargo xtask kafka start)"; cargo run -p kstreams-examples --example count_service
//! ```
//!
//! On the in-process cluster one instance holds every partition (the
//! classic protocol has no endpoints to forward by); on a real broker
//! (Kafka 4.2+, `KSTREAMS_BOOTSTRAP`) two instances split the partitions
//! under `group.protocol=streams` and every user is asked of the first
//! one, which answers half and forwards the rest.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::types::RDKafkaErrorCode;
use kstreams::embedded::rdkafka::ClientConfig;
use kstreams::prelude::*;
use kstreams_examples::{create_internal_topics, wait_until_running, BoxError, Cluster, StateDir};

const CLICKS: &str = "clicks";
const APP: &str = "count-service";
const STORE: &str = "clicks-per-user";
const PARTITIONS: i32 = 4;
const USERS: usize = 24;
const CLICKS_SENT: usize = 1_200;
/// Set on a forwarded request: its receiver answers from its own store or
/// not at all, so two instances with different views of the group never
/// send a request back and forth.
const FORWARDED: &str = "x-kstreams-forwarded";

fn topology(clicks: &str) -> Result<Topology, BoxError> {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(clicks)
        .group_by_key()
        .count_with(None, Materialized::as_(STORE));
    Ok(builder.build()?)
}

/// What one instance answers for a user, as JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct CountAnswer {
    user: String,
    count: i64,
    /// The instance whose store answered.
    served_by: String,
}

/// Where a request is answered.
enum Route {
    Local(i32),
    AnyLocal,
    Forward(HostInfo),
}

/// One instance: the application and what its HTTP handler reads.
struct Served {
    app: KafkaStreams,
    counts: ReadOnlyKeyValueView<String, i64>,
    me: HostInfo,
    streams_protocol: bool,
}

impl Served {
    fn route(&self, user: &str) -> Result<Route, QueryError> {
        match self
            .app
            .query_metadata_for_key(STORE, &user.to_string(), &StringSerde)
        {
            Ok(found) if found.active_host == self.me => Ok(Route::Local(found.partition)),
            Ok(found) => Ok(Route::Forward(found.active_host)),
            // One instance on a protocol without endpoints: every
            // partition is here.
            Err(QueryError::MetadataUnavailable(_)) if !self.streams_protocol => {
                Ok(Route::AnyLocal)
            }
            Err(e) => Err(e),
        }
    }

    fn read_local(&self, user: &str, partition: Option<i32>) -> Result<Option<i64>, QueryError> {
        let user = user.to_string();
        match partition {
            // The view over one partition reads one task's store.
            Some(p) => self
                .app
                .store(
                    StoreQueryParameters::from_name_and_type(
                        STORE,
                        QueryableStoreTypes::key_value_store::<String, i64>(),
                    )
                    .with_partition(p),
                )?
                .get(&user),
            None => self.counts.get(&user),
        }
    }
}

/// The HTTP server of one instance.
struct CountServer {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

type HttpAnswer = (axum::http::StatusCode, String);

async fn count(
    axum::extract::State((served, client)): axum::extract::State<(Arc<Served>, reqwest::Client)>,
    axum::extract::Path(user): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
) -> HttpAnswer {
    use axum::http::StatusCode;
    let forwarded = headers.contains_key(FORWARDED);
    let reading = served.clone();
    let who = user.clone();
    // Store reads wait on the stream threads: off the async workers.
    let local = tokio::task::spawn_blocking(move || {
        let route = reading.route(&who)?;
        let partition = match route {
            Route::Local(p) => Some(p),
            Route::AnyLocal => None,
            Route::Forward(host) if !forwarded => return Ok(Err(host)),
            Route::Forward(host) => {
                return Err(QueryError::NotAvailable {
                    store: STORE.to_string(),
                    reason: format!("forwarded here, but the group says {host}"),
                })
            }
        };
        reading.read_local(&who, partition).map(Ok)
    })
    .await;
    let answer = |count: Option<i64>| match count {
        Some(count) => {
            let body = CountAnswer {
                user: user.clone(),
                count,
                served_by: served.me.to_string(),
            };
            (
                StatusCode::OK,
                serde_json::to_string(&body).unwrap_or_default(),
            )
        }
        None => (StatusCode::NOT_FOUND, format!("no clicks of {user}")),
    };
    match local {
        Ok(Ok(Ok(count))) => answer(count),
        Ok(Ok(Err(host))) => {
            let url = format!("http://{}:{}/count/{user}", host.host, host.port);
            match client.get(&url).header(FORWARDED, "1").send().await {
                Ok(response) => {
                    let status = StatusCode::from_u16(response.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    (status, response.text().await.unwrap_or_default())
                }
                Err(e) => (
                    StatusCode::BAD_GATEWAY,
                    format!("forwarding to {host}: {e}"),
                ),
            }
        }
        // Rebalancing, restoring, not started: try again shortly.
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

impl CountServer {
    fn start(served: Arc<Served>, listener: TcpListener) -> Result<Self, BoxError> {
        listener.set_nonblocking(true)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_io()
            .enable_time()
            .build()?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?;
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let routes = axum::Router::new()
                    .route("/count/{user}", axum::routing::get(count))
                    .with_state((served, client));
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let _ = axum::serve(listener, routes)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Ok(Self {
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }
}

impl Drop for CountServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An instance: the application (shared with its server) and the server.
struct Instance {
    served: Arc<Served>,
    server: Option<CountServer>,
    address: SocketAddr,
    _dir: StateDir,
}

impl Instance {
    fn start(
        cluster: &Cluster,
        clicks: &str,
        app_id: &str,
        streams_protocol: bool,
    ) -> Result<Self, BoxError> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        let dir = StateDir::new(APP);
        let mut config = StreamsConfig::new(app_id, cluster.bootstrap_servers())
            .commit_interval(Duration::from_millis(200))
            .state_dir(dir.path());
        if streams_protocol {
            config.set("group.protocol", "streams")?;
            config.set("application.server", &address.to_string())?;
        }
        let topology = topology(clicks)?;
        if let Cluster::Embedded(kafka) = cluster {
            create_internal_topics(kafka, &topology, app_id, PARTITIONS)?;
        }
        let mut app = KafkaStreams::new(topology, config);
        app.start()?;
        let counts = app.store(StoreQueryParameters::from_name_and_type(
            STORE,
            QueryableStoreTypes::key_value_store::<String, i64>(),
        ))?;
        let served = Arc::new(Served {
            app,
            counts,
            me: HostInfo {
                host: address.ip().to_string(),
                port: address.port(),
            },
            streams_protocol,
        });
        let server = CountServer::start(served.clone(), listener)?;
        Ok(Self {
            served,
            server: Some(server),
            address,
            _dir: dir,
        })
    }

    fn close(mut self) {
        drop(self.server.take());
        match Arc::try_unwrap(self.served) {
            Ok(mut served) => {
                served.app.close(Duration::from_secs(30));
            }
            Err(_) => log::warn!("the server still holds the application"),
        }
    }
}

/// What a run found.
struct Report {
    instances: usize,
    /// Each user's answer, asked of the first instance.
    answers: BTreeMap<String, CountAnswer>,
    expected: BTreeMap<String, i64>,
}

impl Report {
    fn forwarded(&self, first: &str) -> usize {
        self.answers
            .values()
            .filter(|a| a.served_by != first)
            .count()
    }
}

fn ask(address: SocketAddr, user: &str) -> Option<CountAnswer> {
    let mut response = ureq::get(&format!("http://{address}/count/{user}"))
        .call()
        .ok()?;
    serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()
}

fn run(cluster: Cluster) -> Result<(Report, String), BoxError> {
    let streams_protocol = matches!(cluster, Cluster::Broker(_));
    let clicks = cluster.name(CLICKS);
    cluster.create_topic(&clicks, PARTITIONS)?;
    let app_id = cluster.name(APP);
    let mut instances = vec![Instance::start(
        &cluster,
        &clicks,
        &app_id,
        streams_protocol,
    )?];
    if streams_protocol {
        instances.push(Instance::start(
            &cluster,
            &clicks,
            &app_id,
            streams_protocol,
        )?);
    }
    for instance in &instances {
        wait_until_running(&instance.served.app, Duration::from_secs(90))?;
    }
    // Partitioned as Kafka's producers do by default (murmur2 of the key),
    // which `query_metadata_for_key` assumes; input partitioned otherwise
    // needs `query_metadata_for_key_with_partitioner`.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("partitioner", "murmur2_random")
        .create()?;
    let mut expected = BTreeMap::new();
    for i in 0..CLICKS_SENT {
        // User u{n} clicks n + 1 times per round of the users, so every
        // count is different.
        let user = format!("u{}", i % USERS);
        for _ in 0..=i % USERS {
            let mut record = BaseRecord::to(&clicks).key(&user).payload("/home");
            while let Err((e, back)) = producer.send(record) {
                if e.rdkafka_error_code() != Some(RDKafkaErrorCode::QueueFull) {
                    return Err(e.into());
                }
                producer.poll(Duration::from_millis(10));
                record = back;
            }
            *expected.entry(user.clone()).or_insert(0i64) += 1;
        }
    }
    producer.flush(Duration::from_secs(30))?;

    // Every user asked of the first instance, until the answers are the
    // counts of everything sent.
    let first = instances[0].address;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut answers = BTreeMap::new();
    loop {
        for user in expected.keys() {
            if let Some(answer) = ask(first, user) {
                answers.insert(user.clone(), answer);
            }
        }
        let counted: BTreeMap<String, i64> =
            answers.iter().map(|(u, a)| (u.clone(), a.count)).collect();
        if counted == expected || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let report = Report {
        instances: instances.len(),
        answers,
        expected,
    };
    let first = instances[0].served.me.to_string();
    for instance in instances {
        instance.close();
    }
    Ok((report, first))
}

fn main() -> Result<(), BoxError> {
    let cluster = Cluster::start(true)?;
    let (report, first) = run(cluster)?;
    for (user, answer) in &report.answers {
        println!(
            "GET /count/{user} -> {} (served by {})",
            answer.count, answer.served_by
        );
    }
    let exact = report
        .answers
        .iter()
        .all(|(u, a)| report.expected.get(u) == Some(&a.count));
    println!(
        "{} instance(s); {} of {} users answered, counts exact: {}; {} answered by forwarding \
         from {first}",
        report.instances,
        report.answers.len(),
        report.expected.len(),
        if exact && report.answers.len() == report.expected.len() {
            "yes"
        } else {
            "no"
        },
        report.forwarded(&first),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every user's count comes back exact through the first instance; on
    /// a real broker some of them from the second instance's store.
    #[test]
    fn every_count_is_served_exactly_and_other_instances_keys_are_forwarded() {
        let _ = env_logger::builder().is_test(true).try_init();
        let cluster = Cluster::start(true).unwrap();
        let two = matches!(cluster, Cluster::Broker(_));
        let (report, first) = run(cluster).unwrap();
        let counted: BTreeMap<String, i64> = report
            .answers
            .iter()
            .map(|(u, a)| (u.clone(), a.count))
            .collect();
        assert_eq!(counted, report.expected);
        if two {
            let forwarded = report.forwarded(&first);
            assert!(
                forwarded > 0 && forwarded < USERS,
                "{forwarded} of {USERS} forwarded"
            );
        } else {
            assert_eq!(report.forwarded(&first), 0);
        }
    }
}
