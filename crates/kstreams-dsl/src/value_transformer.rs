//! Kafka Streams' `ValueTransformerWithKey`, for
//! [`crate::KTable::transform_values`]: a per-key value function with state
//! stores.

use crate::processor::StoreLookup;
use crate::{ProcessorError, StreamsError};

/// Computes a table's new value from a key and its value, with the state
/// stores it was given: Kafka Streams' `ValueTransformerWithKey` (as
/// `KTable#transformValues` uses it).
///
/// The key is read-only. The value is `None` when the table has none (a
/// deleted key): as in Kafka Streams, the transformer is called for deletes
/// too, and what it returns is the result's value (`None`: a delete). A
/// transformer is called more than once per update when old values are
/// needed downstream and the result is not materialized (once with the new
/// value, then with the old one), and by a downstream join's lookup of an
/// unmaterialized result: it should compute the same value for the same
/// input, or be materialized.
///
/// # Example
///
/// ```
/// use kstreams_dsl::{
///     Materialized, Produced, ProcessorError, StreamsBuilder, ValueTransformerContext,
///     ValueTransformerWithKey,
/// };
/// use kstreams_record::{I64Serde, Nullable, StringSerde};
/// use kstreams_runtime::TopologyTestDriver;
/// use kstreams_state::{KeyValueStoreHandle, Stores};
///
/// /// Each value with how many updates its key had so far.
/// struct Versioned {
///     seen: Option<KeyValueStoreHandle<String, i64>>,
/// }
///
/// impl ValueTransformerWithKey<String, String, String> for Versioned {
///     fn init(&mut self, ctx: &ValueTransformerContext<'_>) -> Result<(), ProcessorError> {
///         self.seen = Some(ctx.get_state_store("seen")?);
///         Ok(())
///     }
///     fn transform(
///         &mut self,
///         key: &String,
///         value: Option<String>,
///     ) -> Result<Option<String>, ProcessorError> {
///         let seen = self.seen.as_ref().ok_or("not initialized")?;
///         let n = seen.borrow().get(key)?.unwrap_or(0) + 1;
///         seen.borrow_mut().put(key.clone(), n)?;
///         Ok(value.map(|v| format!("{v}#{n}")))
///     }
/// }
///
/// let builder = StreamsBuilder::new();
/// builder.add_state_store(Stores::key_value_store_builder(
///     Stores::in_memory_key_value_store("seen"),
///     StringSerde,
///     I64Serde,
/// ));
/// builder
///     .table::<String, String>("prices")
///     .transform_values(|| Versioned { seen: None }, &["seen"])
///     .to_stream()
///     .to_with("versioned", Produced::with(StringSerde, Nullable(StringSerde)));
/// let driver = TopologyTestDriver::new(builder.build()?)?;
/// let prices = driver.create_input_topic("prices", StringSerde, StringSerde);
/// let out = driver.create_output_topic("versioned", StringSerde, Nullable(StringSerde));
/// prices.pipe_input("apple".to_string(), "3".to_string());
/// prices.pipe_input("apple".to_string(), "4".to_string());
/// assert_eq!(
///     out.read_values_to_list(),
///     vec![Some("3#1".to_string()), Some("4#2".to_string())]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ValueTransformerWithKey<K, V, VR>: 'static {
    /// Called once before the first value: takes the state stores it uses.
    fn init(&mut self, ctx: &ValueTransformerContext<'_>) -> Result<(), ProcessorError> {
        let _ = ctx;
        Ok(())
    }

    /// The value for `key` given its value `value` (`None`: none).
    fn transform(&mut self, key: &K, value: Option<V>) -> Result<Option<VR>, ProcessorError>;

    /// Called when the task closes.
    fn close(&mut self) {}
}

/// What a [`ValueTransformerWithKey`] sees when it starts: the state stores
/// it was given. Unlike a processor's context it cannot forward (Kafka
/// Streams' `ForwardingDisabledProcessorContext`).
pub struct ValueTransformerContext<'a> {
    pub(crate) lookup: StoreLookup<'a>,
    pub(crate) stores: &'a [String],
    pub(crate) node: &'a str,
}

impl ValueTransformerContext<'_> {
    /// The name of the table operator the transformer runs in.
    pub fn node_name(&self) -> &str {
        self.node
    }

    /// A handle on one of the stores named in `transform_values`, by name
    /// and handle type, as [`crate::ProcessorContext::get_state_store`].
    pub fn get_state_store<H: Clone + 'static>(&self, name: &str) -> Result<H, StreamsError> {
        if !self.stores.iter().any(|s| s == name) {
            return Err(StreamsError::StoreNotConnected {
                node: self.node.to_string(),
                store: name.to_string(),
            });
        }
        let built = self.lookup.stores.get(name).ok_or_else(|| {
            StreamsError::Internal(format!("store {name:?} is connected but was not built"))
        })?;
        Ok(built.handle::<H>()?)
    }
}
