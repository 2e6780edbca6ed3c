//! A replica's producer state, as the real partition keeps it: the real `ProducerStateManager`
//! fed every batch appended (the leader after its `check`, a follower with what it fetched), a
//! snapshot of it at every segment roll (the real snapshot bytes, Kafka's version-1 layout, which
//! keeps only each producer's last batch), and on a truncation or a restart the state rebuilt
//! from the newest snapshot at or below the log end plus a replay of the batches after it, as
//! `Partition::truncate_to` and `Partition::open` do. A snapshot is durable once a flush covered
//! it (the real one is written after its segment is fsynced); a power loss drops the others.
//! No clock (time is an argument), no I/O.

use std::collections::BTreeMap;

use sluice::log::AbortedTxn;
use sluice::record::{BatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL};
use sluice::replica::producer_state::{ProducerStateManager, TxnMarker};

use super::msg::{Rec, ReplStats};

/// Records per simulated segment: a batch starting this far past the active segment's base
/// rolls a new one (and snapshots the producer state at its base offset).
pub const SEGMENT_RECORDS: i64 = 32;

/// The header of the batch whose first record is `first`, at `base_offset` (only the fields the
/// producer state reads are meaningful).
pub fn header(base_offset: i64, first: &Rec, now: i64) -> BatchHeader {
    let b = first.batch;
    BatchHeader {
        base_offset,
        batch_length: 0,
        partition_leader_epoch: first.epoch,
        magic: 2,
        crc: 0,
        attributes: if b.control.is_some() {
            ATTR_TRANSACTIONAL | ATTR_CONTROL
        } else if b.transactional {
            ATTR_TRANSACTIONAL
        } else {
            0
        },
        last_offset_delta: b.count - 1,
        base_timestamp: now,
        max_timestamp: now,
        producer_id: b.producer_id,
        producer_epoch: b.producer_epoch,
        base_sequence: b.base_sequence,
        record_count: b.count,
    }
}

/// The marker the control record `rec` at `offset` is (`None` for a data record).
pub fn marker(offset: i64, rec: &Rec) -> Option<TxnMarker> {
    let (control, coordinator_epoch) = rec.batch.control?;
    Some(TxnMarker {
        producer_id: rec.batch.producer_id,
        producer_epoch: rec.batch.producer_epoch,
        coordinator_epoch,
        control,
        offset,
    })
}

#[derive(Debug, Default)]
pub struct ProducerLog {
    pub state: ProducerStateManager,
    /// The aborted transactions of the log (the segments' `.txnindex` entries, in increasing
    /// marker offset), as the real partition adds them from each completed transaction.
    pub aborted: Vec<AbortedTxn>,
    /// Snapshot offset -> (bytes, durable).
    snapshots: BTreeMap<i64, (Vec<u8>, bool)>,
    /// The active segment's base offset.
    active_base: i64,
}

impl ProducerLog {
    /// Before a batch is appended at `base`: a segment roll snapshots the state there.
    pub fn before_append(&mut self, base: i64, stats: &mut ReplStats) {
        if base >= self.active_base + SEGMENT_RECORDS {
            self.snapshots
                .insert(base, (self.state.snapshot_bytes(), false));
            self.active_base = base;
            stats.producer_snapshots += 1;
            // The real partition keeps the snapshots of its two newest segments.
            while self.snapshots.len() > 2 {
                self.snapshots.pop_first();
            }
        }
    }

    /// A batch now in the log at `base` (its first record `first`): a data batch's header goes
    /// to `on_append`, a marker to `on_marker`, and an abort it completes to the transaction
    /// index, as the real partition's append and replay (`ensure_aborted_txn`: not twice).
    pub fn on_batch(&mut self, base: i64, first: &Rec, now: i64) {
        if let Some(m) = marker(base, first) {
            let completed = self.state.on_marker(&m, now);
            if let Some(a) = completed.and_then(|c| c.aborted_txn()) {
                if !self.aborted.contains(&a) {
                    self.aborted.push(a);
                }
            }
        } else if first.batch.producer_id >= 0 {
            self.state.on_append(&header(base, first, now), now);
        }
    }

