//! The DSL's public handles: [`StreamsBuilder`](crate::StreamsBuilder) and
//! the streams and tables it builds. Each handle adds the processors of
//! [`crate::operators`] to the topology; none runs a record itself.

pub(crate) mod branched;
pub(crate) mod builder;
pub(crate) mod cogroup;
pub(crate) mod global_table;
pub(crate) mod grouped_stream;
pub(crate) mod grouped_table;
pub(crate) mod kstream;
pub(crate) mod ktable;
pub(crate) mod state;
pub(crate) mod types;
pub(crate) mod windowed;
