//! The group coordinator of a simulated broker: the real `group::Coordinator` (its OffsetCommit
//! and OffsetFetch, its `apply_written`, its `replay` of `__consumer_offsets` records) over the
//! simulated `__consumer_offsets` partitions this broker leads. What `group::driver` and
//! `group::shard` do around it is restated here (keep the two in step):
//! - which shard a group is, and whether this broker coordinates it: the real
//!   `shard::coordinator_shard` on the broker's image (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE);
//! - a change of the led shards (a failover) reloads the coordinator: as `committed_to_log_end`,
//!   it waits until every gained shard's HW reaches the log end it had when gained, at most
//!   `GAINED_SHARD_WAIT_MS`, then replays the led shards to their log end (`driver::load` through
//!   `internal_topic::replay_led`, as Kafka's loaders read). Meanwhile requests are answered
//!   COORDINATOR_LOAD_IN_PROGRESS (the real driver holds them in its inbox until the load is
//!   done);
//! - an OffsetCommit's records are appended to the shard as one batch, as `internal_topic::append`
//!   does (not on a follower; NOT_ENOUGH_REPLICAS below the minimum ISR, as
//!   `check_acks_all_append`, answered COORDINATOR_NOT_AVAILABLE; a full disk NOT_COORDINATOR),
//!   `apply_written` follows, and the answer waits until the HW passes them
//!   (`internal_topic::committed`): COORDINATOR_NOT_AVAILABLE after `offsets.commit.timeout.ms`,
//!   NOT_COORDINATOR once the shard is no longer led here. The `CommitBeforeReplicate` mutation
//!   answers at the append.
//!
//! No clock (time is an argument), no I/O.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice::group::offsets::FetchQuery;
use sluice::group::records::OFFSETS_TOPIC;
use sluice::group::{codes, Coordinator};
use sluice::metadata::MetadataImage;

use super::{Env, Out, ReplMsg, Replicas, Role, Tp};
use crate::net::{Addr, Payload};
use crate::world::Mutation;

/// How long a coordinator that gained shards waits for their HW (`shard::GAINED_SHARD_WAIT`).
pub const GAINED_SHARD_WAIT_MS: u64 = 5_000;
/// `offsets.commit.timeout.ms` (Kafka's default).
pub const OFFSETS_COMMIT_TIMEOUT_MS: u64 = 5_000;
/// Kafka's COORDINATOR_LOAD_IN_PROGRESS.
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
/// The OffsetCommit version the consumers send (v8: generation and member, no topic ids).
const COMMIT_VERSION: i16 = 8;

/// An OffsetCommit whose records wait for the HW.
struct PendingCommit {
    client: Addr,
    request: u64,
    shard: i32,
    /// The shard's leader epoch at the append, and the batch's offsets.
    epoch: i32,
    base: i64,
    last: i64,
    deadline: u64,
}

/// A loaded coordinator, or one loading (waiting for the gained shards' HW).
#[derive(Default)]
pub struct GroupHost {
    coordinator: Option<Coordinator>,
    /// The shards led in the image last seen.
    led: BTreeSet<i32>,
    /// Loading: each gained shard's log end at the gain, and the deadline.
    loading: Option<(BTreeMap<i32, i64>, u64)>,
    pending: Vec<PendingCommit>,
}

/// The partition of `__consumer_offsets` with index `shard` in `image`.
fn shard_tp(image: &MetadataImage, shard: i32) -> Option<Tp> {
    image.topic(OFFSETS_TOPIC).map(|t| (t.id, shard))
}

