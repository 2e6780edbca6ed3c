//! `process.roles=broker` (Kafka's common layout: 3 controllers + N brokers), with real `sluice`
//! processes on 127.0.0.1: nodes 1-3 are controller-only voters, nodes 4 and 5 broker-only nodes
//! (observers of the quorum: they fetch the metadata log from the quorum leader; node 5 is given
//! `controller.quorum.bootstrap.servers` instead of the voters and learns the leader's endpoint). Node 1 has
//! the shortest election timeout, so it leads first. The brokers register and are the only
//! brokers in Metadata; DescribeQuorum through a broker lists the voters and the two brokers as
//! observers; a topic of RF 2
//! created through one broker lands on both, acks=all produce and fetch work on each broker;
//! kill -9 of the quorum leader: the brokers find the new leader and see the next topic; broker
//! 5 restarted (the controllers snapshot every few KiB, so their tails were trimmed) catches up
//! from a snapshot (FetchSnapshot) and leads and follows again.

mod common;
use common::free_ports;
use common::wire::*;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse};

const CLUSTER_ID: &str = "b7Sh-9_ISia_zwGINzRvyQ";

/// Controllers 1..=3 and brokers 4..=5: ports and data directories.
struct Cluster {
    port: u16,
    controller_port: u16,
    dir: PathBuf,
    children: Vec<Option<Child>>,
}

impl Cluster {
    fn client_port(&self, id: i32) -> u16 {
        self.port + (id - 4) as u16
    }

    fn node_dir(&self, id: i32) -> PathBuf {
        self.dir.join(format!("node-{id}"))
    }

    fn log_file(&self, id: i32, run: u32) -> PathBuf {
        self.dir.join(format!("node-{id}.{run}.log"))
    }

    /// Spawns node `id` (1-3 controller-only with election timeout `election_ms`, 4-5 broker
    /// only); its log (info) goes to `log_file(id, run)`.
    fn spawn(&mut self, id: i32, election_ms: u32, run: u32) {
        let h = "127.0.0.1";
        let voters: Vec<String> = (1..=3)
            .map(|n| format!("{n}@{h}:{}", self.controller_port + n - 1))
            .collect();
        let log = std::fs::File::create(self.log_file(id, run)).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--data-dir")
            .arg(self.node_dir(id))
            .env_clear()
            .env("SLUICE_LOG", "info")
            .env("CLUSTER_ID", CLUSTER_ID)
            .env("KAFKA_NODE_ID", id.to_string())
            .env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
            .env("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300")
            .env("KAFKA_BROKER_SESSION_TIMEOUT_MS", "3000")
            .env(
                "KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS",
                election_ms.to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // Broker 5 knows only the bootstrap servers (KIP-853): its observer learns the leader's
        // endpoint from the controllers' Fetch answers.
        if id == 5 {
            let servers: Vec<String> = (1..=3)
                .map(|n| format!("{h}:{}", self.controller_port + n - 1))
                .collect();
            cmd.env(
                "KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS",
                servers.join(","),
            );
        } else {
            cmd.env("KAFKA_CONTROLLER_QUORUM_VOTERS", voters.join(","));
        }
        if id <= 3 {
            let cport = self.controller_port + (id - 1) as u16;
            cmd.env("KAFKA_PROCESS_ROLES", "controller")
                .env("KAFKA_LISTENERS", format!("CONTROLLER://{h}:{cport}"))
                .env(
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                    "CONTROLLER:PLAINTEXT",
                )
                // A snapshot every few entries: the tails observers fetch are trimmed often.
                .env(
                    "KAFKA_METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS",
                    "300",
                );
        } else {
            let port = self.client_port(id);
            cmd.env("KAFKA_PROCESS_ROLES", "broker")
                .env("KAFKA_LISTENERS", format!("PLAINTEXT://{h}:{port}"))
                .env(
                    "KAFKA_ADVERTISED_LISTENERS",
                    format!("PLAINTEXT://{h}:{port}"),
                )
                .env(
                    "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                )
                .env("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT")
                .env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "2")
                .env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "2");
        }
        let child = cmd.spawn().expect("spawn sluice");
        self.children[(id - 1) as usize] = Some(child);
    }

