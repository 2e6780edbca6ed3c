//! `Replicas`: a simulated broker's replica role (issue 17's pure core under faults). Per
//! partition the broker is a replica of: an in-memory log of records (leader epoch, record id;
//! the index is the offset), its `LeaderEpochCache`, its high watermark and, on the leader, the
//! real `PartitionLeader` with the acks=all produces waiting on it (`DelayedProduce`).
//!
//! The hosting follows the metadata image as the real one does: a leader epoch this broker leads
//! -> `PartitionLeader::become_leader` at its log end (or `on_leader_and_isr` when it already
//! leads); another leader -> follower, fetching from it with its fetch offset and last fetched
//! epoch; the leader answers records up to its log end and its HW, or a diverging epoch
//! (`truncation::diverging_epoch`) on which the follower truncates (`offset_truncation_state`).
//! Effects: AlterPartition goes to the controller through the voter's command path (one request
//! per partition outstanding, sent again after NOT_CONTROLLER or 5 s without an answer, as the
//! production client does); the committed change comes back through the image.
//!
//! Disk model: a process crash keeps the logs (page cache); a power loss keeps only what the last
//! flush covered (`flushed`), the HW checkpoint likewise. A restarted broker hosts nothing until it
//! has registered again and its image holds its registration (Kafka's catch-up before hosting).
//! A full disk (`disk_full_until`) refuses appends as the real log does (nothing of the batch
//! stays): a produce is answered KAFKA_STORAGE_ERROR, a follower's fetched records are not
//! written (it refetches, and falls behind), a flush covers nothing new.
//!
//! Mutations (test-only, `world::Mutation`): `AcksAtAppend` answers acks=all at the append;
//! `HwFromLeader` serves the leader's log end as its HW (to followers, consumers, waiting produces).
//! No clock (time is an argument), no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sluice::controller::AlterPartitionRequest;
use sluice::metadata::{MetadataImage, PartitionRegistration};
use sluice::replica::replication::acks::DelayedProduce;
use sluice::replica::replication::leader::{
    AlterPartitionError, AlterPartitionProposal, AlterPartitionResponse, FetchRejected,
    FollowerFetch, LeaderAndIsr, LeaderConfig,
};
use sluice::replica::replication::truncation::{
    check_current_leader_epoch, diverging_epoch, offset_truncation_state, truncation_request,
    TruncationRequest,
};
use sluice::replica::replication::{LeaderEpochCache, PartitionLeader};

use crate::net::{Addr, Payload, Reply, Request, BROKER_BASE};

use crate::repl_check::ReplChecker;
use crate::world::Mutation;
use producers::ProducerLog;
use sluice::replica::producer_state::{AppendOrigin, ProducerCheck};

mod groups;
mod leading;
mod markers;
mod msg;
pub mod producers;
#[cfg(test)]
mod tests;
pub mod txns;
use leading::{answer, answer_all, complete_waiting, perform, served_hw};
pub use msg::*;

/// Replication's settings in the simulation: `replica.lag.time.max.ms` shortened from Kafka's 30 s
/// so that shrinks and expands happen within a run; every topic has `min.insync.replicas=2`.
pub const LEADER_CONFIG: LeaderConfig = LeaderConfig {
    replica_lag_time_max_ms: 10_000,
    min_insync_replicas: 2,
};
/// A produce's `timeout.ms` (Kafka's producer default `request.timeout.ms` is 30 s).
pub const PRODUCE_TIMEOUT_MS: i32 = 10_000;
/// An unanswered fetch is sent again after this long.
const RETRY_MS: u64 = 1_000;
/// An unanswered AlterPartition is sent again after this long: the production client's
/// `REQUEST_DEADLINE` (`replica::alter_partition`). As there, one request per partition is
/// outstanding and a resend replaces it: the earlier request's answer is never read (the real
/// channel dropped its connection), and the controller, deciding in arrival order, has decided
/// the earlier copy before the resend. So the answer the leader acts on is the last copy's, and
/// no copy of the proposal is left to be decided after it. Resending every second and reading
/// any copy's answer (as the simulator once did) broke that: seed 3102 had ten copies queued at
/// a slow controller, the leader took the first one's INELIGIBLE_REPLICA (Kafka's "not applied,
/// and never will be") and moved its HW past the follower, and a later copy added the follower
/// to the ISR once it was unfenced; elected, it lacked acknowledged records.
const ALTER_DEADLINE_MS: u64 = 5_000;
/// Most records in one fetch answer.
const MAX_FETCH_RECORDS: usize = 64;
/// Request ids of the replica role start here (below: the broker's heartbeats).
pub const REPLICA_ID_BASE: u64 = 1 << 40;

