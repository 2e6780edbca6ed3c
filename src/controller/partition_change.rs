//! Kafka's `PartitionChangeBuilder` rules: given a partition, a target ISR and an election type,
//! the `PartitionChange` to write, or none when nothing changes.
//!
//! - A leader is valid when it is in the target ISR (or, with an empty target ISR, in the ELR)
//!   and acceptable (registered, unfenced, not in controlled shutdown, not the broker being
//!   removed).
//! - ONLINE / UNCLEAN keep a valid current leader, else take the first valid replica in replica
//!   order, else the last known leader (below); UNCLEAN then falls back to the first acceptable
//!   replica outside the ISR and sets the ISR to that leader alone. PREFERRED takes the first
//!   replica if valid, else keeps a valid current leader, else the next valid replica, else the
//!   last known leader.
//! - No valid leader: leader -1 (offline).
//! - Without eligible leader replicas the ISR never becomes empty: removing its last member keeps
//!   it (the "last known ISR"), so the partition comes back with that broker.
//! - Eligible leader replicas (KIP-966, [`ElrRules`]; Kafka 4.1 enables them on new clusters):
//!   while the target ISR is below the effective min ISR, the high watermark cannot advance
//!   (the leader's strict min ISR rule), so every replica that was in the ISR since then holds
//!   every committed record: ELR = (ELR + ISR) - target ISR - replicas that shut down uncleanly.
//!   The ISR may become empty. A leader elected from the ELR becomes the ISR alone and leaves the
//!   ELR. Reaching the min ISR clears the ELR. A partition whose ISR becomes empty records its
//!   last leader in `last_known_elr`; when ISR and ELR are both empty and that broker is
//!   acceptable it is elected as an unclean election would be (Kafka's "balanced recovery", what
//!   Kafka did before ELR); a valid leader clears the field. An unclean election clears the ELR.
//! - A leader change bumps the leader epoch; every change bumps the partition epoch (applied by
//!   `PartitionState::merged`). ISR shrinks do not bump the leader epoch (Kafka >= 3.6); a new
//!   replica list without some old replica does (the leader field is set to the same leader).
//! - Reassignments (Kafka's `PartitionReassignmentReplicas`): the target assignment (replicas,
//!   removing, adding; the partition's own by default) completes when the target ISR without the
//!   removing replicas is non-empty and holds every remaining replica: then replicas = those,
//!   ISR = the target ISR without the removing ones, removing = adding = []. Elections choose in
//!   the target replica order.
//!
//! Pure: acceptability is a predicate argument.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::state::PartitionState;
use crate::metadata::records::{PartitionChange, NO_LEADER, NO_LEADER_CHANGE};

/// Kafka's election types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// Move leadership to the first replica (ElectLeaders PREFERRED).
    Preferred,
    /// Elect from the ISR only when needed.
    Online,
    /// Like `Online`, then any live replica (data loss possible).
    Unclean,
}

/// A partition's replica assignment during a reassignment (Kafka's
/// `PartitionReassignmentReplicas`): `replicas` = target followed by the removing replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetAssignment {
    pub replicas: Vec<i32>,
    pub removing: Vec<i32>,
    pub adding: Vec<i32>,
}

impl TargetAssignment {
    /// Moving from `current` replicas to `target`: removing = current - target, adding =
    /// target - current (both ascending), replicas = target then the removing ones.
    pub fn between(current: &[i32], target: &[i32]) -> TargetAssignment {
        let set = |a: &[i32], b: &[i32]| -> Vec<i32> {
            let b: std::collections::BTreeSet<i32> = b.iter().copied().collect();
            let out: std::collections::BTreeSet<i32> =
                a.iter().copied().filter(|r| !b.contains(r)).collect();
            out.into_iter().collect()
        };
        let removing = set(current, target);
        let adding = set(target, current);
        let mut replicas = target.to_vec();
        replicas.extend(removing.iter().copied());
        TargetAssignment {
            replicas,
            removing,
            adding,
        }
    }

