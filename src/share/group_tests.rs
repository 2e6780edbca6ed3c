//! Tests of `ShareGroup`: ShareGroupHeartbeat join / heartbeat / leave, epochs, fencing, session
//! timeouts, max size, assignment spread and describe.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use uuid::Uuid;

use super::assignor::TopicPartitions;
use super::group::*;

fn topics(list: &[(&str, u8, i32)]) -> BTreeMap<String, TopicPartitions> {
    list.iter()
        .map(|(n, id, p)| {
            (
                n.to_string(),
                TopicPartitions {
                    topic_id: Uuid::from_bytes([*id; 16]),
                    partitions: *p,
                },
            )
        })
        .collect()
}

fn join(member: &str, subs: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member.to_string(),
        member_epoch: 0,
        subscribed_topic_names: Some(subs.iter().map(|s| s.to_string()).collect()),
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..HeartbeatRequest::default()
    }
}

fn beat(member: &str, epoch: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        member_id: member.to_string(),
        member_epoch: epoch,
        client_id: "client".to_string(),
        client_host: "/127.0.0.1".to_string(),
        ..HeartbeatRequest::default()
    }
}

fn partitions(resp: &HeartbeatResponse, topic_id: u8) -> Vec<i32> {
    resp.assignment
        .as_ref()
        .and_then(|a| a.get(&Uuid::from_bytes([topic_id; 16])))
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn join_heartbeat_and_leave() {
    let t = topics(&[("orders", 1, 3)]);
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    assert_eq!(g.state(), ShareGroupState::Empty);
    let r = g.heartbeat(&join("a", &["orders"]), &t, 0).expect("join");
    assert_eq!((r.member_epoch, r.heartbeat_interval_ms), (1, 5_000));
    assert_eq!(partitions(&r, 1), vec![0, 1, 2]);
    assert_eq!(g.state(), ShareGroupState::Stable);

    let r = g.heartbeat(&beat("a", 1), &t, 100).expect("heartbeat");
    assert_eq!(
        (r.member_epoch, r.assignment.clone()),
        (1, None),
        "no change, no assignment"
    );

    let r = g
        .heartbeat(&join("b", &["orders"]), &t, 200)
        .expect("join b");
    assert_eq!(r.member_epoch, 2);
    assert_eq!(partitions(&r, 1).len(), 1);
    // a learns the new assignment on its next heartbeat, with its old epoch.
    let r = g.heartbeat(&beat("a", 1), &t, 300).expect("heartbeat a");
    assert_eq!(r.member_epoch, 2);
    assert_eq!(partitions(&r, 1).len(), 2);

    let r = g.heartbeat(&beat("b", -1), &t, 400).expect("leave");
    assert_eq!((r.member_epoch, g.group_epoch()), (-1, 3));
    assert!(g.member("b").is_none());
    let r = g.heartbeat(&beat("a", 2), &t, 500).expect("heartbeat a");
    assert_eq!((r.member_epoch, partitions(&r, 1)), (3, vec![0, 1, 2]));
}

#[test]
fn errors_carry_kafka_codes_and_change_nothing() {
    let t = topics(&[("orders", 1, 3)]);
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    g.heartbeat(&join("a", &["orders"]), &t, 0).expect("join");
    let cases: Vec<(HeartbeatRequest, i16)> = vec![
        (beat("nobody", 1), 25),
        (beat("nobody", -1), 25),
        (beat("a", 7), 110),
        (beat("", 0), 42),
        (beat("a", -2), 42),
        (beat("c", 0), 42), // join without subscriptions
        (
            HeartbeatRequest {
                rack_id: Some(String::new()),
                ..beat("a", 1)
            },
            42,
        ),
    ];
    for (req, code) in cases {
        let err = g.heartbeat(&req, &t, 10).unwrap_err();
        assert_eq!(err.error_code(), code, "{req:?}");
    }
    assert_eq!(g.group_epoch(), 1);
    let err = ShareGroup::new("", ShareGroupConfig::default())
        .heartbeat(&join("a", &["orders"]), &t, 0)
        .unwrap_err();
    assert_eq!(err.error_code(), 42);
}

#[test]
fn group_max_size_refuses_new_members_only() {
    let t = topics(&[("orders", 1, 1)]);
    let config = ShareGroupConfig {
        max_size: 2,
        ..ShareGroupConfig::default()
    };
    let mut g = ShareGroup::new("g", config);
    g.heartbeat(&join("a", &["orders"]), &t, 0).expect("a");
    g.heartbeat(&join("b", &["orders"]), &t, 0).expect("b");
    let err = g.heartbeat(&join("c", &["orders"]), &t, 0).unwrap_err();
    assert_eq!(err, ShareGroupError::GroupMaxSizeReached);
    assert_eq!(err.error_code(), 81);
    // A member already in the group may rejoin with epoch 0.
    let r = g.heartbeat(&join("a", &["orders"]), &t, 0).expect("rejoin");
    assert_eq!(partitions(&r, 1), vec![0]);
}

#[test]
fn session_timeout_removes_silent_members_and_reassigns() {
    let t = topics(&[("orders", 1, 2)]);
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    g.heartbeat(&join("a", &["orders"]), &t, 0).expect("a");
    g.heartbeat(&join("b", &["orders"]), &t, 10_000).expect("b");
    assert_eq!(g.next_deadline(), Some(45_000));
    assert!(g.expire(44_999).is_empty());
    assert_eq!(g.expire(45_000), vec!["a".to_string()]);
    assert_eq!(g.group_epoch(), 3);
    let r = g.heartbeat(&beat("b", 2), &t, 46_000).expect("b");
    assert_eq!((r.member_epoch, partitions(&r, 1)), (3, vec![0, 1]));
    let err = g.heartbeat(&beat("a", 2), &t, 46_000).unwrap_err();
    assert_eq!(err, ShareGroupError::UnknownMemberId);
}

#[test]
fn new_partitions_bump_the_epoch_and_more_members_than_partitions_share() {
    let mut g = ShareGroup::new("g", ShareGroupConfig::default());
    let one = topics(&[("orders", 1, 1)]);
    for m in ["a", "b", "c"] {
        let r = g.heartbeat(&join(m, &["orders"]), &one, 0).expect("join");
        assert_eq!(partitions(&r, 1), vec![0], "{m} shares partition 0");
    }
    let three = topics(&[("orders", 1, 3)]);
    let r = g.heartbeat(&beat("a", 1), &three, 1).expect("heartbeat");
    assert_eq!(r.member_epoch, 4);
    let mut all = BTreeSet::new();
    for (m, epoch) in [("a", 4), ("b", 2), ("c", 3)] {
        let r = g.heartbeat(&beat(m, epoch), &three, 2).expect("heartbeat");
        let mine = g
            .member(m)
            .map(|x| x.assignment.clone())
            .unwrap_or_default();
        assert_eq!(r.member_epoch, 4);
        let ps: Vec<i32> = mine.values().flatten().copied().collect();
        assert_eq!(ps.len(), 1, "{m}: {ps:?}");
        all.extend(ps);
    }
    assert_eq!(all, BTreeSet::from([0, 1, 2]));
    let d = g.describe();
    assert_eq!(
        (d.group_epoch, d.assignment_epoch, d.assignor_name),
        (4, 4, "simple")
    );
    assert_eq!(d.state.name(), "Stable");
    assert_eq!(d.members.len(), 3);
    assert_eq!(d.members[0].client_host, "/127.0.0.1");
}

#[derive(Debug, Clone)]
enum Op {
    Join(usize, u8),
    Beat(usize),
    Leave(usize),
    Advance(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..6usize, 1..4u8).prop_map(|(m, s)| Op::Join(m, s)),
        3 => (0..6usize).prop_map(Op::Beat),
        1 => (0..6usize).prop_map(Op::Leave),
        1 => (0..30_000i64).prop_map(Op::Advance),
    ]
}

