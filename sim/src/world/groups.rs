//! The consumers in groups (`Schedule::Third`), restating what the Java consumer does with
//! assigned partitions: each group has one consumer, reading every partition from its leader at
//! its position and committing its positions (OffsetCommit with generation -1: the "simple" group
//! Kafka allows for manually assigned partitions) to its group coordinator, found as the leader of
//! the group's `__consumer_offsets` partition in a random broker's image. One commit in flight at
//! a time (commitSync; given up after `COMMIT_TIMEOUT_MS`, longer than any delivery takes, so an
//! abandoned commit has been applied or lost before the next is sent). A consumer restarts now
//! and then: it forgets its positions and fetches its committed offsets (OffsetFetch), checked by
//! `group_check` (invariant 16), and reads on from them.

use std::collections::BTreeMap;

use super::World;
use crate::group_check::{Acked, GroupPartition};
use crate::net::{Addr, Payload, BROKER_BASE};
use crate::replica::{ReplMsg, Tp, OFFSET_OUT_OF_RANGE};
use sluice::group::records::{partition_for, OFFSETS_TOPIC};

/// The groups, one consumer each.
pub const GROUPS: [&str; 3] = ["payments", "reports", "audit-trail"];
/// Consumer `k`'s address.
pub const GROUP_CONSUMER_BASE: Addr = 1010;
/// Partitions of the simulated `__consumer_offsets`.
pub const OFFSETS_PARTITIONS: i32 = 2;
/// Every this many ms each consumer acts.
pub const TICK_MS: u64 = 1_000;
/// A commit or fetch unanswered this long is given up.
const COMMIT_TIMEOUT_MS: u64 = 10_000;
/// A consumer commits at most this often (the Java consumer's `auto.commit.interval.ms`).
const COMMIT_INTERVAL_MS: u64 = 5_000;

struct Commit {
    request: u64,
    number: u64,
    sent_at: u64,
    partitions: Vec<(String, i32)>,
}

struct Fetch {
    request: u64,
    sent_at: u64,
    /// What was acknowledged when it was sent.
    before: Vec<(GroupPartition, Acked)>,
}

pub struct GroupConsumer {
    group: &'static str,
    /// `None`: restarted, its committed offsets not fetched yet.
    positions: Option<BTreeMap<Tp, i64>>,
    commits: u64,
    commit: Option<Commit>,
    fetch: Option<Fetch>,
    last_commit_at: u64,
}

impl GroupConsumer {
    pub fn new(k: usize) -> GroupConsumer {
        GroupConsumer {
            group: GROUPS[k],
            positions: None,
            commits: 0,
            commit: None,
            fetch: None,
            last_commit_at: 0,
        }
    }
}

impl World {
    /// The leader of `group`'s coordinator shard, as a random broker's image names it.
    fn coordinator_of(&mut self, group: &str) -> Option<i32> {
        let b = self.rng.below(self.brokers.len());
        let t = self.brokers[b].image.topic(OFFSETS_TOPIC)?;
        let count = t.partition_count();
        let p = t.partitions.get(&partition_for(group, count))?;
        (p.leader >= 0).then_some(p.leader)
    }

    pub(super) fn group_request(&mut self) -> u64 {
        self.idem_request += 1;
        super::idem::REQUEST_BASE + self.idem_request
    }

