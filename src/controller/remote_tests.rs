//! Three combined nodes in one process over real sockets (127.0.0.1-3, or 127.0.0.1 alone where
//! the others cannot be bound): election, every broker registered and unfenced in every node's
//! image, a topic created on the leader seen by all, DescribeQuorum over the wire, a broker that
//! stops heartbeating fenced after `broker.session.timeout.ms`, the leader's crash, the
//! re-election time (printed), heartbeats going on to the new leader, and producer-id blocks
//! from the controller.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::DescribeQuorumRequest;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use super::*;
use crate::config::quorum::QuorumVoter;
use crate::config::{Config, Listener};
use crate::controller::channel::{ChannelConfig, ControllerChannel};
use crate::controller::{CreatableTopic, Outcome};
use crate::metadata::image::MetadataImage;
use crate::metadata::MetadataRecord;

const ELECTION_TIMEOUT_MS: u64 = 1000;
const SESSION_TIMEOUT_MS: u64 = 3000;
const HEARTBEAT_MS: u64 = 500;
const CLUSTER_ID: &str = "rpc-test-cluster-00000A";

/// A broker's image built from what the driver hands it (the hosting side's view).
struct ImageApplier(Mutex<MetadataImage>);

impl MetadataApplier for ImageApplier {
    fn apply(&self, _offset: u64, records: Vec<MetadataRecord>) {
        let mut image = self.0.lock();
        let (next, _) = image.apply(&records);
        *image = next;
    }
    fn load_snapshot(&self, _offset: u64, records: Vec<MetadataRecord>) {
        let (next, _) = MetadataImage::empty(CLUSTER_ID, -1).apply(&records);
        *self.0.lock() = next;
    }
}

impl ImageApplier {
    fn image(&self) -> MetadataImage {
        self.0.lock().clone()
    }
}

struct Node {
    id: i32,
    remote: Option<RemoteNode>,
    image: Arc<ImageApplier>,
}

fn now_ms() -> i64 {
    crate::broker::now_ms()
}

async fn bind(id: i32) -> tokio::net::TcpListener {
    let own = format!("127.0.0.{id}:0");
    match tokio::net::TcpListener::bind(&own).await {
        Ok(l) => l,
        Err(_) => tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1"),
    }
}

fn node_config(dir: &std::path::Path, id: i32, voters: &[QuorumVoter]) -> Config {
    let me = voters.iter().find(|v| v.id == id).expect("voter");
    Config {
        node_id: id,
        data_dir: dir.join(format!("node-{id}")),
        listeners: vec![
            Listener {
                name: "PLAINTEXT".into(),
                bind: format!("{}:0", me.host).parse().expect("addr"),
                advertised: Some((me.host.clone(), 9092)),
                controller: false,
            },
            Listener {
                name: "CONTROLLER".into(),
                bind: format!("{}:{}", me.host, me.port).parse().expect("addr"),
                advertised: None,
                controller: true,
            },
        ],
        quorum_voters: voters.to_vec(),
        quorum_election_timeout_ms: ELECTION_TIMEOUT_MS,
        broker_session_timeout_ms: SESSION_TIMEOUT_MS,
        broker_heartbeat_interval_ms: HEARTBEAT_MS,
        broker_rack: Some(format!("rack-{id}")),
        ..Config::default()
    }
}

