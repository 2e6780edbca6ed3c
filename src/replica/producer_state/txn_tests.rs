//! Transaction rules of the producer state: open/complete, last stable offset inputs, fencing,
//! coordinator-origin batches, snapshot round trip of open transactions.

use super::snapshot::{decode, encode};
use super::*;
use crate::record::{build_batch, build_control_batch, build_transactional_batch, set_base_offset};

const CLIENT: AppendOrigin = AppendOrigin::Client;
const COORDINATOR: AppendOrigin = AppendOrigin::Coordinator;

/// A data batch of `n` records from `(pid, epoch)` at sequence `seq`, placed at `offset`.
fn data(txn: bool, pid: i64, epoch: i16, seq: i32, n: usize, offset: i64) -> BatchHeader {
    let recs: Vec<crate::record::KeyValue<'_>> = vec![(None, Some(b"v")); n];
    let mut bytes = if txn {
        build_transactional_batch(1_000, (pid, epoch, seq), &recs)
    } else {
        build_batch(0, 1_000, (pid, epoch, seq), &recs)
    };
    set_base_offset(&mut bytes, offset);
    BatchHeader::parse(&bytes).expect("test batch parses")
}

fn marker(
    pid: i64,
    epoch: i16,
    coordinator_epoch: i32,
    control: ControlType,
    offset: i64,
) -> TxnMarker {
    TxnMarker {
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch,
        control,
        offset,
    }
}

fn append(state: &mut ProducerStateManager, h: BatchHeader, origin: AppendOrigin) {
    assert_eq!(state.check(&h, origin), Ok(ProducerCheck::Append));
    state.on_append(&h, 5);
}

#[test]
fn transactional_batches_open_one_transaction_and_a_marker_completes_it() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 7, 0, 0, 2, 10), CLIENT);
    append(&mut state, data(true, 7, 0, 2, 3, 12), CLIENT);
    let entry = state.entry(7).unwrap();
    assert_eq!(entry.current_txn_first_offset(), Some(10));
    assert_eq!(state.first_undecided_offset(), Some(10));
    let m = marker(7, 0, 3, ControlType::Commit, 15);
    assert_eq!(state.check_marker(&m), Ok(()));
    let done = state
        .on_marker(&m, 99)
        .expect("completes the open transaction");
    assert_eq!(
        done,
        CompletedTxn {
            producer_id: 7,
            first_offset: 10,
            last_offset: 15,
            aborted: false,
            last_stable_offset: 16,
        }
    );
    assert_eq!(done.aborted_txn(), None);
    let entry = state.entry(7).unwrap();
    assert_eq!(entry.current_txn_first_offset(), None);
    assert_eq!(entry.coordinator_epoch(), 3);
    assert_eq!(entry.last_timestamp(), 99);
    // Same epoch: the cached batches survive the marker (Kafka's `update`).
    assert_eq!(entry.last_sequence(), 4);
    assert_eq!(state.first_undecided_offset(), None);
    // The next transactional batch opens a new transaction.
    append(&mut state, data(true, 7, 0, 5, 1, 16), CLIENT);
    assert_eq!(state.first_undecided_offset(), Some(16));
}

#[test]
fn an_abort_records_the_oldest_other_open_transaction_as_last_stable_offset() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 1, 0, 0, 5, 0), CLIENT);
    append(&mut state, data(true, 2, 0, 0, 5, 5), CLIENT);
    append(&mut state, data(false, 3, 0, 0, 1, 10), CLIENT);
    assert_eq!(state.first_undecided_offset(), Some(0));
    let done = state
        .on_marker(&marker(1, 0, 0, ControlType::Abort, 11), 6)
        .unwrap();
    assert_eq!(
        done.aborted_txn(),
        Some(crate::log::AbortedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 11,
            last_stable_offset: 5,
        })
    );
    assert_eq!(state.first_undecided_offset(), Some(5));
    let done = state
        .on_marker(&marker(2, 0, 0, ControlType::Abort, 12), 7)
        .unwrap();
    assert_eq!(done.last_stable_offset, 13);
    assert_eq!(state.first_undecided_offset(), None);
}