struct Waiting {
    produce: DelayedProduce,
    client: Addr,
    request: u64,
    base: i64,
    records: Vec<Rec>,
}

struct LeaderRole {
    leader: PartitionLeader,
    waiting: Vec<Waiting>,
    /// The in-flight proposal must be (re)sent at the next tick.
    alter_due: bool,
    /// When the in-flight proposal was last sent.
    alter_sent_at: Option<u64>,
}

enum Role {
    None,
    Leader(Box<LeaderRole>),
    Follower { leader: i32 },
}

/// One partition replica on one broker.
pub struct ReplicaLog {
    pub log: Vec<Rec>,
    pub cache: LeaderEpochCache,
    pub high_watermark: i64,
    /// Records covered by the last flush (a power loss keeps these).
    pub flushed: i64,
    hw_checkpoint: i64,
    /// The image's registration last acted on (leader epoch, partition epoch).
    known: (i32, i32),
    role: Role,
    /// The real producer state of this log, its snapshots at segment rolls.
    pub producers: ProducerLog,
}

impl ReplicaLog {
    fn new() -> ReplicaLog {
        ReplicaLog {
            log: Vec::new(),
            cache: LeaderEpochCache::new(),
            high_watermark: 0,
            flushed: 0,
            hw_checkpoint: 0,
            known: (-1, -1),
            role: Role::None,
            producers: ProducerLog::default(),
        }
    }

    pub fn log_end(&self) -> i64 {
        self.log.len() as i64
    }

    /// Truncates the log to `offset` (the epoch cache, HW and flushed end with it), and rebuilds
    /// the producer state from a snapshot and a replay as `Partition::truncate_to`.
    fn truncate_to(&mut self, offset: i64, now: u64, stats: &mut ReplStats) {
        let keep = offset.clamp(0, self.log_end());
        if keep == self.log_end() {
            self.cache.truncate_from_end(keep);
            return;
        }
        self.log.truncate(keep as usize);
        self.cache.truncate_from_end(keep);
        self.high_watermark = self.high_watermark.min(keep);
        self.flushed = self.flushed.min(keep);
        self.producers.rebuild(&self.log, now as i64, stats);
    }

    /// A coordinator's records appended by its leader as one batch at `epoch` (what
    /// `internal_topic::append` writes): the epoch cache and the producer state take it as a
    /// client batch's. Returns the batch's base offset and the log end after it.
    fn append_records(
        &mut self,
        me: i32,
        epoch: i32,
        records: impl ExactSizeIterator<Item = KeyValue>,
        env: &mut Env,
    ) -> (i64, i64) {
        let base = self.log_end();
        let count = records.len() as i32;
        let recs: Vec<Rec> = records
            .enumerate()
            .map(|(i, kv)| Rec {
                epoch,
                id: 0,
                batch: BatchOf::plain(count, i as i32),
                kv: Some(Arc::new(kv)),
            })
            .collect();
        if self.cache.assign(epoch, base).is_err() {
            env.check
                .violation(format!("broker {me}: invalid epoch {epoch} at {base}"));
        }
        self.producers
            .append(&mut self.log, &recs, env.now as i64, env.stats);
        (base, self.log_end())
    }

    pub fn leader(&self) -> Option<&PartitionLeader> {
        match &self.role {
            Role::Leader(l) => Some(&l.leader),
            _ => None,
        }
    }
}

/// What a replica-role call produced: messages to send (from this broker).
pub type Out = Vec<(Addr, Payload)>;

