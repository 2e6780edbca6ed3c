//! Replica placement APIs: AlterReplicaLogDirs (34), answered as a one-directory Kafka 4.1
//! broker answers it ("move to the directory it is in" succeeds at once); AlterPartitionReassignments
//! (45), decided by the controller (forwarded by a non-leading node), and
//! ListPartitionReassignments (46), read from the metadata image.

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

use super::error;
use crate::broker::Broker;

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

/// AlterPartitionReassignments, decided by the controller (`Controller::alter_partition_reassignments`,
/// Kafka's rules): per partition NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
/// NO_REASSIGNMENT_IN_PROGRESS, with Kafka's messages; without an answer from the controller
/// every partition carries the driver's code. `allow_replication_factor_change` (v1) is echoed,
/// not enforced.
pub async fn alter_partition_reassignments(
    broker: Arc<Broker>,
    version: i16,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    use crate::controller::TopicPartition;
    let wanted: Vec<(TopicPartition, Option<Vec<i32>>)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    TopicPartition {
                        topic: t.name.as_str().to_string(),
                        partition: p.partition_index,
                    },
                    p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect()),
                )
            })
        })
        .collect();
    let decided = broker
        .controller_run(move |c, _| c.alter_partition_reassignments(&wanted))
        .await;
    // An empty message is Kafka's null (NO_REASSIGNMENT_IN_PROGRESS carries none).
    let mut answers = match decided {
        Ok(a) => a
            .into_iter()
            .map(|(_, r)| r.map_err(|e| (e.code(), Some(e.message).filter(|m| !m.is_empty()))))
            .collect(),
        Err(e) => {
            vec![Err((e.code(), None)); request.topics.iter().map(|t| t.partitions.len()).sum()]
        }
    }
    .into_iter();
    let responses = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let (code, message) = match answers.next() {
                        Some(Ok(())) => (error::NONE, None),
                        Some(Err(e)) => e,
                        None => (error::UNKNOWN_SERVER_ERROR, None),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
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
    if version >= 1 {
        response.allow_replication_factor_change = request.allow_replication_factor_change;
    }
    response
}

/// ListPartitionReassignments from the metadata image: every partition with adding or removing
/// replicas (of the named topics and partitions when given; unknown ones are left out, as Kafka
/// does).
pub fn list_partition_reassignments(
    broker: &Arc<Broker>,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    use kafka_protocol::messages::list_partition_reassignments_response::{
        OngoingPartitionReassignment, OngoingTopicReassignment,
    };
    let image = broker.image();
    let wanted: Vec<(String, Option<Vec<i32>>)> = match request.topics {
        Some(ts) => ts
            .into_iter()
            .map(|t| (t.name.as_str().to_string(), Some(t.partition_indexes)))
            .collect(),
        None => image.topics().map(|t| (t.name.clone(), None)).collect(),
    };
    let mut topics = Vec::new();
    for (name, indexes) in wanted {
        let Some(t) = image.topic(&name) else {
            continue;
        };
        let ids = |v: &[i32]| v.iter().map(|b| (*b).into()).collect();
        let partitions: Vec<_> = t
            .partitions
            .iter()
            .filter(|(i, _)| indexes.as_ref().is_none_or(|w| w.contains(i)))
            .filter(|(_, p)| !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty())
            .map(|(i, p)| {
                OngoingPartitionReassignment::default()
                    .with_partition_index(*i)
                    .with_replicas(ids(&p.replicas))
                    .with_adding_replicas(ids(&p.adding_replicas))
                    .with_removing_replicas(ids(&p.removing_replicas))
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                OngoingTopicReassignment::default()
                    .with_name(StrBytes::from_string(name).into())
                    .with_partitions(partitions),
            );
        }
    }
    ListPartitionReassignmentsResponse::default()
        .with_error_code(error::NONE)
        .with_error_message(None)
        .with_topics(topics)
}
