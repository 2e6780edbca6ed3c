//! The replica-placement and config-listing APIs stock admin clients call, answered as a
//! one-broker Apache Kafka 4.1.2 answers them (read from the real broker): AlterReplicaLogDirs
//! (34) v1-2, AlterPartitionReassignments (45) v0-1, ListPartitionReassignments (46) v0 and
//! ListConfigResources (74) v0-1, each advertised with Kafka 4.1's range.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// Path, topic, partitions asked, (partition, error code) answered.
type LogDirCase<'a> = (&'a str, &'a str, &'a [i32], &'a [(i32, i16)]);
/// Topic, partition, target replicas (None cancels), error code and message answered.
type ReassignCase = (
    &'static str,
    i32,
    Option<Vec<i32>>,
    i16,
    Option<&'static str>,
);
/// Resource types asked, error code, (type, name) listed.
type ListCase = (Vec<i8>, i16, Vec<(i8, String)>);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_advertises_kafkas_ranges_for_the_new_apis() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let req = ApiVersionsRequest::default()
        .with_client_software_name(s("t"))
        .with_client_software_version(s("1"));
    let r: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &req).await;
    let range = |k: i16| {
        r.api_keys
            .iter()
            .find(|a| a.api_key == k)
            .map(|a| (a.min_version, a.max_version))
    };
    // Kafka 4.1.2's ApiVersions answer for these keys.
    assert_eq!(range(34), Some((1, 2)), "AlterReplicaLogDirs");
    assert_eq!(range(45), Some((0, 1)), "AlterPartitionReassignments");
    assert_eq!(range(46), Some((0, 0)), "ListPartitionReassignments");
    assert_eq!(range(74), Some((0, 1)), "ListConfigResources");
}

