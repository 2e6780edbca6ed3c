//! State-machine tests with simulated time: no sockets, no tokio, no clock.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    OffsetCommitRequest, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::classic::sb;
use super::coordinator::{Coordinator, JoinInput};
use super::offsets::FetchQuery;
use super::*;

pub(super) const T0: i64 = 1_000_000;
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

pub(super) struct Harness {
    pub(super) c: Coordinator,
    next: Waiter,
}

fn cfg(initial_delay: i64) -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: initial_delay,
        ..GroupConfig::default()
    }
}

fn protocols(list: &[(&str, &[u8])]) -> Vec<JoinGroupRequestProtocol> {
    list.iter()
        .map(|(n, m)| {
            JoinGroupRequestProtocol::default()
                .with_name(sb(n))
                .with_metadata(Bytes::copy_from_slice(m))
        })
        .collect()
}

fn join_input(member: &str, instance: Option<&str>, protos: &[(&str, &[u8])]) -> JoinInput {
    JoinInput {
        version: 9,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        request: JoinGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_session_timeout_ms(SESSION)
            .with_rebalance_timeout_ms(REBALANCE)
            .with_member_id(sb(member))
            .with_group_instance_id(instance.map(sb))
            .with_protocol_type(sb("consumer"))
            .with_protocols(protocols(protos)),
    }
}

const RANGE: &[(&str, &[u8])] = &[("range", b"meta")];

impl Harness {
    pub(super) fn new(initial_delay: i64) -> Harness {
        Harness {
            c: Coordinator::new(cfg(initial_delay)),
            next: 0,
        }
    }

    /// Sends a JoinGroup; returns its waiter and the step's effects.
    fn join(&mut self, now: i64, input: JoinInput) -> (Waiter, Effects) {
        self.next += 1;
        let w = self.next;
        (w, self.c.join(now, input, w))
    }

    /// The v4+ two-step join: MEMBER_ID_REQUIRED, then the join with the given id (parked).
    fn join_new(&mut self, now: i64, protos: &[(&str, &[u8])]) -> (String, Waiter, Effects) {
        let (w, fx) = self.join(now, join_input("", None, protos));
        let r = answer(&fx.joins, w).expect("answered at once");
        assert_eq!(r.error_code, codes::MEMBER_ID_REQUIRED);
        let id = r.member_id.as_str().to_string();
        assert!(id.starts_with("client-"), "{id}");
        let (w2, fx2) = self.join(now, join_input(&id, None, protos));
        (id, w2, fx2)
    }

    fn sync(
        &mut self,
        now: i64,
        member: &str,
        generation: i32,
        assign: &[(&str, &[u8])],
    ) -> (Waiter, Effects) {
        self.next += 1;
        let w = self.next;
        let req = SyncGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id(generation)
            .with_member_id(sb(member))
            .with_assignments(
                assign
                    .iter()
                    .map(|(m, a)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(sb(m))
                            .with_assignment(Bytes::copy_from_slice(a))
                    })
                    .collect(),
            );
        (w, self.c.sync(now, req, w))
    }

    fn heartbeat(&mut self, now: i64, member: &str, generation: i32) -> i16 {
        self.heartbeat_as(now, member, None, generation)
    }

    fn heartbeat_as(
        &mut self,
        now: i64,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> i16 {
        let req = HeartbeatRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_generation_id(generation)
            .with_member_id(sb(member))
            .with_group_instance_id(instance.map(sb));
        self.c.heartbeat(now, &req).error_code
    }

    /// Fires every timer up to `to`, in deadline order, collecting the effects.
    fn advance(&mut self, to: i64) -> Effects {
        let mut all = Effects::default();
        while let Some(at) = self.c.next_deadline().filter(|d| *d <= to) {
            let fx = self.c.tick(at);
            all.joins.extend(fx.joins);
            all.syncs.extend(fx.syncs);
            all.records.extend(fx.records);
        }
        all
    }

    pub(super) fn state(&self) -> GroupState {
        self.c.group("g").expect("group exists").state
    }

    pub(super) fn generation(&self) -> i32 {
        self.c.group("g").expect("group exists").generation_id
    }

    /// Forms a stable group of `n` dynamic members; returns their ids (leader first).
    pub(super) fn stable_group(&mut self, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        let mut waiters = Vec::new();
        for _ in 0..n {
            let (id, w, _) = self.join_new(T0, RANGE);
            ids.push(id);
            waiters.push(w);
        }
        let fx = self
            .c
            .tick(T0 + self.c.config.initial_rebalance_delay_ms * 4 + 1);
        for w in &waiters {
            assert_eq!(answer(&fx.joins, *w).expect("join answered").error_code, 0);
        }
        let generation = self.generation();
        let now = T0 + 100;
        let assignment: Vec<(&str, &[u8])> =
            ids.iter().map(|i| (i.as_str(), b"A" as &[u8])).collect();
        for id in ids.iter().skip(1) {
            self.sync(now, id, generation, &[]);
        }
        let (_, fx) = self.sync(now, &ids[0], generation, &assignment);
        assert_eq!(fx.syncs.len(), n);
        assert_eq!(self.state(), GroupState::Stable);
        ids
    }
}

