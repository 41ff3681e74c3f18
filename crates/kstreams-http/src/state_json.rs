//! `/state`: the instance, its threads and tasks as JSON, with the stores
//! each task holds (read from the topology: a task holds the stores of its
//! sub-topology).

use std::collections::BTreeMap;

use kstreams_dsl::{NodeDescriptionKind, TopologyDescription};
use kstreams_runtime::kafka::{LocalMetadata, RestoreProgress, State, TaskMetadata};
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

/// One restoration in flight, as `/state` lists it.
fn restore_json(r: &RestoreProgress) -> Value {
    json!({
        "kind": r.kind.name(),
        "task_id": r.task_id,
        "store": r.store,
        "topic": r.partition.topic,
        "partition": r.partition.partition,
        "starting_offset": r.starting_offset,
        "ending_offset": r.ending_offset,
        "restored": r.restored,
        "total": r.total(),
        "remaining": r.remaining(),
        "records_per_second": r.rate(),
        "seconds_left": r.time_left().map(|t| t.as_secs_f64()),
    })
}

/// One task, active or standby, as `/state` lists it: its partitions with
/// their lag (none for a standby) and the stores it holds.
fn task_json(task: &TaskMetadata, stores: &BTreeMap<u32, Vec<String>>) -> Value {
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
        "restoring": task.restoring,
        "stores": stores.get(&task.subtopology).cloned().unwrap_or_default(),
    })
}

/// The JSON document of `/state`: `restoring` are the restorations in
/// flight (the same the restore listener and metrics hear about).
pub(crate) fn state_json(
    metadata: &LocalMetadata,
    stores: &BTreeMap<u32, Vec<String>>,
    restoring: &[RestoreProgress],
) -> Value {
    let threads: Vec<Value> = metadata
        .threads
        .iter()
        .map(|thread| {
            let tasks = |tasks: &[TaskMetadata]| -> Vec<Value> {
                tasks.iter().map(|task| task_json(task, stores)).collect()
            };
            json!({
                "thread_name": thread.thread_name,
                "thread_state": thread.thread_state.name(),
                "restoring": thread.restoring,
                "active_tasks": tasks(&thread.active_tasks),
                "standby_tasks": tasks(&thread.standby_tasks),
                "consumer_client_id": thread.consumer_client_id,
                "restore_consumer_client_id": thread.restore_consumer_client_id,
                "producer_client_ids": thread.producer_client_ids,
            })
        })
        .collect();
    json!({
        "state": state_name(metadata.state),
        "ready": metadata.not_ready_reason().is_none(),
        "paused": metadata.paused,
        "threads_configured": metadata.threads_configured,
        "threads_alive": metadata.threads_alive,
        "threads": threads,
        "restoring": restoring.iter().map(restore_json).collect::<Vec<_>>(),
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
            paused: true,
            threads: vec![ThreadMetadata {
                thread_name: "t-1".to_string(),
                standby_tasks: vec![TaskMetadata {
                    subtopology: 0,
                    partition: 2,
                    topic_partitions: vec![TaskPartition {
                        topic: "in".to_string(),
                        partition: 2,
                        lag: None,
                    }],
                    bootstrapping: false,
                    restoring: false,
                }],
                consumer_client_id: "t-1-consumer".to_string(),
                restore_consumer_client_id: "t-1-restore-consumer".to_string(),
                producer_client_ids: vec!["t-1-producer".to_string()],
                thread_state: kstreams_runtime::kafka::ThreadState::PartitionsAssigned,
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
                    restoring: false,
                }],
            }],
        };
        let stores = BTreeMap::from([(0, vec!["counts".to_string()])]);
        let restoring = [RestoreProgress {
            kind: kstreams_runtime::kafka::RestoreKind::Changelog,
            task_id: Some("0_1".to_string()),
            store: "counts".to_string(),
            partition: kstreams_runtime::kafka::TopicPartition::new("app-counts-changelog", 1),
            starting_offset: 100,
            ending_offset: 1100,
            restored: 250,
            elapsed: std::time::Duration::from_secs(1),
        }];
        let state = state_json(&metadata, &stores, &restoring);
        assert_eq!(state["state"], "RUNNING");
        assert_eq!(state["ready"], true);
        assert_eq!(state["threads"][0]["thread_state"], "PARTITIONS_ASSIGNED");
        let task = &state["threads"][0]["active_tasks"][0];
        assert_eq!(task["task_id"], "0_1");
        assert_eq!(task["lag"], 4);
        assert_eq!(task["partitions"][0]["topic"], "in");
        assert_eq!(task["stores"][0], "counts");
        assert_eq!(state["paused"], true);
        let standby = &state["threads"][0]["standby_tasks"][0];
        assert_eq!(standby["task_id"], "0_2");
        assert_eq!(standby["partitions"][0]["partition"], 2);
        assert_eq!(standby["stores"][0], "counts");
        assert_eq!(state["threads"][0]["consumer_client_id"], "t-1-consumer");
        assert_eq!(
            state["threads"][0]["producer_client_ids"][0],
            "t-1-producer"
        );
        let restore = &state["restoring"][0];
        assert_eq!(restore["kind"], "changelog");
        assert_eq!(restore["task_id"], "0_1");
        assert_eq!(restore["remaining"], 750);
        assert_eq!(restore["records_per_second"], 250.0);
        assert_eq!(restore["seconds_left"], 3.0);
    }
}
