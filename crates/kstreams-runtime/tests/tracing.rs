//! W3C trace context through a topology with a repartition topic, on the
//! TopologyTestDriver (the production task code): a record's `traceparent`
//! continues in its outputs under a new span per task, records without one
//! start a trace when configured, sampling is kept, and each task's
//! processing is a `tracing` span with the trace's ids.

use std::sync::{Arc, Mutex};

use kstreams_dsl::{Grouped, Produced, StreamsBuilder};
use kstreams_record::{Headers, I64Serde, Nullable, Record, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver, TraceParent, TracingConfig};

const INPUT: &str = "clicks";
const PAGES: &str = "pages";
const COUNTS: &str = "page-counts";
const INCOMING: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Re-keys by page (a repartition topic between two tasks) and counts.
fn topology() -> kstreams_dsl::Topology {
    let b = StreamsBuilder::new();
    let by_page = b
        .stream::<String, String>(INPUT)
        .select_key(|_, page| page.clone());
    by_page.to_with(PAGES, Produced::with(StringSerde, StringSerde));
    by_page
        .group_by_key_with(Grouped::as_("by-page"))
        .count()
        .to_stream()
        .to_with(COUNTS, Produced::with(StringSerde, Nullable(I64Serde)));
    b.build().unwrap()
}

fn driver(tracing: TracingConfig) -> TopologyTestDriver {
    let mut config = TaskConfig::new("app");
    config.tracing = tracing;
    config.cache_max_bytes = 0;
    TopologyTestDriver::with_config(topology(), config, 0).unwrap()
}

fn traceparent(headers: &Headers) -> Option<TraceParent> {
    TraceParent::from_headers(headers)
}

fn click(traceparent: Option<&str>) -> Record<String, String> {
    let headers = traceparent.map_or_else(Headers::new, |t| Headers::new().with("traceparent", t));
    Record::new("user1".to_string(), "/home".to_string(), 10).with_headers(headers)
}

#[test]
fn off_the_headers_pass_through_untouched() {
    let driver = driver(TracingConfig::default());
    let input = driver.create_input_topic(INPUT, StringSerde, StringSerde);
    let pages = driver.create_output_topic(PAGES, StringSerde, StringSerde);
    input.pipe_record(click(Some(INCOMING)));
    input.pipe_record(click(None));
    let out = pages.read_records_to_list();
    assert_eq!(
        out[0].headers.last("traceparent").unwrap().value.as_deref(),
        Some(INCOMING.as_bytes())
    );
    assert!(out[1].headers.last("traceparent").is_none());
}

#[test]
fn the_trace_goes_on_through_the_repartition_under_a_span_per_task() {
    let driver = driver(TracingConfig::enabled());
    let input = driver.create_input_topic(INPUT, StringSerde, StringSerde);
    let pages = driver.create_output_topic(PAGES, StringSerde, StringSerde);
    let counts = driver.create_output_topic(COUNTS, StringSerde, Nullable(I64Serde));
    let spans = Arc::new(Mutex::new(Vec::new()));
    tracing::subscriber::with_default(SpanRecorder(spans.clone()), || {
        input.pipe_record(click(Some(INCOMING)));
    });
    let incoming = TraceParent::parse(INCOMING.as_bytes()).unwrap();
    let page = traceparent(&pages.read_record().headers).unwrap();
    let count = traceparent(&counts.read_record().headers).unwrap();
    for out in [page, count] {
        assert_eq!(out.trace_id, incoming.trace_id);
        assert!(out.sampled);
        assert_ne!(out.parent_id, incoming.parent_id);
    }
    // The count ran in the second task, after the repartition: a span of
    // its own, child of the first task's.
    assert_ne!(count.parent_id, page.parent_id);
    let spans = spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 2, "{spans:?}");
    let hex = |id: &[u8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let first = &spans[0];
    assert_eq!(first["trace_id"], incoming.trace_id_hex());
    assert_eq!(first["parent_span_id"], hex(&incoming.parent_id));
    assert_eq!(first["span_id"], hex(&page.parent_id));
    assert_eq!(first["topic"], INPUT);
    let second = &spans[1];
    assert_eq!(second["trace_id"], incoming.trace_id_hex());
    assert_eq!(second["parent_span_id"], hex(&page.parent_id));
    assert_eq!(second["span_id"], hex(&count.parent_id));
    assert_eq!(second["topic"], "app-by-page-repartition");
}

#[test]
fn records_without_a_trace_start_one_when_configured_and_sampling_is_kept() {
    let driver_of = |start_traces, sample_ratio| {
        driver(TracingConfig {
            enabled: true,
            start_traces,
            sample_ratio,
        })
    };
    let first_output = |driver: &TopologyTestDriver, traceparent: Option<&str>| {
        let input = driver.create_input_topic(INPUT, StringSerde, StringSerde);
        let pages = driver.create_output_topic(PAGES, StringSerde, StringSerde);
        input.pipe_record(click(traceparent));
        pages.read_record().headers
    };
    let started = traceparent(&first_output(&driver_of(true, 1.0), None)).unwrap();
    assert!(started.sampled);
    assert_ne!(started.trace_id, [0; 16]);
    let unsampled = traceparent(&first_output(&driver_of(true, 0.0), None)).unwrap();
    assert!(
        !unsampled.sampled,
        "ratio 0: the trace goes on, not sampled"
    );
    assert!(first_output(&driver_of(false, 1.0), None)
        .last("traceparent")
        .is_none());
    // A sampled incoming trace stays sampled whatever the ratio, an
    // unsampled one stays unsampled.
    let kept = traceparent(&first_output(&driver_of(true, 0.0), Some(INCOMING))).unwrap();
    assert!(kept.sampled);
    let not_sampled = INCOMING.replace("-01", "-00");
    let kept = traceparent(&first_output(&driver_of(true, 1.0), Some(&not_sampled))).unwrap();
    assert!(!kept.sampled);
}

/// The fields of every `kstreams.process` span opened, as text.
type SpanFields = std::collections::BTreeMap<String, String>;

struct SpanRecorder(Arc<Mutex<Vec<SpanFields>>>);

struct FieldVisitor<'a>(&'a mut SpanFields);

impl tracing::field::Visit for FieldVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl tracing::Subscriber for SpanRecorder {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut spans = self.0.lock().unwrap();
        if span.metadata().name() != "kstreams.process" {
            // Ids above the recorded spans' indexes: nothing to record.
            return tracing::span::Id::from_u64(u64::MAX);
        }
        let mut fields = SpanFields::new();
        span.record(&mut FieldVisitor(&mut fields));
        spans.push(fields);
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    // The ids are set once the span exists (from OpenTelemetry when a
    // layer gives them), so they come here.
    fn record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.0.lock().unwrap();
        if let Some(fields) = spans.get_mut((id.into_u64() - 1) as usize) {
            values.record(&mut FieldVisitor(fields));
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
