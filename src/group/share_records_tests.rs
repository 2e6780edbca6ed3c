//! Share-group records: golden bytes of Kafka 4.1's schemas, image round trips, diffs, and a
//! share group surviving a reload of the coordinator from its records.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::*;
use crate::group::consumer::{MetadataImage, TopicImage};
use crate::group::records::{decode_key as decode_any_key, RecordKey};
use crate::group::share::ShareHeartbeatInput;
use crate::group::{codes, Coordinator, GroupConfig};

const TOPIC: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

fn member(id: &str, epoch: i32, partitions: &[i32]) -> ShareMember {
    ShareMember {
        member_id: id.into(),
        member_epoch: epoch,
        rack_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        subscribed_topic_names: ["t".to_string()].into_iter().collect(),
        assignment: [(TOPIC, partitions.iter().copied().collect())]
            .into_iter()
            .collect(),
        session_deadline_ms: 0,
    }
}

fn image() -> ShareGroupImage {
    let a = member("a", 2, &[0, 1]);
    let b = member("b", 2, &[2]);
    ShareGroupImage {
        group_epoch: 2,
        metadata_hash: 77,
        assignment_epoch: 2,
        target: [
            ("a".to_string(), a.assignment.clone()),
            ("b".to_string(), b.assignment.clone()),
        ]
        .into_iter()
        .collect(),
        members: vec![a, b],
        initialized: [(
            TOPIC,
            InitializedTopic {
                topic_name: "t".into(),
                partitions: [0, 1, 2].into_iter().collect(),
            },
        )]
        .into_iter()
        .collect(),
    }
}

#[test]
fn keys_and_values_match_kafka_4_1_2s_bytes() {
    // Record type 11, then the classic string "g".
    assert_eq!(encode_key("g", &ShareKey::Metadata), [0, 11, 0, 1, b'g']);
    assert_eq!(
        encode_key("g", &ShareKey::CurrentAssignment("m".into())),
        [0, 14, 0, 1, b'g', 0, 1, b'm']
    );
    // Version 0, Epoch, MetadataHash, no tagged fields.
    assert_eq!(
        metadata_value(3, 0x0102),
        [0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2, 0]
    );
    // Version 0, null RackId, compact "c", compact "h", [ "t" ], no tagged fields.
    assert_eq!(
        member_value(&member("a", 1, &[])),
        [0, 0, 0, 2, b'c', 2, b'h', 2, 2, b't', 0]
    );
    // MemberEpoch, PreviousMemberEpoch, State STABLE, [ {TopicId, [0]} ].
    let mut want = vec![0, 0, 0, 0, 0, 4, 0, 0, 0, 4, 0, 2];
    want.extend_from_slice(TOPIC.as_bytes());
    want.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0]);
    let a: Assignment = [(TOPIC, [0].into_iter().collect())].into_iter().collect();
    assert_eq!(current_assignment_value(4, &a), want);
    let mut want = vec![0, 0, 2];
    want.extend_from_slice(TOPIC.as_bytes());
    want.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0]);
    assert_eq!(target_member_value(&a), want);
    // No InitializingTopics, [ {TopicId, "t", [0, 1]} ], no DeletingTopics.
    let mut want = vec![0, 0, 1, 2];
    want.extend_from_slice(TOPIC.as_bytes());
    want.extend_from_slice(&[2, b't', 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0]);
    let initialized = [(
        TOPIC,
        InitializedTopic {
            topic_name: "t".into(),
            partitions: [0, 1].into_iter().collect(),
        },
    )]
    .into_iter()
    .collect();
    assert_eq!(state_partition_value(&initialized), want);
}

#[test]
fn every_key_decodes_back() {
    for key in [
        ShareKey::Member("m".into()),
        ShareKey::Metadata,
        ShareKey::TargetMetadata,
        ShareKey::TargetMember("m".into()),
        ShareKey::CurrentAssignment("m".into()),
        ShareKey::StatePartitionMetadata,
    ] {
        let bytes = encode_key("grp", &key);
        assert_eq!(
            decode_any_key(&bytes).unwrap(),
            RecordKey::Share {
                group: "grp".into(),
                key
            }
        );
    }
}

#[test]
fn an_image_replays_into_itself() {
    let img = image();
    let mut load = ShareGroupLoad::default();
    for r in diff("g", None, Some(&img)) {
        let Ok(RecordKey::Share { key, .. }) = decode_any_key(&r.key) else {
            panic!("not a share key");
        };
        load.apply(key, r.value.as_deref()).unwrap();
    }
    assert_eq!(load.into_image(), Some(img));
}

