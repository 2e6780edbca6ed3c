//! The transaction driver over a real broker (temporary data directory): a step that panics is
//! caught, the state reloaded from `__transaction_state`, and the next requests are served; a
//! step is answered only once its records are committed.

use super::*;
use crate::config::Config;
use crate::replica::partition::testing::{
    follower_catches_up, lead_below_min_isr, lead_with_a_lagging_follower,
};

fn init(id: &str) -> impl FnOnce(oneshot::Sender<InitAnswer>) -> Request {
    let input = InitInput {
        transactional_id: id.to_string(),
        timeout_ms: 60_000,
        expected: None,
        fresh_producer_id: None,
    };
    move |tx| Request::InitProducerId(input, tx)
}

#[tokio::test]
async fn a_panicking_step_is_caught_and_the_state_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let inbox = b.txn_inbox.lock().take().expect("inbox");
    let (_stop_tx, stop) = watch::channel(false);
    let coordinator = load(&b, TxnConfig::from_config(&b.config));
    let task = tokio::spawn(run(b.clone(), coordinator, b.txn.view(), inbox, stop));

    let first = b.txn.call(init("t1")).await.expect("answered");
    assert_eq!((first.error, first.producer_epoch), (0, 0));
    assert!(b.txn.call::<()>(|_| Request::PanicForTest).await.is_none());
    // Reloaded from the log: the same producer id, its epoch bumped as for any re-init.
    let again = b
        .txn
        .call(init("t1"))
        .await
        .expect("served after the panic");
    assert_eq!(
        (again.error, again.producer_id, again.producer_epoch),
        (0, first.producer_id, 1)
    );
    assert!(!task.is_finished());
}

/// The follower of `p` fetches to the log end 100 ms from now.
fn catch_up_soon(p: &Arc<crate::replica::Partition>) {
    let p = p.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        follower_catches_up(&p);
    });
}

/// A driver over `b` with its coordinator loaded under `config`.
fn driver_on(b: &Arc<crate::broker::Broker>, config: TxnConfig) -> Driver {
    Driver {
        broker: b.clone(),
        coordinator: load(b, config),
        view: b.txn.view(),
        uncompleted: Vec::new(),
        unwritten: Vec::new(),
        backoff_until: None,
        loading: Default::default(),
    }
}

/// Serves one InitProducerId on `driver`; its answer.
async fn init_on(driver: &mut Driver, id: &str) -> InitAnswer {
    let (tx, rx) = oneshot::channel();
    driver.serve(init(id)(tx)).await;
    rx.await.expect("answered")
}

#[tokio::test]
async fn a_step_is_answered_once_its_records_are_committed() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let config = TxnConfig {
        commit_wait_ms: 300,
        ..TxnConfig::from_config(&b.config)
    };
    let mut driver = driver_on(&b, config);
    // Alone in the ISR: committed at its append.
    let first = init_on(&mut driver, "t1").await;
    assert_eq!((first.error, first.producer_epoch), (0, 0));
    let p = b
        .replicas
        .partition(TRANSACTION_STATE_TOPIC, 0)
        .expect("hosted");
    lead_with_a_lagging_follower(&p, b.identity.node_id);

    // The follower fetches 100 ms later; the answer waits for it.
    catch_up_soon(&p);
    let second = init_on(&mut driver, "t1").await;
    assert_eq!((second.error, second.producer_epoch), (0, 1));
    let offsets = p.offsets();
    assert_eq!(
        offsets.high_watermark, offsets.log_end_offset,
        "answered before committed"
    );

    // Never replicated: COORDINATOR_NOT_AVAILABLE after the wait, and the step is undone (the
    // next init bumps from epoch 1 again).
    let third = init_on(&mut driver, "t1").await;
    assert_eq!(third.error, codes::COORDINATOR_NOT_AVAILABLE);
    catch_up_soon(&p);
    let fourth = init_on(&mut driver, "t1").await;
    assert_eq!((fourth.error, fourth.producer_epoch), (0, 2));
}

