//! The share-group offsets admin APIs, v0 (KIP-932): DescribeShareGroupOffsets (90),
//! AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92). The group checks and the group's
//! initialized partitions are the group coordinator's (`group::share_offsets`, through the
//! coordinator task); the share-partition start offsets are read from the share coordinator's
//! state (`share_state::summary`). Answered as `Reply::Later`.

use std::sync::Arc;

use kafka_protocol::messages::describe_share_group_offsets_response as dso;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::group::{group_shard, later, now};
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::driver::{Request, ShareOffsetsTargets};
use crate::share::registry::ShareKey;

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The answer of one group: its error, or per target partition the start offset (-1 without
/// state) and leader epoch, from the share coordinator of each key (here or at the leader of its
/// `__share_group_state` partition: `share_state::summary_anywhere`; its error code when it
/// could not be asked).
async fn describe_group(
    broker: &Broker,
    group_id: &str,
    targets: ShareOffsetsTargets,
) -> dso::DescribeShareGroupOffsetsResponseGroup {
    let group = dso::DescribeShareGroupOffsetsResponseGroup::default()
        .with_group_id(kafka_protocol::messages::GroupId(sb(group_id)));
    let targets = match targets {
        Ok(t) => t,
        Err((code, message)) => {
            return group
                .with_error_code(code)
                .with_error_message(Some(sb(&message)))
        }
    };
    let mut topics = Vec::with_capacity(targets.len());
    for t in targets {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for &p in &t.partitions {
            let state = match t.topic_id {
                Some(id) => {
                    let key = ShareKey::new(group_id, (id, p));
                    crate::share_state::summary_anywhere(broker, &key).await
                }
                None => Ok(None),
            };
            let partition =
                dso::DescribeShareGroupOffsetsResponsePartition::default().with_partition_index(p);
            partitions.push(match state {
                Ok(state) => {
                    let (start_offset, leader_epoch) = state.unwrap_or((-1, 0));
                    partition
                        .with_start_offset(start_offset)
                        .with_leader_epoch(leader_epoch)
                }
                Err(code) => partition.with_start_offset(-1).with_error_code(code),
            });
        }
        topics.push(
            dso::DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(sb(&t.topic_name)))
                .with_topic_id(t.topic_id.unwrap_or(Uuid::nil()))
                .with_partitions(partitions),
        );
    }
    group.with_topics(topics)
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: DescribeShareGroupOffsetsRequest,
) -> Reply {
    let handle = broker.groups.clone();
    let broker = broker.clone();
    later(ctx, async move {
        let mut answers: Vec<Option<dso::DescribeShareGroupOffsetsResponseGroup>> = Vec::new();
        let mut local = Vec::new();
        for g in &request.groups {
            let id = g.group_id.as_str().to_string();
            match group_shard(&broker, &id) {
                Ok(()) => {
                    let topics = g.topics.as_ref().map(|ts| {
                        ts.iter()
                            .map(|t| (t.topic_name.as_str().to_string(), t.partitions.clone()))
                            .collect()
                    });
                    local.push((id, topics));
                    answers.push(None);
                }
                Err(code) => answers.push(Some(
                    dso::DescribeShareGroupOffsetsResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code),
                )),
            }
        }
        let ids: Vec<String> = local.iter().map(|(id, _)| id.clone()).collect();
        let targets = if local.is_empty() {
            Vec::new()
        } else {
            handle
                .call(|tx| Request::ShareOffsetsDescribe(local, tx))
                .await
                .unwrap_or_default()
        };
        let mut targets = ids.iter().zip(
            targets
                .into_iter()
                .map(Some)
                .chain(std::iter::repeat_with(|| None)),
        );
        let mut groups = Vec::with_capacity(answers.len());
        for a in answers {
            groups.push(match a {
                Some(refused) => refused,
                None => match targets.next() {
                    Some((id, Some(t))) => describe_group(&broker, id, t).await,
                    Some((id, None)) => {
                        let refused = Err((codes::COORDINATOR_NOT_AVAILABLE, String::new()));
                        describe_group(&broker, id, refused).await
                    }
                    None => dso::DescribeShareGroupOffsetsResponseGroup::default()
                        .with_error_code(codes::COORDINATOR_NOT_AVAILABLE),
                },
            });
        }
        DescribeShareGroupOffsetsResponse::default().with_groups(groups)
    })
}

pub fn alter(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AlterShareGroupOffsetsRequest,
) -> Reply {
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        return now(
            ctx,
            AlterShareGroupOffsetsResponse::default().with_error_code(code),
        );
    }
    let handle = broker.groups.clone();
    let broker = broker.clone();
    later(ctx, async move {
        // The share-partitions' new state is written there.
        crate::share_state::ensure_topic(&broker).await;
        handle
            .call(|tx| Request::ShareOffsetsAlter(request, tx))
            .await
            .unwrap_or_else(|| {
                AlterShareGroupOffsetsResponse::default()
                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}

pub fn delete(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: DeleteShareGroupOffsetsRequest,
) -> Reply {
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        return now(
            ctx,
            DeleteShareGroupOffsetsResponse::default().with_error_code(code),
        );
    }
    let handle = broker.groups.clone();
    later(ctx, async move {
        handle
            .call(|tx| Request::ShareOffsetsDelete(request, tx))
            .await
            .unwrap_or_else(|| {
                DeleteShareGroupOffsetsResponse::default()
                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}
