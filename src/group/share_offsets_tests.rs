//! The share-group offsets steps on the coordinator: which partitions a describe reads, alter on
//! empty / non-empty / new groups, delete, and the group records they write.

use kafka_protocol::messages::alter_share_group_offsets_request as asq;
use kafka_protocol::messages::delete_share_group_offsets_request as dsq;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, GroupId,
    ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::super::consumer::{MetadataImage, TopicImage};
use super::super::share::ShareHeartbeatInput;
use super::super::{codes, Coordinator, GroupConfig};
use super::DescribeTarget;
use crate::share::registry::ShareKey;

const TOPIC: Uuid = Uuid::from_u128(0x42);

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn image() -> MetadataImage {
    let mut m = MetadataImage::new();
    m.insert(
        "t".into(),
        TopicImage {
            id: TOPIC,
            partitions: 2,
        },
    );
    m
}

fn join(c: &mut Coordinator, group: &str, member: &str) {
    let input = ShareHeartbeatInput {
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_member_epoch(0)
            .with_subscribed_topic_names(Some(vec![TopicName(sb("t"))])),
    };
    let r = c.share_heartbeat(0, input, &image());
    assert_eq!(r.error_code, codes::NONE);
}

fn leave(c: &mut Coordinator, group: &str, member: &str) {
    let input = ShareHeartbeatInput {
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb(group)))
            .with_member_id(sb(member))
            .with_member_epoch(-1),
    };
    assert_eq!(
        c.share_heartbeat(0, input, &image()).error_code,
        codes::NONE
    );
}

fn alter(group: &str, topics: &[(&str, &[(i32, i64)])]) -> AlterShareGroupOffsetsRequest {
    AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    asq::AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(sb(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|(p, o)| {
                                    asq::AlterShareGroupOffsetsRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_start_offset(*o)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn delete(group: &str, topics: &[&str]) -> DeleteShareGroupOffsetsRequest {
    DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(sb(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    dsq::DeleteShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(TopicName(sb(t)))
                })
                .collect(),
        )
}

fn initialized(c: &Coordinator, group: &str) -> Vec<(Uuid, Vec<i32>)> {
    c.share_groups[group]
        .initialized()
        .iter()
        .map(|(id, t)| (*id, t.partitions.iter().copied().collect()))
        .collect()
}

#[test]
fn alter_of_a_new_group_creates_it_and_initializes_the_known_partitions() {
    let mut c = Coordinator::new(GroupConfig::default());
    let step = c.share_offsets_alter(
        &alter(
            "g",
            &[("t", &[(0, 5), (1, 0), (7, 1)]), ("nope", &[(0, 1)])],
        ),
        &image(),
    );
    assert_eq!(step.response.error_code, codes::NONE);
    assert_eq!(
        step.initialize,
        vec![
            (ShareKey::new("g", (TOPIC, 0)), 5),
            (ShareKey::new("g", (TOPIC, 1)), 0)
        ]
    );
    let t = &step.response.responses[0];
    assert_eq!(t.topic_id, TOPIC);
    let codes_of: Vec<i16> = t.partitions.iter().map(|p| p.error_code).collect();
    assert_eq!(codes_of, vec![0, 0, codes::UNKNOWN_TOPIC_OR_PARTITION]);
    let unknown = &step.response.responses[1];
    assert_eq!(unknown.topic_id, Uuid::nil());
    assert_eq!(
        unknown.partitions[0].error_code,
        codes::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(initialized(&c, "g"), vec![(TOPIC, vec![0, 1])]);
    // The new group and its initialized partitions are written.
    assert!(!step.records.is_empty());
    assert!(step.records.iter().all(|r| r.value.is_some()));
}

#[test]
fn alter_and_delete_refuse_a_group_with_members_and_other_group_types() {
    let mut c = Coordinator::new(GroupConfig::default());
    join(&mut c, "g", "m");
    let step = c.share_offsets_alter(&alter("g", &[("t", &[(0, 1)])]), &image());
    assert_eq!(step.response.error_code, codes::NON_EMPTY_GROUP);
    assert!(step.initialize.is_empty() && step.records.is_empty());
    let step = c.share_offsets_delete(&delete("g", &["t"]), &image());
    assert_eq!(step.response.error_code, codes::NON_EMPTY_GROUP);
    assert!(step.delete_topics.is_empty() && step.records.is_empty());

    let step = c.share_offsets_delete(&delete("missing", &["t"]), &image());
    assert_eq!(step.response.error_code, codes::GROUP_ID_NOT_FOUND);
    let step = c.share_offsets_alter(&alter("", &[("t", &[(0, 1)])]), &image());
    assert_eq!(step.response.error_code, codes::INVALID_GROUP_ID);
}

#[test]
fn delete_forgets_the_topic_and_writes_the_group_change() {
    let mut c = Coordinator::new(GroupConfig::default());
    join(&mut c, "g", "m");
    leave(&mut c, "g", "m");
    // The member was assigned both partitions: they are initialized.
    assert_eq!(initialized(&c, "g"), vec![(TOPIC, vec![0, 1])]);
    let step = c.share_offsets_delete(&delete("g", &["t", "nope"]), &image());
    assert_eq!(step.response.error_code, codes::NONE);
    assert_eq!(step.delete_topics, vec![TOPIC]);
    assert_eq!(step.response.responses[0].error_code, codes::NONE);
    assert_eq!(step.response.responses[0].topic_id, TOPIC);
    assert_eq!(
        step.response.responses[1].error_code,
        codes::UNKNOWN_TOPIC_OR_PARTITION
    );
    assert!(initialized(&c, "g").is_empty());
    // ShareGroupStatePartitionMetadata is deleted (a tombstone).
    assert_eq!(step.records.len(), 1);
    assert!(step.records[0].value.is_none());
}

#[test]
fn describe_reads_named_topics_or_every_initialized_partition() {
    let mut c = Coordinator::new(GroupConfig::default());
    let named = vec![("t".to_string(), vec![0, 3]), ("nope".to_string(), vec![0])];
    let targets = c
        .share_offsets_describe("unknown-group", Some(&named), &image())
        .unwrap();
    assert_eq!(
        targets,
        vec![
            DescribeTarget {
                topic_name: "t".into(),
                topic_id: Some(TOPIC),
                partitions: vec![0, 3]
            },
            DescribeTarget {
                topic_name: "nope".into(),
                topic_id: None,
                partitions: vec![0]
            },
        ]
    );
    let none = c.share_offsets_describe("unknown-group", None, &image());
    assert_eq!(none, Ok(Vec::new()));
    let step = c.share_offsets_alter(&alter("g", &[("t", &[(1, 3)])]), &image());
    assert_eq!(step.response.error_code, codes::NONE);
    let all = c.share_offsets_describe("g", None, &image()).unwrap();
    assert_eq!(
        all,
        vec![DescribeTarget {
            topic_name: "t".into(),
            topic_id: Some(TOPIC),
            partitions: vec![1]
        }]
    );
}
