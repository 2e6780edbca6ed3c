//! `Checker`: the invariants, checked as the simulation runs (after every event and at every
//! record a voter applies). Each violation is data: a line naming the invariant, the node, the
//! index or partition, kept in `violations`.
//!
//! Invariants:
//! 1. At most one Raft leader per term (`after_step`).
//! 2. At most one partition leader per (partition, leader epoch) across every voter's
//!    controller state (`before_record`).
//! 3. Every voter's committed metadata log is a prefix of the longest one: the same entry
//!    (term, bytes) at the same index (`on_committed`).
//! 4. Every voter's controller state equals a replay of the committed log up to its applied
//!    index (`check_state`, whenever the voter is at the longest log's end).
//! 5. Leader epochs and partition epochs never decrease per partition on one voter, and the
//!    partition epoch rises with every change (`before_record`).
//! 6. A broker that is fenced (or in controlled shutdown, or unknown) is never made a new
//!    leader (`before_record`).
//! 7. An acknowledged command's entry is in the durable log of every later Raft leader at its
//!    index and term, and is what the log commits there (`on_ack`, `on_became_leader`,
//!    `on_committed`). "Later" is by term, not by simulated time: Raft's Leader Completeness
//!    makes an entry committed in term U part of every leader of a term above U; a leader of U
//!    or an older term may still be elected after the commit (see `on_became_leader`).
//! 8. Replication's invariants (8 to 11) live in `repl` (`repl_check`).
//! 12. A partition's new leader is a member of its ISR before the change, unless the entry is an
//!     unclean election the workload asked for (`allow_unclean`); such an election restarts the
//!     partition's replication history in `repl` (`on_committed`).
//! 13. A snapshot (taken by a voter's compaction, installed from the leader, or loaded at a
//!     restart) holds the state of a replay of the committed log up to its index, at the term
//!     committed there, and the voter that loads it holds that state (`check_snapshot`).
//!
//! Pure bookkeeping; no clock, no I/O.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use sluice::controller::ControllerState;
use sluice::metadata::entry::{self, EntryKind};
use sluice::metadata::{MetadataRecord, NO_LEADER_CHANGE};
use uuid::Uuid;

use crate::repl_check::ReplChecker;

/// The records an entry applies to `state` (the `Bootstrap` rule of `metadata::entry`).
pub fn entry_records(has_metadata_version: bool, data: &[u8]) -> Vec<MetadataRecord> {
    match entry::decode(data) {
        Ok((EntryKind::Bootstrap, _)) if has_metadata_version => Vec::new(),
        Ok((_, records)) => records,
        Err(_) => Vec::new(),
    }
}

#[derive(Debug, Default)]
pub struct Checker {
    pub violations: Vec<String>,
    leaders_by_term: BTreeMap<u64, i32>,
    /// The longest committed log: index -> (term, bytes). raft's own empty entries (one per
    /// new leader) are never handed out, so indexes have gaps.
    committed: BTreeMap<u64, (u64, Bytes)>,
    /// A replay of `committed` (invariant 4's reference).
    reference: ControllerState,
    /// Acknowledged commands: index -> (the entry's term, the acknowledging voter's term when
    /// it learned the commit: the entry was committed in that term or an older one).
    acked: BTreeMap<u64, (u64, u64)>,
    /// (voter, topic, partition) -> (leader epoch, partition epoch), per voter lifetime.
    epochs: BTreeMap<(i32, Uuid, i32), (i32, i32)>,
    /// (topic, partition, leader epoch) -> leader.
    partition_leaders: BTreeMap<(Uuid, i32, i32), i32>,
    /// FenceBroker records in the committed log.
    pub fencings: u64,
    /// Raft terms that had a leader.
    pub elections: u64,
    /// Entries (index, term) proposed as an unclean ElectLeaders.
    unclean_allowed: BTreeSet<(u64, u64)>,
    /// The replication invariants.
    pub repl: ReplChecker,
    /// A replay of `committed` up to an earlier index (invariant 13's reference, advanced from
    /// one snapshot to the next).
    replay_at: (u64, ControllerState),
    pub snapshots: SnapshotStats,
}

/// Snapshots of the metadata log in one run (or summed over seeds).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Compactions: a voter's own snapshot at its applied offset.
    pub taken: u64,
    /// A leader's snapshot a follower far behind installed mid-run.
    pub installed: u64,
    /// A durable snapshot loaded at a restart.
    pub loaded: u64,
}

impl SnapshotStats {
    pub fn add(&mut self, o: &SnapshotStats) {
        self.taken += o.taken;
        self.installed += o.installed;
        self.loaded += o.loaded;
    }
}