#[test]
fn a_leave_writes_the_members_tombstones_and_deleting_tombstones_everything() {
    let before = image();
    let mut after = before.clone();
    after.members.retain(|m| m.member_id == "a");
    after.target.remove("b");
    after.group_epoch = 3;
    let records = diff("g", Some(&before), Some(&after));
    let tombstones: BTreeSet<Vec<u8>> = records
        .iter()
        .filter(|r| r.value.is_none())
        .map(|r| r.key.clone())
        .collect();
    let want: BTreeSet<Vec<u8>> = [
        ShareKey::Member("b".into()),
        ShareKey::TargetMember("b".into()),
        ShareKey::CurrentAssignment("b".into()),
    ]
    .iter()
    .map(|k| encode_key("g", k))
    .collect();
    assert_eq!(tombstones, want);
    // The only value written: the new group epoch, after the tombstones.
    let values: Vec<&CoordinatorRecord> = records.iter().filter(|r| r.value.is_some()).collect();
    assert_eq!(values.len(), 1);
    assert_eq!(values[0].key, encode_key("g", &ShareKey::Metadata));
    assert!(records.last().is_some_and(|r| r.value.is_some()));

    let gone = diff("g", Some(&before), None);
    assert!(gone.iter().all(|r| r.value.is_none()));
    assert_eq!(gone.len(), image_records(&before).len());
    assert_eq!(
        gone.last().map(|r| r.key.clone()),
        Some(encode_key("g", &ShareKey::Metadata))
    );
    let mut load = ShareGroupLoad::default();
    for r in diff("g", None, Some(&before)).into_iter().chain(gone) {
        let Ok(RecordKey::Share { key, .. }) = decode_any_key(&r.key) else {
            panic!("not a share key");
        };
        load.apply(key, r.value.as_deref()).unwrap();
    }
    assert_eq!(load.into_image(), None);
}

#[test]
fn truncated_and_unknown_values_are_errors() {
    let mut load = ShareGroupLoad::default();
    let v = metadata_value(1, 1);
    assert!(load
        .apply(ShareKey::Metadata, Some(&v[..v.len() - 2]))
        .is_err());
    assert_eq!(
        load.apply(ShareKey::Metadata, Some(&[0, 1, 0, 0, 0, 1])),
        Err(RecordError::UnknownValueVersion(1))
    );
    let mut huge = vec![0, 0];
    put_uvarint(&mut huge, 1_000_000);
    assert!(load
        .apply(ShareKey::TargetMember("m".into()), Some(&huge))
        .is_err());
}

fn topics() -> MetadataImage {
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

fn hb(member: &str, epoch: i32, subscribe: bool) -> ShareHeartbeatInput {
    ShareHeartbeatInput {
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_string(member.into()))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(
                subscribe.then(|| vec![TopicName(StrBytes::from_static_str("t"))]),
            ),
    }
}

#[test]
fn a_share_group_survives_a_reload_from_its_records() {
    let mut c = Coordinator::new(GroupConfig::default());
    let mut log: Vec<CoordinatorRecord> = Vec::new();
    let (a, r) = c.share_heartbeat_step(0, hb("a", 0, true), &topics());
    log.extend(r);
    let (b, r) = c.share_heartbeat_step(10, hb("b", 0, true), &topics());
    log.extend(r);
    assert_eq!((a.error_code, b.error_code), (codes::NONE, codes::NONE));
    let (a, r) = c.share_heartbeat_step(20, hb("a", a.member_epoch, false), &topics());
    log.extend(r);
    assert_eq!(a.member_epoch, 2);
    // A heartbeat that changes nothing persisted writes nothing.
    let (_, r) = c.share_heartbeat_step(30, hb("a", 2, false), &topics());
    assert!(r.is_empty(), "{r:?}");

    let mut reloaded = Coordinator::new(GroupConfig::default());
    for r in &log {
        reloaded.replay(&r.key, r.value.as_deref(), 1_000);
    }
    reloaded.finish_share_load(1_000);
    let before = c.share_groups["g"].image();
    let mut after = reloaded.share_groups["g"].image();
    for m in &mut after.members {
        m.session_deadline_ms = before
            .members
            .iter()
            .find(|o| o.member_id == m.member_id)
            .map_or(0, |o| o.session_deadline_ms);
    }
    assert_eq!(after, before);
    // The members carry on with their epochs: no UNKNOWN_MEMBER_ID, no new group epoch.
    let (r, records) = reloaded.share_heartbeat_step(1_001, hb("b", 2, false), &topics());
    assert_eq!((r.error_code, r.member_epoch), (codes::NONE, 2));
    assert!(records.is_empty(), "{records:?}");
    // Their sessions restarted at the load.
    let deadline = reloaded.share_groups["g"]
        .member("a")
        .map(|m| m.session_deadline_ms);
    assert_eq!(deadline, Some(1_000 + 45_000));
    let initialized: BTreeMap<Uuid, BTreeSet<i32>> = reloaded.share_groups["g"]
        .initialized()
        .iter()
        .map(|(id, t)| (*id, t.partitions.clone()))
        .collect();
    assert_eq!(
        initialized,
        [(TOPIC, [0, 1, 2].into_iter().collect())]
            .into_iter()
            .collect()
    );
}