proptest! {
    /// Random joins, heartbeats, leaves and silences against a model of who is a member: the
    /// errors are the model's, epochs only grow, and the target assignment covers every
    /// subscribed partition with subscribed members only.
    #[test]
    fn membership_matches_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let t = topics(&[("x", 1, 2), ("y", 2, 5)]);
        let names = ["x", "y"];
        let config = ShareGroupConfig { max_size: 4, ..ShareGroupConfig::default() };
        let mut g = ShareGroup::new("g", config);
        // member -> (epoch it knows, subscriptions, session deadline)
        let mut model: BTreeMap<usize, (i32, BTreeSet<String>, i64)> = BTreeMap::new();
        let mut now = 0i64;
        let mut last_epoch = 0;
        for op in &ops {
            let id = |m: usize| format!("member-{m}");
            match op {
                Op::Join(m, mask) => {
                    let subs: Vec<&str> = names.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, n)| *n).collect();
                    let res = g.heartbeat(&join(&id(*m), &subs), &t, now);
                    if !model.contains_key(m) && model.len() >= 4 {
                        prop_assert_eq!(res.unwrap_err(), ShareGroupError::GroupMaxSizeReached);
                    } else {
                        let r = res.map_err(|e| TestCaseError::fail(format!("join: {e}")))?;
                        prop_assert!(r.assignment.is_some());
                        model.insert(*m, (r.member_epoch, subs.iter().map(|s| s.to_string()).collect(), now + 45_000));
                    }
                }
                Op::Beat(m) => {
                    let known = model.get(m).map_or(5, |e| e.0);
                    let res = g.heartbeat(&beat(&id(*m), known), &t, now);
                    match model.get_mut(m) {
                        None => prop_assert_eq!(res.unwrap_err(), ShareGroupError::UnknownMemberId),
                        Some(e) => {
                            let r = res.map_err(|e| TestCaseError::fail(format!("beat: {e}")))?;
                            prop_assert!(r.member_epoch >= e.0);
                            e.0 = r.member_epoch;
                            e.2 = now + 45_000;
                        }
                    }
                }
                Op::Leave(m) => {
                    let res = g.heartbeat(&beat(&id(*m), -1), &t, now);
                    prop_assert_eq!(res.is_ok(), model.remove(m).is_some());
                }
                Op::Advance(ms) => {
                    now += ms;
                    let gone: BTreeSet<String> = g.expire(now).into_iter().collect();
                    let expected: BTreeSet<String> = model.iter().filter(|(_, e)| e.2 <= now).map(|(m, _)| id(*m)).collect();
                    prop_assert_eq!(&gone, &expected);
                    model.retain(|_, e| e.2 > now);
                }
            }
            let d = g.describe();
            prop_assert_eq!(d.group_epoch, d.assignment_epoch);
            prop_assert!(d.group_epoch >= last_epoch);
            last_epoch = d.group_epoch;
            prop_assert_eq!(d.members.len(), model.len());
            for member in &d.members {
                prop_assert!(member.member_epoch <= d.group_epoch);
                for topic_id in member.assignment.keys() {
                    let name = t.iter().find(|(_, tp)| tp.topic_id == *topic_id).map(|(n, _)| n.clone());
                    prop_assert!(name.is_some_and(|n| member.subscribed_topic_names.contains(&n)));
                }
            }
        }
    }
}
