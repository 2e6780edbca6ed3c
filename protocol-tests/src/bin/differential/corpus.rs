//! The differential corpus: each entry names one request, and [`exchange`] sends it and renders
//! the decoded answer. Entries run in [`CORPUS`] order on one connection per broker, after
//! [`setup`] gave both brokers the same topics and records, so an entry may rely on the state the
//! entries before it left (the deleting ones come last).
//!
//! Data-path entries (Produce, Fetch, ListOffsets, offsets) are answered here; administrative ones
//! in [`crate::admin`].

use std::time::Duration;

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FindCoordinatorRequest, GroupId, ListOffsetsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, batch, create_topics_request, fetch_request, metadata_request,
    produce_request, topic_name, Client, Uuid,
};

pub const TOPIC: &str = "diff-t";
/// Two partitions: a plain batch (0) and a gzip batch (1) whose records' timestamps are not in order.
pub const TS_TOPIC: &str = "diff-ts";
/// Two partitions of two batches each, for the Fetch size limits.
pub const LIMITS_TOPIC: &str = "diff-limits";
pub const GROUP: &str = "diff-g";
const VALUES: &[&[u8]] = &[b"differential-1", b"differential-2"];
const TIMESTAMP: i64 = 1_700_000_000_000;
/// Record timestamps of the diff-ts batches (the example: 1234 then 999,999,999,999).
const TS_PLAIN: &[i64] = &[1234, 999_999_999_999];
const TS_GZIP: &[i64] = &[1234, 999_999_999_999, 5000];

/// One corpus entry: a name and the request it sends.
#[derive(Clone, Copy)]
pub enum Case {
    ApiVersions,
    CreateTopicInvalidName,
    CreateTopicZeroPartitions,
    CreateTopicExists,
    Metadata,
    Produce,
    FetchFromStart,
    FetchOutOfRange,
    FetchOutOfRangeClassic,
    FetchUnknownPartition,
    FetchUnknownPartitionClassic,
    FetchMaxBytesOne,
    FetchPartitionMaxBytesOne,
    FetchMaxBytesBatchAndAHalf,
    FetchMaxBytesOneClassic,
    ListOffsetsEarliest,
    ListOffsetsLatest,
    ListOffsetsByTimestamp,
    ListOffsetsInsideBatch,
    ListOffsetsMaxTimestamp,
    ListOffsetsEarliestLocal,
    ListOffsetsLatestTiered,
    OffsetCommit,
    OffsetCommitUnknown,
    OffsetFetch,
    OffsetDeleteUnknown,
    FindCoordinator,
    FindCoordinatorClassic,
    FindCoordinatorShare,
    FindCoordinatorShareMalformed,
    FindCoordinatorShareOld,
    Admin(crate::admin::AdminCase),
    Quotas(crate::quotas::QuotaCase),
    Throttling(crate::throttling::ThrottleCase),
    Features(crate::features::FeatureCase),
    Scram(crate::scram::ScramCase),
    ShareOffsets(crate::share_offsets::ShareOffsetsCase),
    ShareState(crate::share_state::ShareStateCase),
}

use crate::admin::AdminCase as A;
use crate::features::FeatureCase as F;
use crate::share_offsets::ShareOffsetsCase as SO;
use crate::share_state::ShareStateCase as SS;