    /// The replicas and ISR once this reassignment completes with `target_isr`, or None while
    /// a remaining replica is not in sync (or nothing would remain).
    fn completed(&self, target_isr: &[i32]) -> Option<(Vec<i32>, Vec<i32>)> {
        if self.removing.is_empty() && self.adding.is_empty() {
            return None;
        }
        let keep = |r: &i32| !self.removing.contains(r);
        let isr: Vec<i32> = target_isr.iter().copied().filter(keep).collect();
        let replicas: Vec<i32> = self.replicas.iter().copied().filter(keep).collect();
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return None;
        }
        Some((replicas, isr))
    }
}

/// KIP-966's inputs, when eligible leader replicas are enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElrRules {
    /// The topic's effective min ISR: min(`min.insync.replicas`, replication factor).
    pub min_isr: usize,
    /// A replica that restarted after an unclean shutdown: it may miss committed records, so it
    /// leaves the ELR (the caller also drops it from the target ISR).
    pub unclean_shutdown: Option<i32>,
}

/// The inputs of one partition's change.
pub struct ChangeBuilder<'a> {
    pub topic_id: Uuid,
    pub partition_id: i32,
    pub partition: &'a PartitionState,
    pub target_isr: Vec<i32>,
    pub election: Election,
    /// A new assignment (AlterPartitionReassignments); None keeps the partition's own (with
    /// its ongoing reassignment, which this change may complete).
    pub assignment: Option<TargetAssignment>,
    /// Some when eligible leader replicas are enabled.
    pub elr: Option<ElrRules>,
}

