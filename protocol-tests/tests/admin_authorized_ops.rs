//! Authorized operations on the wire: Metadata (v8+ topics, v8-10 cluster), DescribeCluster,
//! DescribeTopicPartitions, DescribeGroups (v3+) and ConsumerGroupDescribe. Without an authorizer
//! Kafka 4.1.2 answers every operation the resource type supports (topic 3576, group 3400, cluster
//! 8096, read from the real broker), and -2147483648 when the client did not ask or the entry is
//! an error (groups). Each test starts its own broker in-process.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC_OPS: i32 = 3576;
const GROUP_OPS: i32 = 3400;
const CLUSTER_OPS: i32 = 8096;
const OMITTED: i32 = i32::MIN;

/// DescribeGroups version, include flag, and (error, state, operations) per described group.
type Case = (i16, bool, [(i16, &'static str, i32); 2]);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn metadata_request(topics: &[&str], include: bool, version: i16) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(
            topics
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(tn(t))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(include)
        .with_include_cluster_authorized_operations(include && version <= 10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_reports_topic_and_cluster_operations_when_asked() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_v(&mut c, 7, "ops", 1, &[], false)
            .await
            .error_code,
        0
    );
    for v in [8i16, 10, 12, 13] {
        for include in [true, false] {
            let req = metadata_request(&["ops", "absent"], include, v);
            let r: MetadataResponse = c.call(ApiKey::Metadata, v, &req).await;
            let ops: Vec<(i16, i32)> = r
                .topics
                .iter()
                .map(|t| (t.error_code, t.topic_authorized_operations))
                .collect();
            let want = if include { TOPIC_OPS } else { OMITTED };
            // Kafka lists the operations of an unknown topic too.
            assert_eq!(ops, vec![(0, want), (3, want)], "v{v} include={include}");
            let cluster = if include && v <= 10 {
                CLUSTER_OPS
            } else {
                OMITTED
            };
            assert_eq!(
                r.cluster_authorized_operations, cluster,
                "v{v} include={include}"
            );
        }
    }
    // All topics (null list) carry them as well.
    let req = MetadataRequest::default()
        .with_topics(None)
        .with_include_topic_authorized_operations(true);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).await;
    assert!(!r.topics.is_empty());
    assert!(r
        .topics
        .iter()
        .all(|t| t.topic_authorized_operations == TOPIC_OPS));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_and_topic_partitions_operations() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_v(&mut c, 7, "dtp", 1, &[], false)
            .await
            .error_code,
        0
    );
    for (v, include, want) in [
        (0i16, true, CLUSTER_OPS),
        (0, false, OMITTED),
        (2, true, CLUSTER_OPS),
    ] {
        let req =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(include);
        let r: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, v, &req).await;
        assert_eq!(
            r.cluster_authorized_operations, want,
            "v{v} include={include}"
        );
    }
    let req = DescribeTopicPartitionsRequest::default()
        .with_topics(
            ["dtp", "nope"]
                .iter()
                .map(|t| {
                    describe_topic_partitions_request::TopicRequest::default().with_name(tn(t))
                })
                .collect(),
        )
        .with_response_partition_limit(10);
    let r: DescribeTopicPartitionsResponse = c.call(ApiKey::DescribeTopicPartitions, 0, &req).await;
    let got: Vec<(String, i16, i32)> = r
        .topics
        .iter()
        .map(|t| {
            let name = t
                .name
                .as_ref()
                .map(|n| n.as_str().to_string())
                .unwrap_or_default();
            (name, t.error_code, t.topic_authorized_operations)
        })
        .collect();
    assert_eq!(
        got,
        vec![("dtp".into(), 0, TOPIC_OPS), ("nope".into(), 3, TOPIC_OPS)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_descriptions_carry_group_operations() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_v(&mut c, 7, "t", 1, &[], false)
            .await
            .error_code,
        0
    );
    // A simple (classic, Empty) group through a commit.
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("simple")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(tn("t"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(0)])]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req).await;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);
    // (version, include, [(error, state, ops) for "simple" and an unknown group])
    let cases: [Case; 4] = [
        (3, true, [(0, "Empty", GROUP_OPS), (0, "Dead", GROUP_OPS)]),
        (5, true, [(0, "Empty", GROUP_OPS), (0, "Dead", GROUP_OPS)]),
        (5, false, [(0, "Empty", OMITTED), (0, "Dead", OMITTED)]),
        (6, true, [(0, "Empty", GROUP_OPS), (69, "Dead", OMITTED)]),
    ];
    for (v, include, want) in cases {
        let req = DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(s("simple")), GroupId(s("nogroup"))])
            .with_include_authorized_operations(include);
        let r: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, v, &req).await;
        let got: Vec<(i16, &str, i32)> = r
            .groups
            .iter()
            .map(|g| {
                (
                    g.error_code,
                    g.group_state.as_str(),
                    g.authorized_operations,
                )
            })
            .collect();
        assert_eq!(got, want.to_vec(), "DescribeGroups v{v} include={include}");
    }

    // A KIP-848 consumer group.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(s("m1-aaaaaaaaaaaaaaaaaaaa"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30000)
        .with_subscribed_topic_names(Some(vec![tn("t")]))
        .with_topic_partitions(Some(vec![]));
    let r: ConsumerGroupHeartbeatResponse = c.call(ApiKey::ConsumerGroupHeartbeat, 0, &req).await;
    assert_eq!(r.error_code, 0);
    for (v, include) in [(0i16, true), (0, false), (1, true)] {
        let req = ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![
                GroupId(s("cg")),
                GroupId(s("nocg")),
                GroupId(s("simple")),
            ])
            .with_include_authorized_operations(include);
        let r: ConsumerGroupDescribeResponse = c.call(ApiKey::ConsumerGroupDescribe, v, &req).await;
        let got: Vec<(i16, i32)> = r
            .groups
            .iter()
            .map(|g| (g.error_code, g.authorized_operations))
            .collect();
        let ok = if include { GROUP_OPS } else { OMITTED };
        // Errors (not found, not a consumer group) carry no operations, as in Kafka.
        assert_eq!(
            got,
            vec![(0, ok), (69, OMITTED), (69, OMITTED)],
            "ConsumerGroupDescribe v{v} include={include}"
        );
    }
}
