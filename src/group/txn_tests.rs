//! Transactional offset commit tests with simulated time: TxnOffsetCommit validation, pending
//! offsets, markers, require_stable, deletes, and replay of transactional batches.

use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, GroupId, TopicName, TxnOffsetCommitRequest,
};

use super::classic::sb;
use super::consumer::{ConsumerHeartbeatInput, MetadataImage, TopicImage};
use super::coordinator::Coordinator;
use super::offsets::FetchQuery;
use super::tests::{Harness, T0};
use super::*;
use crate::record::ControlType;

/// The `__consumer_offsets` partition the driver would use (any fixed number works here).
const OP: i32 = 7;

fn txn_req(producer_id: i64, offsets: &[(&str, i32, i64)]) -> TxnOffsetCommitRequest {
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(3)
            .with_committed_metadata(Some(sb("m")));
        match topics.iter_mut().find(|t| t.name.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(sb(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    TxnOffsetCommitRequest::default()
        .with_transactional_id(sb("tx").into())
        .with_group_id(GroupId(sb("g")))
        .with_producer_id(producer_id.into())
        .with_producer_epoch(0)
        .with_topics(topics)
}

/// Sends a TxnOffsetCommit as the driver does (a successful append at `OP`); returns the codes.
fn txn_commit(c: &mut Coordinator, now: i64, req: &TxnOffsetCommitRequest) -> Vec<i16> {
    let (resp, write) = c.txn_offset_commit(now, req);
    if let Some(w) = write {
        assert_eq!(w.records().len(), w.offsets.len());
        c.apply_txn_write(OP, w);
    }
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

fn query(topics: Option<Vec<(&str, Vec<i32>)>>, require_stable: bool) -> FetchQuery {
    FetchQuery {
        group_id: "g".into(),
        topics: topics.map(|ts| ts.into_iter().map(|(t, ps)| (t.to_string(), ps)).collect()),
        member_id: None,
        member_epoch: -1,
        require_stable,
    }
}

/// (partition, offset, error) of a fetch of topic "t".
fn fetch(c: &Coordinator, partitions: &[i32], require_stable: bool) -> Vec<(i32, i64, i16)> {
    let q = query(Some(vec![("t", partitions.to_vec())]), require_stable);
    c.fetch(&q)[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect()
}

fn plain_commit(c: &mut Coordinator, now: i64, partition: i32, offset: i64) {
    use kafka_protocol::messages::offset_commit_request::*;
    use kafka_protocol::messages::OffsetCommitRequest;
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(partition)
                .with_committed_offset(offset)])]);
    let (resp, _) = c.commit_written(now, 8, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, codes::NONE);
}

fn coordinator() -> Coordinator {
    Coordinator::new(GroupConfig::default())
}

#[test]
fn pending_offsets_are_invisible_until_the_commit_marker() {
    let mut c = coordinator();
    assert_eq!(
        txn_commit(&mut c, T0, &txn_req(100, &[("t", 0, 42), ("t", 1, 43)])),
        vec![codes::NONE, codes::NONE]
    );
    assert!(c.group("g").is_some(), "a simple group was created");
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, -1, 0), (1, -1, 0)]);
    // A marker of another producer or another partition changes nothing.
    c.complete_txn(OP, 101, ControlType::Commit);
    c.complete_txn(OP + 1, 100, ControlType::Commit);
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, -1, 0), (1, -1, 0)]);

    let fx = c.complete_txn(OP, 100, ControlType::Commit);
    assert!(fx.records.is_empty(), "the marker is the durable record");
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, 42, 0), (1, 43, 0)]);
    let v = &c.offsets["g"][&("t".to_string(), 0)];
    assert_eq!((v.leader_epoch, v.metadata.as_str()), (3, "m"));
    assert_eq!(v.commit_timestamp, T0);
    assert_eq!(c.pending.transactions().count(), 0);
}