#[test]
fn a_non_transactional_batch_inside_a_transaction_is_invalid_txn_state() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 7, 0, 0, 1, 0), CLIENT);
    let before = state.clone();
    let err = state
        .check(&data(false, 7, 0, 1, 1, 1), CLIENT)
        .unwrap_err();
    assert_eq!(err, ProducerError::InvalidTxnState { producer_id: 7 });
    assert_eq!(err.code(), 48);
    assert_eq!(
        state.check(&data(false, 7, 0, -1, 1, 1), COORDINATOR),
        Err(ProducerError::InvalidTxnState { producer_id: 7 })
    );
    assert_eq!(state, before);
    // A transactional retry is still recognised as a duplicate first (Kafka's order).
    assert_eq!(
        state.check(&data(true, 7, 0, 0, 1, 9), CLIENT),
        Ok(ProducerCheck::Duplicate {
            base_offset: 0,
            last_offset: 0
        })
    );
}

#[test]
fn marker_epoch_rules_and_coordinator_fencing() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 7, 2, 0, 1, 0), CLIENT);
    state.on_marker(&marker(7, 2, 5, ControlType::Commit, 1), 1);
    let old_epoch = state.check_marker(&marker(7, 1, 5, ControlType::Abort, 2));
    assert_eq!(
        old_epoch,
        Err(ProducerError::InvalidProducerEpoch {
            producer_id: 7,
            batch_epoch: 1,
            current_epoch: 2
        })
    );
    assert_eq!(old_epoch.unwrap_err().code(), 47);
    let fenced = state.check_marker(&marker(7, 2, 4, ControlType::Abort, 2));
    assert_eq!(
        fenced,
        Err(ProducerError::CoordinatorFenced {
            producer_id: 7,
            marker_epoch: 4,
            current_epoch: 5
        })
    );
    assert_eq!(fenced.unwrap_err().code(), 52);
    // A newer marker epoch becomes the producer's epoch and forgets its batches; no open
    // transaction, so nothing completes.
    let bump = marker(7, 3, 6, ControlType::Abort, 2);
    assert_eq!(state.check_marker(&bump), Ok(()));
    assert_eq!(state.on_marker(&bump, 2), None);
    let entry = state.entry(7).unwrap();
    assert_eq!((entry.producer_epoch(), entry.coordinator_epoch()), (3, 6));
    assert_eq!(entry.batches().count(), 0);
    // Data at the old epoch is now fenced.
    assert!(matches!(
        state.check(&data(true, 7, 2, 1, 1, 3), CLIENT),
        Err(ProducerError::InvalidProducerEpoch { .. })
    ));
}

#[test]
fn a_marker_for_an_unknown_producer_creates_its_entry_and_completes_nothing() {
    let mut state = ProducerStateManager::new();
    let m = marker(42, 4, 9, ControlType::Abort, 0);
    assert_eq!(state.check_marker(&m), Ok(()));
    assert_eq!(state.on_marker(&m, 10), None);
    let entry = state.entry(42).unwrap();
    assert_eq!(entry.producer_epoch(), 4);
    assert_eq!(entry.coordinator_epoch(), 9);
    assert_eq!(entry.last_sequence(), -1);
    assert_eq!(state.first_undecided_offset(), None);
}

#[test]
fn coordinator_batches_skip_sequences_but_open_transactions_and_obey_epochs() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 9, 1, -1, 1, 0), COORDINATOR);
    assert_eq!(state.first_undecided_offset(), Some(0));
    // No sequence needed, none checked.
    append(&mut state, data(true, 9, 1, -1, 1, 1), COORDINATOR);
    assert_eq!(state.entry(9).unwrap().current_txn_first_offset(), Some(0));
    assert_eq!(
        state.check(&data(true, 9, 0, -1, 1, 2), COORDINATOR),
        Err(ProducerError::InvalidProducerEpoch {
            producer_id: 9,
            batch_epoch: 0,
            current_epoch: 1
        })
    );
    // The same batch from a client lacks its sequence.
    assert_eq!(
        state.check(&data(true, 9, 1, -1, 1, 2), CLIENT),
        Err(ProducerError::MissingSequence { producer_id: 9 })
    );
}

