//! The leader's replication state of one partition (Kafka's `Partition` and `Replica` on the
//! leader): each follower's fetch state, the ISR and its in-flight AlterPartition change, and the
//! high watermark.
//!
//! Inputs are method calls with `now_ms` as an argument: becoming leader / a newer registration from
//! the metadata image, a local append, a follower's fetch, the periodic ISR-expiration check, and
//! the controller's AlterPartition answer. Outputs are [`Effect`]s the driver performs (assign the
//! epoch in the epoch cache, send AlterPartition, wake waiters at the new high watermark).
//!
//! Invariants:
//! - The high watermark never decreases while this value lives, and never exceeds the leader's log
//!   end offset.
//! - It advances only to the smallest log end offset over the *maximal* ISR (the committed ISR plus
//!   a replica whose addition is in flight, KIP-497) and over followers that are caught up but not
//!   yet in the ISR; and not at all while the committed ISR is smaller than the effective
//!   `min.insync.replicas` (Kafka 4.x).
//! - At most one AlterPartition change is in flight; none is proposed while one is.
//! - The ISR always contains the leader (the controller never commits one without it; a proposal
//!   never removes it).
//!
//! Plain data owned by the partition's driver; not internally synchronised; no I/O, no clock.
//! Differences from Kafka: no broker-epoch check (KIP-903) and no KIP-966 ELR; eligibility is
//! "not fenced and not shutting down", given by [`PartitionLeader::set_ineligible_brokers`].

use std::collections::{BTreeMap, BTreeSet};

use super::acks::{self, NotEnoughReplicas, ReplicationView};
use super::epoch_cache::EpochEntry;
use super::{BrokerId, UNKNOWN_OFFSET};

#[cfg(test)]
mod tests;

/// Kafka's default `replica.lag.time.max.ms`.
pub const DEFAULT_REPLICA_LAG_TIME_MAX_MS: i64 = 30_000;

/// The settings the leader logic reads (the driver takes them from the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `replica.lag.time.max.ms`: a follower not caught up for longer leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// The topic's `min.insync.replicas`.
    pub min_insync_replicas: i32,
}

/// What the leader knows of one follower (Kafka's `ReplicaState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower's log start offset, from its last fetch.
    pub log_start_offset: i64,
    /// The follower's log end offset (its last fetch offset); `UNKNOWN_OFFSET` before a fetch.
    pub log_end_offset: i64,
    /// The leader's log end offset when the follower's previous fetch arrived.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the follower's previous fetch arrived.
    pub last_fetch_time_ms: i64,
    /// The latest time at which the follower had everything the leader had.
    pub last_caught_up_time_ms: i64,
}

impl FollowerState {
    /// A follower the leader has heard nothing from (Kafka's `ReplicaState.Empty`).
    pub const EMPTY: FollowerState = FollowerState {
        log_start_offset: UNKNOWN_OFFSET,
        log_end_offset: UNKNOWN_OFFSET,
        last_fetch_leader_log_end_offset: 0,
        last_fetch_time_ms: 0,
        last_caught_up_time_ms: 0,
    };

    /// Caught up: it has the leader's whole log, or was caught up within `max_lag_ms`.
    pub fn is_caught_up(&self, leader_end_offset: i64, now_ms: i64, max_lag_ms: i64) -> bool {
        leader_end_offset == self.log_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= max_lag_ms
    }

    /// Kafka's `updateFetchState`: a fetch at `fetch_offset` reaching the leader's current end
    /// makes it caught up now; one reaching the leader's end at the previous fetch makes it caught
    /// up as of the previous fetch (so a steady stream of small produces does not keep a follower
    /// out of sync forever).
    fn update_fetch_state(
        &mut self,
        fetch_offset: i64,
        log_start_offset: i64,
        now_ms: i64,
        leader_end_offset: i64,
    ) {
        if fetch_offset >= leader_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_start_offset = log_start_offset;
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end_offset =
            leader_end_offset.max(self.last_fetch_leader_log_end_offset);
        self.last_fetch_time_ms = now_ms;
    }

