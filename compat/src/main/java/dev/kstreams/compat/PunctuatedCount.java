package dev.kstreams.compat;

import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The punctuation scenario's processor: counts records per key in the store
 * {@link Scenarios#PUNCTUATED_STORE} and forwards nothing itself; a
 * stream-time punctuation every {@link Scenarios#PUNCTUATE_INTERVAL} forwards
 * every key's count, in the store's iteration order, stamped with the
 * punctuation's time. Stream time (not wall-clock) makes the output a function
 * of the input alone.
 */
final class PunctuatedCount implements Processor<String, String, String, Long> {
    private ProcessorContext<String, Long> context;
    private KeyValueStore<String, Long> counts;

    @Override
    public void init(ProcessorContext<String, Long> context) {
        this.context = context;
        this.counts = context.getStateStore(Scenarios.PUNCTUATED_STORE);
        context.schedule(Scenarios.PUNCTUATE_INTERVAL, PunctuationType.STREAM_TIME, this::emit);
    }

    @Override
    public void process(Record<String, String> record) {
        Long count = counts.get(record.key());
        counts.put(record.key(), (count == null ? 0 : count) + 1);
    }

    /** Forwards every count, stamped {@code timestamp}, without headers. */
    private void emit(long timestamp) {
        try (KeyValueIterator<String, Long> all = counts.all()) {
            while (all.hasNext()) {
                KeyValue<String, Long> entry = all.next();
                context.forward(new Record<>(entry.key, entry.value, timestamp));
            }
        }
    }
}