/// The replica role of one broker.
pub struct Replicas {
    pub id: i32,
    pub parts: BTreeMap<Tp, ReplicaLog>,
    /// Hosts partitions (false from a restart until the image holds the new registration).
    pub active: bool,
    /// The image offset last synced.
    synced: Option<u64>,
    /// Per source broker: the outstanding fetch (id, sent at).
    fetching: BTreeMap<i32, (u64, u64)>,
    /// The outstanding AlterPartition request of each partition: id -> (partition, proposal).
    alters: BTreeMap<u64, (Tp, AlterPartitionProposal)>,
    next_id: u64,
    /// The disk is full until then (simulated ms): appends fail.
    pub disk_full_until: u64,
    /// The group coordinator of the `__consumer_offsets` shards led here.
    groups: groups::GroupHost,
    /// The transaction coordinator of the `__transaction_state` shards led here.
    txns: txns::TxnHost,
}

fn registration(p: &PartitionRegistration) -> LeaderAndIsr {
    LeaderAndIsr {
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        replicas: p.replicas.clone(),
        isr: p.isr.clone(),
    }
}

/// Everything a replica-role call reads besides the broker.
pub struct Env<'a> {
    pub now: u64,
    pub mutation: Option<Mutation>,
    pub check: &'a mut ReplChecker,
    pub stats: &'a mut ReplStats,
    /// The broker's epoch (AlterPartition needs it) and its controller hint.
    pub broker_epoch: Option<i64>,
    pub controller: Addr,
    /// Fetch answers end at a batch boundary (`Schedule::Third`; the older schedules cut them at
    /// `MAX_FETCH_RECORDS` as they were found with).
    pub whole_batches: bool,
    /// Readable trace lines.
    pub trace: Vec<String>,
    /// The last producer id handed out (the controller's producer id blocks, shared by every
    /// coordinator: `Broker::producer_ids`).
    pub producer_ids: &'a mut i64,
    /// Partitions of marker jobs a coordinator skipped as gone: no such topic or partition in its
    /// image (`markers::route`'s `gone`, Kafka's deleted-topic rule). The world exempts the
    /// controller's topic of that name, if there is one (`World::note_marker_skipped`).
    pub markers_skipped: Vec<(String, i32)>,
}

