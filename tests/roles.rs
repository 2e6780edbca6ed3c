//! `process.roles=controller` (issue 16), with real `sluice` processes on 127.0.0.1: node 1 is a
//! controller-only voter, nodes 2 and 3 combined nodes. Node 1 is given the shortest election
//! timeout so that it is the first quorum leader; then every admin request a broker gets is
//! forwarded to it and decided there. It is never a broker: Metadata and DescribeCluster list 2
//! and 3 only, a topic of RF 2 lands on them (RF 3 is refused), its data dir holds no partition.
//! Records produced with acks=all come back from a fetch. DescribeQuorum through a broker lists
//! the three voters. A SIGTERM makes node 1 resign: a combined node leads within the bound and
//! the cluster goes on creating topics; restarted, node 1 is a voter again.

mod common;
use common::free_ports;
use common::wire::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse,
};

const CLUSTER_ID: &str = "q1Sh-9_ISia_zwGINzRvyQ";

/// The three nodes' ports and data directories.
struct Cluster {
    port: u16,
    controller_port: u16,
    dir: PathBuf,
    children: Vec<Option<Child>>,
}

impl Cluster {
    fn client_port(&self, id: i32) -> u16 {
        self.port + (id - 1) as u16
    }

    fn node_dir(&self, id: i32) -> PathBuf {
        self.dir.join(format!("node-{id}"))
    }

    /// Spawns node `id` with election timeout `election_ms`: 1 is controller-only, 2 and 3
    /// combined.
    fn spawn(&mut self, id: i32, election_ms: u32) {
        let h = "127.0.0.1";
        let cport = self.controller_port + (id - 1) as u16;
        let voters: Vec<String> = (1..=3)
            .map(|n| format!("{n}@{h}:{}", self.controller_port + n - 1))
            .collect();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--data-dir")
            .arg(self.node_dir(id))
            .env_clear()
            .env("SLUICE_LOG", "warn")
            .env("CLUSTER_ID", CLUSTER_ID)
            .env("KAFKA_NODE_ID", id.to_string())
            .env("KAFKA_CONTROLLER_QUORUM_VOTERS", voters.join(","))
            .env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            .env("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300")
            .env("KAFKA_BROKER_SESSION_TIMEOUT_MS", "3000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if id == 1 {
            cmd.env("KAFKA_PROCESS_ROLES", "controller")
                .env("KAFKA_LISTENERS", format!("CONTROLLER://{h}:{cport}"))
                .env(
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                    "CONTROLLER:PLAINTEXT",
                );
        } else {
            let port = self.client_port(id);
            cmd.env("KAFKA_PROCESS_ROLES", "broker,controller")
                .env(
                    "KAFKA_LISTENERS",
                    format!("PLAINTEXT://{h}:{port},CONTROLLER://{h}:{cport}"),
                )
                .env(
                    "KAFKA_ADVERTISED_LISTENERS",
                    format!("PLAINTEXT://{h}:{port}"),
                )
                .env(
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                )
                .env("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT");
        }
        cmd.env(
            "KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS",
            election_ms.to_string(),
        );
        let child = cmd.spawn().expect("spawn sluice");
        self.children[(id - 1) as usize] = Some(child);
    }

