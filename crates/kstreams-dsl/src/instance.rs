//! A sub-topology instantiated for one task.

use std::any::Any;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Timestamp;
use kstreams_state::{StateStore, StoreContext};
use kstreams_time::{PunctuationType, TimestampExtractor};

use crate::forwarding::NodeInfo;
use crate::graph::{resolve_topic, NodeKind, SourceTopics};
use crate::nodes::{NodeHandle, SourceHandle};
use crate::task_context::{ConsumedRecord, TaskContext, TaskId};
use crate::{StreamsError, Topology};

/// How many topics a task remembers the source of (see
/// `TaskTopology::seen_topics`).
const MAX_SEEN_TOPICS: usize = 64;

enum TopicMatcher {
    Names(Vec<String>),
    Pattern(regex::Regex),
}

impl TopicMatcher {
    fn matches(&self, topic: &str) -> bool {
        match self {
            TopicMatcher::Names(names) => names.iter().any(|n| n == topic),
            TopicMatcher::Pattern(p) => p.is_match(topic),
        }
    }
}

/// The nodes and stores of one sub-topology, built for one task, with the
/// task's context. The runtime feeds it records in the order its partition
/// group chooses; everything below the sources runs here, depth-first.
pub struct TaskTopology {
    sources: Vec<(TopicMatcher, Rc<dyn SourceHandle>)>,
    /// The source index of each topic the task has processed, by the
    /// record's shared topic name (one `Arc<str>` per topic and thread):
    /// a record's source is then found by comparing an address instead of
    /// names, which a record did three times.
    seen_topics: Vec<(Arc<str>, usize)>,
    /// Processors by graph index, for punctuation and close.
    processors: HashMap<usize, Rc<dyn NodeHandle>>,
    /// Processors in graph order, for init.
    init_order: Vec<usize>,
    /// The async processors, in graph order: their finished calls are
    /// applied between records.
    async_nodes: Vec<usize>,
    context: TaskContext,
    /// What the task's stores see: task directory, changelog writer, cache,
    /// and the timestamp of the record being processed.
    store_context: StoreContext,
}

impl TaskTopology {
    /// [`TaskTopology::with_store_context`] with a store context of its own:
    /// no task directory (persistent stores refuse to open), no changelog.
    pub fn new(
        topology: &Topology,
        task: TaskId,
        application_id: &str,
        wall_clock: Timestamp,
    ) -> Result<Self, StreamsError> {
        let stores = StoreContext::new(application_id, &task.to_string(), task.partition);
        Self::with_store_context(topology, task, application_id, wall_clock, stores)
    }

    /// Builds sub-topology `task.subtopology` of `topology`: its stores
    /// (initialized with `store_context`), then its nodes from the sinks up,
    /// then `init` on each processor in the order they were added.
    pub fn with_store_context(
        topology: &Topology,
        task: TaskId,
        application_id: &str,
        wall_clock: Timestamp,
        store_context: StoreContext,
    ) -> Result<Self, StreamsError> {
        let graph = &topology.graph;
        let groups = graph.subtopologies();
        let index = topology.subtopology_index(task.subtopology);
        let members = index.and_then(|i| groups.get(i)).ok_or_else(|| {
            StreamsError::Internal(format!(
                "no sub-topology {} in this topology",
                task.subtopology
            ))
        })?;
        let mut context = TaskContext::new(task, application_id.to_string(), wall_clock);
        context.record_headers = store_context.headers_cell().clone();
        for &id in members {
            for store in &graph.nodes[id].stores {
                if !context.stores.contains_key(store) {
                    let def = &graph.stores[store];
                    context.stores.insert(store.clone(), def.builder.build());
                }
            }
        }
        let resolve = |topic: &str| resolve_topic(graph, application_id, topic);
        let mut inputs: HashMap<usize, Box<dyn Any>> = HashMap::new();
        let mut sources = Vec::new();
        let mut processors = HashMap::new();
        // Children always have larger indexes than their parents, so walking
        // backwards builds every child before the parents that hold it.
        for &id in members.iter().rev() {
            let def = &graph.nodes[id];
            let info = NodeInfo {
                name: Rc::from(def.name.as_str()),
                index: id,
                stores: def.stores.clone(),
            };
            let child_names: Vec<Rc<str>> = def
                .children
                .iter()
                .map(|&c| Rc::from(graph.nodes[c].name.as_str()))
                .collect();
            let children: Vec<(Rc<str>, &dyn Any)> = def
                .children
                .iter()
                .zip(child_names)
                .map(|(c, name)| {
                    let input = inputs.get(c).map(|b| b.as_ref()).ok_or_else(|| {
                        StreamsError::Internal(format!(
                            "child {name:?} of {:?} was not built",
                            def.name
                        ))
                    })?;
                    Ok((name, input))
                })
                .collect::<Result<_, StreamsError>>()?;
            match &def.kind {
                NodeKind::Source { topics, factory } => {
                    let matcher = match topics {
                        SourceTopics::Names(names) => {
                            TopicMatcher::Names(names.iter().map(|t| resolve(t)).collect())
                        }
                        SourceTopics::Pattern(p) => TopicMatcher::Pattern(p.regex.clone()),
                    };
                    sources.push((matcher, factory(info, &children)?));
                }
                NodeKind::Processor { factory } => {
                    let (input, handle) = factory(info, &children)?;
                    inputs.insert(id, input);
                    processors.insert(id, handle);
                }
                NodeKind::Sink { factory, .. } => {
                    inputs.insert(id, factory(info, &resolve));
                }
            }
        }
        let init_order: Vec<usize> = members
            .iter()
            .copied()
            .filter(|id| processors.contains_key(id))
            .collect();
        let async_nodes = init_order
            .iter()
            .copied()
            .filter(|id| processors[id].is_async())
            .collect();
        let mut built = Self {
            sources,
            seen_topics: Vec::new(),
            processors,
            init_order,
            async_nodes,
            context,
            store_context,
        };
        // Stores open before any processor asks for one.
        for store in built.context.stores.values() {
            store.init(&built.store_context)?;
        }
        for id in built.init_order.clone() {
            built.processors[&id].init(&mut built.context)?;
        }
        Ok(built)
    }

