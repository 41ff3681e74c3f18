//! The Processor API through the DSL: the punctuation scenario.

use kstreams::prelude::*;

use crate::{PUNCTUATED_STORE, PUNCTUATE_INTERVAL};

/// punctuation: a persistent key-value store `punctuated-counts`
/// (String -> Long, logged, not cached: Kafka Streams' store builder
/// defaults), and `process(PunctuatedCount::new, "punctuated-counts")`
/// between the source and the sink.
pub(crate) fn punctuation(builder: &StreamsBuilder, input: &str, output: &str) {
    builder.add_state_store(Stores::key_value_store_builder(
        Stores::persistent_key_value_store(PUNCTUATED_STORE),
        StringSerde,
        I64Serde,
    ));
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .process(PunctuatedCount::default, &[PUNCTUATED_STORE])
        .to_with(output, Produced::with(StringSerde, I64Serde));
}

/// Counts records per key without forwarding anything; every 10 s of
/// stream time it forwards every key's count, in the store's (key byte)
/// order, stamped with the punctuation's time. Java's `PunctuatedCount`.
#[derive(Default)]
struct PunctuatedCount {
    /// Set by `init`, as Java keeps the store it gets there.
    counts: Option<KeyValueStoreHandle<String, i64>>,
}

impl PunctuatedCount {
    fn counts(&self) -> Result<&KeyValueStoreHandle<String, i64>, ProcessorError> {
        self.counts
            .as_ref()
            .ok_or_else(|| "PunctuatedCount used before init".into())
    }
}

impl Processor<String, String, String, i64> for PunctuatedCount {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, String, i64>) -> Result<(), ProcessorError> {
        self.counts = Some(ctx.get_state_store(PUNCTUATED_STORE)?);
        ctx.schedule(PUNCTUATE_INTERVAL, PunctuationType::StreamTime);
        Ok(())
    }

    fn process(
        &mut self,
        _ctx: &mut ProcessorContext<'_, String, i64>,
        record: Record<String, String>,
    ) -> Result<(), ProcessorError> {
        let counts = self.counts()?;
        let count = counts.borrow().get(&record.key)?.unwrap_or(0) + 1;
        counts.borrow_mut().put(record.key, count)?;
        Ok(())
    }

    /// Java's `emit(timestamp)`; the only punctuation this processor
    /// schedules, so the id is not looked at.
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, i64>,
        _punctuation: PunctuationId,
        timestamp: i64,
    ) -> Result<(), ProcessorError> {
        // Read the whole store before forwarding, so that no borrow of it
        // is held while the records go downstream.
        let entries = self
            .counts()?
            .borrow()
            .all()?
            .collect::<Result<Vec<_>, _>>()?;
        for (key, count) in entries {
            ctx.forward(Record::new(key, count, timestamp))?;
        }
        Ok(())
    }
}