impl Replicas {
    pub fn new(id: i32) -> Replicas {
        Replicas {
            id,
            parts: BTreeMap::new(),
            active: true,
            synced: None,
            fetching: BTreeMap::new(),
            alters: BTreeMap::new(),
            next_id: REPLICA_ID_BASE,
            disk_full_until: 0,
            groups: groups::GroupHost::default(),
            txns: txns::TxnHost::default(),
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A crash: every in-memory role is lost (waiting produces are never answered); with
    /// `power_loss` each log keeps only its flushed prefix. Hosting resumes at `sync` once
    /// `active` is set again.
    pub fn crash(&mut self, power_loss: bool, env: &mut Env) {
        self.active = false;
        self.synced = None;
        self.fetching.clear();
        self.alters.clear();
        // The coordinator's state and its waiting commits are lost (never answered).
        self.groups = groups::GroupHost::default();
        self.txns = txns::TxnHost::default();
        if power_loss {
            env.stats.power_losses += 1;
        }
        for (tp, r) in self.parts.iter_mut() {
            r.role = Role::None;
            r.known = (-1, -1);
            let end = r.log_end();
            if power_loss {
                if r.flushed < end {
                    env.check.on_power_loss(self.id, *tp, r.flushed, end);
                }
                let keep = r.flushed;
                r.producers.power_loss();
                r.truncate_to(keep, env.now, env.stats);
                r.high_watermark = r.hw_checkpoint.min(r.log_end());
            }
            if r.log_end() == end {
                // The restarted broker opens the log: the producer state from its newest snapshot
                // and a replay (a truncation above did it already).
                r.producers.rebuild(&r.log, env.now as i64, env.stats);
            }
        }
    }

    /// A flush: every log durable up to its end, the HW checkpointed (nothing on a full disk).
    pub fn flush(&mut self, now: u64) {
        if now < self.disk_full_until {
            return;
        }
        for r in self.parts.values_mut() {
            r.flushed = r.log_end();
            r.hw_checkpoint = r.high_watermark;
            r.producers.flush();
        }
    }

    /// Follows the metadata image (when its offset moved since the last call).
    pub fn sync(&mut self, image: &MetadataImage, env: &mut Env) -> Out {
        let mut out = Vec::new();
        if !self.active || self.synced == Some(image.offset) {
            return out;
        }
        self.synced = Some(image.offset);
        let me = self.id;
        let mut hosted = BTreeSet::new();
        for t in image.topics() {
            for (&i, p) in &t.partitions {
                if !p.replicas.contains(&me) {
                    continue;
                }
                let tp = (t.id, i);
                hosted.insert(tp);
                let ineligible: BTreeSet<i32> = p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|b| {
                        image
                            .broker(*b)
                            .is_none_or(|r| r.fenced || r.in_controlled_shutdown)
                    })
                    .collect();
                let r = self.parts.entry(tp).or_insert_with(ReplicaLog::new);
                let reg_key = (p.leader_epoch, p.partition_epoch);
                if reg_key == r.known {
                    if let Role::Leader(l) = &mut r.role {
                        l.leader.set_ineligible_brokers(ineligible);
                    }
                    continue;
                }
                r.known = reg_key;
                let now = env.now as i64;
                if p.leader == me {
                    let effects = match &mut r.role {
                        Role::Leader(l) => {
                            l.leader.set_ineligible_brokers(ineligible);
                            l.leader.on_leader_and_isr(&registration(p), now)
                        }
                        _ => {
                            let (mut leader, effects) = PartitionLeader::become_leader(
                                me,
                                LEADER_CONFIG,
                                &registration(p),
                                r.log_end(),
                                r.high_watermark,
                                now,
                            );
                            leader.set_ineligible_brokers(ineligible);
                            env.stats.leader_changes += 1;
                            env.trace.push(format!(
                                "broker {me} leads {}-{i} in epoch {} (log end {}, HW {}, ISR {:?})",
                                t.name,
                                p.leader_epoch,
                                r.log_end(),
                                r.high_watermark,
                                p.isr
                            ));
                            env.check.on_become_leader(me, tp, p.leader_epoch, &r.log);
                            r.role = Role::Leader(Box::new(LeaderRole {
                                leader,
                                waiting: Vec::new(),
                                alter_due: false,
                                alter_sent_at: None,
                            }));
                            effects
                        }
                    };
                    perform(me, tp, r, effects, env, &mut out);
                } else {
                    let was = std::mem::replace(&mut r.role, Role::None);
                    if let Role::Leader(l) = was {
                        answer_all(l.waiting, NOT_LEADER_OR_FOLLOWER, env, &mut out);
                    }
                    if p.leader >= 0 {
                        // A log with records but no epochs (none here) would truncate to its HW.
                        if let TruncationRequest::TruncateToHighWatermark(hw) =
                            truncation_request(&r.cache, r.high_watermark)
                        {
                            r.truncate_to(hw, env.now, env.stats);
                        }
                        r.role = Role::Follower { leader: p.leader };
                    }
                }
            }
        }
        let gone: Vec<Tp> = self
            .parts
            .keys()
            .filter(|tp| !hosted.contains(tp))
            .copied()
            .collect();
        for tp in gone {
            if let Some(r) = self.parts.remove(&tp) {
                if let Role::Leader(l) = r.role {
                    answer_all(l.waiting, NOT_LEADER_OR_FOLLOWER, env, &mut out);
                }
            }
        }
        out
    }

    /// The periodic work: ISR expiration, produce timeouts, AlterPartition sends and retries,
    /// follower fetches (one request per source broker).
    pub fn tick(&mut self, env: &mut Env) -> Out {
        let mut out = Vec::new();
        if !self.active {
            return out;
        }
        let now = env.now;
        let me = self.id;
        let mut alters = Vec::new();
        let mut fetches: BTreeMap<i32, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, r) in self.parts.iter_mut() {
            match &mut r.role {
                Role::Leader(l) => {
                    let effects = l.leader.maybe_shrink_isr(now as i64);
                    perform(me, *tp, r, effects, env, &mut out);
                    let Role::Leader(l) = &mut r.role else {
                        continue;
                    };
                    complete_waiting(me, *tp, l, &r.log, env, &mut out);
                    if let Some(inf) = l.leader.in_flight() {
                        let stale = l
                            .alter_sent_at
                            .is_none_or(|t| now.saturating_sub(t) >= ALTER_DEADLINE_MS);
                        if l.alter_due || stale {
                            l.alter_due = false;
                            l.alter_sent_at = Some(now);
                            alters.push((*tp, inf.proposal.clone()));
                        }
                    }
                }
                Role::Follower { leader } => {
                    fetches.entry(*leader).or_default().push(FetchPartition {
                        tp: *tp,
                        current_leader_epoch: r.known.0,
                        fetch_offset: r.log_end(),
                        last_fetched_epoch: r.cache.latest_epoch(),
                    });
                }
                Role::None => {}
            }
        }
        if let Some(broker_epoch) = env.broker_epoch {
            for (tp, proposal) in alters {
                let id = self.next_id();
                let request = AlterPartitionRequest {
                    broker_id: me,
                    broker_epoch,
                    topic_id: tp.0,
                    partition: tp.1,
                    leader_epoch: proposal.leader_epoch,
                    partition_epoch: proposal.partition_epoch,
                    new_isr: proposal
                        .new_isr
                        .iter()
                        .map(|&id| sluice::controller::IsrMember::unchecked(id))
                        .collect(),
                    leader_recovery_state: 0,
                };
                // The earlier request of this partition is abandoned: its answer is not read.
                self.alters.retain(|_, (t, _)| *t != tp);
                self.alters.insert(id, (tp, proposal));
                let request = Request::AlterPartition(request);
                out.push((env.controller, Payload::Request { id, request }));
            }
        }
        // Forget requests whose proposal is no longer in flight (answered, or replaced).
        let parts = &self.parts;
        self.alters.retain(|_, (tp, p)| {
            parts
                .get(tp)
                .and_then(|r| r.leader())
                .and_then(|l| l.in_flight())
                .is_some_and(|i| i.proposal == *p)
        });
        for (leader, partitions) in fetches {
            if let Some(&(_, sent)) = self.fetching.get(&leader) {
                if now.saturating_sub(sent) < RETRY_MS {
                    continue;
                }
            }
            let id = self.next_id();
            self.fetching.insert(leader, (id, now));
            out.push((
                BROKER_BASE + leader,
                Payload::Repl(ReplMsg::Fetch { id, partitions }),
            ));
        }
        out
    }