    /// Kafka's `resetReplicaState` on a new leader epoch: in-sync followers count as caught up
    /// now, others as never. Where Sluice differs: the follower's log end is forgotten on every
    /// new leader epoch, also when this broker led the previous one (Kafka keeps it then). A
    /// leader may not have led every epoch in between (an image that skipped entries, as after
    /// a snapshot), and a follower may have truncated under another leader meanwhile: counting
    /// its old log end would advance the HW over records it no longer holds, and electing it
    /// next would lose them (found by the simulation: seed 9742 of the schedule before
    /// snapshots). It costs one fetch round before the HW moves again.
    fn reset(&mut self, now_ms: i64, leader_end_offset: i64, is_new_leader: bool, in_sync: bool) {
        let caught_up = if in_sync { now_ms } else { 0 };
        *self = if is_new_leader {
            FollowerState {
                log_start_offset: UNKNOWN_OFFSET,
                log_end_offset: UNKNOWN_OFFSET,
                last_fetch_leader_log_end_offset: UNKNOWN_OFFSET,
                last_fetch_time_ms: 0,
                last_caught_up_time_ms: caught_up,
            }
        } else {
            FollowerState {
                log_end_offset: UNKNOWN_OFFSET,
                last_fetch_leader_log_end_offset: leader_end_offset,
                last_fetch_time_ms: caught_up,
                last_caught_up_time_ms: caught_up,
                ..*self
            }
        };
    }
}

/// The partition as the metadata image registers it (the part the leader uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderAndIsr {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// All assigned replicas, in assignment order, the leader included.
    pub replicas: Vec<BrokerId>,
    /// The committed ISR, the leader included.
    pub isr: Vec<BrokerId>,
}

/// An AlterPartition request for this partition, as the leader proposes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionProposal {
    pub leader_id: BrokerId,
    pub leader_epoch: i32,
    /// The partition epoch the proposal is based on (the controller refuses a stale one).
    pub partition_epoch: i32,
    /// The proposed ISR, ascending.
    pub new_isr: Vec<BrokerId>,
}

/// The ISR change an in-flight proposal makes (Kafka's `PendingExpandIsr` / `PendingShrinkIsr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingChange {
    /// Adds one caught-up follower; it already counts for the high watermark (maximal ISR).
    Expand { replica: BrokerId },
    /// Removes lagging followers; they still count for the high watermark until committed.
    Shrink { out_of_sync: BTreeSet<BrokerId> },
}

/// The in-flight AlterPartition: what it changes and the request sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub change: PendingChange,
    pub proposal: AlterPartitionProposal,
}

/// The per-partition errors of an AlterPartition answer, by Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterPartitionError {
    /// Not applied; the partition epoch is right: back to the committed ISR.
    OperationNotAttempted,
    /// A proposed replica may not join (fenced, shutting down, stale broker epoch): back to the
    /// committed ISR.
    IneligibleReplica,
    /// These leave the proposal pending until the next metadata registration resolves it.
    UnknownTopicOrPartition,
    UnknownTopicId,
    FencedLeaderEpoch,
    InvalidUpdateVersion,
    InvalidRequest,
    NewLeaderElected,
    /// Any other code: the proposal is sent again.
    Other(i16),
}

impl AlterPartitionError {
    /// The error for a Kafka error code (`0` is not an error: `None`).
    pub fn from_code(code: i16) -> Option<AlterPartitionError> {
        Some(match code {
            0 => return None,
            3 => AlterPartitionError::UnknownTopicOrPartition,
            42 => AlterPartitionError::InvalidRequest,
            55 => AlterPartitionError::OperationNotAttempted,
            74 => AlterPartitionError::FencedLeaderEpoch,
            95 => AlterPartitionError::InvalidUpdateVersion,
            106 => AlterPartitionError::NewLeaderElected,
            100 => AlterPartitionError::UnknownTopicId,
            107 => AlterPartitionError::IneligibleReplica,
            other => AlterPartitionError::Other(other),
        })
    }
}