pub const CORPUS: &[(&str, Case)] = &[
    ("ApiVersions v3", Case::ApiVersions),
    ("CreateTopics v7 invalid name", Case::CreateTopicInvalidName),
    (
        "CreateTopics v7 zero partitions",
        Case::CreateTopicZeroPartitions,
    ),
    ("CreateTopics v7 existing topic", Case::CreateTopicExists),
    ("Metadata v12 of a created topic", Case::Metadata),
    ("Produce v11 of a known batch", Case::Produce),
    ("Fetch v12 from offset 0", Case::FetchFromStart),
    ("Fetch v12 at an out-of-range offset", Case::FetchOutOfRange),
    (
        "Fetch v4 at an out-of-range offset",
        Case::FetchOutOfRangeClassic,
    ),
    (
        "Fetch v12 of an unknown partition",
        Case::FetchUnknownPartition,
    ),
    (
        "Fetch v4 of an unknown partition",
        Case::FetchUnknownPartitionClassic,
    ),
    (
        "Fetch v12 max_bytes 1 (first batch whole, KIP-74)",
        Case::FetchMaxBytesOne,
    ),
    (
        "Fetch v12 partition_max_bytes 1",
        Case::FetchPartitionMaxBytesOne,
    ),
    (
        "Fetch v12 max_bytes one and a half batches",
        Case::FetchMaxBytesBatchAndAHalf,
    ),
    ("Fetch v4 max_bytes 1", Case::FetchMaxBytesOneClassic),
    ("ListOffsets v8 earliest", Case::ListOffsetsEarliest),
    ("ListOffsets v8 latest", Case::ListOffsetsLatest),
    ("ListOffsets v8 by timestamp", Case::ListOffsetsByTimestamp),
    (
        "ListOffsets v8 by a timestamp inside a batch (plain, gzip)",
        Case::ListOffsetsInsideBatch,
    ),
    (
        "ListOffsets v8 MAX_TIMESTAMP (-3)",
        Case::ListOffsetsMaxTimestamp,
    ),
    (
        "ListOffsets v8 EARLIEST_LOCAL (-4)",
        Case::ListOffsetsEarliestLocal,
    ),
    (
        "ListOffsets v9 LATEST_TIERED (-5)",
        Case::ListOffsetsLatestTiered,
    ),
    ("OffsetCommit v8 (simple group)", Case::OffsetCommit),
    (
        "OffsetCommit v8 to an unknown topic and partition",
        Case::OffsetCommitUnknown,
    ),
    ("OffsetFetch v8 (simple group)", Case::OffsetFetch),
    (
        "OffsetDelete v0 of an unknown topic and partition",
        Case::OffsetDeleteUnknown,
    ),
    ("FindCoordinator v4 of a group", Case::FindCoordinator),
    (
        "FindCoordinator v3 of a group",
        Case::FindCoordinatorClassic,
    ),
    (
        "DescribeConfigs v4 of two topic keys",
        Case::Admin(A::DescribeConfigsTopic),
    ),
    (
        "CreateTopics v7 manual assignment to broker 1",
        Case::Admin(A::CreateTopicManual),
    ),
    (
        "CreateTopics v7 assignment naming an unknown broker",
        Case::Admin(A::CreateTopicUnknownBroker),
    ),
    (
        "CreatePartitions v3 with an assignment to broker 1",
        Case::Admin(A::CreatePartitionsManual),
    ),
    (
        "CreatePartitions v3 assignment naming an unknown broker",
        Case::Admin(A::CreatePartitionsUnknownBroker),
    ),
    (
        "CreatePartitions v3 without an assignment",
        Case::Admin(A::CreatePartitionsPlain),
    ),
    (
        "Metadata v12 of the manually assigned topic",
        Case::Admin(A::MetadataManual),
    ),
    (
        "Metadata v12 with topic authorized operations",
        Case::Admin(A::MetadataAuthorizedOps),
    ),
    (
        "DescribeCluster v1 with cluster authorized operations",
        Case::Admin(A::DescribeClusterAuthorizedOps),
    ),
    (
        "DescribeGroups v5 with authorized operations",
        Case::Admin(A::DescribeGroupsAuthorizedOps),
    ),
    (
        "DescribeGroups v5 of an unknown group",
        Case::Admin(A::DescribeGroupsUnknown),
    ),
    ("ListGroups v5", Case::Admin(A::ListGroups)),
    (
        "DescribeConfigs v4 of a GROUP resource",
        Case::Admin(A::DescribeConfigsGroup),
    ),
    (
        "IncrementalAlterConfigs v1 of a GROUP key",
        Case::Admin(A::AlterConfigsGroup),
    ),
    (
        "DescribeConfigs v4 of the altered GROUP key",
        Case::Admin(A::DescribeConfigsGroupKey),
    ),
    (
        "IncrementalAlterConfigs v1 of a dynamic broker key Sluice does not use",
        Case::Admin(A::AlterConfigsBrokerUnused),
    ),
    (
        "DescribeConfigs v4 of that broker key",
        Case::Admin(A::DescribeConfigsBrokerUnused),
    ),
    (
        "ListConfigResources v1 of groups and client metrics",
        Case::Admin(A::ListConfigResources),
    ),
    (
        "AlterReplicaLogDirs v2 to an unknown directory",
        Case::Admin(A::AlterReplicaLogDirs),
    ),
    (
        "ListPartitionReassignments v0 of every topic",
        Case::Admin(A::ListPartitionReassignments),
    ),
    (
        "InitProducerId v4 (idempotent producer)",
        Case::Admin(A::InitProducerId),
    ),
    (
        "DeleteGroups v2 of an unknown group",
        Case::Admin(A::DeleteGroupsUnknown),
    ),
    (
        "DeleteRecords v2 before offset 1",
        Case::Admin(A::DeleteRecords),
    ),
    (
        "ListOffsets v8 earliest after DeleteRecords",
        Case::ListOffsetsEarliest,
    ),
    (
        "DeleteGroups v2 of the simple group",
        Case::Admin(A::DeleteGroups),
    ),
    (
        "AlterClientQuotas v1 set a user's quotas",
        Case::Quotas(crate::quotas::QuotaCase::AlterSet),
    ),
    (
        "AlterClientQuotas v1 default client id, user + client id, default user",
        Case::Quotas(crate::quotas::QuotaCase::AlterMore),
    ),
    (
        "AlterClientQuotas v1 refused entities, keys and values",
        Case::Quotas(crate::quotas::QuotaCase::AlterRefused),
    ),
    (
        "AlterClientQuotas v1 validate_only",
        Case::Quotas(crate::quotas::QuotaCase::AlterValidateOnly),
    ),
    (
        "DescribeClientQuotas v1 after validate_only",
        Case::Quotas(crate::quotas::QuotaCase::DescribeValidateOnly),
    ),
    (
        "DescribeClientQuotas v1 everything",
        Case::Quotas(crate::quotas::QuotaCase::DescribeAll),
    ),
    (
        "DescribeClientQuotas v1 user exact",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUserExact),
    ),
    (
        "DescribeClientQuotas v1 user exact strict",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUserExactStrict),
    ),
    (
        "DescribeClientQuotas v1 default user",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUserDefault),
    ),
    (
        "DescribeClientQuotas v1 any user and any client id, strict",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUserAndClientAnyStrict),
    ),
    (
        "DescribeClientQuotas v0 default client id",
        Case::Quotas(crate::quotas::QuotaCase::DescribeClientDefaultV0),
    ),
    (
        "DescribeClientQuotas v1 entity type twice",
        Case::Quotas(crate::quotas::QuotaCase::DescribeDuplicateType),
    ),
    (
        "DescribeClientQuotas v1 unsupported entity type",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUnsupportedType),
    ),
    (
        "DescribeClientQuotas v1 exact without a name",
        Case::Quotas(crate::quotas::QuotaCase::DescribeExactWithoutName),
    ),
    (
        "DescribeClientQuotas v1 ip with user",
        Case::Quotas(crate::quotas::QuotaCase::DescribeIpWithUser),
    ),
    (
        "DescribeClientQuotas v1 unknown match type",
        Case::Quotas(crate::quotas::QuotaCase::DescribeUnknownMatchType),
    ),
    (
        "AlterClientQuotas v1 remove present and absent keys",
        Case::Quotas(crate::quotas::QuotaCase::AlterRemove),
    ),
    (
        "DescribeClientQuotas v1 after removal",
        Case::Quotas(crate::quotas::QuotaCase::DescribeAfterRemove),
    ),
    (
        "AlterClientQuotas v0 ip entities",
        Case::Quotas(crate::quotas::QuotaCase::AlterIpV0),
    ),
    (
        "DescribeClientQuotas v1 any ip",
        Case::Quotas(crate::quotas::QuotaCase::DescribeIpAny),
    ),
    (
        "AlterClientQuotas v1 byte rates of ANONYMOUS + diff-throttled, topic diff-quota",
        Case::Throttling(crate::throttling::ThrottleCase::SetQuotas),
    ),
    (
        "Produce v9 of 10,300 bytes over a 1000 B/s producer_byte_rate",
        Case::Throttling(crate::throttling::ThrottleCase::ProduceOverQuota),
    ),
    (
        "Fetch v12 within a 1000 B/s consumer_byte_rate",
        Case::Throttling(crate::throttling::ThrottleCase::FetchWithinQuota),
    ),
    (
        "Fetch v12 over a 1000 B/s consumer_byte_rate",
        Case::Throttling(crate::throttling::ThrottleCase::FetchOverQuota),
    ),
    (
        "DescribeUserScramCredentials v0 all users",
        Case::Scram(crate::scram::ScramCase::All),
    ),
    (
        "DescribeUserScramCredentials v0 empty user list",
        Case::Scram(crate::scram::ScramCase::EmptyList),
    ),
    (
        "DescribeUserScramCredentials v0 unknown users, one named twice",
        Case::Scram(crate::scram::ScramCase::NamedAndDuplicate),
    ),
    (
        "UpdateFeatures v1 share.version 0 (unsafe downgrade)",
        Case::Features(F::ShareOff),
    ),
    (
        "UpdateFeatures v1 of an unknown feature",
        Case::Features(F::UnknownFeature),
    ),
    (
        "UpdateFeatures v1 transaction.version above the supported range",
        Case::Features(F::AboveSupported),
    ),
    (
        "UpdateFeatures v1 downgrade as an upgrade",
        Case::Features(F::DowngradeAsUpgrade),
    ),
    (
        "UpdateFeatures v1 validate_only safe downgrade",
        Case::Features(F::ValidateOnlyDowngrade),
    ),
    (
        "ApiVersions v4 finalized features after validate_only",
        Case::Features(F::FinalizedAfter(2, 0)),
    ),
    (
        "UpdateFeatures v1 upgrade as a safe downgrade",
        Case::Features(F::UpgradeAsDowngrade),
    ),
    (
        "UpdateFeatures v1 metadata.version lossy safe downgrade",
        Case::Features(F::MetadataVersionLossy),
    ),
    (
        "UpdateFeatures v1 metadata.version lossy unsafe downgrade",
        Case::Features(F::MetadataVersionLossyUnsafe),
    ),
    (
        "UpdateFeatures v1 metadata.version below the supported range",
        Case::Features(F::MetadataVersionBelowSupported),
    ),
    (
        "UpdateFeatures v1 negative level",
        Case::Features(F::NegativeLevel),
    ),
    (
        "UpdateFeatures v1 unknown upgrade type",
        Case::Features(F::UnknownUpgradeType),
    ),
    (
        "UpdateFeatures v1 one bad update of two",
        Case::Features(F::OneBadOfTwo),
    ),
    ("UpdateFeatures v1 no updates", Case::Features(F::Empty)),
    (
        "UpdateFeatures v0 downgrade without allow_downgrade",
        Case::Features(F::V0DowngradeNotAllowed),
    ),
    (
        "UpdateFeatures v0 allow_downgrade (Kafka 4.1.2 reads the upgrade type)",
        Case::Features(F::V0Downgrade),
    ),
    (
        "UpdateFeatures v1 unknown feature to level 0",
        Case::Features(F::UnknownFeatureOff),
    ),
    (
        "UpdateFeatures v1 the same feature twice",
        Case::Features(F::Duplicate),
    ),
    (
        "ApiVersions v3 supported features",
        Case::Features(F::SupportedV3),
    ),
    (
        "UpdateFeatures v1 transaction.version safe downgrade to 1",
        Case::Features(F::V1SafeDowngrade),
    ),
    (
        "ApiVersions v4 finalized features after the downgrade",
        Case::Features(F::FinalizedAfter(1, 0)),
    ),
    (
        "UpdateFeatures v1 transaction.version upgrade to 2",
        Case::Features(F::V1Upgrade),
    ),
    (
        "ApiVersions v4 finalized features after the upgrade",
        Case::Features(F::FinalizedAfter(2, 0)),
    ),
    (
        "UpdateFeatures v1 metadata.version safe downgrade to 26",
        Case::Features(F::MetadataVersionSafeDowngrade),
    ),
    (
        "UpdateFeatures v1 metadata.version upgrade to 27",
        Case::Features(F::MetadataVersionUpgrade),
    ),
    (
        "UpdateFeatures v2 share.version 1",
        Case::Features(F::V2ShareOn),
    ),
    (
        "ApiVersions v4 finalized features with share.version 1",
        Case::Features(F::FinalizedAfter(2, 1)),
    ),
    (
        "DescribeShareGroupOffsets v0 of an unknown group (named topics)",
        Case::ShareOffsets(SO::DescribeUnknownGroup),
    ),
    (
        "DescribeShareGroupOffsets v0 of an unknown group (all topics)",
        Case::ShareOffsets(SO::DescribeUnknownGroupAll),
    ),
    (
        "share consumer: accept the first record, release the rest",
        Case::ShareOffsets(SO::Consume),
    ),
    (
        "FindCoordinator v6 of a share-partition key",
        Case::FindCoordinatorShare,
    ),
    (
        "FindCoordinator v6 of malformed share-partition keys",
        Case::FindCoordinatorShareMalformed,
    ),
    (
        "FindCoordinator v5 of a share-partition key",
        Case::FindCoordinatorShareOld,
    ),
    (
        "DescribeShareGroupOffsets v0 after the share consumer",
        Case::ShareOffsets(SO::DescribeAfterConsume),
    ),
    (
        "DescribeShareGroupOffsets v0 all topics after the share consumer",
        Case::ShareOffsets(SO::DescribeAllAfterConsume),
    ),
    (
        "AlterShareGroupOffsets v0 of a group with a member",
        Case::ShareOffsets(SO::AlterNonEmpty),
    ),
    (
        "DescribeShareGroupOffsets v0 after the refused alter",
        Case::ShareOffsets(SO::DescribeAfterAlterNonEmpty),
    ),
    (
        "DeleteShareGroupOffsets v0 of a group with a member",
        Case::ShareOffsets(SO::DeleteNonEmpty),
    ),
    (
        "share consumer leaves the group",
        Case::ShareOffsets(SO::Leave),
    ),
    (
        "AlterShareGroupOffsets v0 of the empty group (and unknown partitions)",
        Case::ShareOffsets(SO::AlterEmpty),
    ),
    (
        "DescribeShareGroupOffsets v0 after alter",
        Case::ShareOffsets(SO::DescribeAfterAlter),
    ),
    (
        "AlterShareGroupOffsets v0 of a new group before the log start",
        Case::ShareOffsets(SO::AlterNewGroupBeforeLogStart),
    ),
    (
        "AlterShareGroupOffsets v0 of a new group past the log end",
        Case::ShareOffsets(SO::AlterNewGroupPastLogEnd),
    ),
    (
        "DescribeShareGroupOffsets v0 of the new group and all of the other",
        Case::ShareOffsets(SO::DescribeNewGroup),
    ),
    (
        "DeleteShareGroupOffsets v0 of the empty group",
        Case::ShareOffsets(SO::Delete),
    ),
    (
        "DescribeShareGroupOffsets v0 after delete",
        Case::ShareOffsets(SO::DescribeAfterDelete),
    ),
    (
        "DescribeShareGroupOffsets v0 all topics after delete",
        Case::ShareOffsets(SO::DescribeAllAfterDelete),
    ),
    (
        "DeleteShareGroupOffsets v0 of an unknown group",
        Case::ShareOffsets(SO::DeleteUnknownGroup),
    ),
    (
        "InitializeShareGroupState v0",
        Case::ShareState(SS::Initialize),
    ),
    (
        "ReadShareGroupState v0 at a newer leader epoch",
        Case::ShareState(SS::ReadNewerLeaderEpoch),
    ),
    (
        "WriteShareGroupState v0 of an acknowledged batch",
        Case::ShareState(SS::Write),
    ),
    (
        "ReadShareGroupState v0 after the write",
        Case::ShareState(SS::Read),
    ),
    (
        "ReadShareGroupState v0 at leader epoch -1",
        Case::ShareState(SS::ReadOlderLeaderEpoch),
    ),
    (
        "WriteShareGroupState v0 at an older leader epoch",
        Case::ShareState(SS::WriteOlderLeaderEpoch),
    ),
    (
        "ReadShareGroupStateSummary v0",
        Case::ShareState(SS::Summary),
    ),
    (
        "InitializeShareGroupState v0 at a newer state epoch",
        Case::ShareState(SS::InitializeNewerStateEpoch),
    ),
    (
        "WriteShareGroupState v0 at an older state epoch",
        Case::ShareState(SS::WriteOlderStateEpoch),
    ),
    (
        "InitializeShareGroupState v0 at an older state epoch",
        Case::ShareState(SS::InitializeOlderStateEpoch),
    ),
    (
        "ReadShareGroupState v0 of a key without state",
        Case::ShareState(SS::ReadNoState),
    ),
    (
        "WriteShareGroupState v0 of a key without state",
        Case::ShareState(SS::WriteNoState),
    ),
    (
        "ReadShareGroupStateSummary v0 of a key without state",
        Case::ShareState(SS::SummaryNoState),
    ),
    (
        "ReadShareGroupStateSummary v0 of a negative partition",
        Case::ShareState(SS::NegativePartition),
    ),
    (
        "ReadShareGroupStateSummary v0 of an unknown partition",
        Case::ShareState(SS::UnknownPartition),
    ),
    (
        "ReadShareGroupState v0 of an empty group id",
        Case::ShareState(SS::EmptyGroup),
    ),
    ("DeleteShareGroupState v0", Case::ShareState(SS::Delete)),
    (
        "ReadShareGroupStateSummary v0 after delete",
        Case::ShareState(SS::SummaryAfterDelete),
    ),
    (
        "DeleteShareGroupState v0 of a key without state",
        Case::ShareState(SS::DeleteNoState),
    ),
    (
        "UpdateFeatures v2 share.version 0 (safe downgrade)",
        Case::Features(F::V2ShareOff),
    ),
    (
        "ApiVersions v4 finalized features at the end",
        Case::Features(F::FinalizedAfter(2, 0)),
    ),
];

