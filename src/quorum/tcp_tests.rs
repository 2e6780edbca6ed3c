//! Real-TCP test of three `Quorum` members on 127.0.0.1: election, 100 proposals committed on
//! all three in order, failover after the leader's task is aborted (the re-election time is
//! measured and printed), proposals on the new leader, and the old member restarting from its
//! directory and catching up.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;

const ELECTION_TIMEOUT_MS: u64 = 1000;

struct Member {
    quorum: Option<Quorum>,
    seen: Vec<Bytes>,
}

fn config(dir: &std::path::Path, id: NodeId, voters: &[(NodeId, String)]) -> QuorumConfig {
    let mut node = NodeConfig::new(id, voters.iter().map(|(v, _)| *v).collect());
    node.election_timeout_ms = ELECTION_TIMEOUT_MS;
    QuorumConfig {
        node,
        dir: dir.join(format!("node-{id}")),
        voters: voters.to_vec(),
    }
}

/// Waits until every listed member agrees on one leader other than `not`; returns it.
async fn agreed_leader(members: &[&QuorumHandle], not: Option<NodeId>, limit: Duration) -> NodeId {
    let start = Instant::now();
    loop {
        let views: Vec<LeaderAndEpoch> = members.iter().map(|h| *h.leader().borrow()).collect();
        if let Some(l) = views[0].leader_id {
            if Some(l) != not && views.iter().all(|v| *v == views[0]) {
                return l;
            }
        }
        assert!(
            start.elapsed() < limit,
            "no agreed leader after {limit:?}: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Receives committed entries until `want` payloads were seen (snapshots not used here).
async fn collect(rx: &mut mpsc::UnboundedReceiver<Committed>, seen: &mut Vec<Bytes>, want: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.len() < want {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Committed::Entry { data, .. })) => seen.push(data),
            Ok(Some(Committed::Snapshot { .. })) => panic!("unexpected snapshot"),
            Ok(None) => panic!("committed stream closed"),
            Err(_) => panic!("only {} of {want} entries committed", seen.len()),
        }
    }
}

fn payload(i: usize) -> Bytes {
    Bytes::from(format!("record-{i:04}"))
}

async fn propose_on(handle: &QuorumHandle, from: usize, to: usize) {
    let mut last = 0;
    for i in from..to {
        let index = handle.propose(payload(i)).await.expect("committed");
        assert!(index > last, "indexes increase: {index} after {last}");
        last = index;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_over_tcp_elect_commit_fail_over_and_the_old_leader_catches_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut listeners = Vec::new();
    let mut voters = Vec::new();
    for id in 1..=3 {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        voters.push((id, l.local_addr().expect("addr").to_string()));
        listeners.push(l);
    }
    let mut members: Vec<Member> = Vec::new();
    for (l, (id, _)) in listeners.into_iter().zip(&voters) {
        let q = Quorum::start(
            config(dir.path(), *id, &voters),
            Some(l),
            Box::new(NoSnapshots),
        )
        .expect("start");
        members.push(Member {
            quorum: Some(q),
            seen: Vec::new(),
        });
    }
    let handles: Vec<QuorumHandle> = members
        .iter()
        .map(|m| m.quorum.as_ref().expect("running").handle.clone())
        .collect();
    let t0 = Instant::now();
    let leader = agreed_leader(
        &handles.iter().collect::<Vec<_>>(),
        None,
        Duration::from_secs(10),
    )
    .await;
    println!(
        "first election: node {leader} after {} ms",
        t0.elapsed().as_millis()
    );

    // A follower refuses proposals and names the leader (Kafka's NOT_CONTROLLER).
    let follower = &handles[(leader % 3) as usize];
    assert_eq!(
        follower.propose(payload(9999)).await,
        Err(ProposalError::Rejected(ProposeError::NotLeader {
            leader_id: Some(leader)
        }))
    );

    let t = Instant::now();
    propose_on(&handles[(leader - 1) as usize], 0, 100).await;
    println!("100 proposals committed in {} ms", t.elapsed().as_millis());
    let expected: Vec<Bytes> = (0..100).map(payload).collect();
    for m in members.iter_mut() {
        let q = m.quorum.as_mut().expect("running");
        collect(&mut q.committed, &mut m.seen, 100).await;
        assert_eq!(m.seen, expected);
    }
    // Every member applied the 100 entries; the leader learns each follower's log end from its
    // next append answer, so its view may trail by a heartbeat: poll (bounded) until it agrees.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = handles[(leader - 1) as usize]
            .status()
            .await
            .expect("status");
        let caught_up = status
            .voters
            .iter()
            .all(|v| v.log_end_offset == Some(status.high_watermark) && v.fetching);
        if caught_up || Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.is_leader);
    assert!(status.high_watermark > 100);
    for v in &status.voters {
        assert_eq!(
            v.log_end_offset,
            Some(status.high_watermark),
            "voter {}",
            v.id
        );
        assert!(v.fetching, "voter {}", v.id);
    }

    // Drop the leader: abort its task (its transport and listener go with it).
    let old = members[(leader - 1) as usize]
        .quorum
        .take()
        .expect("running");
    old.task.abort();
    let _ = old.task.await;
    let dropped_at = Instant::now();
    let survivors: Vec<&QuorumHandle> = handles
        .iter()
        .zip(1..)
        .filter(|(_, id)| *id != leader)
        .map(|(h, _)| h)
        .collect();
    // Followers wait a randomized [1, 2) election timeouts; a pre-vote can be refused once by a
    // voter still inside its leader lease (ticks are not aligned across processes).
    let limit = Duration::from_millis(2 * ELECTION_TIMEOUT_MS + 1500);
    let new_leader = agreed_leader(&survivors, Some(leader), limit + Duration::from_secs(5)).await;
    let took = dropped_at.elapsed();
    println!(
        "re-election: node {new_leader} after {} ms (election timeout {ELECTION_TIMEOUT_MS} ms, \
         randomized up to {} ms)",
        took.as_millis(),
        2 * ELECTION_TIMEOUT_MS
    );
    assert!(took < limit, "re-election took {took:?}, limit {limit:?}");

    propose_on(&handles[(new_leader - 1) as usize], 100, 110).await;
    let expected: Vec<Bytes> = (0..110).map(payload).collect();
    for (i, m) in members.iter_mut().enumerate() {
        if let Some(q) = m.quorum.as_mut() {
            collect(&mut q.committed, &mut m.seen, 110).await;
            assert_eq!(m.seen, expected, "node {}", i + 1);
        }
    }

    // The old leader restarts from its directory on its address and catches up.
    let addr = &voters[(leader - 1) as usize].1;
    let listener = TcpListener::bind(addr).await.expect("rebind");
    let mut q = Quorum::start(
        config(dir.path(), leader, &voters),
        Some(listener),
        Box::new(NoSnapshots),
    )
    .expect("restart");
    let mut seen = Vec::new();
    collect(&mut q.committed, &mut seen, 110).await;
    assert_eq!(
        seen, expected,
        "restarted node replays and catches up in order"
    );
    let view = *q.handle.leader().borrow();
    assert_eq!(view.leader_id, Some(new_leader));
}