fn answer<T: Clone>(list: &[(Waiter, T)], w: Waiter) -> Option<T> {
    list.iter().find(|(x, _)| *x == w).map(|(_, r)| r.clone())
}

fn sync_answer(fx: &Effects, w: Waiter) -> Option<SyncGroupResponse> {
    answer(&fx.syncs, w)
}

fn join_answer(fx: &Effects, w: Waiter) -> Option<JoinGroupResponse> {
    answer(&fx.joins, w)
}

#[test]
fn three_members_join_within_the_initial_delay_and_sync_disjoint_assignments() {
    let mut h = Harness::new(3000);
    let (a, wa, fx) = h.join_new(T0, &[("range", b"ma")]);
    assert!(fx.joins.is_empty(), "parked during the initial delay");
    let (b, wb, _) = h.join_new(T0 + 100, &[("range", b"mb")]);
    let (c, wc, _) = h.join_new(T0 + 200, &[("range", b"mc")]);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    // The first delay expires with new members having arrived: extended once.
    assert!(h.c.tick(T0 + 3000).joins.is_empty());
    assert_eq!(h.c.next_deadline(), Some(T0 + 6000));
    let fx = h.c.tick(T0 + 6000);
    let ra = join_answer(&fx, wa).unwrap();
    let rb = join_answer(&fx, wb).unwrap();
    let rc = join_answer(&fx, wc).unwrap();
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    for r in [&ra, &rb, &rc] {
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader.as_str(), a);
        assert_eq!(r.protocol_name.as_ref().unwrap().as_str(), "range");
    }
    // Only the leader gets the members, with their metadata.
    let members: Vec<(String, Bytes)> = ra
        .members
        .iter()
        .map(|m| (m.member_id.as_str().to_string(), m.metadata.clone()))
        .collect();
    assert_eq!(
        members,
        vec![
            (a.clone(), Bytes::from_static(b"ma")),
            (b.clone(), Bytes::from_static(b"mb")),
            (c.clone(), Bytes::from_static(b"mc")),
        ]
    );
    assert!(rb.members.is_empty() && rc.members.is_empty());

    // Followers park in SyncGroup until the leader sends the assignment.
    let (sb_w, fx) = h.sync(T0 + 6100, &b, 1, &[]);
    assert!(fx.syncs.is_empty());
    let (sc_w, _) = h.sync(T0 + 6100, &c, 1, &[]);
    let (sa_w, fx) = h.sync(
        T0 + 6200,
        &a,
        1,
        &[(&a, b"p0,p1"), (&b, b"p2,p3"), (&c, b"p4,p5")],
    );
    assert_eq!(
        sync_answer(&fx, sa_w).unwrap().assignment.as_ref(),
        b"p0,p1"
    );
    assert_eq!(
        sync_answer(&fx, sb_w).unwrap().assignment.as_ref(),
        b"p2,p3"
    );
    assert_eq!(
        sync_answer(&fx, sc_w).unwrap().assignment.as_ref(),
        b"p4,p5"
    );
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(fx.records.len(), 1, "group metadata persisted");
    let stored = records::decode_group_value(fx.records[0].value.as_ref().unwrap()).unwrap();
    assert_eq!(stored.generation, 1);
    assert_eq!(stored.members.len(), 3);
    assert_eq!(stored.members[1].assignment.as_ref(), b"p2,p3");
}

