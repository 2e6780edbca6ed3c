//! Unit tests of `SharePartition`: acquisition, acknowledgement, locks, SPSO, snapshots.

use super::partition::*;
use super::persist::{PersisterStateBatch, ShareSnapshot};

const A: &str = "member-a";
const B: &str = "member-b";

fn config() -> SharePartitionConfig {
    SharePartitionConfig {
        record_lock_duration_ms: 1_000,
        delivery_count_limit: 3,
        max_record_locks: 100,
    }
}

fn fb(base: i64, last: i64) -> FetchedBatch {
    FetchedBatch::new(base, last)
}

fn acq(first: i64, last: i64, count: i16) -> AcquiredRecords {
    AcquiredRecords {
        first_offset: first,
        last_offset: last,
        delivery_count: count,
    }
}

fn ack(first: i64, last: i64, types: &[i8]) -> AcknowledgementBatch {
    AcknowledgementBatch {
        first_offset: first,
        last_offset: last,
        acknowledge_types: types.to_vec(),
    }
}

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

#[test]
fn acquire_new_batches_takes_whole_batches_and_sets_delivery_count_one() {
    let mut sp = SharePartition::new(config(), 0, 0);
    let got = sp.acquire(A, &[fb(0, 4), fb(5, 9)], 3, 0);
    // 3 records asked, the first batch (5 records) is taken whole; the budget is spent.
    assert_eq!(got, vec![acq(0, 4, 1)]);
    assert_eq!(
        sp.record_state(2),
        Some((RecordState::Acquired, 1, Some(A)))
    );
    assert_eq!(sp.record_state(5), None);
    assert_eq!(sp.end_offset(), 4);
    assert_eq!(sp.next_fetch_offset(), 5);
    assert_eq!(sp.next_lock_deadline(), Some(1_000));
}

#[test]
fn a_second_member_gets_only_the_records_not_acquired() {
    let mut sp = SharePartition::new(config(), 0, 0);
    assert_eq!(sp.acquire(A, &[fb(0, 4)], 100, 0), vec![acq(0, 4, 1)]);
    // The log read started before the acquired batch; B gets only the new batch.
    assert_eq!(
        sp.acquire(B, &[fb(0, 4), fb(5, 9)], 100, 0),
        vec![acq(5, 9, 1)]
    );
    assert_eq!(sp.acquire(B, &[fb(0, 9)], 100, 0), vec![]);
}

#[test]
fn fetched_batches_before_the_start_offset_are_clamped() {
    let mut sp = SharePartition::new(config(), 3, 0);
    assert_eq!(sp.acquire(A, &[fb(0, 5)], 100, 0), vec![acq(3, 5, 1)]);
    assert_eq!(sp.start_offset(), 3);
}

#[test]
fn accept_moves_the_start_offset_only_past_finished_records() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 4), fb(5, 9)], 100, 0);
    let change = sp.acknowledge(A, &[ack(5, 9, &[ACCEPT])]).expect("ack");
    assert_eq!(sp.start_offset(), 0, "0..4 still acquired");
    assert_eq!(
        change.state_batches,
        vec![PersisterStateBatch::new(5, 9, RecordState::Acknowledged, 1)]
    );
    let change = sp.acknowledge(A, &[ack(0, 4, &[ACCEPT])]).expect("ack");
    assert_eq!(sp.start_offset(), 10);
    assert_eq!(change.start_offset, 10);
    assert_eq!(sp.in_flight_records(), 0);
    assert_eq!(sp.end_offset(), 10);
}

#[test]
fn per_offset_types_split_the_batch() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 3)], 100, 0);
    let change = sp
        .acknowledge(A, &[ack(0, 3, &[ACCEPT, RELEASE, REJECT, 0])])
        .expect("ack");
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(sp.record_state(1), Some((RecordState::Available, 1, None)));
    assert_eq!(sp.record_state(2), Some((RecordState::Archived, 1, None)));
    assert_eq!(sp.record_state(3), Some((RecordState::Archived, 1, None)));
    assert_eq!(
        change.state_batches,
        vec![
            PersisterStateBatch::new(0, 0, RecordState::Acknowledged, 1),
            PersisterStateBatch::new(1, 1, RecordState::Available, 1),
            PersisterStateBatch::new(2, 3, RecordState::Archived, 1),
        ]
    );
    // The released record is redelivered with delivery count 2.
    assert_eq!(sp.next_fetch_offset(), 1);
    assert_eq!(sp.acquire(B, &[fb(0, 3)], 100, 10), vec![acq(1, 1, 2)]);
}

