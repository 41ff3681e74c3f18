//! The record spans of a topology with a repartition topic, exported by
//! `OtlpTracing` over OTLP/HTTP to a receiver in the test (an HTTP server
//! decoding each request with OTLP's own protobuf messages): a record's
//! trace id is on the records it caused and on the exported spans, the
//! span ids chain from the incoming `traceparent` through both tasks, and
//! a span the application opens in a processor is a child of the record's.

mod common;

use common::{find, Receiver};
use kstreams_dsl::{Grouped, Produced, StreamsBuilder};
use kstreams_otlp::OtlpTracing;
use kstreams_record::{Headers, I64Serde, Nullable, Record, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver, TraceParent, TracingConfig};
use tracing_subscriber::layer::SubscriberExt;

const INPUT: &str = "clicks";
const PAGES: &str = "pages";
const COUNTS: &str = "page-counts";
const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Re-keys by page (a repartition topic between two tasks) and counts; the
/// re-keying opens a span of the application's own.
fn topology() -> kstreams_dsl::Topology {
    let b = StreamsBuilder::new();
    let by_page = b
        .stream::<String, String>(INPUT)
        .select_key(|_, page: &String| {
            tracing::info_span!("lookup-page").in_scope(|| page.clone())
        });
    by_page.to_with(PAGES, Produced::with(StringSerde, StringSerde));
    by_page
        .group_by_key_with(Grouped::as_("by-page"))
        .count()
        .to_stream()
        .to_with(COUNTS, Produced::with(StringSerde, Nullable(I64Serde)));
    b.build().unwrap()
}

fn click(traceparent: Option<&str>) -> Record<String, String> {
    let headers = traceparent.map_or_else(Headers::new, |t| Headers::new().with("traceparent", t));
    Record::new("user1".to_string(), "/home".to_string(), 10).with_headers(headers)
}

#[test]
fn a_records_trace_id_is_on_its_outputs_and_in_the_exported_spans() {
    let receiver = Receiver::start();
    let otlp = OtlpTracing::builder()
        .endpoint(format!("http://{}", receiver.address))
        .service_name("otlp-test-app")
        .build()
        .unwrap();
    let mut config = TaskConfig::new("app");
    config.tracing = TracingConfig::enabled();
    config.cache_max_bytes = 0;
    let driver = TopologyTestDriver::with_config(topology(), config, 0).unwrap();
    let input = driver.create_input_topic(INPUT, StringSerde, StringSerde);
    let pages = driver.create_output_topic(PAGES, StringSerde, StringSerde);
    let counts = driver.create_output_topic(COUNTS, StringSerde, Nullable(I64Serde));

    let subscriber = tracing_subscriber::registry().with(otlp.layer());
    tracing::subscriber::with_default(subscriber, || {
        input.pipe_record(click(Some(INCOMING)));
        input.pipe_record(click(None));
    });
    otlp.force_flush().unwrap();
    let spans = receiver.spans();

    // The incoming trace: on both outputs, and the spans chain from the
    // traceparent's span through the first task to the second.
    let incoming = TraceParent::parse(INCOMING.as_bytes()).unwrap();
    let page = TraceParent::from_headers(&pages.read_record().headers).unwrap();
    let count = TraceParent::from_headers(&counts.read_record().headers).unwrap();
    assert_eq!(page.trace_id, incoming.trace_id);
    assert_eq!(count.trace_id, incoming.trace_id);
    let first = find(&spans, "kstreams.process", &incoming, Some(&page.parent_id));
    assert_eq!(first.parent_span_id, incoming.parent_id);
    assert_eq!(first.service, "otlp-test-app");
    assert_eq!(first.attributes["topic"], INPUT);
    assert_eq!(first.attributes["offset"], "0");
    assert_eq!(first.attributes["task_id"], "0_0");
    let second = find(
        &spans,
        "kstreams.process",
        &incoming,
        Some(&count.parent_id),
    );
    assert_eq!(second.parent_span_id, first.span_id);
    assert_eq!(second.attributes["topic"], "app-by-page-repartition");
    // The application's span inside the first task's processing.
    let lookup = find(&spans, "lookup-page", &incoming, None);
    assert_eq!(lookup.parent_span_id, first.span_id);

    // A record without a traceparent starts a trace: the one its output
    // carries, with the exported root span as parent.
    let started = TraceParent::from_headers(&pages.read_record().headers).unwrap();
    assert_ne!(started.trace_id, incoming.trace_id);
    assert!(started.sampled);
    let root = find(
        &spans,
        "kstreams.process",
        &started,
        Some(&started.parent_id),
    );
    assert!(root.parent_span_id.is_empty(), "{root:?}");
    assert_eq!(root.attributes["offset"], "1");
    otlp.shutdown().unwrap();
}
