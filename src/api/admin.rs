//! Topic administration and log lifecycle APIs, and their dispatch:
//! CreatePartitions (37), DeleteRecords (21), OffsetForLeaderEpoch (23), ElectLeaders (43) here;
//! DescribeConfigs / AlterConfigs / IncrementalAlterConfigs in [`super::configs`];
//! DescribeCluster / DescribeTopicPartitions / DescribeLogDirs in [`super::cluster_info`];
//! WriteTxnMarkers / DescribeProducers in [`super::txn_log`];
//! AlterReplicaLogDirs / AlterPartitionReassignments / ListPartitionReassignments in
//! [`super::replicas`]; ListConfigResources in [`super::configs`]; UpdateFeatures in
//! [`super::features`]; DescribeUserScramCredentials in [`super::scram`].
//!
//! On this single node every partition is led by this broker at leader epoch 0 with itself as the
//! only replica, which fixes the answers of the election and epoch APIs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, DeleteRecordsRequest,
    DeleteRecordsResponse, ElectLeadersRequest, ElectLeadersResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::{
    cluster_info, configs, error, features, replicas, txn_log, CloseReason, Reply, RequestContext,
};
use crate::broker::Broker;
use crate::cluster::assignment::create_partitions_assignment;
use crate::controller::CreatePartitionsTopic;
use crate::replica::partition::DeleteRecordsError;

/// API keys this module dispatches.
pub const HANDLED: &[ApiKey] = &[
    ApiKey::DeleteRecords,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DescribeConfigs,
    ApiKey::AlterConfigs,
    ApiKey::DescribeLogDirs,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DescribeCluster,
    ApiKey::DescribeTopicPartitions,
    ApiKey::WriteTxnMarkers,
    ApiKey::DescribeProducers,
    ApiKey::AlterReplicaLogDirs,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::ListConfigResources,
    ApiKey::UpdateFeatures,
    ApiKey::DescribeUserScramCredentials,
];

fn decode<T: Decodable>(ctx: &RequestContext, frame: &mut Bytes) -> Result<T, CloseReason> {
    let flexible = crate::protocol::header::header_is_flexible(ctx.api_key, ctx.api_version);
    crate::protocol::bounded::decode(frame, ctx.api_version, flexible).map_err(|e| {
        CloseReason::Malformed {
            key: ctx.api_key,
            version: ctx.api_version,
            reason: e.to_string(),
        }
    })
}

fn respond(ctx: &RequestContext, response: &impl Encodable) -> Result<Reply, CloseReason> {
    super::encode_response(ctx, response).map(|f| Reply::Now(Some(f)))
}