#[test]
fn abort_drops_pending_offsets_and_keeps_the_committed_ones() {
    let mut c = coordinator();
    plain_commit(&mut c, T0, 0, 5);
    txn_commit(&mut c, T0 + 1, &txn_req(100, &[("t", 0, 42)]));
    assert_eq!(fetch(&c, &[0], false), vec![(0, 5, 0)]);
    c.complete_txn(OP, 100, ControlType::Abort);
    assert_eq!(fetch(&c, &[0], false), vec![(0, 5, 0)]);
    assert!(!c.pending.contains("g", "t", 0));
    // A later commit marker for the same producer finds nothing.
    c.complete_txn(OP, 100, ControlType::Commit);
    assert_eq!(fetch(&c, &[0], false), vec![(0, 5, 0)]);
}

#[test]
fn require_stable_answers_unstable_offset_commit_per_partition() {
    let mut c = coordinator();
    plain_commit(&mut c, T0, 0, 5);
    plain_commit(&mut c, T0, 1, 6);
    txn_commit(&mut c, T0 + 1, &txn_req(100, &[("t", 0, 42), ("t", 2, 44)]));
    assert_eq!(
        fetch(&c, &[0, 1, 2], true),
        vec![
            (0, -1, codes::UNSTABLE_OFFSET_COMMIT),
            (1, 6, 0),
            (2, -1, codes::UNSTABLE_OFFSET_COMMIT)
        ]
    );
    // Without require_stable: the committed offsets, pending ones invisible.
    assert_eq!(
        fetch(&c, &[0, 1, 2], false),
        vec![(0, 5, 0), (1, 6, 0), (2, -1, 0)]
    );
    // All topics: only committed partitions are listed; those with pending offsets are unstable.
    let all = c.fetch(&query(None, true));
    let listed: Vec<(i32, i64, i16)> = all[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset, p.error_code))
        .collect();
    assert_eq!(
        listed,
        vec![(0, -1, codes::UNSTABLE_OFFSET_COMMIT), (1, 6, 0)]
    );

    c.complete_txn(OP, 100, ControlType::Commit);
    assert_eq!(
        fetch(&c, &[0, 1, 2], true),
        vec![(0, 42, 0), (1, 6, 0), (2, 44, 0)]
    );
}

#[test]
fn two_producers_and_the_newer_record_wins() {
    let mut c = coordinator();
    // Producer 100 writes first, then a plain commit, then producer 200.
    txn_commit(&mut c, T0, &txn_req(100, &[("t", 0, 10), ("t", 1, 11)]));
    plain_commit(&mut c, T0 + 1, 0, 20);
    txn_commit(&mut c, T0 + 2, &txn_req(200, &[("t", 0, 30), ("t", 1, 31)]));
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, 20, 0), (1, -1, 0)]);

    // 200 commits first: both its offsets are newer than anything committed.
    c.complete_txn(OP, 200, ControlType::Commit);
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, 30, 0), (1, 31, 0)]);
    // 100 commits last but wrote before: nothing of it replaces the newer records.
    assert!(c.pending.contains("g", "t", 1));
    c.complete_txn(OP, 100, ControlType::Commit);
    assert_eq!(fetch(&c, &[0, 1], false), vec![(0, 30, 0), (1, 31, 0)]);

    // A pending offset older than a plain commit loses even when it commits alone.
    txn_commit(&mut c, T0 + 3, &txn_req(300, &[("t", 0, 50)]));
    plain_commit(&mut c, T0 + 4, 0, 60);
    c.complete_txn(OP, 300, ControlType::Commit);
    assert_eq!(fetch(&c, &[0], false), vec![(0, 60, 0)]);

    // The same producer's later TxnOffsetCommit replaces its earlier pending offset.
    txn_commit(&mut c, T0 + 5, &txn_req(400, &[("t", 0, 70)]));
    txn_commit(&mut c, T0 + 6, &txn_req(400, &[("t", 0, 71)]));
    c.complete_txn(OP, 400, ControlType::Commit);
    assert_eq!(fetch(&c, &[0], false), vec![(0, 71, 0)]);
}

