//! A partition replica's part in replication (Kafka's `Partition` makeLeader / makeFollower and
//! its follower append path): the leader epoch cache and its `leader-epoch-checkpoint`, the role
//! the metadata image gives this replica, the leader's [`PartitionLeader`] (follower fetch states,
//! ISR, high watermark), and a follower's appends, high watermark and truncation.
//!
//! Invariants:
//! - Every batch appended (as leader or follower) has its leader epoch in the epoch cache at or
//!   below its base offset, and the file is rewritten before the append returns when the cache
//!   changed; a truncation cuts the cache with the log.
//! - On a leader the high watermark is the `PartitionLeader`'s (the smallest log end offset over
//!   the ISR, never decreasing); a replica not placed yet (`Role::Unplaced`: tests, or a log
//!   opened before the image names it) publishes every append at once, as a leader without
//!   followers. A follower's high watermark is the leader's, capped at its own log end, and only
//!   moves back when it truncates.
//! - A follower keeps the leader's offsets and epochs byte for byte; its producer state is rebuilt
//!   from what it appends, and after a truncation from the newest snapshot at or below the new end
//!   plus a replay (never adjusted in place).
//!
//! The decisions are the pure `replica::replication` functions; this file only holds them under
//! the partition's lock and performs their effects (files, watches). AlterPartition proposals are
//! returned to the caller, which sends them (`replica::fetcher` / `replica::alter_partition`).

use std::collections::BTreeSet;

use super::*;
use crate::log::PartitionLog;
use crate::replica::replication::acks::{NotEnoughReplicas, ReplicationView};
use crate::replica::replication::epoch_checkpoint::{
    read_leader_epoch_checkpoint, write_leader_epoch_checkpoint, LEADER_EPOCH_CHECKPOINT,
};
use crate::replica::replication::leader::{
    AlterPartitionProposal, AlterPartitionResponse, Effect, FetchRejected, FollowerFetch,
    LeaderAndIsr, LeaderConfig,
};
use crate::replica::replication::truncation::{self, OffsetTruncationState};
use crate::replica::replication::{BrokerId, EpochEndOffset, PartitionLeader};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// What the metadata image makes of this replica.
pub(crate) enum Role {
    /// Not placed by the image yet: appends are visible at once (no followers to wait for).
    Unplaced,
    Leader(Box<PartitionLeader>),
    Follower {
        leader_id: BrokerId,
    },
}

/// The leader's verdict on a follower's fetch of this partition, before it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaFetchCheck {
    /// Read from the fetch offset up to the log end.
    Read,
    /// The follower's last fetched epoch ends earlier here (or is unknown): answer this
    /// `DivergingEpoch` with no records; the follower truncates.
    Diverging(EpochEndOffset),
    /// Answer this partition error.
    Error(i16),
}

/// What a follower's append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerAppend {
    /// Batches appended (batches already held were skipped).
    pub batches: usize,
    pub log_end_offset: i64,
    /// With the flush policy: fsync through this offset ([`Partition::sync_and_publish`]).
    pub sync: Option<i64>,
}

/// What a follower fetch was sent under: the leader asked, the leader epoch and the fetch offset
/// (this replica's log end then). Its answer applies only while all three still hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedFrom {
    pub leader_id: BrokerId,
    pub leader_epoch: i32,
    pub fetch_offset: i64,
}

impl FetchedFrom {
    fn current(&self, st: &State) -> bool {
        matches!(st.role, Role::Follower { leader_id } if leader_id == self.leader_id)
            && st.leader_epoch == self.leader_epoch
            && st.log.log_end_offset() == self.fetch_offset
    }
}