/// The controller's answer to an [`AlterPartitionProposal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterPartitionResponse {
    /// Committed (or already in place): the partition's state after the change.
    Committed {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<BrokerId>,
    },
    Error(AlterPartitionError),
}

/// What the driver must do after an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Record the new leader epoch in the epoch cache (and persist it) before any append.
    AssignEpochStartOffset(EpochEntry),
    /// The high watermark moved: complete delayed produces, wake fetches, checkpoint it later.
    HighWatermarkAdvanced { from: i64, to: i64 },
    /// Send this AlterPartition to the controller.
    SendAlterPartition(AlterPartitionProposal),
    /// The controller committed this ISR.
    IsrCommitted {
        isr: Vec<BrokerId>,
        partition_epoch: i32,
    },
}

/// A follower fetch the leader refuses (the Fetch answer's partition error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FetchRejected {
    /// The fetcher's leader epoch is older than the leader's: FENCED_LEADER_EPOCH.
    #[error("fetch in leader epoch {fetch_epoch}, current is {leader_epoch}")]
    FencedLeaderEpoch { fetch_epoch: i32, leader_epoch: i32 },
    /// The fetcher's leader epoch is newer than the leader's: UNKNOWN_LEADER_EPOCH.
    #[error("fetch in leader epoch {fetch_epoch}, this leader knows {leader_epoch}")]
    UnknownLeaderEpoch { fetch_epoch: i32, leader_epoch: i32 },
    /// The fetching broker is not an assigned replica (Kafka's NotAssignedReplica).
    #[error("broker {0} is not a replica of this partition")]
    NotAssignedReplica(BrokerId),
}

/// A follower's fetch of this partition, as the leader received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerFetch {
    pub replica_id: BrokerId,
    /// The request's `CurrentLeaderEpoch` (`None` when the request has no such field, or -1).
    pub current_leader_epoch: Option<i32>,
    /// The fetch offset: the follower's log end offset.
    pub fetch_offset: i64,
    /// The follower's log start offset.
    pub log_start_offset: i64,
}

/// The leader's replication state of one partition. See the module doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeader {
    local_id: BrokerId,
    config: LeaderConfig,
    replicas: Vec<BrokerId>,
    leader_epoch: i32,
    partition_epoch: i32,
    /// The leader's log end offset when its epoch began: a follower joins the ISR only once it
    /// has reached it (it then holds this epoch's data).
    leader_epoch_start_offset: i64,
    /// The committed ISR.
    isr: BTreeSet<BrokerId>,
    in_flight: Option<InFlight>,
    followers: BTreeMap<BrokerId, FollowerState>,
    /// Brokers that may not join the ISR (fenced or shutting down in the metadata image).
    ineligible: BTreeSet<BrokerId>,
    log_end_offset: i64,
    high_watermark: i64,
}

impl PartitionLeader {
    /// This broker becomes the partition's leader (Kafka's `makeLeader` with a new leader).
    /// `high_watermark` is the local one (checkpointed or learnt as follower), capped at
    /// `log_end_offset`.
    pub fn become_leader(
        local_id: BrokerId,
        config: LeaderConfig,
        registration: &LeaderAndIsr,
        log_end_offset: i64,
        high_watermark: i64,
        now_ms: i64,
    ) -> (PartitionLeader, Vec<Effect>) {
        let mut leader = PartitionLeader {
            local_id,
            config,
            replicas: Vec::new(),
            leader_epoch: registration.leader_epoch,
            partition_epoch: registration.partition_epoch,
            leader_epoch_start_offset: log_end_offset,
            isr: BTreeSet::new(),
            in_flight: None,
            followers: BTreeMap::new(),
            ineligible: BTreeSet::new(),
            log_end_offset,
            high_watermark: high_watermark.min(log_end_offset),
        };
        let effects = leader.apply_registration(registration, now_ms, true);
        (leader, effects)
    }

