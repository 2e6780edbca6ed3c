//! Transaction coordinator state-machine tests with simulated time: every step's answer, records
//! and marker jobs are checked by value. These are Transactions V1 (a broker finalized at
//! `transaction.version` 0, clients sending EndTxn <= v4); V2 is in `tests_v2.rs`.

use std::collections::BTreeSet;

use super::coordinator::{Coordinator, InitAnswer, InitInput, TxnIdentity};
use super::end_txn::EndInput;
use super::list::ListFilter;
use super::metadata::{txn_version, TxnState};
use super::records::{self, decode_value};
use super::view::TxnView;
use super::{codes, Effects, MarkerJob, TxnConfig};
use crate::record::ControlType;

const T0: i64 = 1_700_000_000_000;
const TIMEOUT: i32 = 60_000;

fn coordinator() -> Coordinator {
    Coordinator::new(TxnConfig {
        max_timeout_ms: 900_000,
        transactional_id_expiration_ms: 7 * 24 * 3600 * 1000,
        coordinator_epoch: 0,
        transaction_version: txn_version::V1,
        ..TxnConfig::default()
    })
}

/// The V1 requests: AddPartitionsToTxn and EndTxn <= v4.
trait V1Requests {
    fn add_v1(&mut self, now: i64, who: TxnIdentity<'_>, p: &[(String, i32)]) -> (i16, Effects);
    fn end_v1(&mut self, now: i64, who: TxnIdentity<'_>, commit: bool) -> (i16, Effects);
}

impl V1Requests for Coordinator {
    fn add_v1(&mut self, now: i64, who: TxnIdentity<'_>, p: &[(String, i32)]) -> (i16, Effects) {
        self.add_partitions(now, who, p, txn_version::V1)
    }

    fn end_v1(&mut self, now: i64, who: TxnIdentity<'_>, commit: bool) -> (i16, Effects) {
        let input = EndInput {
            who,
            commit,
            client_version: txn_version::V1,
            fresh_producer_id: None,
        };
        let (answer, fx) = self.end_txn(now, input);
        assert_eq!((answer.producer_id, answer.producer_epoch), (-1, -1));
        (answer.error, fx)
    }
}

/// InitProducerId as the driver does it: a fresh producer id only when asked for.
fn init(
    c: &mut Coordinator,
    now: i64,
    id: &str,
    expected: Option<(i64, i16)>,
    next_pid: &mut i64,
) -> (InitAnswer, Effects) {
    let fresh = c.needs_producer_id(id, expected).then(|| {
        *next_pid += 1;
        *next_pid
    });
    c.init_producer_id(
        now,
        InitInput {
            transactional_id: id.to_string(),
            timeout_ms: TIMEOUT,
            expected,
            fresh_producer_id: fresh,
        },
    )
}

fn who(id: &str, pid: i64, epoch: i16) -> TxnIdentity<'_> {
    TxnIdentity {
        transactional_id: id,
        producer_id: pid,
        producer_epoch: epoch,
    }
}

fn parts(list: &[(&str, i32)]) -> Vec<(String, i32)> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// The state a step's single record stores.
fn stored(fx: &Effects) -> (TxnState, i64, i16) {
    assert_eq!(fx.records.len(), 1, "{fx:?}");
    let v = decode_value(fx.records[0].value.as_deref().expect("not a tombstone")).unwrap();
    (
        TxnState::from_id(v.status).unwrap(),
        v.producer_id,
        v.producer_epoch,
    )
}

/// A transactional id with an Ongoing transaction on orders-0 and orders-1.
fn ongoing(c: &mut Coordinator, id: &str, next_pid: &mut i64) -> (i64, i16) {
    let (a, _) = init(c, T0, id, None, next_pid);
    assert_eq!(a.error, codes::NONE);
    let (code, fx) = c.add_v1(
        T0 + 10,
        who(id, a.producer_id, a.producer_epoch),
        &parts(&[("orders", 0), ("orders", 1)]),
    );
    assert_eq!(code, codes::NONE);
    assert_eq!(
        stored(&fx),
        (TxnState::Ongoing, a.producer_id, a.producer_epoch)
    );
    (a.producer_id, a.producer_epoch)
}

#[test]
fn commit_writes_prepare_then_markers_then_complete() {
    let mut c = coordinator();
    let mut next = 99;
    let (a, fx) = init(&mut c, T0, "tx", None, &mut next);
    assert_eq!(
        a,
        InitAnswer {
            error: 0,
            producer_id: 100,
            producer_epoch: 0
        }
    );
    assert_eq!(stored(&fx), (TxnState::Empty, 100, 0));
    assert_eq!(fx.records[0].key, records::key("tx"));

    let (code, fx) = c.add_v1(T0 + 5, who("tx", 100, 0), &parts(&[("orders", 0)]));
    assert_eq!((code, stored(&fx)), (0, (TxnState::Ongoing, 100, 0)));
    assert_eq!(c.get("tx").unwrap().start_timestamp_ms, T0 + 5);
    // Adding a partition already in the transaction writes nothing.
    let (code, fx) = c.add_v1(T0 + 6, who("tx", 100, 0), &parts(&[("orders", 0)]));
    assert_eq!((code, fx.records.len()), (0, 0));
    let (code, _) = c.add_v1(T0 + 7, who("tx", 100, 0), &parts(&[("payments", 2)]));
    assert_eq!(code, 0);

    let (code, fx) = c.end_v1(T0 + 20, who("tx", 100, 0), true);
    assert_eq!(code, codes::NONE);
    assert_eq!(stored(&fx), (TxnState::PrepareCommit, 100, 0));
    assert_eq!(
        fx.markers,
        vec![MarkerJob {
            transactional_id: "tx".into(),
            producer_id: 100,
            producer_epoch: 0,
            coordinator_epoch: 0,
            control: ControlType::Commit,
            partitions: parts(&[("orders", 0), ("payments", 2)]),
        }]
    );
    let job = fx.markers[0].clone();

    let fx = c.markers_written(T0 + 30, &job);
    assert_eq!(stored(&fx), (TxnState::CompleteCommit, 100, 0));
    let m = c.get("tx").unwrap();
    assert!(m.partitions.is_empty());
    assert_eq!(
        (m.start_timestamp_ms, m.last_update_timestamp_ms),
        (T0 + 5, T0 + 30)
    );
    // Markers reported twice change nothing.
    assert!(c.markers_written(T0 + 31, &job).records.is_empty());
    // A retried commit succeeds; an abort now is an invalid transition.
    assert_eq!(c.end_v1(T0 + 40, who("tx", 100, 0), true).0, codes::NONE);
    assert_eq!(
        c.end_v1(T0 + 40, who("tx", 100, 0), false).0,
        codes::INVALID_TXN_STATE
    );
    // The next transaction starts from CompleteCommit.
    let (code, _) = c.add_v1(T0 + 50, who("tx", 100, 0), &parts(&[("orders", 1)]));
    assert_eq!(code, 0);
    let m = c.get("tx").unwrap();
    assert_eq!(m.partitions, BTreeSet::from([("orders".to_string(), 1)]));
    assert_eq!(m.start_timestamp_ms, T0 + 50);
}

#[test]
fn abort_completes_with_abort_markers() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "tx", &mut next);
    let (code, fx) = c.end_v1(T0 + 20, who("tx", pid, epoch), false);
    assert_eq!(
        (code, stored(&fx)),
        (0, (TxnState::PrepareAbort, pid, epoch))
    );
    assert_eq!(fx.markers[0].control, ControlType::Abort);
    assert_eq!(
        fx.markers[0].partitions,
        parts(&[("orders", 0), ("orders", 1)])
    );
    let fx = c.markers_written(T0 + 21, &fx.markers[0]);
    assert_eq!(stored(&fx), (TxnState::CompleteAbort, pid, epoch));
    assert_eq!(c.end_v1(T0 + 22, who("tx", pid, epoch), false).0, 0);
    assert_eq!(
        c.end_v1(T0 + 22, who("tx", pid, epoch), true).0,
        codes::INVALID_TXN_STATE
    );
}