/// Wall-clock milliseconds (the replication logic takes time as an argument; this is its source).
pub(super) fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The epoch cache of a log just opened: its `leader-epoch-checkpoint`, cut to the log's offsets,
/// or (no file, or a damaged one: logged) rebuilt from the batch headers, and written back when it
/// changed.
pub(super) fn load_epochs(log: &PartitionLog) -> Result<LeaderEpochCache, LogError> {
    let path = log.dir().join(LEADER_EPOCH_CHECKPOINT);
    let from_file = if path.exists() {
        match read_leader_epoch_checkpoint(&path)
            .map_err(|e| e.to_string())
            .and_then(|entries| LeaderEpochCache::from_entries(entries).map_err(|e| e.to_string()))
        {
            Ok(cache) => Some(cache),
            Err(e) => {
                tracing::warn!("{}: rebuilding the leader epoch cache: {e}", path.display());
                None
            }
        }
    } else {
        None
    };
    let mut changed = from_file.is_none();
    let mut cache = match from_file {
        Some(cache) => cache,
        None => {
            let mut cache = LeaderEpochCache::new();
            log.scan_batches(log.log_start_offset(), &mut |h| {
                if h.partition_leader_epoch >= 0
                    && cache.latest_epoch() != Some(h.partition_leader_epoch)
                {
                    let _ = cache.assign(h.partition_leader_epoch, h.base_offset);
                }
            })?;
            cache
        }
    };
    changed |= cache.truncate_from_end(log.log_end_offset());
    changed |= cache.truncate_from_start(log.log_start_offset());
    // An empty log without a file keeps having none (nothing to remember).
    if changed && (path.exists() || !cache.is_empty()) {
        write_leader_epoch_checkpoint(&path, &cache.entries())?;
    }
    Ok(cache)
}

impl Partition {
    /// Records that `epoch` wrote at `start_offset` (a no-op unless it is newer than every cached
    /// epoch) and persists the cache when it changed. An older epoch never rewrites the cache: at
    /// startup the metadata log replays this broker's past leaderships, and assigning one of those
    /// at today's log end would erase the later entries (Kafka's `assign` removes what contradicts
    /// it); a truncation cuts the cache before older epochs are written again. A failed write is
    /// logged: the next change rewrites it, and a missing or stale file is rebuilt from the batches
    /// at the next open.
    pub(super) fn note_epoch(&self, st: &mut State, epoch: i32, start_offset: i64) {
        if epoch < 0
            || st
                .epochs
                .latest_epoch()
                .is_some_and(|latest| epoch <= latest)
        {
            return;
        }
        match st.epochs.assign(epoch, start_offset) {
            Ok(true) => self.persist_epochs(st),
            Ok(false) => {}
            Err(e) => tracing::warn!("{}-{}: {e}", self.topic, self.index),
        }
    }

    fn persist_epochs(&self, st: &State) {
        let path = self.dir.join(LEADER_EPOCH_CHECKPOINT);
        if let Err(e) = write_leader_epoch_checkpoint(&path, &st.epochs.entries()) {
            tracing::warn!(
                "{}-{}: writing {LEADER_EPOCH_CHECKPOINT}: {e}",
                self.topic,
                self.index
            );
        }
    }

    /// The local log became readable up to `end` (an append as leader, or its fsync): returns the
    /// high watermark after it.
    pub(super) fn on_local_end(&self, st: &mut State, end: i64, now_ms: i64) -> i64 {
        match &mut st.role {
            Role::Leader(leader) => {
                leader.on_append(end, now_ms);
                let hw = leader.high_watermark();
                st.raise_high_watermark(hw);
            }
            Role::Unplaced => st.raise_high_watermark(end),
            Role::Follower { .. } => {}
        }
        st.high_watermark
    }

    /// Performs `effects` under the lock; returns the proposals to send and whether waiters must
    /// be woken (the high watermark moved, or the ISR changed).
    fn perform(&self, st: &mut State, effects: Vec<Effect>) -> (Vec<AlterPartitionProposal>, bool) {
        let mut proposals = Vec::new();
        let mut wake = false;
        for effect in effects {
            match effect {
                Effect::AssignEpochStartOffset(entry) => {
                    self.note_epoch(st, entry.epoch, entry.start_offset)
                }
                Effect::HighWatermarkAdvanced { to, .. } => {
                    st.raise_high_watermark(to);
                    wake = true;
                }
                Effect::SendAlterPartition(p) => proposals.push(p),
                Effect::IsrCommitted {
                    isr,
                    partition_epoch,
                } => {
                    tracing::info!(
                        "{}-{}: ISR is now {isr:?} (partition epoch {partition_epoch})",
                        self.topic,
                        self.index
                    );
                    wake = true;
                }
            }
        }
        (proposals, wake)
    }

    fn wake(&self, st: &State) {
        self.high_watermark_tx.send_replace(st.high_watermark);
    }

