package dev.kstreams.compat;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.ProcessingExceptionHandler;
import org.apache.kafka.streams.processor.api.Record;

/**
 * processing-handler-by-type's processing exception handler, an
 * application's own as a user writes one: an {@link IllegalArgumentException}
 * (a bad input) is dead-lettered to the topic of
 * {@code errors.dead.letter.queue.topic.name} with the failure in the
 * headers Kafka Streams' own handlers write, and processing resumes; an
 * {@link IllegalStateException} is dropped without a dead letter; anything
 * else fails the application.
 */
public final class DeadLettersByType implements ProcessingExceptionHandler {
    private String deadLetters;

    @Override
    public void configure(Map<String, ?> configs) {
        deadLetters = (String) configs.get(StreamsConfig.ERRORS_DEAD_LETTER_QUEUE_TOPIC_NAME_CONFIG);
    }

    @Override
    public Response handleError(ErrorHandlerContext context, Record<?, ?> record, Exception exception) {
        if (exception instanceof IllegalArgumentException) {
            Headers headers = new RecordHeaders(context.headers().toArray());
            String line = exception.getClass().getName() + ": " + exception.getMessage() + "\n";
            headers.add("__streams.errors.exception", bytes(exception.getClass().getName()));
            headers.add("__streams.errors.message", bytes(exception.getMessage()));
            headers.add("__streams.errors.stacktrace", bytes(line));
            headers.add("__streams.errors.topic", bytes(context.topic()));
            headers.add("__streams.errors.partition", bytes(Integer.toString(context.partition())));
            headers.add("__streams.errors.offset", bytes(Long.toString(context.offset())));
            return Response.resume(List.of(new ProducerRecord<>(deadLetters, null, context.timestamp(),
                    context.sourceRawKey(), context.sourceRawValue(), headers)));
        }
        if (exception instanceof IllegalStateException) {
            return Response.resume();
        }
        return Response.fail();
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