impl Replicas {
    /// Follows the image's leadership of `__consumer_offsets` (called at every sync and tick):
    /// a changed set of led shards starts a reload; a reload finishes once the gained shards'
    /// HW reached their log end at the gain, or at the deadline.
    pub fn sync_groups(&mut self, image: &MetadataImage, env: &mut Env, out: &mut Out) {
        let me = self.id;
        let led = if self.active {
            sluice::group::shard::led_shards(image, me, OFFSETS_TOPIC)
        } else {
            BTreeSet::new()
        };
        if led != self.groups.led {
            let gained: BTreeSet<i32> = led.difference(&self.groups.led).copied().collect();
            self.groups.led = led.clone();
            let ends = gained
                .iter()
                .filter_map(|&s| {
                    let tp = shard_tp(image, s)?;
                    Some((s, self.parts.get(&tp).map_or(0, |r| r.log_end())))
                })
                .collect();
            env.trace.push(format!(
                "broker {me} group coordinator reloads (led shards {led:?})"
            ));
            self.groups.coordinator = None;
            self.groups.loading = Some((ends, env.now + GAINED_SHARD_WAIT_MS));
        }
        let Some((ends, deadline)) = &self.groups.loading else {
            self.complete_commits(image, env, out);
            return;
        };
        let caught_up = ends.iter().all(|(&s, &end)| {
            shard_tp(image, s)
                .and_then(|tp| self.parts.get(&tp))
                .is_some_and(|r| r.high_watermark >= end)
        });
        if caught_up || env.now >= *deadline {
            let mut c = Coordinator::new(sluice::group::GroupConfig::default());
            for &s in &self.groups.led {
                let Some(r) = shard_tp(image, s).and_then(|tp| self.parts.get(&tp)) else {
                    continue;
                };
                for rec in &r.log {
                    if let Some(kv) = &rec.kv {
                        c.replay(&kv.0, kv.1.as_deref(), env.now as i64);
                    }
                }
            }
            self.groups.coordinator = Some(c);
            self.groups.loading = None;
            env.stats.coordinator_loads += 1;
        }
        self.complete_commits(image, env, out);
    }

    /// Answers the OffsetCommits whose records the HW passed, timed out, or whose shard is no
    /// longer led here.
    fn complete_commits(&mut self, image: &MetadataImage, env: &mut Env, out: &mut Out) {
        let now = env.now;
        let mut keep = Vec::new();
        for p in std::mem::take(&mut self.groups.pending) {
            let r = shard_tp(image, p.shard).and_then(|tp| self.parts.get(&tp));
            let leads = r
                .and_then(|r| r.leader())
                .is_some_and(|l| l.leader_epoch() == p.epoch);
            let code = match r {
                _ if !leads || !self.groups.led.contains(&p.shard) => codes::NOT_COORDINATOR,
                Some(r) if r.high_watermark > p.last => codes::NONE,
                _ if now >= p.deadline => codes::COORDINATOR_NOT_AVAILABLE,
                _ => {
                    keep.push(p);
                    continue;
                }
            };
            if let (codes::NONE, Some(r), Some(tp)) = (code, r, shard_tp(image, p.shard)) {
                // The acknowledged commit's records are promised as an acks=all batch's are.
                let records = &r.log[p.base as usize..=p.last as usize];
                env.check.on_acked(tp, p.epoch, p.base, records);
                env.stats.commits_acked += 1;
            }
            out.push((
                p.client,
                commit_answer(p.request, code, Some((p.shard, p.epoch, p.base))),
            ));
        }
        self.groups.pending = keep;
    }

    /// A group consumer's request (this broker's image decides whether it coordinates).
    pub fn on_group_message(
        &mut self,
        from: Addr,
        msg: ReplMsg,
        image: &MetadataImage,
        env: &mut Env,
    ) -> Out {
        let mut out = Vec::new();
        if !self.active {
            return out;
        }
        match msg {
            ReplMsg::OffsetCommit {
                id,
                group,
                offsets,
                metadata,
            } => self.offset_commit(
                (from, id),
                (&group, &offsets, &metadata),
                image,
                env,
                &mut out,
            ),
            ReplMsg::OffsetFetch { id, group } => {
                self.offset_fetch((from, id), &group, image, &mut out)
            }
            _ => {}
        }
        out
    }