fn render<T: std::fmt::Debug>(r: T) -> String {
    format!("{r:#?}")
}

fn list_offsets(topic: &str, partitions: &[i32], timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_current_leader_epoch(-1)
                            .with_timestamp(timestamp)
                    })
                    .collect(),
            )])
}

/// Fetch of both partitions of [`LIMITS_TOPIC`] from offset 0 with the given limits.
fn fetch_limits(max_bytes: i32, partition_max_bytes: i32) -> FetchRequest {
    let partition = |p| {
        FetchPartition::default()
            .with_partition(p)
            .with_current_leader_epoch(-1)
            .with_fetch_offset(0)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(partition_max_bytes)
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(LIMITS_TOPIC))
            .with_partitions(vec![partition(0), partition(1)])])
}

fn commit_partition(p: i32) -> OffsetCommitRequestPartition {
    OffsetCommitRequestPartition::default()
        .with_partition_index(p)
        .with_committed_offset(1)
        .with_committed_leader_epoch(-1)
        .with_committed_metadata(Some(StrBytes::from_static_str("m")))
}

fn offset_commit(topics: &[(&str, i32)]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            topics
                .iter()
                .map(|&(t, p)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(vec![commit_partition(p)])
                })
                .collect(),
        )
}

/// Sends `case`'s request and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: Case) -> Result<String> {
    Ok(match case {
        Case::Features(f) => crate::features::exchange(c, f).await?,
        Case::ShareOffsets(s) => crate::share_offsets::exchange(c, s).await?,
        Case::ShareState(s) => crate::share_state::exchange(c, s).await?,
        Case::ApiVersions => render(c.call(3, &api_versions_request()).await?),
        Case::CreateTopicInvalidName => render(
            c.call(7, &create_topics_request("bad/name", 1, 1, &[]))
                .await?,
        ),
        Case::CreateTopicZeroPartitions => render(
            c.call(7, &create_topics_request("diff-zero", 0, 1, &[]))
                .await?,
        ),
        Case::CreateTopicExists => {
            render(c.call(7, &create_topics_request(TOPIC, 1, 1, &[])).await?)
        }
        Case::Metadata => render(c.call(12, &metadata_request(&[TOPIC], false)).await?),
        Case::Produce => {
            let r = produce_request(TOPIC, 0, -1, Bytes::from(known_batch()));
            render(c.call(11, &r).await?)
        }
        Case::FetchFromStart => render(
            c.call(12, &fetch_request(12, TOPIC, Uuid::nil(), 0, 0, 0, 1))
                .await?,
        ),
        Case::FetchOutOfRange => {
            let r = fetch_request(12, TOPIC, Uuid::nil(), 0, 1000, 0, 1);
            render(c.call(12, &r).await?)
        }
        Case::FetchOutOfRangeClassic => render(
            c.call(4, &fetch_request(4, TOPIC, Uuid::nil(), 0, 1000, 0, 1))
                .await?,
        ),
        Case::FetchUnknownPartition => render(
            c.call(12, &fetch_request(12, TOPIC, Uuid::nil(), 7, 0, 0, 1))
                .await?,
        ),
        Case::FetchUnknownPartitionClassic => render(
            c.call(4, &fetch_request(4, TOPIC, Uuid::nil(), 7, 0, 0, 1))
                .await?,
        ),
        Case::FetchMaxBytesOne => render(c.call(12, &fetch_limits(1, 1 << 20)).await?),
        Case::FetchPartitionMaxBytesOne => render(c.call(12, &fetch_limits(1 << 20, 1)).await?),
        Case::FetchMaxBytesBatchAndAHalf => {
            let half = limits_batch(0).len() as i32 * 3 / 2;
            render(c.call(12, &fetch_limits(half, 1 << 20)).await?)
        }
        Case::FetchMaxBytesOneClassic => render(c.call(4, &fetch_limits(1, 1 << 20)).await?),
        Case::ListOffsetsEarliest => render(c.call(8, &list_offsets(TOPIC, &[0], -2)).await?),
        Case::ListOffsetsLatest => render(c.call(8, &list_offsets(TOPIC, &[0], -1)).await?),
        Case::ListOffsetsByTimestamp => {
            render(c.call(8, &list_offsets(TOPIC, &[0], TIMESTAMP)).await?)
        }
        Case::ListOffsetsInsideBatch => {
            render(c.call(8, &list_offsets(TS_TOPIC, &[0, 1], 5000)).await?)
        }
        Case::ListOffsetsMaxTimestamp => {
            render(c.call(8, &list_offsets(TS_TOPIC, &[0, 1], -3)).await?)
        }
        Case::ListOffsetsEarliestLocal => {
            render(c.call(8, &list_offsets(TS_TOPIC, &[0, 1], -4)).await?)
        }
        Case::ListOffsetsLatestTiered => {
            render(c.call(9, &list_offsets(TS_TOPIC, &[0, 1], -5)).await?)
        }
        Case::OffsetCommit => render(c.call(8, &offset_commit(&[(TOPIC, 0)])).await?),
        Case::OffsetCommitUnknown => {
            let r = offset_commit(&[("diff-nope", 0), (TOPIC, 5)]);
            render(c.call(8, &r).await?)
        }
        Case::OffsetFetch => {
            let r =
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(topic_name(TOPIC))
                        .with_partition_indexes(vec![0])]))]);
            render(c.call(8, &r).await?)
        }
        Case::OffsetDeleteUnknown => {
            let topic = |t, p| {
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name(t))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(p)
                    ])
            };
            let r = OffsetDeleteRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_topics(vec![topic("diff-nope", 0), topic(TOPIC, 5)]);
            render(c.call(0, &r).await?)
        }
        Case::FindCoordinator => render(c.call(4, &find_coordinator_request()).await?),
        Case::FindCoordinatorClassic => {
            let r = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_key(StrBytes::from_static_str(GROUP));
            render(c.call(3, &r).await?)
        }
        Case::FindCoordinatorShare => {
            render(c.call(6, &share_coordinator_request(&[SHARE_KEY])).await?)
        }
        Case::FindCoordinatorShareMalformed => {
            let keys = ["", "g", "g:not-a-topic-id:1", " :AAAAAAAAAAAAAAAAAAAAAg:1"];
            render(c.call(6, &share_coordinator_request(&keys)).await?)
        }
        Case::FindCoordinatorShareOld => {
            render(c.call(5, &share_coordinator_request(&[SHARE_KEY])).await?)
        }
        Case::Admin(a) => crate::admin::exchange(c, a).await?,
        Case::Quotas(q) => crate::quotas::exchange(c, q).await?,
        Case::Throttling(t) => crate::throttling::exchange(c, t).await?,
        Case::Scram(k) => crate::scram::exchange(c, k).await?,
    })
}