/// Decodes and handles one request of a key in [`HANDLED`].
pub fn dispatch(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    frame: &mut Bytes,
) -> Result<Reply, CloseReason> {
    match ctx.api_key {
        ApiKey::CreatePartitions => {
            let request = decode(ctx, frame)?;
            Ok(super::barrier(
                ctx.clone(),
                create_partitions(broker.clone(), request),
            ))
        }
        ApiKey::DeleteRecords => respond(ctx, &delete_records(broker, decode(ctx, frame)?)),
        ApiKey::OffsetForLeaderEpoch => {
            respond(ctx, &offset_for_leader_epoch(broker, decode(ctx, frame)?))
        }
        ApiKey::ElectLeaders => {
            let request = decode(ctx, frame)?;
            Ok(super::barrier(
                ctx.clone(),
                elect_leaders(broker.clone(), ctx.api_version, request),
            ))
        }
        ApiKey::DescribeConfigs => {
            respond(ctx, &configs::describe(broker, ctx, decode(ctx, frame)?))
        }
        // On the blocking pool: a topic change waits for the controller, broker and group
        // configs write files.
        ApiKey::AlterConfigs => {
            let (broker, request) = (broker.clone(), decode(ctx, frame)?);
            let forwarded = ctx.forwarded;
            super::on_blocking_pool(ctx.clone(), move || {
                configs::alter(&broker, request, forwarded)
            })
        }
        ApiKey::IncrementalAlterConfigs => {
            let (broker, request) = (broker.clone(), decode(ctx, frame)?);
            let forwarded = ctx.forwarded;
            super::on_blocking_pool(ctx.clone(), move || {
                configs::incremental_alter(&broker, request, forwarded)
            })
        }
        ApiKey::DescribeUserScramCredentials => {
            respond(ctx, &super::scram::describe(&decode(ctx, frame)?))
        }
        ApiKey::DescribeCluster => respond(
            ctx,
            &cluster_info::describe_cluster(broker, ctx, decode(ctx, frame)?),
        ),
        ApiKey::DescribeTopicPartitions => respond(
            ctx,
            &cluster_info::describe_topic_partitions(broker, decode(ctx, frame)?),
        ),
        ApiKey::DescribeLogDirs => respond(
            ctx,
            &cluster_info::describe_log_dirs(broker, ctx, decode(ctx, frame)?),
        ),
        ApiKey::WriteTxnMarkers => Ok(txn_log::write_txn_markers(
            broker,
            ctx.clone(),
            decode(ctx, frame)?,
        )),
        ApiKey::DescribeProducers => respond(
            ctx,
            &txn_log::describe_producers(broker, decode(ctx, frame)?),
        ),
        ApiKey::AlterReplicaLogDirs => respond(
            ctx,
            &replicas::alter_replica_log_dirs(broker, decode(ctx, frame)?),
        ),
        ApiKey::AlterPartitionReassignments => {
            let request = decode(ctx, frame)?;
            Ok(super::barrier(
                ctx.clone(),
                replicas::alter_partition_reassignments(broker.clone(), ctx.api_version, request),
            ))
        }
        ApiKey::ListPartitionReassignments => respond(
            ctx,
            &replicas::list_partition_reassignments(broker, decode(ctx, frame)?),
        ),
        ApiKey::ListConfigResources => respond(
            ctx,
            &configs::list_config_resources(broker, ctx, decode(ctx, frame)?),
        ),
        ApiKey::UpdateFeatures => {
            let request = decode(ctx, frame)?;
            Ok(super::barrier(
                ctx.clone(),
                features::update_features(broker.clone(), ctx.api_version, request),
            ))
        }
        key => Err(CloseReason::UnsupportedVersion {
            key,
            version: ctx.api_version,
        }),
    }
}