    /// SIGTERM (or SIGKILL with `kill`) to node `id`; its exit code once it stopped.
    fn signal(&mut self, id: i32, kill: bool) -> Option<i32> {
        let mut child = self.children[(id - 1) as usize].take().expect("running");
        let sig = if kill { libc::SIGKILL } else { libc::SIGTERM };
        let rc = unsafe { libc::kill(child.id() as i32, sig) };
        assert_eq!(rc, 0);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("node {id} did not stop within 30 s of the signal");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self, id: i32, run: u32) -> String {
        std::fs::read_to_string(self.log_file(id, run)).unwrap_or_default()
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

/// The observer ids DescribeQuorum (through broker `port`) lists, sorted.
async fn observers(port: u16) -> Option<Vec<i32>> {
    let mut c = connect(port).await?;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let r: DescribeQuorumResponse = c.call(2, &req, CALL).await.ok()?;
    let p = r.topics.first()?.partitions.first()?;
    let mut ids: Vec<i32> = p.observers.iter().map(|o| o.replica_id.0).collect();
    ids.sort_unstable();
    Some(ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_only_nodes_follow_three_controllers_across_a_leader_kill_and_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cluster = Cluster {
        port: free_ports(2),
        controller_port: free_ports(3),
        dir: tmp.path().to_path_buf(),
        children: vec![None, None, None, None, None],
    };
    // Node 1 campaigns first: its election timeout is a fifth of the others'.
    cluster.spawn(1, 300, 0);
    cluster.spawn(2, 1500, 0);
    cluster.spawn(3, 1500, 0);
    cluster.spawn(4, 1500, 0);
    cluster.spawn(5, 1500, 0);
    let (p4, p5) = (cluster.client_port(4), cluster.client_port(5));

    // 1. The two broker-only nodes registered: they are the brokers in each one's image.
    for port in [p4, p5] {
        wait_for("Metadata to list brokers 4 and 5", 60, async || {
            metadata_brokers(port).await.filter(|b| b == &[4, 5])
        })
        .await;
    }
    // 2. DescribeQuorum forwarded by a broker: the three controllers, node 1 leads.
    let (leader, voters, _) = wait_for("DescribeQuorum through broker 4", 30, async || {
        describe_quorum(p4).await
    })
    .await;
    assert_eq!(voters, vec![1, 2, 3]);
    assert_eq!(leader, 1, "the shortest election timeout campaigns first");
    // ... and the two brokers as its observers, as Kafka lists them.
    wait_for("DescribeQuorum to list observers 4 and 5", 30, async || {
        observers(p4).await.filter(|o| o == &[4, 5])
    })
    .await;

    // 3. A topic of RF 2 created through broker 4 (forwarded to the leader) lands on 4 and 5,
    // and broker 5's image (its own observer) shows it.
    assert_eq!(create_topic(p4, "two", 2, 2).await, (0, None));
    let (code, message) = create_topic(p5, "three", 1, 3).await;
    assert_eq!(code, 38, "INVALID_REPLICATION_FACTOR: {message:?}");
    let parts = wait_for(
        "topic `two` with both replicas in sync on broker 5",
        30,
        async || {
            partitions(p5, "two")
                .await
                .filter(|p| p.len() == 2 && p.iter().all(|(_, _, isr)| *isr == 2))
        },
    )
    .await;
    for (leader, replicas, _) in &parts {
        assert_eq!(replicas, &vec![4, 5], "{parts:?}");
        assert!([4, 5].contains(leader), "{parts:?}");
    }

    // 4. acks=all produce to each partition's leader and fetch back from it.
    for (partition, (leader, _, _)) in parts.iter().enumerate() {
        let port = cluster.client_port(*leader);
        let partition = partition as i32;
        assert_eq!(produce(port, "two", partition, 3).await, (0, 0));
        let (error, hw, bytes) = fetch(port, "two", partition).await;
        assert_eq!((error, hw), (0, 3), "both replicas hold the 3 records");
        assert_eq!(bytes, batch(3).len());
    }

    // 5. kill -9 of the quorum leader: the brokers find the new one (asking the voters) and
    // its metadata reaches both.
    let killed = Instant::now();
    cluster.signal(1, true);
    let (leader, _, _) = wait_for(
        "a new quorum leader, seen through broker 5",
        30,
        async || describe_quorum(p5).await.filter(|(l, _, _)| *l != 1),
    )
    .await;
    assert!([2, 3].contains(&leader), "leader {leader}");
    assert_eq!(create_topic(p5, "after", 2, 2).await, (0, None));
    for port in [p4, p5] {
        wait_for("topic `after` on both brokers", 30, async || {
            partitions(port, "after").await.filter(|p| p.len() == 2)
        })
        .await;
    }
    eprintln!(
        "new leader {leader}; topic `after` on both brokers {:?} after the kill",
        killed.elapsed()
    );

    // 6. Broker 5 stops cleanly (its leaderships move to 4) and restarts: it starts from offset
    // 1, below the controllers' trimmed tails, so it loads a snapshot, then follows the log.
    assert_eq!(cluster.signal(5, false), Some(0), "a clean exit");
    assert!(
        cluster
            .log(5, 0)
            .contains("controlled shutdown of broker 5 completed"),
        "{}",
        cluster.log(5, 0)
    );
    let moved = partitions(p4, "two").await.expect("metadata");
    assert!(moved.iter().all(|(l, _, _)| *l == 4), "{moved:?}");
    // Metadata changes while it is down.
    assert_eq!(create_topic(p4, "while-down", 1, 1).await, (0, None));
    cluster.spawn(5, 1500, 1);
    let parts = wait_for("broker 5 back in sync on every partition", 60, async || {
        let t = partitions(p5, "two").await?;
        let w = partitions(p5, "while-down").await?;
        (t.iter().all(|(_, _, isr)| *isr == 2) && w.len() == 1).then_some(t)
    })
    .await;
    let log = cluster.log(5, 1);
    assert!(
        log.contains("loaded the snapshot at offset"),
        "the restarted broker catches up from a snapshot: {log}"
    );
    assert_eq!(metadata_brokers(p5).await, Some(vec![4, 5]));
    // Broker 4 leads both partitions now; their records are all there.
    for partition in 0..2 {
        let (error, hw, _) = fetch(p4, "two", partition).await;
        assert_eq!((error, hw), (0, 3), "partition {partition}: {parts:?}");
    }
    // The restarted broker can take writes as a follower: acks=all on 4 needs 5 in the ISR.
    assert_eq!(produce(p4, "two", 0, 2).await, (0, 3));

    // 7. A clean stop of everything: brokers first (a quorum is still up), then controllers.
    for id in [4, 5, 2, 3] {
        assert_eq!(
            cluster.signal(id, false),
            Some(0),
            "node {id} stops cleanly"
        );
    }
}