#[test]
fn concurrent_transactions_while_markers_are_in_flight() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "tx", &mut next);
    let (_, fx) = c.end_v1(T0 + 20, who("tx", pid, epoch), true);
    let job = fx.markers[0].clone();
    let me = who("tx", pid, epoch);
    let (code, fx) = c.add_v1(T0 + 21, me, &parts(&[("orders", 5)]));
    assert_eq!(
        (code, fx.records.len()),
        (codes::CONCURRENT_TRANSACTIONS, 0)
    );
    assert_eq!(
        c.end_v1(T0 + 21, me, true).0,
        codes::CONCURRENT_TRANSACTIONS
    );
    assert_eq!(c.end_v1(T0 + 21, me, false).0, codes::INVALID_TXN_STATE);
    let (a, fx) = init(&mut c, T0 + 21, "tx", None, &mut next);
    assert_eq!(
        (a.error, fx.records.len()),
        (codes::CONCURRENT_TRANSACTIONS, 0)
    );
    assert_eq!(c.get("tx").unwrap().state, TxnState::PrepareCommit);
    c.markers_written(T0 + 22, &job);
    assert_eq!(c.end_v1(T0 + 23, me, true).0, codes::NONE);
    let (a, _) = init(&mut c, T0 + 24, "tx", None, &mut next);
    assert_eq!(
        (a.error, a.producer_id, a.producer_epoch),
        (0, pid, epoch + 1)
    );
}

