//! Classic group membership and admin APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13),
//! SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).
//!
//! Each handler forwards the decoded request to the coordinator task (`group::driver`) and
//! returns a `Reply::Later` that completes when the coordinator answers — at once for most
//! requests, at the end of the join/sync phase for parked JoinGroup/SyncGroup. Version-specific
//! response shaping happens here; the coordinator speaks one shape.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::{encode_response, Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::coordinator::{join_failure, JoinInput};
use crate::group::driver::Request;
use crate::group::shard::{self, NotHere};
use crate::group::OFFSETS_TOPIC;

/// Kafka's coordinator check for one group: Ok if this broker leads the group's
/// `__consumer_offsets` partition in the image, else NOT_COORDINATOR (another leader) or
/// COORDINATOR_NOT_AVAILABLE (no leader). Before the topic exists no broker coordinates
/// anything, and the local coordinator serves the group (creating the topic on its first write,
/// as FindCoordinator would): a single node answers as it always did. An empty group id is left
/// to the coordinator's validation.
pub(super) fn group_shard(broker: &Broker, group_id: &str) -> Result<(), i16> {
    // Kafka validates the group id before it looks for the shard: the coordinator answers
    // INVALID_GROUP_ID.
    if group_id.is_empty() {
        return Ok(());
    }
    let me = broker.identity.node_id;
    match shard::coordinator_shard(&broker.image(), me, OFFSETS_TOPIC, group_id) {
        Ok(_) | Err(NotHere::NoTopic) => Ok(()),
        Err(not_here) => Err(not_here.code()),
    }
}

/// A reply with an answer known at once.
pub(super) fn now<T: Encodable + Send + 'static>(ctx: RequestContext, response: T) -> Reply {
    later(ctx, async move { response })
}

/// A reply that awaits `answer` and encodes it; always a frame, so the client is never left waiting.
pub(super) fn later<T, F>(ctx: RequestContext, answer: F) -> Reply
where
    T: Encodable + Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    Reply::Later(Box::pin(async move {
        let response = answer.await;
        match encode_response(&ctx, &response) {
            Ok(frame) => Some(frame),
            Err(e) => {
                tracing::error!("{e}");
                None
            }
        }
    }))
}

fn client_id(ctx: &RequestContext) -> String {
    ctx.client_id
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

pub fn join(broker: &Arc<Broker>, ctx: RequestContext, request: JoinGroupRequest) -> Reply {
    let version = ctx.api_version;
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        let mut r = join_failure(code, request.member_id.as_str());
        shape_join(&mut r, version);
        return now(ctx, r);
    }
    let handle = broker.groups.clone();
    let input = JoinInput {
        version,
        client_id: client_id(&ctx),
        client_host: ctx.client_host(),
        request,
    };
    later(ctx, async move {
        let mut r = handle
            .call(|tx| Request::Join(input, tx))
            .await
            .unwrap_or_else(|| join_failure(codes::COORDINATOR_NOT_AVAILABLE, ""));
        shape_join(&mut r, version);
        r
    })
}

/// Fits a JoinGroup answer to the request version (Kafka sends "" for a null protocol name
/// before v7, and has no skip_assignment before v9).
fn shape_join(r: &mut JoinGroupResponse, version: i16) {
    if version < 7 && r.protocol_name.is_none() {
        r.protocol_name = Some(StrBytes::from_static_str(""));
    }
    if version < 9 {
        r.skip_assignment = false;
    }
}

