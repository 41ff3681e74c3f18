//! Order totals per customer and minute, in event time, exactly once,
//! across restarts.
//!
//! The traps of the seed post, each answered by one line of the topology:
//!
//! - event time comes from the order's own `placed_at` field (JSON), not
//!   from when the record reached the broker;
//! - tumbling one-minute windows with 10 s of grace: an order a little out
//!   of order still counts;
//! - an order later than that is not silently lost: it goes to a side topic
//!   (`late_records_to`) with headers saying which window rejected it;
//! - exactly-once (`processing.guarantee=exactly_once_v2`);
//! - the instance is closed and a new one started twice, on the same state
//!   directory, then on an empty one (a replaced machine, state restored from
//!   the changelog): totals go on where they were.
//!
//! One trap stays, as in Kafka Streams: the aggregation's stream time is
//! the running instance's own, so right after a restart an order for a
//! window that closed before it still counts (o-08 below), until a newer
//! order moves stream time on.
//!
//! ```text
//! cargo run -p kstreams-examples --example order_totals
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use kstreams::prelude::*;
use kstreams::time::ConsumedRecordView;
use kstreams_examples::{
    read_topic, wait_until_running, BoxError, Cluster, InputProducer, Outgoing, StateDir,
};
use serde::{Deserialize, Serialize};

/// The topics and the application id (unique per run on a real broker).
struct Names {
    orders: String,
    totals: String,
    late: String,
    app: String,
}

impl Names {
    fn on(cluster: &Cluster) -> Self {
        Names {
            orders: cluster.name("orders"),
            totals: cluster.name("order-totals-per-minute"),
            late: cluster.name("late-orders"),
            app: cluster.name("order-totals"),
        }
    }
}
const WINDOW_MS: i64 = 60_000;
const GRACE_MS: i64 = 10_000;
/// A minute boundary, so windows start at whole minutes of the sample.
const BASE_TS: i64 = 1_749_999_960_000;

/// One order, as the shop writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    order_id: String,
    customer: String,
    amount_cents: i64,
    /// When the order was placed: its event time, in ms.
    placed_at: i64,
}

/// One customer's total in one window.
type Totals = BTreeMap<(String, i64), i64>;

/// What the example saw.
#[derive(Debug)]
pub struct Summary {
    /// Totals on the output topic after each run (first run, restart on
    /// the same state, restart on an empty state directory).
    pub totals_after_run: Vec<Totals>,
    /// What the input implies after each run, computed here.
    pub expected_after_run: Vec<Totals>,
    /// Order ids on the late topic, in order.
    pub late_orders: Vec<String>,
    /// Order ids that arrived after their window closed, computed here.
    pub expected_late: Vec<String>,
    /// Changelog records restored by each run.
    pub restored_by_run: Vec<u64>,
}

fn topology(names: &Names) -> Result<Topology, TopologyError> {
    let placed_at = ValueTimestampExtractor::new(|record: &ConsumedRecordView<'_>, _| {
        let order: Order = serde_json::from_slice(record.value?).ok()?;
        Some(order.placed_at)
    });
    let builder = StreamsBuilder::new();
    builder
        .stream_with(
            &names.orders,
            Consumed::with(StringSerde, JsonSerde::<Order>::new())
                .with_timestamp_extractor(placed_at),
        )
        .group_by_key_with(Grouped::with(StringSerde, JsonSerde::<Order>::new()))
        .windowed_by(TimeWindows::of_size_and_grace(
            Duration::from_millis(WINDOW_MS as u64),
            Duration::from_millis(GRACE_MS as u64),
        ))
        // A late order goes there whole (as JSON), with why in its headers.
        .late_records_to(&names.late)
        .aggregate_with(
            || 0_i64,
            |_, order: Order, total| total + order.amount_cents,
            Named::new("sum-orders"),
            Materialized::as_("order-totals-store")
                .with_key_serde(StringSerde)
                .with_value_serde(I64Serde),
        )
        .to_stream()
        .to_with(
            &names.totals,
            Produced::with(
                TimeWindowedSerde::new(StringSerde, WINDOW_MS),
                Nullable(I64Serde),
            ),
        );
    builder.build()
}

fn order(id: &str, customer: &str, cents: i64, seconds: i64) -> Order {
    Order {
        order_id: id.to_string(),
        customer: customer.to_string(),
        amount_cents: cents,
        placed_at: BASE_TS + seconds * 1000,
    }
}

