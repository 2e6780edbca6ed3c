//! The driver over a real lone-voter quorum in a temporary directory: bootstrap once, commands
//! answered after their entry is applied, restarts replaying the log or a snapshot.

use std::time::Duration;

use uuid::Uuid;

use super::*;
use crate::controller::{
    bootstrap_records, BrokerRegistration, ControllerError, CreatableTopic, HeartbeatRequest,
    BOOTSTRAP_FEATURES,
};
use crate::metadata::BrokerEndpoint;
use crate::quorum::NodeConfig;

/// Every call the applier got: (offset, records, whether a snapshot).
#[derive(Default)]
struct Recorder(Mutex<Vec<(u64, Vec<MetadataRecord>, bool)>>);

impl MetadataApplier for Recorder {
    fn apply(&self, offset: u64, records: Vec<MetadataRecord>) {
        self.0.lock().push((offset, records, false));
    }
    fn load_snapshot(&self, offset: u64, records: Vec<MetadataRecord>) {
        self.0.lock().push((offset, records, true));
    }
}

impl Recorder {
    fn records(&self) -> Vec<MetadataRecord> {
        self.0
            .lock()
            .iter()
            .flat_map(|(_, r, _)| r.clone())
            .collect()
    }
    fn calls(&self) -> Vec<(u64, Vec<MetadataRecord>, bool)> {
        self.0.lock().clone()
    }
}

fn driver_config() -> DriverConfig {
    driver_config_with(Arc::new(|| 1_000_000))
}

fn driver_config_with(clock: Clock) -> DriverConfig {
    DriverConfig {
        settings: ControllerSettings::default(),
        bootstrap: bootstrap_records(BOOTSTRAP_FEATURES),
        tick_interval: Duration::from_millis(20),
        seed: 7,
        clock,
    }
}

fn quorum_config(dir: &std::path::Path, snapshot_after_bytes: u64) -> QuorumConfig {
    let mut node = NodeConfig::new(1, vec![1]);
    node.snapshot_after_bytes = snapshot_after_bytes;
    QuorumConfig {
        node,
        dir: dir.to_path_buf(),
        voters: vec![(1, "127.0.0.1:1".into())],
    }
}

async fn start_in(
    dir: &std::path::Path,
    snapshot_after_bytes: u64,
) -> (RunningController, Arc<Recorder>) {
    start_with(dir, snapshot_after_bytes, driver_config()).await
}

async fn start_with(
    dir: &std::path::Path,
    snapshot_after_bytes: u64,
    config: DriverConfig,
) -> (RunningController, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let running = start(
        config,
        quorum_config(dir, snapshot_after_bytes),
        None,
        recorder.clone(),
    )
    .expect("quorum starts");
    // A lone voter leads at once; wait until the driver decided as leader once (bootstrap).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let answer = running
            .handle
            .run(|_, _| Outcome {
                records: vec![],
                answer: (),
            })
            .await;
        match answer {
            Ok(()) => break,
            Err(DriverError::NotController { .. }) => {
                assert!(tokio::time::Instant::now() < deadline, "never led");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("no-op command failed: {e}"),
        }
    }
    (running, recorder)
}

async fn stop(running: RunningController) {
    let RunningController {
        handle,
        driver,
        quorum,
    } = running;
    drop(handle);
    driver.await.expect("driver task");
    quorum
        .await
        .expect("quorum task")
        .expect("quorum ends cleanly");
}

fn topic(name: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: -1,
        assignments: vec![],
        configs: vec![("cleanup.policy".into(), Some("compact".into()))],
    }
}

fn registration() -> BrokerRegistration {
    BrokerRegistration {
        broker_id: 1,
        incarnation_id: Uuid::from_u128(11),
        listeners: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            security_protocol: 0,
        }],
        features: BOOTSTRAP_FEATURES
            .iter()
            .map(|(n, level)| (n.to_string(), 1, *level))
            .collect(),
        rack: None,
        previous_broker_epoch: -1,
    }
}

/// Registers broker 1 and creates `t` with 3 partitions; returns the topic id.
async fn register_and_create(handle: &ControllerHandle) -> Uuid {
    let epoch = handle
        .run(|c, ctx| lift(c.register_broker(&registration(), ctx.now_ms, ctx.next_offset)))
        .await
        .expect("committed")
        .expect("registered");
    assert!(epoch > 0);
    // Registered fenced; a heartbeat from a caught-up broker unfences it (placement needs that).
    let offset = handle.applied_offset() as i64;
    let heartbeat = HeartbeatRequest {
        broker_id: 1,
        broker_epoch: epoch,
        current_metadata_offset: offset,
        want_fence: false,
        want_shutdown: false,
    };
    let answer = handle
        .run(move |c, ctx| lift(c.heartbeat(&heartbeat, ctx.now_ms, ctx.next_offset)))
        .await
        .expect("committed")
        .expect("heartbeat accepted");
    assert!(!answer.is_fenced, "{answer:?}");
    assert!(handle.read(|c| c.state().is_active(1)));
    let created = handle
        .run(|c, ctx| c.create_topics(&[topic("t", 3)], ctx.seed))
        .await
        .expect("committed");
    assert_eq!(created.len(), 1);
    let (name, result) = &created[0];
    assert_eq!(name, "t");
    result.as_ref().expect("created").topic_id
}

