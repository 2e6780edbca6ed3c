//! Transaction markers as the producer state sees them: the parsed end-transaction marker
//! ([`TxnMarker`]) and the transaction a marker completes ([`CompletedTxn`]). Pure: no I/O.

use crate::log::AbortedTxn;
use crate::record::{self, BatchHeader, ControlType};

/// One end-transaction marker (Kafka's `EndTransactionMarker` plus its batch's producer fields and
/// offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub control: ControlType,
    /// Offset of the marker in the log (its batch's base offset).
    pub offset: i64,
}

/// A transaction a marker completed (Kafka's `CompletedTxn`), with the last stable offset right
/// after the marker (Kafka's `lastStableOffset(completedTxn)`, the value the `.txnindex` keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub aborted: bool,
    pub last_stable_offset: i64,
}

impl CompletedTxn {
    /// The `.txnindex` entry of an aborted transaction (`None` for a commit).
    pub fn aborted_txn(&self) -> Option<AbortedTxn> {
        self.aborted.then_some(AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        })
    }
}

/// Reads the end-transaction marker of one whole control batch: the first record's key is
/// `version i16 | type i16` (0 abort, 1 commit) and its value `version i16 | coordinator_epoch i32`.
/// `None` when the batch is not a control batch with a producer id, is compressed, has no records,
/// or its first record is not a commit/abort marker.
pub fn end_txn_marker(batch: &[u8]) -> Option<TxnMarker> {
    let header = BatchHeader::parse(batch).ok()?;
    if !header.is_control() || !header.has_producer_id() {
        return None;
    }
    let control = record::control_type(batch)?;
    let records = record::uncompressed_records(batch)?;
    let value = records.first()?.1.as_ref()?;
    if value.len() < 6 {
        return None;
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Some(TxnMarker {
        producer_id: header.producer_id,
        producer_epoch: header.producer_epoch,
        coordinator_epoch,
        control,
        offset: header.base_offset,
    })
}
