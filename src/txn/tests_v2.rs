//! Transactions V2 (KIP-890) in the coordinator state machine, with simulated time: the epoch bump
//! on every commit and abort, the answers to retries, empty aborts, fencing, the epoch running out,
//! and V1 requests on a V2 broker. Every answer, stored record and marker job is checked by value.

use super::coordinator::{Coordinator, InitInput, TxnIdentity};
use super::end_txn::{EndAnswer, EndInput};
use super::metadata::{txn_version, TxnState};
use super::records::decode_value;
use super::{codes, Effects, TxnConfig};
use crate::record::ControlType;

const T0: i64 = 1_700_000_000_000;
const PID: i64 = 4000;

fn coordinator() -> Coordinator {
    Coordinator::new(TxnConfig {
        max_timeout_ms: 900_000,
        transactional_id_expiration_ms: 7 * 24 * 3600 * 1000,
        coordinator_epoch: 0,
        transaction_version: txn_version::V2,
        ..TxnConfig::default()
    })
}

fn who(pid: i64, epoch: i16) -> TxnIdentity<'static> {
    TxnIdentity {
        transactional_id: "tx",
        producer_id: pid,
        producer_epoch: epoch,
    }
}

fn orders(p: i32) -> Vec<(String, i32)> {
    vec![("orders".to_string(), p)]
}

/// A coordinator with "tx" initialised: producer PID, epoch 0.
fn initialised() -> Coordinator {
    let mut c = coordinator();
    let input = InitInput {
        transactional_id: "tx".to_string(),
        timeout_ms: 60_000,
        expected: None,
        fresh_producer_id: Some(PID),
    };
    let (a, _) = c.init_producer_id(T0, input);
    assert_eq!((a.error, a.producer_id, a.producer_epoch), (0, PID, 0));
    c
}

fn end(c: &mut Coordinator, now: i64, who: TxnIdentity<'_>, commit: bool) -> (EndAnswer, Effects) {
    let input = EndInput {
        who,
        commit,
        client_version: txn_version::V2,
        fresh_producer_id: None,
    };
    c.end_txn(now, input)
}

fn ok(pid: i64, epoch: i16) -> EndAnswer {
    EndAnswer {
        error: codes::NONE,
        producer_id: pid,
        producer_epoch: epoch,
    }
}

fn err(code: i16) -> EndAnswer {
    EndAnswer {
        error: code,
        producer_id: -1,
        producer_epoch: -1,
    }
}

/// (state, producer id, epoch, client transaction version) of the step's last stored record.
fn stored(fx: &Effects) -> (TxnState, i64, i16, i16) {
    let r = fx.records.last().expect("a record");
    let v = decode_value(r.value.as_deref().expect("not a tombstone")).expect("decodes");
    (
        TxnState::from_id(v.status).expect("known state"),
        v.producer_id,
        v.producer_epoch,
        v.client_transaction_version,
    )
}

/// Completes the step's marker job as the driver does once the markers are written.
fn markers_written(c: &mut Coordinator, now: i64, fx: &Effects) -> Effects {
    let job = fx.markers.first().expect("a marker job").clone();
    c.markers_written(now, &job)
}

#[test]
fn a_v2_commit_bumps_the_epoch_and_its_markers_carry_it() {
    let mut c = initialised();
    // The implicit add of a Produce v12: the transaction remembers the client's version.
    let (code, fx) = c.add_partitions(T0 + 1, who(PID, 0), &orders(0), txn_version::V2);
    assert_eq!((code, stored(&fx)), (0, (TxnState::Ongoing, PID, 0, 2)));

    let (answer, fx) = end(&mut c, T0 + 2, who(PID, 0), true);
    assert_eq!(answer, ok(PID, 1));
    assert_eq!(stored(&fx), (TxnState::PrepareCommit, PID, 1, 2));
    let job = &fx.markers[0];
    assert_eq!(
        (job.producer_id, job.producer_epoch, job.control),
        (PID, 1, ControlType::Commit)
    );
    assert_eq!(job.partitions, orders(0));
    let m = c.get("tx").expect("kept");
    assert_eq!((m.last_producer_epoch, m.start_timestamp_ms), (0, T0 + 1));

    let done = markers_written(&mut c, T0 + 3, &fx);
    assert_eq!(stored(&done), (TxnState::CompleteCommit, PID, 1, 2));
    // The next transaction runs at the bumped epoch; the old one is fenced.
    assert_eq!(
        c.add_partitions(T0 + 4, who(PID, 0), &orders(1), txn_version::V2)
            .0,
        codes::PRODUCER_FENCED
    );
    let (code, fx) = c.add_partitions(T0 + 4, who(PID, 1), &orders(1), txn_version::V2);
    assert_eq!((code, stored(&fx)), (0, (TxnState::Ongoing, PID, 1, 2)));
    let (answer, fx) = end(&mut c, T0 + 5, who(PID, 1), false);
    assert_eq!(answer, ok(PID, 2));
    assert_eq!(fx.markers[0].control, ControlType::Abort);
    assert_eq!(fx.markers[0].producer_epoch, 2);
}

