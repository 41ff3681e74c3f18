//! Runnable kstreams applications live in this package as examples.
