//! An async call's trace, exported over OTLP/HTTP to the test's receiver:
//! the call runs in the record's `kstreams.process` span, so a span the
//! call opens (a client's request to a slow service) is its child, and the
//! output the call's result makes carries that record span as its parent,
//! though it is sent after the record's processing returned. Even for a
//! record whose call waited behind its key's earlier one.
//!
//! Its own test binary: the call runs on a tokio worker thread, where only
//! a process-wide subscriber (`OtlpTracing::install`) sees the spans it
//! opens.

mod common;

use std::time::Duration;

use common::{find, Receiver};
use kstreams_dsl::{AsyncOptions, StreamsBuilder};
use kstreams_otlp::OtlpTracing;
use kstreams_record::{Headers, Record, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver, TraceParent, TracingConfig};
use tracing::Instrument;

const FIRST: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const SECOND: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn order(id: &str, traceparent: &str) -> Record<String, String> {
    Record::new("customer-1".to_string(), id.to_string(), 10)
        .with_headers(Headers::new().with("traceparent", traceparent))
}

#[test]
fn an_async_calls_spans_and_outputs_continue_the_records_trace() {
    let receiver = Receiver::start();
    let otlp = OtlpTracing::builder()
        .endpoint(format!("http://{}", receiver.address))
        .service_name("otlp-async-app")
        .build()
        .unwrap();
    otlp.install().unwrap();

    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("orders")
        .map_values_async(
            |_customer: String, order: String| {
                async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, std::io::Error>(format!("{order} enriched"))
                }
                .instrument(tracing::info_span!("lookup-customer"))
            },
            AsyncOptions::new(),
        )
        .to("enriched");
    let mut config = TaskConfig::new("app");
    config.tracing = TracingConfig::enabled();
    let driver = TopologyTestDriver::with_config(builder.build().unwrap(), config, 0).unwrap();
    // Both orders in before either call ends: the second one's call waits
    // behind the first's (one key) and starts from its completion.
    driver.set_wait_for_async_after_input(false);
    let input = driver.create_input_topic("orders", StringSerde, StringSerde);
    let output = driver.create_output_topic("enriched", StringSerde, StringSerde);
    input.pipe_record(order("order-1", FIRST));
    input.pipe_record(order("order-2", SECOND));
    driver.wait_for_async().unwrap();
    let spans = exported_spans(&otlp, &receiver, &[FIRST, SECOND]);

    for (id, incoming) in [("order-1", FIRST), ("order-2", SECOND)] {
        let incoming = TraceParent::parse(incoming.as_bytes()).unwrap();
        let out = output.read_record();
        assert_eq!(out.value, format!("{id} enriched"));
        let carried = TraceParent::from_headers(&out.headers).unwrap();
        assert_eq!(carried.trace_id, incoming.trace_id, "{id}");
        // The output's parent is the record's span, not the incoming one.
        let record_span = find(
            &spans,
            "kstreams.process",
            &incoming,
            Some(&carried.parent_id),
        );
        assert_eq!(record_span.parent_span_id, incoming.parent_id, "{id}");
        let lookup = find(&spans, "lookup-customer", &incoming, None);
        assert_eq!(lookup.parent_span_id, record_span.span_id, "{id}");
    }
    otlp.shutdown().unwrap();
}

/// The spans the receiver got once both of each trace's spans are there.
/// A call's future (which holds its record's span) is dropped on a tokio
/// worker just after its result reached the task, so a span may end, and
/// be exported, a moment after `wait_for_async` returns: flush until it
/// arrives rather than read once.
fn exported_spans(
    otlp: &OtlpTracing,
    receiver: &Receiver,
    traces: &[&str],
) -> Vec<common::ReceivedSpan> {
    let traces: Vec<TraceParent> = traces
        .iter()
        .map(|t| TraceParent::parse(t.as_bytes()).unwrap())
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        otlp.force_flush().unwrap();
        let spans = receiver.spans();
        let complete = traces.iter().all(|trace| {
            ["kstreams.process", "lookup-customer"].iter().all(|name| {
                spans
                    .iter()
                    .any(|s| s.name == *name && s.trace_id == trace.trace_id)
            })
        });
        if complete || std::time::Instant::now() >= deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
