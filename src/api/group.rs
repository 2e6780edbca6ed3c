//! Classic group membership and admin APIs: JoinGroup (11), Heartbeat (12), LeaveGroup (13),
//! SyncGroup (14), DescribeGroups (15), ListGroups (16), DeleteGroups (42).
//!
//! Each handler forwards the decoded request to the coordinator task (`group::driver`) and
//! returns a `Reply::Later` that completes when the coordinator answers — at once for most
//! requests, at the end of the join/sync phase for parked JoinGroup/SyncGroup. Version-specific
//! response shaping happens here; the coordinator speaks one shape.

use std::future::Future;
use std::sync::Arc;

use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::{encode_response, Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::coordinator::{join_failure, JoinInput};
use crate::group::driver::Request;

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
    let handle = broker.groups.clone();
    let version = ctx.api_version;
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
    later(ctx, async move {
        let groups = handle
            .call(|tx| Request::Describe(ids, version, ops, tx))
            .await
            .unwrap_or_default();
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
    later(ctx, async move {
        match handle.call(|tx| Request::List(states, types, tx)).await {
            Some(groups) => ListGroupsResponse::default().with_groups(groups),
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
    later(ctx, async move {
        let results = handle
            .call(|tx| Request::Delete(ids, tx))
            .await
            .unwrap_or_default();
        DeleteGroupsResponse::default().with_results(results)
    })
}
