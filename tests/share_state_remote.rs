//! Share state across brokers (issue 19), three combined nodes in one process: a share-partition
//! leader whose key's `__share_group_state` partition another broker leads initializes, writes
//! and reads the key's state there (Initialize/Write/ReadShareGroupState, `share_state::remote`),
//! the state partition's leader holds it, and when that leader stops, the replica that takes the
//! partition over reloads its keys from the log and answers the same state, and takes the next
//! write; DescribeShareGroupOffsets' summary, AlterShareGroupOffsets' initialization (which
//! fences the old state epoch) and DeleteShareGroupOffsets' delete reach it too; DeleteGroups
//! of an Empty share group deletes the state another broker holds. About 5 s per test (debug
//! build), most of it the clusters' start and the controlled shutdown.

mod common;
use common::wire::wait_for;

use sluice::internal_topic::InternalTopic;
use sluice::server::RunningBroker;
use sluice::share::partition::{RecordState, StateChange};
use sluice::share::persist::PersisterStateBatch;
use sluice::share::registry::ShareKey;
use sluice::share::state_records::{coordinator_key, SHARE_STATE_TOPIC};
use sluice::share_state::{self, remote, Persisted};

const STATE_PARTITIONS: i32 = 3;

fn node(nodes: &[Option<RunningBroker>], id: i32) -> &RunningBroker {
    nodes[(id - 1) as usize].as_ref().expect("running")
}

/// The leader of `topic`-`index` in broker `id`'s image, once it has one.
fn leader_of(nodes: &[Option<RunningBroker>], id: i32, topic: &str, index: i32) -> Option<i32> {
    let image = node(nodes, id).broker.image();
    let p = image.partition(topic, index)?;
    (p.leader >= 0).then_some(p.leader)
}

/// Three nodes (`env` beside the share-state topic's 3 partitions at replication factor 3) with
/// a one-partition data topic `shared`, the share-state topic and the internal topics `more`
/// (of 3 partitions) created, once every broker knows their leaders.
async fn started(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    more: &[&str],
) -> Vec<Option<RunningBroker>> {
    let mut all = vec![
        ("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS", "3"),
        (
            "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR",
            "3",
        ),
        ("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR", "1"),
    ];
    all.extend_from_slice(env);
    let (_, _, nodes) = common::three_nodes(dir, &all).await;
    let first = node(&nodes, 1).broker.clone();
    let data = InternalTopic {
        name: "shared",
        partitions: 1,
        replication_factor: 1,
        overrides: Vec::new(),
    };
    // (None when node 1 hosts no replica of it: the image says it exists, below.)
    let _ = sluice::internal_topic::ensure(&first, data).await;
    share_state::ensure_topic(&first).await;
    if more.contains(&sluice::group::OFFSETS_TOPIC) {
        let _ = sluice::group::driver::ensure_offsets_topic(&first).await;
    }
    for id in 1..=3 {
        wait_for("every broker to know the topics", 30, async || {
            leader_of(&nodes, id, "shared", 0)?;
            (0..STATE_PARTITIONS)
                .all(|p| {
                    leader_of(&nodes, id, SHARE_STATE_TOPIC, p).is_some()
                        && more.iter().all(|t| leader_of(&nodes, id, t, p).is_some())
                })
                .then_some(())
        })
        .await;
    }
    nodes
}

/// `request` at `version` to the broker on `port`, on a connection of its own.
async fn ask<R: kafka_protocol::protocol::Request>(
    port: u16,
    version: i16,
    request: &R,
) -> R::Response {
    common::wire::connect(port)
        .await
        .expect("connect")
        .call(version, request, common::wire::CALL)
        .await
        .expect("answered")
}

fn batch(first: i64, last: i64, state: RecordState) -> PersisterStateBatch {
    PersisterStateBatch::new(first, last, state, 1)
}

