use proptest::prelude::*;

use super::*;

/// Simulated time starts far from 0: Kafka's "never caught up" is time 0, which must be older
/// than `replica.lag.time.max.ms`.
const T0: i64 = 1_000_000;
const LAG: i64 = DEFAULT_REPLICA_LAG_TIME_MAX_MS;

fn config(min_insync_replicas: i32) -> LeaderConfig {
    LeaderConfig {
        replica_lag_time_max_ms: LAG,
        min_insync_replicas,
    }
}

fn registration(leader_epoch: i32, partition_epoch: i32, isr: &[BrokerId]) -> LeaderAndIsr {
    LeaderAndIsr {
        leader_epoch,
        partition_epoch,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
    }
}

/// Broker 1 leads a 3-replica partition, all in sync, at epoch 1, empty log.
fn leader3(min_insync_replicas: i32) -> PartitionLeader {
    let (leader, effects) = PartitionLeader::become_leader(
        1,
        config(min_insync_replicas),
        &registration(1, 10, &[1, 2, 3]),
        0,
        0,
        T0,
    );
    assert_eq!(
        effects,
        vec![Effect::AssignEpochStartOffset(EpochEntry {
            epoch: 1,
            start_offset: 0
        })]
    );
    leader
}

fn fetch(leader: &mut PartitionLeader, id: BrokerId, offset: i64, now: i64) -> Vec<Effect> {
    leader
        .on_follower_fetch(
            FollowerFetch {
                replica_id: id,
                current_leader_epoch: Some(leader.leader_epoch()),
                fetch_offset: offset,
                log_start_offset: 0,
            },
            now,
        )
        .expect("fetch accepted")
}

fn hw(from: i64, to: i64) -> Effect {
    Effect::HighWatermarkAdvanced { from, to }
}

fn proposal_of(effects: &[Effect]) -> AlterPartitionProposal {
    match effects {
        [Effect::SendAlterPartition(p)] => p.clone(),
        other => panic!("expected one AlterPartition, got {other:?}"),
    }
}

fn commit(p: &AlterPartitionProposal) -> AlterPartitionResponse {
    AlterPartitionResponse::Committed {
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch + 1,
        isr: p.new_isr.clone(),
    }
}

#[test]
fn high_watermark_is_the_smallest_isr_log_end() {
    let mut l = leader3(2);
    assert!(l.on_append(10, T0).is_empty(), "followers unknown yet");
    assert!(fetch(&mut l, 2, 10, T0 + 1).is_empty(), "3 still unknown");
    assert_eq!(fetch(&mut l, 3, 4, T0 + 2), vec![hw(0, 4)]);
    assert_eq!(fetch(&mut l, 3, 10, T0 + 3), vec![hw(4, 10)]);
    assert_eq!(l.high_watermark(), 10);
    // A repeated fetch at the same offset changes nothing.
    assert!(fetch(&mut l, 3, 10, T0 + 4).is_empty());
}