#[test]
fn acknowledging_records_of_another_member_or_not_acquired_is_invalid_record_state() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 4)], 100, 0);
    let err = sp.acknowledge(B, &[ack(0, 4, &[ACCEPT])]).unwrap_err();
    assert_eq!(err.error_code(), 121);
    let err = sp.acknowledge(A, &[ack(3, 7, &[ACCEPT])]).unwrap_err();
    assert_eq!(err.error_code(), 42, "past the in-flight records");
    sp.acknowledge(A, &[ack(0, 0, &[ACCEPT])]).expect("ack");
    let err = sp.acknowledge(A, &[ack(0, 0, &[ACCEPT])]).unwrap_err();
    assert_eq!(
        err,
        AcknowledgeError::InvalidRecordState("offsets are not in flight")
    );
    // All or nothing: the first batch is valid, the second is not, neither applies.
    let err = sp
        .acknowledge(A, &[ack(1, 1, &[ACCEPT]), ack(2, 2, &[9])])
        .unwrap_err();
    assert_eq!(err.error_code(), 42);
    assert_eq!(
        sp.record_state(1),
        Some((RecordState::Acquired, 1, Some(A)))
    );
}

#[test]
fn offsets_before_the_start_offset_are_skipped() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 1), fb(2, 4)], 100, 0);
    sp.acknowledge(A, &[ack(0, 1, &[ACCEPT])]).expect("ack");
    assert_eq!(sp.start_offset(), 2);
    // 0..1 are finished: the per-offset types for them are ignored.
    let change = sp
        .acknowledge(A, &[ack(0, 4, &[RELEASE, RELEASE, ACCEPT, ACCEPT, REJECT])])
        .expect("ack");
    assert_eq!(change.start_offset, 5);
    assert_eq!(
        change.state_batches,
        vec![
            PersisterStateBatch::new(2, 3, RecordState::Acknowledged, 1),
            PersisterStateBatch::new(4, 4, RecordState::Archived, 1),
        ]
    );
}

#[test]
fn malformed_acknowledgements_are_invalid_request() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 4)], 100, 0);
    for bad in [
        vec![ack(3, 2, &[ACCEPT])],
        vec![ack(0, 4, &[])],
        vec![ack(0, 4, &[ACCEPT, ACCEPT])],
        vec![ack(0, 2, &[ACCEPT]), ack(2, 4, &[ACCEPT])],
        vec![ack(3, 4, &[ACCEPT]), ack(0, 2, &[ACCEPT])],
        vec![ack(0, 4, &[4])],
        vec![ack(-1, 0, &[ACCEPT])],
    ] {
        let err = sp.acknowledge(A, &bad).unwrap_err();
        assert_eq!(err.error_code(), 42, "{bad:?}");
    }
    assert_eq!(
        sp.record_state(0),
        Some((RecordState::Acquired, 1, Some(A)))
    );
}

#[test]
fn expired_locks_make_records_available_then_archive_them_at_the_limit() {
    let mut sp = SharePartition::new(config(), 0, 0);
    let mut now = 0;
    for delivery in 1..=3i16 {
        assert_eq!(
            sp.acquire(A, &[fb(0, 1)], 100, now),
            vec![acq(0, 1, delivery)]
        );
        assert!(sp.expire_locks(now + 999).is_empty(), "lock still held");
        now += 1_000;
        let change = sp.expire_locks(now);
        let expected = if delivery < 3 {
            RecordState::Available
        } else {
            RecordState::Archived
        };
        assert_eq!(
            change.state_batches,
            vec![PersisterStateBatch::new(0, 1, expected, delivery)]
        );
    }
    // The poison records are archived and the SPSO moves past them.
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(sp.acquire(A, &[fb(0, 1)], 100, now), vec![]);
}

