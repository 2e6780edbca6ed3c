//! Manual replica assignments and topic name collisions on the wire: CreateTopics v7 and
//! CreatePartitions v3 with explicit assignments (this node's id works, anything else gets
//! Kafka's INVALID_REPLICA_ASSIGNMENT / INVALID_REQUEST message), and Kafka's `.`/`_` collision
//! rule in CreateTopics and Metadata auto-creation. Expected answers are Apache Kafka 4.1.2's,
//! read from the real broker (node id 1, like the test broker's default).

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn tn(v: &str) -> TopicName {
    TopicName(StrBytes::from_string(v.to_string()))
}

fn brokers(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|b| BrokerId(*b)).collect()
}

/// CreateTopics v7 of one topic: (error code, message, partitions, replication factor).
async fn create(
    c: &mut Client,
    name: &str,
    num_partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, &[i32])],
) -> (i16, Option<String>, i32, i16) {
    let topic = CreatableTopic::default()
        .with_name(tn(name))
        .with_num_partitions(num_partitions)
        .with_replication_factor(replication_factor)
        .with_assignments(
            assignments
                .iter()
                .map(|(p, b)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(*p)
                        .with_broker_ids(brokers(b))
                })
                .collect(),
        );
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(5000);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req).await;
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
        t.num_partitions,
        t.replication_factor,
    )
}

/// CreatePartitions v3 of one topic: (error code, message).
async fn grow(c: &mut Client, name: &str, count: i32, lists: &[&[i32]]) -> (i16, Option<String>) {
    let topic = CreatePartitionsTopic::default()
        .with_name(tn(name))
        .with_count(count)
        .with_assignments(Some(
            lists
                .iter()
                .map(|b| CreatePartitionsAssignment::default().with_broker_ids(brokers(b)))
                .collect(),
        ));
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(5000);
    let r: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &req).await;
    (
        r.results[0].error_code,
        r.results[0].error_message.as_ref().map(|m| m.to_string()),
    )
}

/// Whether Metadata (no auto-creation) knows the topic.
async fn exists(c: &mut Client, name: &str) -> bool {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(tn(name)))
        ]))
        .with_allow_auto_topic_creation(false);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).await;
    r.topics[0].error_code == 0
}

/// Topic, numPartitions, replication factor, assignments, expected error code and message.
type CreateCase = (
    &'static str,
    i32,
    i16,
    &'static [(i32, &'static [i32])],
    i16,
    &'static str,
);

const UNREGISTERED_2: &str =
    "The manual partition assignment includes broker 2, but no such broker is registered.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_with_a_manual_assignment_of_this_node() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    // Listed out of order, as Kafka allows.
    let ok = create(&mut c, "manual", -1, -1, &[(1, &[1]), (0, &[1])]).await;
    assert_eq!(ok, (0, None, 2, 1));
    assert_eq!(partition_count(&mut c, "manual").await, 2);
    let cases: [CreateCase; 10] = [
        ("unk", -1, -1, &[(0, &[2])], 39, UNREGISTERED_2),
        ("unk2", -1, -1, &[(0, &[1, 2])], 39, UNREGISTERED_2),
        ("dup", -1, -1, &[(0, &[1, 1])], 39, "The manual partition assignment includes the broker 1 more than once."),
        ("empty", -1, -1, &[(0, &[])], 39, "The manual partition assignment includes an empty replica list."),
        ("incons", -1, -1, &[(0, &[1]), (1, &[])], 39, "The manual partition assignment includes an empty replica list."),
        ("gap", -1, -1, &[(0, &[1]), (2, &[1])], 39, "partitions should be a consecutive 0-based integer sequence"),
        ("start1", -1, -1, &[(1, &[1])], 39, "partitions should be a consecutive 0-based integer sequence"),
        ("twice", -1, -1, &[(0, &[1]), (0, &[1])], 39, "Found multiple manual partition assignments for partition 0"),
        ("np", 2, -1, &[(0, &[1])], 42, "A manual partition assignment was specified, but numPartitions was not set to -1."),
        ("rf", -1, 1, &[(0, &[1])], 42, "A manual partition assignment was specified, but replication factor was not set to -1."),
    ];
    for (name, np, rf, assignments, code, message) in cases {
        let got = create(&mut c, name, np, rf, assignments).await;
        assert_eq!(got, (code, Some(message.to_string()), -1, -1), "{name}");
        assert!(!exists(&mut c, name).await, "{name} was not created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_with_a_manual_assignment_of_this_node() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(create(&mut c, "grow", 2, -1, &[]).await.0, 0);
    assert_eq!(grow(&mut c, "grow", 3, &[&[1]]).await, (0, None));
    assert_eq!(grow(&mut c, "grow", 5, &[&[1], &[1]]).await, (0, None));
    assert_eq!(partition_count(&mut c, "grow").await, 5);
    let cases: [(i32, &[&[i32]], &str); 6] = [
        (6, &[&[2]], UNREGISTERED_2),
        (6, &[&[1, 2]], UNREGISTERED_2),
        (
            6,
            &[&[1, 1]],
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            6,
            &[&[]],
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            7,
            &[&[1]],
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            6,
            &[&[1], &[1]],
            "Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.",
        ),
    ];
    for (count, lists, message) in cases {
        let got = grow(&mut c, "grow", count, lists).await;
        assert_eq!(got, (39, Some(message.to_string())), "{count} {lists:?}");
    }
    assert_eq!(partition_count(&mut c, "grow").await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_names_colliding_under_dot_and_underscore_are_refused() {
    let b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    assert_eq!(create(&mut c, "x.y", 1, -1, &[]).await.0, 0);
    let msg = |m: &str| Some(m.to_string());
    assert_eq!(
        create(&mut c, "x_y", 1, -1, &[]).await,
        (
            17,
            msg("Topic 'x_y' collides with existing topic: x.y"),
            -1,
            -1
        )
    );
    assert_eq!(
        create(&mut c, "x.y", 1, -1, &[]).await,
        (36, msg("Topic 'x.y' already exists."), -1, -1)
    );
    // Validate-only is refused the same way.
    let r = create_topic_v(&mut c, 7, "x_y", 1, &[], true).await;
    assert_eq!(r.error_code, 17);
    // Auto-creation through Metadata: Kafka's controller refuses it and the name stays unknown.
    for _ in 0..2 {
        let req = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(tn("x_y")))
            ]))
            .with_allow_auto_topic_creation(true);
        let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).await;
        assert_eq!(
            (r.topics[0].error_code, r.topics[0].partitions.len()),
            (3, 0)
        );
    }
    let topics = b
        .dir()
        .read_dir()
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("x_y"))
        .count();
    assert_eq!(topics, 0, "no x_y directory was made");
}