#[test]
fn isr_of_one_advances_on_append() {
    let (mut l, _) = PartitionLeader::become_leader(
        1,
        config(1),
        &LeaderAndIsr {
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        0,
        0,
        T0,
    );
    assert_eq!(l.on_append(3, T0), vec![hw(0, 3)]);
    assert_eq!(l.check_acks_all_append(), Ok(()));
}

#[test]
fn become_leader_caps_the_checkpointed_high_watermark_at_the_log_end() {
    let (l, _) =
        PartitionLeader::become_leader(1, config(1), &registration(2, 3, &[1, 2, 3]), 7, 50, T0);
    assert_eq!(l.high_watermark(), 7);
    assert_eq!(l.leader_epoch_start_offset(), 7);
    assert_eq!(
        l.follower(2),
        Some(&FollowerState {
            log_start_offset: UNKNOWN_OFFSET,
            log_end_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: UNKNOWN_OFFSET,
            last_fetch_time_ms: 0,
            last_caught_up_time_ms: T0,
        })
    );
}

/// Follower 3 stops; after `replica.lag.time.max.ms` the leader proposes dropping it; the HW waits
/// for it until the controller commits, then moves.
#[test]
fn shrink_after_lag_time_then_commit_advances_the_high_watermark() {
    let mut l = leader3(2);
    l.on_append(10, T0);
    fetch(&mut l, 2, 10, T0 + 10);
    fetch(&mut l, 3, 10, T0 + 10);
    assert_eq!(l.high_watermark(), 10);
    l.on_append(20, T0 + 100);
    assert!(fetch(&mut l, 2, 20, T0 + 200).is_empty(), "3 holds the HW");
    // 3 was last caught up at T0 + 10.
    assert!(l.maybe_shrink_isr(T0 + 10 + LAG).is_empty());
    assert_eq!(l.out_of_sync_replicas(T0 + 11 + LAG), BTreeSet::from([3]));
    // 2 keeps fetching and stays caught up.
    fetch(&mut l, 2, 20, T0 + LAG);
    let shrink = l.maybe_shrink_isr(T0 + 11 + LAG);
    let p = proposal_of(&shrink);
    assert_eq!(
        p,
        AlterPartitionProposal {
            leader_id: 1,
            leader_epoch: 1,
            partition_epoch: 10,
            new_isr: vec![1, 2],
        }
    );
    // In flight: no second proposal, and the HW still waits for 3 (maximal ISR).
    assert!(l.maybe_shrink_isr(T0 + 12 + LAG).is_empty());
    assert!(l.out_of_sync_replicas(T0 + 12 + LAG).is_empty());
    assert_eq!(l.maximal_isr(), BTreeSet::from([1, 2, 3]));
    assert!(l.on_append(21, T0 + 13 + LAG).is_empty());
    assert_eq!(l.high_watermark(), 10);
    let effects = l.on_alter_partition_response(&p, commit(&p), T0 + 14 + LAG);
    assert_eq!(
        effects,
        vec![
            Effect::IsrCommitted {
                isr: vec![1, 2],
                partition_epoch: 11
            },
            hw(10, 20)
        ]
    );
    assert_eq!(l.partition_epoch(), 11);
    assert!(l.in_flight().is_none());
}

/// A follower out of the ISR that reaches the HW within the leader's epoch is proposed back; the
/// HW waits for it as soon as the proposal is in flight.
#[test]
fn expand_when_a_follower_reaches_the_high_watermark() {
    let (mut l, _) =
        PartitionLeader::become_leader(1, config(2), &registration(1, 10, &[1, 2]), 0, 0, T0);
    l.on_append(20, T0);
    assert_eq!(fetch(&mut l, 2, 20, T0 + 1), vec![hw(0, 20)]);
    // 3 is behind the HW: no proposal, and (not caught up for LAG) it does not hold the HW.
    assert!(fetch(&mut l, 3, 5, T0 + LAG + 1).is_empty());
    l.on_append(30, T0 + LAG + 2);
    assert_eq!(fetch(&mut l, 2, 30, T0 + LAG + 3), vec![hw(20, 30)]);
    // 3 reaches the HW: proposed.
    let effects = fetch(&mut l, 3, 30, T0 + LAG + 4);
    let p = proposal_of(&effects);
    assert_eq!(p.new_isr, vec![1, 2, 3]);
    assert_eq!(l.maximal_isr(), BTreeSet::from([1, 2, 3]));
    assert_eq!(l.isr(), &BTreeSet::from([1, 2]));
    // While pending, 3 counts: 2 alone cannot move the HW.
    l.on_append(40, T0 + LAG + 5);
    assert!(fetch(&mut l, 2, 40, T0 + LAG + 6).is_empty());
    assert_eq!(fetch(&mut l, 3, 40, T0 + LAG + 7), vec![hw(30, 40)]);
    let effects = l.on_alter_partition_response(&p, commit(&p), T0 + LAG + 8);
    assert_eq!(
        effects,
        vec![Effect::IsrCommitted {
            isr: vec![1, 2, 3],
            partition_epoch: 11
        }]
    );
}

#[test]
fn expand_needs_the_leader_epochs_start_offset() {
    // New leader at LEO 50 whose HW (checkpointed) is 40; ISR follower 2 (not heard from yet)
    // holds the HW there.
    let (mut l, effects) =
        PartitionLeader::become_leader(1, config(1), &registration(4, 10, &[1, 2]), 50, 40, T0);
    assert_eq!(effects.len(), 1, "only the epoch assignment: {effects:?}");
    assert_eq!(l.high_watermark(), 40);
    assert!(
        fetch(&mut l, 3, 45, T0 + 1).is_empty(),
        "above HW, below epoch start"
    );
    assert!(l.in_flight().is_none());
    let p = proposal_of(&fetch(&mut l, 3, 50, T0 + 2));
    assert_eq!(p.new_isr, vec![1, 2, 3]);
}

#[test]
fn an_ineligible_broker_is_not_proposed() {
    let (mut l, _) =
        PartitionLeader::become_leader(1, config(1), &registration(1, 10, &[1]), 0, 0, T0);
    l.set_ineligible_brokers(BTreeSet::from([2]));
    assert!(fetch(&mut l, 2, 0, T0 + 1).is_empty());
    l.set_ineligible_brokers(BTreeSet::new());
    assert_eq!(
        proposal_of(&fetch(&mut l, 2, 0, T0 + 2)).new_isr,
        vec![1, 2]
    );
}

/// Kafka's "previous fetch" rule: a follower that always fetches up to the leader's end *at its
/// previous fetch* stays caught up under a steady stream of produces, however long it lasts.
#[test]
fn a_follower_chasing_a_moving_log_end_stays_in_sync() {
    let mut l = leader3(1);
    fetch(&mut l, 3, 0, T0);
    let mut leo = 0;
    let mut now = T0;
    for _ in 0..100 {
        now += 1_000;
        let previous_leo = leo;
        leo += 10;
        l.on_append(leo, now);
        fetch(&mut l, 2, previous_leo, now);
        fetch(&mut l, 3, previous_leo, now);
        assert!(l.maybe_shrink_isr(now).is_empty(), "shrunk at {now}");
    }
    let f = l.follower(2).expect("replica 2");
    assert_eq!(f.last_caught_up_time_ms, now - 1_000);
    assert_eq!(f.log_end_offset, leo - 10);
    assert_eq!(l.high_watermark(), leo - 10);
}

/// A follower lags (fetching behind for longer than the lag time), is dropped, then catches up and
/// is proposed back.
#[test]
fn a_follower_that_lags_then_catches_up() {
    let mut l = leader3(2);
    let mut now = T0;
    let mut leo = 0;
    for _ in 0..40 {
        now += 1_000;
        leo += 100;
        l.on_append(leo, now);
        fetch(&mut l, 2, leo, now);
        // 3 fetches, but only a fixed 500 behind a fast-moving end: never "caught up".
        fetch(&mut l, 3, (leo - 500).max(0), now);
        let effects = l.maybe_shrink_isr(now);
        if let [Effect::SendAlterPartition(p)] = &effects[..] {
            assert_eq!(p.new_isr, vec![1, 2]);
            let done = l.on_alter_partition_response(p, commit(p), now);
            assert!(matches!(done[0], Effect::IsrCommitted { .. }));
        }
    }
    assert_eq!(l.isr(), &BTreeSet::from([1, 2]), "3 dropped");
    assert_eq!(l.high_watermark(), leo, "HW follows the ISR without 3");
    // 3 catches up to the HW: proposed back.
    now += 1_000;
    let p = proposal_of(&fetch(&mut l, 3, leo, now));
    assert_eq!(p.new_isr, vec![1, 2, 3]);
    l.on_alter_partition_response(&p, commit(&p), now);
    assert_eq!(l.isr(), &BTreeSet::from([1, 2, 3]));
}

#[test]
fn under_min_isr_the_high_watermark_stops_and_acks_all_is_refused() {
    let mut l = leader3(2);
    l.on_append(10, T0);
    fetch(&mut l, 2, 10, T0);
    fetch(&mut l, 3, 10, T0);
    // Idle followers with the leader's whole log stay in sync; behind a newer append they do not.
    assert!(l.maybe_shrink_isr(T0 + LAG + 1).is_empty());
    l.on_append(15, T0 + LAG + 1);
    let p = proposal_of(&l.maybe_shrink_isr(T0 + LAG + 1));
    assert_eq!(p.new_isr, vec![1]);
    l.on_alter_partition_response(&p, commit(&p), T0 + LAG + 2);
    assert_eq!(
        l.check_acks_all_append(),
        Err(NotEnoughReplicas {
            isr_size: 1,
            min_isr: 2
        })
    );
    assert!(
        l.on_append(20, T0 + LAG + 3).is_empty(),
        "HW frozen under min ISR"
    );
    assert_eq!(l.high_watermark(), 10);
    assert_eq!(
        l.replication_view(),
        ReplicationView {
            high_watermark: 10,
            maximal_isr_size: 1,
            effective_min_isr: 2
        }
    );
}

#[test]
fn alter_partition_errors() {
    let mut l = leader3(1);
    l.on_append(10, T0);
    let p = proposal_of(&l.maybe_shrink_isr(T0 + LAG + 1));
    // A stale answer (to another proposal) is ignored.
    let other = AlterPartitionProposal {
        partition_epoch: 9,
        ..p.clone()
    };
    assert!(l
        .on_alter_partition_response(&other, commit(&other), T0 + LAG + 2)
        .is_empty());
    assert!(l.in_flight().is_some());
    // A commit in another leader epoch is ignored.
    let wrong_epoch = AlterPartitionResponse::Committed {
        leader_epoch: 7,
        partition_epoch: 11,
        isr: vec![1],
    };
    assert!(l
        .on_alter_partition_response(&p, wrong_epoch, T0 + LAG + 2)
        .is_empty());
    assert!(l.in_flight().is_some());
    // Unknown errors retry the same proposal.
    let retry = l.on_alter_partition_response(
        &p,
        AlterPartitionResponse::Error(AlterPartitionError::Other(15)),
        T0 + LAG + 3,
    );
    assert_eq!(retry, vec![Effect::SendAlterPartition(p.clone())]);
    // INVALID_UPDATE_VERSION keeps it pending (until metadata resolves it).
    for e in [
        AlterPartitionError::InvalidUpdateVersion,
        AlterPartitionError::FencedLeaderEpoch,
        AlterPartitionError::NewLeaderElected,
        AlterPartitionError::UnknownTopicId,
        AlterPartitionError::UnknownTopicOrPartition,
        AlterPartitionError::InvalidRequest,
    ] {
        assert!(l
            .on_alter_partition_response(&p, AlterPartitionResponse::Error(e), T0 + LAG + 4)
            .is_empty());
        assert!(l.in_flight().is_some());
        assert!(l.maybe_shrink_isr(T0 + LAG + 5).is_empty());
    }
    // OPERATION_NOT_ATTEMPTED: back to the committed ISR; the next check proposes again.
    assert!(l
        .on_alter_partition_response(
            &p,
            AlterPartitionResponse::Error(AlterPartitionError::OperationNotAttempted),
            T0 + LAG + 6
        )
        .is_empty());
    assert!(l.in_flight().is_none());
    assert_eq!(l.isr(), &BTreeSet::from([1, 2, 3]));
    assert_eq!(proposal_of(&l.maybe_shrink_isr(T0 + LAG + 7)), p);
}

#[test]
fn error_codes_map_to_kafka_names() {
    assert_eq!(AlterPartitionError::from_code(0), None);
    assert_eq!(
        AlterPartitionError::from_code(95),
        Some(AlterPartitionError::InvalidUpdateVersion)
    );
    assert_eq!(
        AlterPartitionError::from_code(74),
        Some(AlterPartitionError::FencedLeaderEpoch)
    );
    assert_eq!(
        AlterPartitionError::from_code(106),
        Some(AlterPartitionError::NewLeaderElected)
    );
    assert_eq!(
        AlterPartitionError::from_code(107),
        Some(AlterPartitionError::IneligibleReplica)
    );
    assert_eq!(
        AlterPartitionError::from_code(55),
        Some(AlterPartitionError::OperationNotAttempted)
    );
    assert_eq!(
        AlterPartitionError::from_code(100),
        Some(AlterPartitionError::UnknownTopicId)
    );
    assert_eq!(
        AlterPartitionError::from_code(41),
        Some(AlterPartitionError::Other(41))
    );
}

#[test]
fn a_newer_registration_replaces_the_pending_change_and_an_older_one_is_ignored() {
    let mut l = leader3(1);
    l.on_append(10, T0);
    let p = proposal_of(&l.maybe_shrink_isr(T0 + LAG + 1));
    assert!(l
        .on_leader_and_isr(&registration(1, 9, &[1]), T0 + LAG + 2)
        .is_empty());
    assert!(l.in_flight().is_some(), "older partition epoch ignored");
    // The controller committed {1, 2} meanwhile (seen through metadata).
    let effects = l.on_leader_and_isr(&registration(1, 11, &[1, 2]), T0 + LAG + 3);
    assert!(effects.is_empty(), "2 and 3 unknown: HW stays");
    assert!(l.in_flight().is_none());
    assert_eq!(l.isr(), &BTreeSet::from([1, 2]));
    // The late answer to the replaced proposal is ignored.
    assert!(l
        .on_alter_partition_response(&p, commit(&p), T0 + LAG + 4)
        .is_empty());
    assert_eq!(l.partition_epoch(), 11);
    // A new leader epoch starts at the current log end.
    let effects = l.on_leader_and_isr(&registration(2, 12, &[1, 2]), T0 + LAG + 5);
    assert_eq!(
        effects,
        vec![Effect::AssignEpochStartOffset(EpochEntry {
            epoch: 2,
            start_offset: 10
        })]
    );
    assert_eq!(l.leader_epoch_start_offset(), 10);
}

/// Seed 85871: the registration the leader holds, seen again, must not drop a pending expansion
/// (the controller may have committed it): the HW stays bounded by the added replica.
#[test]
fn the_same_registration_again_keeps_a_pending_expansion() {
    let (mut l, _) =
        PartitionLeader::become_leader(1, config(2), &registration(1, 10, &[1, 2]), 0, 0, T0);
    l.on_append(3, T0);
    assert_eq!(fetch(&mut l, 2, 3, T0 + 1), vec![hw(0, 3)]);
    let p = proposal_of(&fetch(&mut l, 3, 3, T0 + 2));
    assert_eq!(p.new_isr, vec![1, 2, 3]);
    assert!(l
        .on_leader_and_isr(&registration(1, 10, &[1, 2]), T0 + 3)
        .is_empty());
    assert_eq!(l.in_flight().map(|f| f.proposal.clone()), Some(p));
    assert_eq!(l.maximal_isr(), BTreeSet::from([1, 2, 3]));
    // 3 is still at 3: 2 alone does not move the HW past it.
    l.on_append(13, T0 + 4);
    assert!(fetch(&mut l, 2, 13, T0 + 5).is_empty());
    assert_eq!(l.high_watermark(), 3);
}

#[test]
fn fetches_from_other_epochs_or_brokers_are_rejected() {
    let mut l = leader3(1);
    let mut f = FollowerFetch {
        replica_id: 2,
        current_leader_epoch: Some(0),
        fetch_offset: 0,
        log_start_offset: 0,
    };
    assert_eq!(
        l.on_follower_fetch(f, T0),
        Err(FetchRejected::FencedLeaderEpoch {
            fetch_epoch: 0,
            leader_epoch: 1
        })
    );
    f.current_leader_epoch = Some(2);
    assert_eq!(
        l.on_follower_fetch(f, T0),
        Err(FetchRejected::UnknownLeaderEpoch {
            fetch_epoch: 2,
            leader_epoch: 1
        })
    );
    f.current_leader_epoch = None;
    f.replica_id = 9;
    assert_eq!(
        l.on_follower_fetch(f, T0),
        Err(FetchRejected::NotAssignedReplica(9))
    );
    f.replica_id = 2;
    assert_eq!(l.on_follower_fetch(f, T0), Ok(vec![]));
    assert_eq!(l.follower(2).map(|s| s.log_end_offset), Some(0));
}

#[derive(Debug, Clone)]
enum Event {
    Append(i64),
    Fetch(BrokerId, i64),
    Shrink,
    Answer(bool),
    Advance(i64),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        3 => (1i64..50).prop_map(Event::Append),
        6 => (2i32..=3, 0i64..=100).prop_map(|(id, back)| Event::Fetch(id, back)),
        1 => Just(Event::Shrink),
        1 => any::<bool>().prop_map(Event::Answer),
        2 => (0i64..20_000).prop_map(Event::Advance),
    ]
}

