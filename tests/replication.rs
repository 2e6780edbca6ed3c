//! Replication across three combined nodes in one process (issue 17): a topic with RF 3 and
//! `min.insync.replicas = 2` is copied to every replica byte for byte, acks=all answers only once
//! the in-sync replicas have the batch, and when the leader stops, a follower from the ISR leads
//! with every acknowledged record, takes acks=all writes with the two brokers left, and the
//! stopped broker's replica catches up again after it restarts and rejoins the ISR
//! (AlterPartition). The group coordinator follows `__consumer_offsets` leadership. A restarted
//! follower opens with the high watermark of its `replication-offset-checkpoint`, not its log end.

mod common;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice::replica::fetcher::BrokerConnection;
use sluice::server::RunningBroker;

const TOPIC: &str = "replicated";
const CALL: Duration = Duration::from_secs(15);

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

async fn connect(port: u16) -> BrokerConnection {
    BrokerConnection::connect(
        &format!("127.0.0.1:{port}"),
        "replication-test",
        64 << 20,
        CALL,
    )
    .await
    .expect("connect")
}

/// (leader, ISR) of partition 0 of TOPIC as broker `port` reports it.
async fn leader_and_isr(port: u16) -> Option<(i32, Vec<i32>)> {
    leader_and_isr_of(port, TOPIC).await
}

async fn leader_and_isr_of(port: u16, topic: &str) -> Option<(i32, Vec<i32>)> {
    let mut c = BrokerConnection::connect(&format!("127.0.0.1:{port}"), "t", 1 << 20, CALL)
        .await
        .ok()?;
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic)))
    ]));
    let r: MetadataResponse = c.call(12, &req, CALL).await.ok()?;
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == 0).then(|| (p.leader_id.0, p.isr_nodes.iter().map(|b| b.0).collect()))
}

async fn wait_for<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn batch(first: u32, n: u32) -> Bytes {
    let values: Vec<Vec<u8>> = (first..first + n)
        .map(|i| format!("record-{i}").into_bytes())
        .collect();
    let refs: Vec<sluice::record::KeyValue<'_>> =
        values.iter().map(|v| (None, Some(&v[..]))).collect();
    Bytes::from(sluice::record::build_batch(
        0,
        1_700_000_000_000,
        (-1, -1, -1),
        &refs,
    ))
}

async fn produce(c: &mut BrokerConnection, acks: i16, records: Bytes) -> (i16, i64) {
    produce_to(c, TOPIC, acks, records).await
}

async fn produce_to(
    c: &mut BrokerConnection,
    topic: &str,
    acks: i16,
    records: Bytes,
) -> (i16, i64) {
    let req = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let r: ProduceResponse = c.call(9, &req, CALL).await.expect("produce");
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The coordinator of group "g" as broker `port` names it (retried until one is named).
async fn find_coordinator(port: u16) -> i32 {
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    wait_for("a group coordinator", 30, async || {
        let mut c = connect(port).await;
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_static_str("g"))
            .with_key_type(0);
        let r: FindCoordinatorResponse = c.call(3, &req, CALL).await.ok()?;
        (r.error_code == 0).then_some(r.node_id.0)
    })
    .await
}

async fn commit_offset(c: &mut BrokerConnection, offset: i64) -> i16 {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
    let req = OffsetCommitRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(
            StrBytes::from_static_str("g"),
        ))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let r: OffsetCommitResponse = c.call(2, &req, CALL).await.expect("commit");
    r.topics[0].partitions[0].error_code
}

async fn fetch_offset(c: &mut BrokerConnection) -> Option<i64> {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
    let req = OffsetFetchRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(
            StrBytes::from_static_str("g"),
        ))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(TOPIC))
            .with_partition_indexes(vec![0])]));
    let r: OffsetFetchResponse = c.call(5, &req, CALL).await.ok()?;
    let p = &r.topics.first()?.partitions.first()?;
    eprintln!(
        "DEBUG offset fetch: top {} partition {} offset {}",
        r.error_code, p.error_code, p.committed_offset
    );
    (r.error_code == 0 && p.error_code == 0 && p.committed_offset >= 0)
        .then_some(p.committed_offset)
}

