//! Online classic <-> consumer group migration: simulated classic and KIP-848 clients, simulated
//! time, no sockets. The classic clients behave like the Java consumer with the eager `range`
//! protocol: they own nothing when they rejoin and own what SyncGroup gave them afterwards.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, OffsetCommitRequest, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::Encodable;
use uuid::Uuid;

use super::assignor::Assignment;
use super::classic::sb;
use super::consumer::{ConsumerHeartbeatInput, MetadataImage, TopicImage};
use super::consumer_protocol::{decode_subscription, encode_assignment};
use super::coordinator::{Coordinator, JoinInput};
use super::migration::MigrationPolicy;
use super::records::OffsetValue;
use super::*;

const T0: i64 = 1_000_000;
const TOPIC_ID: Uuid = Uuid::from_u128(0x77);
const PARTITIONS: i32 = 6;

fn image() -> MetadataImage {
    BTreeMap::from([(
        "t".to_string(),
        TopicImage {
            id: TOPIC_ID,
            partitions: PARTITIONS,
        },
    )])
}

fn coordinator(policy: MigrationPolicy) -> Coordinator {
    let mut c = Coordinator::new(GroupConfig {
        initial_rebalance_delay_ms: 0,
        migration_policy: policy,
        ..GroupConfig::default()
    });
    c.image = image();
    c
}

/// A ConsumerProtocol v3 subscription to "t" (what the Java consumer sends).
fn subscription(owned: &BTreeSet<i32>) -> Bytes {
    let s = ConsumerProtocolSubscription::default()
        .with_topics(vec![sb("t")])
        .with_owned_partitions(if owned.is_empty() {
            Vec::new()
        } else {
            vec![
                kafka_protocol::messages::consumer_protocol_subscription::TopicPartition::default()
                    .with_topic(TopicName(sb("t")))
                    .with_partitions(owned.iter().copied().collect()),
            ]
        })
        .with_generation_id(-1);
    let mut b = BytesMut::new();
    b.put_i16(3);
    s.encode(&mut b, 3).expect("encodes");
    b.freeze()
}

fn partitions_of(assignment: &Bytes) -> BTreeSet<i32> {
    // An assignment is read back the way the client reads it: version, then the body.
    let a: kafka_protocol::messages::ConsumerProtocolAssignment = {
        let mut body = assignment.slice(2..);
        let v = i16::from_be_bytes([assignment[0], assignment[1]]);
        crate::protocol::bounded::decode(&mut body, v, false).expect("decodes")
    };
    a.assigned_partitions
        .iter()
        .filter(|tp| tp.topic.as_str() == "t")
        .flat_map(|tp| tp.partitions.iter().copied())
        .collect()
}

/// A classic (JoinGroup/SyncGroup/Heartbeat) client.
#[derive(Debug, Clone)]
struct Classic {
    id: String,
    generation: i32,
    owned: BTreeSet<i32>,
}

struct World {
    c: Coordinator,
    next: Waiter,
}

impl World {
    fn new(policy: MigrationPolicy) -> World {
        World {
            c: coordinator(policy),
            next: 0,
        }
    }

    fn waiter(&mut self) -> Waiter {
        self.next += 1;
        self.next
    }

    fn join_request(member_id: &str, owned: &BTreeSet<i32>, protocol_type: &str) -> JoinInput {
        JoinInput {
            version: 9,
            client_id: "classic".into(),
            client_host: "/127.0.0.1".into(),
            request: JoinGroupRequest::default()
                .with_group_id(GroupId(sb("g")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(30_000)
                .with_member_id(sb(member_id))
                .with_protocol_type(sb(protocol_type))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(sb("range"))
                    .with_metadata(subscription(owned))]),
        }
    }

    /// One JoinGroup; the answer if it came at once.
    fn join(&mut self, now: i64, input: JoinInput) -> (Waiter, Effects) {
        let w = self.waiter();
        (w, self.c.join(now, input, w))
    }