impl Checker {
    fn violation(&mut self, line: String) {
        if self.violations.len() < 100 {
            self.violations.push(line);
        }
    }

    /// Entries in the longest committed log.
    pub fn committed_len(&self) -> u64 {
        self.committed.len() as u64
    }

    /// Index of the last entry of the longest committed log (0 when empty).
    pub fn last_index(&self) -> u64 {
        self.committed.last_key_value().map_or(0, |(i, _)| *i)
    }

    /// The committed entry at `index`.
    pub fn committed_at(&self, index: u64) -> Option<&(u64, Bytes)> {
        self.committed.get(&index)
    }

    /// The committed entries in `(after, upto]`.
    pub fn committed_range(
        &self,
        after: u64,
        upto: u64,
    ) -> impl Iterator<Item = (&u64, &(u64, Bytes))> {
        self.committed
            .range(after.saturating_add(1)..)
            .take_while(move |(i, _)| **i <= upto)
    }

    pub fn reference(&self) -> &ControllerState {
        &self.reference
    }

    pub fn acked(&self) -> usize {
        self.acked.len()
    }

    /// Invariant 1: `leaders` are (voter, term) of every voter that leads now.
    pub fn after_step(&mut self, leaders: &[(i32, u64)]) {
        for &(id, term) in leaders {
            match self.leaders_by_term.get(&term) {
                None => {
                    self.leaders_by_term.insert(term, id);
                    self.elections += 1;
                }
                Some(&other) if other != id => {
                    self.violation(format!("two Raft leaders in term {term}: {other} and {id}"))
                }
                Some(_) => {}
            }
        }
    }

    /// Invariants 3 and 7: voter `voter` hands out entry `index` of `term`.
    pub fn on_committed(&mut self, voter: i32, index: u64, term: u64, data: &Bytes) {
        let last = self.last_index();
        if index <= last {
            match self.committed.get(&index) {
                Some((t, d)) if *t == term && d == data => {}
                Some((t, _)) => {
                    let t = *t;
                    self.violation(format!(
                        "voter {voter} committed index {index} term {term}, another voter committed term {t} there"
                    ));
                }
                None => self.violation(format!(
                    "voter {voter} committed index {index} term {term}, which the longest log ({last}) does not hold"
                )),
            }
        } else {
            self.committed.insert(index, (term, data.clone()));
            let has_mv = self.reference.features.contains_key("metadata.version");
            let unclean = self.unclean_allowed.contains(&(index, term));
            for r in entry_records(has_mv, data) {
                if matches!(r, MetadataRecord::FenceBroker { .. }) {
                    self.fencings += 1;
                }
                self.check_election(index, unclean, &r);
                self.reference.apply(&r);
            }
        }
        if let Some(&(t, _)) = self.acked.get(&index) {
            if t != term {
                self.violation(format!(
                    "acknowledged entry {index} (term {t}) replaced by term {term} on voter {voter}"
                ));
            }
        }
    }

    /// Invariant 12: the entry at `index`/`term` is an unclean election the workload asked for.
    pub fn allow_unclean(&mut self, index: u64, term: u64) {
        self.unclean_allowed.insert((index, term));
    }

    /// Invariant 12 for `record` of the newly committed entry `index`.
    fn check_election(&mut self, index: u64, unclean: bool, record: &MetadataRecord) {
        let MetadataRecord::PartitionChange(c) = record else {
            return;
        };
        if c.leader == NO_LEADER_CHANGE || c.leader < 0 {
            return;
        }
        let Some(before) = self.reference.partition(c.topic_id, c.partition_id) else {
            return;
        };
        // An ELR member (KIP-966) holds every committed record, as an ISR member does.
        if before.isr.contains(&c.leader) || before.elr.contains(&c.leader) {
            return;
        }
        // Kafka's balanced recovery: with ISR and ELR empty (the ELR may empty in this very
        // change, when its last member restarted uncleanly) the last known leader comes back as
        // an unclean election would (it may have lost unflushed records).
        let last_known = before.isr.is_empty() && before.last_known_elr == [c.leader];
        if unclean || last_known {
            let epoch = before.merged(c).leader_epoch;
            self.repl
                .on_unclean_election((c.topic_id, c.partition_id), epoch);
        } else {
            let (isr, elr) = (before.isr.clone(), before.elr.clone());
            let last_known = before.last_known_elr.clone();
            self.violation(format!(
                "entry {index}: partition {}-{} elects broker {}, not in its ISR {isr:?} or ELR {elr:?} (last known leader {last_known:?}); change {c:?}",
                c.topic_id, c.partition_id, c.leader
            ));
        }
    }

