//! `SimVoter`: one controller voter as the simulation runs it: the real `QuorumNode` (raft-rs),
//! the real journal format on a `SimDisk`, the real `Controller`, and a synchronous copy of
//! `controller::driver`'s contract (that driver is a tokio task, so its rules are restated here,
//! event by event):
//! - commands are decided one at a time on the applied state, only while this voter leads and
//!   after its leadership's Bootstrap entry is applied; the next waits for the previous entry;
//! - a command's answer is sent once its entry is committed and applied (or at once without
//!   records); a leadership loss answers NOT_CONTROLLER;
//! - on leadership: `Controller::activate(now)`, then the Bootstrap entry;
//! - every step's output is handled in `QuorumNode`'s order: persist, send, apply;
//! - a `snapshot_due` is answered as `Quorum::drain` answers it with `ControllerSnapshots`: the
//!   controller's snapshot (`driver::snapshot_entry`) at its applied offset goes to `compact`,
//!   declined when nothing was applied since the last one or when `compact` refuses it;
//! - a committed snapshot replaces the controller (`driver::controller_from_snapshot`, activated
//!   when leading), as the driver's `apply` does;
//! - a failed write (a disk fault) stops the voter, as `Quorum::drain`'s error ends the real
//!   quorum task; a slow write holds back what follows it (the voter is busy meanwhile).
//!
//! Time is the voter's local clock (`now + clock_offset`), an argument of every call. No I/O.

use std::collections::VecDeque;

use sluice::controller::driver::{controller_from_snapshot, lift, snapshot_entry};
use sluice::controller::{
    bootstrap_records, Controller, ControllerSettings, CreatableTopic, CreatePartitionsTopic,
    Election, Outcome, BOOTSTRAP_FEATURES,
};
use sluice::metadata::entry::{self, EntryKind};
use sluice::metadata::MetadataRecord;
use sluice::quorum::node::{Committed, LeaderAndEpoch, NodeConfig, QuorumNode};
use sluice::quorum::storage::StorageError;

use crate::check::{entry_records, Checker};
use crate::disk::{SimDisk, TornWrite};
use crate::net::{Addr, Payload, Reply, Request};
use crate::rng::SimRng;
use crate::world::Mutation;

/// What a voter's event produced, for the world to deliver and check.
pub struct Ctx<'a> {
    /// Global simulated time (ms).
    pub now: u64,
    pub rng: &'a mut SimRng,
    pub checker: &'a mut Checker,
    pub mutation: Option<Mutation>,
    /// Messages to send: (from, to, payload).
    pub out: Vec<(Addr, Addr, Payload)>,
    /// Readable trace lines.
    pub trace: Vec<String>,
    /// Extra delay for every message in `out` (a slow write stalled the voter this long).
    pub out_delay: u64,
}

/// A command waiting for its entry.
struct Inflight {
    index: u64,
    term: u64,
    /// Who to answer, and the answer (None: the driver's own entry).
    reply_to: Option<(Addr, u64, Reply)>,
    /// Already acknowledged (the `AckBeforeCommit` mutation).
    acked: bool,
}

/// Most commands queued on one voter (more are refused, as a full channel would push back).
const MAX_QUEUE: usize = 64;

