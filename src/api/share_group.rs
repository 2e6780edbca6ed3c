//! KIP-932 share groups: ShareGroupHeartbeat (76) and ShareGroupDescribe (77), forwarded to the
//! group coordinator task (`group::driver`, steps in `group::share`) and answered as
//! `Reply::Later`.

use std::sync::Arc;

use kafka_protocol::messages::share_group_describe_response::DescribedGroup;
use kafka_protocol::messages::{
    GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::group::later;
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::driver::Request;
use crate::group::share::ShareHeartbeatInput;

pub fn heartbeat(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ShareGroupHeartbeatRequest,
) -> Reply {
    if let Err(code) = super::group::group_shard(broker, request.group_id.as_str()) {
        let refused = ShareGroupHeartbeatResponse::default().with_error_code(code);
        return super::group::now(ctx, refused);
    }
    let handle = broker.groups.clone();
    let input = ShareHeartbeatInput {
        client_id: ctx
            .client_id
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default(),
        client_host: ctx.client_host(),
        request,
    };
    let broker = broker.clone();
    later(ctx, async move {
        // The share-partitions of the group persist their state there.
        crate::share_state::ensure_topic(&broker).await;
        handle
            .call(|tx| Request::ShareHeartbeat(input, tx))
            .await
            .unwrap_or_else(|| {
                ShareGroupHeartbeatResponse::default()
                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            })
    })
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ShareGroupDescribeRequest,
) -> Reply {
    let handle = broker.groups.clone();
    let ids: Vec<String> = request
        .group_ids
        .iter()
        .map(|g| g.as_str().to_string())
        .collect();
    let ops = request.include_authorized_operations;
    let (local, refused) = super::group::split_by_shard(broker, ids);
    later(ctx, async move {
        let mut groups = if local.is_empty() {
            Vec::new()
        } else {
            handle
                .call(|tx| Request::ShareDescribe(local, tx))
                .await
                .unwrap_or_default()
        };
        if ops {
            // No authorizer: everything a group supports is allowed; errors carry none (Kafka).
            for g in groups.iter_mut().filter(|g| g.error_code == 0) {
                g.authorized_operations = crate::cluster::acl::GROUP_OPERATIONS;
            }
        }
        for (at, id, code) in refused {
            let refused = DescribedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_error_code(code);
            groups.insert(at.min(groups.len()), refused);
        }
        ShareGroupDescribeResponse::default().with_groups(groups)
    })
}
