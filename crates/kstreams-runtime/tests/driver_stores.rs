//! Stores in the TopologyTestDriver: every store engine opens (persistent
//! ones in a task directory the driver owns), and what a logged store writes
//! shows up on its changelog topic, `<application.id>-<store>-changelog`,
//! in the bytes Kafka Streams writes.

use kstreams_dsl::{Processor, ProcessorContext, ProcessorError, Produced, StreamsBuilder};
use kstreams_record::{I64Serde, Nullable, Record, StringSerde};
use kstreams_runtime::{TaskConfig, TopologyTestDriver};
use kstreams_state::{KeyValueStoreHandle, Stores};

type S = String;

/// Counts records per key in the store "counts" and forwards the count.
struct CountPerKey {
    store: Option<KeyValueStoreHandle<S, i64>>,
}

impl Processor<S, S, S, i64> for CountPerKey {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, S, i64>) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store("counts")?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, i64>,
        record: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        let store = self.store.as_ref().expect("init ran");
        let count = store.borrow().get(&record.key)?.unwrap_or(0) + 1;
        store.borrow_mut().put(record.key.clone(), count)?;
        ctx.forward(record.with_value(count))?;
        Ok(())
    }
}

fn driver(persistent: bool, logged: bool) -> TopologyTestDriver {
    let supplier = if persistent {
        Stores::persistent_key_value_store("counts")
    } else {
        Stores::in_memory_key_value_store("counts")
    };
    let builder = Stores::key_value_store_builder(supplier, StringSerde, I64Serde);
    let builder = if logged {
        builder
    } else {
        builder.with_logging_disabled()
    };
    let b = StreamsBuilder::new();
    b.add_state_store(builder);
    b.stream::<S, S>("in")
        .process(|| CountPerKey { store: None }, &["counts"])
        .to_with("out", Produced::with(StringSerde, I64Serde));
    TopologyTestDriver::with_config(b.build().unwrap(), TaskConfig::new("app"), 0).unwrap()
}

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn a_persistent_store_opens_and_its_changelog_is_an_output_topic() {
    let d = driver(true, true);
    let input = d.create_input_topic("in", StringSerde, StringSerde);
    input.pipe_input_at(s("a"), s("x"), 10);
    input.pipe_input_at(s("b"), s("x"), 20);
    input.pipe_input_at(s("a"), s("x"), 30);
    let out = d.create_output_topic("out", StringSerde, I64Serde);
    assert_eq!(
        out.read_key_values_to_list(),
        vec![(s("a"), 1), (s("b"), 1), (s("a"), 2)]
    );
    // The changelog carries every write, with the record's timestamp, as
    // String key bytes and Kafka's 8-byte big-endian long.
    let changelog = d.create_output_topic("app-counts-changelog", StringSerde, Nullable(I64Serde));
    let got: Vec<_> = changelog
        .read_records_to_list()
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        got,
        vec![
            (s("a"), Some(1), 10),
            (s("b"), Some(1), 20),
            (s("a"), Some(2), 30)
        ]
    );
    let store = d.get_key_value_store::<S, i64>("counts").unwrap();
    assert_eq!(store.borrow().get(&s("a")).unwrap(), Some(2));
}

#[test]
fn an_unlogged_in_memory_store_writes_no_changelog() {
    let d = driver(false, false);
    d.create_input_topic("in", StringSerde, StringSerde)
        .pipe_input(s("a"), s("x"));
    assert_eq!(
        d.create_output_topic("out", StringSerde, I64Serde)
            .read_value(),
        1
    );
    assert!(!d.produced_topic_names().contains("app-counts-changelog"));
}
