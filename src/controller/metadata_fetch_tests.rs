//! Fetch and FetchSnapshot of `__cluster_metadata` on a lone voter, decoded with the
//! observer's own rules (`controller::observer`).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_snapshot_request::{
    PartitionSnapshot, SnapshotId, TopicSnapshot,
};
use kafka_protocol::messages::TopicName;

use super::*;
use crate::controller::driver::{self, DriverConfig, MetadataApplier, RunningController};
use crate::controller::observer::{on_fetch_answer, snapshot_records, Step};
use crate::controller::rpc::VoterEndpoint;
use crate::controller::{bootstrap_records, ControllerSettings, Outcome, BOOTSTRAP_FEATURES};
use crate::quorum::{NodeConfig, QuorumConfig};

const CLUSTER: &str = "fetch-unit-cluster-00AA";

struct Nothing;
impl MetadataApplier for Nothing {
    fn apply(&self, _: u64, _: Vec<MetadataRecord>) {}
    fn load_snapshot(&self, _: u64, _: Vec<MetadataRecord>) {}
}

async fn lone_voter(dir: &std::path::Path) -> (RunningController, ControllerApis) {
    let config = DriverConfig {
        settings: ControllerSettings::default(),
        bootstrap: bootstrap_records(BOOTSTRAP_FEATURES),
        tick_interval: Duration::from_millis(50),
        seed: 3,
        clock: Arc::new(crate::broker::now_ms),
    };
    let quorum = QuorumConfig {
        node: NodeConfig::new(1, vec![1]),
        dir: dir.to_path_buf(),
        voters: vec![(1, "127.0.0.1:1".into())],
    };
    let running = driver::start(config, quorum, None, Arc::new(Nothing)).expect("start");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while running
        .handle
        .run(|_, _| Outcome {
            records: vec![],
            answer: (),
        })
        .await
        .is_err()
    {
        assert!(tokio::time::Instant::now() < deadline, "never led");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let apis = ControllerApis {
        handle: running.handle.clone(),
        cluster_id: CLUSTER.into(),
        voters: vec![VoterEndpoint {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9093,
        }],
        listener_name: "CONTROLLER".into(),
        wall_clock: Arc::new(crate::broker::now_ms),
        admin: None,
    };
    (running, apis)
}

fn request(offset: i64, max_wait_ms: i32, cluster: &str) -> FetchRequest {
    FetchRequest::default()
        .with_cluster_id(Some(StrBytes::from_string(cluster.into())))
        .with_replica_state(ReplicaState::default().with_replica_id(4.into()))
        .with_max_wait_ms(max_wait_ms)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(METADATA_TOPIC_ID)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// Commits one entry holding `records`.
async fn commit(running: &RunningController, records: Vec<MetadataRecord>) {
    running
        .handle
        .run(move |_, _| Outcome {
            records,
            answer: (),
        })
        .await
        .expect("committed");
}

fn fence(id: i32) -> MetadataRecord {
    MetadataRecord::FenceBroker { id, epoch: 9 }
}

#[tokio::test]
async fn the_leader_serves_its_applied_entries_and_long_polls_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (running, apis) = lone_voter(dir.path()).await;
    commit(&running, vec![fence(7), fence(8)]).await;
    let applied = running.handle.tail().applied();
    assert!(applied >= 2, "the bootstrap entry and ours: {applied}");

    let r = fetch(&apis, request(1, 0, CLUSTER), 17).await;
    assert_eq!(
        r.responses[0].partitions[0].high_watermark,
        applied as i64 + 1
    );
    let Step::Apply {
        entries,
        upto,
        leader,
    } = on_fetch_answer(1, &r)
    else {
        panic!("entries expected: {r:?}");
    };
    assert_eq!(upto, applied);
    assert_eq!(leader.and_then(|l| l.leader_id), Some(1));
    assert_eq!(entries.last().unwrap().1, vec![fence(7), fence(8)]);
    assert!(
        entries.iter().any(|(_, r)| r
            .iter()
            .any(|r| matches!(r, MetadataRecord::FeatureLevel { .. }))),
        "the bootstrap features come first: {entries:?}"
    );

    // At the log end: an empty answer after the long poll, or the next entry once applied.
    let started = tokio::time::Instant::now();
    let r = fetch(&apis, request(applied as i64 + 1, 100, CLUSTER), 17).await;
    assert!(started.elapsed() >= Duration::from_millis(90));
    assert!(matches!(
        on_fetch_answer(applied + 1, &r),
        Step::Idle { .. }
    ));
    let poll = {
        let apis = apis.clone();
        tokio::spawn(
            async move { fetch(&apis, request(applied as i64 + 1, 5000, CLUSTER), 17).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    commit(&running, vec![fence(9)]).await;
    let r = tokio::time::timeout(Duration::from_secs(2), poll)
        .await
        .expect("woken by the entry, not the 5 s poll")
        .unwrap();
    let Step::Apply { entries, .. } = on_fetch_answer(applied + 1, &r) else {
        panic!("entries expected: {r:?}");
    };
    assert_eq!(entries, vec![(applied + 1, vec![fence(9)])]);

    // Errors as Kafka's leader answers them.
    let r = fetch(&apis, request(1, 0, "another-cluster-000000"), 17).await;
    assert_eq!(r.error_code, ResponseError::InconsistentClusterId.code());
    let r = fetch(&apis, request(applied as i64 + 5, 0, CLUSTER), 17).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    let mut other = request(1, 0, CLUSTER);
    other.topics[0].topic_id = uuid::Uuid::from_u64_pair(3, 3);
    let r = fetch(&apis, other, 17).await;
    assert_eq!(
        r.responses[0].partitions[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
    let mut two = request(1, 0, CLUSTER);
    two.topics.push(two.topics[0].clone());
    assert_eq!(
        fetch(&apis, two, 17).await.error_code,
        ResponseError::InvalidRequest.code()
    );
    drop(apis);
    running.shutdown().await;
}

#[tokio::test]
async fn below_the_tail_the_answer_names_a_snapshot_read_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let (running, apis) = lone_voter(dir.path()).await;
    commit(&running, vec![fence(7)]).await;
    let applied = running.handle.tail().applied();
    running.handle.tail().trim_to(applied);

    let r = fetch(&apis, request(1, 0, CLUSTER), 17).await;
    let Step::LoadSnapshot {
        end_offset, epoch, ..
    } = on_fetch_answer(1, &r)
    else {
        panic!("a snapshot expected: {r:?}");
    };
    assert_eq!(end_offset, applied as i64 + 1);
    assert_eq!(
        r.responses[0].partitions[0].log_start_offset,
        applied as i64 + 1
    );

    // Read it in pieces of 40 bytes.
    let mut bytes = Vec::new();
    let size = loop {
        let req = FetchSnapshotRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(CLUSTER.into())))
            .with_max_bytes(40)
            .with_topics(vec![TopicSnapshot::default()
                .with_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
                .with_partitions(vec![PartitionSnapshot::default()
                    .with_partition(0)
                    .with_snapshot_id(
                        SnapshotId::default()
                            .with_end_offset(end_offset)
                            .with_epoch(epoch),
                    )
                    .with_position(bytes.len() as i64)])]);
        let a = fetch_snapshot(&apis, req).await;
        let p = &a.topics[0].partitions[0];
        assert_eq!(p.error_code, 0);
        assert!(p.unaligned_records.len() <= 40);
        bytes.extend_from_slice(&p.unaligned_records);
        if bytes.len() as i64 >= p.size {
            break p.size;
        }
    };
    assert_eq!(bytes.len() as i64, size);
    let records = snapshot_records(&bytes).unwrap();
    let (offset, expected) = running.handle.metadata_snapshot();
    assert_eq!((offset, records), (applied, expected));

    // Another snapshot id, or a position past its end.
    let req = |end: i64, position: i64| {
        FetchSnapshotRequest::default()
            .with_max_bytes(40)
            .with_topics(vec![TopicSnapshot::default()
                .with_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
                .with_partitions(vec![PartitionSnapshot::default()
                    .with_snapshot_id(SnapshotId::default().with_end_offset(end).with_epoch(epoch))
                    .with_position(position)])])
    };
    let a = fetch_snapshot(&apis, req(end_offset + 1, 0)).await;
    assert_eq!(
        a.topics[0].partitions[0].error_code,
        ResponseError::SnapshotNotFound.code()
    );
    let a = fetch_snapshot(&apis, req(end_offset, size + 1)).await;
    assert_eq!(
        a.topics[0].partitions[0].error_code,
        ResponseError::PositionOutOfRange.code()
    );
    drop(apis);
    running.shutdown().await;
}

#[test]
fn observers_are_remembered_for_their_session_and_bounded() {
    let mut o = Observers::default();
    o.on_fetch(4, 3, 10, 1_000);
    o.on_fetch(5, 11, 10, 1_500);
    assert_eq!(
        o.live(2_000),
        vec![
            (
                4,
                ObserverState {
                    log_end_offset: 2,
                    last_fetch_ms: 1_000,
                    last_caught_up_ms: -1
                }
            ),
            (
                5,
                ObserverState {
                    log_end_offset: 10,
                    last_fetch_ms: 1_500,
                    last_caught_up_ms: 1_500
                }
            ),
        ]
    );
    // Behind again: the caught-up time stays that of its last fetch at the end.
    o.on_fetch(5, 8, 12, 3_000);
    assert_eq!(o.live(3_000)[1].1.last_caught_up_ms, 1_500);
    // 4 is silent for the session timeout: forgotten.
    let ids: Vec<i32> = o
        .live(1_000 + OBSERVER_SESSION_MS)
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids, vec![5]);
    for id in 0..(MAX_OBSERVERS as i32 + 5) {
        o.on_fetch(100 + id, 1, 1, 10_000 + i64::from(id));
    }
    let live = o.live(20_000);
    assert_eq!(live.len(), MAX_OBSERVERS);
    assert!(
        live.iter().all(|(id, _)| *id != 5),
        "the least recently seen go first"
    );
}