#[test]
fn ongoing_transactions_time_out_with_an_epoch_bump() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "tx", &mut next);
    let start = T0 + 10;
    assert_eq!(c.next_deadline(), Some(start + TIMEOUT as i64 + 1));
    // Kafka aborts once start + timeout < now: not at exactly the timeout.
    assert!(c.tick(start + TIMEOUT as i64).records.is_empty());
    let fx = c.tick(start + TIMEOUT as i64 + 1);
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, pid, epoch + 1));
    assert_eq!(fx.markers.len(), 1);
    assert_eq!(
        (fx.markers[0].control, fx.markers[0].producer_epoch),
        (ControlType::Abort, epoch + 1)
    );
    // The producer's epoch is fenced now.
    assert_eq!(
        c.end_v1(T0 + 70_000, who("tx", pid, epoch), true).0,
        codes::PRODUCER_FENCED
    );
    c.markers_written(T0 + 70_001, &fx.markers[0]);
    assert_eq!(c.get("tx").unwrap().state, TxnState::CompleteAbort);
    // No timeout deadline left; the expiration deadline remains.
    assert_eq!(c.next_deadline(), Some(T0 + 70_001 + 7 * 24 * 3600 * 1000));
}

#[test]
fn a_new_instance_fences_the_old_epoch() {
    let mut c = coordinator();
    let mut next = 0;
    let (a, _) = init(&mut c, T0, "tx", None, &mut next);
    let (b, fx) = init(&mut c, T0 + 1, "tx", None, &mut next);
    assert_eq!(
        (b.error, b.producer_id, b.producer_epoch),
        (0, a.producer_id, 1)
    );
    assert_eq!(stored(&fx), (TxnState::Empty, a.producer_id, 1));
    let old = who("tx", a.producer_id, 0);
    assert_eq!(
        c.add_v1(T0 + 2, old, &parts(&[("orders", 0)])).0,
        codes::PRODUCER_FENCED
    );
    assert_eq!(c.end_v1(T0 + 2, old, true).0, codes::PRODUCER_FENCED);
}

#[test]
fn two_instances_abort_the_first_ones_transaction() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "tx", &mut next);
    // Instance B starts while A's transaction is open: abort it with a bumped epoch first.
    let (b, fx) = init(&mut c, T0 + 100, "tx", None, &mut next);
    assert_eq!(b.error, codes::CONCURRENT_TRANSACTIONS);
    assert_eq!(stored(&fx), (TxnState::PrepareAbort, pid, epoch + 1));
    let job = fx.markers[0].clone();
    assert_eq!(job.partitions, parts(&[("orders", 0), ("orders", 1)]));
    // B retries while the markers are in flight.
    let (b, fx) = init(&mut c, T0 + 101, "tx", None, &mut next);
    assert_eq!(
        (b.error, fx.records.len()),
        (codes::CONCURRENT_TRANSACTIONS, 0)
    );
    c.markers_written(T0 + 102, &job);
    let (b, _) = init(&mut c, T0 + 103, "tx", None, &mut next);
    assert_eq!(
        (b.error, b.producer_id, b.producer_epoch),
        (0, pid, epoch + 2)
    );
    // A is fenced.
    assert_eq!(
        c.end_v1(T0 + 104, who("tx", pid, epoch), true).0,
        codes::PRODUCER_FENCED
    );
    assert_eq!(next, 1, "one producer id for one transactional id");
}