    fn sync(
        &mut self,
        now: i64,
        m: &Classic,
        assign: &[(&str, Bytes)],
    ) -> Option<SyncGroupResponse> {
        let w = self.waiter();
        let req = SyncGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id(m.generation)
            .with_member_id(sb(&m.id))
            .with_protocol_type(Some(sb("consumer")))
            .with_protocol_name(Some(sb("range")))
            .with_assignments(
                assign
                    .iter()
                    .map(|(id, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(sb(id))
                            .with_assignment(a.clone())
                    })
                    .collect(),
            );
        let fx = self.c.sync(now, req, w);
        answer(&fx.syncs, w)
    }

    fn heartbeat(&mut self, now: i64, m: &Classic) -> i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id(m.generation)
            .with_member_id(sb(&m.id));
        self.c.heartbeat(now, &req).error_code
    }

    /// A classic group of two members, Stable, partitions 0-2 and 3-5, with an offset committed.
    fn stable_classic_group(&mut self) -> (Classic, Classic) {
        let none = BTreeSet::new();
        let mut ids = Vec::new();
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let (w, fx) = self.join(T0, Self::join_request("", &none, "consumer"));
            let id = answer(&fx.joins, w).expect("member id required").member_id;
            let (w2, _) = self.join(T0, Self::join_request(id.as_str(), &none, "consumer"));
            ids.push(id.as_str().to_string());
            waiters.push(w2);
        }
        let fx = self.c.tick(T0);
        let generation = answer(&fx.joins, waiters[0])
            .expect("join completes")
            .generation_id;
        let mut a = Classic {
            id: ids[0].clone(),
            generation,
            owned: BTreeSet::new(),
        };
        let mut b = Classic {
            id: ids[1].clone(),
            generation,
            owned: BTreeSet::new(),
        };
        let part = |ps: &[i32]| Assignment::from([("t".to_string(), ps.iter().copied().collect())]);
        let (leader, follower) = if self.c.groups["g"].is_leader(&a.id) {
            (a.clone(), b.clone())
        } else {
            (b.clone(), a.clone())
        };
        let assign = [
            (leader.id.as_str(), encode_assignment(&part(&[0, 1, 2]), 3)),
            (
                follower.id.as_str(),
                encode_assignment(&part(&[3, 4, 5]), 3),
            ),
        ];
        let r = self.sync(T0, &leader, &assign).expect("leader answered");
        assert_eq!(r.error_code, codes::NONE);
        for m in [&mut a, &mut b] {
            let r = self.sync(T0, m, &[]).expect("stable group answers");
            m.owned = partitions_of(&r.assignment);
        }
        assert_eq!(self.c.groups["g"].state, GroupState::Stable);
        let commit = OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(sb(&a.id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(42)])]);
        let (resp, fx) = self.c.commit(T0, 8, &commit);
        assert_eq!(resp.topics[0].partitions[0].error_code, codes::NONE);
        self.c.apply_written(fx.offsets, T0);
        (a, b)
    }

    /// A consumer-protocol heartbeat of member `id`; returns (error, epoch, assignment if sent).
    fn consumer(
        &mut self,
        now: i64,
        id: &str,
        epoch: i32,
        owned: Option<&BTreeSet<i32>>,
    ) -> (i16, i32, Option<BTreeSet<i32>>, Effects) {
        let mut r = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb(id))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 });
        if epoch == 0 {
            r.subscribed_topic_names = Some(vec![TopicName(sb("t"))]);
            r.topic_partitions = Some(Vec::new());
        } else if let Some(o) = owned {
            r.topic_partitions = Some(vec![TopicPartitions::default()
                .with_topic_id(TOPIC_ID)
                .with_partitions(o.iter().copied().collect())]);
        }
        let input = ConsumerHeartbeatInput {
            version: 1,
            client_id: "kip848".into(),
            client_host: "/127.0.0.1".into(),
            request: r,
        };
        let (resp, fx) = self.c.consumer_heartbeat_step(now, input, &image());
        let assigned = resp.assignment.as_ref().map(|a| {
            a.topic_partitions
                .iter()
                .flat_map(|tp| tp.partitions.iter().copied())
                .collect()
        });
        (resp.error_code, resp.member_epoch, assigned, fx)
    }

    /// The classic client's reaction to REBALANCE_IN_PROGRESS: revoke all (eager), rejoin, sync.
    fn classic_rejoin(&mut self, now: i64, m: &mut Classic) {
        m.owned.clear();
        let (w, fx) = self.join(now, Self::join_request(&m.id, &m.owned, "consumer"));
        let r = answer(&fx.joins, w).expect("a consumer group answers JoinGroup at once");
        assert_eq!(r.error_code, codes::NONE, "{r:?}");
        assert_eq!(r.protocol_name.as_ref().map(|s| s.as_str()), Some("range"));
        assert!(r.leader.is_empty() && r.members.is_empty());
        m.generation = r.generation_id;
        let s = self.sync(now, m, &[]).expect("answered at once");
        assert_eq!(s.error_code, codes::NONE, "{s:?}");
        m.owned = partitions_of(&s.assignment);
    }
}

