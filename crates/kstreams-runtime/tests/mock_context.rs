//! `MockProcessorContext` (issue 49): a processor with a store and two
//! punctuations unit-tested without a driver: what it forwards, schedules,
//! cancels and asks to commit is captured, and the clocks, the record's
//! metadata and its store are the test's. The same processor in a topology
//! on the `TopologyTestDriver` forwards the same records, so the mock
//! behaves as a task does.

use std::time::Duration;

use kstreams_dsl::{
    CapturedForward, MockProcessorContext, Processor, ProcessorContext, ProcessorError, Produced,
    PunctuationId, StreamsBuilder, TaskId,
};
use kstreams_record::{I64Serde, Record, StringSerde, Timestamp};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{KeyValueStoreHandle, Stores};
use kstreams_time::PunctuationType;

type S = String;

/// Counts words per key in "counts"; every 100 ms of stream time forwards
/// every count and asks for a commit; every second of wall time forwards a
/// heartbeat to the child "heartbeats" until a record says "stop".
#[derive(Default)]
struct WordCounter {
    store: Option<KeyValueStoreHandle<S, i64>>,
    heartbeat: Option<PunctuationId>,
    seen: Vec<String>,
}

impl Processor<S, S, S, i64> for WordCounter {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, S, i64>) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store("counts")?);
        ctx.schedule(Duration::from_millis(100), PunctuationType::StreamTime);
        self.heartbeat = Some(ctx.schedule(Duration::from_secs(1), PunctuationType::WallClockTime));
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        record: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        let origin = ctx
            .record_metadata()
            .map(|m| format!("{}-{}@{}", m.topic, m.partition, m.offset));
        self.seen.push(format!(
            "{} {} {} {:?}",
            ctx.application_id(),
            ctx.task_id(),
            ctx.node_name(),
            origin
        ));
        if record.value == "stop" {
            if let Some(heartbeat) = self.heartbeat.take() {
                ctx.cancel(heartbeat);
            }
            return Ok(());
        }
        let store = self.store.as_ref().expect("init ran");
        for word in record.value.split_whitespace() {
            let count = store.borrow().get(&word.to_string())?.unwrap_or(0) + 1;
            store.borrow_mut().put(word.to_string(), count)?;
        }
        Ok(())
    }

    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        punctuation: PunctuationId,
        timestamp: Timestamp,
    ) -> Result<(), ProcessorError> {
        if Some(punctuation) == self.heartbeat {
            ctx.forward_to("heartbeats", Record::new("beat".to_string(), 0, timestamp))?;
            return Ok(());
        }
        let store = self.store.as_ref().expect("init ran");
        let counts: Vec<(S, i64)> = store.borrow().all()?.collect::<Result<_, _>>()?;
        for (word, count) in counts {
            ctx.forward(Record::new(word, count, timestamp))?;
        }
        ctx.commit();
        Ok(())
    }
}

fn counts_store(persistent: bool) -> kstreams_state::KeyValueStoreBuilder<S, i64> {
    let supplier = if persistent {
        Stores::persistent_key_value_store("counts")
    } else {
        Stores::in_memory_key_value_store("counts")
    };
    Stores::key_value_store_builder(supplier, StringSerde, I64Serde)
}

fn text(record: &CapturedForward<S, i64>) -> String {
    format!(
        "{:?} {}={} @{}",
        record.child, record.record.key, record.record.value, record.record.timestamp
    )
}

