//! The share coordinator's RPC entries of the differential corpus (v0, APIs 83-87: what a
//! share-partition leader sends the leader of its key's `__share_group_state` partition), run
//! after the FindCoordinator and share-offsets entries made that topic on both brokers: one
//! share-partition's life (initialize, read at a newer leader epoch, write, read, summary,
//! delete, summary), the fencing of older epochs, reads and writes of a key without state,
//! a negative and an unknown partition, and an empty group id.

use anyhow::Result;
use kafka_protocol::messages::delete_share_group_state_request as dq;
use kafka_protocol::messages::initialize_share_group_state_request as iq;
use kafka_protocol::messages::read_share_group_state_request as rq;
use kafka_protocol::messages::read_share_group_state_summary_request as sq;
use kafka_protocol::messages::write_share_group_state_request as wq;
use kafka_protocol::messages::*;
use protocol_tests::{Client, Uuid};

use crate::share_offsets::{render, s, topic_id};

/// The share group whose state the entries change (no consumer joins it).
const GROUP: &str = "diff-ss";
/// A share group that never has state.
const NO_STATE: &str = "diff-ss-none";

#[derive(Clone, Copy)]
pub enum ShareStateCase {
    Initialize,
    ReadNewerLeaderEpoch,
    Write,
    Read,
    ReadOlderLeaderEpoch,
    WriteOlderLeaderEpoch,
    Summary,
    InitializeNewerStateEpoch,
    WriteOlderStateEpoch,
    InitializeOlderStateEpoch,
    ReadNoState,
    WriteNoState,
    SummaryNoState,
    NegativePartition,
    UnknownPartition,
    EmptyGroup,
    Delete,
    SummaryAfterDelete,
    DeleteNoState,
}

fn initialize(
    group: &str,
    id: Uuid,
    state_epoch: i32,
    start_offset: i64,
) -> InitializeShareGroupStateRequest {
    InitializeShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![iq::InitializeStateData::default()
            .with_topic_id(id)
            .with_partitions(vec![iq::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(state_epoch)
                .with_start_offset(start_offset)])])
}

fn read(group: &str, id: Uuid, partition: i32, leader_epoch: i32) -> ReadShareGroupStateRequest {
    ReadShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![rq::ReadStateData::default()
            .with_topic_id(id)
            .with_partitions(vec![rq::PartitionData::default()
                .with_partition(partition)
                .with_leader_epoch(leader_epoch)])])
}

/// A write of one Acknowledged batch `first..=last` (delivery count 1), start offset unchanged.
fn write(
    group: &str,
    id: Uuid,
    state_epoch: i32,
    leader_epoch: i32,
    first: i64,
    last: i64,
) -> WriteShareGroupStateRequest {
    WriteShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![wq::WriteStateData::default()
            .with_topic_id(id)
            .with_partitions(vec![wq::PartitionData::default()
                .with_partition(0)
                .with_state_epoch(state_epoch)
                .with_leader_epoch(leader_epoch)
                .with_start_offset(-1)
                .with_state_batches(vec![wq::StateBatch::default()
                    .with_first_offset(first)
                    .with_last_offset(last)
                    .with_delivery_state(2)
                    .with_delivery_count(1)])])])
}

fn summary(group: &str, id: Uuid, partition: i32) -> ReadShareGroupStateSummaryRequest {
    ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![sq::ReadStateSummaryData::default()
            .with_topic_id(id)
            .with_partitions(vec![sq::PartitionData::default()
                .with_partition(partition)
                .with_leader_epoch(0)])])
}

fn delete(group: &str, id: Uuid) -> DeleteShareGroupStateRequest {
    DeleteShareGroupStateRequest::default()
        .with_group_id(s(group))
        .with_topics(vec![dq::DeleteStateData::default()
            .with_topic_id(id)
            .with_partitions(vec![
                dq::PartitionData::default().with_partition(0)
            ])])
}

pub async fn exchange(c: &mut Client, case: ShareStateCase) -> Result<String> {
    use ShareStateCase as S;
    let id = topic_id(c).await?;
    Ok(match case {
        S::Initialize => render(c.call(0, &initialize(GROUP, id, 0, 1)).await?),
        S::ReadNewerLeaderEpoch => render(c.call(0, &read(GROUP, id, 0, 1)).await?),
        S::Write => render(c.call(0, &write(GROUP, id, 0, 1, 1, 2)).await?),
        S::Read => render(c.call(0, &read(GROUP, id, 0, 1)).await?),
        S::ReadOlderLeaderEpoch => render(c.call(0, &read(GROUP, id, 0, -1)).await?),
        S::WriteOlderLeaderEpoch => render(c.call(0, &write(GROUP, id, 0, 0, 3, 3)).await?),
        S::Summary => render(c.call(0, &summary(GROUP, id, 0)).await?),
        S::InitializeNewerStateEpoch => render(c.call(0, &initialize(GROUP, id, 3, 2)).await?),
        S::WriteOlderStateEpoch => render(c.call(0, &write(GROUP, id, 2, 1, 3, 3)).await?),
        S::InitializeOlderStateEpoch => render(c.call(0, &initialize(GROUP, id, 2, 0)).await?),
        S::ReadNoState => render(c.call(0, &read(NO_STATE, id, 0, 0)).await?),
        S::WriteNoState => render(c.call(0, &write(NO_STATE, id, 0, 0, 0, 0)).await?),
        S::SummaryNoState => render(c.call(0, &summary(NO_STATE, id, 0)).await?),
        S::NegativePartition => render(c.call(0, &summary(GROUP, id, -1)).await?),
        S::UnknownPartition => render(c.call(0, &summary(GROUP, id, 7)).await?),
        S::EmptyGroup => render(c.call(0, &read("", id, 0, 1)).await?),
        S::Delete => render(c.call(0, &delete(GROUP, id)).await?),
        S::SummaryAfterDelete => render(c.call(0, &summary(GROUP, id, 0)).await?),
        S::DeleteNoState => render(c.call(0, &delete(NO_STATE, id)).await?),
    })
}
