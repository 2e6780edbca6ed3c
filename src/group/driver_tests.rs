//! The driver over a real broker (temporary data directory): a commit, offset delete or group
//! delete whose write fails changes nothing and answers the write's error; a step that panics is caught, the state reloaded
//! from `__consumer_offsets`, and the next requests are served.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::config::Config;
use crate::replica::partition::testing::{follower_catches_up, lead_with_a_lagging_follower};

async fn broker(dir: &std::path::Path) -> Arc<Broker> {
    let config = Config {
        data_dir: dir.to_path_buf(),
        offsets_topic_num_partitions: 1,
        ..Config::default()
    };
    crate::broker::open_started(config).await
}

fn commit_req(group: &str, offset: i64) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])])
}

fn query(group: &str) -> FetchQuery {
    FetchQuery {
        group_id: group.into(),
        topics: Some(vec![("t".into(), vec![0])]),
        member_id: None,
        member_epoch: -1,
        require_stable: false,
    }
}

/// Serves one commit on `driver`; its only partition's error code.
async fn commit(driver: &mut Driver, group: &str, offset: i64) -> i16 {
    let (tx, rx) = oneshot::channel();
    driver
        .serve(Request::Commit(8, commit_req(group, offset), tx))
        .await;
    rx.await.expect("answered").topics[0].partitions[0].error_code
}

fn committed(coordinator: &Coordinator, group: &str) -> i64 {
    coordinator.fetch(&query(group))[0].partitions[0].committed_offset
}

#[tokio::test]
async fn a_commit_whose_write_fails_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path()).await;
    let mut driver = Driver::new(b.clone(), Coordinator::new(GroupConfig::default()));
    assert_eq!(commit(&mut driver, "g", 5).await, codes::NONE);
    assert_eq!(committed(&driver.coordinator, "g"), 5);

    // The disk refuses: the commit answers the write's error, the offset stays at 5, and a new
    // simple group is not created.
    driver.writer = Arc::new(|_: &Broker, _: &[CoordinatorRecord], _| Err(codes::NOT_COORDINATOR));
    assert_eq!(commit(&mut driver, "g", 9).await, codes::NOT_COORDINATOR);
    assert_eq!(committed(&driver.coordinator, "g"), 5);
    assert_eq!(
        commit(&mut driver, "fresh", 1).await,
        codes::NOT_COORDINATOR
    );
    assert!(driver.coordinator.group("fresh").is_none());
    assert_eq!(committed(&driver.coordinator, "fresh"), -1);

    // OffsetDelete and DeleteGroups whose tombstones are not written delete nothing.
    let (tx, rx) = oneshot::channel();
    let delete = OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_topics(vec![
            kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![kafka_protocol::messages::offset_delete_request::OffsetDeleteRequestPartition::default()
                    .with_partition_index(0)]),
        ]);
    driver.serve(Request::OffsetDelete(delete, tx)).await;
    assert_eq!(rx.await.unwrap().error_code, codes::NOT_COORDINATOR);
    let (tx, rx) = oneshot::channel();
    driver.serve(Request::Delete(vec!["g".into()], tx)).await;
    assert_eq!(rx.await.unwrap()[0].error_code, codes::NOT_COORDINATOR);
    assert_eq!(committed(&driver.coordinator, "g"), 5);
    assert!(driver.coordinator.group("g").is_some());

    // A restart finds what was written, not what was refused.
    let reloaded = load(&b, GroupConfig::default());
    assert_eq!(committed(&reloaded, "g"), 5);
    assert!(reloaded.group("fresh").is_none());
}

#[tokio::test]
async fn a_panicking_step_is_caught_and_the_state_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path()).await;
    let (handle, inbox) = GroupHandle::new();
    let (_stop_tx, stop) = watch::channel(false);
    let driver = Driver::new(b.clone(), Coordinator::new(GroupConfig::default()));
    let task = tokio::spawn(run_driver(driver, inbox, stop));

    let commit = |offset| {
        let handle = handle.clone();
        async move {
            handle
                .call(|tx| Request::Commit(8, commit_req("g", offset), tx))
                .await
                .map(|r| r.topics[0].partitions[0].error_code)
        }
    };
    let fetch = || async {
        handle
            .call(|tx| Request::Fetch(vec![query("g")], tx))
            .await
            .map(|r| r[0].1[0].partitions[0].committed_offset)
    };
    assert_eq!(commit(5).await, Some(codes::NONE));
    // The panicking step's caller gets no answer (its handler answers COORDINATOR_NOT_AVAILABLE).
    assert_eq!(handle.call::<()>(|_| Request::PanicForTest).await, None);
    // The task lives on, with the written offset reloaded, and serves the next requests.
    assert_eq!(fetch().await, Some(5));
    assert_eq!(commit(7).await, Some(codes::NONE));
    assert_eq!(fetch().await, Some(7));
    assert!(!task.is_finished());
}