    /// The image makes this broker the leader (`registration`), or updates the registration of a
    /// partition it already leads (ISR, partition epoch). Returns AlterPartition proposals.
    pub fn make_leader(
        &self,
        local_id: BrokerId,
        config: LeaderConfig,
        registration: &LeaderAndIsr,
        ineligible: BTreeSet<BrokerId>,
        now_ms: i64,
    ) -> Vec<AlterPartitionProposal> {
        let mut st = self.state.write();
        st.leader_epoch = st.leader_epoch.max(registration.leader_epoch);
        let effects = match &mut st.role {
            Role::Leader(leader) if leader.leader_epoch() == registration.leader_epoch => {
                leader.set_ineligible_brokers(ineligible);
                leader.on_leader_and_isr(registration, now_ms)
            }
            _ => {
                let leo = st.log.log_end_offset();
                let (mut leader, effects) = PartitionLeader::become_leader(
                    local_id,
                    config,
                    registration,
                    leo,
                    st.high_watermark,
                    now_ms,
                );
                leader.set_ineligible_brokers(ineligible);
                tracing::info!(
                    "{}-{}: leader in epoch {} at log end {leo}, ISR {:?}",
                    self.topic,
                    self.index,
                    registration.leader_epoch,
                    registration.isr
                );
                st.role = Role::Leader(Box::new(leader));
                effects
            }
        };
        let (proposals, _) = self.perform(&mut st, effects);
        self.wake(&st);
        proposals
    }

    /// The image makes `leader_id` the leader in `leader_epoch`: this replica follows (a leader
    /// stepping down drops its replication state; waiting produces then fail).
    pub fn make_follower(&self, leader_id: BrokerId, leader_epoch: i32) {
        let mut st = self.state.write();
        st.leader_epoch = st.leader_epoch.max(leader_epoch);
        if matches!(st.role, Role::Leader(_)) {
            tracing::info!(
                "{}-{}: follower of {leader_id} in epoch {leader_epoch}",
                self.topic,
                self.index
            );
        }
        st.role = Role::Follower { leader_id };
        self.wake(&st);
    }

    /// The leader this replica follows, when the image made it a follower.
    pub fn follower_of(&self) -> Option<BrokerId> {
        match self.state.read().role {
            Role::Follower { leader_id } => Some(leader_id),
            _ => None,
        }
    }

    /// Whether the image made this replica the leader.
    pub fn is_leader(&self) -> bool {
        matches!(self.state.read().role, Role::Leader(_))
    }

    /// The brokers that may not join the ISR (fenced or shutting down), from the image.
    pub fn set_ineligible_replicas(&self, ineligible: BTreeSet<BrokerId>) {
        if let Role::Leader(leader) = &mut self.state.write().role {
            leader.set_ineligible_brokers(ineligible);
        }
    }

