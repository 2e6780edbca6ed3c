//! The share-state RPCs on one broker that leads its one `__share_group_state` partition:
//! Kafka 4.1.2's answers for a share-partition's life (initialize, read, write, summary,
//! delete), its refusals, and a reload after the state partition is gained.

use super::*;
use crate::config::Config;
use crate::share::partition::RecordState;

async fn broker() -> (tempfile::TempDir, Arc<Broker>, Uuid) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        share_coordinator_state_topic_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    crate::share_state::ensure_topic(&b).await;
    let t = b.replicas.create_topic_for_test("t", 2, &[]);
    (dir, b, t.id)
}

/// Serves one partition `p` of topic `id` for group "g"; its outcome.
async fn one(b: &Arc<Broker>, id: Uuid, p: i32, op: Op) -> Outcome {
    let answered = serve(b.clone(), ("g".to_string(), vec![(id, vec![(p, op)])])).await;
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, id);
    assert_eq!(answered[0].1.len(), 1);
    answered[0].1[0].1.clone()
}

fn write(state_epoch: i32, leader_epoch: i32, first: i64, last: i64) -> Op {
    Op::Write(WriteState {
        state_epoch,
        leader_epoch,
        start_offset: -1,
        state_batches: vec![PersisterStateBatch::new(
            first,
            last,
            RecordState::Acknowledged,
            1,
        )],
    })
}

#[tokio::test]
async fn a_share_partitions_state_is_initialized_read_written_summarized_and_deleted() {
    let (_dir, b, id) = broker().await;
    let init = Op::Initialize {
        state_epoch: 3,
        start_offset: 10,
    };
    assert_eq!(one(&b, id, 1, init).await, Outcome::default());

    // Read at leader epoch 2 (newer than the initialized 0): the state, and the epoch stored.
    let read = one(&b, id, 1, Op::Read { leader_epoch: 2 }).await;
    assert_eq!(read.code, codes::NONE);
    let s = read.state.expect("state");
    assert_eq!((s.state_epoch, s.start_offset, s.leader_epoch), (3, 10, 2));
    assert!(s.state_batches.is_empty());

    assert_eq!(
        one(&b, id, 1, write(3, 2, 12, 14)).await,
        Outcome::default()
    );
    let s = one(&b, id, 1, Op::Read { leader_epoch: 2 })
        .await
        .state
        .unwrap();
    assert_eq!(
        s.state_batches,
        vec![PersisterStateBatch::new(
            12,
            14,
            RecordState::Acknowledged,
            1
        )]
    );

    let summary = one(&b, id, 1, Op::Summary).await.state.expect("state");
    assert_eq!(
        (
            summary.state_epoch,
            summary.leader_epoch,
            summary.start_offset
        ),
        (3, 2, 10)
    );

    assert_eq!(one(&b, id, 1, Op::Delete).await, Outcome::default());
    assert_eq!(one(&b, id, 1, Op::Summary).await, Outcome::default());
    // Deleting again: nothing to delete, still a success.
    assert_eq!(one(&b, id, 1, Op::Delete).await, Outcome::default());

    // Every change reached the log: a coordinator replaying it has no state for the key.
    let mut replayed = crate::share::coordinator::ShareCoordinator::new(500);
    crate::share_state::ensure_loaded(&b, &mut replayed, 0);
    let key = ShareKey::new("g", (id, 1));
    assert_eq!(replayed.read(&key), None);
}