#[test]
fn release_at_the_delivery_limit_archives() {
    let mut sp = SharePartition::new(config(), 0, 0);
    for _ in 0..2 {
        sp.acquire(A, &[fb(0, 0)], 100, 0);
        sp.acknowledge(A, &[ack(0, 0, &[RELEASE])])
            .expect("release");
    }
    assert_eq!(sp.record_state(0), Some((RecordState::Available, 2, None)));
    sp.acquire(A, &[fb(0, 0)], 100, 0);
    let change = sp
        .acknowledge(A, &[ack(0, 0, &[RELEASE])])
        .expect("release");
    assert_eq!(change.start_offset, 1);
    assert_eq!(
        change.state_batches,
        vec![PersisterStateBatch::new(0, 0, RecordState::Archived, 3)]
    );
}

#[test]
fn a_leaving_member_releases_its_records_only() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 4)], 100, 0);
    sp.acquire(B, &[fb(5, 9)], 100, 0);
    let change = sp.release_acquired_records(A);
    assert_eq!(
        change.state_batches,
        vec![PersisterStateBatch::new(0, 4, RecordState::Available, 1)]
    );
    assert_eq!(
        sp.record_state(7),
        Some((RecordState::Acquired, 1, Some(B)))
    );
    assert_eq!(sp.acquire(B, &[fb(0, 4)], 100, 5), vec![acq(0, 4, 2)]);
}

#[test]
fn max_records_cuts_an_available_in_flight_batch() {
    let mut sp = SharePartition::new(config(), 0, 0);
    sp.acquire(A, &[fb(0, 9)], 100, 0);
    sp.release_acquired_records(A);
    assert_eq!(sp.acquire(B, &[fb(0, 9)], 4, 0), vec![acq(0, 3, 2)]);
    assert_eq!(sp.acquire(A, &[fb(0, 9)], 100, 0), vec![acq(4, 9, 2)]);
    assert_eq!(
        sp.record_state(3),
        Some((RecordState::Acquired, 2, Some(B)))
    );
}

#[test]
fn max_record_locks_stops_new_acquisitions() {
    let mut sp = SharePartition::new(
        SharePartitionConfig {
            max_record_locks: 10,
            ..config()
        },
        0,
        0,
    );
    let got = sp.acquire(A, &[fb(0, 5), fb(6, 11), fb(12, 20)], 100, 0);
    // 0..5 (6 in flight < 10) and 6..11 (whole batch: 12 in flight), then the limit is hit.
    assert_eq!(got, vec![acq(0, 11, 1)]);
    assert_eq!(sp.acquire(B, &[fb(12, 20)], 100, 0), vec![]);
    // Nothing new at the limit; an in-flight record may still be Available again.
    assert!(!sp.can_acquire_from(12));
    assert!(sp.can_acquire_from(11));
    sp.acknowledge(A, &[ack(0, 5, &[ACCEPT])]).expect("ack");
    assert!(sp.can_acquire_from(12));
    assert_eq!(sp.acquire(B, &[fb(12, 20)], 100, 0), vec![acq(12, 20, 1)]);
}

#[test]
fn a_compacted_gap_is_acquired_with_the_next_batch() {
    let mut sp = SharePartition::new(config(), 0, 0);
    assert_eq!(
        sp.acquire(A, &[fb(0, 2), fb(6, 8)], 100, 0),
        vec![acq(0, 8, 1)]
    );
    sp.acknowledge(
        A,
        &[ack(0, 2, &[ACCEPT]), ack(3, 5, &[0]), ack(6, 8, &[ACCEPT])],
    )
    .expect("ack");
    assert_eq!(sp.start_offset(), 9);
}