    /// An OffsetCommit of `offsets` (topic, partition, offset) for `group`, with `metadata`.
    fn offset_commit(
        &mut self,
        (from, request): (Addr, u64),
        (group, offsets, metadata): (&str, &[(String, i32, i64)], &str),
        image: &MetadataImage,
        env: &mut Env,
        out: &mut Out,
    ) {
        let me = self.id;
        let shard = match sluice::group::shard::coordinator_shard(image, me, OFFSETS_TOPIC, group) {
            Ok(s) => s,
            Err(e) => return out.push((from, commit_answer(request, e.code(), None))),
        };
        let Some(c) = self.groups.coordinator.as_mut() else {
            return out.push((
                from,
                commit_answer(request, COORDINATOR_LOAD_IN_PROGRESS, None),
            ));
        };
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                offsets
                    .iter()
                    .map(|(t, p, o)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.clone())))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*o)
                                .with_committed_leader_epoch(-1)
                                .with_committed_metadata(Some(StrBytes::from_string(
                                    metadata.to_string(),
                                )))])
                    })
                    .collect(),
            );
        let (resp, fx) = c.commit(env.now as i64, COMMIT_VERSION, &req);
        let refused = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.error_code != 0)
            .map(|p| p.error_code);
        if let Some(code) = refused {
            return out.push((from, commit_answer(request, code, None)));
        }
        if fx.records.is_empty() {
            return out.push((from, commit_answer(request, codes::NONE, None)));
        }
        // `internal_topic::append`: the shard's leader, the minimum ISR, the disk.
        let Some(tp) = shard_tp(image, shard) else {
            return out.push((from, commit_answer(request, codes::NOT_COORDINATOR, None)));
        };
        let full = env.now < self.disk_full_until;
        let Some(r) = self.parts.get_mut(&tp) else {
            return out.push((from, commit_answer(request, codes::NOT_COORDINATOR, None)));
        };
        let Role::Leader(l) = &mut r.role else {
            return out.push((from, commit_answer(request, codes::NOT_COORDINATOR, None)));
        };
        if l.leader.check_acks_all_append().is_err() {
            return out.push((
                from,
                commit_answer(request, codes::COORDINATOR_NOT_AVAILABLE, None),
            ));
        }
        if full {
            env.stats.storage_errors += 1;
            return out.push((from, commit_answer(request, codes::NOT_COORDINATOR, None)));
        }
        let epoch = l.leader.leader_epoch();
        let kvs = fx
            .records
            .iter()
            .map(|cr| (cr.key.clone(), cr.value.clone()));
        let (base, end) = r.append_records(me, epoch, kvs, env);
        c.apply_written(fx.offsets, env.now as i64);
        env.stats.commits_written += 1;
        let Role::Leader(l) = &mut r.role else {
            return;
        };
        let effects = l.leader.on_append(end, env.now as i64);
        super::leading::perform(me, tp, r, effects, env, out);
        if env.mutation == Some(Mutation::CommitBeforeReplicate) {
            let records = &r.log[base as usize..end as usize];
            env.check.on_acked(tp, epoch, base, records);
            env.stats.commits_acked += 1;
            return out.push((
                from,
                commit_answer(request, codes::NONE, Some((shard, epoch, base))),
            ));
        }
        self.groups.pending.push(PendingCommit {
            client: from,
            request,
            shard,
            epoch,
            base,
            last: end - 1,
            deadline: env.now + OFFSETS_COMMIT_TIMEOUT_MS,
        });
        self.complete_commits(image, env, out);
    }

    /// An OffsetFetch of every committed offset of `group`: (topic, partition, offset,
    /// metadata), with the answering shard's leader epoch.
    fn offset_fetch(
        &mut self,
        (from, request): (Addr, u64),
        group: &str,
        image: &MetadataImage,
        out: &mut Out,
    ) {
        let me = self.id;
        let answer = |result| {
            Payload::Repl(ReplMsg::OffsetFetchResponse {
                id: request,
                result,
            })
        };
        let shard = match sluice::group::shard::coordinator_shard(image, me, OFFSETS_TOPIC, group) {
            Ok(s) => s,
            Err(e) => return out.push((from, answer(Err(e.code())))),
        };
        let Some(c) = self.groups.coordinator.as_ref() else {
            return out.push((from, answer(Err(COORDINATOR_LOAD_IN_PROGRESS))));
        };
        let epoch = shard_tp(image, shard)
            .and_then(|tp| self.parts.get(&tp))
            .and_then(|r| r.leader())
            .map(|l| l.leader_epoch());
        let Some(epoch) = epoch else {
            return out.push((from, answer(Err(codes::NOT_COORDINATOR))));
        };
        let query = FetchQuery {
            group_id: group.to_string(),
            topics: None,
            member_id: None,
            member_epoch: -1,
            require_stable: false,
        };
        let code = c.fetch_error(&query);
        if code != codes::NONE {
            return out.push((from, answer(Err(code))));
        }
        let offsets = c
            .fetch(&query)
            .into_iter()
            .flat_map(|t| {
                let name = t.name.0.to_string();
                t.partitions.into_iter().map(move |p| {
                    let metadata = p.metadata.map(|m| m.to_string()).unwrap_or_default();
                    (
                        name.clone(),
                        p.partition_index,
                        p.committed_offset,
                        metadata,
                    )
                })
            })
            .collect();
        out.push((from, answer(Ok((shard, epoch, offsets)))));
    }
}

/// An OffsetCommit's answer: its code and, when acknowledged, (shard, the shard's leader epoch,
/// the base offset of its records).
fn commit_answer(request: u64, code: i16, at: Option<(i32, i32, i64)>) -> Payload {
    Payload::Repl(ReplMsg::OffsetCommitResponse {
        id: request,
        code,
        at,
    })
}
