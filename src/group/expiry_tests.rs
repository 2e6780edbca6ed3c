//! Offset expiration with simulated time: which offsets go when, and which groups are deleted.

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, LeaveGroupRequest, OffsetCommitRequest, TopicName};

use super::classic::sb;
use super::coordinator::Coordinator;
use super::offsets::FetchQuery;
use super::records::{self, RecordKey};
use super::tests::{Harness, T0};
use super::*;

fn config() -> GroupConfig {
    GroupConfig {
        offsets_retention_ms: 1_000,
        offsets_retention_check_interval_ms: 100,
        ..GroupConfig::default()
    }
}

fn commit(c: &mut Coordinator, now: i64, generation: i32, member: &str, partition: i32) {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(10 + partition as i64)])]);
    let (resp, _) = c.commit_written(now, 8, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, codes::NONE);
}

/// Committed offsets of group "g", topic "t", partitions 0 and 1 (-1: none).
fn committed(c: &Coordinator) -> Vec<i64> {
    c.fetch(&FetchQuery {
        group_id: "g".into(),
        topics: Some(vec![("t".into(), vec![0, 1])]),
        member_id: None,
        member_epoch: -1,
        require_stable: false,
    })[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect()
}

/// The tombstones of a step, as readable keys.
fn tombstones(fx: &Effects) -> Vec<String> {
    fx.records
        .iter()
        .map(|r| {
            assert!(r.value.is_none(), "only tombstones");
            match records::decode_key(&r.key).unwrap() {
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                } => format!("offset {group}/{topic}-{partition}"),
                RecordKey::Group { group } => format!("group {group}"),
                RecordKey::Share { group, key } => format!("share {group} {key:?}"),
            }
        })
        .collect()
}

#[test]
fn simple_group_offsets_expire_by_commit_time_then_the_group_goes() {
    let mut c = Coordinator::new(config());
    commit(&mut c, T0, -1, "", 0);
    commit(&mut c, T0 + 600, -1, "", 1);
    c.start_offset_expiry(T0);
    assert_eq!(c.next_deadline(), Some(T0 + 100));
    assert!(tombstones(&c.tick_written(T0 + 999)).is_empty());
    assert_eq!(committed(&c), vec![10, 11]);
    // The check runs once per interval: next at T0 + 1099, when partition 0 is 1099 ms old and
    // partition 1 only 499 ms.
    assert_eq!(c.next_deadline(), Some(T0 + 1_099));
    assert!(
        tombstones(&c.tick_written(T0 + 1_050)).is_empty(),
        "not due yet"
    );
    let fx = c.tick_written(T0 + 1_099);
    assert_eq!(tombstones(&fx), vec!["offset g/t-0"]);
    assert_eq!(committed(&c), vec![-1, 11]);
    assert_eq!(c.next_deadline(), Some(T0 + 1_199));
    // The last offset expires and the empty group, left with nothing, is deleted.
    let fx = c.tick_written(T0 + 1_600);
    assert_eq!(tombstones(&fx), vec!["offset g/t-1", "group g"]);
    assert!(c.group("g").is_none());
    assert_eq!(committed(&c), vec![-1, -1]);
}

#[test]
fn a_consumer_group_keeps_offsets_until_it_has_been_empty_for_the_retention_time() {
    let mut h = Harness::new(0);
    h.c.config = GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..config()
    };
    let ids = h.stable_group(1);
    let generation = h.generation();
    commit(&mut h.c, T0 + 200, generation, &ids[0], 0);
    h.c.start_offset_expiry(T0 + 200);
    // Stable, but its members' subscriptions cannot be read ("meta" is not a consumer
    // subscription): Kafka keeps every offset then, however old.
    let mut fx = Effects::default();
    for now in (T0 + 300..T0 + 4_000).step_by(100) {
        h.c.heartbeat(
            now,
            &kafka_protocol::messages::HeartbeatRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_generation_id(generation)
                .with_member_id(sb(&ids[0])),
        );
        fx.records.extend(h.c.tick_written(now).records);
    }
    assert!(tombstones(&fx).is_empty());
    assert_eq!(committed(&h.c), vec![10, -1]);
    // The member leaves at T0 + 4000: the clock now runs from then, not from the commit.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb(&ids[0]));
    h.c.leave(T0 + 4_000, 1, &leave);
    assert_eq!(h.state(), GroupState::Empty);
    assert!(tombstones(&h.c.tick_written(T0 + 4_900)).is_empty());
    assert_eq!(committed(&h.c), vec![10, -1]);
    let fx = h.c.tick_written(T0 + 5_000);
    assert_eq!(tombstones(&fx), vec!["offset g/t-0", "group g"]);
    assert!(h.c.group("g").is_none());
}

#[test]
fn expiry_waits_for_start_and_the_kafka_defaults_apply() {
    let c = Coordinator::new(GroupConfig::default());
    assert_eq!(
        c.next_deadline(),
        None,
        "no timer before start_offset_expiry"
    );
    assert_eq!(c.config.offsets_retention_ms, 7 * 24 * 3_600_000);
    assert_eq!(c.config.offsets_retention_check_interval_ms, 600_000);
}