#[test]
fn a_processor_its_store_and_its_punctuations_tested_without_a_driver() {
    for persistent in [false, true] {
        let mut mock = MockProcessorContext::<S, i64>::for_task(
            "word-app",
            TaskId {
                subtopology: 1,
                partition: 3,
            },
        )
        .with_node_name("word-counter");
        mock.add_state_store(counts_store(persistent)).unwrap();
        // A second store of the same name is refused, as in a topology.
        assert!(mock.add_state_store(counts_store(persistent)).is_err());
        mock.set_current_system_time_ms(5_000);
        let mut counter = WordCounter::default();
        mock.init(&mut counter).unwrap();

        let scheduled = mock.scheduled_punctuators();
        assert_eq!(scheduled.len(), 2);
        assert_eq!(scheduled[0].kind, PunctuationType::StreamTime);
        assert_eq!(scheduled[0].interval, Duration::from_millis(100));
        assert_eq!(scheduled[1].kind, PunctuationType::WallClockTime);
        assert_eq!(scheduled[1].interval, Duration::from_secs(1));
        assert!(!scheduled[1].cancelled);

        mock.set_record_metadata("words", 3, 41);
        mock.process(&mut counter, Record::new(s("a"), s("x y x"), 10))
            .unwrap();
        mock.set_record_metadata("words", 3, 42);
        mock.process(&mut counter, Record::new(s("b"), s("y"), 20))
            .unwrap();
        assert_eq!(
            counter.seen,
            vec![
                "word-app 1_3 word-counter Some(\"words-3@41\")",
                "word-app 1_3 word-counter Some(\"words-3@42\")"
            ]
        );
        // Processing forwarded nothing and asked for no commit.
        assert!(mock.forwarded().is_empty());
        assert!(!mock.committed());
        // The store holds the counts the processor wrote.
        let store: KeyValueStoreHandle<S, i64> = mock.context().get_state_store("counts").unwrap();
        assert_eq!(store.borrow().get(&s("x")).unwrap(), Some(2));
        assert_eq!(store.borrow().get(&s("y")).unwrap(), Some(2));

        // Stream time: a stream-time punctuation is due at once (Kafka
        // Streams aligns it to 0), then not before the next interval.
        mock.set_current_stream_time_ms(20);
        assert_eq!(
            mock.punctuate_due(&mut counter, PunctuationType::StreamTime)
                .unwrap(),
            1
        );
        assert_eq!(
            mock.forwarded().iter().map(text).collect::<Vec<_>>(),
            vec!["None x=2 @20", "None y=2 @20"]
        );
        assert!(mock.committed());
        mock.reset_commit();
        mock.reset_forwards();
        mock.set_current_stream_time_ms(99);
        assert_eq!(
            mock.punctuate_due(&mut counter, PunctuationType::StreamTime)
                .unwrap(),
            0
        );
        assert!(!mock.committed());

        // Wall clock: one interval after scheduling, to the named child.
        mock.set_current_system_time_ms(5_999);
        assert_eq!(
            mock.punctuate_due(&mut counter, PunctuationType::WallClockTime)
                .unwrap(),
            0
        );
        mock.set_current_system_time_ms(6_000);
        assert_eq!(
            mock.punctuate_due(&mut counter, PunctuationType::WallClockTime)
                .unwrap(),
            1
        );
        assert_eq!(
            mock.take_forwarded().iter().map(text).collect::<Vec<_>>(),
            vec!["Some(\"heartbeats\") beat=0 @6000"]
        );
        assert!(mock.forwarded().is_empty());

        // A record cancels the heartbeat: it stays listed, cancelled, and
        // no longer fires.
        mock.process(&mut counter, Record::new(s("c"), s("stop"), 30))
            .unwrap();
        assert!(mock.scheduled_punctuators()[1].cancelled);
        mock.set_current_system_time_ms(60_000);
        assert_eq!(
            mock.punctuate_due(&mut counter, PunctuationType::WallClockTime)
                .unwrap(),
            0
        );

        // A punctuation called directly runs without the record's metadata.
        let stream = mock.scheduled_punctuators()[0].id;
        mock.punctuate(&mut counter, stream, 500).unwrap();
        assert_eq!(mock.forwarded().len(), 2);
        // A child by name gets what goes to every child, and what is sent
        // to it by name.
        mock.context()
            .forward_to("heartbeats", Record::new(s("beat"), 0, 600))
            .unwrap();
        mock.context()
            .forward_to("elsewhere", Record::new(s("other"), 0, 600))
            .unwrap();
        assert_eq!(
            mock.forwarded_to("heartbeats")
                .iter()
                .map(text)
                .collect::<Vec<_>>(),
            vec![
                "None x=2 @500",
                "None y=2 @500",
                "Some(\"heartbeats\") beat=0 @600"
            ]
        );
        mock.reset_forwards();
        mock.process(&mut counter, Record::new(s("d"), s("z"), 40))
            .unwrap();
        assert_eq!(
            counter.seen.last().unwrap(),
            "word-app 1_3 word-counter Some(\"words-3@42\")",
            "the test's metadata is back after the punctuation"
        );
    }
}