fn answer<T: Clone>(list: &[(Waiter, T)], w: Waiter) -> Option<T> {
    list.iter().find(|(x, _)| *x == w).map(|(_, r)| r.clone())
}

fn committed(c: &Coordinator) -> Option<OffsetValue> {
    c.offsets.get("g")?.get(&("t".to_string(), 0)).cloned()
}

#[test]
fn subscriptions_and_assignments_round_trip_the_consumer_protocol() {
    let s = decode_subscription(&subscription(&BTreeSet::from([1, 2]))).expect("decodes");
    assert_eq!(s.topics, BTreeSet::from(["t".to_string()]));
    assert_eq!(s.owned["t"], BTreeSet::from([1, 2]));
    let a = Assignment::from([("t".to_string(), BTreeSet::from([0, 5]))]);
    for v in 0..=3 {
        let bytes = encode_assignment(&a, v);
        assert_eq!(i16::from_be_bytes([bytes[0], bytes[1]]), v);
        assert_eq!(partitions_of(&bytes), BTreeSet::from([0, 5]));
    }
    // Garbage and absurd counts are refused, never allocated from.
    assert!(decode_subscription(&Bytes::from_static(b"\x00")).is_none());
    assert!(decode_subscription(&Bytes::from_static(b"\x00\x01\x7f\xff\xff\xff")).is_none());
    assert!(decode_subscription(&Bytes::from_static(b"\xff\xff")).is_none());
}

#[test]
fn migration_policy_parses_kafkas_values_case_insensitively() {
    assert_eq!(
        MigrationPolicy::parse("BIDIRECTIONAL"),
        Some(MigrationPolicy::Bidirectional)
    );
    assert_eq!(
        MigrationPolicy::parse("Upgrade"),
        Some(MigrationPolicy::Upgrade)
    );
    assert_eq!(
        MigrationPolicy::parse("downgrade"),
        Some(MigrationPolicy::Downgrade)
    );
    assert_eq!(
        MigrationPolicy::parse("disabled"),
        Some(MigrationPolicy::Disabled)
    );
    assert_eq!(MigrationPolicy::parse("sideways"), None);
    let entries = |v: &str| {
        crate::config::toml_file::parse(&format!("group.consumer.migration.policy = \"{v}\"\n"))
            .expect("toml")
    };
    let c = crate::config::Config::from_entries(&entries("Downgrade")).expect("valid");
    assert_eq!(
        c.group_consumer_migration_policy,
        MigrationPolicy::Downgrade
    );
    let e = crate::config::Config::from_entries(&entries("sideways"))
        .expect_err("a bad value stops the start")
        .to_string();
    assert!(e.contains("group.consumer.migration.policy"), "{e}");
    assert_eq!(
        crate::config::Config::default().group_consumer_migration_policy,
        MigrationPolicy::Bidirectional
    );
}