proptest! {
    /// Whatever follower fetches, appends, shrinks, answers and delays: the HW never moves back,
    /// never passes the leader's log end or any maximal-ISR follower's log end when it moves, the
    /// ISR always holds the leader, and a commit never loses a record below the HW from the ISR.
    #[test]
    fn high_watermark_never_moves_back(
        min_isr in 1i32..=3,
        events in prop::collection::vec(event(), 1..200),
    ) {
        let (mut l, _) = PartitionLeader::become_leader(
            1, config(min_isr), &registration(1, 10, &[1, 2, 3]), 0, 0, T0);
        let mut now = T0;
        let mut last_hw = l.high_watermark();
        for ev in events {
            let effects = match ev {
                Event::Append(n) => l.on_append(l.log_end_offset() + n, now),
                Event::Fetch(id, back) => {
                    let offset = (l.log_end_offset() - back).max(0);
                    fetch(&mut l, id, offset, now)
                }
                Event::Shrink => l.maybe_shrink_isr(now),
                Event::Answer(ok) => match l.in_flight().cloned() {
                    Some(f) => {
                        let response = if ok {
                            commit(&f.proposal)
                        } else {
                            AlterPartitionResponse::Error(AlterPartitionError::OperationNotAttempted)
                        };
                        l.on_alter_partition_response(&f.proposal, response, now)
                    }
                    None => Vec::new(),
                },
                Event::Advance(ms) => {
                    now += ms;
                    Vec::new()
                }
            };
            for e in &effects {
                if let Effect::HighWatermarkAdvanced { from, to } = e {
                    prop_assert!(to > from);
                    prop_assert_eq!(*from, last_hw);
                    for id in l.maximal_isr() {
                        if let Some(f) = l.follower(id) {
                            prop_assert!(f.log_end_offset >= *to, "follower {} at {} below HW {}", id, f.log_end_offset, to);
                        }
                    }
                    prop_assert!(l.isr().len() >= l.effective_min_isr());
                }
            }
            prop_assert!(l.high_watermark() >= last_hw);
            prop_assert!(l.high_watermark() <= l.log_end_offset());
            prop_assert!(l.isr().contains(&1));
            last_hw = l.high_watermark();
        }
    }
}