#[test]
fn heartbeats_report_membership_and_generation_errors() {
    let mut h = Harness::new(0);
    let ids = h.stable_group(2);
    let g = h.generation();
    assert_eq!(h.heartbeat(T0 + 1000, &ids[1], g), codes::NONE);
    assert_eq!(
        h.heartbeat(T0 + 1000, &ids[1], g - 1),
        codes::ILLEGAL_GENERATION
    );
    assert_eq!(
        h.heartbeat(T0 + 1000, "nobody", g),
        codes::UNKNOWN_MEMBER_ID
    );
    let unknown_group = HeartbeatRequest::default()
        .with_group_id(GroupId(sb("other")))
        .with_member_id(sb(&ids[0]));
    assert_eq!(
        h.c.heartbeat(T0, &unknown_group).error_code,
        codes::UNKNOWN_MEMBER_ID
    );
    // The leader rejoining starts a rebalance: heartbeats now say so.
    let (_, fx) = h.join(T0 + 2000, join_input(&ids[0], None, RANGE));
    assert!(fx.joins.is_empty());
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert_eq!(
        h.heartbeat(T0 + 2000, &ids[1], g),
        codes::REBALANCE_IN_PROGRESS
    );
}

#[test]
fn a_silent_member_expires_after_the_session_timeout_and_the_rest_rebalance() {
    let mut h = Harness::new(0);
    let ids = h.stable_group(2);
    let g = h.generation();
    // Sync answered at T0+100, so deadlines sit at T0+100+SESSION; A keeps heartbeating.
    assert_eq!(h.heartbeat(T0 + 8000, &ids[0], g), codes::NONE);
    let fx = h.c.tick(T0 + 100 + SESSION as i64 - 1);
    assert!(fx.joins.is_empty());
    assert_eq!(h.state(), GroupState::Stable);
    h.c.tick(T0 + 100 + SESSION as i64);
    assert_eq!(h.state(), GroupState::PreparingRebalance);
    assert!(!h.c.group("g").unwrap().members.contains_key(&ids[1]));
    assert_eq!(
        h.heartbeat(T0 + 10_200, &ids[0], g),
        codes::REBALANCE_IN_PROGRESS
    );
    // The survivor rejoins: everyone left has joined, so the phase completes at once.
    let (w, fx) = h.join(T0 + 10_300, join_input(&ids[0], None, RANGE));
    let r = join_answer(&fx, w).unwrap();
    assert_eq!(
        (r.error_code, r.generation_id, r.members.len()),
        (0, g + 1, 1)
    );
}