fn topic_ids(records: &[MetadataRecord]) -> Vec<(String, Uuid)> {
    records
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::Topic { name, topic_id } => Some((name.clone(), *topic_id)),
            _ => None,
        })
        .collect()
}

fn partitions_of(records: &[MetadataRecord], id: Uuid) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, MetadataRecord::Partition(p) if p.topic_id == id))
        .count()
}

#[tokio::test]
async fn a_new_log_is_bootstrapped_once_and_answers_follow_the_applied_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (running, recorder) = start_in(dir.path(), 1 << 30).await;
    let levels = running.handle.read(|c| c.state().features.clone());
    for (name, level) in BOOTSTRAP_FEATURES.iter().filter(|(_, l)| *l != 0) {
        assert_eq!(levels.get(*name), Some(level), "feature {name}");
    }
    let id = register_and_create(&running.handle).await;
    // The answer came after the controller state and the applier had the entry.
    assert_eq!(
        running
            .handle
            .read(|c| c.state().topic_ids.get("t").copied()),
        Some(id)
    );
    let seen = recorder.records();
    assert_eq!(topic_ids(&seen), vec![("t".to_string(), id)]);
    assert_eq!(partitions_of(&seen, id), 3);
    assert!(seen
        .iter()
        .any(|r| matches!(r, MetadataRecord::Config { name, value, .. }
        if name == "cleanup.policy" && value.as_deref() == Some("compact"))));
    // A refusal commits nothing and says why.
    let before = running.handle.applied_offset();
    let again = running
        .handle
        .run(|c, ctx| c.create_topics(&[topic("t", 1)], ctx.seed))
        .await
        .expect("answered");
    let refusal: &ControllerError = again[0].1.as_ref().expect_err("exists");
    assert_eq!(refusal.code(), ResponseError::TopicAlreadyExists.code());
    assert_eq!(running.handle.applied_offset(), before);
    stop(running).await;

    // A restart replays the log: the same topic id, one feature-level set, no second bootstrap.
    let (running, recorder) = start_in(dir.path(), 1 << 30).await;
    let replayed = recorder.records();
    assert_eq!(topic_ids(&replayed), vec![("t".to_string(), id)]);
    assert_eq!(partitions_of(&replayed, id), 3);
    let feature_records = replayed
        .iter()
        .filter(|r| matches!(r, MetadataRecord::FeatureLevel { name, .. } if name == "metadata.version"))
        .count();
    assert_eq!(feature_records, 1, "bootstrap applied once: {replayed:?}");
    assert_eq!(
        running
            .handle
            .read(|c| c.state().topic_ids.get("t").copied()),
        Some(id)
    );
    assert!(recorder.calls().iter().all(|(_, _, snapshot)| !snapshot));
    // Deleting it commits a RemoveTopic the applier sees.
    let deleted = running
        .handle
        .run(|c, _| c.delete_topics(&["t".to_string()]))
        .await
        .expect("committed");
    assert_eq!(deleted[0].1, Ok(id));
    assert!(recorder
        .records()
        .contains(&MetadataRecord::RemoveTopic { topic_id: id }));
    stop(running).await;
}

#[tokio::test]
async fn a_restart_after_a_snapshot_loads_it_then_the_later_entries() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Snapshot as soon as one byte was applied since the last one.
    let (running, _) = start_in(dir.path(), 1).await;
    let id = register_and_create(&running.handle).await;
    let created_more = running
        .handle
        .run(|c, ctx| c.create_topics(&[topic("u", 2)], ctx.seed))
        .await
        .expect("committed");
    let u = created_more[0].1.as_ref().expect("created").topic_id;
    let state = running.handle.read(|c| c.state().clone());
    stop(running).await;

    let (running, recorder) = start_in(dir.path(), 1).await;
    let calls = recorder.calls();
    assert!(calls[0].2, "a snapshot first: {calls:?}");
    assert!(calls.iter().skip(1).all(|(_, _, s)| !s));
    let mut names = topic_ids(&recorder.records());
    names.sort();
    assert_eq!(names, vec![("t".to_string(), id), ("u".to_string(), u)]);
    assert_eq!(running.handle.read(|c| c.state().clone()), state);
    stop(running).await;
}

#[tokio::test]
async fn commands_fail_with_stopped_once_the_quorum_is_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (running, _) = start_in(dir.path(), 1 << 30).await;
    running.quorum.abort();
    let _ = running.quorum.await;
    let answer = running
        .handle
        .run(|c, ctx| c.create_topics(&[topic("t", 1)], ctx.seed))
        .await;
    assert!(
        matches!(answer, Err(DriverError::Stopped)),
        "got {answer:?}"
    );
    assert_eq!(running.handle.read(|c| c.state().topics.len()), 0);
}

