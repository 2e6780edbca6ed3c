//! The AlterPartition client on a lone voter (the `Local` link): a shrink and an expand commit,
//! a stale partition epoch answers INVALID_UPDATE_VERSION, a second proposal for a queued
//! partition is OPERATION_NOT_ATTEMPTED, proposals of several partitions are answered each.
//! The wire (`Remote` link) is tested on three combined nodes in `controller/remote_tests.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Config;
use crate::controller::driver::{self, lift, DriverConfig, MetadataApplier, RunningController};
use crate::controller::{
    bootstrap_records, ControllerSettings, CreatableTopic, HeartbeatRequest, Outcome,
    BOOTSTRAP_FEATURES,
};
use crate::metadata::MetadataRecord;
use crate::quorum::{NodeConfig, QuorumConfig};

struct Nothing;
impl MetadataApplier for Nothing {
    fn apply(&self, _: u64, _: Vec<MetadataRecord>) {}
    fn load_snapshot(&self, _: u64, _: Vec<MetadataRecord>) {}
}

/// A lone voter leading, brokers 1-3 registered and unfenced, topic "t" with two partitions on
/// [1, 2, 3]; returns the controller, broker 1's epoch and the topic id.
async fn cluster(dir: &std::path::Path) -> (RunningController, i64, Uuid) {
    let config = DriverConfig {
        settings: ControllerSettings::default(),
        bootstrap: bootstrap_records(BOOTSTRAP_FEATURES),
        tick_interval: Duration::from_millis(50),
        seed: 5,
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
    let mut epoch1 = 0;
    for id in 1..=3 {
        let registration = crate::controller::local::registration(&Config {
            node_id: id,
            ..Config::default()
        });
        let epoch = running
            .handle
            .run(move |c, ctx| lift(c.register_broker(&registration, ctx.now_ms, ctx.next_offset)))
            .await
            .expect("ran")
            .expect("registered");
        let beat = HeartbeatRequest {
            broker_id: id,
            broker_epoch: epoch,
            current_metadata_offset: i64::MAX,
            want_fence: false,
            want_shutdown: false,
        };
        let a = running
            .handle
            .run(move |c, ctx| lift(c.heartbeat(&beat, ctx.now_ms, ctx.next_offset)))
            .await
            .expect("ran")
            .expect("heartbeat");
        assert!(!a.is_fenced);
        if id == 1 {
            epoch1 = epoch;
        }
    }
    let created = running
        .handle
        .run(|c, ctx| {
            c.create_topics(
                &[CreatableTopic {
                    name: "t".into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![(0, vec![1, 2, 3]), (1, vec![1, 3, 2])],
                    configs: vec![],
                }],
                ctx.seed,
            )
        })
        .await
        .expect("created");
    let topic = created[0].1.as_ref().expect("topic").topic_id;
    (running, epoch1, topic)
}

fn proposal(partition_epoch: i32, isr: &[i32]) -> AlterPartitionProposal {
    AlterPartitionProposal {
        leader_id: 1,
        leader_epoch: 0,
        partition_epoch,
        new_isr: isr.to_vec(),
    }
}

async fn answer(rx: oneshot::Receiver<AlterPartitionResponse>) -> AlterPartitionResponse {
    tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("answered in time")
        .expect("answered")
}

#[tokio::test]
async fn the_local_link_commits_shrink_and_expand_and_answers_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (running, epoch, topic) = cluster(dir.path()).await;
    let (client, task) = AlterPartitionClient::start(ControllerLink::Local {
        handle: running.handle.clone(),
        broker_id: 1,
        broker_epoch: epoch,
    });
    // Shrink partition 0 and a duplicate for it submitted before the task runs; partition 1
    // shrinks in the same batch.
    let first = client.submit(topic, "t", 0, proposal(0, &[1, 2]));
    let dup = client.submit(topic, "t", 0, proposal(0, &[1]));
    let other = client.submit(topic, "t", 1, proposal(0, &[1, 3]));
    assert_eq!(
        answer(first).await,
        AlterPartitionResponse::Committed {
            leader_epoch: 0,
            partition_epoch: 1,
            isr: vec![1, 2]
        }
    );
    assert_eq!(
        answer(dup).await,
        AlterPartitionResponse::Error(AlterPartitionError::OperationNotAttempted)
    );
    assert_eq!(
        answer(other).await,
        AlterPartitionResponse::Committed {
            leader_epoch: 0,
            partition_epoch: 1,
            isr: vec![1, 3]
        }
    );
    // The stale partition epoch: INVALID_UPDATE_VERSION; the current one expands.
    let stale = client.submit(topic, "t", 0, proposal(0, &[1, 2, 3]));
    assert_eq!(
        answer(stale).await,
        AlterPartitionResponse::Error(AlterPartitionError::InvalidUpdateVersion)
    );
    let expand = client.submit(topic, "t", 0, proposal(1, &[1, 2, 3]));
    assert_eq!(
        answer(expand).await,
        AlterPartitionResponse::Committed {
            leader_epoch: 0,
            partition_epoch: 2,
            isr: vec![1, 2, 3]
        }
    );
    let state = running
        .handle
        .read(|c| c.state().partition(topic, 0).cloned())
        .expect("partition");
    assert_eq!((state.isr, state.partition_epoch), (vec![1, 2, 3], 2));
    drop(client);
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the task ends with its last handle")
        .expect("no panic");
    running.shutdown().await;
}

#[test]
fn the_wire_request_groups_by_topic_and_carries_the_leaders_epoch() {
    let (tx, _rx) = oneshot::channel();
    let (tx2, _rx2) = oneshot::channel();
    let mut queue = BTreeMap::new();
    queue.insert(
        (Uuid::from_u128(1), 0),
        Queued {
            topic_name: "a".into(),
            proposal: proposal(4, &[1, 2]),
            reply: tx,
        },
    );
    queue.insert(
        (Uuid::from_u128(1), 3),
        Queued {
            topic_name: "a".into(),
            proposal: proposal(2, &[1]),
            reply: tx2,
        },
    );
    let request = wire_request(1, 77, &items(&queue, 77));
    assert_eq!((request.broker_id.0, request.broker_epoch), (1, 77));
    assert_eq!(request.topics.len(), 1);
    let parts = &request.topics[0].partitions;
    assert_eq!(
        parts
            .iter()
            .map(|p| (p.partition_index, p.partition_epoch))
            .collect::<Vec<_>>(),
        vec![(0, 4), (3, 2)]
    );
    let members: Vec<(i32, i64)> = parts[0]
        .new_isr_with_epochs
        .iter()
        .map(|m| (m.broker_id.0, m.broker_epoch))
        .collect();
    assert_eq!(members, vec![(1, 77), (2, UNKNOWN_BROKER_EPOCH)]);
}