    /// SIGTERM to node `id`; returns its exit code once it stopped (at most 30 s).
    fn stop(&mut self, id: i32) -> Option<i32> {
        let mut child = self.children[(id - 1) as usize].take().expect("running");
        let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("node {id} did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in self.children.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn topic_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "__cluster_metadata-0")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_only_voter_decides_for_two_brokers_and_resigns_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = Cluster {
        port: free_ports(3),
        controller_port: free_ports(3),
        dir: tmp.path().to_path_buf(),
        children: vec![None, None, None],
    };
    // Node 1 campaigns first: its election timeout is a tenth of the others'.
    cluster.spawn(1, 300);
    cluster.spawn(2, 3000);
    cluster.spawn(3, 3000);
    let (p2, p3) = (cluster.client_port(2), cluster.client_port(3));

    // 1. Only the two combined nodes are brokers, in every broker's image.
    for port in [p2, p3] {
        wait_for("Metadata to list brokers 2 and 3", 60, async || {
            metadata_brokers(port).await.filter(|b| b == &[2, 3])
        })
        .await;
    }
    let mut c = connect(p2).await.expect("connect");
    let dc: DescribeClusterResponse = c
        .call(0, &DescribeClusterRequest::default(), CALL)
        .await
        .expect("describe cluster");
    assert_eq!(dc.error_code, 0);
    let mut ids: Vec<i32> = dc.brokers.iter().map(|b| b.broker_id.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![2, 3], "DescribeCluster lists only the brokers");

    // 2. DescribeQuorum through a broker: three voters, node 1 (the shortest timeout) leads.
    let (leader, voters, nodes) = wait_for("DescribeQuorum through broker 2", 30, async || {
        describe_quorum(p2).await
    })
    .await;
    assert_eq!(voters, vec![1, 2, 3]);
    assert_eq!(nodes, vec![1, 2, 3]);
    assert_eq!(leader, 1, "the controller-only voter campaigns first");

    // 3. Topic admin decided on the controller-only node (forwarded by broker 2): placement
    // knows two brokers only.
    assert_eq!(create_topic(p2, "two", 4, 2).await, (0, None));
    let (code, message) = create_topic(p2, "three", 1, 3).await;
    assert_eq!(code, 38, "INVALID_REPLICATION_FACTOR: {message:?}");
    assert!(
        message
            .as_deref()
            .unwrap_or("")
            .contains("only 2 broker(s) are registered"),
        "the message names the 2 available brokers: {message:?}"
    );
    let parts = wait_for("topic `two` in broker 3's image", 30, async || {
        partitions(p3, "two").await.filter(|p| p.len() == 4)
    })
    .await;
    for (leader, replicas, isr) in &parts {
        assert_eq!(replicas, &vec![2, 3], "{parts:?}");
        assert!([2, 3].contains(leader), "{parts:?}");
        assert_eq!(*isr, 2, "{parts:?}");
    }

    // 4. acks=all produce to partition 0's leader, then fetch the records back.
    let leader0 = parts[0].0;
    let mut c = connect(cluster.client_port(leader0))
        .await
        .expect("connect");
    let records = batch(3);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("two"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records.clone()))])]);
    let r: ProduceResponse = c.call(9, &req, CALL).await.expect("produce");
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    let fetch = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("two"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(0)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let f: FetchResponse = c.call(12, &fetch, CALL).await.expect("fetch");
    let fp = &f.responses[0].partitions[0];
    assert_eq!(fp.error_code, 0);
    assert_eq!(fp.high_watermark, 3, "both replicas have the 3 records");
    let got = fp.records.clone().expect("records");
    assert_eq!(got.len(), records.len());
    // Past the base offset, length and leader epoch the broker set, the batch is as produced.
    assert_eq!(got[16..], records[16..]);

    // 5. The controller-only node's data dir: identity and metadata log, no partition.
    let d1 = cluster.node_dir(1);
    assert!(d1.join("meta.properties").is_file());
    assert!(d1.join("__cluster_metadata-0").is_dir());
    assert_eq!(topic_dirs(&d1), Vec::<String>::new());
    let mut files: Vec<String> = std::fs::read_dir(&d1)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort_unstable();
    // The running node's lock, its identity, the metadata log, the topic configs hosting keeps.
    assert_eq!(
        files,
        [
            ".lock",
            "__cluster_metadata-0",
            "meta.properties",
            "topic-configs.json"
        ]
    );
    assert!(cluster.node_dir(2).join("two-0").is_dir());

    // 6. SIGTERM: node 1 resigns, a combined node leads at once, admin goes on.
    let started = Instant::now();
    assert_eq!(cluster.stop(1), Some(0), "a clean exit");
    let (leader, voters, _) = wait_for("a new quorum leader", 10, async || {
        describe_quorum(p2).await.filter(|(l, _, _)| *l != 1)
    })
    .await;
    let took = started.elapsed();
    assert!([2, 3].contains(&leader), "leader {leader}");
    assert_eq!(voters, vec![1, 2, 3]);
    assert!(
        took < Duration::from_secs(6),
        "leadership moved {took:?} after SIGTERM: the resigning leader hands over, no \
         election timeout (3 s) is waited out"
    );
    assert_eq!(create_topic(p3, "after", 2, 2).await, (0, None));
    wait_for("topic `after` on broker 2", 30, async || {
        partitions(p2, "after").await.filter(|p| p.len() == 2)
    })
    .await;
    assert_eq!(metadata_brokers(p2).await, Some(vec![2, 3]));

    // 7. Restarted (with the others' timeout, as a cluster is configured), node 1 is a voter
    // again and still no broker.
    cluster.spawn(1, 3000);
    wait_for("node 1 to catch up as a voter", 30, async || {
        let mut c = connect(cluster.client_port(leader)).await?;
        let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(name("__cluster_metadata"))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let r: DescribeQuorumResponse = c.call(2, &req, CALL).await.ok()?;
        let p = r.topics.first()?.partitions.first()?;
        let one = p.current_voters.iter().find(|v| v.replica_id.0 == 1)?;
        (p.error_code == 0 && one.log_end_offset >= p.high_watermark).then_some(())
    })
    .await;
    assert_eq!(metadata_brokers(p3).await, Some(vec![2, 3]));
    assert_eq!(topic_dirs(&d1), Vec::<String>::new());
    for id in [1, 2, 3] {
        assert_eq!(cluster.stop(id), Some(0), "node {id} stops cleanly");
    }
}