#[test]
fn retries_after_the_bump_get_kafkas_answers() {
    let mut c = initialised();
    c.add_partitions(T0 + 1, who(PID, 0), &orders(0), txn_version::V2);
    let (_, prepare) = end(&mut c, T0 + 2, who(PID, 0), true);
    // Markers in flight: the retry (old epoch) waits; the other outcome is refused.
    assert_eq!(
        end(&mut c, T0 + 3, who(PID, 0), true).0,
        err(codes::CONCURRENT_TRANSACTIONS)
    );
    assert_eq!(
        end(&mut c, T0 + 3, who(PID, 0), false).0,
        err(codes::INVALID_TXN_STATE)
    );
    // The bumped epoch is not a retry while the markers are in flight.
    assert_eq!(
        end(&mut c, T0 + 3, who(PID, 1), true).0,
        err(codes::PRODUCER_FENCED)
    );
    markers_written(&mut c, T0 + 4, &prepare);

    // Complete: the retry gets the current id and epoch again, and nothing is written.
    let (answer, fx) = end(&mut c, T0 + 5, who(PID, 0), true);
    assert_eq!((answer, fx.records.len()), (ok(PID, 1), 0));
    assert_eq!(
        end(&mut c, T0 + 5, who(PID, 0), false).0,
        err(codes::INVALID_TXN_STATE)
    );
    // At the current epoch, a commit with nothing open is refused...
    assert_eq!(
        end(&mut c, T0 + 5, who(PID, 1), true).0,
        err(codes::INVALID_TXN_STATE)
    );
    // ... and an abort is an empty transaction: bumped, no partitions, no markers to write.
    let (answer, fx) = end(&mut c, T0 + 6, who(PID, 1), false);
    assert_eq!(answer, ok(PID, 2));
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, PID, 2, 2));
    assert!(fx.markers[0].partitions.is_empty());
    assert_eq!(c.get("tx").map(|m| m.start_timestamp_ms), Some(T0 + 6));
    let done = markers_written(&mut c, T0 + 7, &fx);
    assert_eq!(stored(&done), (TxnState::CompleteAbort, PID, 2, 2));
    // Its retry answers NONE; two epochs back is fenced; another producer id is unknown.
    assert_eq!(end(&mut c, T0 + 8, who(PID, 1), false).0, ok(PID, 2));
    assert_eq!(
        end(&mut c, T0 + 8, who(PID, 0), false).0,
        err(codes::PRODUCER_FENCED)
    );
    assert_eq!(
        end(&mut c, T0 + 8, who(PID + 1, 2), false).0,
        err(codes::INVALID_PRODUCER_ID_MAPPING)
    );
}

#[test]
fn an_empty_transaction_may_be_aborted_but_not_committed() {
    let mut c = initialised();
    assert_eq!(
        end(&mut c, T0 + 1, who(PID, 0), true).0,
        err(codes::INVALID_TXN_STATE)
    );
    let (answer, fx) = end(&mut c, T0 + 1, who(PID, 0), false);
    assert_eq!(answer, ok(PID, 1));
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, PID, 1, 2));
    // A retry of the Empty abort while it completes is CONCURRENT_TRANSACTIONS, as for any abort.
    assert_eq!(
        end(&mut c, T0 + 2, who(PID, 0), false).0,
        err(codes::CONCURRENT_TRANSACTIONS)
    );
}

