//! Pending transactional offsets: what TxnOffsetCommit wrote to `__consumer_offsets` inside a
//! transaction that has not ended yet (Kafka's `pendingTransactionalOffsets` +
//! `openTransactions`). They are invisible to OffsetFetch until the transaction coordinator's
//! commit marker lands in the same `__consumer_offsets` partition; an abort marker drops them.
//!
//! Kafka keys pending offsets by producer id inside one coordinator shard (= one
//! `__consumer_offsets` partition). Our coordinator owns every partition, so the key is
//! `(offsets partition, producer id)`: a marker completes exactly the offsets written to the
//! partition it was written to.
//!
//! Pure data structure: no I/O. Owned by the [`super::Coordinator`] (one task; not thread-safe).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::records::OffsetValue;

/// One pending transactional offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingOffset {
    pub value: OffsetValue,
    /// Position of its record in the coordinator's write order (Kafka's `recordOffset`): when the
    /// transaction commits, it replaces the committed offset only if it was written after it.
    pub order: u64,
}

/// Pending offsets of one transaction: group -> (topic, partition) -> offset.
pub type TxnOffsets = BTreeMap<String, BTreeMap<(String, i32), PendingOffset>>;

/// A transaction as the group coordinator sees it: the `__consumer_offsets` partition it wrote
/// to and its producer id.
pub type TxnKey = (i32, i64);

/// Every open transaction's pending offsets, with an index by group.
#[derive(Debug, Default)]
pub struct PendingTxnOffsets {
    by_txn: HashMap<TxnKey, TxnOffsets>,
    /// group -> the open transactions holding pending offsets of that group.
    open_by_group: HashMap<String, BTreeSet<TxnKey>>,
}

impl PendingTxnOffsets {
    /// Records (or replaces) a pending offset of transaction `txn`.
    pub fn put(&mut self, txn: TxnKey, group: &str, topic: &str, partition: i32, p: PendingOffset) {
        self.by_txn
            .entry(txn)
            .or_default()
            .entry(group.to_string())
            .or_default()
            .insert((topic.to_string(), partition), p);
        self.open_by_group
            .entry(group.to_string())
            .or_default()
            .insert(txn);
    }

    /// The pending offset of one transaction for one partition.
    pub fn get(
        &self,
        txn: TxnKey,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Option<&PendingOffset> {
        self.by_txn
            .get(&txn)?
            .get(group)?
            .get(&(topic.to_string(), partition))
    }

    /// Whether any open transaction holds a pending offset for this group and partition
    /// (Kafka's `hasPendingTransactionalOffsets`).
    pub fn contains(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.open_by_group.get(group).is_some_and(|txns| {
            txns.iter().any(|t| {
                self.by_txn
                    .get(t)
                    .and_then(|g| g.get(group))
                    .is_some_and(|o| o.contains_key(&key))
            })
        })
    }

    /// Whether any open transaction holds pending offsets of this group.
    pub fn has_group(&self, group: &str) -> bool {
        self.open_by_group.contains_key(group)
    }

    /// Drops every open transaction's pending offset for this partition (a tombstone was written
    /// for it). True if there was one.
    pub fn remove_partition(&mut self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        let Some(txns) = self.open_by_group.get(group).cloned() else {
            return false;
        };
        let mut removed = false;
        for txn in txns {
            let Some(groups) = self.by_txn.get_mut(&txn) else {
                continue;
            };
            if let Some(offsets) = groups.get_mut(group) {
                removed |= offsets.remove(&key).is_some();
                if offsets.is_empty() {
                    groups.remove(group);
                    self.unlink(group, txn);
                }
            }
        }
        removed
    }

    /// Drops every pending offset of a group (the group was deleted) and returns the partitions
    /// that had one.
    /// The partitions `group` has pending offsets for, in any open transaction.
    pub fn partitions_of(&self, group: &str) -> BTreeSet<(String, i32)> {
        self.open_by_group
            .get(group)
            .into_iter()
            .flatten()
            .filter_map(|txn| self.by_txn.get(txn)?.get(group))
            .flat_map(|offsets| offsets.keys().cloned())
            .collect()
    }

    pub fn remove_group(&mut self, group: &str) -> BTreeSet<(String, i32)> {
        let mut partitions = BTreeSet::new();
        for txn in self.open_by_group.remove(group).unwrap_or_default() {
            if let Some(groups) = self.by_txn.get_mut(&txn) {
                if let Some(offsets) = groups.remove(group) {
                    partitions.extend(offsets.into_keys());
                }
            }
        }
        partitions
    }

    /// Ends a transaction: removes and returns its pending offsets (None if it had none here).
    pub fn take(&mut self, txn: TxnKey) -> Option<TxnOffsets> {
        let offsets = self.by_txn.remove(&txn)?;
        for group in offsets.keys() {
            self.unlink(group, txn);
        }
        Some(offsets)
    }

    /// The open transactions (those that still hold pending offsets, or wrote some that a
    /// tombstone removed since).
    pub fn transactions(&self) -> impl Iterator<Item = TxnKey> + '_ {
        self.by_txn.keys().copied()
    }

    fn unlink(&mut self, group: &str, txn: TxnKey) {
        if let Some(txns) = self.open_by_group.get_mut(group) {
            txns.remove(&txn);
            if txns.is_empty() {
                self.open_by_group.remove(group);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(offset: i64, order: u64) -> PendingOffset {
        PendingOffset {
            value: OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 0,
            },
            order,
        }
    }

    #[test]
    fn index_by_group_follows_puts_removals_and_takes() {
        let mut p = PendingTxnOffsets::default();
        p.put((3, 7), "g", "t", 0, pending(10, 1));
        p.put((3, 8), "g", "t", 1, pending(20, 2));
        p.put((3, 8), "h", "t", 0, pending(30, 3));
        assert!(p.contains("g", "t", 0));
        assert!(p.contains("g", "t", 1));
        assert!(!p.contains("g", "t", 2));
        assert!(!p.contains("g", "u", 0));
        assert_eq!(p.get((3, 8), "h", "t", 0).map(|o| o.value.offset), Some(30));

        assert!(p.remove_partition("g", "t", 0));
        assert!(!p.remove_partition("g", "t", 0));
        assert!(!p.contains("g", "t", 0));
        assert!(p.has_group("g"));

        let taken = p.take((3, 8)).expect("open");
        assert_eq!(taken.len(), 2);
        assert!(!p.has_group("g"), "producer 7's only offset was removed");
        assert!(!p.has_group("h"));
        // Producer 7's transaction is still open (its marker has not come), but empty.
        assert_eq!(p.transactions().collect::<Vec<_>>(), vec![(3, 7)]);
        assert_eq!(p.take((3, 7)).map(|o| o.len()), Some(0));
        assert_eq!(p.take((3, 7)), None);
    }

    #[test]
    fn remove_group_reports_the_pending_partitions() {
        let mut p = PendingTxnOffsets::default();
        p.put((0, 1), "g", "t", 0, pending(1, 1));
        p.put((0, 2), "g", "t", 1, pending(2, 2));
        p.put((0, 2), "h", "t", 0, pending(3, 3));
        let removed = p.remove_group("g");
        assert_eq!(
            removed.into_iter().collect::<Vec<_>>(),
            vec![("t".to_string(), 0), ("t".to_string(), 1)]
        );
        assert!(!p.has_group("g"));
        assert!(p.contains("h", "t", 0));
    }
}
