//! The runtime's calls into librdkafka beyond rust-rdkafka's API: the one
//! place with `unsafe` (the crate denies it elsewhere). Everything here is
//! offered as safe types and functions whose signatures carry what the
//! calls need (a live client borrowed, a message alive for a view); every
//! `unsafe` block says why it holds (`SAFETY:`), against librdkafka's own
//! semantics.
//!
//! - `owned`: `Owned`, the one owner of each native handle the runtime
//!   makes or is handed (queues, topic handles, fetched messages, header
//!   lists, errors); the clients and partition lists stay with
//!   rust-rdkafka's owners.
//! - `cached_offsets`: the watermarks and position librdkafka keeps, read
//!   without a request.
//! - `fetch_queue`: the stream thread's queue of fetched records and the
//!   consumer that owns it.
//! - `batched_consumer`: an assign-only consumer (restore, standbys) read a
//!   batch at a time from its own queue.
//! - `message`: a consumed message read in place (the record copy).
//! - `topic_handle`: producing by topic handle.
//! - `error_name`: librdkafka's names of its error codes.

mod batched_consumer;
mod cached_offsets;
mod error_name;
mod fetch_queue;
mod message;
mod owned;
mod topic_handle;

pub(crate) use batched_consumer::{Batch, BatchedConsumer};
pub(crate) use cached_offsets::{cached_position, cached_watermarks};
pub(crate) use error_name::error_name;
pub(crate) use fetch_queue::{FetchQueue, FetchedMessage, QueuedConsumer};
pub(crate) use message::MessageView;
pub(crate) use topic_handle::{Outgoing, TopicHandle};