#[test]
fn classic_group_checks_generation_member_and_instance() {
    let mut h = Harness::new(0);
    let ids = h.stable_group(2);
    let generation = h.generation();
    let with = |member: &str, instance: Option<&str>, generation: i32| {
        txn_req(100, &[("t", 0, 1)])
            .with_member_id(sb(member))
            .with_group_instance_id(instance.map(sb))
            .with_generation_id(generation)
    };
    let code = |h: &mut Harness, r: &TxnOffsetCommitRequest| txn_commit(&mut h.c, T0 + 200, r)[0];
    assert_eq!(
        code(&mut h, &with(&ids[0], None, generation + 1)),
        codes::ILLEGAL_GENERATION
    );
    assert_eq!(
        code(&mut h, &with("nobody", None, generation)),
        codes::UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        code(&mut h, &with(&ids[0], Some("i1"), generation)),
        codes::UNKNOWN_MEMBER_ID
    );
    assert_eq!(code(&mut h, &with(&ids[0], None, generation)), codes::NONE);
    // v0-2 requests carry no member and generation -1: accepted on a non-empty group, unlike
    // OffsetCommit (UNKNOWN_MEMBER_ID).
    assert_eq!(code(&mut h, &with("", None, -1)), codes::NONE);
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(h.c.pending.transactions().count(), 1);
}

#[test]
fn static_member_with_a_wrong_member_id_is_fenced() {
    use kafka_protocol::messages::JoinGroupRequest;
    let mut c = Coordinator::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    });
    let join = coordinator::JoinInput {
        version: 9,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(30_000)
            .with_group_instance_id(Some(sb("i1")))
            .with_protocol_type(sb("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(sb("range")),
            ]),
    };
    c.join(T0, join, 1);
    let fx = c.tick(T0 + 10);
    let joined = fx
        .joins
        .first()
        .map(|(_, r)| r.clone())
        .expect("join completes");
    let member = joined.member_id.as_str().to_string();
    let req = txn_req(100, &[("t", 0, 1)])
        .with_member_id(sb("someone-else"))
        .with_group_instance_id(Some(sb("i1")))
        .with_generation_id(joined.generation_id);
    assert_eq!(
        txn_commit(&mut c, T0 + 20, &req),
        vec![codes::FENCED_INSTANCE_ID]
    );
    let req = req.with_member_id(sb(&member));
    assert_eq!(txn_commit(&mut c, T0 + 20, &req), vec![codes::NONE]);
}

#[test]
fn unknown_groups_bad_ids_and_large_metadata_get_kafkas_codes() {
    let mut c = coordinator();
    // Unknown group with a generation: ILLEGAL_GENERATION for every partition; no group created.
    let req = txn_req(100, &[("t", 0, 1), ("u", 1, 2)]).with_generation_id(3);
    assert_eq!(
        txn_commit(&mut c, T0, &req),
        vec![codes::ILLEGAL_GENERATION, codes::ILLEGAL_GENERATION]
    );
    assert!(c.group("g").is_none());
    assert_eq!(c.pending.transactions().count(), 0);

    let req = txn_req(100, &[("t", 0, 1)]).with_group_id(GroupId(sb("")));
    assert_eq!(txn_commit(&mut c, T0, &req), vec![codes::INVALID_GROUP_ID]);
    let req = txn_req(-1, &[("t", 0, 1)]);
    assert_eq!(
        txn_commit(&mut c, T0, &req),
        vec![codes::INVALID_PRODUCER_ID_MAPPING]
    );

    // Metadata over offset.metadata.max.bytes fails only its own partition.
    let mut req = txn_req(100, &[("t", 0, 1), ("t", 1, 2)]);
    let big = "x".repeat(c.config.offset_metadata_max_bytes + 1);
    req.topics[0].partitions[1].committed_metadata = Some(sb(&big));
    let (resp, write) = c.txn_offset_commit(T0, &req);
    let codes_of: Vec<i16> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(
        codes_of,
        vec![codes::NONE, codes::OFFSET_METADATA_TOO_LARGE]
    );
    let write = write.expect("one offset to write");
    assert_eq!(write.offsets.len(), 1);
    assert_eq!((write.producer_id, write.producer_epoch), (100, 0));
    // Nothing is pending until the driver applied the write.
    assert!(!c.pending.contains("g", "t", 0));

    // Only too-large metadata: nothing to write at all.
    let mut req = txn_req(100, &[("t", 0, 1)]);
    req.topics[0].partitions[0].committed_metadata = Some(sb(&big));
    assert!(c.txn_offset_commit(T0, &req).1.is_none());
}