    /// The leader's checks of a follower's fetch before reading (Kafka's
    /// `validateFetchOffsetAndMaybeGetDivergingEpoch`): leadership, the request's current leader
    /// epoch, the follower being assigned, and its last fetched epoch against this log.
    pub fn check_replica_fetch(
        &self,
        replica_id: BrokerId,
        current_leader_epoch: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> ReplicaFetchCheck {
        let st = self.state.read();
        let Role::Leader(leader) = &st.role else {
            return ReplicaFetchCheck::Error(NOT_LEADER_OR_FOLLOWER);
        };
        if current_leader_epoch >= 0 && current_leader_epoch < leader.leader_epoch() {
            return ReplicaFetchCheck::Error(FENCED_LEADER_EPOCH);
        }
        if current_leader_epoch > leader.leader_epoch() {
            return ReplicaFetchCheck::Error(UNKNOWN_LEADER_EPOCH);
        }
        if !leader.replicas().contains(&replica_id) || replica_id == leader.local_id() {
            return ReplicaFetchCheck::Error(NOT_LEADER_OR_FOLLOWER);
        }
        if last_fetched_epoch < 0 {
            return ReplicaFetchCheck::Read;
        }
        let leo = st.log.log_end_offset();
        match truncation::diverging_epoch(&st.epochs, leo, fetch_offset, last_fetched_epoch) {
            Ok(None) => ReplicaFetchCheck::Read,
            Ok(Some(diverging)) => ReplicaFetchCheck::Diverging(diverging),
            Err(_) => ReplicaFetchCheck::Error(OFFSET_OUT_OF_RANGE),
        }
    }

    /// A follower fetched (after the read): its position moves the ISR and high watermark logic.
    /// Returns AlterPartition proposals; refused fetches (checked before) change nothing.
    pub fn on_replica_fetch(
        &self,
        fetch: FollowerFetch,
        now_ms: i64,
    ) -> Vec<AlterPartitionProposal> {
        let mut st = self.state.write();
        let Role::Leader(leader) = &mut st.role else {
            return Vec::new();
        };
        let effects = match leader.on_follower_fetch(fetch, now_ms) {
            Ok(effects) => effects,
            Err(FetchRejected::NotAssignedReplica(_))
            | Err(FetchRejected::FencedLeaderEpoch { .. })
            | Err(FetchRejected::UnknownLeaderEpoch { .. }) => return Vec::new(),
        };
        let (proposals, wake) = self.perform(&mut st, effects);
        if wake {
            self.wake(&st);
        }
        proposals
    }

    /// The periodic ISR check (every `replica.lag.time.max.ms / 2`): proposals removing lagging
    /// followers.
    pub fn maybe_shrink_isr(&self, now_ms: i64) -> Vec<AlterPartitionProposal> {
        let mut st = self.state.write();
        let Role::Leader(leader) = &mut st.role else {
            return Vec::new();
        };
        let effects = leader.maybe_shrink_isr(now_ms);
        self.perform(&mut st, effects).0
    }

    /// The controller answered an AlterPartition proposal of this partition.
    pub fn on_alter_partition_response(
        &self,
        proposal: &AlterPartitionProposal,
        response: AlterPartitionResponse,
        now_ms: i64,
    ) -> Vec<AlterPartitionProposal> {
        let mut st = self.state.write();
        let Role::Leader(leader) = &mut st.role else {
            return Vec::new();
        };
        let effects = leader.on_alter_partition_response(proposal, response, now_ms);
        let (proposals, wake) = self.perform(&mut st, effects);
        if wake {
            self.wake(&st);
        }
        proposals
    }

    /// acks=all before the append: NOT_ENOUGH_REPLICAS when the ISR is below the effective
    /// minimum. A replica that is not the image's leader (or not placed) passes: the handler's
    /// leadership check answers for it.
    pub fn check_acks_all_append(&self) -> Result<(), NotEnoughReplicas> {
        match &self.state.read().role {
            Role::Leader(leader) => leader.check_acks_all_append(),
            _ => Ok(()),
        }
    }

    /// What a waiting acks=all produce reads: `None` once this replica no longer leads. A replica
    /// not placed by the image answers its own high watermark with an ISR of one.
    pub fn replication_view(&self) -> Option<ReplicationView> {
        let st = self.state.read();
        match &st.role {
            Role::Leader(leader) => Some(leader.replication_view()),
            Role::Unplaced => Some(ReplicationView {
                high_watermark: st.high_watermark,
                maximal_isr_size: 1,
                effective_min_isr: 1,
            }),
            Role::Follower { .. } => None,
        }
    }

    /// A receiver that changes whenever the log end offset moves (follower fetch long-polls).
    pub fn subscribe_log_end(&self) -> watch::Receiver<i64> {
        self.log_end_tx.subscribe()
    }

    /// The latest leader epoch in this replica's epoch cache (a follower's `LastFetchedEpoch`).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.state.read().epochs.latest_epoch()
    }

    /// OffsetForLeaderEpoch from the epoch cache: the end of `requested_epoch` in this log.
    pub fn end_offset_for_epoch(&self, requested_epoch: i32) -> EpochEndOffset {
        let st = self.state.read();
        st.epochs
            .end_offset_for(requested_epoch, st.log.log_end_offset())
    }

    /// Where a follower truncates for the leader's `DivergingEpoch` answer.
    pub fn truncation_point(&self, leader: EpochEndOffset) -> OffsetTruncationState {
        let st = self.state.read();
        let leo = st.log.log_end_offset();
        truncation::offset_truncation_state(&st.epochs, leo, st.high_watermark.min(leo), leader)
    }