pub struct SimVoter {
    pub id: i32,
    voters: Vec<i32>,
    seed: u64,
    incarnation: u64,
    /// `None` while crashed.
    pub node: Option<QuorumNode>,
    pub disk: SimDisk,
    pub controller: Controller,
    pub applied: u64,
    /// Term of the entry (or snapshot) at `applied`.
    applied_term: u64,
    leading: bool,
    /// The epoch this voter last became the active controller in (the driver's `leading_epoch`).
    leading_epoch: Option<u64>,
    inflight: Option<Inflight>,
    queue: VecDeque<(Addr, u64, Request)>,
    commands: u64,
    pub clock_offset: i64,
    /// A crash armed to happen during the next write.
    pub crash_on_write: Option<TornWrite>,
    /// Stopped by a failed write since the world last looked (it schedules the restart).
    pub halted: bool,
    /// Busy with a slow write until then (global ms): input waits.
    pub busy_until: u64,
    ticks: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` (unbounded: never compacts).
    snapshot_after_bytes: u64,
    /// `ControllerSnapshots::last_offset`: the applied offset of the last snapshot given.
    last_snapshot_offset: u64,
    /// The recovered snapshot not yet handed out at start (it is loaded, not installed).
    start_snapshot: bool,
    /// The `StaleSnapshot` mutation: the state the previous snapshot request saw.
    stale: Option<bytes::Bytes>,
}

fn settings() -> ControllerSettings {
    ControllerSettings {
        default_replication_factor: 1,
        // The replicas' `min.insync.replicas` (replica.rs), which ELR needs to know.
        min_insync_replicas: 2,
        ..ControllerSettings::default()
    }
}

impl SimVoter {
    pub fn new(id: i32, voters: Vec<i32>, seed: u64, snapshot_after_bytes: u64) -> SimVoter {
        let mut v = SimVoter {
            id,
            voters,
            seed,
            incarnation: 0,
            node: None,
            disk: SimDisk::default(),
            controller: Controller::new(settings()),
            applied: 0,
            applied_term: 0,
            leading: false,
            leading_epoch: None,
            inflight: None,
            queue: VecDeque::new(),
            commands: 0,
            clock_offset: 0,
            crash_on_write: None,
            halted: false,
            busy_until: 0,
            ticks: 0,
            snapshot_after_bytes,
            last_snapshot_offset: 0,
            start_snapshot: false,
            stale: None,
        };
        v.start(0);
        v
    }

    pub fn local_now(&self, now: u64) -> u64 {
        (now as i64 + self.clock_offset).max(0) as u64
    }

    pub fn is_up(&self) -> bool {
        self.node.is_some()
    }

    /// (id, term) if this voter's raft node leads.
    pub fn leads(&self) -> Option<(i32, u64)> {
        let n = self.node.as_ref()?;
        n.is_leader().then(|| (self.id, n.leader().epoch))
    }

    pub fn leader_hint(&self) -> Option<i32> {
        self.node.as_ref().and_then(|n| n.leader().leader_id)
    }

    /// Opens the node on what the disk recovered (a fresh controller replays the log).
    fn start(&mut self, local_now: u64) {
        let rec = self.disk.recover();
        let mut cfg = NodeConfig::new(self.id, self.voters.clone());
        cfg.snapshot_after_bytes = self.snapshot_after_bytes;
        self.start_snapshot = rec.snapshot.is_some();
        self.last_snapshot_offset = 0;
        cfg.seed = self.seed ^ (self.incarnation.wrapping_mul(0x2545_F491_4F6C_DD1D));
        self.incarnation += 1;
        // The configuration is valid by construction; a failure is a simulator bug.
        self.node = QuorumNode::new(cfg, rec, local_now).ok();
        self.controller = Controller::new(settings());
        self.applied = 0;
        self.leading = false;
        self.leading_epoch = None;
    }

    pub fn crash(&mut self, ctx: &mut Ctx) {
        self.node = None;
        self.inflight = None;
        self.queue.clear();
        self.leading = false;
        self.leading_epoch = None;
        self.crash_on_write = None;
        self.busy_until = 0;
        ctx.checker.on_crash(self.id);
    }

    pub fn restart(&mut self, ctx: &mut Ctx) {
        let now = self.local_now(ctx.now);
        self.start(now);
        if self.node.is_none() {
            ctx.checker
                .violations
                .push(format!("voter {}: could not reopen its log", self.id));
        }
        self.settle(ctx);
    }

    pub fn tick(&mut self, ctx: &mut Ctx) {
        let now = self.local_now(ctx.now);
        let Some(node) = self.node.as_mut() else {
            return;
        };
        node.tick(now);
        self.ticks += 1;
        if self.leading
            && self.ticks.is_multiple_of(5)
            && !self
                .queue
                .iter()
                .any(|(_, _, r)| matches!(r, Request::Fence))
        {
            self.queue.push_back((self.id, 0, Request::Fence));
        }
        self.settle(ctx);
    }

    pub fn deliver(&mut self, from: Addr, payload: Payload, ctx: &mut Ctx) {
        let now = self.local_now(ctx.now);
        let Some(node) = self.node.as_mut() else {
            return;
        };
        match payload {
            Payload::Raft(m) => {
                // Refusals (stale or bad messages) are the node's own business, as in `Quorum`.
                let _ = node.step(m, now);
            }
            Payload::Request { id, request } => {
                if !self.leading {
                    let leader_id = node.leader().leader_id;
                    ctx.out.push((
                        self.id,
                        from,
                        Payload::Reply {
                            id,
                            reply: Reply::NotController { leader_id },
                        },
                    ));
                } else if self.queue.len() >= MAX_QUEUE {
                    ctx.out.push((
                        self.id,
                        from,
                        Payload::Reply {
                            id,
                            reply: Reply::Refused { code: 7 },
                        },
                    ));
                } else {
                    self.queue.push_back((from, id, request));
                }
            }
            Payload::Reply { .. } | Payload::Repl(_) => {}
        }
        self.settle(ctx);
    }

    /// Handles every output, then decides queued commands, until nothing is left to do.
    fn settle(&mut self, ctx: &mut Ctx) {
        loop {
            self.drain(ctx);
            if !self.pump(ctx) {
                return;
            }
        }
    }

    fn drain(&mut self, ctx: &mut Ctx) {
        loop {
            let Some(node) = self.node.as_mut() else {
                return;
            };
            let out = match node.ready() {
                Ok(Some(out)) => out,
                Ok(None) => return,
                Err(e) => {
                    ctx.checker
                        .violations
                        .push(format!("voter {}: quorum node failed: {e}", self.id));
                    self.crash(ctx);
                    return;
                }
            };
            if !out.persist.is_empty() {
                if let Some(how) = self.crash_on_write.take() {
                    self.disk.crash_during(&out.persist, how, ctx.rng);
                    ctx.trace.push(format!(
                        "voter {} crashed during a write ({how:?})",
                        self.id
                    ));
                    self.crash(ctx);
                    return;
                }
                match self.disk.write(&out.persist, ctx.now, ctx.rng) {
                    Ok(0) => {}
                    Ok(stall) => {
                        self.busy_until = self.busy_until.max(ctx.now) + stall;
                        ctx.out_delay = self.busy_until - ctx.now;
                    }
                    Err(StorageError::Io { .. })
                        if ctx.mutation == Some(Mutation::IgnoreWriteErrors) => {}
                    Err(e @ StorageError::Io { .. }) => {
                        ctx.trace
                            .push(format!("voter {} stops: write failed: {e}", self.id));
                        self.halted = true;
                        self.crash(ctx);
                        return;
                    }
                    Err(e) => {
                        ctx.checker
                            .violations
                            .push(format!("voter {}: write failed: {e}", self.id));
                        self.crash(ctx);
                        return;
                    }
                }
            }
            for (to, m) in out.messages {
                ctx.out.push((self.id, to, Payload::Raft(m)));
            }
            for c in out.committed {
                self.apply(c, ctx);
            }
            if let Some(l) = out.leader_change {
                self.on_leader_change(l, ctx);
            }
            if out.snapshot_due {
                self.snapshot(ctx);
            }
        }
    }

    /// `Quorum::drain` on `snapshot_due`, with `ControllerSnapshots` as the source.
    fn snapshot(&mut self, ctx: &mut Ctx) {
        let Some(node) = self.node.as_mut() else {
            return;
        };
        if self.applied <= self.last_snapshot_offset {
            node.snapshot_declined();
            return;
        }
        self.last_snapshot_offset = self.applied;
        let mut data = snapshot_entry(&self.controller);
        if ctx.mutation == Some(Mutation::StaleSnapshot) {
            // The state of the previous request, labelled with today's offset.
            data = self
                .stale
                .replace(data)
                .unwrap_or_else(|| snapshot_entry(&Controller::new(settings())));
        }
        let index = self.applied;
        match node.compact(index, data.clone()) {
            Ok(()) => {
                let term = self.applied_term;
                ctx.checker.snapshots.taken += 1;
                ctx.trace
                    .push(format!("voter {} compacts its log at {index}", self.id));
                let state = snapshot_state(&data);
                ctx.checker
                    .check_snapshot(self.id, index, term, &state, "taken");
            }
            Err(e) => {
                ctx.trace
                    .push(format!("voter {}: snapshot not taken: {e}", self.id));
                node.snapshot_declined();
            }
        }
    }

    /// A committed snapshot replaces the controller, as the driver's `apply` does.
    fn load_snapshot(&mut self, index: u64, term: u64, data: &[u8], ctx: &mut Ctx) {
        let records = entry_records(false, data);
        if ctx.mutation != Some(Mutation::SnapshotKeepsState) {
            self.controller = controller_from_snapshot(settings(), &records);
        }
        if self.leading {
            self.controller.activate(self.local_now(ctx.now) as i64);
        }
        self.applied = index;
        self.applied_term = term;
        let what = if std::mem::take(&mut self.start_snapshot) {
            ctx.checker.snapshots.loaded += 1;
            "loaded"
        } else {
            ctx.checker.snapshots.installed += 1;
            ctx.trace
                .push(format!("voter {} installs a snapshot at {index}", self.id));
            "installed"
        };
        ctx.checker
            .check_snapshot(self.id, index, term, self.controller.state(), what);
        ctx.checker
            .check_state(self.id, index, self.controller.state());
        // `Quorum::resolve`: a command at or before the snapshot is not known to be committed.
        if self.inflight.as_ref().is_some_and(|i| i.index <= index) {
            if let Some(Inflight {
                reply_to: Some((to, id, _)),
                acked: false,
                ..
            }) = self.inflight.take()
            {
                let reply = Reply::NotController {
                    leader_id: self.leader_hint(),
                };
                ctx.out.push((self.id, to, Payload::Reply { id, reply }));
            }
        }
    }

    fn apply(&mut self, c: Committed, ctx: &mut Ctx) {
        let (index, term, data) = match c {
            Committed::Entry { index, epoch, data } => (index, epoch, data),
            Committed::Snapshot { index, epoch, data } => {
                self.load_snapshot(index, epoch, &data, ctx);
                return;
            }
        };
        let first_to_commit = index > ctx.checker.last_index();
        ctx.checker.on_committed(self.id, index, term, &data);
        let has_mv = self
            .controller
            .state()
            .features
            .contains_key("metadata.version");
        let records = entry_records(has_mv, &data);
        if first_to_commit && !records.is_empty() {
            ctx.trace.push(format!(
                "commit {index} (epoch {term}): {}",
                summary(&records)
            ));
        }
        for r in records {
            ctx.checker
                .before_record(self.id, self.controller.state(), &r);
            self.controller.apply(&r);
        }
        self.applied = index;
        self.applied_term = term;
        ctx.checker
            .check_state(self.id, index, self.controller.state());
        self.resolve(index, term, ctx);
    }

    /// `Quorum::resolve`: the inflight command is answered once the log reaches its index.
    fn resolve(&mut self, index: u64, term: u64, ctx: &mut Ctx) {
        let Some(inf) = self.inflight.as_ref() else {
            return;
        };
        if inf.index > index {
            return;
        }
        let ok = inf.index == index && inf.term == term;
        let Some(inf) = self.inflight.take() else {
            return;
        };
        if ok && !inf.acked {
            let voter_term = self.node.as_ref().map_or(term, |n| n.leader().epoch);
            ctx.checker.on_ack(inf.index, inf.term, voter_term);
        }
        if let Some((to, id, reply)) = inf.reply_to {
            if inf.acked {
                return;
            }
            let reply = if ok {
                reply
            } else {
                Reply::NotController {
                    leader_id: self.leader_hint(),
                }
            };
            ctx.out.push((self.id, to, Payload::Reply { id, reply }));
        }
    }

    fn on_leader_change(&mut self, l: LeaderAndEpoch, ctx: &mut Ctx) {
        let leading = l.leader_id == Some(self.id);
        ctx.trace.push(format!(
            "voter {} sees leader {:?} in epoch {}",
            self.id, l.leader_id, l.epoch
        ));
        if leading && self.leading_epoch != Some(l.epoch) {
            // Led before in an older epoch, with no change seen in between: that epoch's command
            // is not this one's (the quorum answers it NotLeader when its index commits).
            self.fail_inflight_of_older_epoch(l, ctx);
            self.leading_epoch = Some(l.epoch);
            let disk = &self.disk;
            ctx.checker
                .on_became_leader(self.id, l.epoch, disk.snapshot_index(), &|i| {
                    disk.term_at(i)
                });
            let now = self.local_now(ctx.now) as i64;
            self.controller.activate(now);
            self.leading = true;
            let bootstrap =
                entry::encode(EntryKind::Bootstrap, &bootstrap_records(BOOTSTRAP_FEATURES));
            self.propose(bootstrap, None, ctx);
        } else if !leading {
            self.leading = false;
            if let Some(inf) = self.inflight.take() {
                if let (Some((to, id, _)), false) = (inf.reply_to, inf.acked) {
                    let reply = Reply::NotController {
                        leader_id: l.leader_id,
                    };
                    ctx.out.push((self.id, to, Payload::Reply { id, reply }));
                }
            }
            for (to, id, r) in std::mem::take(&mut self.queue) {
                if !matches!(r, Request::Fence) {
                    let reply = Reply::NotController {
                        leader_id: l.leader_id,
                    };
                    ctx.out.push((self.id, to, Payload::Reply { id, reply }));
                }
            }
        }
    }

    /// Answers NotController to a command still in flight from an epoch before `l`'s.
    fn fail_inflight_of_older_epoch(&mut self, l: LeaderAndEpoch, ctx: &mut Ctx) {
        if self.inflight.as_ref().is_some_and(|i| i.term < l.epoch) {
            if let Some(Inflight {
                reply_to: Some((to, id, _)),
                acked: false,
                ..
            }) = self.inflight.take()
            {
                let reply = Reply::NotController {
                    leader_id: l.leader_id,
                };
                ctx.out.push((self.id, to, Payload::Reply { id, reply }));
            }
        }
    }

    fn propose(&mut self, data: bytes::Bytes, reply_to: Option<(Addr, u64, Reply)>, ctx: &mut Ctx) {
        let Some(node) = self.node.as_mut() else {
            return;
        };
        match node.propose(data) {
            Ok((index, term)) => {
                let mut acked = false;
                if let (Some(Mutation::AckBeforeCommit), Some((to, id, reply))) =
                    (ctx.mutation, reply_to.as_ref())
                {
                    ctx.checker.on_ack(index, term, term);
                    ctx.out.push((
                        self.id,
                        *to,
                        Payload::Reply {
                            id: *id,
                            reply: reply.clone(),
                        },
                    ));
                    acked = true;
                }
                self.inflight = Some(Inflight {
                    index,
                    term,
                    reply_to,
                    acked,
                });
            }
            Err(_) => {
                if let Some((to, id, _)) = reply_to {
                    let reply = Reply::NotController {
                        leader_id: node.leader().leader_id,
                    };
                    ctx.out.push((self.id, to, Payload::Reply { id, reply }));
                }
            }
        }
    }

    /// Decides the next queued command if the driver may; true if it proposed something.
    fn pump(&mut self, ctx: &mut Ctx) -> bool {
        // The `DecideBeforeCatchUp` mutation does not wait for the driver's own entries (the
        // Bootstrap entry of a new leadership): it decides on a state that may lag the log.
        let waits = match &self.inflight {
            None => false,
            Some(i) => ctx.mutation != Some(Mutation::DecideBeforeCatchUp) || i.reply_to.is_some(),
        };
        if !self.leading || waits || self.node.is_none() {
            return false;
        }
        while let Some((from, id, request)) = self.queue.pop_front() {
            let unclean = matches!(request, Request::ElectLeaders { unclean: true });
            let (records, reply) = self.decide(request, ctx.now);
            if records.is_empty() {
                if !matches!(reply, Reply::Done) || from != self.id {
                    ctx.out.push((self.id, from, Payload::Reply { id, reply }));
                }
                continue;
            }
            let data = entry::encode(EntryKind::Records, &records);
            let reply_to = (from != self.id).then_some((from, id, reply));
            self.propose(data, reply_to, ctx);
            if let (true, Some(inf)) = (unclean, self.inflight.as_ref()) {
                ctx.checker.allow_unclean(inf.index, inf.term);
            }
            return true;
        }
        false
    }

    fn decide(&mut self, request: Request, now: u64) -> (Vec<MetadataRecord>, Reply) {
        self.commands += 1;
        let now = self.local_now(now) as i64;
        let seed = self.seed ^ self.commands.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let next_offset = self.applied as i64 + 1;
        let c = &mut self.controller;
        let refused = |code: i16| Reply::Refused { code };
        match request {
            Request::Register(r) => {
                let Outcome { records, answer } = lift(c.register_broker(&r, now, next_offset));
                let reply = match answer {
                    Ok(broker_epoch) => Reply::Registered { broker_epoch },
                    Err(e) => refused(e.code()),
                };
                (records, reply)
            }
            Request::Heartbeat(h) => {
                let Outcome { records, answer } = lift(c.heartbeat(&h, now, next_offset));
                let reply = match answer {
                    Ok(a) => Reply::Heartbeat(a),
                    Err(e) => refused(e.code()),
                };
                (records, reply)
            }
            Request::CreateTopic {
                name,
                partitions,
                replication_factor,
            } => {
                let t = CreatableTopic {
                    name,
                    num_partitions: partitions,
                    replication_factor,
                    assignments: Vec::new(),
                    configs: Vec::new(),
                };
                let o = c.create_topics(&[t], seed);
                let reply = first_result(o.answer.iter().map(|(_, r)| r.as_ref().err()));
                (o.records, reply)
            }
            Request::CreatePartitions { name, count } => {
                let t = CreatePartitionsTopic {
                    name,
                    count,
                    assignments: None,
                };
                let o = c.create_partitions(&[t], seed);
                let reply = first_result(o.answer.iter().map(|(_, r)| r.as_ref().err()));
                (o.records, reply)
            }
            Request::DeleteTopic { name } => {
                let o = c.delete_topics(&[name]);
                let reply = first_result(o.answer.iter().map(|(_, r)| r.as_ref().err()));
                (o.records, reply)
            }
            Request::ElectLeaders { unclean } => {
                let e = if unclean {
                    Election::Unclean
                } else {
                    Election::Preferred
                };
                (c.elect_leaders(e, None).records, Reply::Done)
            }
            Request::AlterPartition(r) => match c.alter_partition(&r) {
                Ok(Outcome { records, answer }) => (records, Reply::AlterPartition(answer)),
                Err(e) => (Vec::new(), refused(e.code())),
            },
            Request::Fence => (c.tick(now), Reply::Done),
        }
    }
}

/// The state a snapshot's bytes hold (the driver's load: a replay of its records).
fn snapshot_state(data: &[u8]) -> sluice::controller::ControllerState {
    controller_from_snapshot(settings(), &entry_records(false, data))
        .state()
        .clone()
}

fn first_result<'a>(
    mut errors: impl Iterator<Item = Option<&'a sluice::controller::ControllerError>>,
) -> Reply {
    match errors.next().flatten() {
        Some(e) => Reply::Refused { code: e.code() },
        None => Reply::Done,
    }
}

/// A one-line summary of an entry's records for the trace ("RegisterBroker 2, PartitionChange
/// x3 (leaders 1, -1)").
fn summary(records: &[MetadataRecord]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut leaders = Vec::new();
    let mut changes = 0;
    for r in records {
        match r {
            MetadataRecord::RegisterBroker(b) => {
                parts.push(format!("RegisterBroker {}", b.broker_id))
            }
            MetadataRecord::FenceBroker { id, .. } => parts.push(format!("FenceBroker {id}")),
            MetadataRecord::UnfenceBroker { id, .. } => parts.push(format!("UnfenceBroker {id}")),
            MetadataRecord::Topic { name, .. } => parts.push(format!("Topic {name}")),
            MetadataRecord::RemoveTopic { .. } => parts.push("RemoveTopic".into()),
            MetadataRecord::Partition(p) => {
                changes += 1;
                leaders.push(p.leader);
            }
            MetadataRecord::PartitionChange(c) => {
                changes += 1;
                if c.leader != sluice::metadata::NO_LEADER_CHANGE {
                    leaders.push(c.leader);
                }
            }
            MetadataRecord::FeatureLevel { .. } => {
                if !parts.iter().any(|p| p == "FeatureLevel") {
                    parts.push("FeatureLevel".into());
                }
            }
            _ => parts.push("other".into()),
        }
    }
    if changes > 0 {
        parts.push(format!("partitions x{changes} (new leaders {leaders:?})"));
    }
    parts.join(", ")
}
