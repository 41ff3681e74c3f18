//! Interactive queries: a click count served over HTTP straight from the
//! application's state store, `GET /count/{user}`, with no database beside
//! the stream.
//!
//! Each instance runs the counting topology and an HTTP server (axum) on
//! one tokio runtime, through the async face of the application,
//! `AsyncKafkaStreams`: its start and close are awaited, RUNNING is awaited
//! on its state watch, and a request awaits the count from the local store
//! (`ReadOnlyKeyValueView::get_async`) when this instance's task holds the
//! user's partition, and otherwise forwards it to the instance that does,
//! found with `query_metadata_for_key` in the endpoints the streams group
//! (KIP-1071) hands every member. Nothing blocks the runtime's workers: no
//! `spawn_blocking`.
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
use kstreams::runtime::kafka::AsyncKafkaStreams;
use kstreams_examples::{create_internal_topics, BoxError, Cluster, StateDir};

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
    app: AsyncKafkaStreams,
    counts: ReadOnlyKeyValueView<String, i64>,
    me: HostInfo,
    streams_protocol: bool,
}

/// How long a request waits for the stream threads' answer: they answer
/// between two steps of their loop, so only a thread stuck in a long step
/// (a slow commit) makes a request wait this long.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

impl Served {
    fn route(&self, user: &str) -> Result<Route, QueryError> {
        // The endpoints the group sent last: no waiting.
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

    /// The count from this instance's stores, awaited: the stream threads
    /// answer while the server's workers serve other requests.
    async fn read_local(
        &self,
        user: &str,
        partition: Option<i32>,
    ) -> Result<Option<i64>, QueryError> {
        let user = user.to_string();
        let read = async {
            match partition {
                // The view over one partition reads one task's store.
                Some(p) => {
                    self.app
                        .store(
                            StoreQueryParameters::from_name_and_type(
                                STORE,
                                QueryableStoreTypes::key_value_store::<String, i64>(),
                            )
                            .with_partition(p),
                        )?
                        .get_async(&user)
                        .await
                }
                None => self.counts.get_async(&user).await,
            }
        };
        tokio::time::timeout(READ_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| {
                Err(QueryError::NotAvailable {
                    store: STORE.to_string(),
                    reason: format!("the stream threads did not answer within {READ_TIMEOUT:?}"),
                })
            })
    }
}

type HttpAnswer = (axum::http::StatusCode, String);

async fn count(
    axum::extract::State((served, client)): axum::extract::State<(Arc<Served>, reqwest::Client)>,
    axum::extract::Path(user): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
) -> HttpAnswer {
    use axum::http::StatusCode;
    let forwarded = headers.contains_key(FORWARDED);
    let partition = match served.route(&user) {
        Ok(Route::Local(p)) => Some(p),
        Ok(Route::AnyLocal) => None,
        Ok(Route::Forward(host)) if !forwarded => {
            let url = format!("http://{}:{}/count/{user}", host.host, host.port);
            return match client.get(&url).header(FORWARDED, "1").send().await {
                Ok(response) => {
                    let status = StatusCode::from_u16(response.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    (status, response.text().await.unwrap_or_default())
                }
                Err(e) => (
                    StatusCode::BAD_GATEWAY,
                    format!("forwarding to {host}: {e}"),
                ),
            };
        }
        Ok(Route::Forward(host)) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("forwarded here, but the group says {host}"),
            )
        }
        // Rebalancing, restoring, not started: try again shortly.
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    match served.read_local(&user, partition).await {
        Ok(Some(count)) => {
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
        Ok(None) => (StatusCode::NOT_FOUND, format!("no clicks of {user}")),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// The HTTP server of one instance: a task of the service's runtime.
struct CountServer {
    shutdown: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl CountServer {
    fn start(served: Arc<Served>, listener: TcpListener) -> Result<Self, BoxError> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let client = reqwest::Client::builder().timeout(READ_TIMEOUT).build()?;
        let routes = axum::Router::new()
            .route("/count/{user}", axum::routing::get(count))
            .with_state((served, client));
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, routes)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Self { shutdown, serving })
    }

    /// Stops listening and lets the requests in flight finish.
    async fn stop(self) {
        let _ = self.shutdown.send(());
        let _ = self.serving.await;
    }
}

/// An instance: the application (shared with its server) and the server.
struct Instance {
    served: Arc<Served>,
    server: CountServer,
    address: SocketAddr,
    _dir: StateDir,
}

impl Instance {
    async fn start(
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
        let app = AsyncKafkaStreams::new(KafkaStreams::new(topology, config));
        // The broker round trips of a start run on a thread of kstreams'.
        app.start().await?;
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
            server,
            address,
            _dir: dir,
        })
    }

    /// Waits for RUNNING, or fails if the instance failed first.
    async fn running(&self, timeout: Duration) -> Result<(), BoxError> {
        let app = &self.served.app;
        let mut state = app.state_changes();
        let reached = tokio::time::timeout(
            timeout,
            state.wait_for(|s| matches!(s, State::Running | State::PendingError | State::Error)),
        )
        .await;
        match reached {
            Ok(Ok(s)) if *s == State::Running => Ok(()),
            Ok(_) => Err(format!("the application failed: {:?}", app.errors()).into()),
            Err(_) => Err(format!("not running after {timeout:?}: {:?}", app.state()).into()),
        }
    }

    async fn close(self) {
        self.server.stop().await;
        // Every stream thread commits and stops, on a thread of kstreams'.
        if !self.served.app.close(Duration::from_secs(30)).await {
            log::warn!("the application did not stop within 30 s");
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
    // The service's runtime: the instances' HTTP servers, their starts,
    // queries and closes, all awaited on it.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_io()
        .enable_time()
        .build()?;
    let instances = runtime.block_on(async {
        let count = if streams_protocol { 2 } else { 1 };
        let mut instances = Vec::new();
        for _ in 0..count {
            instances.push(Instance::start(&cluster, &clicks, &app_id, streams_protocol).await?);
        }
        for instance in &instances {
            instance.running(Duration::from_secs(90)).await?;
        }
        Ok::<_, BoxError>(instances)
    })?;
    // The clients (the producer, the HTTP requests) are this thread's: they
    // block, as any other process asking the service would.
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
    runtime.block_on(async {
        for instance in instances {
            instance.close().await;
        }
    });
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