    /// Invariant 7: a command's entry at `index`/`term` was acknowledged by a voter whose
    /// current term is `voter_term` (at least `term`; the leader that committed the entry led
    /// that term or an older one).
    pub fn on_ack(&mut self, index: u64, term: u64, voter_term: u64) {
        self.acked.insert(index, (term, voter_term.max(term)));
        if let Some(&(t, _)) = self.committed_at(index) {
            if t != term {
                self.violation(format!(
                    "acknowledged entry {index} of term {term}, but term {t} is committed there"
                ));
            }
        }
    }

    /// Invariant 7: voter `voter` became leader of `term`; `term_at` reads its durable log,
    /// whose snapshot covers the indexes up to `snapshot_index` (a snapshot holds committed
    /// entries only, and invariant 13 checks it against the committed log, where invariant 7
    /// checked every acknowledged term).
    ///
    /// Only acknowledgements made in an older term than `term` bind it. A candidate can win an
    /// older term after a newer term's leader committed and acknowledged entries: its voters
    /// granted their votes in that older term, before they moved on, and the vote answers reach
    /// it late (delayed on the network, or queued behind its slow disk). Such a leader lacks the
    /// newer entries and is correct (it can commit nothing: a majority has moved to a newer
    /// term, and invariant 3 would see a divergent commit). Seeds 8595 and 8668 once reported
    /// these leaders as violations.
    pub fn on_became_leader(
        &mut self,
        voter: i32,
        term: u64,
        snapshot_index: u64,
        term_at: &dyn Fn(u64) -> Option<u64>,
    ) {
        let missing: Vec<(u64, u64)> = self
            .acked
            .range(snapshot_index..)
            .filter(|(_, (_, known))| *known < term)
            .filter(|(i, (t, _))| term_at(**i) != Some(*t))
            .map(|(i, (t, _))| (*i, *t))
            .collect();
        if let Some((i, t)) = missing.first() {
            self.violation(format!(
                "leader {voter} of term {term} lacks acknowledged entry {i} (term {t}); {} missing",
                missing.len()
            ));
        }
    }

    /// A voter crashed: its per-lifetime epoch history restarts with its replay.
    pub fn on_crash(&mut self, voter: i32) {
        self.epochs.retain(|(v, _, _), _| *v != voter);
    }

    /// Invariants 2, 5 and 6, for `record` about to be applied to `state` on `voter`.
    pub fn before_record(&mut self, voter: i32, state: &ControllerState, record: &MetadataRecord) {
        let (topic, partition, leader, leader_epoch, partition_epoch, new_leader) = match record {
            MetadataRecord::Partition(p) => (
                p.topic_id,
                p.partition_id,
                p.leader,
                p.leader_epoch,
                p.partition_epoch,
                true,
            ),
            MetadataRecord::PartitionChange(c) => {
                let Some(before) = state.partition(c.topic_id, c.partition_id) else {
                    return;
                };
                let after = before.merged(c);
                if after.leader_epoch < before.leader_epoch
                    || after.partition_epoch <= before.partition_epoch
                {
                    self.violation(format!(
                        "voter {voter}: partition {}-{} epochs went from ({}, {}) to ({}, {})",
                        c.topic_id,
                        c.partition_id,
                        before.leader_epoch,
                        before.partition_epoch,
                        after.leader_epoch,
                        after.partition_epoch
                    ));
                }
                (
                    c.topic_id,
                    c.partition_id,
                    after.leader,
                    after.leader_epoch,
                    after.partition_epoch,
                    c.leader != NO_LEADER_CHANGE,
                )
            }
            _ => return,
        };
        if new_leader && leader >= 0 && !state.is_active(leader) {
            self.violation(format!(
                "voter {voter}: partition {topic}-{partition} leader epoch {leader_epoch} elects broker {leader}, which is fenced, shutting down or unregistered"
            ));
        }
        let key = (voter, topic, partition);
        if let Some(&(le, pe)) = self.epochs.get(&key) {
            if leader_epoch < le || partition_epoch < pe {
                self.violation(format!(
                    "voter {voter}: partition {topic}-{partition} epochs decreased from ({le}, {pe}) to ({leader_epoch}, {partition_epoch})"
                ));
            }
        }
        self.epochs.insert(key, (leader_epoch, partition_epoch));
        let lkey = (topic, partition, leader_epoch);
        match self.partition_leaders.get(&lkey) {
            Some(&other) if other != leader => self.violation(format!(
                "partition {topic}-{partition} leader epoch {leader_epoch} has two leaders: {other} and {leader} (voter {voter})"
            )),
            Some(_) => {}
            None => {
                self.partition_leaders.insert(lkey, leader);
            }
        }
    }

