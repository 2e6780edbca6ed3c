use proptest::prelude::*;

use super::*;

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    LeaderEpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
        epoch,
        start_offset,
    }))
    .expect("valid entries")
}

fn pairs(c: &LeaderEpochCache) -> Vec<(i32, i64)> {
    c.entries()
        .into_iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

#[test]
fn assign_ignores_later_batches_of_the_latest_epoch() {
    let mut c = LeaderEpochCache::new();
    assert_eq!(c.assign(2, 10), Ok(true));
    assert_eq!(c.assign(2, 10), Ok(false));
    assert_eq!(c.assign(2, 15), Ok(false));
    assert_eq!(pairs(&c), vec![(2, 10)]);
    assert_eq!(c.latest_epoch(), Some(2));
}

#[test]
fn assign_same_epoch_at_lower_offset_moves_its_start() {
    let mut c = cache(&[(1, 0), (2, 10)]);
    assert_eq!(c.assign(2, 5), Ok(true));
    assert_eq!(pairs(&c), vec![(1, 0), (2, 5)]);
}

#[test]
fn assign_smaller_epoch_replaces_the_entries_it_contradicts() {
    let mut c = cache(&[(1, 0), (3, 10)]);
    assert_eq!(c.assign(2, 20), Ok(true));
    assert_eq!(pairs(&c), vec![(1, 0), (2, 20)]);
}

#[test]
fn assign_larger_epoch_at_smaller_offset_removes_later_starts() {
    let mut c = cache(&[(1, 0), (2, 10)]);
    assert_eq!(c.assign(3, 5), Ok(true));
    assert_eq!(pairs(&c), vec![(1, 0), (3, 5)]);
}

#[test]
fn assign_refuses_negative_values() {
    let mut c = LeaderEpochCache::new();
    assert_eq!(
        c.assign(-1, 0),
        Err(InvalidEpochEntry {
            epoch: -1,
            start_offset: 0
        })
    );
    assert!(c.assign(0, -5).is_err());
    assert!(c.is_empty());
}

#[test]
fn end_offset_for_follows_kafka_cases() {
    let c = cache(&[(2, 10), (4, 20), (6, 30)]);
    let eo = |leader_epoch, end_offset| EpochEndOffset {
        leader_epoch,
        end_offset,
    };
    assert_eq!(
        c.end_offset_for(UNDEFINED_EPOCH, 40),
        EpochEndOffset::UNDEFINED
    );
    assert_eq!(c.end_offset_for(6, 40), eo(6, 40));
    assert_eq!(c.end_offset_for(7, 40), EpochEndOffset::UNDEFINED);
    assert_eq!(c.end_offset_for(1, 40), eo(1, 10));
    assert_eq!(c.end_offset_for(2, 40), eo(2, 20));
    assert_eq!(c.end_offset_for(3, 40), eo(2, 20));
    assert_eq!(c.end_offset_for(4, 40), eo(4, 30));
    assert_eq!(c.end_offset_for(5, 40), eo(4, 30));
    assert_eq!(
        LeaderEpochCache::new().end_offset_for(0, 40),
        EpochEndOffset::UNDEFINED
    );
}

#[test]
fn truncate_from_end_removes_entries_starting_at_or_after() {
    let mut c = cache(&[(2, 10), (4, 20), (6, 30)]);
    assert!(!c.truncate_from_end(-1));
    assert!(!c.truncate_from_end(100));
    assert!(!c.truncate_from_end(31));
    assert!(c.truncate_from_end(25));
    assert_eq!(pairs(&c), vec![(2, 10), (4, 20)]);
    assert!(c.truncate_from_end(20));
    assert_eq!(pairs(&c), vec![(2, 10)]);
    assert!(c.truncate_from_end(0));
    assert!(c.is_empty());
}

#[test]
fn truncate_from_start_keeps_the_epoch_covering_the_new_start() {
    let mut c = cache(&[(2, 10), (4, 20), (6, 30)]);
    assert!(!c.truncate_from_start(5));
    assert_eq!(pairs(&c), vec![(2, 10), (4, 20), (6, 30)]);
    assert!(c.truncate_from_start(25));
    assert_eq!(pairs(&c), vec![(4, 25), (6, 30)]);
    assert!(c.truncate_from_start(30));
    assert_eq!(pairs(&c), vec![(6, 30)]);
    assert!(c.truncate_from_start(35));
    assert_eq!(pairs(&c), vec![(6, 35)]);
}

#[test]
fn epoch_for_offset_and_neighbours() {
    let c = cache(&[(2, 10), (4, 20), (6, 30)]);
    assert_eq!(c.epoch_for_offset(5), None);
    assert_eq!(c.epoch_for_offset(10), Some(2));
    assert_eq!(c.epoch_for_offset(15), Some(2));
    assert_eq!(c.epoch_for_offset(20), Some(4));
    assert_eq!(c.epoch_for_offset(1000), Some(6));
    assert_eq!(c.previous_epoch(4), Some(2));
    assert_eq!(c.previous_epoch(2), None);
    assert_eq!(c.next_epoch(4), Some(6));
    assert_eq!(c.next_epoch(3), Some(4));
    assert_eq!(c.next_epoch(6), None);
    assert_eq!(
        c.earliest_entry(),
        Some(EpochEntry {
            epoch: 2,
            start_offset: 10
        })
    );
}

#[test]
fn from_entries_reapplies_monotonicity() {
    let c = cache(&[(0, 0), (3, 50), (2, 40)]);
    assert_eq!(pairs(&c), vec![(0, 0), (2, 40)]);
}

#[derive(Debug, Clone)]
enum Op {
    Assign(i32, i64),
    TruncateEnd(i64),
    TruncateStart(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i32..12, 0i64..200).prop_map(|(e, o)| Op::Assign(e, o)),
        1 => (-1i64..200).prop_map(Op::TruncateEnd),
        1 => (0i64..200).prop_map(Op::TruncateStart),
    ]
}

proptest! {
    /// Whatever the operations, entries stay strictly increasing in epoch and offset, and
    /// `epoch_for_offset` agrees with a scan of the entries.
    #[test]
    fn entries_stay_monotonic(ops in prop::collection::vec(op(), 0..60), probe in 0i64..220) {
        let mut c = LeaderEpochCache::new();
        for op in ops {
            match op {
                Op::Assign(e, o) => {
                    let changed = c.assign(e, o).expect("non-negative");
                    let latest = c.latest_entry().expect("not empty after assign");
                    if changed {
                        prop_assert_eq!(latest, EpochEntry { epoch: e, start_offset: o });
                    } else {
                        prop_assert_eq!(latest.epoch, e);
                        prop_assert!(latest.start_offset <= o);
                    }
                }
                Op::TruncateEnd(o) => {
                    c.truncate_from_end(o);
                    if o >= 0 {
                        prop_assert!(c.entries().iter().all(|x| x.start_offset < o));
                    }
                }
                Op::TruncateStart(o) => {
                    c.truncate_from_start(o);
                    prop_assert!(c.entries().iter().skip(1).all(|x| x.start_offset > o));
                }
            }
            let entries = c.entries();
            for w in entries.windows(2) {
                prop_assert!(w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
            }
            let model = entries.iter().rev().find(|x| x.start_offset <= probe).map(|x| x.epoch);
            prop_assert_eq!(c.epoch_for_offset(probe), model);
        }
    }
}