/// `__transaction_state` takes `transaction.state.log.min.isr` as its `min.insync.replicas`, and
/// its coordinator writes as acks=all: below the minimum nothing is appended and the step answers
/// COORDINATOR_NOT_AVAILABLE (Kafka's NOT_ENOUGH_REPLICAS, mapped by its coordinator).
#[tokio::test]
async fn below_the_min_isr_a_step_is_refused_before_its_append() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let topic = ensure_transaction_topic(&b).await.expect("created");
    assert_eq!(topic.config.min_insync_replicas, 2);
    let mut driver = driver_on(&b, TxnConfig::from_config(&b.config));
    // RF 1: the effective minimum is min(2, 1) = 1.
    let first = init_on(&mut driver, "t1").await;
    assert_eq!((first.error, first.producer_epoch), (0, 0));
    let p = topic.partition(0).expect("hosted").clone();
    let end = p.offsets().log_end_offset;
    lead_below_min_isr(&p, b.identity.node_id);
    let refused = init_on(&mut driver, "t1").await;
    assert_eq!(refused.error, codes::COORDINATOR_NOT_AVAILABLE);
    assert_eq!(
        p.offsets().log_end_offset,
        end,
        "appended below the min ISR"
    );
}

#[tokio::test]
async fn a_local_marker_is_written_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    // Any partition led here takes markers; this one needs no topic of the test's own (and,
    // not being `__consumer_offsets`, no group coordinator).
    let topic = ensure_transaction_topic(&b).await.expect("created");
    let p = topic.partition(0).expect("hosted").clone();
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    let job = MarkerJob {
        transactional_id: "t".into(),
        producer_id: 7,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control: crate::record::ControlType::Abort,
        partitions: vec![(TRANSACTION_STATE_TOPIC.to_string(), 0)],
    };
    catch_up_soon(&p);
    let failed = write_local(&b, &job, &job.partitions, now_ms()).await;
    assert!(failed.is_empty(), "{failed:?}");
    let offsets = p.offsets();
    assert!(offsets.log_end_offset > 0);
    assert_eq!(
        offsets.high_watermark, offsets.log_end_offset,
        "done before the marker was committed"
    );
}

/// Markers are appended as acks=all: below the partition's effective min.insync.replicas nothing
/// is written and the partition is returned for a retry, which lands once the ISR is back.
#[tokio::test]
async fn a_local_marker_below_the_min_isr_is_not_written_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let topic = ensure_transaction_topic(&b).await.expect("created");
    let p = topic.partition(0).expect("hosted").clone();
    let end = p.offsets().log_end_offset;
    lead_below_min_isr(&p, b.identity.node_id);
    let job = MarkerJob {
        transactional_id: "t".into(),
        producer_id: 7,
        producer_epoch: 0,
        coordinator_epoch: 0,
        control: crate::record::ControlType::Commit,
        partitions: vec![(TRANSACTION_STATE_TOPIC.to_string(), 0)],
    };
    let failed = write_local(&b, &job, &job.partitions, now_ms()).await;
    assert_eq!(failed, job.partitions, "not returned for a retry");
    assert_eq!(p.offsets().log_end_offset, end, "written below the min ISR");
    // Back to two in-sync replicas: the retry lands.
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    catch_up_soon(&p);
    let failed = write_local(&b, &job, &job.partitions, now_ms()).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(p.offsets().log_end_offset, end + 1);
}

#[tokio::test]
async fn the_coordinator_decides_at_the_finalized_transaction_version_of_the_image() {
    use crate::controller::{FeatureUpdate, UpgradeType};
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let mut driver = driver_on(&b, TxnConfig::from_config(&b.config));
    assert_eq!(driver.coordinator.config.transaction_version, 2);
    let node = b.identity.node_id;
    let downgrade = vec![FeatureUpdate {
        feature: crate::txn::txn_version::FEATURE.into(),
        max_version_level: 0,
        upgrade_type: UpgradeType::SafeDowngrade,
    }];
    b.controller_run(move |c, _| c.update_features(node, &downgrade, false))
        .await
        .expect("controller")
        .expect("accepted");
    // A step after the change runs at level 0 (Transactions V1: no epoch bump on its aborts).
    let answer = init_on(&mut driver, "t-level").await;
    assert_eq!(answer.error, 0);
    assert_eq!(driver.coordinator.config.transaction_version, 0);
}

/// A transactional id of shard `shard` of `count`.
fn id_in(shard: i32, count: i32) -> String {
    (0..)
        .map(|i| format!("t{i}"))
        .find(|id| super::super::records::partition_for(id, count) == shard)
        .unwrap_or_default()
}

/// A broker with a 2-partition `__transaction_state` (its data directory kept alive by the
/// first element) and a driver over it whose steps wait 300 ms for their high watermark.
async fn two_shards() -> (tempfile::TempDir, Arc<crate::broker::Broker>, Driver) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 2,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let config = TxnConfig {
        commit_wait_ms: 300,
        ..TxnConfig::from_config(&b.config)
    };
    let driver = driver_on(&b, config);
    (dir, b, driver)
}