    /// A message from `from` for this broker's replica role.
    pub fn on_message(&mut self, from: Addr, msg: ReplMsg, env: &mut Env) -> Out {
        let mut out = Vec::new();
        if !self.active {
            return out;
        }
        match msg {
            ReplMsg::Fetch { id, partitions } => {
                let answers = partitions
                    .into_iter()
                    .map(|f| {
                        let result = self.serve_fetch(from - BROKER_BASE, &f, env, &mut out);
                        (f, result)
                    })
                    .collect();
                out.push((from, Payload::Repl(ReplMsg::FetchResponse { id, answers })));
            }
            ReplMsg::FetchResponse { id, answers } => {
                let leader = from - BROKER_BASE;
                // Only the outstanding fetch's answer is read, as the real fetcher reads the one
                // request on its connection (a request given up on goes with its connection).
                // Another answer (to a fetch given up on after `RETRY_MS`, or a network duplicate)
                // may describe a log this one no longer is, though its fetch offset matches
                // again: seed 9241's follower truncated, fetched the new leader's record back to
                // the same log end, then took a second copy of the diverging-epoch answer and
                // truncated that record away, which the leader had counted in its HW.
                if self.fetching.get(&leader).is_none_or(|(i, _)| *i != id) {
                    return out;
                }
                self.fetching.remove(&leader);
                for (f, result) in answers {
                    self.on_fetch_answer(leader, f, result, env);
                }
            }
            ReplMsg::Produce {
                id,
                tp,
                ids,
                acks,
                idempotent,
            } => self.produce(from, (id, acks, idempotent), tp, ids, env, &mut out),
            ReplMsg::ConsumerFetch {
                tp,
                offset,
                read_committed,
            } => {
                let (result, aborted) = match self.parts.get(&tp) {
                    None => (Err(NOT_LEADER_OR_FOLLOWER), Vec::new()),
                    Some(r) => markers::consumer_read(self.id, tp, r, offset, read_committed, env),
                };
                let epoch = self
                    .parts
                    .get(&tp)
                    .and_then(|r| r.leader())
                    .map_or(-1, |l| l.leader_epoch());
                out.push((
                    from,
                    Payload::Repl(ReplMsg::ConsumerRecords {
                        tp,
                        epoch,
                        offset,
                        result,
                        aborted,
                    }),
                ));
            }
            ReplMsg::WriteTxnMarker {
                id,
                tp,
                topic: _,
                producer_id,
                producer_epoch,
                coordinator_epoch,
                control,
            } => self.write_txn_marker(
                (from, id),
                tp,
                (producer_id, producer_epoch, coordinator_epoch, control),
                env,
                &mut out,
            ),
            _ => {}
        }
        out
    }