#[test]
fn members_that_miss_the_rebalance_timeout_are_removed() {
    let mut h = Harness::new(0);
    let ids = h.stable_group(3);
    let g = h.generation();
    let t = T0 + 1000;
    let (wa, _) = h.join(t, join_input(&ids[0], None, RANGE));
    let (wb, fx) = h.join(t + 10, join_input(&ids[1], None, RANGE));
    assert!(fx.joins.is_empty(), "still waiting for the third member");
    let join_deadline = h.c.group("g").unwrap().join_timer.map(|(at, _)| at);
    assert_eq!(join_deadline, Some(t + REBALANCE as i64));
    // Heartbeats keep C alive, but it never rejoins.
    for k in 0..4 {
        let now = t + 5000 + k * 8000;
        assert!(h.advance(now).joins.is_empty());
        assert_eq!(h.heartbeat(now, &ids[2], g), codes::REBALANCE_IN_PROGRESS);
    }
    let fx = h.advance(t + REBALANCE as i64);
    let ra = join_answer(&fx, wa).unwrap();
    let rb = join_answer(&fx, wb).unwrap();
    assert_eq!(ra.generation_id, g + 1);
    assert_eq!(ra.members.len(), 2);
    assert_eq!(rb.members.len(), 0);
    assert!(!h.c.group("g").unwrap().members.contains_key(&ids[2]));
    assert_eq!(
        h.heartbeat(t + REBALANCE as i64 + 1, &ids[2], g + 1),
        codes::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn members_that_do_not_sync_in_time_are_removed() {
    let mut h = Harness::new(0);
    let (a, wa, _) = h.join_new(T0, RANGE);
    let fx = h.c.tick(T0);
    assert_eq!(join_answer(&fx, wa).unwrap().generation_id, 1);
    assert_eq!(h.state(), GroupState::CompletingRebalance);
    h.c.tick(T0 + REBALANCE as i64);
    assert!(h.c.group("g").unwrap().members.is_empty());
    assert_eq!(
        h.heartbeat(T0 + REBALANCE as i64, &a, 1),
        codes::UNKNOWN_MEMBER_ID
    );
}

#[test]
fn a_restarted_static_member_takes_over_without_a_rebalance() {
    let mut h = Harness::new(0);
    let (w, fx) = h.join(T0, join_input("", Some("i1"), RANGE));
    assert!(
        fx.joins.is_empty(),
        "static members skip MEMBER_ID_REQUIRED"
    );
    let fx = h.c.tick(T0);
    let old = join_answer(&fx, w).unwrap().member_id.as_str().to_string();
    let (_, fx) = h.sync(T0 + 10, &old, 1, &[(&old, b"mine")]);
    assert_eq!(fx.syncs[0].1.assignment.as_ref(), b"mine");

    // The client restarts and joins with no member id but the same instance id.
    let (w, fx) = h.join(T0 + 5000, join_input("", Some("i1"), RANGE));
    let r = join_answer(&fx, w).expect("answered without a rebalance");
    let new = r.member_id.as_str().to_string();
    assert_ne!(new, old);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.generation_id, 1);
    assert!(r.skip_assignment, "v9 leader keeps the assignment");
    assert_eq!(h.state(), GroupState::Stable);
    assert_eq!(fx.records.len(), 1, "the new member id is persisted");
    // The old incarnation is fenced; the new one syncs its old assignment back.
    assert_eq!(
        h.heartbeat_as(T0 + 5001, &old, Some("i1"), 1),
        codes::FENCED_INSTANCE_ID
    );
    assert_eq!(h.heartbeat_as(T0 + 5001, &new, Some("i1"), 1), codes::NONE);
    let (w, fx) = h.sync(T0 + 5002, &new, 1, &[]);
    assert_eq!(sync_answer(&fx, w).unwrap().assignment.as_ref(), b"mine");
}

#[test]
fn a_leave_during_the_rebalance_completes_the_join_phase() {
    let mut h = Harness::new(0);
    let ids = h.stable_group(2);
    let g = h.generation();
    let (wa, _) = h.join(T0 + 1000, join_input(&ids[0], None, RANGE));
    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_members(vec![
            kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                .with_member_id(sb(&ids[1])),
            kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                .with_member_id(sb("ghost")),
        ]);
    let (resp, fx) = h.c.leave(T0 + 1100, 5, &leave);
    let codes_: Vec<i16> = resp.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes_, vec![codes::NONE, codes::UNKNOWN_MEMBER_ID]);
    let r = join_answer(&fx, wa).expect("join phase completed by the leave");
    assert_eq!((r.generation_id, r.members.len()), (g + 1, 1));
    // v0-2 report the single member's error at the top level.
    let (old, _) = h.c.leave(
        T0 + 1200,
        1,
        &LeaveGroupRequest::default()
            .with_group_id(GroupId(sb("g")))
            .with_member_id(sb("ghost")),
    );
    assert_eq!(old.error_code, codes::UNKNOWN_MEMBER_ID);
}

fn commit_req(generation: i32, member: &str, offset: i64, metadata: &str) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(sb("g")))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(sb(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(sb("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(3)
                .with_committed_metadata(Some(StrBytes::from_string(
                    metadata.to_string(),
                )))])])
}

fn commit_code(h: &mut Harness, version: i16, req: &OffsetCommitRequest) -> i16 {
    h.c.commit_written(T0 + 500, version, req).0.topics[0].partitions[0].error_code
}

fn fetched(h: &Harness) -> (i64, i32, String) {
    let topics = h.c.fetch(&FetchQuery {
        group_id: "g".into(),
        topics: Some(vec![("t".into(), vec![0])]),
        member_id: None,
        member_epoch: -1,
        require_stable: false,
    });
    let p = &topics[0].partitions[0];
    (
        p.committed_offset,
        p.committed_leader_epoch,
        p.metadata.as_ref().unwrap().as_str().to_string(),
    )
}