#[test]
fn fencing_and_timeouts_bump_twice_under_v2() {
    let mut c = initialised();
    c.add_partitions(T0 + 1, who(PID, 0), &orders(0), txn_version::V2);
    // A new instance: the open transaction is aborted at the fenced epoch + 1 (Kafka: the fence,
    // then the V2 abort's own bump); the old producer is fenced everywhere.
    let input = InitInput {
        transactional_id: "tx".to_string(),
        timeout_ms: 60_000,
        expected: None,
        fresh_producer_id: None,
    };
    let (a, fx) = c.init_producer_id(T0 + 2, input.clone());
    assert_eq!(a.error, codes::CONCURRENT_TRANSACTIONS);
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, PID, 2, 2));
    assert_eq!(fx.markers[0].producer_epoch, 2);
    assert_eq!(
        end(&mut c, T0 + 3, who(PID, 0), true).0,
        err(codes::PRODUCER_FENCED)
    );
    markers_written(&mut c, T0 + 3, &fx);
    let (a, _) = c.init_producer_id(T0 + 4, input);
    assert_eq!((a.error, a.producer_id, a.producer_epoch), (0, PID, 3));

    // A timeout aborts the same way.
    c.add_partitions(T0 + 5, who(PID, 3), &orders(1), txn_version::V2);
    let fx = c.tick(T0 + 5 + 60_001);
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, PID, 5, 2));
    assert_eq!(
        (fx.markers[0].producer_epoch, fx.markers[0].control),
        (5, ControlType::Abort)
    );
}

#[test]
fn an_exhausted_epoch_moves_the_producer_to_a_fresh_id() {
    let mut c = initialised();
    let last = i16::MAX - 1;
    c.txns.get_mut("tx").expect("initialised").producer_epoch = last;
    c.add_partitions(T0 + 1, who(PID, last), &orders(0), txn_version::V2);
    assert!(c.end_txn_needs_producer_id("tx", txn_version::V2));
    assert!(!c.end_txn_needs_producer_id("tx", txn_version::V1));
    // Without the fresh id the coordinator cannot go on.
    assert_eq!(
        end(&mut c, T0 + 2, who(PID, last), true).0,
        err(codes::COORDINATOR_NOT_AVAILABLE)
    );
    let input = EndInput {
        who: who(PID, last),
        commit: true,
        client_version: txn_version::V2,
        fresh_producer_id: Some(PID + 7),
    };
    let (answer, fx) = c.end_txn(T0 + 2, input);
    // The client continues under the fresh id; the markers use the old id's last epoch.
    assert_eq!(answer, ok(PID + 7, 0));
    assert_eq!(
        (fx.markers[0].producer_id, fx.markers[0].producer_epoch),
        (PID, i16::MAX)
    );
    let done = markers_written(&mut c, T0 + 3, &fx);
    assert_eq!(stored(&done), (TxnState::CompleteCommit, PID + 7, 0, 2));
    let m = c.get("tx").expect("kept");
    assert_eq!((m.previous_producer_id, m.next_producer_id), (PID, -1));
    // A retry with the old id at its last epoch gets the fresh id again.
    assert_eq!(end(&mut c, T0 + 4, who(PID, last), true).0, ok(PID + 7, 0));
    let (code, _) = c.add_partitions(T0 + 5, who(PID + 7, 0), &orders(0), txn_version::V2);
    assert_eq!(code, codes::NONE);
}

#[test]
fn v1_requests_on_a_v2_broker_keep_v1_rules() {
    let mut c = initialised();
    c.add_partitions(T0 + 1, who(PID, 0), &orders(0), txn_version::V1);
    let input = EndInput {
        who: who(PID, 0),
        commit: true,
        client_version: txn_version::V1,
        fresh_producer_id: None,
    };
    let (answer, fx) = c.end_txn(T0 + 2, input);
    // No bump, no producer id in the answer, client version 0 stored.
    assert_eq!(answer, err(codes::NONE));
    assert_eq!(stored(&fx), (TxnState::PrepareCommit, PID, 0, 0));
    assert_eq!(fx.markers[0].producer_epoch, 0);
    markers_written(&mut c, T0 + 3, &fx);
    // V1 has no empty abort.
    let input = EndInput {
        commit: false,
        ..input
    };
    assert_eq!(c.end_txn(T0 + 4, input).0, err(codes::INVALID_TXN_STATE));
}