#[test]
fn consumer_join_upgrades_a_classic_group_and_partitions_spread_over_all_members() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = w.stable_classic_group();
    let generation = a.generation;

    let (code, epoch, assigned, fx) = w.consumer(T0 + 10, "c", 0, None);
    assert_eq!(code, codes::NONE);
    assert!(!w.c.groups.contains_key("g"), "the classic group is gone");
    let g = &w.c.consumer_groups["g"];
    assert_eq!(g.members.len(), 3);
    assert_eq!(g.group_epoch, generation + 1);
    assert_eq!(epoch, generation + 1);
    // The classic group's record is tombstoned; the offsets stay.
    assert!(fx
        .records
        .iter()
        .any(|r| r.key == records::group_key("g") && r.value.is_none()));
    assert_eq!(committed(&w.c).map(|v| v.offset), Some(42));
    // Every partition is still owned by a classic member, so the new member waits.
    assert_eq!(assigned, Some(BTreeSet::new()));

    // The classic members are told to rejoin; each revokes and gets its share.
    for m in [&mut a, &mut b] {
        assert_eq!(w.heartbeat(T0 + 20, m), codes::REBALANCE_IN_PROGRESS);
        w.classic_rejoin(T0 + 20, m);
    }
    let mut c_owned = BTreeSet::new();
    let mut c_epoch = epoch;
    for step in 0..4 {
        let (code, e, got, _) = w.consumer(T0 + 30 + step, "c", c_epoch, Some(&c_owned));
        assert_eq!(code, codes::NONE);
        c_epoch = e;
        if let Some(got) = got {
            c_owned = got;
        }
        for m in [&mut a, &mut b] {
            if w.heartbeat(T0 + 30 + step, m) == codes::REBALANCE_IN_PROGRESS {
                w.classic_rejoin(T0 + 30 + step, m);
            }
        }
    }
    assert_eq!(w.heartbeat(T0 + 40, &a), codes::NONE);
    assert_eq!(w.heartbeat(T0 + 40, &b), codes::NONE);
    for owned in [&a.owned, &b.owned, &c_owned] {
        assert_eq!(owned.len(), 2, "a fair share each: {a:?} {b:?} {c_owned:?}");
    }
    let all: BTreeSet<i32> = a
        .owned
        .iter()
        .chain(&b.owned)
        .chain(&c_owned)
        .copied()
        .collect();
    assert_eq!(all, (0..PARTITIONS).collect(), "disjoint and complete");
    assert_eq!(
        w.c.consumer_describe("g", &image())
            .members
            .iter()
            .filter(|m| m.member_type == 0)
            .count(),
        2,
        "the two classic members are described as classic"
    );

    // A classic member commits at its generation with the classic OffsetCommit version.
    let commit = |generation: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(sb(&a.id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(sb("t")))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(43)])])
    };
    let (r, _) = w.c.commit(T0 + 50, 8, &commit(a.generation));
    assert_eq!(r.topics[0].partitions[0].error_code, codes::NONE);
    let (r, _) = w.c.commit(T0 + 50, 8, &commit(a.generation - 1));
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        codes::ILLEGAL_GENERATION
    );
    // OffsetFetch with the member's identity: the generation is checked the classic way.
    let g = &w.c.consumer_groups["g"];
    assert_eq!(g.validate_fetch(Some(&a.id), a.generation), Ok(()));
    assert_eq!(
        g.validate_fetch(Some(&a.id), a.generation - 1),
        Err(codes::ILLEGAL_GENERATION)
    );
    assert_eq!(
        g.validate_fetch(Some("c"), c_epoch - 1),
        Err(codes::STALE_MEMBER_EPOCH)
    );
}