#[test]
fn offset_commits_check_generation_and_member() {
    let mut h = Harness::new(0);
    // No group yet: generation -1 is an admin/simple commit, anything else is refused.
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(1, "m", 5, "")),
        codes::ILLEGAL_GENERATION
    );
    assert_eq!(
        commit_code(&mut h, 9, &commit_req(1, "m", 5, "")),
        codes::GROUP_ID_NOT_FOUND
    );
    assert_eq!(fetched(&h).0, -1);
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(-1, "", 5, "admin")),
        codes::NONE
    );
    assert_eq!(fetched(&h), (5, 3, "admin".into()));
    assert_eq!(h.state(), GroupState::Empty);

    let ids = h.stable_group(2);
    let g = h.generation();
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(g - 1, &ids[0], 9, "")),
        codes::ILLEGAL_GENERATION
    );
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(g, "stranger", 9, "")),
        codes::UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(-1, "", 9, "")),
        codes::UNKNOWN_MEMBER_ID
    );
    let big = "x".repeat(4097);
    assert_eq!(
        commit_code(&mut h, 8, &commit_req(g, &ids[0], 9, &big)),
        codes::OFFSET_METADATA_TOO_LARGE
    );
    assert_eq!(fetched(&h).0, 5, "rejected commits change nothing");
    let (resp, fx) =
        h.c.commit_written(T0 + 600, 8, &commit_req(g, &ids[1], 9, "m"));
    assert_eq!(resp.topics[0].partitions[0].error_code, codes::NONE);
    assert_eq!(fx.records.len(), 1);
    assert_eq!(fetched(&h), (9, 3, "m".into()));
}

#[test]
fn member_id_required_then_pending_ids_expire() {
    let mut h = Harness::new(0);
    let (w, fx) = h.join(T0, join_input("", None, RANGE));
    let r = join_answer(&fx, w).unwrap();
    assert_eq!(r.error_code, codes::MEMBER_ID_REQUIRED);
    let id = r.member_id.as_str().to_string();
    assert!(h.c.group("g").unwrap().pending_members.contains_key(&id));
    // Not rejoined within the session timeout: the id is forgotten.
    h.c.tick(T0 + SESSION as i64);
    let (w, fx) = h.join(T0 + SESSION as i64 + 1, join_input(&id, None, RANGE));
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::UNKNOWN_MEMBER_ID
    );
    // v3 and older admit an unknown member directly.
    let mut old = join_input("", None, RANGE);
    old.version = 3;
    let (w, _) = h.join(T0 + 20_000, old);
    let fx = h.c.tick(T0 + 20_000);
    let r = join_answer(&fx, w).unwrap();
    assert_eq!((r.error_code, r.generation_id), (0, 1));
}

#[test]
fn the_protocol_with_most_votes_among_common_ones_wins() {
    let mut h = Harness::new(1000);
    let (_, wa, _) = h.join_new(T0, &[("range", b"a"), ("roundrobin", b"a")]);
    let (_, wb, _) = h.join_new(T0, &[("roundrobin", b"b"), ("range", b"b")]);
    let (_, _, _) = h.join_new(
        T0,
        &[("sticky", b"c"), ("roundrobin", b"c"), ("range", b"c")],
    );
    // A member with no protocol in common is refused.
    let (w, fx) = h.join(T0, join_input("", None, &[("sticky", b"d")]));
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::INCONSISTENT_GROUP_PROTOCOL
    );
    let mut other_type = join_input("", None, RANGE);
    other_type.request.protocol_type = sb("connect");
    let (w, fx) = h.join(T0, other_type);
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::INCONSISTENT_GROUP_PROTOCOL
    );
    let fx = h.advance(T0 + 10_000);
    let ra = join_answer(&fx, wa).unwrap();
    assert_eq!(ra.protocol_name.unwrap().as_str(), "roundrobin");
    assert_eq!(
        ra.members[1].metadata.as_ref(),
        b"b",
        "metadata of the chosen protocol"
    );
    assert_eq!(join_answer(&fx, wb).unwrap().generation_id, 1);
}

