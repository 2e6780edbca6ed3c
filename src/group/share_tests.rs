//! Share groups on the coordinator: heartbeat, describe, list, delete, session expiry.

use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::super::consumer::{MetadataImage, TopicImage};
use super::super::{codes, Coordinator, GroupConfig};
use super::{ShareHeartbeatInput, ShareSettings};
use crate::share::group::ShareGroupConfig;

const TOPIC: Uuid = Uuid::from_u128(0x42);

fn image() -> MetadataImage {
    let mut m = MetadataImage::new();
    m.insert(
        "t".into(),
        TopicImage {
            id: TOPIC,
            partitions: 3,
        },
    );
    m
}

fn coordinator() -> Coordinator {
    let mut c = Coordinator::new(GroupConfig::default());
    c.share = ShareSettings {
        group: ShareGroupConfig {
            session_timeout_ms: 1_000,
            heartbeat_interval_ms: 100,
            max_size: 10,
        },
    };
    c
}

fn hb(group: &str, member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeatInput {
    ShareHeartbeatInput {
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_member_id(StrBytes::from_string(member.into()))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(topics.map(|ts| {
                ts.iter()
                    .map(|t| TopicName(StrBytes::from_string(t.to_string())))
                    .collect()
            })),
    }
}

fn partitions(r: &kafka_protocol::messages::ShareGroupHeartbeatResponse) -> Vec<i32> {
    r.assignment
        .as_ref()
        .map(|a| {
            a.topic_partitions
                .iter()
                .flat_map(|t| t.partitions.clone())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn members_join_share_partitions_and_describe_shows_them() {
    let mut c = coordinator();
    let a = c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    assert_eq!(a.error_code, codes::NONE);
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.heartbeat_interval_ms, 100);
    assert_eq!(partitions(&a), vec![0, 1, 2]);
    let b = c.share_heartbeat(10, hb("g", "b", 0, Some(&["t"])), &image());
    assert_eq!(b.member_epoch, 2);
    // The simple assignor may give a partition to several members; every partition is assigned.
    assert!(!partitions(&b).is_empty());
    let d = c.share_describe("g", &image());
    assert_eq!(d.error_code, codes::NONE);
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.group_epoch, 2);
    assert_eq!(d.assignor_name.as_str(), "simple");
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].client_id.as_str(), "client");
    assert_eq!(
        d.members[0].assignment.topic_partitions[0]
            .topic_name
            .as_str(),
        "t"
    );
    let listed = c.list(&[], &["share".to_string()]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].group_type.as_str(), "share");
    assert_eq!(listed[0].group_state.as_str(), "Stable");
    assert!(c.list(&[], &["classic".to_string()]).is_empty());
}

#[test]
fn wrong_epochs_and_unknown_members_are_refused() {
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    let r = c.share_heartbeat(1, hb("g", "a", 7, None), &image());
    assert_eq!(r.error_code, codes::FENCED_MEMBER_EPOCH);
    let r = c.share_heartbeat(1, hb("g", "x", 3, None), &image());
    assert_eq!(r.error_code, codes::UNKNOWN_MEMBER_ID);
    // A first heartbeat without topics is refused and leaves no group behind.
    let r = c.share_heartbeat(1, hb("h", "a", 0, None), &image());
    assert_eq!(r.error_code, codes::INVALID_REQUEST);
    assert!(!c.share_groups.contains_key("h"));
    assert_eq!(
        c.share_describe("h", &image()).error_code,
        codes::GROUP_ID_NOT_FOUND
    );
}

#[test]
fn sessions_expire_and_an_empty_group_can_be_deleted() {
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    assert_eq!(c.next_deadline(), Some(1_000));
    let (res, _) = c.delete_groups(&["g".to_string()]);
    assert_eq!(res[0].error_code, codes::NON_EMPTY_GROUP);
    c.tick(999);
    assert_eq!(c.share_describe("g", &image()).members.len(), 1);
    let fx = c.tick(1_000);
    assert_eq!(
        fx.share_members_gone,
        vec![("g".to_string(), "a".to_string())]
    );
    let d = c.share_describe("g", &image());
    assert_eq!(d.group_state.as_str(), "Empty");
    assert!(d.members.is_empty());
    let (res, fx) = c.delete_groups(&["g".to_string()]);
    assert_eq!(res[0].error_code, codes::NONE);
    assert_eq!(fx.share_groups_deleted, vec!["g".to_string()]);
    assert!(c.share_groups.is_empty());
}

#[test]
fn delete_groups_first_deletes_the_state_of_every_partition_an_empty_group_was_assigned() {
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    c.share_heartbeat(500, hb("busy", "b", 0, Some(&["t"])), &image());
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // With members, nothing yet: DeleteGroups refuses such a group with NON_EMPTY_GROUP.
    assert!(c.share_state_to_delete(&ids(&["g"])).is_empty());
    c.tick(1_000);
    // Once Empty: each of the three partitions its member held, once for a repeated id; a
    // group with members, a missing id and a classic id are not share state to delete.
    let all = [(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)].to_vec();
    assert_eq!(
        c.share_state_to_delete(&ids(&["g", "busy", "missing", "g"])),
        vec![("g".to_string(), all)]
    );
}

#[test]
fn a_leave_answers_epoch_minus_one() {
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    let r = c.share_heartbeat(5, hb("g", "a", -1, None), &image());
    assert_eq!(r.error_code, codes::NONE);
    assert_eq!(r.member_epoch, -1);
    assert_eq!(
        c.share_describe("g", &image()).group_state.as_str(),
        "Empty"
    );
}

#[test]
fn a_classic_group_id_is_not_a_share_group() {
    let mut c = coordinator();
    c.groups
        .insert("cg".into(), crate::group::ClassicGroup::new("cg", 0));
    let r = c.share_heartbeat(0, hb("cg", "a", 0, Some(&["t"])), &image());
    assert_eq!(r.error_code, codes::GROUP_ID_NOT_FOUND);
    assert!(c.share_groups.is_empty());
}

#[test]
fn a_share_group_id_is_not_a_consumer_group() {
    use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    let input = crate::group::consumer::ConsumerHeartbeatInput {
        version: 1,
        client_id: "c".into(),
        client_host: "h".into(),
        request: ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
            .with_topic_partitions(Some(Vec::new())),
    };
    let r = c.consumer_heartbeat(0, input, &image());
    assert_eq!(r.error_code, codes::GROUP_ID_NOT_FOUND);
    assert!(c.consumer_groups.is_empty());
    assert_eq!(c.share_groups["g"].describe().members.len(), 1);
}

#[test]
fn a_share_group_id_is_not_a_classic_group() {
    use kafka_protocol::messages::JoinGroupRequest;
    let mut c = coordinator();
    c.share_heartbeat(0, hb("g", "a", 0, Some(&["t"])), &image());
    let input = crate::group::coordinator::JoinInput {
        version: 9,
        client_id: "c".into(),
        client_host: "h".into(),
        request: JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(StrBytes::from_static_str("consumer")),
    };
    let fx = c.join(0, input, 1);
    assert_eq!(fx.joins.len(), 1);
    assert_eq!(fx.joins[0].1.error_code, codes::UNKNOWN_MEMBER_ID);
    assert!(!c.groups.contains_key("g"));
    let described = c.describe("g", 6, false);
    assert_eq!(described.error_code, codes::GROUP_ID_NOT_FOUND);
    assert_eq!(
        described.error_message.as_deref(),
        Some("Group g is not a classic group.")
    );
}