/// CreatePartitions: grows topics (never shrinks). Each topic is checked here with Kafka's
/// messages, then the controller places and writes the new partitions in one command (answered
/// once the image has them).
pub async fn create_partitions(
    broker: Arc<Broker>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = request
        .topics
        .iter()
        .filter(|t| !seen.insert(t.name.as_str()))
        .map(|t| t.name.as_str().to_string())
        .collect();
    let node = broker.identity.node_id;
    let mut checked = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.as_str().to_string();
        let outcome: Result<CreatePartitionsTopic, (i16, Option<String>)> =
            if duplicates.contains(&name) {
                Err((error::INVALID_REQUEST, Some("Duplicate topic name.".into())))
            } else {
                check_count(&broker, &name, t.count).and_then(|()| {
                    check_assignments(&broker, &name, t.count, t.assignments.as_deref(), node).map(
                        |assignments| CreatePartitionsTopic {
                            name: name.clone(),
                            count: t.count,
                            assignments,
                        },
                    )
                })
            };
        checked.push((t.name, outcome));
    }
    let wanted: Vec<CreatePartitionsTopic> = checked
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().cloned())
        .collect();
    let mut decided: BTreeMap<String, Result<(), (i16, Option<String>)>> = BTreeMap::new();
    if !request.validate_only && !wanted.is_empty() {
        let names: Vec<String> = wanted.iter().map(|t| t.name.clone()).collect();
        match broker
            .controller_run(move |c, ctx| c.create_partitions(&wanted, ctx.seed))
            .await
        {
            Ok(answers) => {
                for (name, r) in answers {
                    if r.is_ok() {
                        tracing::info!("topic {name}: partitions added");
                    }
                    decided.insert(name, r.map_err(|e| (e.code(), Some(e.message))));
                }
            }
            Err(e) => {
                tracing::warn!("create partitions for {names:?}: {e}");
                for n in names {
                    decided.insert(n, Err((e.code(), Some(e.to_string()))));
                }
            }
        }
    }
    let results = checked
        .into_iter()
        .map(|(name, outcome)| {
            let outcome = outcome.and_then(|t| {
                if request.validate_only {
                    return Ok(());
                }
                decided
                    .remove(&t.name)
                    .unwrap_or(Err((error::UNKNOWN_SERVER_ERROR, None)))
            });
            let (code, message) = match outcome {
                Ok(()) => (error::NONE, None),
                Err(e) => e,
            };
            CreatePartitionsTopicResult::default()
                .with_name(name)
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

/// Kafka's error code and message for one CreatePartitions topic.
type TopicFailure = (i16, Option<String>);

/// The new count against the image's (Kafka only increases; messages are Kafka's).
fn check_count(broker: &Broker, name: &str, count: i32) -> Result<(), (i16, Option<String>)> {
    let image = broker.image();
    let Some(topic) = image.topic(name) else {
        return Err((error::UNKNOWN_TOPIC_OR_PARTITION, None));
    };
    let current = topic.partition_count();
    let invalid = |m: String| Err((error::INVALID_PARTITIONS, Some(m)));
    if count < current {
        return invalid(format!(
            "The topic {name} currently has {current} partition(s); {count} would not be an increase."
        ));
    }
    if count == current {
        return invalid(format!("Topic already has {current} partition(s)."));
    }
    if count > crate::api::topics::MAX_PARTITIONS_PER_TOPIC {
        return invalid(format!(
            "Number of partitions was set to an invalid value {count}; it must be at most {}.",
            crate::api::topics::MAX_PARTITIONS_PER_TOPIC
        ));
    }
    Ok(())
}

/// Manual assignments for new partitions: one list per new partition, each valid with the
/// topic's replication factor (1) and naming only registered brokers (this node).
/// Returns the lists (None: the controller places them).
fn check_assignments(
    broker: &Broker,
    name: &str,
    count: i32,
    assignments: Option<
        &[kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment],
    >,
    node: i32,
) -> Result<Option<Vec<Vec<i32>>>, TopicFailure> {
    let image = broker.image();
    let (Some(assignments), Some(topic)) = (assignments, image.topic(name)) else {
        return Ok(None);
    };
    let current = topic.partition_count();
    let lists: Vec<Vec<i32>> = assignments
        .iter()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    if count <= current {
        return Ok(Some(lists)); // the count check reports this one
    }
    create_partitions_assignment(count - current, &lists, &[node], 1)
        .map(|()| Some(lists))
        .map_err(|e| {
            let (code, message) = super::topics::assignment_error(e);
            (code, Some(message))
        })
}

/// DeleteRecords: moves log start offsets (-1 = the high watermark); beyond the high watermark
/// is OFFSET_OUT_OF_RANGE; topics without `delete` in `cleanup.policy` refuse (POLICY_VIOLATION).
pub fn delete_records(
    broker: &Arc<Broker>,
    request: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut moved = false;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.replicas.topic(t.name.as_str());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let Some(topic) = &topic else {
                        // In a cluster a topic need not have a replica here: the leader is asked.
                        let code = match broker.image().topic(t.name.as_str()) {
                            Some(_) => error::NOT_LEADER_OR_FOLLOWER,
                            None => error::UNKNOWN_TOPIC_OR_PARTITION,
                        };
                        return result.with_error_code(code);
                    };
                    let partition = match super::image_view::leader_partition(
                        broker,
                        &topic.name,
                        p.partition_index,
                    ) {
                        Ok(p) => p,
                        Err(code) => return result.with_error_code(code),
                    };
                    if !topic.config.cleanup_delete {
                        return result.with_error_code(error::POLICY_VIOLATION);
                    }
                    let before = partition.offsets().log_start_offset;
                    match partition.delete_records_before(p.offset) {
                        Ok(low) => {
                            moved |= low != before;
                            result.with_error_code(error::NONE).with_low_watermark(low)
                        }
                        Err(DeleteRecordsError::OffsetOutOfRange) => {
                            result.with_error_code(error::OFFSET_OUT_OF_RANGE)
                        }
                        Err(DeleteRecordsError::Log(e)) => {
                            tracing::error!(
                                "delete records {}-{}: {e}",
                                topic.name,
                                p.partition_index
                            );
                            result.with_error_code(error::KAFKA_STORAGE_ERROR)
                        }
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    if moved {
        // The new log start offsets must survive a restart.
        if let Err(e) = broker.replicas.checkpoint(false) {
            tracing::warn!("checkpoint after DeleteRecords failed: {e}");
        }
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// OffsetForLeaderEpoch: the only epoch is 0 (from offset 0), so epoch 0 ends at the log end
/// offset and any other epoch is unknown (-1, -1). `current_leader_epoch` is fenced as Kafka does.
pub fn offset_for_leader_epoch(
    broker: &Arc<Broker>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    // Answered by the leader only (Kafka's fetchOnlyFromLeader), from its epoch
                    // cache (`leader-epoch-checkpoint`).
                    let partition = match super::image_view::leader_partition(
                        broker,
                        t.topic.as_str(),
                        p.partition,
                    ) {
                        Ok(partition) => partition,
                        Err(code) => return r.with_error_code(code),
                    };
                    let epoch = partition.leader_epoch();
                    if p.current_leader_epoch != -1 && p.current_leader_epoch > epoch {
                        return r.with_error_code(error::UNKNOWN_LEADER_EPOCH);
                    }
                    if p.current_leader_epoch != -1 && p.current_leader_epoch < epoch {
                        return r.with_error_code(error::FENCED_LEADER_EPOCH);
                    }
                    let end = partition.end_offset_for_epoch(p.leader_epoch);
                    r.with_error_code(error::NONE)
                        .with_leader_epoch(end.leader_epoch)
                        .with_end_offset(end.end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// ElectLeaders (PREFERRED 0, UNCLEAN 1), decided by the controller (Kafka's
/// `ReplicationControlManager.electLeaders`): per named partition NONE when a leader was
/// elected, ELECTION_NOT_NEEDED when the wanted leader already leads, PREFERRED_LEADER_NOT_AVAILABLE
/// / ELIGIBLE_LEADERS_NOT_AVAILABLE when no eligible replica lives, UNKNOWN_TOPIC_OR_PARTITION;
/// "all partitions" (null) lists only the partitions whose leader changed, as Kafka does.
pub async fn elect_leaders(
    broker: Arc<Broker>,
    version: i16,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    use crate::controller::partition_change::Election;
    use crate::controller::TopicPartition;
    let mut response = ElectLeadersResponse::default();
    if version >= 1 {
        response.error_code = error::NONE;
    }
    let election = match request.election_type {
        0 => Some(Election::Preferred),
        1 => Some(Election::Unclean),
        _ => None,
    };
    let asked: Option<Vec<(kafka_protocol::messages::TopicName, Vec<i32>)>> = request
        .topic_partitions
        .map(|ts| ts.into_iter().map(|t| (t.topic, t.partitions)).collect());
    let result = |code: i16, message: Option<String>, p: i32| {
        PartitionResult::default()
            .with_partition_id(p)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
    };
    let Some(election) = election else {
        // An unknown election type refuses every named partition.
        let message = format!("Unknown election type {}", request.election_type);
        response.replica_election_results = asked
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, ps)| {
                ReplicaElectionResult::default()
                    .with_topic(topic)
                    .with_partition_result(
                        ps.iter()
                            .map(|&p| result(error::INVALID_REQUEST, Some(message.clone()), p))
                            .collect(),
                    )
            })
            .collect();
        return response;
    };
    let wanted: Option<Vec<TopicPartition>> = asked.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|(t, ps)| {
                ps.iter().map(|&p| TopicPartition {
                    topic: t.as_str().to_string(),
                    partition: p,
                })
            })
            .collect()
    });
    let decided = broker
        .controller_run(move |c, _| c.elect_leaders(election, wanted.as_deref()))
        .await;
    let answers = match decided {
        Ok(a) => a,
        Err(e) => {
            // No controller decision: every named partition carries the driver's code.
            let code = e.code();
            response.replica_election_results = asked
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, ps)| {
                    ReplicaElectionResult::default()
                        .with_topic(topic)
                        .with_partition_result(ps.iter().map(|&p| result(code, None, p)).collect())
                })
                .collect();
            return response;
        }
    };
    // Group the answers by topic, in the order they came.
    let mut by_topic: Vec<(String, Vec<PartitionResult>)> = Vec::new();
    for (tp, r) in answers {
        let pr = match r {
            Ok(()) => result(error::NONE, None, tp.partition),
            Err(e) => result(e.code(), Some(e.message.clone()), tp.partition),
        };
        match by_topic.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, list)) => list.push(pr),
            None => by_topic.push((tp.topic, vec![pr])),
        }
    }
    response.replica_election_results = by_topic
        .into_iter()
        .map(|(topic, partition_result)| {
            ReplicaElectionResult::default()
                .with_topic(StrBytes::from_string(topic).into())
                .with_partition_result(partition_result)
        })
        .collect();
    response
}