#[test]
fn bad_join_inputs_get_kafkas_errors() {
    let mut h = Harness::new(0);
    let mut short = join_input("", None, RANGE);
    short.request.session_timeout_ms = 10;
    let (w, fx) = h.join(T0, short);
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::INVALID_SESSION_TIMEOUT
    );
    let mut no_group = join_input("", None, RANGE);
    no_group.request.group_id = GroupId(sb(""));
    let (w, fx) = h.join(T0, no_group);
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::INVALID_GROUP_ID
    );
    let (w, fx) = h.join(T0, join_input("made-up", None, RANGE));
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::UNKNOWN_MEMBER_ID
    );
    let (w, fx) = h.join(T0, join_input("", None, &[]));
    assert_eq!(
        join_answer(&fx, w).unwrap().error_code,
        codes::INCONSISTENT_GROUP_PROTOCOL
    );
    // Sync for an unknown group or with a wrong generation.
    let (w, fx) = h.sync(T0, "m", 1, &[]);
    assert_eq!(
        sync_answer(&fx, w).unwrap().error_code,
        codes::UNKNOWN_MEMBER_ID
    );
    let ids = h.stable_group(1);
    let (w, fx) = h.sync(T0 + 200, &ids[0], 7, &[]);
    assert_eq!(
        sync_answer(&fx, w).unwrap().error_code,
        codes::ILLEGAL_GENERATION
    );
}

#[test]
fn garbage_assignment_bytes_are_delivered_verbatim() {
    let mut h = Harness::new(0);
    let (a, wa, _) = h.join_new(T0, RANGE);
    h.c.tick(T0);
    let _ = wa;
    let garbage: &[u8] = &[0xff, 0x00, 0x13, 0x37, 0xde, 0xad];
    let (w, fx) = h.sync(T0 + 1, &a, 1, &[(&a, garbage), ("not-a-member", b"x")]);
    assert_eq!(sync_answer(&fx, w).unwrap().assignment.as_ref(), garbage);
}

#[test]
fn delete_groups_only_removes_empty_groups_with_their_offsets() {
    let mut h = Harness::new(0);
    h.c.commit_written(T0, 8, &commit_req(-1, "", 5, ""));
    let (res, fx) = h.c.delete_groups_written(&["g".into(), "missing".into()]);
    assert_eq!(res[0].error_code, codes::NONE);
    assert_eq!(res[1].error_code, codes::GROUP_ID_NOT_FOUND);
    assert_eq!(fx.records.len(), 2, "offset tombstone + group tombstone");
    assert!(fx.records.iter().all(|r| r.value.is_none()));
    assert_eq!(fetched(&h).0, -1);
    h.stable_group(1);
    let (res, _) = h.c.delete_groups_written(&["g".into()]);
    assert_eq!(res[0].error_code, codes::NON_EMPTY_GROUP);
}

#[test]
fn replaying_the_records_restores_offsets_and_static_members() {
    let mut h = Harness::new(0);
    let mut records = Vec::new();
    let (w, _) = h.join(T0, join_input("", Some("i1"), RANGE));
    let fx = h.c.tick(T0);
    let id = join_answer(&fx, w).unwrap().member_id.as_str().to_string();
    let (_, fx) = h.sync(T0 + 1, &id, 1, &[(&id, b"asg")]);
    records.extend(fx.records);
    let (_, fx) =
        h.c.commit_written(T0 + 2, 8, &commit_req(1, &id, 77, "meta"));
    records.extend(fx.records);

    let mut restarted = Harness::new(0);
    for r in &records {
        restarted.c.replay(&r.key, r.value.as_deref(), T0 + 50);
    }
    assert_eq!(fetched(&restarted), (77, 3, "meta".into()));
    let g = restarted.c.group("g").unwrap();
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(g.static_members.get("i1"), Some(&id));
    // The restarted static client rejoins and gets its assignment back without a rebalance.
    let (w, fx) = restarted.join(T0 + 60, join_input("", Some("i1"), RANGE));
    let r = join_answer(&fx, w).unwrap();
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    let new = r.member_id.as_str().to_string();
    let (w, fx) = restarted.sync(T0 + 61, &new, 1, &[]);
    assert_eq!(sync_answer(&fx, w).unwrap().assignment.as_ref(), b"asg");
}