#[test]
fn upgrade_parks_nothing_answering_waiting_classic_requests_rebalance_in_progress() {
    let mut w = World::new(MigrationPolicy::Upgrade);
    let (a, _b) = w.stable_classic_group();
    // A rejoins: the group prepares a rebalance and parks A's JoinGroup.
    let (wa, fx) = w.join(
        T0 + 5,
        World::join_request(&a.id, &BTreeSet::new(), "consumer"),
    );
    assert!(answer(&fx.joins, wa).is_none());
    let (code, _, _, fx) = w.consumer(T0 + 10, "c", 0, None);
    assert_eq!(code, codes::NONE);
    let r: JoinGroupResponse = answer(&fx.joins, wa).expect("the parked join is answered");
    assert_eq!(r.error_code, codes::REBALANCE_IN_PROGRESS);
}

#[test]
fn upgrade_refused_by_policy_or_protocol_type_answers_group_id_not_found() {
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
        let mut w = World::new(policy);
        let (a, _) = w.stable_classic_group();
        let (code, _, _, fx) = w.consumer(T0 + 10, "c", 0, None);
        assert_eq!(code, codes::GROUP_ID_NOT_FOUND, "{policy:?}");
        assert!(fx.records.is_empty());
        assert!(!w.c.consumer_groups.contains_key("g"));
        assert_eq!(w.c.groups["g"].members.len(), 2);
        assert_eq!(
            w.heartbeat(T0 + 20, &a),
            codes::NONE,
            "the classic group goes on"
        );
    }
    // A non-consumer embedded protocol (Connect's) never converts.
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (wa, fx) = w.join(T0, World::join_request("", &BTreeSet::new(), "connect"));
    let id = answer(&fx.joins, wa).expect("id").member_id;
    w.join(
        T0,
        World::join_request(id.as_str(), &BTreeSet::new(), "connect"),
    );
    w.c.tick(T0);
    let (code, _, _, _) = w.consumer(T0 + 10, "c", 0, None);
    assert_eq!(code, codes::GROUP_ID_NOT_FOUND);
    assert!(w.c.groups.contains_key("g"));
}

/// Upgrades, then lets the consumer-protocol member leave.
fn upgraded_then_consumer_leaves(policy: MigrationPolicy) -> (World, Classic, Classic, Effects) {
    let mut w = World::new(policy);
    let (mut a, mut b) = w.stable_classic_group();
    let (_, epoch, _, _) = w.consumer(T0 + 10, "c", 0, None);
    // Every member reconciles to the new epoch (the classic ones revoke, then rejoin).
    let (mut c_epoch, mut c_owned) = (epoch, BTreeSet::new());
    for step in 0..4 {
        for m in [&mut a, &mut b] {
            if w.heartbeat(T0 + 20 + step, m) == codes::REBALANCE_IN_PROGRESS {
                w.classic_rejoin(T0 + 20 + step, m);
            }
        }
        let (_, e, got, _) = w.consumer(T0 + 20 + step, "c", c_epoch, Some(&c_owned));
        c_epoch = e;
        c_owned = got.unwrap_or(c_owned);
    }
    assert_eq!((a.generation, b.generation), (c_epoch, c_epoch));
    let (code, _, _, fx) = w.consumer(T0 + 30, "c", -1, None);
    assert_eq!(code, codes::NONE);
    assert!(epoch > 0);
    (w, a, b, fx)
}

