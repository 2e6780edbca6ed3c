//! Unit tests of `SharePartition`'s v2 semantics: record-limit acquisition (KIP-1206) and RENEW
//! acknowledgements (KIP-1222).

use super::partition::*;
use super::persist::PersisterStateBatch;

const A: &str = "member-a";
const B: &str = "member-b";
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const RENEW: i8 = 4;
const LOCK_MS: i64 = 1_000;

fn sp() -> SharePartition {
    let config = SharePartitionConfig {
        record_lock_duration_ms: LOCK_MS,
        delivery_count_limit: 3,
        max_record_locks: 100,
    };
    SharePartition::new(config, 0, 0)
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

fn acquired_count(got: &[AcquiredRecords]) -> i64 {
    got.iter().map(|a| a.last_offset - a.first_offset + 1).sum()
}

#[test]
fn record_limit_cuts_a_new_batch_at_max_records() {
    let mut p = sp();
    let got = p.acquire_in_mode(A, &[fb(0, 9)], 3, AcquireMode::RecordLimit, 0);
    assert_eq!(got, vec![acq(0, 2, 1)]);
    assert_eq!(p.record_state(2), Some((RecordState::Acquired, 1, Some(A))));
    assert_eq!(
        p.record_state(3),
        None,
        "the rest of the batch is not in flight"
    );
    assert_eq!(p.next_fetch_offset(), 3);
    // The next fetch reads the same log batch again and gets the next 3.
    let got = p.acquire_in_mode(B, &[fb(0, 9)], 3, AcquireMode::RecordLimit, 0);
    assert_eq!(got, vec![acq(3, 5, 1)]);
    // Batch-optimized over the same batch takes all that is left.
    assert_eq!(p.acquire(A, &[fb(0, 9)], 1, 0), vec![acq(6, 9, 1)]);
}

#[test]
fn record_limit_never_acquires_more_than_max_records_over_many_batches() {
    let batches: Vec<FetchedBatch> = (0..8).map(|i| fb(i * 5, i * 5 + 4)).collect();
    for max in 1..=17u32 {
        let mut p = sp();
        let got = p.acquire_in_mode(A, &batches, max, AcquireMode::RecordLimit, 0);
        assert_eq!(acquired_count(&got), i64::from(max), "max_records {max}");
        assert_eq!(p.next_fetch_offset(), i64::from(max));
        // Batch-optimized rounds up to whole batches.
        let mut q = sp();
        let whole = q.acquire(A, &batches, max, 0);
        assert_eq!(acquired_count(&whole), i64::from(max.div_ceil(5) * 5));
    }
}

#[test]
fn record_limit_cuts_released_in_flight_records_too() {
    let mut p = sp();
    assert_eq!(p.acquire(A, &[fb(0, 9)], 10, 0), vec![acq(0, 9, 1)]);
    p.acknowledge(A, &[ack(0, 9, &[RELEASE])]).expect("release");
    let got = p.acquire_in_mode(B, &[fb(0, 9)], 4, AcquireMode::RecordLimit, 0);
    assert_eq!(got, vec![acq(0, 3, 2)]);
    assert_eq!(p.record_state(4), Some((RecordState::Available, 1, None)));
    let got = p.acquire_in_mode(B, &[fb(0, 9)], 100, AcquireMode::RecordLimit, 0);
    assert_eq!(got, vec![acq(4, 9, 2)]);
}

#[test]
fn renew_restarts_the_lock_and_changes_nothing_else() {
    let mut p = sp();
    p.acquire(A, &[fb(0, 4)], 10, 0);
    assert_eq!(p.next_lock_deadline(), Some(LOCK_MS));
    let change = p
        .acknowledge_renewing(A, &[ack(0, 4, &[RENEW])], 600)
        .expect("renew");
    assert!(change.is_empty(), "a renew is not persisted: {change:?}");
    assert_eq!(change.start_offset, 0);
    assert_eq!(p.next_lock_deadline(), Some(600 + LOCK_MS));
    for offset in 0..=4 {
        assert_eq!(
            p.record_state(offset),
            Some((RecordState::Acquired, 1, Some(A)))
        );
    }
    // At the old deadline nothing expires; at the renewed one everything does.
    assert!(p.expire_locks(LOCK_MS).is_empty());
    assert_eq!(p.record_state(0), Some((RecordState::Acquired, 1, Some(A))));
    assert!(!p.expire_locks(600 + LOCK_MS).is_empty());
    assert_eq!(p.record_state(0), Some((RecordState::Available, 1, None)));
}

#[test]
fn renew_per_offset_with_accepts_persists_only_the_accepts() {
    let mut p = sp();
    p.acquire(A, &[fb(0, 3)], 10, 0);
    let change = p
        .acknowledge_renewing(A, &[ack(0, 3, &[ACCEPT, RENEW, RENEW, ACCEPT])], 500)
        .expect("mixed");
    assert_eq!(
        change.state_batches,
        vec![
            PersisterStateBatch {
                first_offset: 0,
                last_offset: 0,
                delivery_state: RecordState::Acknowledged.id(),
                delivery_count: 1,
            },
            PersisterStateBatch {
                first_offset: 3,
                last_offset: 3,
                delivery_state: RecordState::Acknowledged.id(),
                delivery_count: 1,
            },
        ]
    );
    // Offset 0 is done: the SPSO moves to the first renewed record.
    assert_eq!(change.start_offset, 1);
    assert_eq!(p.record_state(1), Some((RecordState::Acquired, 1, Some(A))));
    assert_eq!(
        p.record_state(3),
        Some((RecordState::Acknowledged, 1, None))
    );
    assert_eq!(p.next_lock_deadline(), Some(500 + LOCK_MS));
}

#[test]
fn renew_needs_the_records_acquired_by_the_member() {
    let mut p = sp();
    p.acquire(A, &[fb(0, 4)], 10, 0);
    let err = p
        .acknowledge_renewing(B, &[ack(0, 4, &[RENEW])], 100)
        .unwrap_err();
    assert_eq!(err.error_code(), super::codes::INVALID_RECORD_STATE);
    p.acknowledge(A, &[ack(0, 0, &[ACCEPT])]).expect("accept");
    // 1-4 still acquired, 0 done (before the SPSO: skipped); 5 never in flight.
    let err = p
        .acknowledge_renewing(A, &[ack(1, 5, &[RENEW])], 100)
        .unwrap_err();
    assert_eq!(err.error_code(), super::codes::INVALID_REQUEST);
    assert_eq!(p.next_lock_deadline(), Some(LOCK_MS), "nothing changed");
}

#[test]
fn renew_is_an_unknown_type_without_is_renew_ack() {
    let mut p = sp();
    p.acquire(A, &[fb(0, 4)], 10, 0);
    let err = p.acknowledge(A, &[ack(0, 4, &[RENEW])]).unwrap_err();
    assert_eq!(err.error_code(), super::codes::INVALID_REQUEST);
    let err = p
        .acknowledge_renewing(A, &[ack(0, 4, &[5])], 100)
        .unwrap_err();
    assert_eq!(err.error_code(), super::codes::INVALID_REQUEST);
    assert_eq!(p.record_state(0), Some((RecordState::Acquired, 1, Some(A))));
}
