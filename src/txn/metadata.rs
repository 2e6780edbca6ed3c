//! One transactional id's state (Kafka's TransactionMetadata) and the states a transaction moves
//! through (Kafka's TransactionState, with the same ids and names, which `__transaction_state`
//! and DescribeTransactions/ListTransactions expose), plus Kafka's transaction versions
//! (`transaction.version`: 0 and 1 are Transactions V1, 2 is V2, KIP-890). Pure data; no I/O.

use std::collections::BTreeSet;

use super::records::TxnLogValue;

/// Where a transaction is. Ids and names are Kafka's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction (after InitProducerId, before the first AddPartitions).
    Empty,
    /// Partitions were added; the producer may write.
    Ongoing,
    /// EndTxn(commit) is persisted; commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId is persisted; abort markers are being
    /// written.
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// The transactional id expired (never kept in memory: it is removed).
    Dead,
    /// Kafka's transient state while fencing; never persisted by Kafka or by us (we go straight
    /// to PrepareAbort with the bumped epoch), but readable.
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// The name DescribeTransactions and ListTransactions report.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Commit or abort markers are in flight.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// No transaction is open or finishing (the id may expire, the epoch may be bumped).
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// Kafka's `transaction.version` levels. Level 2 (Transactions V2, KIP-890) bumps the producer epoch
/// on every commit and abort and adds partitions implicitly through Produce v12+ and
/// TxnOffsetCommit v5+; levels 0 and 1 are Transactions V1 (level 1 only changes the log format,
/// which Sluice always writes as v1).
pub mod txn_version {
    /// Kafka's feature name of the transaction protocol version (KIP-890).
    pub const FEATURE: &str = "transaction.version";
    /// Transactions V1: what a client sending EndTxn <= v4, Produce <= v11 or TxnOffsetCommit <= v4
    /// speaks.
    pub const V1: i16 = 0;
    /// Transactions V2: EndTxn v5+, Produce v12+, TxnOffsetCommit v5+.
    pub const V2: i16 = 2;
    /// The highest level Sluice supports (ApiVersions' `supported_features`).
    pub const MAX: i16 = 2;

    /// Kafka's `TransactionVersion.supportsEpochBump`.
    pub fn supports_epoch_bump(level: i16) -> bool {
        level >= V2
    }

    /// The transaction version a client speaks, from the version of its EndTxn request (Kafka:
    /// EndTxn v5+ is V2).
    pub fn of_end_txn(api_version: i16) -> i16 {
        if api_version >= 5 {
            V2
        } else {
            V1
        }
    }
}

/// Kafka refuses to hand out the last two epochs, so a producer can always still be fenced.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last transition (-1 if none): a KIP-360 retry that names it
    /// with an exhausted epoch still gets the new id. In memory only: Kafka 4.1.2 does not
    /// write it to `__transaction_state` either.
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump by a KIP-360 InitProducerId, so a retry of that request gets
    /// the same answer; -1 when unknown (not persisted, as in Kafka).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    /// When the first partition was added (-1 when no transaction).
    pub start_timestamp_ms: i64,
    pub last_update_timestamp_ms: i64,
    /// Transactions V2: the producer id the transaction moves to when it completes, because its
    /// epoch ran out (-1: none). Stored as TransactionLogValue's NextProducerId tag when read from
    /// Kafka's log; Sluice, like Kafka 4.1.2, does not write it.
    pub next_producer_id: i64,
    /// The transaction version of the client's last transition ([`txn_version`]); stored as
    /// TransactionLogValue's ClientTransactionVersion tag.
    pub client_transaction_version: i16,
}

impl TxnMetadata {
    /// The stored form.
    pub fn to_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            next_producer_epoch: -1,
            timeout_ms: self.timeout_ms,
            status: self.state.id(),
            partitions: if self.state == TxnState::Empty {
                BTreeSet::new()
            } else {
                self.partitions.clone()
            },
            last_update_timestamp_ms: self.last_update_timestamp_ms,
            start_timestamp_ms: self.start_timestamp_ms,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Rebuilds metadata from a stored value; None for an unknown status id.
    pub fn from_value(transactional_id: &str, v: TxnLogValue) -> Option<TxnMetadata> {
        Some(TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: -1,
            timeout_ms: v.timeout_ms,
            state: TxnState::from_id(v.status)?,
            partitions: v.partitions,
            start_timestamp_ms: v.start_timestamp_ms,
            last_update_timestamp_ms: v.last_update_timestamp_ms,
            next_producer_id: v.next_producer_id,
            client_transaction_version: v.client_transaction_version,
        })
    }

    /// When an Ongoing transaction times out: Kafka aborts once `start + timeout < now`.
    pub fn timeout_deadline(&self) -> Option<i64> {
        (self.state == TxnState::Ongoing)
            .then(|| self.start_timestamp_ms + self.timeout_ms as i64 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_ids_and_names_are_kafkas() {
        for s in TxnState::ALL {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
            assert_eq!(TxnState::from_name(s.name()), Some(s));
        }
        assert_eq!(TxnState::PrepareEpochFence.id(), 7);
        assert_eq!(TxnState::CompleteAbort.name(), "CompleteAbort");
        assert_eq!(TxnState::from_id(8), None);
        assert!(is_epoch_exhausted(i16::MAX - 1));
        assert!(!is_epoch_exhausted(i16::MAX - 2));
    }
}