#[test]
fn consumer_group_members_commit_with_their_epoch() {
    let mut c = coordinator();
    let img: MetadataImage = [(
        "t".to_string(),
        TopicImage {
            id: uuid::Uuid::from_u128(9),
            partitions: 2,
        },
    )]
    .into();
    let mut hb = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_member_id(sb("a"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000);
    hb.subscribed_topic_names = Some(vec![TopicName(sb("t"))]);
    hb.topic_partitions = Some(Vec::new());
    let input = ConsumerHeartbeatInput {
        version: 1,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: hb,
    };
    let r = c.consumer_heartbeat(T0, input, &img);
    assert_eq!(r.error_code, codes::NONE);
    let epoch = r.member_epoch;
    let req = |member: &str, epoch: i32| {
        txn_req(100, &[("t", 0, 1)])
            .with_member_id(sb(member))
            .with_generation_id(epoch)
    };
    // A stale epoch is ILLEGAL_GENERATION here (Kafka maps STALE_MEMBER_EPOCH to it).
    assert_eq!(
        txn_commit(&mut c, T0, &req("a", epoch - 1)),
        vec![codes::ILLEGAL_GENERATION]
    );
    assert_eq!(
        txn_commit(&mut c, T0, &req("b", epoch)),
        vec![codes::UNKNOWN_MEMBER_ID]
    );
    // Admin-style (-1) commits need an empty group.
    assert_eq!(
        txn_commit(&mut c, T0, &req("", -1)),
        vec![codes::UNKNOWN_MEMBER_ID]
    );
    assert_eq!(txn_commit(&mut c, T0, &req("a", epoch)), vec![codes::NONE]);
    assert!(!c.groups.contains_key("g"), "still only a consumer group");
    c.complete_txn(OP, 100, ControlType::Commit);
    assert_eq!(fetch(&c, &[0], false), vec![(0, 1, 0)]);
}

#[test]
fn offset_delete_and_delete_groups_remove_pending_offsets_with_tombstones() {
    use kafka_protocol::messages::offset_delete_request::*;
    let mut c = coordinator();
    plain_commit(&mut c, T0, 0, 5);
    txn_commit(&mut c, T0, &txn_req(100, &[("t", 1, 42), ("u", 0, 7)]));

    // OffsetDelete of a partition with only a pending offset: tombstone, pending dropped.
    let topics = vec![OffsetDeleteRequestTopic::default()
        .with_name(TopicName(sb("t")))
        .with_partitions(vec![
            OffsetDeleteRequestPartition::default().with_partition_index(1)
        ])];
    let req = OffsetDeleteRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_topics(topics);
    let (resp, fx) = c.offset_delete_written(&req);
    assert_eq!(resp.error_code, codes::NONE);
    assert_eq!(fx.records.len(), 1);
    assert_eq!(fx.records[0].key, records::offset_key("g", "t", 1));
    assert_eq!(fx.records[0].value, None);
    assert!(!c.pending.contains("g", "t", 1));
    assert!(c.pending.contains("g", "u", 0));

    // DeleteGroups: tombstones for the committed and the pending-only partitions, then the group.
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(sb("g"))]);
    let (results, fx) = c.delete_groups_written(
        &req.groups_names
            .iter()
            .map(|g| g.to_string())
            .collect::<Vec<_>>(),
    );
    assert_eq!(results[0].error_code, codes::NONE);
    let keys: Vec<Vec<u8>> = fx.records.iter().map(|r| r.key.clone()).collect();
    assert_eq!(
        keys,
        vec![
            records::offset_key("g", "t", 0),
            records::offset_key("g", "u", 0),
            records::group_key("g")
        ]
    );
    assert!(fx.records.iter().all(|r| r.value.is_none()));
    // The transaction commits later: nothing comes back.
    c.complete_txn(OP, 100, ControlType::Commit);
    assert!(!c.offsets.contains_key("g"));
    assert!(c.group("g").is_none());
}