    /// Appends the leader's batches as they are (offsets and leader epochs kept). `records` is a
    /// Fetch answer's record set: whole batches, maybe a partial one at the end (dropped).
    /// Batches below the log end offset are skipped (already here); a batch that starts below it
    /// and ends past it, or fails its CRC, is an error and nothing after it is appended.
    pub fn append_as_follower(
        &self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<FollowerAppend, AppendError> {
        self.append_fetched(self.state.write(), records, now_ms)
    }

    /// [`Partition::append_as_follower`] of a fetch answered by `from.leader_id`, only while this
    /// replica still follows that leader in that epoch at that log end: a response that arrives
    /// after the image made this replica the leader (or moved it to another leader, or it was
    /// truncated meanwhile) is dropped (`None`), as Kafka's fetcher drops fetched data once the
    /// partition's state changed. Appending it would put the old epoch's batches after the new
    /// epoch's start in the new leader's log, and its followers would be told to diverge forever.
    pub fn append_as_follower_of(
        &self,
        from: FetchedFrom,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<FollowerAppend>, AppendError> {
        let st = self.state.write();
        if !from.current(&st) {
            return Ok(None);
        }
        self.append_fetched(st, records, now_ms).map(Some)
    }

    fn append_fetched(
        &self,
        mut st: parking_lot::RwLockWriteGuard<'_, State>,
        records: &[u8],
        now_ms: i64,
    ) -> Result<FollowerAppend, AppendError> {
        let policy = st.log.config().flush;
        let mut batches = 0;
        let mut pos = 0usize;
        let mut failure = None;
        while records.len() - pos >= BATCH_HEADER_LEN {
            let rest = &records[pos..];
            let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
            let total = 12usize.saturating_add(length.max(0) as usize);
            if length < 0 || total > rest.len() {
                break;
            }
            let batch = &rest[..total];
            pos += total;
            let header = match record::validate_batch(batch) {
                Ok(h) => h,
                Err(e) => {
                    failure = Some(LogError::corrupt(
                        &self.dir,
                        format!("leader sent an invalid batch: {e}"),
                    ));
                    break;
                }
            };
            let leo = st.log.log_end_offset();
            let last = header.base_offset + header.last_offset_delta as i64;
            if last < leo {
                continue;
            }
            if header.base_offset < leo {
                failure = Some(LogError::corrupt(
                    &self.dir,
                    format!(
                        "leader batch {}..={last} overlaps the log end {leo}",
                        header.base_offset
                    ),
                ));
                break;
            }
            if let Err(e) = self.append_replica_batch(&mut st, batch, &header, now_ms) {
                failure = Some(e);
                break;
            }
            batches += 1;
        }
        let log_end = st.log.log_end_offset();
        let covered = self.synced.load(Ordering::SeqCst).max(st.flush_requested);
        let sync = (batches > 0
            && (policy.every_message() || policy.due_by_messages(log_end - covered)))
        .then(|| {
            st.flush_requested = log_end;
            self.last_flush_ms.store(now_ms, Ordering::Relaxed);
            log_end
        });
        drop(st);
        if batches > 0 {
            self.log_end_tx.send_replace(log_end);
        }
        match failure {
            Some(e) if batches == 0 => Err(e.into()),
            Some(e) => {
                tracing::warn!("{}-{}: {e}", self.topic, self.index);
                Ok(FollowerAppend {
                    batches,
                    log_end_offset: log_end,
                    sync,
                })
            }
            None => Ok(FollowerAppend {
                batches,
                log_end_offset: log_end,
                sync,
            }),
        }
    }

    fn append_replica_batch(
        &self,
        st: &mut State,
        batch: &[u8],
        header: &BatchHeader,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let meta = AppendMeta {
            base_offset: header.base_offset,
            last_offset: header.base_offset + header.last_offset_delta as i64,
            max_timestamp: header.max_timestamp,
            size: header.total_size(),
        };
        let active_before = st.log.active_base_offset();
        st.log.append_replica(&[batch], &meta, now_ms)?;
        if st.log.active_base_offset() != active_before {
            self.snapshot_at_roll(st, header.base_offset, active_before);
        }
        self.note_epoch(st, header.partition_leader_epoch, header.base_offset);
        if header.is_control() {
            if let Some(mut marker) = end_txn_marker(batch) {
                marker.offset = header.base_offset;
                if let Some(aborted) = st
                    .producers
                    .on_marker(&marker, header.max_timestamp)
                    .and_then(|c| c.aborted_txn())
                {
                    st.log.append_aborted_txn(aborted)?;
                }
            }
        } else {
            st.producers.on_append(header, header.max_timestamp);
        }
        Ok(())
    }

    /// A follower learnt the leader's high watermark (and log start offset) from a fetch: its own
    /// moves up to it, capped at its log end; its log start follows the leader's (DeleteRecords or
    /// retention there), never past its high watermark.
    pub fn update_follower_offsets(&self, leader_high_watermark: i64, leader_log_start: i64) {
        let mut st = self.state.write();
        if matches!(st.role, Role::Leader(_)) {
            // A fetch answered by the previous leader: a leader keeps its own high watermark.
            return;
        }
        let leo = st.log.log_end_offset();
        let hw = leader_high_watermark.min(leo);
        let moved = hw > st.high_watermark;
        if moved {
            st.raise_high_watermark(hw);
        }
        let start = leader_log_start.min(st.high_watermark);
        if start > st.log.log_start_offset() {
            if let Err(e) = st.log.advance_log_start_offset(start) {
                tracing::warn!("{}-{}: log start to {start}: {e}", self.topic, self.index);
            } else {
                let start = st.log.log_start_offset();
                st.epochs.truncate_from_start(start);
            }
        }
        if moved {
            self.wake(&st);
        }
    }

    /// Empties the log and restarts it at `offset` (a follower below its leader's log start):
    /// no epochs, no producers, high watermark `offset`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<(), LogError> {
        self.truncate_fully_locked(&mut self.state.write(), offset)
    }

    /// [`Partition::truncate_fully_and_start_at`] on an answer of `from.leader_id`, only while this
    /// replica still follows it as `from` says (`false`: dropped).
    pub fn truncate_fully_as_follower_of(
        &self,
        from: FetchedFrom,
        offset: i64,
    ) -> Result<bool, LogError> {
        let mut st = self.state.write();
        if !from.current(&st) {
            return Ok(false);
        }
        self.truncate_fully_locked(&mut st, offset).map(|()| true)
    }

    fn truncate_fully_locked(&self, st: &mut State, offset: i64) -> Result<(), LogError> {
        st.log.truncate_fully_and_start_at(offset)?;
        st.epochs.clear();
        self.persist_epochs(st);
        st.producers = ProducerStateManager::new();
        let _ = remove_snapshots_below(&self.dir, i64::MAX);
        st.high_watermark = offset;
        st.flush_requested = offset;
        self.synced.store(offset, Ordering::SeqCst);
        self.flushed_in_background.store(offset, Ordering::SeqCst);
        self.log_end_tx.send_replace(offset);
        self.wake(st);
        Ok(())
    }

    /// Truncates the log to end at `offset` (a follower's divergence point): the epoch cache is
    /// cut with it, the high watermark lowered to it, and the producer state rebuilt from the
    /// newest snapshot at or below the new end plus a replay. Returns the new log end offset.
    pub fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        self.truncate_locked(&mut self.state.write(), offset)
    }