    /// A newer registration of the partition while this broker stays its leader (Kafka's
    /// `makeLeader` again): the committed ISR and assignment are replaced (any in-flight change
    /// is dropped); a new leader epoch also starts a new epoch at the current log end. A
    /// registration with an older partition epoch is ignored.
    pub fn on_leader_and_isr(&mut self, registration: &LeaderAndIsr, now_ms: i64) -> Vec<Effect> {
        if registration.partition_epoch < self.partition_epoch
            || registration.leader_epoch < self.leader_epoch
        {
            return Vec::new();
        }
        // The registration this leader already holds: typically the image carrying an ISR change
        // whose AlterPartition answer the leader applied first, and then proposed the next change
        // (or an image that changed only other partitions). Every change of a partition bumps its
        // partition epoch, so nothing changed here, and a pending ISR change stays pending.
        // Applying it would drop a pending expansion whose AlterPartition the controller may have
        // committed, and the HW could then pass the added replica (simulation seeds 85871 and
        // 80639).
        if registration.partition_epoch == self.partition_epoch
            && registration.leader_epoch == self.leader_epoch
        {
            return Vec::new();
        }
        self.apply_registration(registration, now_ms, false)
    }

    fn apply_registration(
        &mut self,
        registration: &LeaderAndIsr,
        now_ms: i64,
        is_new_leader: bool,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.replicas = registration.replicas.clone();
        let remote: BTreeSet<BrokerId> = self
            .replicas
            .iter()
            .copied()
            .filter(|&id| id != self.local_id)
            .collect();
        self.followers.retain(|id, _| remote.contains(id));
        for &id in &remote {
            self.followers.entry(id).or_insert(FollowerState::EMPTY);
        }
        self.isr = registration.isr.iter().copied().collect();
        self.isr.insert(self.local_id);
        self.in_flight = None;
        if is_new_leader || registration.leader_epoch > self.leader_epoch {
            let start = self.log_end_offset;
            effects.push(Effect::AssignEpochStartOffset(EpochEntry {
                epoch: registration.leader_epoch,
                start_offset: start,
            }));
            for (id, follower) in self.followers.iter_mut() {
                follower.reset(now_ms, start, is_new_leader, self.isr.contains(id));
            }
            self.leader_epoch = registration.leader_epoch;
            self.leader_epoch_start_offset = start;
        }
        self.partition_epoch = registration.partition_epoch;
        effects.extend(self.maybe_increment_high_watermark(now_ms));
        effects
    }

    /// Which brokers may not join the ISR (fenced or shutting down), from the metadata image.
    pub fn set_ineligible_brokers(&mut self, ineligible: BTreeSet<BrokerId>) {
        self.ineligible = ineligible;
    }

    /// The local log grew to `log_end_offset` (an append as leader). With an ISR of one the high
    /// watermark follows at once.
    pub fn on_append(&mut self, log_end_offset: i64, now_ms: i64) -> Vec<Effect> {
        self.log_end_offset = self.log_end_offset.max(log_end_offset);
        self.maybe_increment_high_watermark(now_ms)
            .into_iter()
            .collect()
    }

