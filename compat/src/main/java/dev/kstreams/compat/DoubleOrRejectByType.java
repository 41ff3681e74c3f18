package dev.kstreams.compat;

import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * processing-handler-by-type: doubles a number written as decimal text and
 * fails two ways, as user code does: an {@link IllegalArgumentException}
 * on a multiple of seven, an {@link IllegalStateException} on another
 * multiple of eleven. {@link DeadLettersByType} tells them apart.
 */
final class DoubleOrRejectByType implements Processor<String, String, String, String> {
    private ProcessorContext<String, String> context;

    @Override
    public void init(ProcessorContext<String, String> context) {
        this.context = context;
    }

    @Override
    public void process(Record<String, String> record) {
        long n = Long.parseLong(record.value());
        if (n % 7 == 0) {
            throw new IllegalArgumentException("cannot process " + record.value() + ": a multiple of seven");
        }
        if (n % 11 == 0) {
            throw new IllegalStateException("cannot process " + record.value() + ": a multiple of eleven");
        }
        context.forward(record.withValue(Long.toString(2 * n)));
    }
}
