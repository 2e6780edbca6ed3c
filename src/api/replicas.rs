//! Replica placement APIs answered as a one-broker Kafka 4.1 answers them:
//! AlterReplicaLogDirs (34), AlterPartitionReassignments (45), ListPartitionReassignments (46).
//!
//! This node has one log directory and is the only replica of every partition, so nothing ever
//! moves: "move to the directory it is in" and "reassign to this broker" succeed at once, no
//! reassignment is ever in progress, and any other target gets Kafka's error and message.

use std::sync::Arc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::cluster::assignment::{validate_replicas, AssignmentError};

/// Whether `path` names this broker's log directory (as configured, or its canonical form).
fn is_log_dir(broker: &Broker, path: &str) -> bool {
    let configured = &broker.config.data_dir;
    let path = std::path::Path::new(path);
    if path == configured.as_path() {
        return true;
    }
    let absolute = std::path::absolute(configured).ok();
    let canonical = std::fs::canonicalize(configured).ok();
    absolute.as_deref() == Some(path) || canonical.as_deref() == Some(path)
}

/// AlterReplicaLogDirs: every partition already lives in the only log directory. A path that is
/// not it is LOG_DIR_NOT_FOUND; an unknown partition UNKNOWN_TOPIC_OR_PARTITION (Kafka's codes).
pub fn alter_replica_log_dirs(
    broker: &Arc<Broker>,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for dir in request.dirs {
        let known_dir = is_log_dir(broker, dir.path.as_str());
        for t in dir.topics {
            let partitions = t.partitions.iter().map(|&p| {
                let code = if !known_dir {
                    error::LOG_DIR_NOT_FOUND
                } else if broker.replicas.partition(t.name.as_str(), p).is_none() {
                    error::UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    error::NONE
                };
                AlterReplicaLogDirPartitionResult::default()
                    .with_partition_index(p)
                    .with_error_code(code)
            });
            // Kafka answers one entry per topic, however many directories named it.
            match results.iter_mut().find(|r| r.topic_name == t.name) {
                Some(r) => r.partitions.extend(partitions),
                None => {
                    let partitions = partitions.collect();
                    results.push(
                        AlterReplicaLogDirTopicResult::default()
                            .with_topic_name(t.name)
                            .with_partitions(partitions),
                    )
                }
            }
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// AlterPartitionReassignments: a target of exactly this broker is already in place (NONE); a
/// cancellation (null replicas) finds NO_REASSIGNMENT_IN_PROGRESS; other targets are checked as
/// Kafka checks manual assignments. Unknown topics and partitions get Kafka's messages.
pub fn alter_partition_reassignments(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let node = broker.identity.node_id;
    let responses = request
        .topics
        .into_iter()
        .map(|t| {
            let count = broker
                .image()
                .topic(t.name.as_str())
                .map(|t| t.partitions.len());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let r = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let (code, message) = reassign_one(
                        count,
                        t.name.as_str(),
                        p.partition_index,
                        p.replicas.as_deref(),
                        node,
                    );
                    r.with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    let mut response = AlterPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_responses(responses);
    if ctx.api_version >= 1 {
        response.allow_replication_factor_change = request.allow_replication_factor_change;
    }
    response
}

/// One partition of AlterPartitionReassignments on this node. `partitions` is the topic's
/// partition count when it exists.
fn reassign_one(
    partitions: Option<usize>,
    topic: &str,
    partition: i32,
    target: Option<&[kafka_protocol::messages::BrokerId]>,
    node: i32,
) -> (i16, Option<String>) {
    let Some(count) = partitions else {
        return (
            error::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("Unable to find a topic named {topic}.")),
        );
    };
    if usize::try_from(partition).map_or(true, |p| p >= count) {
        return (
            error::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("Unable to find partition {topic}:{partition}.")),
        );
    }
    let Some(target) = target else {
        return (error::NO_REASSIGNMENT_IN_PROGRESS, None);
    };
    let target: Vec<i32> = target.iter().map(|b| b.0).collect();
    // Every valid target on one broker is [node], the current replicas: nothing to move. (A
    // replication factor change is impossible here, so allow_replication_factor_change never
    // decides.)
    match validate_replicas(&target, &[node], None) {
        Ok(()) => (error::NONE, None),
        Err(AssignmentError::InvalidReplicaAssignment(m) | AssignmentError::InvalidRequest(m)) => {
            (error::INVALID_REPLICA_ASSIGNMENT, Some(m))
        }
    }
}

/// ListPartitionReassignments: nothing is ever being reassigned on this node, so the answer is
/// empty for every topic, named or not (as a one-broker Kafka answers).
pub fn list_partition_reassignments(
    _request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
        .with_error_code(error::NONE)
        .with_error_message(None)
}
