//! The API versions Sluice advertises in ApiVersions, and nothing it does not implement.
//!
//! Ranges start where Kafka 4.1 starts them (clients pick the highest overlap and trust it).
//! Produce advertises 0-13 although v0-2 cannot be used: librdkafka before 2.11.1 enables
//! compression only when those old versions are inside the advertised range (see kafka-notes.md).

use kafka_protocol::messages::ApiKey;

/// One advertised API: key, min and max version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn r(key: ApiKey, min: i16, max: i16) -> ApiRange {
    ApiRange { key, min, max }
}

/// Every API the broker handles, in key order.
pub const ADVERTISED: &[ApiRange] = &[
    r(ApiKey::Produce, 0, 13),
    r(ApiKey::Fetch, 4, 18),
    r(ApiKey::ListOffsets, 1, 10),
    r(ApiKey::Metadata, 0, 13),
    r(ApiKey::OffsetCommit, 2, 9),
    r(ApiKey::OffsetFetch, 1, 9),
    r(ApiKey::FindCoordinator, 0, 6),
    r(ApiKey::JoinGroup, 0, 9),
    r(ApiKey::Heartbeat, 0, 4),
    r(ApiKey::LeaveGroup, 0, 5),
    r(ApiKey::SyncGroup, 0, 5),
    r(ApiKey::DescribeGroups, 0, 6),
    r(ApiKey::ListGroups, 0, 5),
    r(ApiKey::ApiVersions, 0, 4),
    r(ApiKey::CreateTopics, 2, 7),
    r(ApiKey::DeleteTopics, 1, 6),
    r(ApiKey::DeleteRecords, 0, 2),
    r(ApiKey::InitProducerId, 0, 5),
    r(ApiKey::OffsetForLeaderEpoch, 2, 4),
    r(ApiKey::AddPartitionsToTxn, 0, 5),
    r(ApiKey::AddOffsetsToTxn, 0, 4),
    r(ApiKey::EndTxn, 0, 5),
    r(ApiKey::WriteTxnMarkers, 1, 1),
    r(ApiKey::TxnOffsetCommit, 0, 5),
    r(ApiKey::DescribeConfigs, 1, 4),
    r(ApiKey::AlterConfigs, 0, 2),
    r(ApiKey::AlterReplicaLogDirs, 1, 2),
    r(ApiKey::DescribeLogDirs, 1, 4),
    r(ApiKey::CreatePartitions, 0, 3),
    r(ApiKey::DeleteGroups, 0, 2),
    r(ApiKey::ElectLeaders, 0, 2),
    r(ApiKey::IncrementalAlterConfigs, 0, 1),
    r(ApiKey::AlterPartitionReassignments, 0, 1),
    r(ApiKey::ListPartitionReassignments, 0, 0),
    r(ApiKey::OffsetDelete, 0, 0),
    r(ApiKey::DescribeClientQuotas, 0, 1),
    r(ApiKey::AlterClientQuotas, 0, 1),
    r(ApiKey::DescribeUserScramCredentials, 0, 0),
    r(ApiKey::DescribeQuorum, 0, 2),
    r(ApiKey::DescribeCluster, 0, 2),
    r(ApiKey::UpdateFeatures, 0, 2),
    r(ApiKey::DescribeProducers, 0, 0),
    r(ApiKey::DescribeTransactions, 0, 0),
    r(ApiKey::ListTransactions, 0, 2),
    r(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    r(ApiKey::ConsumerGroupDescribe, 0, 1),
    r(ApiKey::ShareGroupHeartbeat, 1, 1),
    r(ApiKey::ShareGroupDescribe, 1, 1),
    r(ApiKey::ShareFetch, 1, 2),
    r(ApiKey::ShareAcknowledge, 1, 2),
    r(ApiKey::ListConfigResources, 0, 1),
    r(ApiKey::DescribeTopicPartitions, 0, 0),
    r(ApiKey::InitializeShareGroupState, 0, 0),
    r(ApiKey::ReadShareGroupState, 0, 0),
    r(ApiKey::WriteShareGroupState, 0, 0),
    r(ApiKey::DeleteShareGroupState, 0, 0),
    r(ApiKey::ReadShareGroupStateSummary, 0, 0),
    r(ApiKey::DescribeShareGroupOffsets, 0, 0),
    r(ApiKey::AlterShareGroupOffsets, 0, 0),
    r(ApiKey::DeleteShareGroupOffsets, 0, 0),
];

/// APIs advertised beyond the crate's newest version, with the newest version and the codec that
/// reads and writes it.
pub const BEYOND_CRATE: &[(ApiKey, i16, &str)] = &[
    (ApiKey::ShareFetch, 2, "protocol::share_v2"),
    (ApiKey::ShareAcknowledge, 2, "protocol::share_v2"),
];

/// The KIP-932 share-group APIs, advertised only while `share.version` is finalized at 1+
/// (as Kafka's ApiVersions leaves them out when share groups are disabled).
pub const SHARE_APIS: &[ApiKey] = &[
    ApiKey::ShareGroupHeartbeat,
    ApiKey::ShareGroupDescribe,
    ApiKey::ShareFetch,
    ApiKey::ShareAcknowledge,
    ApiKey::DescribeShareGroupOffsets,
    ApiKey::AlterShareGroupOffsets,
    ApiKey::DeleteShareGroupOffsets,
];

/// Versions a request may actually use. Produce v0-2 are advertised but refused (the decoder does
/// not know them, and Kafka 4 removed them).
pub fn usable_min(key: ApiKey) -> Option<i16> {
    match key {
        ApiKey::Produce => Some(3),
        _ => supported_range(key).map(|r| r.min),
    }
}

/// The advertised range of `key`, if Sluice handles it.
pub fn supported_range(key: ApiKey) -> Option<ApiRange> {
    ADVERTISED.iter().copied().find(|r| r.key == key)
}

/// Whether a request of `key` at `version` can be handled.
pub fn is_usable(key: ApiKey, version: i16) -> bool {
    match (supported_range(key), usable_min(key)) {
        (Some(range), Some(min)) => version >= min && version <= range.max,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_ranges_fit_the_crate() {
        for a in ADVERTISED {
            let crate_range = a.key.valid_versions();
            let min = usable_min(a.key).unwrap();
            assert!(min >= crate_range.min, "{:?}", a.key);
            let max = BEYOND_CRATE
                .iter()
                .find(|(k, _, _)| *k == a.key)
                .map_or(crate_range.max, |(_, v, _)| *v);
            assert!(a.max <= max, "{:?}", a.key);
        }
    }

    #[test]
    fn produce_old_versions_are_advertised_but_not_usable() {
        assert_eq!(supported_range(ApiKey::Produce).unwrap().min, 0);
        assert!(!is_usable(ApiKey::Produce, 2));
        assert!(is_usable(ApiKey::Produce, 3));
        assert!(is_usable(ApiKey::Produce, 13));
        assert!(!is_usable(ApiKey::Produce, 14));
        assert!(is_usable(ApiKey::JoinGroup, 0));
        assert!(is_usable(ApiKey::ConsumerGroupHeartbeat, 1));
        assert!(!is_usable(ApiKey::ConsumerGroupHeartbeat, 2));
        assert!(is_usable(ApiKey::ShareFetch, 2));
        assert!(is_usable(ApiKey::ShareAcknowledge, 2));
        assert!(!is_usable(ApiKey::ShareFetch, 3));
    }
}