#[test]
fn restart_mid_commit_resumes_the_markers() {
    let mut c = coordinator();
    let mut next = 0;
    let mut log = Vec::new();
    let (a, fx) = init(&mut c, T0, "tx", None, &mut next);
    log.extend(fx.records);
    let me = who("tx", a.producer_id, a.producer_epoch);
    let (_, fx) = c.add_v1(T0 + 1, me, &parts(&[("orders", 3)]));
    log.extend(fx.records);
    let (_, fx) = c.end_v1(T0 + 2, me, true);
    log.extend(fx.records);

    // The broker stops before the markers; a new coordinator replays the log.
    let mut d = coordinator();
    for r in &log {
        d.replay(&r.key, r.value.as_deref());
    }
    let m = d.get("tx").unwrap();
    assert_eq!(m.state, TxnState::PrepareCommit);
    assert_eq!((m.producer_id, m.producer_epoch), (a.producer_id, 0));
    let pending = d.pending_markers();
    assert_eq!(
        pending,
        vec![MarkerJob {
            transactional_id: "tx".into(),
            producer_id: a.producer_id,
            producer_epoch: 0,
            coordinator_epoch: 0,
            control: ControlType::Commit,
            partitions: parts(&[("orders", 3)]),
        }]
    );
    let fx = d.markers_written(T0 + 10, &pending[0]);
    assert_eq!(stored(&fx), (TxnState::CompleteCommit, a.producer_id, 0));
    assert!(d.pending_markers().is_empty());
    // The producer carries on with the same epoch.
    assert_eq!(d.end_v1(T0 + 11, me, true).0, codes::NONE);
}

#[test]
fn bad_input_gets_kafkas_error_codes() {
    let mut c = coordinator();
    let mut next = 0;
    let (a, _) = init(&mut c, T0, "tx", None, &mut next);
    let (pid, epoch) = (a.producer_id, a.producer_epoch);
    // EndTxn without a transaction.
    assert_eq!(
        c.end_v1(T0, who("tx", pid, epoch), true).0,
        codes::INVALID_TXN_STATE
    );
    assert_eq!(
        c.end_v1(T0, who("tx", pid, epoch + 1), true).0,
        codes::PRODUCER_FENCED
    );
    assert_eq!(
        c.end_v1(T0, who("tx", pid + 7, epoch), true).0,
        codes::INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        c.end_v1(T0, who("unknown", pid, epoch), true).0,
        codes::INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        c.add_v1(T0, who("unknown", pid, epoch), &parts(&[("a", 0)]))
            .0,
        codes::INVALID_PRODUCER_ID_MAPPING
    );
    assert_eq!(
        c.add_v1(T0, who("", pid, epoch), &parts(&[("a", 0)])).0,
        codes::INVALID_REQUEST
    );
    // Timeouts outside (0, transaction.max.timeout.ms].
    for timeout_ms in [0, -5, 900_001] {
        let (a, fx) = c.init_producer_id(
            T0,
            InitInput {
                transactional_id: "tx2".into(),
                timeout_ms,
                expected: None,
                fresh_producer_id: Some(50),
            },
        );
        assert_eq!(
            (a.error, fx.records.len()),
            (codes::INVALID_TRANSACTION_TIMEOUT, 0)
        );
    }
    let empty = InitInput {
        transactional_id: String::new(),
        timeout_ms: TIMEOUT,
        expected: None,
        fresh_producer_id: Some(50),
    };
    assert_eq!(
        c.init_producer_id(T0, empty).0.error,
        codes::INVALID_REQUEST
    );
    // A new id without a producer id to give it.
    let no_pid = InitInput {
        transactional_id: "tx3".into(),
        timeout_ms: TIMEOUT,
        expected: None,
        fresh_producer_id: None,
    };
    assert_eq!(
        c.init_producer_id(T0, no_pid).0.error,
        codes::COORDINATOR_NOT_AVAILABLE
    );
    assert!(c.get("tx3").is_none());
    // AddPartitions during PrepareCommit.
    c.add_v1(T0 + 1, who("tx", pid, epoch), &parts(&[("a", 0)]));
    c.end_v1(T0 + 2, who("tx", pid, epoch), true);
    assert_eq!(
        c.add_v1(T0 + 3, who("tx", pid, epoch), &parts(&[("a", 1)]))
            .0,
        codes::CONCURRENT_TRANSACTIONS
    );
}

