//! The transaction coordinator: InitProducerId with transactional ids, AddPartitionsToTxn,
//! AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, timeouts, and the commit/abort
//! markers, with state kept in `__transaction_state`. Transactions V1 and V2 (KIP-890) side by
//! side: the client's request versions decide which rules a step follows (EndTxn v5+, Produce
//! v12+ and TxnOffsetCommit v5+ are V2: the epoch is bumped on every commit/abort, partitions join
//! implicitly); the broker's finalized `transaction.version` ([`TxnConfig::transaction_version`],
//! advertised in ApiVersions) tells clients which to speak and is the version of the
//! coordinator's own aborts (timeouts, fencing).
//!
//! Same shape as [`crate::group`]:
//! - a pure state machine ([`Coordinator`], one [`TxnMetadata`] per transactional id): every
//!   input carries `now` and returns answers plus [`Effects`] (records to persist, marker jobs to
//!   perform). No I/O, no clock, no tokio; producer ids arrive as inputs. Tested with simulated
//!   time.
//! - a thin async [`driver`]: one task owns the coordinator, appends each step's records to
//!   `__transaction_state` before answering, writes the markers (then tells the group coordinator
//!   about `__consumer_offsets` partitions), feeds "markers written" back as the CompleteCommit /
//!   CompleteAbort step, publishes the [`view::TxnView`] the produce path verifies against, and
//!   sleeps until the earliest transaction deadline.

pub mod coordinator;
pub mod driver;
pub mod end_txn;
pub mod list;
pub mod marker_channel;
pub mod markers;
pub mod metadata;
pub mod records;
pub mod view;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_v2;

pub use coordinator::Coordinator;
pub use driver::TxnHandle;
pub use metadata::{txn_version, TxnMetadata, TxnState};
pub use records::TRANSACTION_STATE_TOPIC;

use crate::record::ControlType;

/// A record to append to `__transaction_state`: key and value bytes (None = tombstone), plus the
/// transactional id (which picks the partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// Markers to write for one transaction: a commit or abort control batch on every partition,
/// then the coordinator's "markers written" step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub control: ControlType,
    pub partitions: Vec<(String, i32)>,
}

/// What a coordinator step asks the driver to do.
#[derive(Debug, Default)]
pub struct Effects {
    /// Records to append to `__transaction_state` (before any answer is sent).
    pub records: Vec<TxnRecord>,
    /// Markers to write once the records are persisted.
    pub markers: Vec<MarkerJob>,
    /// The metadata each changed transactional id had before this step (None: it was new), so a
    /// failed append can be undone with [`Coordinator::restore`].
    pub undo: Vec<(String, Option<TxnMetadata>)>,
}

/// The broker settings the coordinator obeys.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`
    pub transactional_id_expiration_ms: i64,
    /// The leader epoch of `__transaction_state` (always 0 on this single node), carried by markers.
    pub coordinator_epoch: i32,
    /// The finalized `transaction.version` feature level (`sluice.feature.transaction.version`):
    /// 2 (Kafka 4's default) makes clients speak Transactions V2, 0 keeps them on V1; the
    /// coordinator's own aborts (timeouts, fencing) follow it, as Kafka's do.
    pub transaction_version: i16,
    /// How long a step's `__transaction_state` records may take to be committed
    /// (`driver::COMMIT_WAIT_MS`; shorter in tests).
    pub commit_wait_ms: i64,
}

impl TxnConfig {
    pub fn from_config(c: &crate::config::Config) -> TxnConfig {
        TxnConfig {
            max_timeout_ms: c.transaction_max_timeout_ms,
            transactional_id_expiration_ms: c.transactional_id_expiration_ms as i64,
            coordinator_epoch: 0,
            transaction_version: c.feature_transaction_version,
            commit_wait_ms: driver::COMMIT_WAIT_MS,
        }
    }
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig::from_config(&crate::config::Config::default())
    }
}

/// Transaction error codes by Kafka's names.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const INVALID_REQUEST: i16 = 42;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
    pub const PRODUCER_FENCED: i16 = 90;
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;

    /// Clients older than the version that knows PRODUCER_FENCED get INVALID_PRODUCER_EPOCH, as
    /// Kafka does (InitProducerId < v4; AddPartitionsToTxn, AddOffsetsToTxn, EndTxn < v2).
    pub fn for_version(code: i16, version: i16, first_fenced_version: i16) -> i16 {
        if code == PRODUCER_FENCED && version < first_fenced_version {
            INVALID_PRODUCER_EPOCH
        } else {
            code
        }
    }
}
