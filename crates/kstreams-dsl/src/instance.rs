//! A sub-topology instantiated for one task.

use std::any::Any;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Timestamp;
use kstreams_state::StoreContext;
use kstreams_time::{PunctuationType, TimestampExtractor};

use crate::forwarding::NodeInfo;
use crate::graph::{resolve_topic, NodeKind, SourceTopics};
use crate::nodes::{NodeHandle, SourceHandle};
use crate::task_context::{ConsumedRecord, TaskContext, TaskId};
use crate::{StreamsError, Topology};

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
        self.sources.iter().position(|(m, _)| m.matches(topic))
    }

    /// The extractor the source of `topic` was given, if any.
    pub fn timestamp_extractor(&self, topic: &str) -> Option<Arc<dyn TimestampExtractor>> {
        self.source_for(topic)
            .ok()
            .and_then(|s| s.timestamp_extractor())
    }

    fn source_for(&self, topic: &str) -> Result<&Rc<dyn SourceHandle>, StreamsError> {
        self.sources
            .iter()
            .find(|(m, _)| m.matches(topic))
            .map(|(_, s)| s)
            .ok_or_else(|| {
                StreamsError::Internal(format!(
                    "task {} has no source for topic {topic:?}",
                    self.context.task_id
                ))
            })
    }

    /// Runs one record through the sub-topology with event time `timestamp`.
    /// Stream time is the caller's to advance.
    pub fn process(
        &mut self,
        record: ConsumedRecord,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        let source = self.source_for(&record.topic)?.clone();
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

    /// Fires every punctuation of `kind` that is due at the task's stream
    /// time or wall clock; returns whether any fired.
    pub fn punctuate(&mut self, kind: PunctuationType) -> Result<bool, StreamsError> {
        let now = match kind {
            PunctuationType::StreamTime => self.context.stream_time,
            PunctuationType::WallClockTime => self.context.wall_clock,
        };
        let mut fired = false;
        let mut i = 0;
        // A punctuator may schedule or cancel others; index so the list can grow.
        while i < self.context.punctuations.len() {
            let p = &mut self.context.punctuations[i];
            i += 1;
            if p.cancelled || p.schedule.kind != kind {
                continue;
            }
            let Some(at) = p.schedule.fire_if_due(now) else {
                continue;
            };
            let (node, id) = (p.node, p.id);
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

    /// Closes processors (in the order they were added) and stores.
    pub fn close(&mut self) {
        for id in &self.init_order {
            self.processors[id].close();
        }
        for store in self.context.stores.values() {
            // The task is going away: a store that fails to close has
            // nothing left that a caller could save.
            let _ = store.lifecycle.borrow_mut().close();
        }
    }
}