#[test]
fn kip_360_bumps_retries_and_fences() {
    let mut c = coordinator();
    let mut next = 0;
    let (a, _) = init(&mut c, T0, "tx", None, &mut next);
    let pid = a.producer_id;
    // The producer recovers from an error with its current id and epoch: bump, remember 0.
    let (b, _) = init(&mut c, T0 + 1, "tx", Some((pid, 0)), &mut next);
    assert_eq!((b.error, b.producer_epoch), (0, 1));
    assert_eq!(c.get("tx").unwrap().last_producer_epoch, 0);
    // The answer was lost; the retry names epoch 0 again and gets the same epoch.
    let (b, fx) = init(&mut c, T0 + 2, "tx", Some((pid, 0)), &mut next);
    assert_eq!((b.error, b.producer_epoch), (0, 1));
    assert_eq!(fx.records.len(), 1);
    // A stale epoch or another producer id is fenced.
    let (b, _) = init(&mut c, T0 + 3, "tx", Some((pid, 7)), &mut next);
    assert_eq!(b.error, codes::PRODUCER_FENCED);
    let (b, _) = init(&mut c, T0 + 3, "tx", Some((pid + 1, 1)), &mut next);
    assert_eq!(b.error, codes::PRODUCER_FENCED);
}

#[test]
fn exhausted_epochs_move_to_a_new_producer_id() {
    let mut c = coordinator();
    let mut next = 0;
    let (a, _) = init(&mut c, T0, "tx", None, &mut next);
    c.txns.get_mut("tx").unwrap().producer_epoch = i16::MAX - 1;
    assert!(c.needs_producer_id("tx", None));
    assert!(!c.needs_producer_id("tx", Some((a.producer_id, 3))));
    let exhausted = Some((a.producer_id, i16::MAX - 1));
    assert!(c.needs_producer_id("tx", exhausted));
    let (b, fx) = init(&mut c, T0 + 1, "tx", exhausted, &mut next);
    assert_eq!((b.error, b.producer_epoch), (0, 0));
    assert_ne!(b.producer_id, a.producer_id);
    assert_eq!(stored(&fx), (TxnState::Empty, b.producer_id, 0));
    assert_eq!(c.get("tx").unwrap().previous_producer_id, a.producer_id);
    // The answer was lost: a retry naming the old id and its exhausted epoch gets the same answer.
    let (r, _) = init(&mut c, T0 + 2, "tx", exhausted, &mut next);
    assert_eq!(
        (r.error, r.producer_id, r.producer_epoch),
        (0, b.producer_id, 0)
    );
    // Without KIP-360 fields the rotation forgets the old epoch: such a retry is fenced.
    c.txns.get_mut("tx").unwrap().producer_epoch = i16::MAX - 1;
    let (d, _) = init(&mut c, T0 + 3, "tx", None, &mut next);
    assert_eq!((d.error, d.producer_epoch), (0, 0));
    let stale = Some((b.producer_id, i16::MAX - 1));
    let (e, _) = init(&mut c, T0 + 4, "tx", stale, &mut next);
    assert_eq!(e.error, codes::PRODUCER_FENCED);
}

#[test]
fn a_failed_append_is_undone() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "tx", &mut next);
    let (_, fx) = c.end_v1(T0 + 20, who("tx", pid, epoch), true);
    c.restore(fx.undo);
    assert_eq!(c.get("tx").unwrap().state, TxnState::Ongoing);
    let (_, fx) = init(&mut c, T0, "new", None, &mut next);
    c.restore(fx.undo);
    assert!(c.get("new").is_none());
}

#[test]
fn idle_transactional_ids_expire_with_a_tombstone() {
    let mut c = coordinator();
    let mut next = 0;
    init(&mut c, T0, "idle", None, &mut next);
    ongoing(&mut c, "busy", &mut next);
    let week = 7 * 24 * 3600 * 1000;
    c.txns.get_mut("busy").unwrap().timeout_ms = i32::MAX;
    let fx = c.tick(T0 + week);
    assert_eq!(fx.records.len(), 1);
    assert_eq!(fx.records[0].key, records::key("idle"));
    assert_eq!(fx.records[0].value, None);
    assert!(c.get("idle").is_none());
    assert_eq!(c.get("busy").unwrap().state, TxnState::Ongoing);
    // Replaying the tombstone forgets the id too.
    let mut d = coordinator();
    let (_, fx) = init(&mut d, T0, "idle", None, &mut next);
    let mut e = coordinator();
    e.replay(&fx.records[0].key, fx.records[0].value.as_deref());
    assert_eq!(e.get("idle").unwrap().state, TxnState::Empty);
    e.replay(&records::key("idle"), None);
    assert!(e.get("idle").is_none());
}