/// The orders of each run, in the order they reach the broker.
fn orders_by_run() -> Vec<Vec<Order>> {
    vec![
        vec![
            order("o-01", "alice", 1250, 5),
            order("o-02", "bob", 500, 20),
            order("o-03", "alice", 750, 50),
            order("o-04", "bob", 300, 70),
            // Minute 0 closed at 70 s (60 s + 10 s of grace): late.
            order("o-05", "alice", 200, 55),
            order("o-06", "alice", 400, 90),
            order("o-07", "carol", 1000, 105),
        ],
        vec![
            // Minute 0 closed in the first run, but this instance has seen
            // no order yet: its stream time starts over (as in Kafka
            // Streams), so this order still counts.
            order("o-08", "bob", 100, 58),
            order("o-09", "alice", 600, 110),
            order("o-10", "bob", 200, 125),
            // Out of order but within grace: minute 1 closes at 130 s.
            order("o-11", "carol", 100, 119),
        ],
        vec![
            order("o-12", "alice", 900, 140),
            // Minute 1 closed at 130 s: late.
            order("o-13", "carol", 300, 100),
            order("o-14", "bob", 50, 150),
        ],
    ]
}

/// Totals and late orders as the windows' rules make them, for one task
/// reading the runs' orders in this order: a record is late once its window
/// end plus grace is at or before the aggregation's stream time (the largest
/// event time it has seen). As in Kafka Streams, that stream time is the
/// running instance's own: a new instance starts it over.
fn expected(runs: &[Vec<Order>]) -> (Totals, Vec<String>) {
    let mut totals = Totals::new();
    let mut late = Vec::new();
    for o in runs.iter().flat_map(|orders| {
        let mut stream_time = i64::MIN;
        orders.iter().map(move |o| {
            stream_time = stream_time.max(o.placed_at);
            (o, stream_time)
        })
    }) {
        let (o, stream_time) = o;
        let start = o.placed_at - o.placed_at.rem_euclid(WINDOW_MS);
        if start + WINDOW_MS + GRACE_MS <= stream_time {
            late.push(o.order_id.clone());
        } else {
            *totals.entry((o.customer.clone(), start)).or_default() += o.amount_cents;
        }
    }
    (totals, late)
}