#[tokio::test]
async fn a_lone_voter_without_a_listener_leads_at_once_and_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let voters = vec![(1, "127.0.0.1:1".to_string())];
    let mut q =
        Quorum::start(config(dir.path(), 1, &voters), None, Box::new(NoSnapshots)).expect("start");
    let t = Instant::now();
    assert_eq!(
        q.handle.propose(payload(1)).await,
        Ok(2),
        "index 1 is the leader's no-op"
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "no election wait: {:?}",
        t.elapsed()
    );
    let mut seen = Vec::new();
    collect(&mut q.committed, &mut seen, 1).await;
    assert_eq!(seen, vec![payload(1)]);
    assert_eq!(q.handle.leader().borrow().leader_id, Some(1));
}

/// Three members on 127.0.0.1 with an agreed leader that committed 10 entries and heard both
/// followers since (one tick is 100 ms): the members, their handles, the leader.
async fn three_with_a_leader(
    dir: &std::path::Path,
) -> (Vec<Option<Quorum>>, Vec<QuorumHandle>, NodeId) {
    let mut listeners = Vec::new();
    let mut voters = Vec::new();
    for id in 1..=3 {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        voters.push((id, l.local_addr().expect("addr").to_string()));
        listeners.push(l);
    }
    let mut members: Vec<Option<Quorum>> = Vec::new();
    for (l, (id, _)) in listeners.into_iter().zip(&voters) {
        let q = Quorum::start(config(dir, *id, &voters), Some(l), Box::new(NoSnapshots))
            .expect("start");
        members.push(Some(q));
    }
    let handles: Vec<QuorumHandle> = members.iter().flatten().map(|q| q.handle.clone()).collect();
    let leader = agreed_leader(
        &handles.iter().collect::<Vec<_>>(),
        None,
        Duration::from_secs(10),
    )
    .await;
    propose_on(&handles[(leader - 1) as usize], 0, 10).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    (members, handles, leader)
}

async fn stop(member: &mut Option<Quorum>) {
    let q = member.take().expect("running");
    q.task.abort();
    let _ = q.task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resigning_leader_hands_over_sooner_than_an_election_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, handles, leader) = three_with_a_leader(dir.path()).await;

    // A follower has nothing to hand over.
    let follower = &handles[(leader % 3) as usize];
    assert_eq!(
        follower.resign(Duration::from_secs(1)).await,
        Resignation::NotLeader
    );

    let limit = Duration::from_millis(ELECTION_TIMEOUT_MS);
    let t = Instant::now();
    let outcome = handles[(leader - 1) as usize].resign(limit).await;
    let took = t.elapsed();
    let Resignation::Handed {
        to, leader: new, ..
    } = outcome
    else {
        panic!("no hand-over: {outcome:?}");
    };
    assert_eq!(new, to);
    assert_ne!(new, leader);
    // Well under one election timeout (a re-election waits [1, 2) of them).
    assert!(took < limit / 2, "hand-over took {took:?}");
    println!(
        "resignation: node {leader} -> node {new} in {} ms",
        took.as_millis()
    );

    // The old leader stops; the others agree on the new leader and commit without it.
    stop(&mut members[(leader - 1) as usize]).await;
    let survivors: Vec<&QuorumHandle> = handles
        .iter()
        .zip(1..)
        .filter(|(_, id)| *id != leader)
        .map(|(h, _)| h)
        .collect();
    let agreed = agreed_leader(&survivors, Some(leader), Duration::from_millis(200)).await;
    assert_eq!(agreed, new);
    assert!(t.elapsed() < limit, "survivors led after {:?}", t.elapsed());
    propose_on(&handles[(new - 1) as usize], 10, 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_followers_stopped_does_not_hand_over_to_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, handles, leader) = three_with_a_leader(dir.path()).await;
    // Both followers stop, just before the leader (as `dev_cluster::shutdown` stops nodes one
    // by one): their connections close, which the leader's transport reports at once, though
    // they answered its last heartbeat.
    for id in (1..=3).filter(|&id| id != leader) {
        stop(&mut members[(id - 1) as usize]).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t = Instant::now();
    let outcome = handles[(leader - 1) as usize]
        .resign(Duration::from_millis(ELECTION_TIMEOUT_MS))
        .await;
    assert_eq!(outcome, Resignation::NoTransferee);
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "took {:?}",
        t.elapsed()
    );
}