    fn serve_fetch(
        &mut self,
        follower: i32,
        f: &FetchPartition,
        env: &mut Env,
        out: &mut Out,
    ) -> FetchResult {
        let me = self.id;
        let Some(r) = self.parts.get_mut(&f.tp) else {
            return FetchResult::Error(NOT_LEADER_OR_FOLLOWER);
        };
        let Role::Leader(l) = &mut r.role else {
            return FetchResult::Error(NOT_LEADER_OR_FOLLOWER);
        };
        let leo = r.log.len() as i64;
        if let Err(e) =
            check_current_leader_epoch(Some(f.current_leader_epoch), l.leader.leader_epoch())
        {
            return FetchResult::Error(match e {
                sluice::replica::replication::truncation::LeaderEpochMismatch::Fenced {
                    ..
                } => FENCED_LEADER_EPOCH,
                _ => UNKNOWN_LEADER_EPOCH,
            });
        }
        if let Some(last) = f.last_fetched_epoch {
            match diverging_epoch(&r.cache, leo, f.fetch_offset, last) {
                Err(_) => return FetchResult::Error(OFFSET_OUT_OF_RANGE),
                Ok(Some(d)) => return FetchResult::Diverging(d),
                Ok(None) => {}
            }
        }
        if f.fetch_offset > leo {
            return FetchResult::Error(OFFSET_OUT_OF_RANGE);
        }
        let fetch = FollowerFetch {
            replica_id: follower,
            current_leader_epoch: Some(f.current_leader_epoch),
            fetch_offset: f.fetch_offset,
            log_start_offset: 0,
        };
        let effects = match l.leader.on_follower_fetch(fetch, env.now as i64) {
            Ok(effects) => effects,
            Err(FetchRejected::FencedLeaderEpoch { .. }) => {
                return FetchResult::Error(FENCED_LEADER_EPOCH)
            }
            Err(FetchRejected::UnknownLeaderEpoch { .. }) => {
                return FetchResult::Error(UNKNOWN_LEADER_EPOCH)
            }
            Err(FetchRejected::NotAssignedReplica(_)) => {
                return FetchResult::Error(NOT_LEADER_OR_FOLLOWER)
            }
        };
        perform(me, f.tp, r, effects, env, out);
        let Some(l) = r.leader() else {
            return FetchResult::Error(NOT_LEADER_OR_FOLLOWER);
        };
        let base = f.fetch_offset;
        let mut end = leo.min(base + MAX_FETCH_RECORDS as i64);
        if env.whole_batches {
            // An answer holds whole batches, as the real log's reads.
            while end < leo && r.log[end as usize].batch.index != 0 {
                end += 1;
            }
        }
        FetchResult::Records {
            base,
            records: r.log[base as usize..end as usize].to_vec(),
            high_watermark: served_hw(l, env.mutation),
        }
    }

