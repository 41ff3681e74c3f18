package dev.kstreams.compat;

/** A failure that the harness reports as one line and a non-zero exit status. */
final class HarnessException extends Exception {
    HarnessException(String message) {
        super(message);
    }
}
