//! The endpoints of a running application on librdkafka's in-process mock
//! cluster: what a Prometheus scrape, a Kubernetes probe and an operator's
//! browser read before, while and after it runs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_dsl::{Materialized, NodeDescriptionKind, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::EmbeddedKafka;
use kstreams_http::HttpServer;
use kstreams_metrics::MetricsRegistry;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};

const INPUT: &str = "clicks";
const OUTPUT: &str = "click-counts";
/// How old the input records' timestamps are when produced.
const AGE_MS: i64 = 2_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A response's status code, content type and body.
struct Response {
    status: u16,
    content_type: String,
    body: String,
}

fn get(address: SocketAddr, path: &str) -> Response {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    Response {
        status,
        content_type,
        body: body.to_string(),
    }
}

fn json(response: &Response) -> serde_json::Value {
    serde_json::from_str(&response.body).unwrap()
}

/// Sum of every sample of `name` (exactly that family, any labels) whose
/// label set contains each of `labels`, in Prometheus text.
fn sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (family, label_set) = series.split_once('{').unwrap_or((series, ""));
            (family == name && labels.iter().all(|l| label_set.contains(l)))
                .then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

fn produce(bootstrap: &str, from: usize, to: usize) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let timestamp = now_ms() - AGE_MS;
    for i in from..to {
        let key = format!("page{}", i % 10);
        producer
            .send(
                BaseRecord::to(INPUT)
                    .key(&key)
                    .payload("x")
                    .timestamp(timestamp),
            )
            .map_err(|(e, _)| e)
            .unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn count_app(kafka: &EmbeddedKafka, app_id: &str) -> KafkaStreams {
    // The mock cluster takes no CreateTopics with configs: the changelog
    // is made here.
    kafka
        .create_topic(&format!("{app_id}-counts-changelog"), 3, 1)
        .unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(OUTPUT, Produced::with(StringSerde, Nullable(I64Serde)));
    let state_dir = std::env::temp_dir().join(format!("kstreams-http-{app_id}-{}", now_ms()));
    let config = StreamsConfig::new(app_id, kafka.bootstrap_servers())
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir);
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// Asks `path` until `condition` holds, returning that answer.
fn wait_for(
    address: SocketAddr,
    path: &str,
    what: &str,
    condition: impl Fn(&Response) -> bool,
) -> Response {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = get(address, path);
        if condition(&response) {
            return response;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; {path} answered {}:\n{}",
            response.status,
            response.body
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_application_is_scraped_probed_and_drawn_over_http() {
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 3, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    let mut app = count_app(&kafka, "http-count");
    let server = HttpServer::start(&app, "127.0.0.1:0").unwrap();
    let address = server.local_addr();
    assert!(address.ip().is_loopback());

    // Before start: alive, not ready, and why.
    assert_eq!(get(address, "/health/live").status, 200);
    let not_started = get(address, "/health/ready");
    assert_eq!(not_started.status, 503, "{}", not_started.body);
    assert_eq!(not_started.content_type, "application/json");
    let reason = json(&not_started);
    assert_eq!(reason["ready"], false);
    assert_eq!(reason["state"], "CREATED");
    assert!(
        reason["reason"].as_str().unwrap().contains("Created"),
        "{reason}"
    );
    assert!(get(address, "/metrics")
        .body
        .contains(r#"kstreams_client_state{state="CREATED"} 1"#));

    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, 0, 100);
    app.start().unwrap();
    let ready = wait_for(address, "/health/ready", "readiness", |r| r.status == 200);
    assert_eq!(json(&ready)["state"], "RUNNING");
    let running = get(address, "/metrics").body;
    assert!(
        running.contains(r#"kstreams_client_state{state="RUNNING"} 1"#)
            && running.contains(r#"kstreams_client_state{state="CREATED"} 0"#)
            && running.contains("kstreams_client_alive_stream_threads 1"),
        "{running}"
    );

    // Records flow: the consumed count rises as they come, the lag falls to
    // 0, the end-to-end latency is recorded and above the records' age.
    let consumed = |text: &str| {
        sum(
            text,
            "kstreams_consumer_records_consumed_total",
            &[r#"topic="clicks""#],
        )
    };
    let first = wait_for(address, "/metrics", "the first 100 records", |r| {
        consumed(&r.body) == 100.0
    });
    assert!(
        first.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        first.content_type
    );
    produce(&bootstrap, 100, 300);
    let metrics = wait_for(address, "/metrics", "300 records and lag 0", |r| {
        consumed(&r.body) == 300.0
            && sum(&r.body, "kstreams_task_process_total", &[]) == 300.0
            && r.body
                .contains(r#"kstreams_consumer_records_lag{partition="2",topic="clicks"}"#)
            && sum(
                &r.body,
                "kstreams_consumer_records_lag",
                &[r#"topic="clicks""#],
            ) == 0.0
            // Even lag: no partition behind the others.
            && r.body
                .contains(r#"kstreams_consumer_records_lag_skew{topic="clicks"} 0"#)
    })
    .body;
    let source = r#"node="KSTREAM-SOURCE-0000000000""#;
    assert_eq!(
        sum(
            &metrics,
            "kstreams_record_e2e_latency_seconds_count",
            &[source]
        ),
        300.0
    );
    let e2e_sum = sum(
        &metrics,
        "kstreams_record_e2e_latency_seconds_sum",
        &[source],
    );
    assert!(
        e2e_sum >= 300.0 * AGE_MS as f64 / 1000.0,
        "e2e latency sum {e2e_sum}"
    );

    // /state: one thread, a task per input partition with its partition,
    // lag and store.
    let state = json(&wait_for(address, "/state", "lags known", |r| {
        let state = json(r);
        state["threads"][0]["active_tasks"]
            .as_array()
            .is_some_and(|tasks| tasks.len() == 3 && tasks.iter().all(|t| t["lag"] == 0))
    }));
    assert_eq!(state["state"], "RUNNING");
    assert_eq!(state["ready"], true);
    assert_eq!(state["threads_alive"], 1);
    let thread = &state["threads"][0];
    assert!(thread["thread_name"]
        .as_str()
        .unwrap()
        .starts_with("http-count-"));
    let tasks = thread["active_tasks"].as_array().unwrap();
    for (partition, task) in tasks.iter().enumerate() {
        assert_eq!(task["task_id"], format!("0_{partition}"));
        assert_eq!(task["partitions"][0]["topic"], INPUT);
        assert_eq!(task["partitions"][0]["partition"], partition);
        assert_eq!(task["stores"], serde_json::json!(["counts"]));
        assert_eq!(task["bootstrapping"], false);
    }

    // The topology: text as describe() prints it, DOT with clusters, and an
    // SVG naming every node, store and topic.
    let description = app.describe();
    let text = get(address, "/topology");
    assert_eq!(text.status, 200);
    assert_eq!(text.body, description.to_string());
    let dot = get(address, "/topology.dot").body;
    assert!(dot.contains("subgraph cluster_0 {"), "{dot}");
    let svg = get(address, "/topology.svg");
    assert_eq!(svg.content_type, "image/svg+xml");
    let document = roxmltree::Document::parse(&svg.body).unwrap();
    assert_eq!(document.root_element().tag_name().name(), "svg");
    let drawn: Vec<&str> = document
        .descendants()
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    let mut expected = vec!["counts".to_string(), INPUT.to_string(), OUTPUT.to_string()];
    for subtopology in &description.subtopologies {
        for node in &subtopology.nodes {
            expected.push(node.name.clone());
            if let NodeDescriptionKind::Processor { stores } = &node.kind {
                expected.extend(stores.iter().cloned());
            }
        }
    }
    for name in &expected {
        assert!(
            drawn.contains(&name.as_str()),
            "{name} not drawn in {drawn:?}"
        );
    }

    // Closed: still alive (it stopped cleanly), no longer ready.
    assert!(app.close(Duration::from_secs(30)));
    let closed = get(address, "/health/ready");
    assert_eq!(closed.status, 503);
    assert_eq!(json(&closed)["state"], "NOT_RUNNING");
    assert_eq!(get(address, "/health/live").status, 200);

    server.stop();
    assert!(
        TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err(),
        "still listening after stop"
    );
}

#[test]
fn not_ready_while_the_stores_restore() {
    const CHANGELOG_RECORDS: usize = 90_000;
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 3, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    let mut app = count_app(&kafka, "http-restore");
    // A changelog as a previous instance left it: this one restores it all.
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .create()
        .unwrap();
    for i in 0..CHANGELOG_RECORDS {
        let key = format!("page{i}");
        let count = (i as i64).to_be_bytes();
        let record = BaseRecord::to("http-restore-counts-changelog")
            .key(&key)
            .payload(&count[..])
            .partition((i % 3) as i32);
        let mut record = record;
        while let Err((e, back)) = producer.send(record) {
            assert!(
                matches!(
                    e.rdkafka_error_code(),
                    Some(kstreams_embedded::rdkafka::types::RDKafkaErrorCode::QueueFull)
                ),
                "{e}"
            );
            producer.poll(Duration::from_millis(10));
            record = back;
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).unwrap();

    let server = HttpServer::start(&app, "127.0.0.1:0").unwrap();
    let address = server.local_addr();
    let probe = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut answers = Vec::new();
        loop {
            let answer = get(address, "/health/ready");
            let ready = answer.status == 200;
            answers.push((answer.status, answer.body));
            if ready || Instant::now() > deadline {
                return answers;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    app.start().unwrap();
    let answers = probe.join().unwrap();
    let (last, before) = answers.split_last().unwrap();
    assert_eq!(last.0, 200, "never ready: {:?}", before.last());
    assert!(before.iter().all(|(status, _)| *status == 503));
    assert!(
        before
            .iter()
            .any(|(_, body)| body.contains("restoring their stores")),
        "no answer saw the restore: {:?}",
        before.iter().map(|(_, b)| b).collect::<Vec<_>>()
    );
    let state = json(&get(address, "/state"));
    assert_eq!(state["threads"][0]["restoring"], false);
    assert_eq!(
        state["threads"][0]["active_tasks"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(app.close(Duration::from_secs(30)));
}

#[test]
fn global_tables_alone_are_ready_without_stream_threads() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic("customers", 2, 1).unwrap();
    let builder = StreamsBuilder::new();
    let _customers = builder.global_table::<String, String>("customers");
    let state_dir = std::env::temp_dir().join(format!("kstreams-http-global-{}", now_ms()));
    let config = StreamsConfig::new("http-global", kafka.bootstrap_servers()).state_dir(state_dir);
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let server = HttpServer::start(&app, "127.0.0.1:0").unwrap();
    app.start().unwrap();
    let ready = wait_for(server.local_addr(), "/health/ready", "readiness", |r| {
        r.status == 200
    });
    assert_eq!(json(&ready)["state"], "RUNNING");
    assert!(app.close(Duration::from_secs(30)));
}

#[test]
fn the_configuration_decides_whether_and_where_it_listens() {
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(INPUT).to(OUTPUT);
    let unset = KafkaStreams::new(
        builder.build().unwrap(),
        StreamsConfig::new("http-off", "localhost:1"),
    );
    assert!(HttpServer::start_configured(&unset).unwrap().is_none());

    // A free port, then configured by its Kafka-style key.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = StreamsConfig::from_properties([
        ("application.id", "http-on".to_string()),
        ("bootstrap.servers", "localhost:1".to_string()),
        ("kstreams.http.address", format!("127.0.0.1:{port}")),
    ])
    .unwrap();
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(INPUT).to(OUTPUT);
    let app = KafkaStreams::new(builder.build().unwrap(), config);
    let server = HttpServer::start_configured(&app).unwrap().unwrap();
    assert_eq!(server.local_addr().port(), port);
    assert_eq!(get(server.local_addr(), "/health/ready").status, 503);
}

#[test]
fn metrics_alone_are_served_without_an_application() {
    let registry = MetricsRegistry::new();
    let server = HttpServer::serve_metrics(registry.clone(), "127.0.0.1:0").unwrap();
    // Recorded after start: each scrape reads the live values.
    registry
        .counter(
            &kstreams_metrics::names::TASK_DROPPED_RECORDS_TOTAL,
            &["t1", "0_3"],
        )
        .unwrap()
        .add(7);
    let metrics = get(server.local_addr(), "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .body
            .contains(r#"kstreams_task_dropped_records_total{task_id="0_3",thread_id="t1"} 7"#),
        "{}",
        metrics.body
    );
    assert_eq!(get(server.local_addr(), "/state").status, 404);
    assert_eq!(get(server.local_addr(), "/health/ready").status, 404);

    // A taken port fails the caller, naming the address.
    let taken = server.local_addr();
    let err = HttpServer::serve_metrics(MetricsRegistry::new(), taken).unwrap_err();
    assert!(matches!(err, kstreams_http::Error::Bind { .. }), "{err}");
    assert!(err.to_string().contains(&taken.to_string()), "{err}");
}
