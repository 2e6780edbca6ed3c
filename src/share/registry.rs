//! The share-partition registry of one broker: every `SharePartition` it leads, by (group id,
//! topic id, partition), plus the share sessions (`session`). What ShareFetch and
//! ShareAcknowledge read and change on the partition leader.
//!
//! The registry is the in-memory side: a share-partition is built on first use from its persisted
//! state (`share_state`), and dropped (`remove`, `remove_topic`, `remove_group`) when the admin
//! APIs or DeleteGroups replace or delete that state, so its next use reads it again.
//!
//! Invariants: pure (no I/O, no clock; the caller passes `now_ms` to the partitions). Owned by
//! `Broker::shares` behind one mutex; every request's changes are made under it, so one
//! acknowledgement or acquisition is atomic with respect to every other.
//!
//! A ShareFetch that found nothing to acquire waits (`api::share_fetch`); besides appends and
//! lock deadlines it is woken through [`ShareRegistry::watch`] when acknowledgements or releases
//! change its share-partition (records Available again, or the in-flight limit freed), as
//! Kafka completes a delayed share fetch then.

use std::collections::HashMap;

use tokio::sync::watch;
use uuid::Uuid;

use super::partition::SharePartition;
use super::session::{ShareSessions, TopicIdPartition};

/// A share-partition: a share group's view of one topic-partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShareKey {
    pub group_id: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl ShareKey {
    pub fn new(group_id: &str, (topic_id, partition): TopicIdPartition) -> Self {
        ShareKey {
            group_id: group_id.to_string(),
            topic_id,
            partition,
        }
    }
}

/// Every share-partition and share session of this broker. Not thread-safe (see the module doc).
#[derive(Debug, Default)]
pub struct ShareRegistry {
    partitions: HashMap<ShareKey, SharePartition>,
    pub sessions: ShareSessions,
    /// Per share-partition that a ShareFetch waits on: a counter bumped by every change of its
    /// records' state by acknowledgements or releases. Dropped once nobody watches.
    changes: HashMap<ShareKey, watch::Sender<i64>>,
}

impl ShareRegistry {
    /// `max_sessions`: `group.share.max.share.sessions`.
    pub fn new(max_sessions: usize) -> Self {
        ShareRegistry {
            partitions: HashMap::new(),
            sessions: ShareSessions::new(max_sessions),
            changes: HashMap::new(),
        }
    }

    /// A receiver that sees every later [`Self::changed`] of `key` (subscribe before reading, so
    /// no change slips between the read and the wait). Closed when `key`'s share-partition is
    /// removed.
    pub fn watch(&mut self, key: &ShareKey) -> watch::Receiver<i64> {
        self.changes
            .entry(key.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Acknowledgements or a release changed `key`'s records: wakes the ShareFetches waiting on
    /// it.
    pub fn changed(&mut self, key: &ShareKey) {
        if let Some(tx) = self.changes.get(key) {
            if tx.receiver_count() == 0 {
                self.changes.remove(key);
            } else {
                tx.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// The share-partition of `key`, if it was initialized.
    pub fn partition(&mut self, key: &ShareKey) -> Option<&mut SharePartition> {
        self.partitions.get_mut(key)
    }

    /// The share-partition of `key`, initialized by `init` on first use.
    pub fn get_or_init(
        &mut self,
        key: &ShareKey,
        init: impl FnOnce() -> SharePartition,
    ) -> &mut SharePartition {
        self.partitions.entry(key.clone()).or_insert_with(init)
    }

    /// Releases what `member` holds in `group`'s share-partitions `tps` (its session closed).
    pub fn release(&mut self, group: &str, member: &str, tps: &[TopicIdPartition]) {
        for tp in tps {
            let key = ShareKey::new(group, *tp);
            if let Some(sp) = self.partitions.get_mut(&key) {
                sp.release_acquired_records(member);
                self.changed(&key);
            }
        }
    }

    /// A member left its share group (or timed out): its share session is dropped and the
    /// records it held in that session's partitions are released at once.
    pub fn close_member(&mut self, group: &str, member: &str) {
        let partitions = self.sessions.remove(group, member);
        self.release(group, member, &partitions);
    }

    /// A share group was deleted: its share-partitions and sessions go.
    pub fn remove_group(&mut self, group: &str) {
        self.partitions.retain(|k, _| k.group_id != group);
        self.changes.retain(|k, _| k.group_id != group);
        self.sessions.remove_group(group);
    }

    /// The state of `key` was set from outside (AlterShareGroupOffsets): its share-partition
    /// goes, the next use reads the new state.
    pub fn remove(&mut self, key: &ShareKey) {
        self.partitions.remove(key);
        self.changes.remove(key);
    }

    /// The state of `group`'s share-partitions of `topic_id` was deleted
    /// (DeleteShareGroupOffsets): they go.
    /// [`Self::remove_topic`] of each of `topic_ids`.
    pub fn remove_topic_all(&mut self, group: &str, topic_ids: &[Uuid]) {
        for id in topic_ids {
            self.remove_topic(group, *id);
        }
    }

    pub fn remove_topic(&mut self, group: &str, topic_id: Uuid) {
        let other = |k: &ShareKey| !(k.group_id == group && k.topic_id == topic_id);
        self.partitions.retain(|k, _| other(k));
        self.changes.retain(|k, _| other(k));
    }

    /// How many share-partitions exist.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;
    use crate::share::partition::{FetchedBatch, RecordState, SharePartitionConfig};

    #[test]
    fn closing_a_member_releases_its_records_and_frees_its_session() {
        let mut reg = ShareRegistry::new(10);
        let tp = (Uuid::from_u128(1), 0);
        reg.sessions.fetch("g", "m", 0, &[tp], &[]).unwrap();
        let key = ShareKey::new("g", tp);
        let sp = reg.get_or_init(&key, || {
            SharePartition::new(SharePartitionConfig::default(), 0, 0)
        });
        let got = sp.acquire("m", &[FetchedBatch::new(0, 4)], 10, 0);
        assert_eq!(got.len(), 1);
        reg.close_member("g", "m");
        assert!(reg.sessions.is_empty());
        let sp = reg.partition(&key).unwrap();
        assert_eq!(
            sp.record_state(2).map(|(s, n, _)| (s, n)),
            Some((RecordState::Available, 1))
        );
        reg.remove_group("g");
        assert!(reg.is_empty());
    }

    #[test]
    fn a_release_or_an_acknowledgement_wakes_the_watchers_of_its_share_partition() {
        let mut reg = ShareRegistry::new(10);
        let tp = (Uuid::from_u128(1), 0);
        let key = ShareKey::new("g", tp);
        let other = ShareKey::new("h", tp);
        reg.get_or_init(&key, || {
            SharePartition::new(SharePartitionConfig::default(), 0, 0)
        });
        let mut rx = reg.watch(&key);
        let mut rx_other = reg.watch(&other);
        assert!(!rx.has_changed().unwrap());
        reg.release("g", "m", &[tp]);
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        reg.changed(&key);
        assert!(rx.has_changed().unwrap());
        assert!(!rx_other.has_changed().unwrap());
        // Nobody watching: the next change drops the entry.
        drop(rx);
        reg.changed(&key);
        assert!(!reg.changes.contains_key(&key));
        // A removed share-partition closes its watchers.
        reg.remove_group("h");
        assert!(rx_other
            .changed()
            .now_or_never()
            .is_some_and(|r| r.is_err()));
    }
}
