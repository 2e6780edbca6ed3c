//! EndTxn in the coordinator state machine, for both transaction versions (Kafka's
//! `TransactionCoordinator.endTransaction` and `endTransactionWithTV1`). The request's version
//! decides which rules apply (EndTxn v5+ is Transactions V2), not the transactional id's history.
//!
//! - V1: the epoch must be the current one; Ongoing moves to PrepareCommit/PrepareAbort with the
//!   same epoch; a commit (abort) retried after it completed answers NONE. The answer carries no
//!   producer id or epoch.
//! - V2 (KIP-890): every commit and abort bumps the epoch in the Prepare step, so the markers carry
//!   the bumped epoch and fence every late write of the transaction; the answer carries the
//!   producer id and epoch the client uses next. An abort is accepted with no transaction open
//!   (the client cannot know whether a Produce added a partition). A retry names the epoch before
//!   the bump (or, after the epoch ran out, the previous producer id at epoch `i16::MAX - 1`): it
//!   gets NONE with the current id and epoch once complete, CONCURRENT_TRANSACTIONS while the
//!   markers are in flight. When the bumped epoch would reach the last usable one the transaction
//!   gets a fresh producer id (an input, like every producer id here), which the client receives
//!   with epoch 0 and the metadata takes over when the markers are written.
//!
//! Pure: `now` and the fresh producer id are inputs. Tests: `tests_v2.rs` and `tests.rs`.

use super::coordinator::{Coordinator, TxnIdentity};
use super::metadata::{is_epoch_exhausted, txn_version, TxnMetadata, TxnState};
use super::{codes, Effects};
use crate::record::ControlType;

/// An EndTxn request as the coordinator sees it.
#[derive(Debug, Clone, Copy)]
pub struct EndInput<'a> {
    pub who: TxnIdentity<'a>,
    pub commit: bool,
    /// The client's transaction version ([`txn_version::of_end_txn`]).
    pub client_version: i16,
    /// A freshly allocated producer id, when [`Coordinator::end_txn_needs_producer_id`] said so.
    pub fresh_producer_id: Option<i64>,
}

/// EndTxn's answer: the error code and (V2, on success) the producer id and epoch the client
/// continues with; -1, -1 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndAnswer {
    pub error: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl EndAnswer {
    fn error(code: i16) -> EndAnswer {
        EndAnswer {
            error: code,
            producer_id: -1,
            producer_epoch: -1,
        }
    }

    fn ok(producer_id: i64, producer_epoch: i16) -> EndAnswer {
        EndAnswer {
            error: codes::NONE,
            producer_id,
            producer_epoch,
        }
    }
}

impl Coordinator {
    /// Whether EndTxn for `transactional_id` may need a fresh producer id: Transactions V2 and an
    /// epoch whose bump would exhaust it.
    pub fn end_txn_needs_producer_id(&self, transactional_id: &str, client_version: i16) -> bool {
        txn_version::supports_epoch_bump(client_version)
            && self
                .get(transactional_id)
                .is_some_and(|m| is_epoch_exhausted(m.producer_epoch))
    }

    /// EndTxn from the client: commit or abort. The answer is NONE once PrepareCommit /
    /// PrepareAbort is persisted; the markers follow as effects.
    pub fn end_txn(&mut self, now: i64, input: EndInput<'_>) -> (EndAnswer, Effects) {
        if txn_version::supports_epoch_bump(input.client_version) {
            self.end_txn_v2(now, input)
        } else {
            let (code, fx) = self.end_txn_v1(now, input.who, input.commit);
            (EndAnswer::error(code), fx)
        }
    }