    fn on_fetch_answer(
        &mut self,
        leader: i32,
        f: FetchPartition,
        result: FetchResult,
        env: &mut Env,
    ) {
        let me = self.id;
        let Some(r) = self.parts.get_mut(&f.tp) else {
            return;
        };
        let current = matches!(r.role, Role::Follower { leader: l } if l == leader);
        if !current || r.known.0 != f.current_leader_epoch || r.log_end() != f.fetch_offset {
            return;
        }
        match result {
            FetchResult::Records {
                base,
                records,
                high_watermark,
            } => {
                if env.now < self.disk_full_until && !records.is_empty() {
                    env.stats.storage_errors += 1;
                    return;
                }
                for (i, rec) in records.iter().enumerate() {
                    let offset = base + i as i64;
                    if r.cache.assign(rec.epoch, offset).is_err() {
                        env.check.violation(format!(
                            "broker {me}: invalid epoch {} at offset {offset}",
                            rec.epoch
                        ));
                    }
                }
                r.producers
                    .append(&mut r.log, &records, env.now as i64, env.stats);
                let hw = high_watermark.min(r.log_end());
                if hw > r.high_watermark {
                    let from = r.high_watermark;
                    r.high_watermark = hw;
                    env.check
                        .on_high_watermark(me, f.tp, f.current_leader_epoch, &r.log, from, hw);
                }
            }
            FetchResult::Diverging(d) => {
                let state = offset_truncation_state(&r.cache, r.log_end(), r.high_watermark, d);
                if state.offset < r.log_end() {
                    env.stats.truncations += 1;
                    env.trace.push(format!(
                        "broker {me} truncates {}-{} from {} to {} (diverging epoch {d:?}, HW {})",
                        f.tp.0,
                        f.tp.1,
                        r.log_end(),
                        state.offset,
                        r.high_watermark
                    ));
                    r.truncate_to(state.offset, env.now, env.stats);
                } else {
                    // Nothing to cut from the log, but the epoch cache may end with an epoch that
                    // wrote nothing here (this broker led it briefly): cut, as the fetcher's
                    // `truncate_as_follower_of` does at any truncation point, or this follower
                    // fetches with that epoch and is told to diverge forever (seed 10 of
                    // `Schedule::Fourth` once: a partition's ISR stayed at its leader through the
                    // quiet period, its markers retried NOT_ENOUGH_REPLICAS to the end).
                    r.cache.truncate_from_end(r.log_end());
                }
            }
            FetchResult::Error(OFFSET_OUT_OF_RANGE) => {
                let hw = r.high_watermark;
                r.truncate_to(hw, env.now, env.stats);
            }
            FetchResult::Error(_) => {}
        }
    }

