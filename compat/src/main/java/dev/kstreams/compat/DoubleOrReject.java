package dev.kstreams.compat;

import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;

/**
 * processing-dead-letters: doubles a number written as decimal text and
 * fails on a multiple of seven, as user code does: with an unchecked
 * exception, which the processing exception handler gets.
 */
final class DoubleOrReject implements Processor<String, String, String, String> {
    private ProcessorContext<String, String> context;

    @Override
    public void init(ProcessorContext<String, String> context) {
        this.context = context;
    }

    @Override
    public void process(Record<String, String> record) {
        long n = Long.parseLong(record.value());
        if (n % 7 == 0) {
            throw new RuntimeException("cannot process " + record.value() + ": a multiple of seven");
        }
        context.forward(record.withValue(Long.toString(2 * n)));
    }
}
