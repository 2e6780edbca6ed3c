//! Share-group requests the share tests send: group "sg", partition 0 of one topic.

use anyhow::{ensure, Result};
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::share_acknowledge_request as sa;
use kafka_protocol::messages::share_fetch_request as sf;
use kafka_protocol::messages::{
    GroupId, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::{topic_name, Client, Uuid};

/// The share group every share test uses.
pub const GROUP: &str = "sg";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A ShareFetch's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_records: i32,
    pub max_bytes: i32,
    pub max_wait_ms: i32,
}

impl Limits {
    /// 100 records, 1 MiB, waiting `max_wait_ms`.
    pub fn waiting(max_wait_ms: i32) -> Limits {
        Limits {
            max_records: 100,
            max_bytes: 1 << 20,
            max_wait_ms,
        }
    }
}

/// Acknowledgement batches of one type each: (first offset, last offset, type).
pub type Acks<'a> = &'a [(i64, i64, i8)];

/// `acks` as a ShareFetch's acknowledgement batches.
pub fn fetch_ack_batches(acks: Acks<'_>) -> Vec<sf::AcknowledgementBatch> {
    acks.iter()
        .map(|&(first, last, ty)| {
            sf::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![ty])
        })
        .collect()
}

/// A ShareFetch of partition 0 of `topic` by `member` at session `epoch`, carrying `acks`.
pub fn share_fetch_request(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: Acks<'_>,
    limits: Limits,
) -> ShareFetchRequest {
    let batches = fetch_ack_batches(acks);
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(limits.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(limits.max_bytes)
        .with_max_records(limits.max_records)
        .with_batch_size(limits.max_records)
        .with_topics(vec![sf::FetchTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![sf::FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])])
}

/// A ShareAcknowledge of partition 0 of `topic` by `member` at session `epoch`.
pub fn share_acknowledge_request(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: Acks<'_>,
) -> ShareAcknowledgeRequest {
    let batches = acks
        .iter()
        .map(|&(first, last, ty)| {
            sa::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![ty])
        })
        .collect();
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![sa::AcknowledgeTopic::default()
            .with_topic_id(topic)
            .with_partitions(vec![sa::AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])])
}

/// Sets the group config `name` of the share group (IncrementalAlterConfigs, resource type 32).
pub async fn set_group_config(c: &mut Client, name: &str, value: &str) -> Result<()> {
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(GROUP))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s(name))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(1, &alter).await?;
    ensure!(
        r.responses[0].error_code == 0,
        "set {name}: {:?}",
        r.responses[0].error_message
    );
    Ok(())
}

/// A ShareGroupHeartbeat of `member` at `epoch` (epoch 0 joins, subscribed to topic "t"); an
/// error code is an error.
pub async fn share_heartbeat(
    c: &mut Client,
    member: &str,
    epoch: i32,
) -> Result<ShareGroupHeartbeatResponse> {
    let mut req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(member))
        .with_member_epoch(epoch);
    if epoch == 0 {
        req.subscribed_topic_names = Some(vec![topic_name("t")]);
    }
    let r: ShareGroupHeartbeatResponse = c.call(1, &req).await?;
    ensure!(
        r.error_code == 0,
        "heartbeat: {} {:?}",
        r.error_code,
        r.error_message
    );
    Ok(r)
}
