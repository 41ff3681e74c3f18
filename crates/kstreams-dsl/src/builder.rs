//! `StreamsBuilder`: the DSL's entry point.

use std::cell::RefCell;
use std::rc::Rc;

use kstreams_record::DefaultSerde;

use crate::internals::graph::SourceTopics;
use crate::topology::compile_pattern;
use crate::{Consumed, KStream, Topology, TopologyError};

/// The state all streams of one builder share: the topology being built,
/// the counter behind generated names, and the first error.
pub(crate) struct BuilderState {
    pub topology: Topology,
    /// Repartition topics a user named, by topic, with the source node that
    /// reads each: a second aggregation of the same grouping reuses it.
    pub named_repartitions: std::collections::HashMap<String, String>,
    next_index: u32,
    error: Option<TopologyError>,
}

impl BuilderState {
    /// A generated name: `prefix` and the next index on ten digits, as
    /// Kafka Streams' `newProcessorName`.
    pub fn new_name(&mut self, prefix: &str) -> String {
        let name = format!("{prefix}{:010}", self.next_index);
        self.next_index += 1;
        name
    }

    /// The user's name if given, else a generated one. Either way an index
    /// is drawn, as Kafka Streams does, so that naming one operator does not
    /// shift the generated names of the others.
    pub fn name_or_generate(&mut self, name: Option<String>, prefix: &str) -> String {
        let generated = self.new_name(prefix);
        name.unwrap_or(generated)
    }

    /// Keeps the first error; `build` reports it.
    pub fn record<T>(&mut self, result: Result<T, TopologyError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }
}

pub(crate) type SharedState = Rc<RefCell<BuilderState>>;

/// Builds a topology with the DSL: Kafka Streams' `StreamsBuilder`.
///
/// Operators never fail on the spot; the first mistake (a duplicate name,
/// say) is returned by [`StreamsBuilder::build`].
///
/// ```
/// use kstreams_dsl::StreamsBuilder;
///
/// let builder = StreamsBuilder::new();
/// builder
///     .stream::<String, String>("sentences")
///     .flat_map_values(|sentence| sentence.split(' ').map(str::to_owned).collect::<Vec<String>>())
///     .filter(|_, word| !word.is_empty())
///     .to("words");
/// let topology = builder.build().unwrap();
/// assert_eq!(topology.subtopology_count(), 1);
/// ```
pub struct StreamsBuilder {
    state: SharedState,
}

impl Default for StreamsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamsBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            state: Rc::new(RefCell::new(BuilderState {
                topology: Topology::new(),
                named_repartitions: std::collections::HashMap::new(),
                next_index: 0,
                error: None,
            })),
        }
    }

    pub(crate) fn state(&self) -> SharedState {
        self.state.clone()
    }

    /// A stream of one topic, with the default serdes of `K` and `V`.
    pub fn stream<K, V>(&self, topic: &str) -> KStream<K, V>
    where
        K: DefaultSerde + Clone,
        V: DefaultSerde + Clone,
    {
        self.stream_with(topic, Consumed::default())
    }

    /// A stream of one topic, read as `consumed` says.
    pub fn stream_with<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        self.stream_topics(&[topic], consumed)
    }

    /// One stream of several topics.
    pub fn stream_topics<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topics: &[&str],
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        let topics = SourceTopics::Names(topics.iter().map(|t| t.to_string()).collect());
        self.add_source(Ok(topics), consumed)
    }

    /// One stream of every topic whose whole name matches `pattern`.
    pub fn stream_pattern<K: Clone + 'static, V: Clone + 'static>(
        &self,
        pattern: &str,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        self.add_source(
            compile_pattern(pattern).map(SourceTopics::Pattern),
            consumed,
        )
    }

    fn add_source<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topics: Result<SourceTopics, TopologyError>,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(consumed.name, "KSTREAM-SOURCE-");
        if let Some(topics) = state.record(topics) {
            let added = state.topology.add_typed_source(
                name.clone(),
                topics,
                consumed.key_serde.clone(),
                consumed.value_serde.clone(),
                consumed.extractor,
            );
            state.record(added);
        }
        if consumed.bootstrap {
            state.topology.graph.mark_bootstrap_upstream(&name);
        }
        drop(state);
        let mut stream = KStream::new(self.state.clone(), name);
        stream.key_serde = Some(consumed.key_serde);
        stream.value_serde = Some(consumed.value_serde);
        stream
    }

    /// Adds a state store that `process` operators can name.
    pub fn add_state_store(&self, builder: impl kstreams_state::StoreBuilder) -> &Self {
        let mut state = self.state.borrow_mut();
        let added = state.topology.add_state_store(builder, &[]).map(|_| ());
        state.record(added);
        self
    }

    /// The topology built so far, or the first error an operator made.
    pub fn build(self) -> Result<Topology, TopologyError> {
        let mut state = self.state.borrow_mut();
        if let Some(error) = state.error.take() {
            return Err(error);
        }
        Ok(std::mem::take(&mut state.topology))
    }
}