#[test]
fn the_mock_forwards_what_the_same_processor_forwards_in_a_topology() {
    // On the driver: the stream-time punctuation fires after each record
    // whose time reaches the next interval, with that stream time.
    let b = StreamsBuilder::new();
    b.add_state_store(counts_store(false));
    b.stream::<S, S>("in")
        .process(WordCounter::default, &["counts"])
        .to_with("out", Produced::with(StringSerde, I64Serde));
    let driver =
        TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0).unwrap();
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, I64Serde);
    let inputs = [
        ("a", "x y", 10),
        ("b", "y", 150),
        ("c", "z x", 160),
        ("d", "x", 230),
    ];
    for (k, v, t) in inputs {
        input.pipe_input_at(s(k), s(v), t);
    }
    let on_driver: Vec<(S, i64, Timestamp)> = output
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();

    // On the mock: the test plays the task's part, advancing stream time
    // with each record and firing what is due.
    let mut mock = MockProcessorContext::<S, i64>::new();
    mock.add_state_store(counts_store(false)).unwrap();
    let mut counter = WordCounter::default();
    mock.init(&mut counter).unwrap();
    for (k, v, t) in inputs {
        mock.process(&mut counter, Record::new(s(k), s(v), t))
            .unwrap();
        mock.set_current_stream_time_ms(t);
        mock.punctuate_due(&mut counter, PunctuationType::StreamTime)
            .unwrap();
    }
    let on_mock: Vec<(S, i64, Timestamp)> = mock
        .forwarded()
        .into_iter()
        .map(|f| (f.record.key, f.record.value, f.record.timestamp))
        .collect();
    assert!(!on_driver.is_empty());
    assert_eq!(on_mock, on_driver);
}

fn s(x: &str) -> String {
    x.to_string()
}

/// Forwards the time of each punctuation: wall-clock ones anchored at
/// 10 000 every 5 000 ms, stream-time ones anchored at 0 every 100 ms.
struct OnTheSlot;

impl Processor<S, S, S, i64> for OnTheSlot {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, S, i64>) -> Result<(), ProcessorError> {
        ctx.schedule_anchored(
            10_000,
            Duration::from_millis(5_000),
            PunctuationType::WallClockTime,
        );
        ctx.schedule_anchored(0, Duration::from_millis(100), PunctuationType::StreamTime);
        Ok(())
    }

    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, S, i64>,
        _: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        _: PunctuationId,
        at: Timestamp,
    ) -> Result<(), ProcessorError> {
        let clock = if at >= 10_000 { "wall" } else { "stream" };
        ctx.forward(Record::new(clock.to_string(), at, at))?;
        Ok(())
    }
}

#[test]
fn anchored_punctuations_fire_on_their_slots_on_the_driver_and_on_the_mock() {
    let b = StreamsBuilder::new();
    b.stream::<S, S>("in")
        .process(|| OnTheSlot, &[])
        .to_with("out", Produced::with(StringSerde, I64Serde));
    // The wall clock starts at 3 000, before the anchor.
    let driver =
        TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 3_000).unwrap();
    let output = driver.create_output_topic("out", StringSerde, I64Serde);
    driver.advance_wall_clock_time(Duration::from_millis(6_999));
    assert!(output.is_empty(), "not before the anchor");
    driver.advance_wall_clock_time(Duration::from_millis(1));
    driver.advance_wall_clock_time(Duration::from_millis(4_999));
    driver.advance_wall_clock_time(Duration::from_millis(1));
    // Stream time: the anchor 0 lies ahead of -1, so the first record
    // fires it; the next slot is 100, then 200 (250 skips none: it is past).
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    for t in [40, 99, 100, 250] {
        input.pipe_input_at(s("k"), s("v"), t);
    }
    assert_eq!(
        output.read_key_values_to_list(),
        vec![
            (s("wall"), 10_000),
            (s("wall"), 15_000),
            (s("stream"), 40),
            (s("stream"), 100),
            (s("stream"), 250),
        ]
    );

    // On the mock, a wall-clock anchor already passed fires first at the
    // next slot after the mock's clock.
    let mut mock = MockProcessorContext::<S, i64>::new();
    mock.set_current_system_time_ms(12_000);
    mock.init(&mut OnTheSlot).unwrap();
    mock.set_current_system_time_ms(14_999);
    assert_eq!(
        mock.punctuate_due(&mut OnTheSlot, PunctuationType::WallClockTime)
            .unwrap(),
        0
    );
    mock.set_current_system_time_ms(15_000);
    assert_eq!(
        mock.punctuate_due(&mut OnTheSlot, PunctuationType::WallClockTime)
            .unwrap(),
        1
    );
    assert_eq!(mock.forwarded()[0].record.value, 15_000);
}