#[test]
fn last_consumer_member_leaving_downgrades_to_a_rebalancing_classic_group() {
    let (mut w, mut a, mut b, fx) = upgraded_then_consumer_leaves(MigrationPolicy::Bidirectional);
    assert!(!w.c.consumer_groups.contains_key("g"));
    let g = &w.c.groups["g"];
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(g.members.len(), 2);
    assert_eq!(g.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(g.protocol_name.as_deref(), Some("range"));
    let generation = g.generation_id;
    assert!(fx
        .records
        .iter()
        .any(|r| r.key == records::group_key("g") && r.value.is_some()));
    assert_eq!(committed(&w.c).map(|v| v.offset), Some(42), "offsets stay");

    // The classic members hear of the rebalance, rejoin and form the next generation.
    let mut waiters = Vec::new();
    for m in [&mut a, &mut b] {
        assert_eq!(
            m.generation, generation,
            "stable members were at the group epoch"
        );
        assert_eq!(w.heartbeat(T0 + 40, m), codes::REBALANCE_IN_PROGRESS);
        let (wm, fx) = w.join(
            T0 + 40,
            World::join_request(&m.id, &BTreeSet::new(), "consumer"),
        );
        waiters.push((wm, fx));
    }
    let (last, fx) = waiters.pop().expect("two joins");
    let r = answer(&fx.joins, last).expect("the last rejoin completes the join phase");
    assert_eq!(r.error_code, codes::NONE);
    assert_eq!(r.generation_id, generation + 1);
    let leader = answer(&fx.joins, waiters[0].0).expect("both answered");
    let members = leader.members.len().max(r.members.len());
    assert_eq!(members, 2, "the leader gets both members to assign");
    assert_eq!(w.c.groups["g"].state, GroupState::CompletingRebalance);
}

#[test]
fn downgrade_disabled_keeps_a_consumer_group_of_classic_members() {
    let (mut w, a, b, fx) = upgraded_then_consumer_leaves(MigrationPolicy::Upgrade);
    assert!(fx.records.is_empty());
    assert!(!w.c.groups.contains_key("g"));
    let g = &w.c.consumer_groups["g"];
    assert_eq!(g.members.len(), 2);
    assert!(g.members.values().all(|m| m.classic.is_some()));
    // The remaining classic members rebalance inside the consumer group.
    for m in [&a, &b] {
        assert_eq!(w.heartbeat(T0 + 40, m), codes::REBALANCE_IN_PROGRESS);
    }
}

#[test]
fn classic_join_to_a_consumer_group_joins_as_a_classic_member() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (code, epoch, assigned, _) = w.consumer(T0, "c", 0, None);
    assert_eq!(code, codes::NONE);
    assert_eq!(assigned.map(|a| a.len()), Some(PARTITIONS as usize));

    // v9 without a member id: MEMBER_ID_REQUIRED first, as for a classic group.
    let (wa, fx) = w.join(
        T0 + 1,
        World::join_request("", &BTreeSet::new(), "consumer"),
    );
    let r = answer(&fx.joins, wa).expect("at once");
    assert_eq!(r.error_code, codes::MEMBER_ID_REQUIRED);
    let mut a = Classic {
        id: r.member_id.as_str().to_string(),
        generation: -1,
        owned: BTreeSet::new(),
    };
    w.classic_rejoin(T0 + 2, &mut a);
    assert!(a.owned.is_empty(), "c still owns everything");
    assert!(a.generation > epoch);
    // A wrong generation, protocol or member is refused with Kafka's codes.
    let stale = Classic {
        generation: a.generation - 1,
        ..a.clone()
    };
    assert_eq!(w.heartbeat(T0 + 3, &stale), codes::ILLEGAL_GENERATION);
    let unknown = Classic {
        id: "nobody".into(),
        ..a.clone()
    };
    assert_eq!(w.heartbeat(T0 + 3, &unknown), codes::UNKNOWN_MEMBER_ID);
    let (wx, fx) = w.join(T0 + 3, World::join_request("", &BTreeSet::new(), "connect"));
    assert_eq!(
        answer(&fx.joins, wx).map(|r| r.error_code),
        Some(codes::INCONSISTENT_GROUP_PROTOCOL)
    );
    let mut garbage = World::join_request("x", &BTreeSet::new(), "consumer");
    garbage.request.protocols[0].metadata = Bytes::from_static(b"\x00\x03\x7f\xff\xff\xff");
    let (wg, fx) = w.join(T0 + 3, garbage);
    assert_eq!(
        answer(&fx.joins, wg).map(|r| r.error_code),
        Some(codes::UNKNOWN_SERVER_ERROR),
        "a malformed subscription is refused, nothing allocated from its count"
    );
    assert!(!w.c.consumer_groups["g"].members.contains_key("x"));

    // c revokes half; a's heartbeat then says rejoin, and a gets the released partitions.
    let (_, e, got, _) = w.consumer(T0 + 4, "c", epoch, Some(&(0..PARTITIONS).collect()));
    let kept = got.expect("c is told what to keep");
    assert_eq!(kept.len(), 3);
    w.consumer(T0 + 5, "c", e, Some(&kept));
    assert_eq!(w.heartbeat(T0 + 6, &a), codes::REBALANCE_IN_PROGRESS);
    w.classic_rejoin(T0 + 6, &mut a);
    assert_eq!(a.owned.len(), 3);
    assert!(a.owned.is_disjoint(&kept));

    // The classic member leaves with LeaveGroup; the consumer member stays alone.
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![MemberIdentity::default().with_member_id(sb(&a.id))]);
    let (r, _) = w.c.leave(T0 + 7, 3, &leave);
    assert_eq!(r.members[0].error_code, codes::NONE);
    let g = &w.c.consumer_groups["g"];
    assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["c"]);
}