    /// Appends `records` (whole batches) at the end of `log`, with the segment rolls and the
    /// producer state's updates of each batch.
    pub fn append(&mut self, log: &mut Vec<Rec>, records: &[Rec], now: i64, stats: &mut ReplStats) {
        for rec in records {
            let offset = log.len() as i64;
            if rec.batch.index == 0 {
                self.before_append(offset, stats);
                self.on_batch(offset, rec, now);
            }
            log.push(rec.clone());
        }
    }

    /// A flush: every snapshot taken is durable.
    pub fn flush(&mut self) {
        for s in self.snapshots.values_mut() {
            s.1 = true;
        }
    }

    /// A power loss: the snapshots not yet durable are gone.
    pub fn power_loss(&mut self) {
        self.snapshots.retain(|_, s| s.1);
    }

    /// The state rebuilt for `log` (after a truncation, or at a restart): snapshots past its end
    /// deleted, the newest at or below it loaded, the batches after it replayed.
    pub fn rebuild(&mut self, log: &[Rec], now: i64, stats: &mut ReplStats) {
        let end = log.len() as i64;
        self.snapshots.retain(|&o, _| o <= end);
        // The transaction index is cut with the log (`TxnIndex::truncate_to`); the replay below
        // re-adds the aborts after the snapshot.
        self.aborted.retain(|a| a.last_offset < end);
        let loaded = self
            .snapshots
            .iter()
            .next_back()
            .and_then(|(&o, (bytes, _))| {
                ProducerStateManager::from_snapshot_bytes(bytes)
                    .ok()
                    .map(|s| (s, o))
            });
        let (state, from) = loaded.unwrap_or_default();
        self.state = state;
        if self.active_base > end {
            // The segments past the end are gone: the active one starts at the newest roll kept.
            self.active_base = self.snapshots.keys().next_back().copied().unwrap_or(0);
        }
        stats.producer_state_loads += 1;
        for (o, rec) in log.iter().enumerate().skip(from as usize) {
            if rec.batch.index == 0 {
                self.on_batch(o as i64, rec, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice::replica::producer_state::{AppendOrigin, ProducerCheck};

    use super::*;
    use crate::replica::BatchOf;

    /// A one-record batch of producer 7 at `seq`.
    fn rec(seq: i32) -> Rec {
        Rec {
            epoch: 0,
            id: seq as u64,
            batch: BatchOf {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: seq,
                count: 1,
                index: 0,
                transactional: false,
                control: None,
            },
            kv: None,
        }
    }

    fn check(p: &ProducerLog, seq: i32) -> Result<ProducerCheck, i16> {
        p.state
            .check(&header(100, &rec(seq), 0), AppendOrigin::Client)
            .map_err(|e| e.code())
    }

    #[test]
    fn a_rebuild_loads_the_newest_snapshot_and_replays_the_batches_after_it() {
        let (mut p, mut log, mut stats) =
            (ProducerLog::default(), Vec::new(), ReplStats::default());
        for seq in 0..40 {
            p.append(&mut log, &[rec(seq)], 0, &mut stats);
        }
        assert_eq!(stats.producer_snapshots, 1, "one roll, at offset 32");
        p.flush();
        log.truncate(35);
        p.rebuild(&log, 0, &mut stats);
        // The snapshot at 32 kept batch 31 only; the replay added 32..=34.
        assert_eq!(p.state.entry(7).map(|e| e.last_sequence()), Some(34));
        assert_eq!(
            check(&p, 33),
            Ok(ProducerCheck::Duplicate {
                base_offset: 33,
                last_offset: 33
            })
        );
        // A batch before the snapshot is no longer known: out of order, as in Kafka.
        assert_eq!(check(&p, 30), Err(45));
        assert_eq!(check(&p, 35), Ok(ProducerCheck::Append));
    }

    #[test]
    fn a_power_loss_drops_the_snapshots_no_flush_covered() {
        let (mut p, mut log, mut stats) =
            (ProducerLog::default(), Vec::new(), ReplStats::default());
        for seq in 0..40 {
            p.append(&mut log, &[rec(seq)], 0, &mut stats);
        }
        p.power_loss();
        p.rebuild(&log, 0, &mut stats);
        // Replayed from the log start: every batch of the last five is known again.
        assert!(matches!(check(&p, 36), Ok(ProducerCheck::Duplicate { .. })));
        assert_eq!(check(&p, 30), Err(45));
    }
}
