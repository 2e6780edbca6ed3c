use super::*;
use crate::replica::replication::epoch_cache::EpochEntry;

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
        epoch,
        start_offset,
    }))
    .expect("valid entries")
}

fn eo(leader_epoch: i32, end_offset: i64) -> EpochEndOffset {
    EpochEndOffset {
        leader_epoch,
        end_offset,
    }
}

fn done(offset: i64) -> OffsetTruncationState {
    OffsetTruncationState {
        offset,
        truncation_completed: true,
    }
}

#[test]
fn a_follower_without_epochs_truncates_to_its_high_watermark() {
    assert_eq!(
        truncation_request(&LeaderEpochCache::new(), 42),
        TruncationRequest::TruncateToHighWatermark(42)
    );
    assert_eq!(
        truncation_request(&cache(&[(0, 0), (3, 10)]), 42),
        TruncationRequest::AskLeader { leader_epoch: 3 }
    );
}

#[test]
fn undefined_answers() {
    let follower = cache(&[(0, 0), (1, 10)]);
    // Unknown end offset: back to the fetch offset.
    assert_eq!(
        offset_truncation_state(&follower, 20, 7, EpochEndOffset::UNDEFINED),
        done(7)
    );
    // A pre-epoch leader: its end offset, capped at our log end.
    assert_eq!(
        offset_truncation_state(&follower, 20, 7, eo(UNDEFINED_EPOCH, 15)),
        done(15)
    );
    assert_eq!(
        offset_truncation_state(&follower, 20, 7, eo(UNDEFINED_EPOCH, 99)),
        done(20)
    );
}

#[test]
fn same_epoch_truncates_to_the_smaller_end() {
    let follower = cache(&[(0, 0), (1, 10), (2, 30)]);
    // Leader says epoch 1 ended at 25; ours ended at 30: truncate to 25.
    assert_eq!(
        offset_truncation_state(&follower, 40, 0, eo(1, 25)),
        done(25)
    );
    // Leader's epoch 1 ended later than ours: ours (30) wins.
    assert_eq!(
        offset_truncation_state(&follower, 40, 0, eo(1, 35)),
        done(30)
    );
    // Our latest epoch: our log end is its end.
    assert_eq!(
        offset_truncation_state(&follower, 40, 0, eo(2, 45)),
        done(40)
    );
}

#[test]
fn an_epoch_the_follower_does_not_know_is_an_intermediate_step() {
    let follower = cache(&[(0, 0), (2, 8)]);
    assert_eq!(
        offset_truncation_state(&follower, 12, 0, eo(1, 9)),
        OffsetTruncationState {
            offset: 8,
            truncation_completed: false
        }
    );
}

#[test]
fn an_epoch_below_every_follower_epoch_takes_the_leaders_end() {
    let follower = cache(&[(5, 100)]);
    // Our cache answers (3, 100) for epoch 3: same epoch as the leader's, min(100, 90).
    assert_eq!(
        offset_truncation_state(&follower, 120, 0, eo(3, 90)),
        done(90)
    );
    // Above every epoch we know: undefined for us, so the leader's end.
    assert_eq!(
        offset_truncation_state(&follower, 120, 0, eo(9, 110)),
        done(110)
    );
}

#[test]
fn leader_change_with_divergence_converges_in_two_rounds() {
    // Old follower (now following) wrote epoch 2 that the new leader never saw.
    let leader = cache(&[(0, 0), (1, 5), (3, 9)]);
    let leader_end = 14;
    let mut follower = cache(&[(0, 0), (2, 8)]);
    let mut follower_end = 12;
    let mut rounds = 0;
    loop {
        rounds += 1;
        let TruncationRequest::AskLeader { leader_epoch } = truncation_request(&follower, 0) else {
            panic!("the follower has epochs");
        };
        let answer = leader.end_offset_for(leader_epoch, leader_end);
        let state = offset_truncation_state(&follower, follower_end, 0, answer);
        follower_end = follower_end.min(state.offset);
        follower.truncate_from_end(state.offset);
        if state.truncation_completed {
            break;
        }
        assert!(rounds < 5, "no convergence");
    }
    assert_eq!(rounds, 2);
    assert_eq!(follower_end, 5);
    assert_eq!(
        follower.entries(),
        vec![EpochEntry {
            epoch: 0,
            start_offset: 0
        }]
    );
    // From 5 in epoch 0 the follower continues the leader's log: no divergence.
    assert_eq!(diverging_epoch(&leader, leader_end, 5, 0), Ok(None));
}

#[test]
fn leader_reports_a_diverging_epoch() {
    let leader = cache(&[(0, 0), (1, 5), (3, 9)]);
    // Fetch at 10 claiming epoch 0, which ended at 5 on the leader.
    assert_eq!(diverging_epoch(&leader, 14, 10, 0), Ok(Some(eo(0, 5))));
    // Epoch 2 is unknown to the leader: its floor is 1, ending at 9.
    assert_eq!(diverging_epoch(&leader, 14, 8, 2), Ok(Some(eo(1, 9))));
    // The current epoch up to the log end continues.
    assert_eq!(diverging_epoch(&leader, 14, 14, 3), Ok(None));
    assert_eq!(diverging_epoch(&leader, 14, 7, 1), Ok(None));
    // An epoch newer than the leader's: out of range.
    assert_eq!(
        diverging_epoch(&leader, 14, 14, 4),
        Err(FetchOffsetOutOfRange {
            fetch_offset: 14,
            last_fetched_epoch: 4
        })
    );
}

#[test]
fn offset_for_leader_epoch_checks_the_current_epoch_first() {
    let leader = cache(&[(0, 0), (1, 5), (3, 9)]);
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, Some(3), 3, 1),
        Ok(eo(1, 9))
    );
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, None, 3, 3),
        Ok(eo(3, 14))
    );
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, Some(-1), 3, 2),
        Ok(eo(1, 9))
    );
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, Some(2), 3, 1),
        Err(LeaderEpochMismatch::Fenced {
            requested: 2,
            current: 3
        })
    );
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, Some(4), 3, 1),
        Err(LeaderEpochMismatch::Unknown {
            requested: 4,
            current: 3
        })
    );
    assert_eq!(
        answer_offset_for_leader_epoch(&leader, 14, Some(3), 3, 7),
        Ok(EpochEndOffset::UNDEFINED)
    );
}
