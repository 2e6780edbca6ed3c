//! Kafka's `PartitionChangeBuilder` rules (without eligible leader replicas, KIP-966): given a
//! partition, a target ISR and an election type, the `PartitionChange` to write, or none when
//! nothing changes.
//!
//! - A leader is valid when it is in the target ISR and acceptable (registered, unfenced, not in
//!   controlled shutdown, not the broker being removed).
//! - ONLINE / UNCLEAN keep a valid current leader, else take the first valid replica in replica
//!   order; UNCLEAN then falls back to the first acceptable replica outside the ISR and sets the
//!   ISR to that leader alone. PREFERRED takes the first replica if valid, else keeps a valid
//!   current leader, else the next valid replica.
//! - No valid leader: leader -1 (offline).
//! - The ISR never becomes empty: removing its last member keeps it (the "last known ISR"), so the
//!   partition comes back with that broker.
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
        let valid = |r: i32| self.target_isr.contains(&r) && acceptable(r);
        let (leader, unclean) = match self.election {
            Election::Preferred => {
                let first = target.replicas.first().copied().unwrap_or(NO_LEADER);
                if valid(first) {
                    (first, false)
                } else if valid(p.leader) {
                    (p.leader, false)
                } else {
                    let next = target.replicas.iter().skip(1).copied().find(|r| valid(*r));
                    (next.unwrap_or(NO_LEADER), false)
                }
            }
            Election::Online | Election::Unclean => {
                if valid(p.leader) {
                    (p.leader, false)
                } else if let Some(r) = target.replicas.iter().copied().find(|r| valid(*r)) {
                    (r, false)
                } else if self.election == Election::Unclean {
                    match target.replicas.iter().copied().find(|r| acceptable(*r)) {
                        Some(r) => (r, true),
                        None => (NO_LEADER, false),
                    }
                } else {
                    (NO_LEADER, false)
                }
            }
        };
        let mut change = PartitionChange {
            partition_id: self.partition_id,
            topic_id: self.topic_id,
            isr: None,
            leader: NO_LEADER_CHANGE,
            replicas: None,
            removing_replicas: None,
            adding_replicas: None,
        };
        if leader != p.leader {
            change.leader = leader;
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
        if change.isr.is_none() && !self.target_isr.is_empty() && self.target_isr != p.isr {
            change.isr = Some(self.target_isr);
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
            && change.adding_replicas.is_none();
        (!no_op).then_some(change)
    }
}

/// `isr` without `broker`.
pub fn without(isr: &[i32], broker: i32) -> Vec<i32> {
    isr.iter().copied().filter(|r| *r != broker).collect()
}