/// Persists `batches` of `key` from broker `b` (the share-partition leader): queued for the
/// state partition's leader (or appended here once `b` leads it); the code answered.
async fn write(
    b: &sluice::broker::Broker,
    key: &ShareKey,
    batches: Vec<PersisterStateBatch>,
    remote: bool,
) -> i16 {
    let change = StateChange {
        start_offset: -1,
        state_batches: batches,
    };
    let now = sluice::broker::now_ms();
    match share_state::persist(b, key, 0, 0, &change, now) {
        Ok(Persisted::Remote(answer)) => answer.await.expect("answered"),
        Ok(Persisted::Local(_)) if remote => {
            panic!("written here: its state partition is led here")
        }
        // After a failover the share-partition leader may lead the state partition too.
        Ok(Persisted::Local(written)) => {
            match sluice::internal_topic::committed(&written, 5_000).await {
                Ok(()) => 0,
                Err(e) => panic!("not committed: {e:?}"),
            }
        }
        Err(code) => code,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_state_led_elsewhere_is_written_there_and_survives_that_leaders_stop() {
    let dir = tempfile::tempdir().unwrap();
    let failover = [
        ("KAFKA_REPLICA_LAG_TIME_MAX_MS", "3000"),
        ("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300"),
        ("KAFKA_BROKER_SESSION_TIMEOUT_MS", "2000"),
        ("KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS", "1000"),
    ];
    let mut nodes = started(dir.path(), &failover, &[]).await;
    let first = node(&nodes, 1).broker.clone();
    let data_leader = leader_of(&nodes, 1, "shared", 0).unwrap();
    let topic_id = first.image().topic("shared").unwrap().id;

    // A group whose key's state partition another broker leads.
    let (key, state_partition, state_leader) = (0..100)
        .find_map(|i| {
            let key = ShareKey::new(&format!("g{i}"), (topic_id, 0));
            let p = sluice::group::records::partition_for(&coordinator_key(&key), STATE_PARTITIONS);
            let leader = leader_of(&nodes, 1, SHARE_STATE_TOPIC, p)?;
            (leader != data_leader).then_some((key, p, leader))
        })
        .expect("a group led elsewhere");
    let b = node(&nodes, data_leader).broker.clone();

    // Without state the coordinator refuses a write; the share-partition's first use
    // initializes it (as `share_preload` does), then the write goes through.
    assert_eq!(
        share_state::remote::read(&b, state_partition, &key, 0).await,
        Ok(None)
    );
    let init = remote::Job::Initialize {
        key: key.clone(),
        state_epoch: 0,
        start_offset: 0,
    };
    b.share_remote
        .submit(state_partition, init)
        .expect("queued");
    let acked = vec![batch(0, 4, RecordState::Acknowledged)];
    assert_eq!(write(&b, &key, acked.clone(), true).await, 0);
    let held = node(&nodes, state_leader)
        .broker
        .share_state
        .lock()
        .read(&key)
        .cloned();
    assert_eq!(held.expect("held by the state leader").state_batches, acked);
    let read = remote::read(&b, state_partition, &key, 0)
        .await
        .expect("read");
    assert_eq!(read.expect("state").state_batches, acked);

    // The state partition's leader stops: another replica leads it, reloads, answers the same.
    nodes[(state_leader - 1) as usize]
        .take()
        .unwrap()
        .shutdown()
        .await;
    let new_leader = wait_for("a new leader of the state partition", 30, async || {
        leader_of(&nodes, data_leader, SHARE_STATE_TOPIC, state_partition)
            .filter(|l| *l != state_leader)
    })
    .await;
    assert_ne!(new_leader, state_leader);
    let read = wait_for("the new leader to answer", 30, async || {
        remote::read(&b, state_partition, &key, 0)
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(read.state_batches, acked);

    // The next write reaches the new leader and folds into the reloaded state.
    let archived = vec![batch(5, 6, RecordState::Archived)];
    assert_eq!(write(&b, &key, archived, false).await, 0);
    let read = remote::read(&b, state_partition, &key, 0)
        .await
        .expect("read");
    assert_eq!(
        read.expect("state").state_batches,
        vec![
            batch(0, 4, RecordState::Acknowledged),
            batch(5, 6, RecordState::Archived)
        ]
    );

    // DescribeShareGroupOffsets' read (ReadShareGroupStateSummary wherever the key is led).
    let summary = share_state::summary_anywhere(&b, &key)
        .await
        .expect("summary");
    assert_eq!(summary.map(|(start, _)| start), Some(0));

    // AlterShareGroupOffsets' initialization: a new start offset and state epoch there; a
    // share-partition leader still writing the old state epoch is fenced.
    let now = sluice::broker::now_ms();
    let initialized = share_state::initialize(&b, &[(key.clone(), 3)], now);
    assert!(initialized.failed.is_empty());
    let mut codes = Vec::new();
    for (_, answer) in initialized.remote {
        codes.push(answer.await.expect("answered"));
    }
    if codes.is_empty() {
        // The share-partition leader leads the state partition now: written here.
        let done = sluice::internal_topic::committed(&initialized.written, 5_000).await;
        assert!(done.is_ok());
    } else {
        assert_eq!(codes, vec![0]);
    }
    let summary = share_state::summary_anywhere(&b, &key)
        .await
        .expect("summary");
    assert_eq!(summary.map(|(start, _)| start), Some(3));
    let stale = write(
        &b,
        &key,
        vec![batch(7, 7, RecordState::Acknowledged)],
        false,
    )
    .await;
    assert_eq!(stale, sluice::share::coordinator::FENCED_STATE_EPOCH);

    // DeleteShareGroupOffsets' delete reaches the key's coordinator too.
    let now = sluice::broker::now_ms();
    let deleted = share_state::delete_topics(&b, &key.group_id, &[topic_id], now);
    assert!(deleted.failed.is_empty());
    for (_, answer) in deleted.remote {
        assert_eq!(answer.await.expect("answered"), 0);
    }
    assert!(sluice::internal_topic::committed(&deleted.written, 5_000)
        .await
        .is_ok());
    let summary = share_state::summary_anywhere(&b, &key)
        .await
        .expect("summary");
    assert_eq!(summary, None);

    for n in nodes.into_iter().flatten() {
        n.shutdown().await;
    }
}

/// DeleteGroups of an Empty share group deletes its share-partitions' state where it is held,
/// at the broker leading each key's state partition (not only on the group coordinator's
/// broker), before the group goes, as Kafka's `deleteShareGroups` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_groups_deletes_share_state_held_by_another_broker() {
    use kafka_protocol::messages::alter_share_group_offsets_request::{
        AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
    };
    use kafka_protocol::messages::{
        AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteGroupsRequest,
        DeleteGroupsResponse, GroupId,
    };
    use kafka_protocol::protocol::StrBytes;

    let dir = tempfile::tempdir().unwrap();
    let offsets = sluice::group::OFFSETS_TOPIC;
    let nodes = started(
        dir.path(),
        &[
            ("KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS", "3"),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "3"),
        ],
        &[offsets],
    )
    .await;
    let first = node(&nodes, 1).broker.clone();
    let topic_id = first.image().topic("shared").unwrap().id;

    // A group whose coordinator is not the broker that holds its key's share state.
    let (key, coordinator, holder) = (0..200)
        .find_map(|i| {
            let group = format!("sg{i}");
            let key = ShareKey::new(&group, (topic_id, 0));
            let state = sluice::group::records::partition_for(&coordinator_key(&key), 3);
            let holder = leader_of(&nodes, 1, SHARE_STATE_TOPIC, state)?;
            let at = sluice::group::records::partition_for(&group, 3);
            let coordinator = leader_of(&nodes, 1, offsets, at)?;
            (coordinator != holder).then_some((key, coordinator, holder))
        })
        .expect("a group coordinated away from its share state");
    let port = node(&nodes, coordinator).local_addr.port();
    let group = GroupId(StrBytes::from_string(key.group_id.clone()));

    // AlterShareGroupOffsets creates the Empty share group and initializes its state.
    let alter = AlterShareGroupOffsetsRequest::default()
        .with_group_id(group.clone())
        .with_topics(vec![AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(common::wire::name("shared"))
            .with_partitions(vec![
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(0)
                    .with_start_offset(0),
            ])]);
    let answer: AlterShareGroupOffsetsResponse = ask(port, 0, &alter).await;
    assert_eq!(answer.error_code, 0);
    let codes: Vec<i16> = answer
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes, vec![0]);
    let held = || {
        node(&nodes, holder)
            .broker
            .share_state
            .lock()
            .read(&key)
            .cloned()
    };
    assert_eq!(
        held().map(|s| s.start_offset),
        Some(0),
        "the holder has the state"
    );
    let b = node(&nodes, coordinator).broker.clone();
    assert!(
        b.share_state.lock().read(&key).is_none(),
        "not held at the coordinator"
    );

    let delete = DeleteGroupsRequest::default().with_groups_names(vec![group.clone()]);
    let answer: DeleteGroupsResponse = ask(port, 2, &delete).await;
    let results: Vec<(String, i16)> = answer
        .results
        .iter()
        .map(|r| (r.group_id.to_string(), r.error_code))
        .collect();
    assert_eq!(results, vec![(key.group_id.clone(), 0)]);
    assert!(held().is_none(), "the holder's state is deleted");
    let summary = share_state::summary_anywhere(&b, &key).await;
    assert_eq!(summary, Ok(None));

    // The group is gone: a second delete does not find it.
    let answer: DeleteGroupsResponse = ask(port, 2, &delete).await;
    assert_eq!(answer.results[0].error_code, 69, "GROUP_ID_NOT_FOUND");

    for n in nodes.into_iter().flatten() {
        n.shutdown().await;
    }
}