    /// A replay of the committed log up to `index`.
    fn replay_upto(&mut self, index: u64) -> &ControllerState {
        if index < self.replay_at.0 {
            self.replay_at = (0, ControllerState::default());
        }
        let (from, mut state) = std::mem::take(&mut self.replay_at);
        for (_, (_, data)) in self.committed_range(from, index) {
            let has_mv = state.features.contains_key("metadata.version");
            for r in entry_records(has_mv, data) {
                state.apply(&r);
            }
        }
        self.replay_at = (index, state);
        &self.replay_at.1
    }

    /// Invariant 13: voter `voter` holds `state` from a snapshot at `index` of `term` (`what`:
    /// taken, installed or loaded).
    pub fn check_snapshot(
        &mut self,
        voter: i32,
        index: u64,
        term: u64,
        state: &ControllerState,
        what: &str,
    ) {
        let last = self.last_index();
        if index > last {
            self.violation(format!(
                "voter {voter}: snapshot {what} at index {index}, past the committed log ({last})"
            ));
            return;
        }
        if let Some(&(t, _)) = self.committed_at(index) {
            if t != term {
                self.violation(format!(
                    "voter {voter}: snapshot {what} at index {index} has term {term}, term {t} is committed there"
                ));
            }
        }
        let same = if index == last {
            *state == self.reference
        } else {
            *state == *self.replay_upto(index)
        };
        if !same {
            self.violation(format!(
                "voter {voter}: snapshot {what} at index {index} differs from a replay of the committed log up to it"
            ));
        }
    }

    /// Invariant 4: `state` is voter `voter`'s state after applying `applied` entries.
    pub fn check_state(&mut self, voter: i32, applied: u64, state: &ControllerState) {
        if applied == self.last_index() && *state != self.reference {
            self.violation(format!(
                "voter {voter}: controller state at offset {applied} differs from a replay of the committed log"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divergent_commits_and_two_leaders_are_violations() {
        let mut c = Checker::default();
        let a = entry::encode(EntryKind::Records, &[]);
        let b = entry::encode(
            EntryKind::Records,
            &[MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(1),
            }],
        );
        c.on_committed(0, 1, 1, &a);
        c.on_committed(1, 1, 1, &a);
        assert!(c.violations.is_empty());
        c.on_committed(1, 1, 2, &b);
        c.on_committed(2, 5, 2, &b);
        c.on_committed(0, 3, 2, &b);
        c.after_step(&[(0, 3)]);
        c.after_step(&[(1, 3)]);
        c.on_ack(2, 4, 4);
        c.on_became_leader(2, 5, 0, &|_| None);
        assert_eq!(c.violations.len(), 4, "{:?}", c.violations);
        assert!(c.violations[0].contains("committed index 1 term 2"));
        assert!(c.violations[1].contains("does not hold"));
        assert!(c.violations[2].contains("two Raft leaders in term 3"));
        assert!(c.violations[3].contains("lacks acknowledged entry 2"));
    }

    /// Leader Completeness binds the leaders of newer terms only: a leader of an older term
    /// (its vote answers arrived late) or of the acknowledging voter's term may lack the entry.
    #[test]
    fn an_acknowledgement_binds_the_leaders_of_newer_terms() {
        let mut c = Checker::default();
        // Entry 402 of term 18, acknowledged by the leader of term 18.
        c.on_ack(402, 18, 18);
        c.on_became_leader(4, 17, 0, &|_| None);
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        c.on_became_leader(4, 19, 0, &|i| (i == 402).then_some(18));
        assert!(c.violations.is_empty(), "{:?}", c.violations);
        c.on_became_leader(1, 19, 0, &|_| None);
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        assert!(c.violations[0].contains("leader 1 of term 19 lacks acknowledged entry 402"));
        // Entry 500 of term 20, whose commit its proposer learned in term 22 (from that term's
        // leader): a leader of term 21 elected late may lack it, one of term 23 may not.
        c.on_ack(500, 20, 22);
        c.on_became_leader(3, 21, 0, &|i| (i == 402).then_some(18));
        assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
        c.on_became_leader(3, 23, 0, &|i| (i == 402).then_some(18));
        assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
        assert!(c.violations[1].contains("lacks acknowledged entry 500 (term 20)"));
    }
}