/// Seed 9742 of the simulation (the schedule before snapshots): broker 1 led epoch 1, its image
/// skipped epoch 2 (led by broker 0, under which 2 truncated to 0) and it leads again in epoch 3
/// with the ISR {1, 2}. The log end it knew of 2 from epoch 1 is gone: the HW waits for 2's
/// fetch in epoch 3 instead of jumping over records 2 no longer holds.
#[test]
fn a_leader_in_a_new_epoch_forgets_its_followers_log_ends() {
    let mut l = leader3(2);
    l.on_append(7, T0);
    assert!(
        fetch(&mut l, 2, 5, T0 + 1).is_empty(),
        "3 holds the HW at 0"
    );
    assert_eq!(l.high_watermark(), 0);
    // Epoch 3, the same leader, without 3: 2 truncated to 0 under epoch 2's leader meanwhile.
    let effects = l.on_leader_and_isr(&registration(3, 14, &[1, 2]), T0 + 2);
    assert_eq!(
        effects,
        vec![Effect::AssignEpochStartOffset(EpochEntry {
            epoch: 3,
            start_offset: 7
        })],
        "no HW advance from epoch 1's log end of 2"
    );
    assert_eq!(l.high_watermark(), 0);
    // 2's fetch in epoch 3 says where it is: the HW does not move past what it holds.
    assert!(fetch(&mut l, 2, 0, T0 + 3).is_empty());
    assert_eq!(l.high_watermark(), 0);
    // Once it holds 7, the HW moves on.
    assert_eq!(fetch(&mut l, 2, 7, T0 + 4), vec![hw(0, 7)]);
}