#[tokio::test]
async fn under_the_flush_policy_a_commit_is_fsynced_off_the_runtime_thread_before_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        offsets_topic_num_partitions: 1,
        flush_every_message: true,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let mut driver = Driver::new(b.clone(), Coordinator::new(GroupConfig::default()));
    // The test runtime has one thread: a write seen on another one ran on the blocking pool.
    let runtime_thread = std::thread::current().id();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen_by_writer = seen.clone();
    driver.writer = Arc::new(move |b: &Broker, r: &[CoordinatorRecord], now| {
        seen_by_writer.lock().push(std::thread::current().id());
        persist(b, r, now)
    });
    assert_eq!(commit(&mut driver, "g", 5).await, codes::NONE);
    let threads = seen.lock().clone();
    assert_eq!(threads.len(), 1);
    assert_ne!(threads[0], runtime_thread);
    // Answered after its fsync (the flush policy's group commit ran) and durable.
    let topic = b.replicas.topic(OFFSETS_TOPIC).expect("created");
    assert!(topic.partitions[&0].flush_policy_syncs() >= 1);
    assert_eq!(committed(&load(&b, GroupConfig::default()), "g"), 5);
}

#[tokio::test]
async fn a_commit_is_answered_once_its_record_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path()).await;
    let config = GroupConfig {
        offsets_commit_timeout_ms: 300,
        ..GroupConfig::default()
    };
    let mut driver = Driver::new(b.clone(), Coordinator::new(config));
    // Alone in the ISR, the answer is at once.
    assert_eq!(commit(&mut driver, "g", 5).await, codes::NONE);
    let p = b.replicas.partition(OFFSETS_TOPIC, 0).expect("hosted");
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    let hw = p.offsets().high_watermark;

    // Appended, not yet replicated: no answer while the follower has not fetched it.
    let (tx, mut rx) = oneshot::channel();
    driver
        .serve(Request::Commit(8, commit_req("g", 7), tx))
        .await;
    assert!(p.offsets().log_end_offset > hw);
    assert_eq!(p.offsets().high_watermark, hw);
    let early = tokio::time::timeout(Duration::from_millis(100), &mut rx).await;
    assert!(
        early.is_err(),
        "answered before the follower had the record"
    );
    // The driver serves other requests meanwhile.
    let (fetch_tx, fetch_rx) = oneshot::channel();
    driver
        .serve(Request::Fetch(vec![query("g")], fetch_tx))
        .await;
    let fetched = tokio::time::timeout(Duration::from_secs(1), fetch_rx).await;
    assert_eq!(fetched.expect("not held").expect("sent").len(), 1);
    follower_catches_up(&p);
    let answer = tokio::time::timeout(Duration::from_secs(5), rx).await;
    let answer = answer.expect("answered once committed").expect("sent");
    assert_eq!(answer.topics[0].partitions[0].error_code, codes::NONE);

    // Never replicated: COORDINATOR_NOT_AVAILABLE after offsets.commit.timeout.ms.
    assert_eq!(
        commit(&mut driver, "g", 8).await,
        codes::COORDINATOR_NOT_AVAILABLE
    );
    // Leadership lost while waiting: NOT_COORDINATOR (the client looks for the new one).
    let (tx, rx) = oneshot::channel();
    driver
        .serve(Request::Commit(8, commit_req("g", 9), tx))
        .await;
    p.make_follower(99, p.leader_epoch() + 1);
    let answer = rx.await.expect("sent");
    assert_eq!(
        answer.topics[0].partitions[0].error_code,
        codes::NOT_COORDINATOR
    );
}

/// A reload while a commit waits for its high watermark keeps that commit: the load reads the
/// led shards to their log end (`internal_topic::replay_led`, as Kafka's loaders), so after the
/// commit is answered OffsetFetch returns it. Reading only below the high watermark dropped it
/// from memory though it was then acknowledged (simulation seed 0 of `Schedule::Third`: the
/// coordinator lost another shard and reloaded; seed 31: a new leader's high watermark trailed
/// an acknowledged commit).
#[tokio::test]
async fn a_reload_keeps_a_commit_still_waiting_for_its_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path()).await;
    let mut driver = Driver::new(b.clone(), Coordinator::new(GroupConfig::default()));
    assert_eq!(commit(&mut driver, "g", 5).await, codes::NONE);
    let p = b.replicas.partition(OFFSETS_TOPIC, 0).expect("hosted");
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    let (tx, rx) = oneshot::channel();
    driver
        .serve(Request::Commit(8, commit_req("g", 7), tx))
        .await;
    assert!(p.offsets().log_end_offset > p.offsets().high_watermark);
    // A leadership change of another shard reloads the coordinator meanwhile.
    driver.recover().await;
    follower_catches_up(&p);
    let answer = tokio::time::timeout(Duration::from_secs(5), rx).await;
    let answer = answer.expect("answered once committed").expect("sent");
    assert_eq!(answer.topics[0].partitions[0].error_code, codes::NONE);
    assert_eq!(committed(&driver.coordinator, "g"), 7);
}