    fn end_txn_v1(&mut self, now: i64, who: TxnIdentity<'_>, commit: bool) -> (i16, Effects) {
        let mut fx = Effects::default();
        let m = match self.check_identity(who) {
            Ok(m) => m,
            Err(code) => return (code, fx),
        };
        let code = match (m.state, commit) {
            (TxnState::Ongoing, _) => {
                let mut next = m.clone();
                next.previous_producer_id = m.producer_id;
                next.client_transaction_version = txn_version::V1;
                self.prepare_end(now, next, commit, &mut fx);
                codes::NONE
            }
            // A retry of an EndTxn that already completed.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => codes::NONE,
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                codes::CONCURRENT_TRANSACTIONS
            }
            _ => codes::INVALID_TXN_STATE,
        };
        (code, fx)
    }

    fn end_txn_v2(&mut self, now: i64, input: EndInput<'_>) -> (EndAnswer, Effects) {
        let mut fx = Effects::default();
        let who = input.who;
        if who.transactional_id.is_empty() {
            return (EndAnswer::error(codes::INVALID_REQUEST), fx);
        }
        let Some(m) = self.get(who.transactional_id) else {
            return (EndAnswer::error(codes::INVALID_PRODUCER_ID_MAPPING), fx);
        };
        let epoch = who.producer_epoch;
        // A retry after the epoch ran out: the client still has the old id at the last epoch.
        let retry_on_overflow = m.previous_producer_id == who.producer_id
            && epoch == i16::MAX - 1
            && m.producer_epoch == 0;
        // A retry of an EndTxn whose bump is already stored.
        let retry_on_bump = m.producer_epoch as i32 == epoch as i32 + 1;
        let is_retry = retry_on_bump || retry_on_overflow;
        let valid_epoch = match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                is_retry || epoch == m.producer_epoch
            }
            _ => epoch == m.producer_epoch,
        };
        if m.producer_id != who.producer_id && !retry_on_overflow {
            return (EndAnswer::error(codes::INVALID_PRODUCER_ID_MAPPING), fx);
        }
        if !valid_epoch {
            return (EndAnswer::error(codes::PRODUCER_FENCED), fx);
        }
        let current = EndAnswer::ok(m.producer_id, m.producer_epoch);
        let commit = input.commit;
        // What the request asks, by state: end the open transaction, end an empty one (abort
        // only), answer a retry, or refuse.
        let (started, answer) = match (m.state, commit) {
            (TxnState::Ongoing, _) => (true, None),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if is_retry => {
                (false, Some(current))
            }
            (TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Empty, false)
                if !is_retry =>
            {
                (false, None)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => (
                false,
                Some(EndAnswer::error(codes::CONCURRENT_TRANSACTIONS)),
            ),
            _ => (false, Some(EndAnswer::error(codes::INVALID_TXN_STATE))),
        };
        if let Some(answer) = answer {
            return (answer, fx);
        }
        let mut next = m.clone();
        if is_epoch_exhausted(m.producer_epoch) {
            match input.fresh_producer_id {
                Some(id) => next.next_producer_id = id,
                None => return (EndAnswer::error(codes::COORDINATOR_NOT_AVAILABLE), fx),
            }
        }
        next.previous_producer_id = m.producer_id;
        next.last_producer_epoch = m.producer_epoch;
        if m.producer_epoch != i16::MAX || commit {
            // An abort at i16::MAX (only after a bug) goes through without a bump, as in Kafka.
            next.producer_epoch = m.producer_epoch.saturating_add(1);
        }
        if !started {
            // Nothing was added: the abort has no partitions; it starts now.
            next.partitions.clear();
            next.start_timestamp_ms = now;
        }
        next.client_transaction_version = input.client_version;
        let answer = if next.next_producer_id >= 0 {
            EndAnswer::ok(next.next_producer_id, 0)
        } else {
            EndAnswer::ok(next.producer_id, next.producer_epoch)
        };
        self.prepare_end(now, next, commit, &mut fx);
        (answer, fx)
    }

    /// Moves `next` to PrepareCommit / PrepareAbort and queues its markers.
    fn prepare_end(&mut self, now: i64, mut next: TxnMetadata, commit: bool, fx: &mut Effects) {
        let (state, control) = if commit {
            (TxnState::PrepareCommit, ControlType::Commit)
        } else {
            (TxnState::PrepareAbort, ControlType::Abort)
        };
        next.state = state;
        next.last_update_timestamp_ms = now;
        fx.markers.push(self.marker_job(&next, control));
        self.write(next, fx);
    }
}