#[test]
fn describe_and_list_report_kafkas_fields() {
    let mut c = coordinator();
    let mut next = 0;
    let (pid, epoch) = ongoing(&mut c, "orders-tx", &mut next);
    init(&mut c, T0 + 500, "idle-tx", None, &mut next);

    let d = c.describe("orders-tx");
    assert_eq!(d.error_code, 0);
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!((d.producer_id.0, d.producer_epoch), (pid, epoch));
    assert_eq!(
        (d.transaction_timeout_ms, d.transaction_start_time_ms),
        (TIMEOUT, T0 + 10)
    );
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].topic.as_str(), "orders");
    assert_eq!(d.topics[0].partitions, vec![0, 1]);
    assert_eq!(
        c.describe("nope").error_code,
        codes::TRANSACTIONAL_ID_NOT_FOUND
    );
    assert_eq!(c.describe("").error_code, codes::INVALID_REQUEST);

    let names = |f: ListFilter| {
        let r = c.list(T0 + 1000, &f);
        (
            r.error_code,
            r.transaction_states
                .iter()
                .map(|t| t.transactional_id.as_str().to_string())
                .collect::<Vec<_>>(),
            r.unknown_state_filters
                .iter()
                .map(|s| s.as_str().to_string())
                .collect::<Vec<_>>(),
        )
    };
    let all = ListFilter {
        min_duration_ms: -1,
        ..Default::default()
    };
    assert_eq!(names(all.clone()).1, vec!["idle-tx", "orders-tx"]);
    let ongoing_only = ListFilter {
        states: vec!["Ongoing".into(), "Bogus".into()],
        ..all.clone()
    };
    assert_eq!(
        names(ongoing_only),
        (0, vec!["orders-tx".to_string()], vec!["Bogus".to_string()])
    );
    let by_pid = ListFilter {
        producer_ids: vec![pid],
        ..all.clone()
    };
    assert_eq!(names(by_pid).1, vec!["orders-tx"]);
    // Running longer than the filter: orders-tx started at T0+10 (990 ms ago at T0+1000); idle-tx
    // has no start (-1), so Kafka's `now - start` always passes it.
    let long = ListFilter {
        min_duration_ms: 990,
        ..all.clone()
    };
    assert_eq!(names(long).1, vec!["idle-tx"]);
    let long = ListFilter {
        min_duration_ms: 989,
        ..all.clone()
    };
    assert_eq!(names(long).1, vec!["idle-tx", "orders-tx"]);
    let pattern = ListFilter {
        transactional_id_pattern: Some("orders-.*".into()),
        ..all.clone()
    };
    assert_eq!(names(pattern).1, vec!["orders-tx"]);
    let partial = ListFilter {
        transactional_id_pattern: Some("orders".into()),
        ..all.clone()
    };
    assert!(names(partial).1.is_empty(), "the whole id must match");
    let bad = ListFilter {
        transactional_id_pattern: Some("(".into()),
        ..all
    };
    assert_eq!(names(bad).0, codes::INVALID_REGULAR_EXPRESSION);
}