async fn log_dir(c: &mut Client) -> String {
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![]));
    let r: DescribeLogDirsResponse = c.call(ApiKey::DescribeLogDirs, 4, &req).await;
    r.results[0].log_dir.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_replica_log_dirs_to_the_only_log_dir() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_v(&mut c, 7, "t", 2, &[], false)
            .await
            .error_code,
        0
    );
    let dir = log_dir(&mut c).await;
    let cases: [LogDirCase; 3] = [
        (&dir, "t", &[0, 1, 5], &[(0, 0), (1, 0), (5, 3)]),
        ("/nonexistent", "t", &[0], &[(0, 57)]), // LOG_DIR_NOT_FOUND
        (&dir, "nosuch", &[0], &[(0, 3)]),
    ];
    for v in [1i16, 2] {
        for (path, topic, partitions, want) in cases {
            let req =
                AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default(
                )
                .with_path(s(path))
                .with_topics(vec![AlterReplicaLogDirTopic::default()
                    .with_name(tn(topic))
                    .with_partitions(partitions.to_vec())])]);
            let r: AlterReplicaLogDirsResponse = c.call(ApiKey::AlterReplicaLogDirs, v, &req).await;
            assert_eq!(r.results.len(), 1);
            assert_eq!(r.results[0].topic_name.as_str(), topic);
            let got: Vec<(i32, i16)> = r.results[0]
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
                .collect();
            assert_eq!(got, want.to_vec(), "v{v} {path} {topic}");
        }
    }
    // The data is where it was.
    assert_eq!(produce(&mut c, "t", 0, 0, 1).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_reassignments_on_one_broker() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(
        create_topic_v(&mut c, 7, "t", 2, &[], false)
            .await
            .error_code,
        0
    );
    let unregistered =
        "The manual partition assignment includes broker 2, but no such broker is registered.";
    let cases: Vec<ReassignCase> = vec![
        ("t", 0, Some(vec![1]), 0, None),
        ("t", 1, Some(vec![2]), 39, Some(unregistered)),
        ("t", 0, Some(vec![1, 2]), 39, Some(unregistered)),
        ("t", 0, None, 85, None), // NO_REASSIGNMENT_IN_PROGRESS
        (
            "t",
            9,
            Some(vec![1]),
            3,
            Some("Unable to find partition t:9."),
        ),
        (
            "nosuch",
            0,
            Some(vec![1]),
            3,
            Some("Unable to find a topic named nosuch."),
        ),
        (
            "t",
            0,
            Some(vec![]),
            39,
            Some("The manual partition assignment includes an empty replica list."),
        ),
        (
            "t",
            0,
            Some(vec![1, 1]),
            39,
            Some("The manual partition assignment includes the broker 1 more than once."),
        ),
    ];
    for v in [0i16, 1] {
        for (topic, partition, replicas, code, message) in &cases {
            // v0 cannot carry allow_replication_factor_change = false; v1 echoes it.
            let allow = v == 0 || *partition != 0;
            let req = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(5000)
                .with_allow_replication_factor_change(allow)
                .with_topics(vec![ReassignableTopic::default()
                    .with_name(tn(topic))
                    .with_partitions(vec![ReassignablePartition::default()
                        .with_partition_index(*partition)
                        .with_replicas(
                            replicas
                                .clone()
                                .map(|r| r.into_iter().map(BrokerId).collect()),
                        )])]);
            let r: AlterPartitionReassignmentsResponse =
                c.call(ApiKey::AlterPartitionReassignments, v, &req).await;
            assert_eq!((r.error_code, r.error_message.clone()), (0, None));
            if v == 1 {
                assert_eq!(r.allow_replication_factor_change, allow);
            }
            let p = &r.responses[0].partitions[0];
            assert_eq!(r.responses[0].name.as_str(), *topic);
            assert_eq!(
                (p.partition_index, p.error_code, p.error_message.as_deref()),
                (*partition, *code, *message),
                "v{v} {topic}-{partition} {replicas:?}"
            );
        }
    }
    for topics in [
        None,
        Some(vec![ListPartitionReassignmentsTopics::default()
            .with_name(tn("t"))
            .with_partition_indexes(vec![0, 7])]),
        Some(vec![ListPartitionReassignmentsTopics::default()
            .with_name(tn("nosuch"))
            .with_partition_indexes(vec![0])]),
    ] {
        let req = ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(topics);
        let r: ListPartitionReassignmentsResponse =
            c.call(ApiKey::ListPartitionReassignments, 0, &req).await;
        assert_eq!(
            (r.error_code, r.error_message, r.topics.len()),
            (0, None, 0)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_config_resources_by_type() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    for t in ["b-topic", "a-topic"] {
        assert_eq!(
            create_topic_v(&mut c, 7, t, 1, &[], false).await.error_code,
            0
        );
    }
    let list = |types: Vec<i8>| ListConfigResourcesRequest::default().with_resource_types(types);
    // v0 is ListClientMetricsResources: no subscriptions here.
    let r: ListConfigResourcesResponse = c
        .call(
            ApiKey::ListConfigResources,
            0,
            &ListConfigResourcesRequest::default(),
        )
        .await;
    assert_eq!((r.error_code, r.config_resources.len()), (0, 0));
    let topics = vec![(2i8, "a-topic".to_string()), (2, "b-topic".to_string())];
    let cases: Vec<ListCase> = vec![
        (
            vec![],
            0,
            [
                vec![(8, "1".to_string()), (4, "1".to_string())],
                topics.clone(),
            ]
            .concat(),
        ),
        (vec![2], 0, topics.clone()),
        (vec![2, 2], 0, topics.clone()),
        (vec![4], 0, vec![(4, "1".to_string())]),
        (vec![8], 0, vec![(8, "1".to_string())]),
        (vec![16], 0, vec![]),
        (vec![32], 0, vec![]),
        (vec![7], 35, vec![]), // UNSUPPORTED_VERSION, as Kafka answers an unknown type
    ];
    for (types, code, want) in cases {
        let r: ListConfigResourcesResponse = c
            .call(ApiKey::ListConfigResources, 1, &list(types.clone()))
            .await;
        let got: Vec<(i8, String)> = r
            .config_resources
            .iter()
            .map(|x| (x.resource_type, x.resource_name.to_string()))
            .collect();
        assert_eq!((r.error_code, got), (code, want), "{types:?}");
    }
}