/// A share-partition key (`groupId:topicId:partition`): the topic id need not exist (a share
/// coordinator is found by the key's hash alone), so both brokers get the same key.
const SHARE_KEY: &str = "diff-share:AAAAAAAAAAAAAAAAAAAAAg:+3";

fn share_coordinator_request(keys: &[&'static str]) -> FindCoordinatorRequest {
    FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(keys.iter().map(|k| StrBytes::from_static_str(k)).collect())
}

fn find_coordinator_request() -> FindCoordinatorRequest {
    FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_static_str(GROUP)])
}

/// The batch both brokers store: plain, two records, a fixed CreateTime.
fn known_batch() -> Vec<u8> {
    let records: Vec<_> = VALUES.iter().map(|v| (None, Some(*v))).collect();
    sluice::record::build_batch(0, TIMESTAMP, (-1, -1, -1), &records)
}

/// One of the diff-limits batches: three 100-byte records, `n` in every value byte.
fn limits_batch(n: u8) -> Vec<u8> {
    let value = [b'a' + n; 100];
    let records: Vec<_> = (0..3).map(|_| (None, Some(&value[..]))).collect();
    sluice::record::build_batch(0, TIMESTAMP, (-1, -1, -1), &records)
}

/// A batch whose records carry the given CreateTime timestamps, plain or gzip.
fn timestamped_batch(timestamps: &[i64], gzip: bool) -> Vec<u8> {
    use sluice::record::build::{batch_with_timestamps, compress_batch, Codec};
    let plain = batch_with_timestamps(0, timestamps, 0);
    if gzip {
        compress_batch(&plain, Codec::Gzip)
    } else {
        plain
    }
}

