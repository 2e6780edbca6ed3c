//! `QuorumNode`: a pure, deterministic driver around raft-rs's `RawNode` for one voter of the
//! controller quorum.
//!
//! Inputs: `tick(now_ms)`, `step(message, now_ms)`, `propose(bytes)`, `compact(index, bytes)`
//! (a snapshot the state machine made). Output: `ready()` returns one `Output` per step, which
//! the caller handles strictly in this order: (1) make `persist` durable, (2) send `messages`,
//! (3) apply `committed`. Raft requires entries and hard state on disk before the messages that
//! announce them; the node already tells `RawNode` they are persisted, so nothing of a step may
//! become visible outside before step (1) finished (an fsync failure must stop the node).
//!
//! Time: Kafka's `controller.quorum.election.timeout.ms` is 10 raft ticks, so a tick is a tenth
//! of it (100 ms by default) and the leader's heartbeat is one tick. A follower that hears no
//! leader, and a candidate that does not win, wait a randomized `[1, 2)` election timeouts, as
//! Kafka's candidates do. raft-rs draws that number from `rand::thread_rng()`; to stay
//! deterministic the driver overwrites it after every call that may have drawn it, with a value
//! from its own seeded generator (`NodeConfig::seed`), so a seed replays one schedule exactly.
//! `controller.quorum.fetch.timeout.ms` is how recent a voter's last contact must be to be
//! reported as fetching (raft-rs has one timer; its leader steps down after an election timeout
//! without a majority, `check_quorum`, where Kafka waits 1.5 fetch timeouts).
//!
//! Ids: raft-rs reserves id 0, Kafka's node ids start at 0: raft id = node id + 1.
//! Performs no I/O; owned by one task, not thread-safe.

use std::collections::BTreeMap;

use bytes::Bytes;
use raft::prelude::{Entry, EntryType, HardState, Message, MessageType, Snapshot};
use raft::{RawNode, StateRole};

use super::memory::MemoryLog;
use super::resign::{choose_transferee, Peer, Resign};
use super::storage::Recovered;

/// Kafka's node id of a voter.
pub type NodeId = i32;

/// raft-rs's id for a Kafka node id (raft-rs reserves 0).
pub fn raft_id(node: NodeId) -> u64 {
    node as u64 + 1
}

/// Kafka's node id for a raft-rs id (`None` for raft's "no node", 0).
pub fn node_id(raft: u64) -> Option<NodeId> {
    raft.checked_sub(1).and_then(|n| NodeId::try_from(n).ok())
}

/// Ticks in one election timeout; the heartbeat is one tick.
pub const TICKS_PER_ELECTION_TIMEOUT: u64 = 10;
/// Most raft ticks replayed by one `tick` call (a process paused for minutes does not spin).
const MAX_TICKS_PER_CALL: u64 = 100;