impl ChangeBuilder<'_> {
    /// The change record, or None if it would change nothing.
    pub fn build(mut self, acceptable: &dyn Fn(i32) -> bool) -> Option<PartitionChange> {
        let p = self.partition;
        let mut target = self.assignment.take().unwrap_or_else(|| TargetAssignment {
            replicas: p.replicas.clone(),
            removing: p.removing_replicas.clone(),
            adding: p.adding_replicas.clone(),
        });
        if let Some((replicas, isr)) = target.completed(&self.target_isr) {
            target = TargetAssignment {
                replicas,
                removing: vec![],
                adding: vec![],
            };
            self.target_isr = isr;
        }
        let mut target_elr = self.target_elr();
        let (leader, unclean) = self.elect(&target.replicas, &target_elr, acceptable);
        let mut change = PartitionChange::none(self.topic_id, self.partition_id);
        if leader != p.leader {
            change.leader = leader;
            if target_elr.contains(&leader) {
                self.target_isr = vec![leader];
                target_elr.retain(|r| *r != leader);
            }
            if unclean {
                change.isr = Some(vec![leader]);
            }
        }
        // A replica leaving the assignment bumps the leader epoch (Kafka's
        // triggerLeaderEpochBumpForReplicaReassignmentIfNeeded).
        if change.leader == NO_LEADER_CHANGE
            && !p.replicas.iter().all(|r| target.replicas.contains(r))
        {
            change.leader = p.leader;
        }
        // An unclean election, or ELR disabled, clears the ELR.
        if change.isr.is_some() || self.elr.is_none() {
            target_elr.clear();
        }
        if target_elr != p.elr {
            change.elr = Some(target_elr);
        }
        let elr_enabled = self.elr.is_some();
        if change.isr.is_none()
            && (!self.target_isr.is_empty() || elr_enabled)
            && self.target_isr != p.isr
        {
            change.isr = Some(self.target_isr.clone());
        }
        if elr_enabled {
            self.update_last_known_leader(&mut change);
        } else if !p.last_known_elr.is_empty() {
            change.last_known_elr = Some(vec![]);
        }
        if !target.replicas.is_empty() && target.replicas != p.replicas {
            change.replicas = Some(target.replicas);
        }
        if target.removing != p.removing_replicas {
            change.removing_replicas = Some(target.removing);
        }
        if target.adding != p.adding_replicas {
            change.adding_replicas = Some(target.adding);
        }
        let no_op = change.isr.is_none()
            && change.leader == NO_LEADER_CHANGE
            && change.replicas.is_none()
            && change.removing_replicas.is_none()
            && change.adding_replicas.is_none()
            && change.elr.is_none()
            && change.last_known_elr.is_none();
        (!no_op).then_some(change)
    }

    /// The ELR before the election (Kafka's `maybePopulateTargetElr`): the current one when ELR
    /// is disabled; empty at or above the min ISR; else (ELR + ISR) - target ISR - the unclean
    /// replica, ascending.
    fn target_elr(&self) -> Vec<i32> {
        let p = self.partition;
        let Some(rules) = self.elr else {
            return p.elr.clone();
        };
        if self.target_isr.len() >= rules.min_isr {
            return vec![];
        }
        let candidates: BTreeSet<i32> = p.elr.iter().chain(&p.isr).copied().collect();
        candidates
            .into_iter()
            .filter(|r| !self.target_isr.contains(r) && Some(*r) != rules.unclean_shutdown)
            .collect()
    }

    /// The leader (and whether the election was unclean) in `replicas` order.
    fn elect(
        &self,
        replicas: &[i32],
        target_elr: &[i32],
        acceptable: &dyn Fn(i32) -> bool,
    ) -> (i32, bool) {
        let p = self.partition;
        let isr = &self.target_isr;
        let valid = |r: i32| {
            (isr.contains(&r) || (isr.is_empty() && target_elr.contains(&r))) && acceptable(r)
        };
        // Kafka's canElectLastKnownLeader (balanced recovery).
        let last_known = || {
            let single = p.last_known_elr.len() == 1;
            (self.elr.is_some() && isr.is_empty() && target_elr.is_empty() && single)
                .then(|| p.last_known_elr[0])
                .filter(|r| acceptable(*r))
        };
        match self.election {
            Election::Preferred => {
                let first = replicas.first().copied().unwrap_or(NO_LEADER);
                if valid(first) {
                    (first, false)
                } else if valid(p.leader) {
                    (p.leader, false)
                } else if let Some(r) = replicas.iter().skip(1).copied().find(|r| valid(*r)) {
                    (r, false)
                } else if let Some(r) = last_known() {
                    (r, true)
                } else {
                    (NO_LEADER, false)
                }
            }
            Election::Online | Election::Unclean => {
                if valid(p.leader) {
                    (p.leader, false)
                } else if let Some(r) = replicas.iter().copied().find(|r| valid(*r)) {
                    (r, false)
                } else if let Some(r) = last_known() {
                    (r, true)
                } else if self.election == Election::Unclean {
                    match replicas.iter().copied().find(|r| acceptable(*r)) {
                        Some(r) => (r, true),
                        None => (NO_LEADER, false),
                    }
                } else {
                    (NO_LEADER, false)
                }
            }
        }
    }

    /// Kafka's `maybeUpdateLastKnownLeader`: the first time the ISR becomes empty, the last
    /// leader is recorded; a partition that has (or keeps) a leader clears it.
    fn update_last_known_leader(&self, change: &mut PartitionChange) {
        let p = self.partition;
        let emptied = change.isr.as_ref().is_some_and(|isr| isr.is_empty());
        if emptied {
            if p.leader >= 0 && p.last_known_elr != [p.leader] {
                change.last_known_elr = Some(vec![p.leader]);
            }
        } else if (change.leader >= 0 || (p.leader != NO_LEADER && change.leader != NO_LEADER))
            && !p.last_known_elr.is_empty()
        {
            change.last_known_elr = Some(vec![]);
        }
    }
}

/// `isr` without `broker`.
pub fn without(isr: &[i32], broker: i32) -> Vec<i32> {
    isr.iter().copied().filter(|r| *r != broker).collect()
}
