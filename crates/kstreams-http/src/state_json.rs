//! `/state`: the instance, its threads and tasks as JSON, with the stores
//! each task holds (read from the topology: a task holds the stores of its
//! sub-topology).

use std::collections::BTreeMap;

use kstreams_dsl::{NodeDescriptionKind, TopologyDescription};
use kstreams_runtime::kafka::{LocalMetadata, State};
use serde_json::{json, Value};

/// The stores of each sub-topology, by id.
pub(crate) fn stores_by_subtopology(
    description: &TopologyDescription,
) -> BTreeMap<u32, Vec<String>> {
    description
        .subtopologies
        .iter()
        .map(|s| {
            let mut stores: Vec<String> = s
                .nodes
                .iter()
                .filter_map(|n| match &n.kind {
                    NodeDescriptionKind::Processor { stores } => Some(stores.iter().cloned()),
                    _ => None,
                })
                .flatten()
                .collect();
            stores.sort();
            stores.dedup();
            (s.id as u32, stores)
        })
        .collect()
}

/// A state as Kafka Streams spells it (`PENDING_SHUTDOWN`).
pub(crate) fn state_name(state: State) -> &'static str {
    match state {
        State::Created => "CREATED",
        State::Rebalancing => "REBALANCING",
        State::Running => "RUNNING",
        State::PendingShutdown => "PENDING_SHUTDOWN",
        State::NotRunning => "NOT_RUNNING",
        State::PendingError => "PENDING_ERROR",
        State::Error => "ERROR",
    }
}

/// The JSON document of `/state`.
pub(crate) fn state_json(metadata: &LocalMetadata, stores: &BTreeMap<u32, Vec<String>>) -> Value {
    let threads: Vec<Value> = metadata
        .threads
        .iter()
        .map(|thread| {
            let tasks: Vec<Value> = thread
                .active_tasks
                .iter()
                .map(|task| {
                    let partitions: Vec<Value> = task
                        .topic_partitions
                        .iter()
                        .map(|p| json!({"topic": p.topic, "partition": p.partition, "lag": p.lag}))
                        .collect();
                    json!({
                        "task_id": format!("{}_{}", task.subtopology, task.partition),
                        "partitions": partitions,
                        "lag": task.topic_partitions.iter().filter_map(|p| p.lag).sum::<i64>(),
                        "bootstrapping": task.bootstrapping,
                        "stores": stores.get(&task.subtopology).cloned().unwrap_or_default(),
                    })
                })
                .collect();
            json!({
                "thread_name": thread.thread_name,
                "restoring": thread.restoring,
                "active_tasks": tasks,
            })
        })
        .collect();
    json!({
        "state": state_name(metadata.state),
        "ready": metadata.not_ready_reason().is_none(),
        "threads_configured": metadata.threads_configured,
        "threads_alive": metadata.threads_alive,
        "threads": threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_runtime::kafka::{TaskMetadata, TaskPartition, ThreadMetadata};

    #[test]
    fn tasks_carry_partitions_lag_and_stores() {
        let metadata = LocalMetadata {
            state: State::Running,
            threads_configured: 1,
            threads_alive: 1,
            threads: vec![ThreadMetadata {
                thread_name: "t-1".to_string(),
                restoring: false,
                active_tasks: vec![TaskMetadata {
                    subtopology: 0,
                    partition: 1,
                    topic_partitions: vec![TaskPartition {
                        topic: "in".to_string(),
                        partition: 1,
                        lag: Some(4),
                    }],
                    bootstrapping: false,
                }],
            }],
        };
        let stores = BTreeMap::from([(0, vec!["counts".to_string()])]);
        let state = state_json(&metadata, &stores);
        assert_eq!(state["state"], "RUNNING");
        assert_eq!(state["ready"], true);
        let task = &state["threads"][0]["active_tasks"][0];
        assert_eq!(task["task_id"], "0_1");
        assert_eq!(task["lag"], 4);
        assert_eq!(task["partitions"][0]["topic"], "in");
        assert_eq!(task["stores"][0], "counts");
    }
}