/// One `__consumer_offsets` entry as the driver's load sees it.
enum Logged {
    Plain(records::CoordinatorRecord),
    Txn(i64, records::CoordinatorRecord),
    Marker(i64, ControlType),
}

fn replay_all(log: &[Logged]) -> Coordinator {
    let mut c = coordinator();
    for entry in log {
        match entry {
            Logged::Plain(r) => c.replay(&r.key, r.value.as_deref(), T0),
            Logged::Txn(pid, r) => c.replay_transactional(OP, *pid, &r.key, r.value.as_deref(), T0),
            Logged::Marker(pid, control) => c.replay_marker(OP, *pid, *control),
        }
    }
    c
}

#[test]
fn replay_applies_committed_transactions_drops_aborted_and_keeps_open_ones_pending() {
    // Build the log with a live coordinator, as the driver would write it.
    let mut live = coordinator();
    let mut log = Vec::new();
    let txn =
        |c: &mut Coordinator, log: &mut Vec<Logged>, pid: i64, offsets: &[(&str, i32, i64)]| {
            let (_, write) = c.txn_offset_commit(T0, &txn_req(pid, offsets));
            let write = write.expect("offsets to write");
            for r in write.records() {
                log.push(Logged::Txn(pid, r));
            }
            c.apply_txn_write(OP, write);
        };
    let plain = |c: &mut Coordinator, log: &mut Vec<Logged>, partition: i32, offset: i64| {
        use kafka_protocol::messages::offset_commit_request::*;
        let req = kafka_protocol::messages::OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)])]);
        let (_, fx) = c.commit_written(T0, 8, &req);
        log.extend(fx.records.into_iter().map(Logged::Plain));
    };
    txn(&mut live, &mut log, 100, &[("t", 0, 10), ("t", 1, 11)]);
    txn(&mut live, &mut log, 200, &[("t", 2, 20)]);
    plain(&mut live, &mut log, 1, 15); // newer than producer 100's offset of t-1
    txn(&mut live, &mut log, 300, &[("t", 3, 30)]);
    for (pid, control) in [(100, ControlType::Commit), (200, ControlType::Abort)] {
        live.complete_txn(OP, pid, control);
        log.push(Logged::Marker(pid, control));
    }

    let mut c = replay_all(&log);
    let expect_visible = vec![(0, 10, 0), (1, 15, 0), (2, -1, 0), (3, -1, 0)];
    assert_eq!(fetch(&live, &[0, 1, 2, 3], false), expect_visible);
    assert_eq!(fetch(&c, &[0, 1, 2, 3], false), expect_visible);
    // Producer 300 is still open after the replay: pending, unstable.
    assert_eq!(
        c.pending.transactions().collect::<Vec<_>>(),
        vec![(OP, 300)]
    );
    assert_eq!(
        fetch(&c, &[3], true),
        vec![(3, -1, codes::UNSTABLE_OFFSET_COMMIT)]
    );
    assert_eq!(
        c.pending
            .get((OP, 300), "g", "t", 3)
            .map(|p| p.value.offset),
        Some(30)
    );
    // The transaction coordinator completes it later.
    c.complete_txn(OP, 300, ControlType::Commit);
    assert_eq!(fetch(&c, &[3], true), vec![(3, 30, 0)]);

    // A tombstone in the log drops pending offsets of that partition.
    let mut log2 = Vec::new();
    txn(&mut live, &mut log2, 400, &[("t", 5, 50)]);
    log2.push(Logged::Plain(records::CoordinatorRecord {
        group_id: "g".into(),
        key: records::offset_key("g", "t", 5),
        value: None,
    }));
    log2.push(Logged::Marker(400, ControlType::Commit));
    let c2 = replay_all(&log2);
    assert_eq!(fetch(&c2, &[5], false), vec![(5, -1, 0)]);
}