    /// Consumer `k`'s turn: fetch its committed offsets after a restart, else read a partition
    /// and commit now and then; restart now and then.
    pub(super) fn group_tick(&mut self, k: usize) {
        let now = self.now;
        let addr = GROUP_CONSUMER_BASE + k as Addr;
        let group = self.consumers[k].group;
        if self.rng.chance(1.0 / 30.0) {
            let c = &mut self.consumers[k];
            c.positions = None;
            c.commit = None;
            c.fetch = None;
            self.stats.consumer_restarts += 1;
            return;
        }
        if self.consumers[k].positions.is_none() {
            let busy = self.consumers[k]
                .fetch
                .as_ref()
                .is_some_and(|f| now.saturating_sub(f.sent_at) < COMMIT_TIMEOUT_MS);
            if busy {
                return;
            }
            let Some(to) = self.coordinator_of(group) else {
                return;
            };
            let request = self.group_request();
            let before = self.group_check.acked_of(group);
            self.consumers[k].fetch = Some(Fetch {
                request,
                sent_at: now,
                before,
            });
            let msg = ReplMsg::OffsetFetch {
                id: request,
                group: group.to_string(),
            };
            self.send_all(vec![(addr, BROKER_BASE + to, Payload::Repl(msg))]);
            return;
        }
        // A read every third turn or so: the commits matter here, the main consumer reads too.
        let read = self.rng.chance(0.3);
        if let Some((tp, leader)) = self.pick_partition().filter(|_| read) {
            let offset = self.consumers[k]
                .positions
                .as_ref()
                .and_then(|p| p.get(&tp))
                .copied()
                .unwrap_or(0);
            let msg = ReplMsg::ConsumerFetch {
                tp,
                offset,
                read_committed: false,
            };
            self.send_all(vec![(addr, BROKER_BASE + leader, Payload::Repl(msg))]);
        }
        let c = &self.consumers[k];
        let busy = c
            .commit
            .as_ref()
            .is_some_and(|c| now.saturating_sub(c.sent_at) < COMMIT_TIMEOUT_MS);
        if busy || now.saturating_sub(c.last_commit_at) < COMMIT_INTERVAL_MS {
            return;
        }
        let reference = self.checker.reference();
        let offsets: Vec<(String, i32, i64)> = c
            .positions
            .iter()
            .flatten()
            .filter_map(|(tp, o)| {
                let t = reference.topics.get(&tp.0)?;
                Some((t.name.clone(), tp.1, *o))
            })
            .collect();
        if offsets.is_empty() {
            return;
        }
        let Some(to) = self.coordinator_of(group) else {
            return;
        };
        let request = self.group_request();
        let c = &mut self.consumers[k];
        c.commits += 1;
        c.last_commit_at = now;
        c.commit = Some(Commit {
            request,
            number: c.commits,
            sent_at: now,
            partitions: offsets.iter().map(|(t, p, _)| (t.clone(), *p)).collect(),
        });
        let msg = ReplMsg::OffsetCommit {
            id: request,
            group: group.to_string(),
            offsets,
            metadata: c.commits.to_string(),
        };
        self.stats.commits_sent += 1;
        self.send_all(vec![(addr, BROKER_BASE + to, Payload::Repl(msg))]);
    }

    /// A message for consumer `k` from `from`.
    pub(super) fn deliver_group(&mut self, k: usize, from: Addr, msg: ReplMsg) {
        let group = self.consumers[k].group;
        match msg {
            ReplMsg::ConsumerRecords {
                tp, offset, result, ..
            } => {
                let Some(positions) = self.consumers[k].positions.as_mut() else {
                    return;
                };
                let pos = positions.entry(tp).or_insert(0);
                match result {
                    Ok(records) if *pos == offset => *pos += records.len() as i64,
                    Err(OFFSET_OUT_OF_RANGE) => *pos = 0,
                    _ => {}
                }
            }
            ReplMsg::OffsetCommitResponse { id, code, at } => {
                let c = &mut self.consumers[k];
                if c.commit.as_ref().is_none_or(|c| c.request != id) {
                    return;
                }
                let Some(commit) = c.commit.take() else {
                    return;
                };
                let (0, Some((shard, epoch, offset))) = (code, at) else {
                    return;
                };
                let Some(shard_tp) = self
                    .checker
                    .reference()
                    .topic_by_name(OFFSETS_TOPIC)
                    .map(|t| (t.topic_id, shard))
                else {
                    return;
                };
                let acked = Acked {
                    commit: commit.number,
                    epoch,
                    shard: shard_tp,
                    offset,
                };
                self.group_check.on_acked(group, &commit.partitions, acked);
                self.log(format!(
                    "group {group}: commit {} acknowledged by broker {} (shard {shard} epoch {epoch}, offset {offset})",
                    commit.number,
                    from - BROKER_BASE
                ));
            }
            ReplMsg::OffsetFetchResponse { id, result } => {
                let c = &mut self.consumers[k];
                if c.fetch.as_ref().is_none_or(|f| f.request != id) {
                    return;
                }
                let Some(fetch) = c.fetch.take() else {
                    return;
                };
                let Ok((_, epoch, offsets)) = result else {
                    return;
                };
                let answer: BTreeMap<(String, i32), Option<u64>> = offsets
                    .iter()
                    .map(|(t, p, _, m)| ((t.clone(), *p), m.parse().ok()))
                    .collect();
                let broker = from - BROKER_BASE;
                let newest = answer.values().flatten().max();
                self.log(format!(
                    "group {group}: OffsetFetch answered by broker {broker} (epoch {epoch}): {} offsets, newest commit {newest:?}",
                    answer.len()
                ));
                self.group_check.on_fetch(
                    &self.checker.repl,
                    broker,
                    epoch,
                    &fetch.before,
                    &answer,
                );
                let reference = self.checker.reference();
                let positions = offsets
                    .iter()
                    .filter(|(_, _, o, _)| *o >= 0)
                    .filter_map(|(t, p, o, _)| {
                        reference.topic_by_name(t).map(|t| ((t.topic_id, *p), *o))
                    })
                    .collect();
                self.consumers[k].positions = Some(positions);
            }
            _ => {}
        }
    }
}