#[test]
fn expiry_of_the_last_consumer_member_downgrades_too() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    let (mut a, mut b) = w.stable_classic_group();
    w.consumer(T0 + 10, "c", 0, None);
    // The classic members keep heartbeating; the consumer member goes silent.
    let mut now = T0 + 10;
    while w.c.consumer_groups.contains_key("g") {
        now += 3_000;
        assert!(now < T0 + 120_000, "the consumer member never expired");
        for m in [&mut a, &mut b] {
            if w.heartbeat(now, m) == codes::REBALANCE_IN_PROGRESS
                && w.c.consumer_groups.contains_key("g")
            {
                w.classic_rejoin(now, m);
            }
        }
        let fx = w.c.tick(now);
        if w.c.groups.contains_key("g") {
            assert!(fx.records.iter().any(|r| r.value.is_some()));
        }
    }
    assert_eq!(w.c.groups["g"].state, GroupState::PreparingRebalance);
    assert_eq!(w.c.groups["g"].members.len(), 2);
}

#[test]
fn static_classic_member_restarting_takes_its_place_in_the_consumer_group() {
    let mut w = World::new(MigrationPolicy::Bidirectional);
    w.consumer(T0, "c", 0, None);
    let static_join = |member: &str| {
        let mut j = World::join_request(member, &BTreeSet::new(), "consumer");
        j.request.group_instance_id = Some(sb("instance-1"));
        j
    };
    // A static member needs no MEMBER_ID_REQUIRED round.
    let (w1, fx) = w.join(T0 + 1, static_join(""));
    let first = answer(&fx.joins, w1).expect("at once");
    assert_eq!(first.error_code, codes::NONE);
    // Restarted (empty member id, same instance id): a new member id in the old one's place.
    let (w2, fx) = w.join(T0 + 2, static_join(""));
    let second = answer(&fx.joins, w2).expect("at once");
    assert_eq!(second.error_code, codes::NONE);
    assert_ne!(second.member_id, first.member_id);
    let g = &w.c.consumer_groups["g"];
    assert_eq!(g.members.len(), 2, "replaced, not added");
    assert_eq!(
        g.static_members.get("instance-1").map(String::as_str),
        Some(second.member_id.as_str())
    );
    // The old member id with the instance id is fenced; a wrong id for a taken instance too.
    let old = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id(second.generation_id)
        .with_member_id(first.member_id.clone())
        .with_group_instance_id(Some(sb("instance-1")));
    assert_eq!(
        w.c.heartbeat(T0 + 3, &old).error_code,
        codes::FENCED_INSTANCE_ID
    );
    let (w3, fx) = w.join(T0 + 3, static_join("someone-else"));
    assert_eq!(
        answer(&fx.joins, w3).map(|r| r.error_code),
        Some(codes::FENCED_INSTANCE_ID)
    );
    // The consumer-protocol member cannot come in through JoinGroup.
    let (w4, fx) = w.join(
        T0 + 4,
        World::join_request("c", &BTreeSet::new(), "consumer"),
    );
    assert_eq!(
        answer(&fx.joins, w4).map(|r| r.error_code),
        Some(codes::UNKNOWN_MEMBER_ID)
    );
}
