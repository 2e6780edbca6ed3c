//! `GroupChecker`: invariant 16, committed offsets.
//!
//! 16. An acknowledged OffsetCommit is never lost: an OffsetFetch answered by a later coordinator
//!     returns that commit or a later one of the same group-partition. The consumers number their
//!     commits (the number travels in the offset's metadata); a fetch is checked against the
//!     commits acknowledged before it was sent. Later: the answering coordinator's shard leader
//!     epoch is at least the one the commit was acknowledged in (a broker acting on a stale image
//!     may still answer for an older epoch, as a deposed leader serves reads).
//!
//! Exempt (the losses Kafka's ISR model allows, counted in `exempt`): a commit whose records the
//! replication checker no longer promises (an unclean election, or a power loss of the new
//! leader, voided them). Pure bookkeeping; no clock, no I/O.

use std::collections::BTreeMap;

use crate::repl_check::ReplChecker;
use crate::replica::Tp;

/// An acknowledged commit of one group-partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    pub commit: u64,
    /// The shard's leader epoch at the acknowledgement, the shard partition and the offset of
    /// the commit's records there.
    pub epoch: i32,
    pub shard: Tp,
    pub offset: i64,
}

/// (group, topic, partition).
pub type GroupPartition = (String, String, i32);

#[derive(Debug, Default)]
pub struct GroupChecker {
    pub violations: Vec<String>,
    /// The latest acknowledged commit of each group-partition.
    acked: BTreeMap<GroupPartition, Acked>,
    pub exempt: u64,
    /// OffsetFetch answers checked.
    pub fetches_checked: u64,
}

impl GroupChecker {
    /// `group`'s commit of `partitions` was acknowledged.
    pub fn on_acked(&mut self, group: &str, partitions: &[(String, i32)], acked: Acked) {
        for (topic, p) in partitions {
            let key = (group.to_string(), topic.clone(), *p);
            let e = self.acked.entry(key).or_insert(acked);
            if e.commit <= acked.commit {
                *e = acked;
            }
        }
    }

    /// What is acknowledged for `group` now (a fetch is checked against it).
    pub fn acked_of(&self, group: &str) -> Vec<(GroupPartition, Acked)> {
        self.acked
            .range((group.to_string(), String::new(), i32::MIN)..)
            .take_while(|(k, _)| k.0 == group)
            .map(|(k, a)| (k.clone(), *a))
            .collect()
    }

    /// Invariant 16: a fetch for `group` sent when `before` was acknowledged was answered by
    /// `broker`, coordinating in shard leader `epoch`, with `answer` (topic, partition, commit
    /// number; `None` when the metadata is no commit number).
    pub fn on_fetch(
        &mut self,
        repl: &ReplChecker,
        broker: i32,
        epoch: i32,
        before: &[(GroupPartition, Acked)],
        answer: &BTreeMap<(String, i32), Option<u64>>,
    ) {
        self.fetches_checked += 1;
        for ((group, topic, p), a) in before {
            if epoch < a.epoch {
                continue;
            }
            let got = answer.get(&(topic.clone(), *p)).copied().flatten();
            if got.is_some_and(|c| c >= a.commit) {
                continue;
            }
            if !repl.promises(a.shard, a.offset, a.epoch) {
                self.exempt += 1;
                continue;
            }
            if self.violations.len() < 100 {
                self.violations.push(format!(
                    "group {group}: OffsetFetch answered by broker {broker} (shard leader epoch {epoch}) returned commit {got:?} of {topic}-{p}, commit {} was acknowledged before (epoch {}, offset {} of {}-{})",
                    a.commit, a.epoch, a.offset, a.shard.0, a.shard.1
                ));
            }
        }
    }
}