    /// The task's shared context: clocks, output, stores.
    pub fn context(&mut self) -> &mut TaskContext {
        &mut self.context
    }

    /// The task's context, read-only.
    pub fn context_view(&self) -> &TaskContext {
        &self.context
    }

    /// Whether a source of this task reads `topic` (full name).
    pub fn reads(&self, topic: &str) -> bool {
        self.sources.iter().any(|(m, _)| m.matches(topic))
    }

    /// The names of the task's source nodes, in the order of
    /// [`TaskTopology::source_index`].
    pub fn source_names(&self) -> Vec<String> {
        self.sources
            .iter()
            .map(|(_, s)| s.name().to_string())
            .collect()
    }

    /// Which source node reads `topic`.
    pub fn source_index(&self, topic: &str) -> Option<usize> {
        self.seen_source(topic)
            .or_else(|| self.matching_source(topic))
    }

    /// The first source whose topics `topic` matches, by name or pattern.
    fn matching_source(&self, topic: &str) -> Option<usize> {
        self.sources.iter().position(|(m, _)| m.matches(topic))
    }

    /// The source index of `topic` if it is the very name (same address
    /// and length) of a topic processed before. Sound because
    /// `seen_topics` holds each name's `Arc`: while it lives, no other
    /// string can occupy its bytes, so an equal address and length is the
    /// same name.
    fn seen_source(&self, topic: &str) -> Option<usize> {
        self.seen_topics
            .iter()
            .find(|(name, _)| {
                std::ptr::eq(name.as_ptr(), topic.as_ptr()) && name.len() == topic.len()
            })
            .map(|(_, index)| *index)
    }

    /// The extractor the source of `topic` was given, if any (borrowed:
    /// asked per record, where a clone was two atomic updates).
    pub fn timestamp_extractor(&self, topic: &str) -> Option<&dyn TimestampExtractor> {
        self.source_index(topic)
            .and_then(|i| self.sources[i].1.timestamp_extractor())
    }

    /// The source node of `topic`, remembered by its shared name.
    fn source_for(&mut self, topic: &Arc<str>) -> Result<Rc<dyn SourceHandle>, StreamsError> {
        let index = match self.seen_source(topic) {
            Some(index) => index,
            None => {
                let index = self.matching_source(topic).ok_or_else(|| {
                    StreamsError::Internal(format!(
                        "task {} has no source for topic {topic:?}",
                        self.context.task_id
                    ))
                })?;
                // A pattern source may match many topics: remember a
                // bounded number (the rest are matched as before). A name
                // remembered already under another `Arc` (records made
                // one by one, as in tests) is not added again.
                if self.seen_topics.len() < MAX_SEEN_TOPICS
                    && !self.seen_topics.iter().any(|(name, _)| **name == **topic)
                {
                    self.seen_topics.push((topic.clone(), index));
                }
                index
            }
        };
        Ok(self.sources[index].1.clone())
    }

    /// Runs one record through the sub-topology with event time `timestamp`.
    /// Stream time is the caller's to advance.
    pub fn process(
        &mut self,
        record: ConsumedRecord,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        let source = self.source_for(&record.topic)?;
        self.store_context.set_record_timestamp(timestamp);
        self.store_context.set_record_headers(&record.headers);
        source.process(record, timestamp, &mut self.context)
    }

    /// Whether the sub-topology has async processors.
    pub fn has_async_nodes(&self) -> bool {
        !self.async_nodes.is_empty()
    }