#[test]
fn open_transactions_survive_snapshots_truncation_and_expiry() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 1, 0, 0, 2, 0), CLIENT);
    append(&mut state, data(false, 2, 0, 0, 1, 2), CLIENT);
    append(&mut state, data(true, 3, 0, 0, 1, 3), CLIENT);
    state.on_marker(&marker(1, 0, 7, ControlType::Commit, 4), 5);
    let decoded = decode(&encode(&state)).unwrap();
    assert_eq!(decoded.first_undecided_offset(), Some(3));
    assert_eq!(decoded.entry(1).unwrap().coordinator_epoch(), 7);
    assert_eq!(
        decoded.entry(3).unwrap().current_txn_first_offset(),
        Some(3)
    );
    // Expiry never removes the producer with the open transaction.
    let mut expiring = decoded.clone();
    expiring.remove_expired(1_000_000, 1_000);
    assert_eq!(expiring.producer_count(), 1);
    assert_eq!(expiring.first_undecided_offset(), Some(3));
    // Truncating below the transaction's start forgets it.
    let mut cut = decoded;
    cut.truncate_to(3);
    assert_eq!(cut.first_undecided_offset(), None);
    assert_eq!(cut.entry(3), None);
}

#[test]
fn end_txn_marker_reads_kafkas_marker_record() {
    let mut bytes = build_control_batch(11, 2, 8, ControlType::Abort, 1_000);
    set_base_offset(&mut bytes, 77);
    assert_eq!(
        end_txn_marker(&bytes),
        Some(marker(11, 2, 8, ControlType::Abort, 77))
    );
    let plain = build_batch(0, 1, (11, 2, 0), &[(None, Some(b"v"))]);
    assert_eq!(end_txn_marker(&plain), None);
}

#[test]
fn the_last_stable_offset_is_the_oldest_open_transaction_within_the_log_and_high_watermark() {
    let mut state = ProducerStateManager::new();
    // No transaction: the high watermark.
    assert_eq!(state.last_stable_offset(0, 40), 40);
    append(&mut state, data(true, 7, 0, 0, 2, 10), CLIENT);
    append(&mut state, data(true, 8, 0, 0, 1, 20), CLIENT);
    assert_eq!(state.last_stable_offset(0, 40), 10);
    // Capped at the high watermark, raised to the log start offset.
    assert_eq!(state.last_stable_offset(0, 5), 5);
    assert_eq!(state.last_stable_offset(12, 40), 12);
    // Producer 7 commits at 21: producer 8's transaction bounds it now; then it aborts at 22.
    state.on_marker(&marker(7, 0, 0, ControlType::Commit, 21), 5);
    assert_eq!(state.last_stable_offset(0, 40), 20);
    state.on_marker(&marker(8, 0, 0, ControlType::Abort, 22), 5);
    assert_eq!(state.last_stable_offset(0, 40), 40);
}

/// Kafka's `unreplicatedTxns`: a transaction completed by a marker the high watermark has not
/// passed is still unstable, because a new leader without the marker would leave it open and its
/// coordinator might abort it. The simulator found read_committed consumers delivered records of
/// such a transaction, later aborted (seed 8988).
#[test]
fn a_completed_transaction_is_unstable_until_the_high_watermark_passes_its_marker() {
    let mut state = ProducerStateManager::new();
    append(&mut state, data(true, 7, 0, 0, 3, 0), CLIENT);
    append(&mut state, data(false, 8, 0, 0, 2, 3), CLIENT);
    assert_eq!(state.last_stable_offset(0, 5), 0);
    state.on_marker(&marker(7, 1, 0, ControlType::Commit, 5), 9);
    assert_eq!(state.first_undecided_offset(), None);
    // The marker at 5 is not below the high watermark yet.
    assert_eq!(state.first_unstable_offset(5), Some(0));
    assert_eq!(state.last_stable_offset(0, 5), 0);
    assert_eq!(state.last_stable_offset(2, 5), 2, "raised to the log start");
    // Replicated: stable, whether or not the high watermark was reported.
    assert_eq!(state.last_stable_offset(0, 6), 6);
    state.on_high_watermark(5);
    assert_eq!(state.first_unstable_offset(5), Some(0), "5 does not pass 5");
    state.on_high_watermark(6);
    assert_eq!(
        state.first_unstable_offset(5),
        None,
        "forgotten once passed"
    );
    // An open transaction and an unreplicated one: the older bounds the LSO.
    append(&mut state, data(true, 7, 1, 0, 1, 6), CLIENT);
    append(&mut state, data(true, 9, 0, 0, 1, 7), CLIENT);
    state.on_marker(&marker(7, 2, 0, ControlType::Abort, 8), 9);
    assert_eq!(state.last_stable_offset(0, 8), 6);
    assert_eq!(
        state.last_stable_offset(0, 9),
        7,
        "the marker replicated: the open one"
    );
    // A truncation below the marker forgets it (the replay after it rebuilds the rest).
    state.truncate_to(8);
    assert_eq!(state.first_unstable_offset(9), Some(7));
}