/// Kafka's `onElection` per shard: a leadership change reloads only the shards it concerns. A
/// step of a kept shard that failed stays undone although its record reached the log (a reload
/// of that shard would bring it back: simulator seed 22303), and the reloaded shard's markers
/// carry its new leader epoch as coordinator epoch.
#[tokio::test]
async fn a_leadership_change_reloads_only_its_shards() {
    let (_dir, b, mut driver) = two_shards().await;
    let (kept, moved) = (id_in(0, 2), id_in(1, 2));
    let first = init_on(&mut driver, &kept).await;
    assert_eq!((first.error, first.producer_epoch), (0, 0));
    assert_eq!(init_on(&mut driver, &moved).await.error, 0);
    let p = b
        .replicas
        .partition(TRANSACTION_STATE_TOPIC, 0)
        .expect("hosted");
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    // Never replicated: refused and undone, its record left above the high watermark.
    let failed = init_on(&mut driver, &kept).await;
    assert_eq!(failed.error, codes::COORDINATOR_NOT_AVAILABLE);
    let offsets = p.offsets();
    assert!(offsets.log_end_offset > offsets.high_watermark);

    // Shard 1 led again at leader epoch 7: reloaded; shard 0 kept as it is.
    let gained = std::collections::BTreeMap::from([(1, 7)]);
    driver
        .change_shards(gained, std::collections::BTreeSet::from([1]))
        .await;
    assert_eq!(driver.coordinator.coordinator_epoch_of(&moved), 7);
    assert_eq!(
        driver.coordinator.get(&kept).map(|m| m.producer_epoch),
        Some(0),
        "the failed step came back"
    );
    assert!(driver.coordinator.get(&moved).is_some(), "shard 1 reloaded");
    catch_up_soon(&p);
    let next = init_on(&mut driver, &kept).await;
    assert_eq!((next.error, next.producer_epoch), (0, 1));

    // Shard 1 lost: its transactional ids are forgotten.
    driver
        .change_shards(Default::default(), std::collections::BTreeSet::from([1]))
        .await;
    assert!(driver.coordinator.get(&moved).is_none());
    assert!(driver.coordinator.get(&kept).is_some());
}

/// A gained shard whose high watermark is below its log end is not loaded: its tail may hold a
/// record no later leader will have (simulator seed 39081: a timeout's PrepareAbort that was never
/// committed, whose ABORT markers contradicted the next coordinator's commit). Its transactional
/// ids answer COORDINATOR_LOAD_IN_PROGRESS until the high watermark reaches that log end.
#[tokio::test]
async fn a_gained_shard_loads_once_its_tail_is_committed() {
    let (_dir, b, mut driver) = two_shards().await;
    let (kept, moved) = (id_in(0, 2), id_in(1, 2));
    assert_eq!(init_on(&mut driver, &moved).await.error, 0);
    assert_eq!(init_on(&mut driver, &kept).await.error, 0);
    let p = b
        .replicas
        .partition(TRANSACTION_STATE_TOPIC, 1)
        .expect("hosted");
    lead_with_a_lagging_follower(&p, b.identity.node_id);
    // A step left above the high watermark (refused and undone).
    assert_eq!(
        init_on(&mut driver, &moved).await.error,
        codes::COORDINATOR_NOT_AVAILABLE
    );

    // Shard 1 led again at epoch 3 with that tail: it waits.
    let gained = std::collections::BTreeMap::from([(1, 3)]);
    driver
        .change_shards(gained, std::collections::BTreeSet::from([1]))
        .await;
    assert!(
        driver.coordinator.get(&moved).is_none(),
        "loaded an uncommitted tail"
    );
    let waiting = init_on(&mut driver, &moved).await;
    assert_eq!(waiting.error, codes::COORDINATOR_LOAD_IN_PROGRESS);
    assert_eq!(
        init_on(&mut driver, &kept).await.error,
        0,
        "the other shard serves"
    );
    assert!(
        driver.deadline().is_some(),
        "nothing will look at the shard again"
    );

    // The follower fetched: the tail is committed, and the shard loads (with the tail's step).
    follower_catches_up(&p);
    driver.load_caught_up().await;
    assert!(driver.loading.is_empty());
    assert_eq!(
        driver.coordinator.get(&moved).map(|m| m.producer_epoch),
        Some(1)
    );
    assert_eq!(driver.coordinator.coordinator_epoch_of(&moved), 3);
    catch_up_soon(&p);
    let served = init_on(&mut driver, &moved).await;
    assert_eq!((served.error, served.producer_epoch), (0, 2));
}