#[test]
fn snapshot_round_trip_keeps_states_and_frees_acquired_records() {
    let mut sp = SharePartition::new(config(), 10, 3);
    sp.acquire(A, &[fb(10, 14), fb(15, 19)], 100, 0);
    sp.acknowledge(A, &[ack(12, 12, &[ACCEPT]), ack(15, 19, &[RELEASE])])
        .expect("ack");
    let snap = sp.snapshot();
    assert_eq!(snap.start_offset, 10);
    assert_eq!(snap.state_epoch, 3);
    assert_eq!(
        snap.state_batches,
        vec![
            PersisterStateBatch::new(10, 11, RecordState::Available, 1),
            PersisterStateBatch::new(12, 12, RecordState::Acknowledged, 1),
            PersisterStateBatch::new(13, 19, RecordState::Available, 1),
        ]
    );
    let back = SharePartition::from_snapshot(config(), &snap);
    assert_eq!(
        back.record_state(11),
        Some((RecordState::Available, 1, None))
    );
    assert_eq!(
        back.record_state(12),
        Some((RecordState::Acknowledged, 1, None))
    );
    assert_eq!(back.next_fetch_offset(), 10);
    assert_eq!(back.end_offset(), 19);
}

#[test]
fn from_snapshot_fills_gaps_and_skips_finished_prefix() {
    let snap = ShareSnapshot {
        start_offset: 0,
        state_epoch: 1,
        state_batches: vec![
            PersisterStateBatch::new(0, 4, RecordState::Acknowledged, 1),
            PersisterStateBatch::new(8, 9, RecordState::Archived, 5),
            PersisterStateBatch::new(9, 12, RecordState::Acquired, 2),
        ],
        ..ShareSnapshot::default()
    };
    let sp = SharePartition::from_snapshot(config(), &snap);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(sp.record_state(6), Some((RecordState::Available, 0, None)));
    assert_eq!(sp.record_state(9), Some((RecordState::Archived, 5, None)));
    // The overlapping part of the last batch is ignored; the rest comes back Available.
    assert_eq!(sp.record_state(10), Some((RecordState::Available, 2, None)));
    assert_eq!(sp.end_offset(), 12);
}

#[test]
fn huge_snapshot_gap_is_acquired_in_budgeted_pieces_without_per_offset_state() {
    let snap = ShareSnapshot {
        start_offset: 0,
        state_batches: vec![PersisterStateBatch::new(
            1 << 40,
            1 << 40,
            RecordState::Archived,
            1,
        )],
        ..ShareSnapshot::default()
    };
    let mut sp = SharePartition::from_snapshot(config(), &snap);
    assert_eq!(
        sp.acquire(A, &[fb(0, 1 << 30)], 500, 0),
        vec![acq(0, 499, 1)]
    );
    sp.acknowledge(A, &[ack(0, 499, &[ACCEPT])]).expect("ack");
    assert_eq!(sp.start_offset(), 500);
}

#[test]
fn offsets_at_i64_max_are_refused_not_overflowed() {
    let snap = ShareSnapshot {
        start_offset: 0,
        state_batches: vec![PersisterStateBatch::new(
            5,
            i64::MAX,
            RecordState::Archived,
            1,
        )],
        ..ShareSnapshot::default()
    };
    let mut sp = SharePartition::from_snapshot(config(), &snap);
    assert_eq!(sp.in_flight_records(), 0);
    assert_eq!(sp.acquire(A, &[fb(0, i64::MAX)], 10, 0), vec![]);
    assert_eq!(sp.acquire(A, &[fb(0, 3)], 10, 0), vec![acq(0, 3, 1)]);
    let err = sp
        .acknowledge(A, &[ack(0, i64::MAX, &[ACCEPT])])
        .unwrap_err();
    assert_eq!(err.error_code(), 42);
}