    /// A follower fetched (Kafka's `updateFollowerFetchState`): record its position, maybe
    /// propose it for the ISR, maybe advance the high watermark.
    pub fn on_follower_fetch(
        &mut self,
        fetch: FollowerFetch,
        now_ms: i64,
    ) -> Result<Vec<Effect>, FetchRejected> {
        if let Some(fetch_epoch) = fetch.current_leader_epoch.filter(|&e| e >= 0) {
            if fetch_epoch < self.leader_epoch {
                return Err(FetchRejected::FencedLeaderEpoch {
                    fetch_epoch,
                    leader_epoch: self.leader_epoch,
                });
            }
            if fetch_epoch > self.leader_epoch {
                return Err(FetchRejected::UnknownLeaderEpoch {
                    fetch_epoch,
                    leader_epoch: self.leader_epoch,
                });
            }
        }
        let leader_end = self.log_end_offset;
        let follower = self
            .followers
            .get_mut(&fetch.replica_id)
            .ok_or(FetchRejected::NotAssignedReplica(fetch.replica_id))?;
        let previous_end = follower.log_end_offset;
        follower.update_fetch_state(
            fetch.fetch_offset,
            fetch.log_start_offset,
            now_ms,
            leader_end,
        );
        let moved = follower.log_end_offset != previous_end;
        let mut effects: Vec<Effect> = self
            .maybe_expand_isr(fetch.replica_id)
            .into_iter()
            .collect();
        if moved {
            effects.extend(self.maybe_increment_high_watermark(now_ms));
        }
        Ok(effects)
    }

    /// The periodic ISR check (Kafka runs it every `replica.lag.time.max.ms / 2`): propose removing
    /// every ISR follower not caught up within `replica.lag.time.max.ms`, unless a change is in
    /// flight.
    pub fn maybe_shrink_isr(&mut self, now_ms: i64) -> Vec<Effect> {
        if self.in_flight.is_some() {
            return Vec::new();
        }
        let out_of_sync = self.out_of_sync_replicas(now_ms);
        if out_of_sync.is_empty() {
            return Vec::new();
        }
        let new_isr: Vec<BrokerId> = self.isr.difference(&out_of_sync).copied().collect();
        let proposal = self.proposal(new_isr);
        self.in_flight = Some(InFlight {
            change: PendingChange::Shrink { out_of_sync },
            proposal: proposal.clone(),
        });
        vec![Effect::SendAlterPartition(proposal)]
    }

    /// The ISR followers that would be removed now (Kafka's `getOutOfSyncReplicas`); empty while a
    /// change is in flight.
    pub fn out_of_sync_replicas(&self, now_ms: i64) -> BTreeSet<BrokerId> {
        if self.in_flight.is_some() {
            return BTreeSet::new();
        }
        self.isr
            .iter()
            .copied()
            .filter(|&id| id != self.local_id)
            .filter(|id| {
                self.followers.get(id).is_none_or(|f| {
                    !f.is_caught_up(
                        self.log_end_offset,
                        now_ms,
                        self.config.replica_lag_time_max_ms,
                    )
                })
            })
            .collect()
    }

    /// The controller answered `answered`. An answer to anything but the in-flight proposal is
    /// ignored (a newer registration replaced it), as is a commit in another leader epoch or at
    /// an older partition epoch.
    pub fn on_alter_partition_response(
        &mut self,
        answered: &AlterPartitionProposal,
        response: AlterPartitionResponse,
        now_ms: i64,
    ) -> Vec<Effect> {
        let Some(in_flight) = &self.in_flight else {
            return Vec::new();
        };
        if in_flight.proposal != *answered {
            return Vec::new();
        }
        match response {
            AlterPartitionResponse::Committed {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if leader_epoch != self.leader_epoch || partition_epoch < self.partition_epoch {
                    return Vec::new();
                }
                self.isr = isr.iter().copied().collect();
                self.isr.insert(self.local_id);
                self.partition_epoch = partition_epoch;
                self.in_flight = None;
                let mut effects = vec![Effect::IsrCommitted {
                    isr: self.isr.iter().copied().collect(),
                    partition_epoch,
                }];
                effects.extend(self.maybe_increment_high_watermark(now_ms));
                effects
            }
            AlterPartitionResponse::Error(
                AlterPartitionError::OperationNotAttempted | AlterPartitionError::IneligibleReplica,
            ) => {
                self.in_flight = None;
                Vec::new()
            }
            AlterPartitionResponse::Error(AlterPartitionError::Other(_)) => {
                vec![Effect::SendAlterPartition(in_flight.proposal.clone())]
            }
            AlterPartitionResponse::Error(_) => Vec::new(),
        }
    }

