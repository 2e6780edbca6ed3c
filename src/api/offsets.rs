//! Committed offsets: OffsetCommit (8), OffsetFetch (9, v8+ several groups per request) and
//! OffsetDelete (47), forwarded to the group coordinator task.
//!
//! As Kafka's `KafkaApis`, OffsetCommit, OffsetDelete and TxnOffsetCommit first refuse the
//! partitions of topics this broker does not have, or past a topic's partition count, with
//! UNKNOWN_TOPIC_OR_PARTITION ([`take_unknown`]); only the rest reaches the coordinator, and the
//! refused partitions come first in the answer ([`merge_topics`]). An OffsetCommit left with no
//! partition is answered without the coordinator (so it creates no group); an OffsetDelete
//! always asks it (its group-level error wins, as in Kafka).

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
    OffsetFetchRequest, OffsetFetchResponse,
};

use super::error;
use super::group::later;
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::driver::Request;
use crate::group::offsets::FetchQuery;

/// Kafka's existence check of an offset request's partitions: removes from `partitions` (of
/// `topic`) those this broker does not have, and returns their indexes (answered
/// UNKNOWN_TOPIC_OR_PARTITION). Shared by OffsetCommit, OffsetDelete and TxnOffsetCommit.
pub(super) fn take_unknown<P>(
    broker: &Broker,
    topic: &str,
    partitions: &mut Vec<P>,
    index: impl Fn(&P) -> i32,
) -> Vec<i32> {
    let count = broker
        .image()
        .topic(topic)
        .map_or(0, |t| t.partition_count());
    let (known, missing): (Vec<P>, Vec<P>) = std::mem::take(partitions)
        .into_iter()
        .partition(|p| (0..count).contains(&index(p)));
    *partitions = known;
    missing.iter().map(index).collect()
}

/// As Kafka's response builders: the `refused` topics first, each topic of `answered` merged into
/// the refused entry of the same name (`absorb` appends its partitions) or added after them.
pub(super) fn merge_topics<T>(
    mut refused: Vec<T>,
    answered: Vec<T>,
    same: impl Fn(&T, &T) -> bool,
    absorb: impl Fn(&mut T, T),
) -> Vec<T> {
    for t in answered {
        match refused.iter_mut().find(|r| same(r, &t)) {
            Some(r) => absorb(r, t),
            None => refused.push(t),
        }
    }
    refused
}

pub fn commit(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    mut request: OffsetCommitRequest,
) -> Reply {
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    let mut refused = Vec::new();
    for t in &mut request.topics {
        let missing = take_unknown(broker, t.name.as_str(), &mut t.partitions, |p| {
            p.partition_index
        });
        if !missing.is_empty() {
            refused.push(
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        missing
                            .into_iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION)
                            })
                            .collect(),
                    ),
            );
        }
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    let handle = broker.groups.clone();
    let version = ctx.api_version;
    // Not coordinated here: every partition the coordinator would see answers the code (Kafka).
    let gate = if request.topics.is_empty() {
        Ok(())
    } else {
        super::group::group_shard(broker, request.group_id.as_str())
    };
    later(ctx, async move {
        if request.topics.is_empty() {
            return OffsetCommitResponse::default().with_topics(refused);
        }
        let fallback = failed_commit(&request, codes::COORDINATOR_NOT_AVAILABLE);
        if let Err(code) = gate {
            let mut response = failed_commit(&request, code);
            response.topics = merge_topics(
                refused,
                std::mem::take(&mut response.topics),
                |a, b| a.name == b.name,
                |a, b| a.partitions.extend(b.partitions),
            );
            return response;
        }
        let mut response = handle
            .call(|tx| Request::Commit(version, request, tx))
            .await
            .unwrap_or(fallback);
        response.topics = merge_topics(
            refused,
            std::mem::take(&mut response.topics),
            |a, b| a.name == b.name,
            |a, b| a.partitions.extend(b.partitions),
        );
        response
    })
}