/// Produces `batch` (acks=-1), retrying while a new topic's leader is not known yet (Kafka
/// answers UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER for a moment).
async fn produce_retrying(c: &mut Client, topic: &str, partition: i32, b: &[u8]) -> Result<()> {
    for _ in 0..100 {
        let r = produce_request(topic, partition, -1, Bytes::copy_from_slice(b));
        let r = c.call(11, &r).await?;
        let p = &r.responses[0].partition_responses[0];
        match p.error_code {
            0 => return Ok(()),
            3 | 5 | 6 => tokio::time::sleep(Duration::from_millis(100)).await,
            e => bail!(
                "producing to {topic}-{partition}: error {e} {:?}",
                p.error_message
            ),
        }
    }
    bail!("{topic}-{partition} had no leader after 10 s")
}

/// Creates the corpus's topics and produces their records, the same on both brokers.
pub async fn setup(c: &mut Client) -> Result<()> {
    for (topic, partitions) in [(TOPIC, 1), (TS_TOPIC, 2), (LIMITS_TOPIC, 2)] {
        let r = c
            .call(7, &create_topics_request(topic, partitions, 1, &[]))
            .await?;
        let code = r.topics.first().map_or(-1, |t| t.error_code);
        if code != 0 {
            bail!("creating {topic}: error {code}");
        }
    }
    produce_retrying(c, TOPIC, 0, &batch(VALUES)).await?;
    produce_retrying(c, TS_TOPIC, 0, &timestamped_batch(TS_PLAIN, false)).await?;
    produce_retrying(c, TS_TOPIC, 1, &timestamped_batch(TS_GZIP, true)).await?;
    for p in 0..2 {
        for n in 0..2 {
            produce_retrying(c, LIMITS_TOPIC, p, &limits_batch(p as u8 * 2 + n)).await?;
        }
    }
    Ok(())
}

/// Waits until the group coordinator of the corpus's group answers (Kafka creates
/// `__consumer_offsets` on the first FindCoordinator and loads it before it answers).
pub async fn find_coordinator(c: &mut Client) -> Result<()> {
    for _ in 0..150 {
        let r = c.call(4, &find_coordinator_request()).await?;
        match r.coordinators.first().map_or(-1, |c| c.error_code) {
            0 => {
                // and the coordinator has loaded it: a commit no longer answers 14/15/16
                let commit = exchange(c, Case::OffsetCommit).await?;
                if !["error_code: 14", "error_code: 15", "error_code: 16"]
                    .iter()
                    .any(|e| commit.contains(e))
                {
                    return Ok(());
                }
            }
            15 => {}
            e => bail!("FindCoordinator: error {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("no group coordinator after 15 s")
}