    /// Whether a produce with acks=all may append now (Kafka's check before the append).
    pub fn check_acks_all_append(&self) -> Result<(), NotEnoughReplicas> {
        acks::check_acks_all_append(
            self.isr.len(),
            self.replication_factor(),
            self.config.min_insync_replicas,
        )
    }

    /// What a delayed produce reads to decide (see `acks::DelayedProduce`).
    pub fn replication_view(&self) -> ReplicationView {
        ReplicationView {
            high_watermark: self.high_watermark,
            maximal_isr_size: self.maximal_isr().len(),
            effective_min_isr: self.effective_min_isr(),
        }
    }

    fn maybe_expand_isr(&mut self, replica: BrokerId) -> Option<Effect> {
        if self.in_flight.is_some()
            || self.isr.contains(&replica)
            || self.ineligible.contains(&replica)
        {
            return None;
        }
        let end = self.followers.get(&replica)?.log_end_offset;
        if end < self.high_watermark || end < self.leader_epoch_start_offset {
            return None;
        }
        let mut new_isr = self.isr.clone();
        new_isr.insert(replica);
        let proposal = self.proposal(new_isr.into_iter().collect());
        self.in_flight = Some(InFlight {
            change: PendingChange::Expand { replica },
            proposal: proposal.clone(),
        });
        Some(Effect::SendAlterPartition(proposal))
    }

    fn maybe_increment_high_watermark(&mut self, now_ms: i64) -> Option<Effect> {
        if self.isr.len() < self.effective_min_isr() {
            return None;
        }
        let maximal = self.maximal_isr();
        let mut candidate = self.log_end_offset;
        for (id, f) in &self.followers {
            let waits_to_join = f.is_caught_up(
                self.log_end_offset,
                now_ms,
                self.config.replica_lag_time_max_ms,
            ) && !self.ineligible.contains(id);
            if f.log_end_offset < candidate && (maximal.contains(id) || waits_to_join) {
                candidate = f.log_end_offset;
            }
        }
        if candidate > self.high_watermark {
            let from = self.high_watermark;
            self.high_watermark = candidate;
            Some(Effect::HighWatermarkAdvanced {
                from,
                to: candidate,
            })
        } else {
            None
        }
    }

    fn proposal(&self, new_isr: Vec<BrokerId>) -> AlterPartitionProposal {
        AlterPartitionProposal {
            leader_id: self.local_id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr,
        }
    }

    /// The replication factor: the assigned replicas (the leader included).
    pub fn replication_factor(&self) -> usize {
        self.followers.len() + 1
    }

    /// `min(min.insync.replicas, replication factor)`, at least 1 (Kafka 4.x's `effectiveMinIsr`).
    pub fn effective_min_isr(&self) -> usize {
        acks::effective_min_isr(self.config.min_insync_replicas, self.replication_factor())
    }

    /// The committed ISR plus a replica whose addition is in flight.
    pub fn maximal_isr(&self) -> BTreeSet<BrokerId> {
        let mut isr = self.isr.clone();
        if let Some(InFlight {
            change: PendingChange::Expand { replica },
            ..
        }) = &self.in_flight
        {
            isr.insert(*replica);
        }
        isr
    }

    /// The committed ISR (the leader included).
    pub fn isr(&self) -> &BTreeSet<BrokerId> {
        &self.isr
    }

    /// The in-flight AlterPartition change, if any.
    pub fn in_flight(&self) -> Option<&InFlight> {
        self.in_flight.as_ref()
    }

    /// What the leader knows of follower `id`.
    pub fn follower(&self, id: BrokerId) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> i32 {
        self.partition_epoch
    }

    pub fn leader_epoch_start_offset(&self) -> i64 {
        self.leader_epoch_start_offset
    }

    /// This broker: the leader.
    pub fn local_id(&self) -> BrokerId {
        self.local_id
    }

    /// The assigned replicas in assignment order.
    pub fn replicas(&self) -> &[BrokerId] {
        &self.replicas
    }
}