/// Every partition of `request` answered with `code`.
fn failed_commit(request: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    use kafka_protocol::messages::offset_commit_response::*;
    OffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

pub fn fetch(broker: &Arc<Broker>, ctx: RequestContext, request: OffsetFetchRequest) -> Reply {
    let handle = broker.groups.clone();
    let version = ctx.api_version;
    // v7+: pending transactional offsets answer UNSTABLE_OFFSET_COMMIT instead.
    let require_stable = version >= 7 && request.require_stable;
    let queries: Vec<FetchQuery> = if version >= 8 {
        request
            .groups
            .iter()
            .map(|g| FetchQuery {
                group_id: g.group_id.as_str().to_string(),
                member_id: g.member_id.as_ref().map(|m| m.as_str().to_string()),
                member_epoch: g.member_epoch,
                require_stable,
                topics: g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.as_str().to_string(), t.partition_indexes.clone()))
                        .collect()
                }),
            })
            .collect()
    } else {
        vec![FetchQuery {
            group_id: request.group_id.as_str().to_string(),
            member_id: None,
            member_epoch: -1,
            require_stable,
            topics: request.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.as_str().to_string(), t.partition_indexes.clone()))
                    .collect()
            }),
        }]
    };
    let group_ids: Vec<_> = if version >= 8 {
        request.groups.iter().map(|g| g.group_id.clone()).collect()
    } else {
        vec![request.group_id.clone()]
    };
    // Groups coordinated elsewhere answer their error without the coordinator task.
    let gates: Vec<Result<(), i16>> = group_ids
        .iter()
        .map(|g| super::group::group_shard(broker, g.as_str()))
        .collect();
    let (queries, refused): (Vec<_>, Vec<_>) = queries
        .into_iter()
        .zip(&gates)
        .partition(|(_, gate)| gate.is_ok());
    let queries: Vec<FetchQuery> = queries.into_iter().map(|(q, _)| q).collect();
    let old_topics = refused_partitions(version, &refused);
    later(ctx, async move {
        let answer = if queries.is_empty() {
            Some(Vec::new())
        } else {
            handle.call(|tx| Request::Fetch(queries, tx)).await
        };
        let mut answered = answer
            .unwrap_or_else(|| {
                vec![(codes::COORDINATOR_NOT_AVAILABLE, Vec::new()); group_ids.len()]
            })
            .into_iter();
        // Back in request order, the refused groups carrying their code.
        let mut results: Vec<(i16, Vec<_>)> = gates
            .iter()
            .map(|gate| match gate {
                Ok(()) => answered
                    .next()
                    .unwrap_or((codes::COORDINATOR_NOT_AVAILABLE, Vec::new())),
                Err(code) => (*code, Vec::new()),
            })
            .collect();
        if version < 2 && matches!(gates.first(), Some(Err(_))) {
            // v0-1 have no group-level error: a refused group's is each requested partition's.
            if let Some(first) = results.first_mut() {
                first.1 = old_topics;
            }
        }
        let mut response = OffsetFetchResponse::default();
        if version >= 8 {
            response.groups = group_ids
                .into_iter()
                .zip(results)
                .map(|(id, (code, topics))| {
                    let topics = if code == codes::NONE {
                        topics
                    } else {
                        Vec::new()
                    };
                    OffsetFetchResponseGroup::default()
                        .with_group_id(id)
                        .with_topics(topics)
                        .with_error_code(code)
                })
                .collect();
            return response;
        }
        if version >= 2 {
            response.error_code = results.first().map_or(codes::NONE, |r| r.0);
        }
        response.topics = results
            .into_iter()
            .flat_map(|(_, topics)| topics)
            .map(|t| {
                OffsetFetchResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .into_iter()
                            .map(|p| {
                                let mut out = OffsetFetchResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_committed_offset(p.committed_offset)
                                    .with_metadata(p.metadata)
                                    .with_error_code(p.error_code);
                                if version >= 5 {
                                    out.committed_leader_epoch = p.committed_leader_epoch;
                                }
                                out
                            })
                            .collect(),
                    )
            })
            .collect();
        response
    })
}

/// For v0-1 (no group-level error field): the requested partitions of a refused group, each
/// carrying the group's code.
fn refused_partitions(
    version: i16,
    refused: &[(FetchQuery, &Result<(), i16>)],
) -> Vec<kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseTopics> {
    use kafka_protocol::messages::offset_fetch_response::{
        OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
    };
    let Some((query, Err(code))) = refused.first().filter(|_| version < 2) else {
        return Vec::new();
    };
    query
        .topics
        .iter()
        .flatten()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopics::default()
                .with_name(kafka_protocol::messages::TopicName(
                    kafka_protocol::protocol::StrBytes::from_string(name.clone()),
                ))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&p| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(*code)
                        })
                        .collect(),
                )
        })
        .collect()
}

pub fn delete(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    mut request: OffsetDeleteRequest,
) -> Reply {
    if let Err(code) = super::group::group_shard(broker, request.group_id.as_str()) {
        return super::group::now(ctx, OffsetDeleteResponse::default().with_error_code(code));
    }
    use kafka_protocol::messages::offset_delete_response::{
        OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
    };
    let mut refused = Vec::new();
    for t in &mut request.topics {
        let missing = take_unknown(broker, t.name.as_str(), &mut t.partitions, |p| {
            p.partition_index
        });
        if !missing.is_empty() {
            refused.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        missing
                            .into_iter()
                            .map(|p| {
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION)
                            })
                            .collect(),
                    ),
            );
        }
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    let handle = broker.groups.clone();
    later(ctx, async move {
        let mut response = handle
            .call(|tx| Request::OffsetDelete(request, tx))
            .await
            .unwrap_or_else(|| {
                OffsetDeleteResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            });
        // A group-level error is the whole answer, as in Kafka.
        if response.error_code == codes::NONE {
            response.topics = merge_topics(
                refused,
                std::mem::take(&mut response.topics),
                |a, b| a.name == b.name,
                |a, b| a.partitions.extend(b.partitions),
            );
        }
        response
    })
}
