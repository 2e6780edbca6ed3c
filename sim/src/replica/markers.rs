//! The partition leader's side of transactions: WriteTxnMarkers for one partition (as
//! `api::txn_log::write_txn_markers` and `Partition::write_txn_marker`: leader only, NOT_ENOUGH_REPLICAS
//! below the minimum ISR, the real `check_marker` (INVALID_PRODUCER_EPOCH,
//! TRANSACTION_COORDINATOR_FENCED), the marker appended as a one-record control batch whose
//! `on_marker` completes the producer's transaction, answered once the HW passed it or
//! REQUEST_TIMED_OUT after `COMMIT_WAIT_MS`), and a consumer's read: read_uncommitted up to the HW,
//! read_committed up to the last stable offset (`ProducerStateManager::last_stable_offset`, as
//! `Partition::offsets`) in whole batches, with the aborted transactions overlapping the read
//! (`txn_index::collect_overlapping`, as `Partition::read_committed`). The `LsoFromHw` mutation
//! serves read_committed up to the HW. No clock, no I/O.

use sluice::log::txn_index::collect_overlapping;
use sluice::record::ControlType;
use sluice::replica::producer_state::TxnMarker;
use sluice::replica::replication::acks::DelayedProduce;

use super::leading::{answer, complete_waiting, perform, served_hw};
use super::{
    BatchOf, Env, Out, Rec, ReplicaLog, Replicas, Role, Tp, Waiting, KAFKA_STORAGE_ERROR,
    MAX_FETCH_RECORDS, NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
};
use crate::net::Addr;
use crate::world::Mutation;

/// How long a written marker waits for the HW before REQUEST_TIMED_OUT (`txn::driver::COMMIT_WAIT_MS`).
pub const MARKER_COMMIT_WAIT_MS: i32 = sluice::txn::driver::COMMIT_WAIT_MS as i32;

/// A consumer read's answer: the records or an error code, and the aborted transactions.
pub type ConsumerRead = (Result<Vec<Rec>, i16>, Vec<(i64, i64)>);

/// One WriteTxnMarkers partition: (producer id, producer epoch, coordinator epoch, control).
pub type MarkerFields = (i64, i16, i32, ControlType);

impl Replicas {
    /// The marker `fields` for `tp`, from the coordinator at `from` (request `id`).
    pub(super) fn write_txn_marker(
        &mut self,
        (from, id): (Addr, u64),
        tp: Tp,
        (producer_id, producer_epoch, coordinator_epoch, control): MarkerFields,
        env: &mut Env,
        out: &mut Out,
    ) {
        let me = self.id;
        let full = env.now < self.disk_full_until;
        let Some(r) = self.parts.get_mut(&tp) else {
            return out.push((from, answer(id, NOT_LEADER_OR_FOLLOWER)));
        };
        let Role::Leader(l) = &mut r.role else {
            return out.push((from, answer(id, NOT_LEADER_OR_FOLLOWER)));
        };
        if l.leader.check_acks_all_append().is_err() {
            return out.push((from, answer(id, NOT_ENOUGH_REPLICAS)));
        }
        let base = r.log.len() as i64;
        let marker = TxnMarker {
            producer_id,
            producer_epoch,
            coordinator_epoch,
            control,
            offset: base,
        };
        if let Err(e) = r.producers.state.check_marker(&marker) {
            return out.push((from, answer(id, e.code())));
        }
        if full {
            env.stats.storage_errors += 1;
            return out.push((from, answer(id, KAFKA_STORAGE_ERROR)));
        }
        let epoch = l.leader.leader_epoch();
        let rec = Rec {
            epoch,
            id: 0,
            batch: BatchOf::marker(producer_id, producer_epoch, control, coordinator_epoch),
            kv: None,
        };
        if r.cache.assign(epoch, base).is_err() {
            env.check
                .violation(format!("broker {me}: invalid epoch {epoch} at {base}"));
        }
        let records = vec![rec];
        r.producers
            .append(&mut r.log, &records, env.now as i64, env.stats);
        let end = r.log.len() as i64;
        l.waiting.push(Waiting {
            produce: DelayedProduce::new(end - 1, env.now as i64, MARKER_COMMIT_WAIT_MS),
            client: from,
            request: id,
            base,
            records,
        });
        let effects = l.leader.on_append(end, env.now as i64);
        perform(me, tp, r, effects, env, out);
        if let Role::Leader(l) = &mut r.role {
            complete_waiting(me, tp, l, &r.log, env, out);
        }
    }
}

/// A consumer's read of `r` (led here) from `offset`: the records and, read_committed, the
/// aborted transactions overlapping them.
pub(super) fn consumer_read(
    me: i32,
    tp: Tp,
    r: &ReplicaLog,
    offset: i64,
    read_committed: bool,
    env: &mut Env,
) -> ConsumerRead {
    let Some(l) = r.leader() else {
        return (Err(NOT_LEADER_OR_FOLLOWER), Vec::new());
    };
    let hw = served_hw(l, env.mutation);
    if offset < 0 || offset > r.log_end() {
        return (Err(OFFSET_OUT_OF_RANGE), Vec::new());
    }
    let state = &r.producers.state;
    if !read_committed {
        let end = hw.min(offset + MAX_FETCH_RECORDS as i64).max(offset);
        let records = r.log[offset as usize..end as usize].to_vec();
        env.check
            .on_consumer_read(tp, l.leader_epoch(), offset, &records, l.high_watermark());
        env.stats.consumed += records.len() as u64;
        return (Ok(records), Vec::new());
    }
    let upper = if env.mutation == Some(Mutation::LsoFromHw) {
        hw
    } else {
        state.last_stable_offset(0, hw)
    };
    let mut end = upper.min(offset + MAX_FETCH_RECORDS as i64).max(offset);
    // Whole batches below the bound, as the log's reads.
    while end < upper && r.log[end as usize].batch.index != 0 {
        end += 1;
    }
    let records = r.log[offset as usize..end as usize].to_vec();
    let lso = state.last_stable_offset(0, l.high_watermark());
    if end > offset && end > lso {
        env.check.violation(format!(
            "invariant 17: broker {me} served a read_committed read of {}-{} up to offset {end}, past its last stable offset {lso} (epoch {})",
            tp.0, tp.1,
            l.leader_epoch()
        ));
    }
    env.check
        .on_consumer_read(tp, l.leader_epoch(), offset, &records, l.high_watermark());
    let mut aborted = Vec::new();
    if end > offset {
        collect_overlapping(&r.producers.aborted, offset, end, &mut aborted);
    }
    let aborted = aborted
        .into_iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    (Ok(records), aborted)
}