fn node(nodes: &[Option<RunningBroker>], id: i32) -> &RunningBroker {
    nodes[(id - 1) as usize].as_ref().expect("node is running")
}

/// Every byte of the partition's log on node `id` (as a follower would read it).
fn log_bytes(nodes: &[Option<RunningBroker>], id: i32) -> Vec<u8> {
    let p = node(nodes, id)
        .broker
        .replicas
        .partition(TOPIC, 0)
        .expect("hosted");
    let read = p
        .fetch_records_for_replica(0, usize::MAX / 2, true)
        .expect("read");
    read.records.into_bytes().expect("bytes").to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rf3_topic_replicates_acks_all_and_fails_over_without_losing_acknowledged_records() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, configs, mut nodes) = common::three_nodes(
        dir.path(),
        &[
            ("KAFKA_REPLICA_LAG_TIME_MAX_MS", "3000"),
            ("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300"),
            ("KAFKA_BROKER_SESSION_TIMEOUT_MS", "2000"),
            ("KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS", "1000"),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "3"),
            ("KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS", "1"),
            ("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1"),
        ],
    )
    .await;
    let port = |id: i32| dev.port + (id - 1) as u16;

    let mut admin = connect(port(1)).await;
    let topic = |topic: &str, min_isr: &'static str| {
        CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str(min_isr)))])
    };
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![topic(TOPIC, "2"), topic("strict", "3")]);
    let r: CreateTopicsResponse = admin.call(7, &create, CALL).await.expect("create");
    for t in &r.topics {
        assert_eq!(t.error_code, 0, "{:?}", t.error_message);
    }

    let (leader, isr) = wait_for("a leader with a full ISR", 30, async || {
        leader_and_isr(port(1))
            .await
            .filter(|(_, isr)| isr.len() == 3)
    })
    .await;
    let mut isr = isr;
    isr.sort_unstable();
    assert_eq!(isr, vec![1, 2, 3]);

    // Every broker's image has the topic (each applies the committed entry on its own).
    for id in 1..=3 {
        wait_for("every broker to know the topics", 30, async || {
            leader_and_isr(port(id)).await?;
            leader_and_isr_of(port(id), "strict").await
        })
        .await;
    }
    // acks=all: each answer comes once the ISR has the batch.
    let mut c = connect(port(leader)).await;
    for i in 0..20u32 {
        let (code, base) = produce(&mut c, -1, batch(i * 5, 5)).await;
        assert_eq!((code, base), (0, i64::from(i) * 5), "batch {i}");
        // The high watermark covers the batch: both followers had it when the answer came.
        for id in 1..=3 {
            let p = node(&nodes, id)
                .broker
                .replicas
                .partition(TOPIC, 0)
                .unwrap();
            if id != leader {
                assert!(
                    p.offsets().log_end_offset >= i64::from(i + 1) * 5,
                    "follower {id} lacks batch {i} acknowledged with acks=all"
                );
            }
        }
    }
    let leader_log = log_bytes(&nodes, leader);
    assert!(!leader_log.is_empty());
    for id in (1..=3).filter(|&id| id != leader) {
        wait_for("followers to hold the same bytes", 10, async || {
            (log_bytes(&nodes, id) == leader_log).then_some(())
        })
        .await;
        let p = node(&nodes, id)
            .broker
            .replicas
            .partition(TOPIC, 0)
            .unwrap();
        assert_eq!(p.follower_of(), Some(leader));
        let epochs_file = p.dir.join("leader-epoch-checkpoint");
        let text = std::fs::read_to_string(&epochs_file).expect("follower epoch checkpoint");
        assert!(text.starts_with("0\n1\n"), "{text}");
    }

    // Stop the leader cleanly: its controlled shutdown moves the leadership to a follower from
    // the ISR (with all 100 acknowledged records) before the stop returns, well before
    // broker.session.timeout.ms (2000 ms here) would have fenced it.
    let stopped = nodes[(leader - 1) as usize].take().unwrap();
    let stop_started = Instant::now();
    stopped.shutdown().await;
    let stop_took = stop_started.elapsed();
    let survivor = (1..=3).find(|&id| id != leader).unwrap();
    let (new_leader, isr) = leader_and_isr(port(survivor))
        .await
        .expect("the survivor's metadata names a leader");
    println!("broker {leader} stopped cleanly in {stop_took:?}; broker {new_leader} leads");
    assert!(
        new_leader != leader && new_leader > 0 && !isr.contains(&leader),
        "leadership moved before the stop returned: leader {new_leader}, ISR {isr:?}"
    );
    assert!(
        stop_took < Duration::from_millis(2000),
        "the clean stop took {stop_took:?}"
    );
    assert_eq!(isr.len(), 2, "ISR after the leader left: {isr:?}");
    let p = node(&nodes, new_leader)
        .broker
        .replicas
        .partition(TOPIC, 0)
        .unwrap();
    assert_eq!(p.offsets().log_end_offset, 100);
    let mut c = connect(port(new_leader)).await;
    let (code, base) = produce(&mut c, -1, batch(100, 5)).await;
    assert_eq!((code, base), (0, 100), "acks=all with two of three in sync");
    // min.insync.replicas = 3 with two brokers left: acks=all is refused before the append,
    // acks=1 is taken.
    let (strict_leader, _) = wait_for(
        "the strict topic without the stopped broker",
        30,
        async || {
            leader_and_isr_of(port(survivor), "strict")
                .await
                .filter(|(l, isr)| *l > 0 && *l != leader && isr.len() == 2)
        },
    )
    .await;
    let mut s = connect(port(strict_leader)).await;
    assert_eq!(
        produce_to(&mut s, "strict", -1, batch(0, 1)).await,
        (19, -1)
    );
    assert_eq!(produce_to(&mut s, "strict", 1, batch(0, 1)).await, (0, 0));

    // The stopped broker comes back, truncates nothing it should keep, catches up and rejoins.
    let restarted = sluice::server::start(configs[(leader - 1) as usize].clone())
        .await
        .expect("restart");
    nodes[(leader - 1) as usize] = Some(restarted);
    wait_for("the restarted replica to catch up", 30, async || {
        let p = node(&nodes, leader).broker.replicas.partition(TOPIC, 0)?;
        (p.offsets().log_end_offset == 105).then_some(())
    })
    .await;
    let want = log_bytes(&nodes, new_leader);
    assert_eq!(log_bytes(&nodes, leader), want);
    // Caught up, it is proposed for the ISR (AlterPartition) and the controller takes it back.
    wait_for("the restarted replica back in the ISR", 30, async || {
        leader_and_isr(port(survivor))
            .await
            .filter(|(_, isr)| isr.contains(&leader) && isr.len() == 3)
    })
    .await;

    // The group coordinator follows leadership of `__consumer_offsets` (RF 3): an offset committed
    // before its broker stops is served by the broker that leads the partition next.
    // A commit that meets the coordinator before it is ready (its image does not have the new
    // `__consumer_offsets` yet, or the write times out while the ISR settles) answers a retriable
    // coordinator error, and a client looks the coordinator up again and retries, as here.
    let coordinator = wait_for("an offset commit taken", 60, async || {
        let coordinator = find_coordinator(port(new_leader)).await;
        let mut g = connect(port(coordinator)).await;
        match commit_offset(&mut g, 42).await {
            0 => Some(coordinator),
            code @ (14..=16) => {
                println!("commit at broker {coordinator}: retriable error {code}");
                None
            }
            code => panic!("commit at broker {coordinator}: error {code}"),
        }
    })
    .await;
    wait_for("__consumer_offsets on every replica", 30, async || {
        let ends: Vec<i64> = (1..=3)
            .map(|id| {
                node(&nodes, id)
                    .broker
                    .replicas
                    .partition("__consumer_offsets", 0)
                    .map_or(-1, |p| p.offsets().log_end_offset)
            })
            .collect();
        (ends[0] > 0 && ends.iter().all(|&e| e == ends[0])).then_some(())
    })
    .await;
    let gone = nodes[(coordinator - 1) as usize].take().unwrap();
    gone.shutdown().await;
    let other = (1..=3).find(|&id| id != coordinator).unwrap();
    let next = wait_for("a new group coordinator", 30, async || {
        let c = find_coordinator(port(other)).await;
        (c != coordinator).then_some(c)
    })
    .await;
    let committed = wait_for(
        "the committed offset from the new coordinator",
        30,
        async || {
            let mut c = connect(port(next)).await;
            fetch_offset(&mut c).await
        },
    )
    .await;
    assert_eq!(committed, 42);
    sluice::dev_cluster::shutdown(nodes.into_iter().flatten().collect()).await;
}