fn produce(producer: &InputProducer, topic: &str, orders: &[Order]) -> Result<(), BoxError> {
    for o in orders {
        let value = serde_json::to_vec(o)?;
        producer.send(
            topic,
            1,
            Outgoing {
                key: &o.customer,
                value: Some(&value),
                // The record's own timestamp is when it was sent, not when
                // it was placed: only the extractor gets event time right.
                timestamp: now_ms(),
            },
        )?;
    }
    producer.flush()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The latest total per customer and window on the output topic, read
/// until it is `want`.
fn read_totals(bootstrap: &str, topic: &str, want: &Totals) -> Result<Totals, BoxError> {
    let serde = TimeWindowedSerde::new(StringSerde, WINDOW_MS);
    let latest = |records: &[kstreams_examples::Incoming]| -> Totals {
        let mut totals = Totals::new();
        for r in records {
            let (Ok(window), Some(bytes)) = (
                serde.deserialize(topic, &Headers::new(), Some(&r.raw_key)),
                r.value.as_deref(),
            ) else {
                continue;
            };
            let total = bytes.try_into().map_or(0, i64::from_be_bytes);
            totals.insert((window.key, window.window.start), total);
        }
        totals
    };
    let records = read_topic(bootstrap, topic, Duration::from_secs(15), |read| {
        latest(read) == *want
    })?;
    Ok(latest(&records))
}

fn restored_records(app: &KafkaStreams) -> u64 {
    let text = app.metrics().gather_text();
    text.lines()
        .filter(|l| l.starts_with("kstreams_task_restore_records_total"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

fn print_totals(title: &str, totals: &Totals) {
    println!("{title}");
    for ((customer, start), cents) in totals {
        let minute = (start - BASE_TS) / WINDOW_MS;
        println!(
            "  {customer:<6} minute {minute}: {:>3}.{:02}",
            cents / 100,
            cents % 100
        );
    }
}

/// Runs the three instances one after the other, on the embedded cluster
/// (or the real broker `KSTREAMS_BOOTSTRAP` names).
pub fn run() -> Result<Summary, BoxError> {
    let cluster = Cluster::start(true)?;
    let names = Names::on(&cluster);
    let bootstrap = cluster.bootstrap_servers();
    for topic in [&names.orders, &names.totals, &names.late] {
        cluster.create_topic(topic, 1)?;
    }
    cluster.prepare_internal_topics(&topology(&names)?, &names.app, 1)?;
    let guarantee = if cluster.keeps_transactional_offsets() {
        println!("real broker at {bootstrap}: exactly-once");
        ProcessingGuarantee::ExactlyOnceV2
    } else {
        println!(
            "embedded Kafka at {bootstrap}: at-least-once, as librdkafka's mock cluster does not \
             store the offsets an exactly-once commit sends (a restart would read everything \
             again); KSTREAMS_BOOTSTRAP=<broker> runs this exactly-once on a real broker"
        );
        ProcessingGuarantee::AtLeastOnce
    };
    let producer = InputProducer::new(&bootstrap)?;

    let first_dir = StateDir::new(&names.app);
    let replaced_dir = StateDir::new(&format!("{}-replaced", names.app));
    let runs = [
        ("first run", first_dir.path()),
        ("restarted on the same state directory", first_dir.path()),
        (
            "restarted on an empty state directory (restored from the changelog)",
            replaced_dir.path(),
        ),
    ];
    let mut summary = Summary {
        totals_after_run: Vec::new(),
        expected_after_run: Vec::new(),
        late_orders: Vec::new(),
        expected_late: Vec::new(),
        restored_by_run: Vec::new(),
    };
    let mut sent = Vec::new();
    for ((title, dir), orders) in runs.into_iter().zip(orders_by_run()) {
        let config = StreamsConfig::new(&names.app, &bootstrap)
            .processing_guarantee(guarantee)
            .commit_interval(Duration::from_millis(100))
            .state_dir(dir)
            // The old member is only dropped when its session runs out
            // (Kafka Streams' consumers do not leave the group on close):
            // a short session lets the restarted instance in sooner.
            .client_config("consumer.session.timeout.ms", "6000")
            .client_config("consumer.heartbeat.interval.ms", "500");
        let mut app = KafkaStreams::new(topology(&names)?, config);
        app.start()?;
        wait_until_running(&app, Duration::from_secs(20))?;
        produce(&producer, &names.orders, &orders)?;
        sent.push(orders);
        let (want, _) = expected(&sent);
        let totals = read_totals(&bootstrap, &names.totals, &want)?;
        let restored = restored_records(&app);
        let closed = app.close(Duration::from_secs(10));
        println!("\n{title}: {restored} changelog records restored, closed cleanly: {closed}");
        print_totals("totals (cents shown as units):", &totals);
        summary.totals_after_run.push(totals);
        summary.expected_after_run.push(want);
        summary.restored_by_run.push(restored);
    }

    let late = read_topic(&bootstrap, &names.late, Duration::from_secs(10), |read| {
        read.len() >= 2
    })?;
    println!("\nlate orders kept on {}:", names.late);
    for record in &late {
        let order: Order = serde_json::from_slice(record.value.as_deref().unwrap_or_default())?;
        let seconds = |header: &str| {
            record
                .header_i64(header)
                .map_or_else(|| "?".to_string(), |t| ((t - BASE_TS) / 1000).to_string())
        };
        println!(
            "  {} {:<6} {:>3}.{:02} placed at {:>3} s: window [{} s, {} s) closed, stream time was {} s ({})",
            order.order_id,
            order.customer,
            order.amount_cents / 100,
            order.amount_cents % 100,
            (order.placed_at - BASE_TS) / 1000,
            seconds(late_headers::WINDOW_START),
            seconds(late_headers::WINDOW_END),
            seconds(late_headers::STREAM_TIME),
            record
                .header_text(late_headers::OPERATOR)
                .unwrap_or_default(),
        );
        summary.late_orders.push(order.order_id);
    }
    summary.expected_late = expected(&sent).1;
    let right = summary.totals_after_run == summary.expected_after_run
        && summary.late_orders == summary.expected_late;
    println!(
        "\ntotals and late orders as the input implies after every run: {}",
        if right { "yes" } else { "NO" }
    );
    Ok(summary)
}

fn main() -> Result<(), BoxError> {
    env_logger::init();
    let summary = run()?;
    if summary.totals_after_run != summary.expected_after_run {
        return Err(format!("wrong totals: {summary:?}").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn totals_are_right_after_each_restart_and_late_orders_are_kept() {
        let summary = super::run().unwrap();
        assert_eq!(summary.late_orders, ["o-05", "o-13"], "{summary:?}");
        assert_eq!(summary.late_orders, summary.expected_late);
        for (run, (got, want)) in summary
            .totals_after_run
            .iter()
            .zip(&summary.expected_after_run)
            .enumerate()
        {
            assert_eq!(got, want, "run {run}: {summary:?}");
        }
        // The replaced machine had only the changelog to go on.
        assert!(summary.restored_by_run[2] > 0, "{summary:?}");
    }
}