#[test]
fn the_produce_view_follows_the_transaction() {
    let mut c = coordinator();
    let view = TxnView::default();
    let publish = |c: &mut Coordinator, view: &TxnView| {
        for id in c.take_dirty() {
            view.publish(&id, c.get(&id));
        }
    };
    let mut next = 0;
    let (a, _) = init(&mut c, T0, "tx", None, &mut next);
    publish(&mut c, &view);
    let pid = a.producer_id;
    assert_eq!(
        view.verify(pid, 0, "orders", 0),
        Err(codes::INVALID_TXN_STATE)
    );
    c.add_v1(T0 + 1, who("tx", pid, 0), &parts(&[("orders", 0)]));
    publish(&mut c, &view);
    assert_eq!(view.verify(pid, 0, "orders", 0), Ok(()));
    assert_eq!(
        view.verify(pid, 0, "orders", 1),
        Err(codes::INVALID_TXN_STATE)
    );
    assert_eq!(
        view.verify(pid, 1, "orders", 0),
        Err(codes::INVALID_PRODUCER_EPOCH)
    );
    assert_eq!(
        view.verify(pid + 1, 0, "orders", 0),
        Err(codes::INVALID_TXN_STATE)
    );
    assert_eq!(
        c.verify(who("tx", pid, 0), &parts(&[("orders", 0), ("orders", 1)])),
        vec![codes::NONE, codes::INVALID_TXN_STATE]
    );
    assert_eq!(
        c.verify(who("tx", pid, 3), &parts(&[("orders", 0)])),
        vec![codes::PRODUCER_FENCED]
    );
    let (_, fx) = c.end_v1(T0 + 2, who("tx", pid, 0), true);
    publish(&mut c, &view);
    assert_eq!(
        view.verify(pid, 0, "orders", 0),
        Err(codes::CONCURRENT_TRANSACTIONS)
    );
    c.markers_written(T0 + 3, &fx.markers[0]);
    publish(&mut c, &view);
    assert_eq!(
        view.verify(pid, 0, "orders", 0),
        Err(codes::INVALID_TXN_STATE)
    );
}

/// Markers carry the leader epoch their transactional id's `__transaction_state` shard had when
/// the coordinator loaded it (Kafka's coordinator epoch); a shard not loaded keeps the configured
/// one. A partition that took the successor's marker for a producer refuses the deposed
/// coordinator's (TRANSACTION_COORDINATOR_FENCED). Unloading a shard forgets its transactional
/// ids and its epoch, and leaves the other shards as they are.
#[test]
fn markers_carry_the_loaded_shards_leader_epoch_and_unloading_forgets_the_shard() {
    use crate::replica::producer_state::{ProducerStateManager, TxnMarker};
    use std::collections::BTreeSet;
    let shards = 4;
    let shard = crate::txn::records::partition_for("tx", shards);
    let other_id = (0..)
        .map(|i| format!("other-{i}"))
        .find(|id| crate::txn::records::partition_for(id, shards) != shard)
        .unwrap_or_default();
    let other = crate::txn::records::partition_for(&other_id, shards);
    let mut old = coordinator();
    old.loaded_shard(shards, shard, 3);
    old.loaded_shard(shards, other, 13);
    let mut next = 0;
    let (a, _) = init(&mut old, T0, "tx", None, &mut next);
    let (b, _) = init(&mut old, T0, &other_id, None, &mut next);
    let me = who("tx", a.producer_id, a.producer_epoch);
    old.add_v1(T0 + 1, me, &parts(&[("orders", 0)]));
    let (_, fx) = old.end_v1(T0 + 2, me, false);
    assert_eq!(fx.markers[0].coordinator_epoch, 3);
    assert_eq!(old.coordinator_epoch_of(&other_id), 13);
    assert!(old.in_shards("tx", &BTreeSet::from([shard])));
    assert!(!old.in_shards(&other_id, &BTreeSet::from([shard])));

    // Unloading `shard` forgets "tx" and its epoch; the other shard stays.
    old.unload_shards(shards, &BTreeSet::from([shard]));
    assert!(old.get("tx").is_none());
    assert_eq!(
        old.coordinator_epoch_of("tx"),
        0,
        "not loaded: the configured epoch"
    );
    assert_eq!(
        old.get(&other_id).map(|m| m.producer_id),
        Some(b.producer_id)
    );
    assert_eq!(old.coordinator_epoch_of(&other_id), 13);
    assert!(old.take_dirty().contains(&"tx".to_string()));

    // The successor loaded the shard at leader epoch 5 and wrote its marker first.
    let mut new = coordinator();
    new.loaded_shard(shards, shard, 5);
    let mut state = ProducerStateManager::new();
    let marker = |epoch: i32, offset| TxnMarker {
        producer_id: a.producer_id,
        producer_epoch: a.producer_epoch,
        coordinator_epoch: epoch,
        control: ControlType::Abort,
        offset,
    };
    let newer = marker(new.coordinator_epoch_of("tx"), 10);
    assert_eq!(state.check_marker(&newer), Ok(()));
    state.on_marker(&newer, T0);
    let refused = state.check_marker(&marker(3, 11)).unwrap_err();
    assert_eq!(refused.code(), 52); // TRANSACTION_COORDINATOR_FENCED
}