/// A follower learns the high watermark one fetch late (its next fetch, answered after
/// `replica.fetch.wait.max.ms` when no record comes): stopped cleanly in that window, it holds
/// records above the high watermark it knew. Restarted, it opens with that high watermark from its
/// `replication-offset-checkpoint`, not with its log end, and learns the leader's from the next
/// fetch answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_follower_opens_with_its_checkpointed_high_watermark() {
    use sluice::log::checkpoint::{read_offset_checkpoint, REPLICATION_OFFSET_CHECKPOINT};
    const HW_TOPIC: &str = "hw";
    let dir = tempfile::tempdir().unwrap();
    let (dev, configs, mut nodes) = common::three_nodes(
        dir.path(),
        &[
            ("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300"),
            ("KAFKA_BROKER_SESSION_TIMEOUT_MS", "2000"),
            ("KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS", "1000"),
            ("KAFKA_REPLICA_FETCH_WAIT_MAX_MS", "15000"),
            ("KAFKA_REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS", "200"),
        ],
    )
    .await;
    let port = |id: i32| dev.port + (id - 1) as u16;
    let mut admin = connect(port(1)).await;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(HW_TOPIC))
            .with_num_partitions(1)
            .with_replication_factor(3)]);
    let r: CreateTopicsResponse = admin.call(7, &create, CALL).await.expect("create");
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let (leader, _) = wait_for("a leader with a full ISR", 30, async || {
        leader_and_isr_of(port(1), HW_TOPIC)
            .await
            .filter(|(_, isr)| isr.len() == 3)
    })
    .await;
    for id in 1..=3 {
        wait_for("every broker to know the topic", 30, async || {
            leader_and_isr_of(port(id), HW_TOPIC).await
        })
        .await;
    }
    let partition = |nodes: &[Option<RunningBroker>], id: i32| {
        node(nodes, id)
            .broker
            .replicas
            .partition(HW_TOPIC, 0)
            .expect("hosted")
    };
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    wait_for("the follower to fetch", 30, async || {
        partition(&nodes, follower).follower_of().map(|_| ())
    })
    .await;

    let mut c = connect(port(leader)).await;
    assert_eq!(produce_to(&mut c, HW_TOPIC, -1, batch(0, 10)).await, (0, 0));
    assert_eq!(partition(&nodes, leader).offsets().high_watermark, 10);
    let before = partition(&nodes, follower).offsets();
    assert_eq!(before.log_end_offset, 10);
    assert!(
        before.high_watermark < 10,
        "the follower already knew the new high watermark: {before:?}"
    );

    let stopped = nodes[(follower - 1) as usize].take().unwrap();
    stopped.shutdown().await;
    let data_dir = &configs[(follower - 1) as usize].data_dir;
    let checkpointed = read_offset_checkpoint(&data_dir.join(REPLICATION_OFFSET_CHECKPOINT))
        .expect("the follower's replication-offset-checkpoint");
    assert_eq!(
        checkpointed.get(&(HW_TOPIC.to_string(), 0)),
        Some(&before.high_watermark),
        "{checkpointed:?}"
    );

    let restarted = sluice::server::start(configs[(follower - 1) as usize].clone())
        .await
        .expect("restart");
    nodes[(follower - 1) as usize] = Some(restarted);
    let after = partition(&nodes, follower).offsets();
    assert_eq!(
        (after.high_watermark, after.log_end_offset),
        (before.high_watermark, 10),
        "the restarted follower's high watermark is its checkpoint's, not its log end"
    );

    // The next fetch answer carries the leader's high watermark.
    assert_eq!(produce_to(&mut c, HW_TOPIC, 1, batch(10, 5)).await, (0, 10));
    wait_for("the follower to learn the high watermark", 30, async || {
        (partition(&nodes, follower).offsets().high_watermark >= 10).then_some(())
    })
    .await;
    sluice::dev_cluster::shutdown(nodes.into_iter().flatten().collect()).await;
}