    /// A produce `(request id, acks, producer fields)` of `ids` to `tp`.
    fn produce(
        &mut self,
        from: Addr,
        (id, acks, idempotent): (u64, i16, Option<Idempotent>),
        tp: Tp,
        ids: Vec<u64>,
        env: &mut Env,
        out: &mut Out,
    ) {
        let me = self.id;
        env.stats.produces += 1;
        let Some(r) = self.parts.get_mut(&tp) else {
            out.push((from, answer(id, NOT_LEADER_OR_FOLLOWER)));
            return;
        };
        let Role::Leader(l) = &mut r.role else {
            out.push((from, answer(id, NOT_LEADER_OR_FOLLOWER)));
            return;
        };
        if acks == -1 && l.leader.check_acks_all_append().is_err() {
            env.stats.not_enough_replicas += 1;
            out.push((from, answer(id, NOT_ENOUGH_REPLICAS)));
            return;
        }
        let epoch = l.leader.leader_epoch();
        let base = r.log.len() as i64;
        let count = ids.len() as i32;
        let batch = |index| match idempotent {
            Some(p) => BatchOf {
                producer_id: p.producer_id,
                producer_epoch: p.producer_epoch,
                base_sequence: p.base_sequence,
                count,
                index,
                transactional: p.transactional,
                control: None,
            },
            None => BatchOf::plain(count, index),
        };
        let records: Vec<Rec> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| Rec {
                epoch,
                id,
                batch: batch(i as i32),
                kv: None,
            })
            .collect();
        if idempotent.is_some() {
            env.stats.idempotent_sends += 1;
            let header = producers::header(base, &records[0], env.now as i64);
            match r.producers.state.check(&header, AppendOrigin::Client) {
                Err(e) => {
                    env.stats.out_of_order += 1;
                    out.push((from, answer(id, e.code())));
                    return;
                }
                Ok(ProducerCheck::Duplicate {
                    base_offset,
                    last_offset,
                }) if env.mutation != Some(Mutation::SkipDedupe) => {
                    // The real produce path answers the original batch's offsets; acks=all waits
                    // for the HW to pass them.
                    env.stats.duplicates += 1;
                    if acks == 1 {
                        out.push((from, answer(id, 0)));
                        return;
                    }
                    let records = r.log[base_offset as usize..=last_offset as usize].to_vec();
                    l.waiting.push(Waiting {
                        produce: DelayedProduce::new(
                            last_offset,
                            env.now as i64,
                            PRODUCE_TIMEOUT_MS,
                        ),
                        client: from,
                        request: id,
                        base: base_offset,
                        records,
                    });
                    complete_waiting(me, tp, l, &r.log, env, out);
                    return;
                }
                Ok(_) => {}
            }
        }
        if env.now < self.disk_full_until {
            env.stats.storage_errors += 1;
            out.push((from, answer(id, KAFKA_STORAGE_ERROR)));
            return;
        }
        if r.cache.assign(epoch, base).is_err() {
            env.check
                .violation(format!("broker {me}: invalid epoch {epoch} at {base}"));
        }
        r.producers
            .append(&mut r.log, &records, env.now as i64, env.stats);
        let end = r.log.len() as i64;
        let waiting = Waiting {
            produce: DelayedProduce::new(end - 1, env.now as i64, PRODUCE_TIMEOUT_MS),
            client: from,
            request: id,
            base,
            records,
        };
        if acks == 1 {
            // Answered at the append, as Kafka: nothing is promised (a leader change may
            // truncate it); a consumer that reads it below the HW makes it a promise.
            env.stats.acks1_answered += 1;
            out.push((from, answer(id, 0)));
        } else if env.mutation == Some(Mutation::AcksAtAppend) {
            env.check
                .on_acked(tp, epoch, waiting.base, &waiting.records);
            env.stats.acked_batches += 1;
            out.push((from, answer(id, 0)));
        } else {
            l.waiting.push(waiting);
        }
        let effects = l.leader.on_append(end, env.now as i64);
        perform(me, tp, r, effects, env, out);
    }

    /// The controller answered AlterPartition request `id`.
    pub fn on_alter_reply(&mut self, id: u64, reply: Reply, env: &mut Env) -> Out {
        let mut out = Vec::new();
        let Some((tp, proposal)) = self.alters.remove(&id) else {
            return out;
        };
        let me = self.id;
        let Some(r) = self.parts.get_mut(&tp) else {
            return out;
        };
        let response = match reply {
            Reply::AlterPartition(a) => match a.error {
                None => AlterPartitionResponse::Committed {
                    leader_epoch: a.leader_epoch,
                    partition_epoch: a.partition_epoch,
                    isr: a.isr,
                },
                Some(e) => AlterPartitionResponse::Error(
                    AlterPartitionError::from_code(e.code())
                        .unwrap_or(AlterPartitionError::Other(0)),
                ),
            },
            Reply::Refused { code } => AlterPartitionResponse::Error(
                AlterPartitionError::from_code(code).unwrap_or(AlterPartitionError::Other(code)),
            ),
            // Not the controller: sent again at the next tick (to the new hint).
            _ => {
                if let Role::Leader(l) = &mut r.role {
                    l.alter_due = true;
                }
                return out;
            }
        };
        let Role::Leader(l) = &mut r.role else {
            return out;
        };
        let effects = l
            .leader
            .on_alter_partition_response(&proposal, response, env.now as i64);
        perform(me, tp, r, effects, env, &mut out);
        out
    }
}