/// Polls `check` every 10 ms until it holds; returns how long that took.
async fn eventually(what: &str, limit: Duration, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

fn leader_of(nodes: &[&Node]) -> Option<i32> {
    let views: Vec<Option<i32>> = nodes
        .iter()
        .map(|n| {
            n.remote
                .as_ref()
                .and_then(|r| r.controller.handle.leader().borrow().leader_id)
        })
        .collect();
    let first = views[0]?;
    views.iter().all(|v| *v == Some(first)).then_some(first)
}

fn fenced_in(image: &MetadataImage, broker: i32) -> Option<bool> {
    image.broker(broker).map(|b| b.fenced)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_combined_nodes_register_fail_over_and_fence_a_silent_broker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut listeners = Vec::new();
    let mut voters = Vec::new();
    for id in 1..=3 {
        let l = bind(id).await;
        let addr = l.local_addr().expect("addr");
        voters.push(QuorumVoter {
            id,
            host: addr.ip().to_string(),
            port: addr.port(),
        });
        listeners.push(l);
    }
    let mut nodes = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let id = i as i32 + 1;
        let config = node_config(dir.path(), id, &voters);
        let image = Arc::new(ImageApplier(Mutex::new(MetadataImage::empty(
            CLUSTER_ID, -1,
        ))));
        let remote = start(
            &config,
            image.clone(),
            listener,
            CLUSTER_ID.into(),
            Arc::new(now_ms),
            None,
        )
        .expect("start");
        nodes.push(Node {
            id,
            remote: Some(remote),
            image,
        });
    }

    // 1. A leader is elected; every broker registers and is unfenced in every image.
    let all: Vec<&Node> = nodes.iter().collect();
    let took = eventually("an agreed leader", Duration::from_secs(10), || {
        leader_of(&all).is_some()
    })
    .await;
    let leader = leader_of(&all).expect("leader");
    println!("first election: leader {leader} after {took:?}");
    for n in &nodes {
        let epoch = n
            .remote
            .as_ref()
            .expect("running")
            .wait_unfenced(Duration::from_secs(10))
            .await
            .expect("unfenced");
        assert!(epoch > 0, "broker {} epoch {epoch}", n.id);
    }
    eventually(
        "all unfenced in every image",
        Duration::from_secs(5),
        || {
            nodes.iter().all(|n| {
                let image = n.image.image();
                (1..=3).all(|b| fenced_in(&image, b) == Some(false))
            })
        },
    )
    .await;
    let image = nodes[2].image.image();
    let b1 = image.broker(1).expect("broker 1");
    assert_eq!(b1.rack.as_deref(), Some("rack-1"));
    assert_eq!(b1.endpoints.len(), 1, "client listeners only: {b1:?}");
    assert_eq!(b1.endpoints[0].name, "PLAINTEXT");
    assert_eq!(b1.endpoints[0].port, 9092);

    // Producer ids: each broker gets its own blocks of 1000 from the controller.
    let mut allocators = Vec::new();
    for n in nodes.iter_mut().take(2) {
        allocators.push(n.remote.as_mut().expect("running").producer_ids());
    }
    let mut firsts = Vec::new();
    for a in &allocators {
        let start = Instant::now();
        let id = loop {
            match a.next_id() {
                Ok(id) => break id,
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                    assert!(start.elapsed() < Duration::from_secs(5), "no block");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        let more: Vec<i64> = (0..1100)
            .map(|_| a.next_id())
            .filter_map(Result::ok)
            .collect();
        assert!(
            more.len() >= 899,
            "the first block is at hand: {}",
            more.len()
        );
        assert_eq!(more[..899], (id + 1..id + 900).collect::<Vec<_>>()[..]);
        firsts.push(id);
    }
    assert_eq!(firsts[0] % 1000, 0);
    assert_eq!(firsts[1] % 1000, 0);
    assert_ne!(firsts[0], firsts[1], "disjoint blocks");

    // 2. CreateTopics on the leader's handle appears in all three images, with one id.
    let li = (leader - 1) as usize;
    let handle = nodes[li]
        .remote
        .as_ref()
        .expect("leader")
        .controller
        .handle
        .clone();
    let topic = CreatableTopic {
        name: "t".into(),
        num_partitions: 3,
        replication_factor: 3,
        assignments: vec![],
        configs: vec![],
    };
    let created = handle
        .run(move |c, ctx| c.create_topics(&[topic], ctx.seed))
        .await
        .expect("committed");
    let topic_id = created[0].1.as_ref().expect("created").topic_id;
    eventually("topic t in every image", Duration::from_secs(5), || {
        nodes.iter().all(|n| {
            n.image
                .image()
                .topic("t")
                .is_some_and(|t| t.id == topic_id && t.partitions.len() == 3)
        })
    })
    .await;

    // 3. DescribeQuorum over the wire to the leader.
    let mut channel = ControllerChannel::new(
        ChannelConfig {
            voters: vec![(leader, voters[li].address())].into(),
            request_timeout: Duration::from_secs(2),
            client_id: "test".into(),
        },
        None,
    );
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(StrBytes::from_static_str("__cluster_metadata").into())
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let dq = channel
        .send(
            &request,
            2,
            tokio::time::Instant::now() + Duration::from_secs(5),
        )
        .await
        .expect("DescribeQuorum");
    let p = &dq.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.leader_id.0, leader);
    assert!(p.leader_epoch >= 1);
    let mut ids: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3]);
    assert!(p.high_watermark > 1, "hw {}", p.high_watermark);
    for v in &p.current_voters {
        assert!(v.log_end_offset >= 1, "voter {:?}", v);
        assert!(v.last_fetch_timestamp > 0, "voter {:?}", v);
    }
    assert_eq!(dq.nodes.len(), 3);

    // 4. A broker that stops heartbeating is fenced after the session timeout, in every image.
    let silent = if leader == 1 { 2 } else { 1 };
    let other = 6 - leader - silent;
    nodes[(silent - 1) as usize]
        .remote
        .as_ref()
        .expect("running")
        .stop_heartbeats();
    let fenced_after = eventually(
        "silent broker fenced everywhere",
        Duration::from_secs(10),
        || {
            nodes
                .iter()
                .all(|n| fenced_in(&n.image.image(), silent) == Some(true))
        },
    )
    .await;
    println!("broker {silent} fenced {fenced_after:?} after its last heartbeat stopped");
    assert!(
        fenced_after >= Duration::from_millis(SESSION_TIMEOUT_MS - HEARTBEAT_MS),
        "fenced too early: {fenced_after:?}"
    );
    assert!(
        fenced_after <= Duration::from_millis(SESSION_TIMEOUT_MS + 2000),
        "fenced too late: {fenced_after:?}"
    );
    assert_eq!(fenced_in(&nodes[0].image.image(), other), Some(false));

    // 5. The leader crashes; another is elected; heartbeats go on to it.
    nodes[li].remote.take().expect("leader").abort();
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    let took = eventually(
        "a new leader",
        Duration::from_millis(2 * ELECTION_TIMEOUT_MS + 6000),
        || leader_of(&rest).is_some_and(|l| l != leader),
    )
    .await;
    let new_leader = leader_of(&rest).expect("new leader");
    println!("re-election after the leader's crash: leader {new_leader} after {took:?}");
    // Randomized timeouts are [1, 2) election timeouts, plus pre-vote and vote rounds; the margin
    // covers a machine whose cores are shared with other test processes (3.2 s seen there).
    assert!(
        took <= Duration::from_millis(2 * ELECTION_TIMEOUT_MS + 2000),
        "re-election took {took:?}"
    );
    // The new controller starts every session at its activation, so the crashed broker is fenced
    // one session timeout later; the broker that still heartbeats stays unfenced past that.
    eventually("crashed broker fenced", Duration::from_secs(10), || {
        rest.iter()
            .all(|n| fenced_in(&n.image.image(), leader) == Some(true))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS * 2)).await;
    for n in &rest {
        assert_eq!(
            fenced_in(&n.image.image(), other),
            Some(false),
            "broker {other} in node {}'s image",
            n.id
        );
    }
    let still = nodes[(other - 1) as usize]
        .remote
        .as_ref()
        .expect("running");
    assert!(matches!(
        *still.lifecycle().borrow(),
        Lifecycle::Unfenced { .. }
    ));
    // The new leader answers commands.
    let handle = nodes[(new_leader - 1) as usize]
        .remote
        .as_ref()
        .expect("new leader")
        .controller
        .handle
        .clone();
    handle
        .run(|_, _| Outcome {
            records: vec![],
            answer: (),
        })
        .await
        .expect("the new leader decides");
    drop(handle); // a live handle keeps the driver running
    for n in nodes.iter_mut() {
        if let Some(r) = n.remote.take() {
            r.shutdown().await;
        }
    }
}