#[tokio::test]
async fn refusals_are_kafkas() {
    let (_dir, b, id) = broker().await;
    let uninitialized = one(&b, id, 0, Op::Read { leader_epoch: 0 }).await;
    assert_eq!(uninitialized.code, codes::INVALID_REQUEST);
    assert_eq!(
        uninitialized.message.as_deref(),
        Some("Read operation on uninitialized share partition not allowed.")
    );
    let uninitialized = one(&b, id, 0, write(0, 0, 0, 0)).await;
    assert_eq!(
        uninitialized.message.as_deref(),
        Some("Write operation on uninitialized share partition not allowed.")
    );
    let negative = one(&b, id, -1, Op::Summary).await;
    assert_eq!(
        (negative.code, negative.message.as_deref()),
        (
            codes::INVALID_REQUEST,
            Some("The partition id cannot be a negative number.")
        )
    );
    let unknown = one(&b, Uuid::from_u128(99), 0, Op::Summary).await;
    assert_eq!(unknown.code, codes::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        one(&b, id, 2, Op::Delete).await.code,
        codes::UNKNOWN_TOPIC_OR_PARTITION
    );

    let init = Op::Initialize {
        state_epoch: 2,
        start_offset: 0,
    };
    assert_eq!(one(&b, id, 0, init).await.code, codes::NONE);
    // Leader epoch -1 is older than the initialized 0 (Kafka 4.1.2 does not exempt it).
    assert_eq!(
        one(&b, id, 0, Op::Read { leader_epoch: -1 }).await.code,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        one(&b, id, 0, write(1, 0, 0, 0)).await.code,
        FENCED_STATE_EPOCH
    );
    assert_eq!(one(&b, id, 0, write(-1, 5, 0, 0)).await.code, codes::NONE);
    assert_eq!(
        one(&b, id, 0, write(-1, 4, 1, 1)).await.code,
        FENCED_LEADER_EPOCH
    );
    let stale = Op::Initialize {
        state_epoch: 1,
        start_offset: 0,
    };
    assert_eq!(one(&b, id, 0, stale).await.code, FENCED_STATE_EPOCH);

    let mut many = WriteState {
        state_epoch: -1,
        leader_epoch: -1,
        start_offset: -1,
        state_batches: Vec::new(),
    };
    many.state_batches = (0..=MAX_STATE_BATCHES as i64)
        .map(|o| PersisterStateBatch::new(o * 2, o * 2, RecordState::Archived, 1))
        .collect();
    assert_eq!(
        one(&b, id, 0, Op::Write(many)).await.code,
        codes::INVALID_REQUEST
    );

    // The state partition is a follower here (leadership moved): NOT_COORDINATOR.
    let p = b.replicas.partition(SHARE_STATE_TOPIC, 0).expect("hosted");
    p.make_follower(99, p.leader_epoch() + 1);
    let moved = one(&b, id, 0, Op::Delete).await;
    assert_eq!(
        (moved.code, moved.message.as_deref()),
        (
            codes::NOT_COORDINATOR,
            Some("Unable to delete share group state: This is not the correct coordinator.")
        )
    );
}

#[tokio::test]
async fn empty_requests_have_no_results_and_duplicates_one() {
    let (_dir, b, id) = broker().await;
    let init = |e| Op::Initialize {
        state_epoch: e,
        start_offset: 0,
    };
    let none = shaped(
        &StrBytes::from_static_str(""),
        vec![(id, vec![(0, ())])],
        false,
        |()| Op::Summary,
    );
    assert!(none.is_none());
    let empty_topic = vec![(id, vec![(0, ())]), (Uuid::from_u128(5), vec![])];
    assert!(shaped(
        &StrBytes::from_static_str("g"),
        empty_topic.clone(),
        false,
        |()| { Op::Summary }
    )
    .is_none());
    let kept = shaped(&StrBytes::from_static_str("g"), empty_topic, true, |()| {
        init(0)
    });
    assert_eq!(kept.as_ref().map(|(_, t)| t.len()), Some(1));

    // The same partition twice: one answer, the last one's.
    let twice = vec![(id, vec![(0, init(4)), (0, init(2))])];
    let answered = serve(b.clone(), ("g".to_string(), twice)).await;
    assert_eq!(answered[0].1.len(), 1);
    assert_eq!(answered[0].1[0].1.code, FENCED_STATE_EPOCH);
}

#[tokio::test]
async fn a_gained_state_partition_is_reloaded_from_its_log() {
    let (_dir, b, id) = broker().await;
    let init = Op::Initialize {
        state_epoch: 0,
        start_offset: 5,
    };
    assert_eq!(one(&b, id, 0, init).await.code, codes::NONE);
    assert_eq!(one(&b, id, 0, write(0, 1, 5, 6)).await.code, codes::NONE);
    let key = ShareKey::new("g", (id, 0));
    // What another leader wrote reaches the log but not this coordinator's memory: here, the
    // memory forgets it.
    b.share_state.lock().forget(|_| true);
    assert_eq!(b.share_state.lock().read(&key), None);
    // At the same leader epoch nothing is reloaded; at another, the log is replayed.
    crate::share_state::ensure_fresh(&b, 0).await;
    assert_eq!(b.share_state.lock().read(&key), None);
    b.share_state.lock().loaded_epochs.clear();
    assert!(!crate::share_state::is_fresh(&b, 0));
    crate::share_state::ensure_fresh(&b, 0).await;
    assert!(crate::share_state::is_fresh(&b, 0));
    let s = b.share_state.lock().read(&key).cloned().expect("reloaded");
    assert_eq!(s.start_offset, 5);
    assert_eq!(
        s.state_batches,
        vec![PersisterStateBatch::new(5, 6, RecordState::Acknowledged, 1)]
    );
}