    /// Applies one finished async call, from the first async processor
    /// that has one ready (its result runs through the nodes below it as a
    /// record would). Returns whether one was applied.
    pub fn apply_async_completion(&mut self) -> Result<bool, StreamsError> {
        for id in &self.async_nodes {
            if self.processors[id].apply_async_completion(&mut self.context, &self.store_context)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether [`TaskTopology::punctuate`] has anything to do for `kind`:
    /// a punctuation of that kind is scheduled, or one of any kind was
    /// cancelled and waits for a punctuate to drop it. A stream task asks
    /// after every record.
    pub fn schedules(&self, kind: PunctuationType) -> bool {
        self.context
            .punctuations
            .iter()
            .any(|p| p.cancelled || p.schedule.kind == kind)
    }

    /// Fires every punctuation of `kind` that is due at the task's stream
    /// time or wall clock; returns whether any fired.
    pub fn punctuate(&mut self, kind: PunctuationType) -> Result<bool, StreamsError> {
        let mut fired = false;
        let mut cursor = 0;
        while let Some((node, id, at)) = self.context.next_due_punctuation(kind, &mut cursor) {
            let previous = self.context.metadata.take();
            self.store_context.set_record_timestamp(at);
            // A punctuation's writes carry no record's headers.
            self.store_context
                .set_record_headers(&kstreams_record::Headers::new());
            let result = self.processors[&node].punctuate(id, at, &mut self.context);
            self.context.metadata = previous;
            result?;
            fired = true;
        }
        self.context.punctuations.retain(|p| !p.cancelled);
        Ok(fired)
    }

    /// Flushes the task at commit: each processor's [`crate::Processor::flush`]
    /// in the order they were added (the DSL's operators write their caches
    /// down and forward what they held back), then every store (caches
    /// write down, engines flush).
    pub fn flush(&mut self) -> Result<(), StreamsError> {
        for id in &self.init_order {
            self.processors[id].flush(&mut self.context)?;
        }
        for store in self.context.stores.values() {
            store.lifecycle.borrow_mut().flush()?;
        }
        Ok(())
    }

    /// Closes processors (in the order they were added) and stores; a
    /// caching store writes its dirty entries down first.
    pub fn close(&mut self) {
        self.close_with(|store| store.close());
    }

    /// Closes the task dirty (Kafka Streams' `StreamTask#closeDirty`), when
    /// its work since the last commit is thrown away: an aborted
    /// transaction, or partitions lost to another member. Processors close
    /// as in [`TaskTopology::close`] (Kafka Streams' `closeTopology` runs at
    /// the suspend of a clean and a dirty close alike; `Processor::close`
    /// has no context, so it forwards nothing either way). Stores close with
    /// [`StateStore::close_dirty`]: what their caches hold is dropped, so
    /// nothing reaches the engines or the changelogs.
    pub fn close_dirty(&mut self) {
        self.close_with(|store| store.close_dirty());
    }

    fn close_with(&mut self, close: fn(&mut dyn StateStore) -> Result<(), kstreams_state::Error>) {
        for id in &self.init_order {
            self.processors[id].close();
        }
        for store in self.context.stores.values() {
            // The task is going away: a store that fails to close has
            // nothing left that a caller could save.
            let _ = close(&mut *store.lifecycle.borrow_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use kstreams_record::Headers;

    use super::*;
    use crate::StreamsBuilder;

    fn record(topic: &Arc<str>, offset: i64, value: &str) -> ConsumedRecord {
        ConsumedRecord {
            topic: topic.clone(),
            partition: 0,
            offset,
            timestamp: offset,
            key: Some(b"k".to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: Headers::new(),
        }
    }

    #[test]
    fn records_reach_their_topics_source_whether_their_name_is_shared_or_not() {
        let builder = StreamsBuilder::new();
        let a = builder.stream::<String, String>("a");
        let b = builder
            .stream::<String, String>("b")
            .map_values(|v| format!("b:{v}"));
        a.merge(&b).to("out");
        let topology = builder.build().unwrap();
        let task = TaskId {
            subtopology: 0,
            partition: 0,
        };
        let mut instance = TaskTopology::new(&topology, task, "app", 0).unwrap();
        let (shared_a, shared_b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        // Alternating topics through the remembered names, then names
        // equal to them in other allocations (as records made one by one).
        let records = [
            record(&shared_a, 0, "1"),
            record(&shared_b, 0, "2"),
            record(&shared_a, 1, "3"),
            record(&Arc::from("b"), 1, "4"),
            record(&Arc::from("a"), 2, "5"),
            record(&shared_b, 2, "6"),
        ];
        for r in records {
            let timestamp = r.timestamp;
            instance.process(r, timestamp).unwrap();
        }
        let values: Vec<String> = instance
            .context()
            .drain_output()
            .into_iter()
            .map(|r| String::from_utf8(r.value.unwrap()).unwrap())
            .collect();
        assert_eq!(values, ["1", "b:2", "3", "b:4", "5", "b:6"]);
        assert_eq!(instance.seen_topics.len(), 2, "one entry per topic");
        assert_eq!(instance.source_index("a"), instance.source_index(&shared_a));
        assert_ne!(instance.source_index("a"), instance.source_index("b"));
        assert_eq!(instance.source_index("c"), None);
    }
}