/// Static configuration of one voter.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `node.id`
    pub id: NodeId,
    /// Ids of `controller.quorum.voters` (this node among them).
    pub voters: Vec<NodeId>,
    /// `controller.quorum.election.timeout.ms` (Kafka's default 1000).
    pub election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms` (Kafka's default 2000).
    pub fetch_timeout_ms: u64,
    /// `metadata.log.max.record.bytes.between.snapshots` (Kafka's default 20 MiB): applied
    /// entry bytes after which a snapshot is asked for.
    pub snapshot_after_bytes: u64,
    /// Seed of the randomized election timeouts.
    pub seed: u64,
}

impl NodeConfig {
    /// Kafka's defaults for `id` among `voters`.
    pub fn new(id: NodeId, voters: Vec<NodeId>) -> NodeConfig {
        NodeConfig {
            id,
            voters,
            election_timeout_ms: 1000,
            fetch_timeout_ms: 2000,
            snapshot_after_bytes: 20 * 1024 * 1024,
            seed: id as u64,
        }
    }

    /// Milliseconds per raft tick.
    pub fn tick_ms(&self) -> u64 {
        (self.election_timeout_ms / TICKS_PER_ELECTION_TIMEOUT).max(1)
    }
}

/// The leader as this node knows it, and the epoch (raft term, Kafka's leader epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaderAndEpoch {
    pub leader_id: Option<NodeId>,
    pub epoch: u64,
}

/// What must be made durable before the step's messages are sent. With `snapshot`, the journal
/// is rewritten to hold exactly `hard_state` and `entries` (all entries after the snapshot);
/// without it, `entries` and then `hard_state` are appended.
#[derive(Debug, Default, Clone)]
pub struct Persist {
    pub snapshot: Option<Snapshot>,
    pub entries: Vec<Entry>,
    pub hard_state: Option<HardState>,
}

impl Persist {
    pub fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.entries.is_empty() && self.hard_state.is_none()
    }
}

/// A committed item for the state machine, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// One proposal, at its log index (Kafka: the metadata offset) and epoch.
    Entry { index: u64, epoch: u64, data: Bytes },
    /// Replace the whole state with this snapshot (at start, or a snapshot from the leader
    /// when this node was too far behind).
    Snapshot { index: u64, epoch: u64, data: Bytes },
}

/// One step's effects (see the module doc for the order).
#[derive(Debug, Default)]
pub struct Output {
    pub persist: Persist,
    /// To a voter (Kafka node id), raft-rs messages.
    pub messages: Vec<(NodeId, Message)>,
    pub committed: Vec<Committed>,
    pub leader_change: Option<LeaderAndEpoch>,
    /// The state machine should hand a snapshot to `compact` (enough bytes applied since).
    pub snapshot_due: bool,
}

impl Output {
    fn is_empty(&self) -> bool {
        self.persist.is_empty()
            && self.messages.is_empty()
            && self.committed.is_empty()
            && self.leader_change.is_none()
            && !self.snapshot_due
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeError {
    #[error("invalid quorum configuration: {0}")]
    Config(String),
    #[error("message from {from} rejected: {reason}")]
    BadMessage { from: u64, reason: String },
    #[error("raft log state is inconsistent: {0}")]
    Log(String),
}

/// Why a proposal was not appended.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ProposeError {
    /// Kafka's NOT_CONTROLLER: propose on the leader (if known).
    #[error("not the active controller (leader: {leader_id:?})")]
    NotLeader { leader_id: Option<NodeId> },
    #[error("empty proposals are not allowed")]
    Empty,
    #[error("proposal dropped by raft: {0}")]
    Dropped(String),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CompactError {
    #[error("snapshot index {index} is not in (snapshot {snapshot}, applied {applied}]")]
    OutOfRange {
        index: u64,
        snapshot: u64,
        applied: u64,
    },
}

/// What this node knows of one voter (DescribeQuorum's ReplicaState).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterStatus {
    pub id: NodeId,
    /// Next offset after the voter's log as the leader knows it (own log on the node itself).
    pub log_end_offset: Option<u64>,
    pub last_fetch_ms: Option<u64>,
    pub last_caught_up_ms: Option<u64>,
    /// Contact within `controller.quorum.fetch.timeout.ms`.
    pub fetching: bool,
}

/// DescribeQuorum-style status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    pub leader: LeaderAndEpoch,
    pub is_leader: bool,
    /// Next offset after the last committed entry (Kafka's high watermark is exclusive).
    pub high_watermark: u64,
    pub voters: Vec<VoterStatus>,
    /// The node's clock when the status was taken.
    pub now_ms: u64,
    /// Whether so many other voters are known gone (the transport reported them unreachable and
    /// nothing was heard from them since) that the voters left cannot form a majority: no leader
    /// can be elected or stay until some come back. See [`QuorumNode::majority_unreachable`].
    pub majority_unreachable: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct PeerTimes {
    last_fetch_ms: Option<u64>,
    last_caught_up_ms: Option<u64>,
    /// When the transport last reported the voter unreachable.
    unreachable_ms: Option<u64>,
    /// When a message from the voter last arrived (any message, on any role).
    last_heard_ms: Option<u64>,
}

/// splitmix64: a tiny seeded generator (quality is ample for picking timeouts).
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The driver. See the module doc.
pub struct QuorumNode {
    raw: RawNode<MemoryLog>,
    cfg: NodeConfig,
    rng: u64,
    /// Time of the last raft tick.
    last_tick_ms: u64,
    now_ms: u64,
    /// (term, role, raft's timeout) after the last call: a change means raft reset its timer.
    timer_signature: (u64, StateRole, usize),
    leader: LeaderAndEpoch,
    applied: u64,
    bytes_since_snapshot: u64,
    /// `bytes_since_snapshot` when the state machine last declined a snapshot: ask again only
    /// after more entries were applied (so a declined request does not repeat in one drain).
    declined_at_bytes: Option<u64>,
    snapshot_requested: bool,
    /// A snapshot (at start) the state machine must load before any entry.
    start_snapshot: Option<Committed>,
    /// Own compaction waiting to be persisted by the next `ready`.
    compacted: bool,
    peers: BTreeMap<NodeId, PeerTimes>,
}

impl std::fmt::Debug for QuorumNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumNode")
            .field("id", &self.cfg.id)
            .field("leader", &self.leader)
            .field("applied", &self.applied)
            .finish()
    }
}

impl QuorumNode {
    /// A voter over the state recovered from its storage, at time `now_ms`.
    pub fn new(
        cfg: NodeConfig,
        recovered: Recovered,
        now_ms: u64,
    ) -> Result<QuorumNode, NodeError> {
        if !cfg.voters.contains(&cfg.id) {
            return Err(NodeError::Config(format!(
                "node {} is not among the voters {:?}",
                cfg.id, cfg.voters
            )));
        }
        if cfg.voters.iter().any(|&v| v < 0) {
            return Err(NodeError::Config("voter ids must be >= 0".into()));
        }
        let voters: Vec<u64> = cfg.voters.iter().map(|&v| raft_id(v)).collect();
        let mut log = MemoryLog::new(&voters);
        let mut start_snapshot = None;
        let mut applied = 0;
        if let Some(mut snap) = recovered.snapshot {
            // The voter set is the configuration's (no reconfiguration yet).
            snap.mut_metadata()
                .set_conf_state(raft::prelude::ConfState::from((voters.clone(), Vec::new())));
            let m = snap.get_metadata();
            applied = m.index;
            start_snapshot = Some(Committed::Snapshot {
                index: m.index,
                epoch: m.term,
                data: snap.data.clone(),
            });
            log.apply_snapshot(snap);
        }
        log.append(&recovered.entries)
            .map_err(|e| NodeError::Log(e.to_string()))?;
        let mut hs = recovered.hard_state;
        hs.commit = hs.commit.max(applied).min(log.last_index());
        log.set_hard_state(hs);
        let rcfg = raft::Config {
            id: raft_id(cfg.id),
            election_tick: TICKS_PER_ELECTION_TIMEOUT as usize,
            heartbeat_tick: 1,
            min_election_tick: TICKS_PER_ELECTION_TIMEOUT as usize,
            max_election_tick: 2 * TICKS_PER_ELECTION_TIMEOUT as usize,
            applied,
            max_size_per_msg: 1024 * 1024,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let raw =
            RawNode::new(&rcfg, log, &logger).map_err(|e| NodeError::Config(e.to_string()))?;
        let mut node = QuorumNode {
            raw,
            rng: cfg.seed ^ 0x5151_1CE0_0000_0000,
            cfg,
            last_tick_ms: now_ms,
            now_ms,
            timer_signature: (0, StateRole::Follower, 0),
            leader: LeaderAndEpoch::default(),
            applied,
            bytes_since_snapshot: 0,
            declined_at_bytes: None,
            snapshot_requested: false,
            start_snapshot,
            compacted: false,
            peers: BTreeMap::new(),
        };
        node.redraw_timeout();
        if node.cfg.voters == [node.cfg.id] {
            // A lone voter is its own majority: lead now rather than after a timeout.
            node.raw
                .campaign()
                .map_err(|e| NodeError::Config(e.to_string()))?;
            node.fix_timeout();
        }
        Ok(node)
    }

    fn signature(&self) -> (u64, StateRole, usize) {
        let r = &self.raw.raft;
        (r.term, r.state, r.randomized_election_timeout())
    }

    /// Replaces raft-rs's thread_rng draw with one from the seeded generator.
    fn redraw_timeout(&mut self) {
        let span = TICKS_PER_ELECTION_TIMEOUT;
        let t = TICKS_PER_ELECTION_TIMEOUT + next_random(&mut self.rng) % span;
        self.raw.raft.set_randomized_election_timeout(t as usize);
        self.timer_signature = self.signature();
    }

    /// Redraws the timeout if raft reset its timer during the last call.
    fn fix_timeout(&mut self) {
        if self.signature() != self.timer_signature {
            self.redraw_timeout();
        }
    }

    /// Advances raft's clock to `now_ms` (whole ticks; time never goes backwards).
    pub fn tick(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        let tick_ms = self.cfg.tick_ms();
        let due = self.now_ms.saturating_sub(self.last_tick_ms) / tick_ms;
        for _ in 0..due.min(MAX_TICKS_PER_CALL) {
            self.raw.tick();
            self.fix_timeout();
        }
        self.last_tick_ms += due * tick_ms;
    }

    /// Milliseconds until the next tick is due (for the driver's timer).
    pub fn next_tick_in_ms(&self) -> u64 {
        (self.last_tick_ms + self.cfg.tick_ms()).saturating_sub(self.now_ms)
    }

    /// A message from another voter. Messages that only a node may give itself (proposals,
    /// local timers) or from outside the voter set are rejected.
    pub fn step(&mut self, msg: Message, now_ms: u64) -> Result<(), NodeError> {
        self.now_ms = self.now_ms.max(now_ms);
        let from = msg.from;
        let bad = |reason: &str| NodeError::BadMessage {
            from,
            reason: reason.to_string(),
        };
        let Some(peer) = node_id(from).filter(|p| self.cfg.voters.contains(p) && *p != self.cfg.id)
        else {
            return Err(bad("sender is not another voter"));
        };
        if msg.to != raft_id(self.cfg.id) {
            return Err(bad("addressed to another node"));
        }
        // Heard: alive, whatever the message turns out to be.
        self.peers.entry(peer).or_default().last_heard_ms = Some(self.now_ms);
        if raft::raw_node::is_local_msg(msg.get_msg_type())
            || msg.get_msg_type() == MessageType::MsgPropose
        {
            return Err(bad("local message type"));
        }
        // raft-rs trusts a heartbeat's commit index and aborts the process if it is past the
        // local log (a lost log tail, or a forged message): refuse it instead; the leader
        // repairs this log with appends.
        if msg.get_msg_type() == MessageType::MsgHeartbeat
            && msg.commit > self.raw.raft.raft_log.last_index()
        {
            return Err(bad("heartbeat commit index beyond this voter's log"));
        }
        let is_response = matches!(
            msg.get_msg_type(),
            MessageType::MsgAppendResponse | MessageType::MsgHeartbeatResponse
        );
        let result = self.raw.step(msg);
        self.fix_timeout();
        result.map_err(|e| bad(&e.to_string()))?;
        if is_response && self.raw.raft.state == StateRole::Leader {
            let last = self.raw.raft.raft_log.last_index();
            let matched = self.raw.raft.prs().get(from).map(|p| p.matched);
            let times = self.peers.entry(peer).or_default();
            times.last_fetch_ms = Some(self.now_ms);
            if matched.is_some_and(|m| m >= last) {
                times.last_caught_up_ms = Some(self.now_ms);
            }
        }
        Ok(())
    }

    /// Appends `data` as a new entry if this node leads; returns its index. It is committed
    /// when a `Committed::Entry` with this index and the returned epoch comes out of `ready`.
    pub fn propose(&mut self, data: Bytes) -> Result<(u64, u64), ProposeError> {
        if self.raw.raft.state != StateRole::Leader {
            return Err(ProposeError::NotLeader {
                leader_id: self.leader_id(),
            });
        }
        if data.is_empty() {
            return Err(ProposeError::Empty);
        }
        self.raw
            .propose(Vec::new(), data.to_vec())
            .map_err(|e| ProposeError::Dropped(e.to_string()))?;
        Ok((self.raw.raft.raft_log.last_index(), self.raw.raft.term))
    }

    /// The state machine could not take the snapshot `snapshot_due` asked for (it had not
    /// applied a new entry yet): ask again once more entries were handed out.
    pub fn snapshot_declined(&mut self) {
        self.snapshot_requested = false;
        self.declined_at_bytes = Some(self.bytes_since_snapshot);
    }

    /// Installs a snapshot of the state machine taken after applying entry `index`; entries up to
    /// it are dropped from the log (persisted by the next `ready`).
    pub fn compact(&mut self, index: u64, data: Bytes) -> Result<(), CompactError> {
        let store = self.raw.store();
        let snapshot = store.snapshot_index();
        let term = store.term_of(index);
        let (Some(term), true) = (term, index > snapshot && index <= self.applied) else {
            return Err(CompactError::OutOfRange {
                index,
                snapshot,
                applied: self.applied,
            });
        };
        let mut snap = Snapshot::default();
        snap.set_data(data);
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(
            raft::Storage::initial_state(store)
                .map(|s| s.conf_state)
                .unwrap_or_default(),
        );
        self.raw.mut_store().apply_snapshot(snap);
        self.compacted = true;
        self.snapshot_requested = false;
        self.bytes_since_snapshot = 0;
        self.declined_at_bytes = None;
        Ok(())
    }

    fn leader_id(&self) -> Option<NodeId> {
        node_id(self.raw.raft.leader_id)
    }

    fn push_committed(&mut self, entries: Vec<Entry>, out: &mut Output) {
        for e in entries {
            if e.index <= self.applied {
                continue;
            }
            self.applied = e.index;
            if e.get_entry_type() == EntryType::EntryNormal && !e.data.is_empty() {
                self.bytes_since_snapshot += e.data.len() as u64;
                out.committed.push(Committed::Entry {
                    index: e.index,
                    epoch: e.term,
                    data: e.data,
                });
            }
        }
    }

    /// The effects of everything since the last call, or `None` when there are none.
    pub fn ready(&mut self) -> Result<Option<Output>, NodeError> {
        let mut out = Output::default();
        if let Some(s) = self.start_snapshot.take() {
            out.committed.push(s);
        }
        if self.raw.has_ready() {
            let mut rd = self.raw.ready();
            out.messages.extend(self.addressed(rd.take_messages()));
            if !rd.snapshot().is_empty() {
                let snap = rd.snapshot().clone();
                let m = snap.get_metadata();
                out.committed.push(Committed::Snapshot {
                    index: m.index,
                    epoch: m.term,
                    data: snap.data.clone(),
                });
                self.applied = self.applied.max(m.index);
                self.bytes_since_snapshot = 0;
                self.raw.mut_store().apply_snapshot(snap.clone());
                out.persist.snapshot = Some(snap);
            }
            let committed = rd.take_committed_entries();
            self.push_committed(committed, &mut out);
            let entries = rd.take_entries();
            self.raw
                .mut_store()
                .append(&entries)
                .map_err(|e| NodeError::Log(e.to_string()))?;
            out.persist.entries = entries;
            if let Some(hs) = rd.hs() {
                self.raw.mut_store().set_hard_state(hs.clone());
                out.persist.hard_state = Some(hs.clone());
            }
            out.messages
                .extend(self.addressed(rd.take_persisted_messages()));
            let mut light = self.raw.advance(rd);
            if let Some(commit) = light.commit_index() {
                let mut hs = self.raw.store().hard_state().clone();
                hs.commit = commit;
                self.raw.mut_store().set_hard_state(hs.clone());
                out.persist.hard_state = Some(hs);
            }
            out.messages.extend(self.addressed(light.take_messages()));
            let committed = light.take_committed_entries();
            self.push_committed(committed, &mut out);
            self.raw.advance_apply_to(self.applied);
            // raft-rs's leader sends nothing more to a peer it sent a snapshot to until the
            // snapshot is reported; a lost one (or a receiver that crashed before answering)
            // would leave that peer behind for good. Reported as sent: the leader probes at the
            // next heartbeat answer and sends the snapshot again if the peer lacks it.
            let snapshot_sent: Vec<NodeId> = out
                .messages
                .iter()
                .filter(|(_, m)| m.get_msg_type() == MessageType::MsgSnapshot)
                .map(|(to, _)| *to)
                .collect();
            for to in snapshot_sent {
                self.raw
                    .report_snapshot(raft_id(to), raft::SnapshotStatus::Finish);
            }
        }
        if self.compacted || out.persist.snapshot.is_some() {
            self.compacted = false;
            let store = self.raw.store();
            out.persist.snapshot = Some(store.snapshot_ref().clone());
            out.persist.entries = store.entries().to_vec();
            out.persist.hard_state = Some(store.hard_state().clone());
        }
        let now = LeaderAndEpoch {
            leader_id: self.leader_id(),
            epoch: self.raw.raft.term,
        };
        if now != self.leader {
            self.leader = now;
            out.leader_change = Some(now);
        }
        if !self.snapshot_requested
            && self.bytes_since_snapshot >= self.cfg.snapshot_after_bytes
            && self
                .declined_at_bytes
                .is_none_or(|b| self.bytes_since_snapshot > b)
        {
            self.snapshot_requested = true;
            out.snapshot_due = true;
        }
        self.fix_timeout();
        Ok((!out.is_empty()).then_some(out))
    }

    fn addressed(&self, msgs: Vec<Message>) -> Vec<(NodeId, Message)> {
        msgs.into_iter()
            .filter_map(|m| node_id(m.to).map(|to| (to, m)))
            .collect()
    }

    /// The transport could not reach `peer`: raft-rs probes it again instead of streaming.
    pub fn report_unreachable(&mut self, peer: NodeId, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
        if self.cfg.voters.contains(&peer) && peer != self.cfg.id {
            self.raw.report_unreachable(raft_id(peer));
            self.peers.entry(peer).or_default().unreachable_ms = Some(self.now_ms);
        }
    }

    /// A clean stop of the leader: hands leadership to the voter `resign::choose_transferee`
    /// picks among those heard within an election timeout (raft-rs's leadership transfer; the
    /// new leader shows in a later `leader_change`). Proposals are refused meanwhile; raft-rs
    /// abandons the transfer after an election timeout and this node leads on.
    pub fn resign(&mut self) -> Resign {
        if !self.is_leader() {
            return Resign::NotLeader;
        }
        let prs = self.raw.raft.prs();
        let others: Vec<Peer> = self
            .cfg
            .voters
            .iter()
            .filter(|&&v| v != self.cfg.id)
            .map(|&id| {
                let times = self.peers.get(&id).copied().unwrap_or_default();
                Peer {
                    id,
                    matched: prs.get(raft_id(id)).map_or(0, |p| p.matched),
                    last_contact_ms: times.last_fetch_ms,
                    unreachable_ms: times.unreachable_ms,
                }
            })
            .collect();
        if others.is_empty() {
            return Resign::Alone;
        }
        match choose_transferee(&others, self.now_ms, self.cfg.election_timeout_ms) {
            None => Resign::NoTransferee,
            Some(to) => {
                let epoch = self.raw.raft.term;
                self.raw.transfer_leader(raft_id(to));
                self.fix_timeout();
                Resign::Transferring { to, epoch }
            }
        }
    }

    pub fn leader(&self) -> LeaderAndEpoch {
        LeaderAndEpoch {
            leader_id: self.leader_id(),
            epoch: self.raw.raft.term,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    pub fn id(&self) -> NodeId {
        self.cfg.id
    }

    /// Index of the last entry handed out in `committed`.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Whether the voters not known gone are fewer than a majority. A voter is known gone when
    /// the transport reported it unreachable (a refused connection, or its connection to this
    /// node ended: a stopped process closes its sockets at once) and no message came from it
    /// since. A stopping node uses it to end its waits at once instead of after an election
    /// timeout: with the majority gone nothing it waits for can happen.
    pub fn majority_unreachable(&self) -> bool {
        let gone = self
            .cfg
            .voters
            .iter()
            .filter(|&&v| v != self.cfg.id)
            .filter(|v| {
                self.peers.get(v).is_some_and(|t| {
                    t.unreachable_ms
                        .is_some_and(|u| t.last_heard_ms.is_none_or(|h| u >= h))
                })
            })
            .count();
        let voters = self.cfg.voters.len();
        voters - gone < voters / 2 + 1
    }

    /// DescribeQuorum-style status as this node sees it (full only on the leader).
    pub fn status(&self) -> QuorumStatus {
        let r = &self.raw.raft;
        let leads = r.state == StateRole::Leader;
        let voters = self
            .cfg
            .voters
            .iter()
            .map(|&id| {
                let times = self.peers.get(&id).copied().unwrap_or_default();
                if id == self.cfg.id {
                    return VoterStatus {
                        id,
                        log_end_offset: Some(r.raft_log.last_index() + 1),
                        last_fetch_ms: Some(self.now_ms),
                        last_caught_up_ms: Some(self.now_ms),
                        fetching: true,
                    };
                }
                VoterStatus {
                    id,
                    log_end_offset: leads
                        .then(|| r.prs().get(raft_id(id)).map(|p| p.matched + 1))
                        .flatten(),
                    last_fetch_ms: times.last_fetch_ms,
                    last_caught_up_ms: times.last_caught_up_ms,
                    fetching: leads
                        && times.last_fetch_ms.is_some_and(|t| {
                            self.now_ms.saturating_sub(t) <= self.cfg.fetch_timeout_ms
                        }),
                }
            })
            .collect();
        QuorumStatus {
            leader: self.leader(),
            is_leader: leads,
            high_watermark: r.raft_log.committed + 1,
            voters,
            now_ms: self.now_ms,
            majority_unreachable: self.majority_unreachable(),
        }
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