#[tokio::test]
async fn a_broker_silent_for_the_session_timeout_is_fenced_by_the_tick() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let dir = tempfile::tempdir().expect("tempdir");
    let now = Arc::new(AtomicI64::new(1_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let (running, recorder) = start_with(dir.path(), 1 << 30, driver_config_with(clock)).await;
    register_and_create(&running.handle).await;
    // Just inside the session (9000 ms): still active after several ticks.
    now.fetch_add(8_999, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(running.handle.read(|c| c.state().is_active(1)));
    // At the timeout the next tick fences it, and the applier sees the FenceBroker record (the
    // applier runs on the blocking pool just after the state changed: wait for both).
    now.fetch_add(1, Ordering::SeqCst);
    let fenced_record = || {
        recorder
            .records()
            .iter()
            .any(|r| matches!(r, MetadataRecord::FenceBroker { id: 1, .. }))
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while running.handle.read(|c| c.state().is_active(1)) || !fenced_record() {
        assert!(tokio::time::Instant::now() < deadline, "never fenced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!running.handle.read(|c| c.state().is_active(1)));
    stop(running).await;
}

#[tokio::test]
async fn without_a_quorum_majority_commands_get_not_controller_and_decide_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Voter 1 of {1, 2}; voter 2 never answers (nothing listens on port 1), so 1 never leads.
    let mut quorum = quorum_config(dir.path(), 1 << 30);
    quorum.node = NodeConfig::new(1, vec![1, 2]);
    quorum.voters = vec![(1, "127.0.0.1:1".into()), (2, "127.0.0.1:1".into())];
    let recorder = Arc::new(Recorder::default());
    let running = start(driver_config(), quorum, None, recorder.clone()).expect("starts");
    let decided = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = decided.clone();
    let answer = running
        .handle
        .run(move |c, ctx| {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            lift(c.register_broker(&registration(), ctx.now_ms, ctx.next_offset))
        })
        .await;
    assert_eq!(answer, Err(DriverError::NotController { leader_id: None }));
    assert_eq!(
        DriverError::NotController { leader_id: None }.code(),
        ResponseError::NotController.code()
    );
    assert!(
        !decided.load(std::sync::atomic::Ordering::SeqCst),
        "not decided"
    );
    assert!(running.handle.read(|c| c.state().brokers.is_empty()));
    assert!(recorder.calls().is_empty());
    stop(running).await;
}

#[tokio::test]
async fn a_command_whose_entry_is_over_the_limit_is_refused_and_changes_nothing() {
    use crate::metadata::records::ConfigResourceType;
    let dir = tempfile::tempdir().expect("tempdir");
    let (running, recorder) = start_in(dir.path(), 1 << 30).await;
    let config = |value: String| MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: "t".into(),
        name: "cleanup.policy".into(),
        value: Some(value),
    };
    let before = running.handle.applied_offset();
    let big = config("x".repeat(MAX_ENTRY_BYTES));
    let answer = running
        .handle
        .run(move |_, _| Outcome {
            records: vec![big],
            answer: (),
        })
        .await;
    let Err(e) = answer else {
        panic!("an entry over {MAX_ENTRY_BYTES} bytes was committed");
    };
    assert!(
        matches!(e, DriverError::EntryTooLarge { bytes } if bytes > MAX_ENTRY_BYTES),
        "{e:?}"
    );
    assert_eq!(e.code(), ResponseError::RecordListTooLarge.code());
    assert_eq!(running.handle.applied_offset(), before, "nothing proposed");
    let configs = |r: &Recorder| {
        r.records()
            .iter()
            .filter(|r| matches!(r, MetadataRecord::Config { .. }))
            .count()
    };
    assert_eq!(configs(&recorder), 0);
    // The next command, just under the limit's order of size, is proposed and applied.
    let small = config("x".repeat(MAX_ENTRY_BYTES / 2));
    let answer = running
        .handle
        .run(move |_, _| Outcome {
            records: vec![small],
            answer: (),
        })
        .await;
    assert_eq!(answer, Ok(()));
    assert_eq!(configs(&recorder), 1);
    assert!(running.handle.applied_offset() > before);
    stop(running).await;
}

#[test]
fn a_leadership_won_back_in_a_later_epoch_is_a_new_one() {
    let lead = |leader: Option<i32>, epoch| LeaderAndEpoch {
        leader_id: leader,
        epoch,
    };
    // First leadership.
    assert_eq!(new_leadership(None, lead(Some(1), 1), 1), Some(1));
    // The same epoch seen again: nothing new.
    assert_eq!(new_leadership(Some(1), lead(Some(1), 1), 1), None);
    // Lost in epoch 2 and won back in 3, the watch showing only epoch 3: a new leadership.
    assert_eq!(new_leadership(Some(1), lead(Some(1), 3), 1), Some(3));
    // Another node leads, or nobody: not this node's.
    assert_eq!(new_leadership(Some(1), lead(Some(2), 2), 1), None);
    assert_eq!(new_leadership(Some(1), lead(None, 2), 1), None);
}