pub fn sync(broker: &Arc<Broker>, ctx: RequestContext, request: SyncGroupRequest) -> Reply {
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        return now(ctx, SyncGroupResponse::default().with_error_code(code));
    }
    let handle = broker.groups.clone();
    later(ctx, async move {
        handle
            .call(|tx| Request::Sync(request, tx))
            .await
            .unwrap_or_else(|| {
                SyncGroupResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}

pub fn heartbeat(broker: &Arc<Broker>, ctx: RequestContext, request: HeartbeatRequest) -> Reply {
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        return now(ctx, HeartbeatResponse::default().with_error_code(code));
    }
    let handle = broker.groups.clone();
    later(ctx, async move {
        handle
            .call(|tx| Request::Heartbeat(request, tx))
            .await
            .unwrap_or_else(|| {
                HeartbeatResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}

pub fn leave(broker: &Arc<Broker>, ctx: RequestContext, request: LeaveGroupRequest) -> Reply {
    if let Err(code) = group_shard(broker, request.group_id.as_str()) {
        return now(ctx, LeaveGroupResponse::default().with_error_code(code));
    }
    let handle = broker.groups.clone();
    let version = ctx.api_version;
    later(ctx, async move {
        handle
            .call(|tx| Request::Leave(version, request, tx))
            .await
            .unwrap_or_else(|| {
                LeaveGroupResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: DescribeGroupsRequest,
) -> Reply {
    let handle = broker.groups.clone();
    let version = ctx.api_version;
    let ids: Vec<String> = request
        .groups
        .iter()
        .map(|g| g.as_str().to_string())
        .collect();
    let ops = version >= 3 && request.include_authorized_operations;
    // Groups coordinated elsewhere answer their own error, in request order (as Kafka).
    let (local, refused) = split_by_shard(broker, ids);
    later(ctx, async move {
        let mut groups = if local.is_empty() {
            Vec::new()
        } else {
            handle
                .call(|tx| Request::Describe(local, version, ops, tx))
                .await
                .unwrap_or_default()
        };
        for (at, id, code) in refused {
            let refused = DescribedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_error_code(code);
            groups.insert(at.min(groups.len()), refused);
        }
        DescribeGroupsResponse::default().with_groups(groups)
    })
}

pub fn list(broker: &Arc<Broker>, ctx: RequestContext, request: ListGroupsRequest) -> Reply {
    let handle = broker.groups.clone();
    let version = ctx.api_version;
    let strings = |v: &[StrBytes]| v.iter().map(|s| s.as_str().to_string()).collect::<Vec<_>>();
    let states = if version >= 4 {
        strings(&request.states_filter)
    } else {
        Vec::new()
    };
    let types = if version >= 5 {
        strings(&request.types_filter)
    } else {
        Vec::new()
    };
    // Only the groups of the shards led here (Kafka lists each broker's own shards).
    let image = broker.image();
    let led = shard::led_shards(&image, broker.identity.node_id, OFFSETS_TOPIC);
    let count = shard::partition_count(&image, OFFSETS_TOPIC);
    later(ctx, async move {
        match handle.call(|tx| Request::List(states, types, tx)).await {
            Some(mut groups) => {
                // No topic yet: nothing is coordinated elsewhere.
                if count > 0 {
                    groups.retain(|g| shard::is_led(&led, count, g.group_id.as_str()));
                }
                ListGroupsResponse::default().with_groups(groups)
            }
            None => ListGroupsResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE),
        }
    })
}

pub fn delete(broker: &Arc<Broker>, ctx: RequestContext, request: DeleteGroupsRequest) -> Reply {
    let handle = broker.groups.clone();
    let ids: Vec<String> = request
        .groups_names
        .iter()
        .map(|g| g.as_str().to_string())
        .collect();
    let (local, refused) = split_by_shard(broker, ids);
    let broker = broker.clone();
    later(ctx, async move {
        let mut results = if local.is_empty() {
            Vec::new()
        } else {
            delete_here(&broker, &handle, local).await
        };
        for (at, id, code) in refused {
            let refused = DeletableGroupResult::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_error_code(code);
            results.insert(at.min(results.len()), refused);
        }
        DeleteGroupsResponse::default().with_results(results)
    })
}

/// DeleteGroups of groups coordinated here, in Kafka's order: the state of the Empty share
/// groups' share-partitions goes first, at each key's share coordinator; a share group whose
/// state was not all deleted stays, answered with that error; the others go to the
/// coordinator's delete. One result per id, in request order.
async fn delete_here(
    broker: &Broker,
    handle: &crate::group::GroupHandle,
    ids: Vec<String>,
) -> Vec<DeletableGroupResult> {
    let shares = handle
        .call(|tx| Request::ShareStateToDelete(ids.clone(), tx))
        .await
        .unwrap_or_default();
    let mut failed: Vec<(String, i16)> = Vec::new();
    for (group, partitions) in shares {
        let code = crate::share_state::delete_group_state(broker, &group, &partitions).await;
        if code != codes::NONE {
            tracing::warn!(group = %group, code, "DeleteGroups: the share group's state was not deleted; the group stays");
            failed.push((group, code));
        }
    }
    let code_of = |id: &str| failed.iter().find(|(g, _)| g == id).map(|(_, c)| *c);
    let retained: Vec<String> = ids
        .iter()
        .filter(|id| code_of(id).is_none())
        .cloned()
        .collect();
    let mut deleted = if retained.is_empty() {
        Vec::new()
    } else {
        handle
            .call(|tx| Request::Delete(retained, tx))
            .await
            .unwrap_or_default()
    }
    .into_iter();
    ids.iter()
        .map(|id| {
            let result = DeletableGroupResult::default()
                .with_group_id(GroupId(StrBytes::from_string(id.clone())));
            match code_of(id) {
                Some(code) => result.with_error_code(code),
                None => deleted
                    .next()
                    .unwrap_or_else(|| result.with_error_code(codes::COORDINATOR_NOT_AVAILABLE)),
            }
        })
        .collect()
}

/// Splits group ids into those coordinated here and the refused ones (position in the request,
/// id, error code), so an answer can be put back in request order.
pub(super) fn split_by_shard(
    broker: &Broker,
    ids: Vec<String>,
) -> (Vec<String>, Vec<(usize, String, i16)>) {
    let mut local = Vec::with_capacity(ids.len());
    let mut refused = Vec::new();
    for (at, id) in ids.into_iter().enumerate() {
        match group_shard(broker, &id) {
            Ok(_) => local.push(id),
            Err(code) => refused.push((at, id, code)),
        }
    }
    (local, refused)
}
