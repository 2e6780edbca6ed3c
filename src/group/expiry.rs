//! Offset expiration (Kafka's `offsets.retention.minutes`, checked every
//! `offsets.retention.check.interval.ms`), part of the pure coordinator: `now` comes in, tombstones
//! go out as effects.
//!
//! Kafka 4.x's rules (`OffsetMetadataManager.cleanupExpiredOffsets`, the groups'
//! `offsetExpirationCondition`):
//! - a classic group with a protocol type that is Empty: every offset expires once the group has
//!   been empty for the retention time (its state timestamp);
//! - a Stable classic group using the consumer protocol whose members' subscriptions are all known,
//!   and a KIP-848 consumer group: offsets of topics no member subscribes to expire once their
//!   commit is older than the retention time;
//! - a group without protocol type (simple consumers, admin commits): by commit time;
//! - any other group keeps its offsets; a partition with a pending transactional offset never
//!   expires.
//!
//! A group left empty with no offsets and no open transaction is deleted (a group tombstone for
//! classic groups), as Kafka does. Like every offset change, the removals are applied once their
//! tombstones are written (`Effects::offsets`).

use std::collections::BTreeSet;

use super::classic::GroupState;
use super::coordinator::Coordinator;
use super::offsets::OffsetChange;
use super::records::{self, CoordinatorRecord};
use super::Effects;

/// From what an offset's age is measured, and which topics are spared.
enum Condition {
    /// Age from this timestamp (when the group became empty) for every offset.
    Since(i64),
    /// Age from each offset's commit time, except for these subscribed topics.
    Committed { subscribed: BTreeSet<String> },
}

impl Coordinator {
    /// Starts the expiration timer: the first check runs one interval after `now` (after load).
    pub fn start_offset_expiry(&mut self, now: i64) {
        self.next_offset_expiry = Some(now + self.config.offsets_retention_check_interval_ms);
    }

    /// The expiration rule of `group_id`, or None when its offsets are kept.
    fn expiration_condition(&self, group_id: &str) -> Option<Condition> {
        if let Some(g) = self.consumer_groups.get(group_id) {
            let subscribed = g
                .members
                .values()
                .flat_map(|m| m.subscribed.iter().cloned())
                .collect();
            return Some(Condition::Committed { subscribed });
        }
        let Some(g) = self.groups.get(group_id) else {
            return Some(Condition::Committed {
                subscribed: BTreeSet::new(),
            });
        };
        if g.protocol_type.is_none() {
            return Some(Condition::Committed {
                subscribed: BTreeSet::new(),
            });
        }
        match g.state {
            GroupState::Empty => Some(Condition::Since(g.state_timestamp)),
            GroupState::Stable if g.protocol_type.as_deref() == Some("consumer") => {
                let protocol = g.protocol_name.as_deref().unwrap_or_default();
                let mut subscribed = BTreeSet::new();
                for m in g.members.values() {
                    subscribed.extend(records::subscription_topics(&m.metadata(protocol))?);
                }
                Some(Condition::Committed { subscribed })
            }
            _ => None,
        }
    }

    /// Whether the group has no members (and, for classic groups, is in state Empty).
    fn group_is_empty(&self, group_id: &str) -> bool {
        if let Some(g) = self.consumer_groups.get(group_id) {
            return g.members.is_empty();
        }
        self.groups
            .get(group_id)
            .is_none_or(|g| g.state == GroupState::Empty)
    }

    /// One expiration pass at `now`: tombstones for expired offsets and for deleted groups (the
    /// removals themselves come back as `Effects::offsets`, applied once written).
    pub fn expire_offsets(&mut self, now: i64) -> Effects {
        let mut fx = Effects::default();
        let retention = self.config.offsets_retention_ms;
        let mut ids: BTreeSet<String> = self.offsets.keys().cloned().collect();
        ids.extend(self.groups.keys().cloned());
        ids.extend(self.consumer_groups.keys().cloned());
        let mut expired_count = 0usize;
        for id in ids {
            let mut expiring = 0;
            if let Some(condition) = self.expiration_condition(&id) {
                let expired: Vec<(String, i32)> = self
                    .offsets
                    .get(&id)
                    .into_iter()
                    .flatten()
                    .filter(|((topic, partition), v)| {
                        let since = match &condition {
                            Condition::Since(ts) => *ts,
                            Condition::Committed { subscribed } => {
                                if subscribed.contains(topic) {
                                    return false;
                                }
                                v.commit_timestamp
                            }
                        };
                        now.saturating_sub(since) >= retention
                            && !self.pending.contains(&id, topic, *partition)
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                expiring = expired.len();
                for (topic, partition) in expired {
                    fx.records.push(CoordinatorRecord {
                        group_id: id.clone(),
                        key: records::offset_key(&id, &topic, partition),
                        value: None,
                    });
                    fx.offsets.push(OffsetChange::Delete {
                        group_id: id.clone(),
                        topic,
                        partition,
                    });
                    expired_count += 1;
                }
            }
            let left = self.offsets.get(&id).map_or(0, |o| o.len()) - expiring;
            if left == 0 && !self.pending.has_group(&id) && self.group_is_empty(&id) {
                if self.groups.contains_key(&id) {
                    fx.records.push(CoordinatorRecord {
                        group_id: id.clone(),
                        key: records::group_key(&id),
                        value: None,
                    });
                }
                fx.offsets.push(OffsetChange::DeleteGroup {
                    group_id: id.clone(),
                });
            }
        }
        if expired_count > 0 {
            tracing::info!("removed {expired_count} expired offset(s)");
        }
        fx
    }
}
