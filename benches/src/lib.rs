//! Benchmarks live in this package as criterion benches.