    /// [`Partition::truncate_to`] on a diverging-epoch answer of `from.leader_id`, only while this
    /// replica still follows that leader in that epoch at that log end (`None`: dropped, see
    /// [`Partition::append_as_follower_of`]; a leader's log is never cut by a stale answer).
    pub fn truncate_as_follower_of(
        &self,
        from: FetchedFrom,
        offset: i64,
    ) -> Result<Option<i64>, LogError> {
        let mut st = self.state.write();
        if !from.current(&st) {
            return Ok(None);
        }
        self.truncate_locked(&mut st, offset).map(Some)
    }

    fn truncate_locked(&self, st: &mut State, offset: i64) -> Result<i64, LogError> {
        if offset >= st.log.log_end_offset() {
            // Nothing to cut from the log, but the epoch cache may end with an epoch that wrote
            // nothing here (this broker led it briefly): cut it as Kafka's `truncateTo` does, or the
            // follower would keep fetching with that epoch and be told to diverge forever.
            let leo = st.log.log_end_offset();
            if st.epochs.truncate_from_end(leo) {
                self.persist_epochs(st);
            }
            return Ok(leo);
        }
        let before = st.log.log_end_offset();
        st.log.truncate_to(offset)?;
        let leo = st.log.log_end_offset();
        if st.epochs.truncate_from_end(leo) {
            self.persist_epochs(st);
        }
        st.high_watermark = st.high_watermark.min(leo);
        st.flush_requested = st.flush_requested.min(leo);
        self.synced.fetch_min(leo, Ordering::SeqCst);
        self.flushed_in_background.fetch_min(leo, Ordering::SeqCst);
        let snapshot = ProducerStateManager::load_latest_snapshot(&self.dir, leo)
            .map_err(|e| LogError::io(&self.dir, e))?;
        let (mut producers, from) =
            snapshot.unwrap_or_else(|| (ProducerStateManager::new(), st.log.log_start_offset()));
        if from < leo {
            replay(&mut st.log, &mut producers, from)?;
        }
        producers.on_high_watermark(st.high_watermark);
        st.producers = producers;
        tracing::info!(
            "{}-{}: truncated from {before} to {leo}",
            self.topic,
            self.index
        );
        self.log_end_tx.send_replace(leo);
        self.wake(st);
        Ok(leo)
    }
}

#[cfg(test)]
mod tests;
