//! `share.isolation.level=read_committed`: which fetched batches belong to aborted transactions.
//!
//! A ShareFetch answer has no aborted-transactions field, so a share consumer cannot drop the
//! data of an aborted transaction itself, as a plain consumer does. Under read_committed the
//! share-partition leader reads only below the last stable offset and archives the data batches
//! of aborted transactions instead of acquiring them (Kafka's
//! `SharePartition.filterAbortedTransactionalAcquiredRecords`). Which batches those are is decided
//! as Kafka's consumer decides it for a read_committed Fetch: walking the batches in offset order
//! with the aborted transactions the log lists for the read (`(producer id, first offset)`), a
//! producer's transaction counts as aborted from its first offset until its ABORT marker; a
//! transactional data batch of a producer in that state is aborted. Markers themselves are not:
//! they are acquired and the client acknowledges them as GAP (they hold no data record).
//!
//! Pure: no I/O.

use std::collections::HashSet;

use crate::record::ControlType;

/// What the classification needs of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub last_offset: i64,
    pub producer_id: i64,
    pub transactional: bool,
    /// The marker type of a control batch; `None` for a data batch.
    pub control: Option<ControlType>,
}

/// For each batch of `batches` (in offset order), whether it is data of an aborted transaction.
/// `aborted_txns` are the `(producer id, first offset)` of the aborted transactions overlapping
/// the read, in any order.
pub fn aborted_batches(batches: &[BatchInfo], aborted_txns: &[(i64, i64)]) -> Vec<bool> {
    let mut pending: Vec<(i64, i64)> = aborted_txns.to_vec();
    // By first offset, the earliest last: popped from the back as the walk reaches them.
    pending.sort_by_key(|&(pid, first)| (std::cmp::Reverse(first), pid));
    let mut aborting: HashSet<i64> = HashSet::new();
    batches
        .iter()
        .map(|b| {
            if b.producer_id < 0 {
                return false;
            }
            while let Some(&(pid, first)) = pending.last() {
                if first > b.last_offset {
                    break;
                }
                aborting.insert(pid);
                pending.pop();
            }
            match b.control {
                Some(ControlType::Abort) => {
                    aborting.remove(&b.producer_id);
                    false
                }
                Some(ControlType::Commit) => false,
                None => b.transactional && aborting.contains(&b.producer_id),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(last: i64, pid: i64, transactional: bool) -> BatchInfo {
        BatchInfo {
            last_offset: last,
            producer_id: pid,
            transactional,
            control: None,
        }
    }

    fn marker(at: i64, pid: i64, control: ControlType) -> BatchInfo {
        BatchInfo {
            last_offset: at,
            producer_id: pid,
            transactional: true,
            control: Some(control),
        }
    }

    #[test]
    fn an_aborted_transaction_is_dropped_up_to_its_marker_and_no_further() {
        // Producer 7: offsets 0-2 in a transaction it aborts at 5; producer 8 commits 3-4 at 6;
        // producer 7 writes again transactionally at 7 (a new transaction, committed at 8), and
        // a plain producer at 9.
        let batches = [
            data(2, 7, true),
            data(4, 8, true),
            marker(5, 7, ControlType::Abort),
            marker(6, 8, ControlType::Commit),
            data(7, 7, true),
            marker(8, 7, ControlType::Commit),
            data(9, -1, false),
        ];
        let aborted = aborted_batches(&batches, &[(7, 0)]);
        assert_eq!(
            aborted,
            vec![true, false, false, false, false, false, false]
        );
    }

    #[test]
    fn a_transaction_starting_inside_the_read_counts_from_its_first_offset() {
        // Producer 3's earlier, committed transaction at 0-1 (marker 2); its aborted one
        // starts at 4 (marker 6). An idempotent, non-transactional batch of the same producer
        // id is never aborted data.
        let batches = [
            data(1, 3, true),
            marker(2, 3, ControlType::Commit),
            data(3, 3, false),
            data(5, 3, true),
            marker(6, 3, ControlType::Abort),
        ];
        assert_eq!(
            aborted_batches(&batches, &[(3, 4)]),
            vec![false, false, false, true, false]
        );
    }

    #[test]
    fn without_aborted_transactions_nothing_is_dropped() {
        let batches = [data(0, 1, true), marker(1, 1, ControlType::Abort)];
        assert_eq!(aborted_batches(&batches, &[]), vec![false, false]);
    }
}