mod model {
    //! Random operation sequences against the state machine: invariants hold after every step and
    //! every parked request is answered at most once.
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[derive(Debug, Clone)]
    enum Op {
        Join(usize),
        Sync(usize),
        Heartbeat(usize),
        Leave(usize),
        Advance(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4usize).prop_map(Op::Join),
            (0..4usize).prop_map(Op::Sync),
            (0..4usize).prop_map(Op::Heartbeat),
            (0..4usize).prop_map(Op::Leave),
            (0..40_000i64).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn invariants_hold_under_random_operations(ops in proptest::collection::vec(op(), 1..80)) {
            let mut h = Harness::new(500);
            let mut now = T0;
            // Client-side view: the member id each of 4 clients knows, and its generation.
            let mut ids: Vec<String> = vec![String::new(); 4];
            let mut gens: Vec<i32> = vec![-1; 4];
            let mut parked: HashSet<Waiter> = HashSet::new();
            let mut answered: HashSet<Waiter> = HashSet::new();
            let mut last_generation = 0;
            for op in ops {
                let fx = match op {
                    Op::Join(i) => {
                        let (w, fx) = h.join(now, join_input(&ids[i], None, RANGE));
                        parked.insert(w);
                        fx
                    }
                    Op::Sync(i) => {
                        let assign: Vec<(&str, &[u8])> =
                            ids.iter().filter(|m| !m.is_empty()).map(|m| (m.as_str(), b"x" as &[u8])).collect();
                        let (w, fx) = h.sync(now, &ids[i], gens[i], &assign);
                        parked.insert(w);
                        fx
                    }
                    Op::Heartbeat(i) => {
                        h.heartbeat(now, &ids[i], gens[i]);
                        Effects::default()
                    }
                    Op::Leave(i) => {
                        let req = LeaveGroupRequest::default()
                            .with_group_id(GroupId(sb("g")))
                            .with_member_id(sb(&ids[i]));
                        h.c.leave(now, 0, &req).1
                    }
                    Op::Advance(ms) => {
                        now += ms;
                        h.advance(now)
                    }
                };
                for (w, r) in &fx.joins {
                    prop_assert!(answered.insert(*w), "join waiter {} answered twice", w);
                    prop_assert!(parked.contains(w));
                    // Hand the ids out to clients without one (a rough client model: enough to
                    // drive joins, syncs and heartbeats with real ids and generations).
                    if r.error_code == codes::MEMBER_ID_REQUIRED || r.error_code == codes::NONE {
                        if let Some(slot) = ids.iter().position(|m| m.is_empty() || m == r.member_id.as_str()) {
                            ids[slot] = r.member_id.as_str().to_string();
                            if r.error_code == codes::NONE {
                                gens[slot] = r.generation_id;
                            }
                        }
                    }
                }
                for (w, _) in &fx.syncs {
                    prop_assert!(answered.insert(*w), "sync waiter {} answered twice", w);
                }
                if let Some(g) = h.c.group("g") {
                    prop_assert!(g.generation_id >= last_generation);
                    last_generation = g.generation_id;
                    match &g.leader_id {
                        Some(l) => prop_assert!(g.members.contains_key(l), "leader {} not a member", l),
                        None => prop_assert!(g.members.is_empty()),
                    }
                    if g.state == GroupState::Empty {
                        prop_assert!(g.members.is_empty());
                    }
                    if matches!(g.state, GroupState::Stable | GroupState::CompletingRebalance) {
                        prop_assert!(!g.members.is_empty());
                        prop_assert!(g.members.values().all(|m| m.awaiting_join.is_none()));
                    }
                    if g.state != GroupState::CompletingRebalance {
                        prop_assert!(g.members.values().all(|m| m.awaiting_sync.is_none()));
                    }
                    for (inst, id) in &g.static_members {
                        prop_assert_eq!(
                            g.members.get(id).and_then(|m| m.group_instance_id.as_deref()),
                            Some(inst.as_str())
                        );
                    }
                }
            }
        }
    }
}