#[test]
fn log_start_offset_archives_available_records_and_holds_at_acquired_ones() {
    let mut sp = SharePartition::new(config(), 0, 0);
    let change = sp.update_log_start_offset(7);
    assert_eq!(sp.start_offset(), 7, "nothing in flight: the SPSO jumps");
    assert_eq!(change.start_offset, 7);

    sp.acquire(A, &[fb(7, 9), fb(10, 14)], 100, 0);
    sp.acknowledge(A, &[ack(10, 14, &[RELEASE])])
        .expect("release");
    // 7..9 stay acquired by A, 10..14 (Available) are archived, 15..19 never in flight.
    let change = sp.update_log_start_offset(20);
    assert_eq!(sp.start_offset(), 7, "an acquired record holds the SPSO");
    assert_eq!(sp.record_state(12), Some((RecordState::Archived, 1, None)));
    assert_eq!(sp.record_state(17), Some((RecordState::Archived, 0, None)));
    assert_eq!(
        change.state_batches,
        vec![
            PersisterStateBatch::new(7, 9, RecordState::Available, 1),
            PersisterStateBatch::new(10, 14, RecordState::Archived, 1),
            PersisterStateBatch::new(15, 19, RecordState::Archived, 0),
        ]
    );
    // The lock ends: the records' data is gone, so they are archived, not redelivered.
    let change = sp.expire_locks(1_000);
    assert_eq!(
        change.state_batches,
        vec![PersisterStateBatch::new(7, 9, RecordState::Archived, 1)]
    );
    assert_eq!((sp.start_offset(), sp.in_flight_records()), (20, 0));
    assert_eq!(
        sp.acquire(B, &[fb(20, 21)], 100, 1_000),
        vec![acq(20, 21, 1)]
    );
    // A log start offset behind the SPSO changes nothing.
    assert_eq!(sp.update_log_start_offset(5).state_batches, vec![]);
    assert_eq!(sp.start_offset(), 20);
}

fn aborted(base: i64, last: i64) -> FetchedBatch {
    FetchedBatch {
        aborted: true,
        ..FetchedBatch::new(base, last)
    }
}

#[test]
fn aborted_transaction_data_is_archived_and_never_acquired() {
    let mut sp = SharePartition::new(config(), 0, 0);
    // 0-2 aborted data, 3 its marker, 4-6 committed data: 3 records asked, the aborted batch
    // spends none of the budget.
    let got = sp.acquire(A, &[aborted(0, 2), fb(3, 3), fb(4, 6)], 3, 0);
    assert_eq!(got, vec![acq(3, 6, 1)]);
    for offset in 0..=2 {
        assert_eq!(
            sp.record_state(offset),
            Some((RecordState::Archived, 0, None))
        );
    }
    assert_eq!(sp.next_fetch_offset(), 7);
    // The SPSO moves past the archived records with the next change.
    assert_eq!(sp.start_offset(), 0);
    let change = sp.acknowledge(A, &[ack(3, 6, &[ACCEPT])]).expect("ack");
    assert_eq!(change.start_offset, 7);
    assert_eq!(sp.start_offset(), 7);
    assert_eq!(sp.in_flight_records(), 0);
}

#[test]
fn aborted_data_after_an_acquired_batch_in_the_same_read_is_archived_in_order() {
    let mut sp = SharePartition::new(config(), 0, 0);
    let got = sp.acquire(
        A,
        &[fb(0, 1), aborted(2, 4), fb(5, 5), aborted(6, 6)],
        100,
        0,
    );
    assert_eq!(got, vec![acq(0, 1, 1), acq(5, 5, 1)]);
    assert_eq!(sp.record_state(3), Some((RecordState::Archived, 0, None)));
    assert_eq!(sp.record_state(6), Some((RecordState::Archived, 0, None)));
    assert_eq!(sp.end_offset(), 6);
    assert_eq!(sp.next_fetch_offset(), 7);
}

#[test]
fn available_in_flight_records_of_an_aborted_batch_are_archived() {
    let mut sp = SharePartition::new(config(), 0, 0);
    // Read before the group turned read_committed: acquired, then released.
    assert_eq!(sp.acquire(A, &[fb(0, 4)], 100, 0), vec![acq(0, 4, 1)]);
    sp.acknowledge(A, &[ack(0, 4, &[RELEASE])])
        .expect("release");
    assert_eq!(sp.next_fetch_offset(), 0);
    // Read again under read_committed: the same batch is aborted data.
    assert_eq!(
        sp.acquire(B, &[aborted(0, 4), fb(5, 5)], 100, 0),
        vec![acq(5, 5, 1)]
    );
    assert_eq!(sp.record_state(0), Some((RecordState::Archived, 1, None)));
    assert_eq!(sp.next_fetch_offset(), 6);
}
