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
//!   `PartitionState::merged`). ISR shrinks do not bump the leader epoch (Kafka >= 3.6).
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

/// The inputs of one partition's change.
pub struct ChangeBuilder<'a> {
    pub topic_id: Uuid,
    pub partition_id: i32,
    pub partition: &'a PartitionState,
    pub target_isr: Vec<i32>,
    pub election: Election,
}

impl ChangeBuilder<'_> {
    /// The change record, or None if it would change nothing.
    pub fn build(self, acceptable: &dyn Fn(i32) -> bool) -> Option<PartitionChange> {
        let p = self.partition;
        let valid = |r: i32| self.target_isr.contains(&r) && acceptable(r);
        let (leader, unclean) = match self.election {
            Election::Preferred => {
                let first = p.replicas.first().copied().unwrap_or(NO_LEADER);
                if valid(first) {
                    (first, false)
                } else if valid(p.leader) {
                    (p.leader, false)
                } else {
                    let next = p.replicas.iter().skip(1).copied().find(|r| valid(*r));
                    (next.unwrap_or(NO_LEADER), false)
                }
            }
            Election::Online | Election::Unclean => {
                if valid(p.leader) {
                    (p.leader, false)
                } else if let Some(r) = p.replicas.iter().copied().find(|r| valid(*r)) {
                    (r, false)
                } else if self.election == Election::Unclean {
                    match p.replicas.iter().copied().find(|r| acceptable(*r)) {
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
        if change.isr.is_none() && !self.target_isr.is_empty() && self.target_isr != p.isr {
            change.isr = Some(self.target_isr);
        }
        let no_op = change.isr.is_none() && change.leader == NO_LEADER_CHANGE;
        (!no_op).then_some(change)
    }
}

/// `isr` without `broker`.
pub fn without(isr: &[i32], broker: i32) -> Vec<i32> {
    isr.iter().copied().filter(|r| *r != broker).collect()
}