/// Starts three combined nodes on 127.0.0.1-3 and waits until every broker is unfenced.
async fn three_unfenced(dir: &std::path::Path) -> Vec<Node> {
    let mut listeners = Vec::new();
    let mut voters = Vec::new();
    for id in 1..=3 {
        let l = bind(id).await;
        let addr = l.local_addr().expect("addr");
        voters.push(QuorumVoter {
            id,
            host: addr.ip().to_string(),
            port: addr.port(),
        });
        listeners.push(l);
    }
    let mut nodes = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let id = i as i32 + 1;
        let image = Arc::new(ImageApplier(Mutex::new(MetadataImage::empty(
            CLUSTER_ID, -1,
        ))));
        let remote = start(
            &node_config(dir, id, &voters),
            image.clone(),
            listener,
            CLUSTER_ID.into(),
            Arc::new(now_ms),
            None,
        )
        .expect("start");
        nodes.push(Node {
            id,
            remote: Some(remote),
            image,
        });
    }
    for n in &nodes {
        n.remote
            .as_ref()
            .expect("running")
            .wait_unfenced(Duration::from_secs(15))
            .await
            .expect("unfenced");
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_from_a_partition_leader_reaches_the_active_controller() {
    use crate::replica::alter_partition::AlterPartitionClient;
    use crate::replica::replication::leader::{
        AlterPartitionError, AlterPartitionProposal, AlterPartitionResponse,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = three_unfenced(dir.path()).await;
    let all: Vec<&Node> = nodes.iter().collect();
    eventually("an agreed leader", Duration::from_secs(10), || {
        leader_of(&all).is_some()
    })
    .await;
    let controller = leader_of(&all).expect("leader");
    // The partition is led by a broker that is not the active controller: its proposals go
    // over the wire.
    let leader = (1..=3).find(|b| *b != controller).expect("another broker");
    let replicas: Vec<i32> = std::iter::once(leader)
        .chain((1..=3).filter(|b| *b != leader))
        .collect();
    let handle = nodes[(controller - 1) as usize]
        .remote
        .as_ref()
        .expect("running")
        .controller
        .handle
        .clone();
    let topic = CreatableTopic {
        name: "isr".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: vec![(0, replicas.clone())],
        configs: vec![],
    };
    let created = handle
        .run(move |c, ctx| c.create_topics(&[topic], ctx.seed))
        .await
        .expect("committed");
    let topic_id = created[0].1.as_ref().expect("created").topic_id;
    let partition_in = |n: &Node| n.image.image().partition("isr", 0).cloned();
    eventually("the topic everywhere", Duration::from_secs(5), || {
        nodes.iter().all(|n| partition_in(n).is_some())
    })
    .await;
    let link = nodes[(leader - 1) as usize]
        .remote
        .as_ref()
        .expect("running")
        .alter_partition_link();
    let (client, task) = AlterPartitionClient::start(link);
    let ask = |partition_epoch: i32, isr: Vec<i32>| {
        client.submit(
            topic_id,
            "isr",
            0,
            AlterPartitionProposal {
                leader_id: leader,
                leader_epoch: 0,
                partition_epoch,
                new_isr: isr,
            },
        )
    };
    let answer = |rx: tokio::sync::oneshot::Receiver<AlterPartitionResponse>| async move {
        tokio::time::timeout(Duration::from_secs(15), rx)
            .await
            .expect("in time")
            .expect("answered")
    };
    let follower = replicas[2];
    let shrunk: Vec<i32> = replicas[..2].to_vec();
    let r = answer(ask(0, shrunk.clone())).await;
    assert_eq!(
        r,
        AlterPartitionResponse::Committed {
            leader_epoch: 0,
            partition_epoch: 1,
            isr: shrunk.clone()
        }
    );
    eventually("the shrink in every image", Duration::from_secs(5), || {
        nodes
            .iter()
            .all(|n| partition_in(n).is_some_and(|p| p.isr == shrunk && p.partition_epoch == 1))
    })
    .await;
    // Expand back with the follower.
    let mut expanded = shrunk.clone();
    expanded.push(follower);
    let r = answer(ask(1, expanded.clone())).await;
    assert_eq!(
        r,
        AlterPartitionResponse::Committed {
            leader_epoch: 0,
            partition_epoch: 2,
            isr: expanded.clone()
        }
    );
    eventually("the expand in every image", Duration::from_secs(5), || {
        nodes
            .iter()
            .all(|n| partition_in(n).is_some_and(|p| p.isr == expanded && p.partition_epoch == 2))
    })
    .await;
    // A stale partition epoch.
    let r = answer(ask(1, shrunk.clone())).await;
    assert_eq!(
        r,
        AlterPartitionResponse::Error(AlterPartitionError::InvalidUpdateVersion)
    );
    drop(client);
    let _ = task.await;
    drop(handle); // a live handle keeps the driver running
    for n in nodes {
        if let Some(r) = n.remote {
            r.shutdown().await;
        }
    }
}

/// Kafka's controlled shutdown over the wire: a broker leading partitions asks to shut down, the
/// controller moves its leaderships (an RF 1 partition goes leaderless) and lets it go well
/// before `broker.session.timeout.ms`; then, with the quorum's majority gone (their connections
/// closed), a stop gives up at once instead of waiting out an election it cannot win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_moves_leaderships_then_a_lost_quorum_does_not_hold_the_stop() {
    use crate::controller::lifecycle::{GiveUp, ShutdownBound};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nodes = three_unfenced(dir.path()).await;
    let all: Vec<&Node> = nodes.iter().collect();
    eventually("an agreed leader", Duration::from_secs(10), || {
        leader_of(&all).is_some()
    })
    .await;
    let controller = leader_of(&all).expect("leader");
    let stopper = (1..=3).find(|b| *b != controller).expect("another broker");
    let last = 6 - controller - stopper;
    let handle = nodes[(controller - 1) as usize]
        .remote
        .as_ref()
        .expect("running")
        .controller
        .handle
        .clone();
    let topics = vec![
        CreatableTopic {
            name: "cs".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![
                (0, vec![stopper, controller, last]),
                (1, vec![stopper, last, controller]),
            ],
            configs: vec![],
        },
        CreatableTopic {
            name: "solo".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![stopper])],
            configs: vec![],
        },
    ];
    handle
        .run(move |c, ctx| c.create_topics(&topics, ctx.seed))
        .await
        .expect("committed");
    drop(handle);
    let leader_in = |n: &Node, topic: &str, p: i32| {
        n.image
            .image()
            .partition(topic, p)
            .map(|p| (p.leader, p.isr.clone()))
    };
    eventually("the topics everywhere", Duration::from_secs(5), || {
        nodes.iter().all(|n| {
            leader_in(n, "cs", 0).is_some_and(|(l, _)| l == stopper)
                && leader_in(n, "cs", 1).is_some_and(|(l, _)| l == stopper)
                && leader_in(n, "solo", 0).is_some_and(|(l, _)| l == stopper)
        })
    })
    .await;

    let bound = ShutdownBound {
        limit: Duration::from_millis(SESSION_TIMEOUT_MS),
        leaderless_limit: Some(Duration::from_millis(ELECTION_TIMEOUT_MS)),
    };
    let took = nodes[(stopper - 1) as usize]
        .remote
        .as_ref()
        .expect("running")
        .controlled_shutdown(bound)
        .await
        .expect("the controller lets the broker go");
    println!("controlled shutdown of broker {stopper}: approved after {took:?}");
    // One heartbeat enters controlled shutdown, the next (50 ms later, then every heartbeat
    // interval) is approved once the other brokers reported the move.
    assert!(
        took <= Duration::from_millis(3 * HEARTBEAT_MS),
        "controlled shutdown took {took:?}"
    );
    for n in &nodes {
        for p in 0..2 {
            let (leader, isr) = leader_in(n, "cs", p).expect("cs");
            assert!(
                leader != stopper && leader > 0 && !isr.contains(&stopper),
                "node {}: cs-{p} leader {leader} isr {isr:?}",
                n.id
            );
        }
    }
    // Every image holds the move already: the approval waited for the other brokers.
    let solo = leader_in(&nodes[(last - 1) as usize], "solo", 0).expect("solo");
    assert_eq!(solo.0, -1, "the RF 1 partition goes leaderless: {solo:?}");
    eventually("the stopped broker fenced", Duration::from_secs(5), || {
        nodes.iter().all(|n| {
            n.image
                .image()
                .broker(stopper)
                .is_some_and(|b| b.fenced && b.in_controlled_shutdown)
        })
    })
    .await;

    // The controller and the stopped node go: the last voter is alone, without a leader.
    nodes[(controller - 1) as usize]
        .remote
        .take()
        .expect("controller")
        .abort();
    nodes[(stopper - 1) as usize]
        .remote
        .take()
        .expect("stopper")
        .abort();
    let started = Instant::now();
    let lone = nodes[(last - 1) as usize].remote.take().expect("last");
    let long = ShutdownBound {
        limit: Duration::from_millis(4 * SESSION_TIMEOUT_MS),
        leaderless_limit: Some(Duration::from_millis(ELECTION_TIMEOUT_MS)),
    };
    let gave_up = lone.controlled_shutdown(long).await;
    let waited = started.elapsed();
    println!("controlled shutdown without a quorum: {gave_up:?} after {waited:?}");
    // Both other voters' connections closed: the last one knows the majority gone and does not
    // wait for an election it cannot win (before: one to three election timeouts).
    assert!(matches!(gave_up, Err(GiveUp::QuorumLost)), "{gave_up:?}");
    assert!(
        waited < Duration::from_millis(ELECTION_TIMEOUT_MS),
        "gave up after {waited:?}"
    );
    lone.shutdown().await;
}

#[test]
fn a_heartbeat_asks_to_shut_down_only_while_a_controlled_shutdown_is_pending() {
    let r = heartbeat_request(3.into(), 42, 17, false);
    assert_eq!(
        (
            r.broker_id.0,
            r.broker_epoch,
            r.current_metadata_offset,
            r.want_fence,
            r.want_shut_down
        ),
        (3, 42, 17, false, false)
    );
    assert!(heartbeat_request(3.into(), 42, 17, true).want_shut_down);
    assert_eq!(
        heartbeat_request(3.into(), 42, u64::MAX, true).current_metadata_offset,
        i64::MAX
    );
}
