//! The controller quorum: the replicated metadata log the controller and the metadata image sit
//! on, built on tikv's raft-rs (never a home-made Raft).
//!
//! - `node`      — `QuorumNode`, the pure deterministic driver around raft-rs's `RawNode`.
//! - `memory`    — `MemoryLog`, raft-rs's `Storage` in memory (what `RawNode` reads).
//! - `storage`   — `DiskStorage`, the durable journal + snapshot in `metadata.log.dir`.
//! - `transport` — voter-to-voter TCP on the CONTROLLER listener (Sluice's own frame).
//! - `resign`    — the leader's hand-over at a clean stop: which voter, how long to wait.
//! - this file   — `Quorum`, the tokio task combining the three, and its handle.
//!
//! Invariants: a step's entries and hard state are fsynced before its messages are sent and
//! before its committed entries are handed to the state machine; committed entries reach the
//! state machine exactly once per process lifetime, in log order, after the snapshot they
//! follow (at start the state machine receives the latest snapshot, then every later entry).
//! An I/O error on the log stops the task (`QuorumError`), nothing is acknowledged after it.
//! The fsync runs on the quorum task itself (metadata writes are few and small; the task holds
//! no lock), so it briefly occupies one runtime worker.

pub mod memory;
pub mod node;
pub mod resign;
pub mod storage;
pub mod transport;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

pub use node::{
    Committed, LeaderAndEpoch, NodeConfig, NodeId, ProposeError, QuorumStatus, VoterStatus,
};
use node::{NodeError, QuorumNode};
pub use resign::Resignation;
use resign::{Bound, Resign, Wait};
use storage::{DiskStorage, StorageError};
use transport::Inbound;

/// The state machine's side of snapshots: called on the quorum task when enough bytes were
/// applied since the last snapshot (`metadata.log.max.record.bytes.between.snapshots`).
/// Returns the index of the last entry the state it encodes includes, and the encoded state;
/// `None` to skip this time. Must be quick (it runs on the quorum task) and must only include
/// entries that were handed out as `Committed`.
pub trait SnapshotSource: Send + 'static {
    fn snapshot(&mut self) -> Option<(u64, Bytes)>;
}

/// No snapshots (the log grows until one is offered).
pub struct NoSnapshots;

impl SnapshotSource for NoSnapshots {
    fn snapshot(&mut self) -> Option<(u64, Bytes)> {
        None
    }
}

/// Everything a quorum member needs.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    pub node: NodeConfig,
    /// `metadata.log.dir`
    pub dir: PathBuf,
    /// Every voter's CONTROLLER endpoint (`controller.quorum.voters`), this node included.
    pub voters: Vec<(NodeId, String)>,
}

impl QuorumConfig {
    /// The quorum settings of a broker configuration (Kafka's keys), with a seed that differs
    /// between processes (tests build `QuorumConfig` themselves with a fixed seed).
    pub fn from_config(c: &crate::config::Config) -> QuorumConfig {
        let voters = c.effective_quorum_voters();
        let mut node = NodeConfig::new(c.node_id, voters.iter().map(|v| v.id).collect());
        node.election_timeout_ms = c.quorum_election_timeout_ms;
        node.fetch_timeout_ms = c.quorum_fetch_timeout_ms;
        node.snapshot_after_bytes = c.metadata_log_max_record_bytes_between_snapshots;
        node.seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (c.node_id as u64).rotate_left(32);
        QuorumConfig {
            node,
            dir: c.effective_metadata_log_dir(),
            voters: voters.iter().map(|v| (v.id, v.address())).collect(),
        }
    }
}

/// Why the quorum task stopped.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Node(#[from] NodeError),
}

/// Why `propose` failed. `NotLeader` after the entry was appended means the outcome is unknown
/// (the entry may still commit under the next leader), as Kafka's NOT_CONTROLLER.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ProposalError {
    #[error(transparent)]
    Rejected(#[from] ProposeError),
    #[error("the quorum task has stopped")]
    Stopped,
}

enum Command {
    Propose {
        data: Bytes,
        reply: oneshot::Sender<Result<u64, ProposeError>>,
    },
    Status {
        reply: oneshot::Sender<QuorumStatus>,
    },
    Resign {
        reply: oneshot::Sender<Resign>,
    },
}

/// A cheap, cloneable handle to a running quorum member (thread-safe).
#[derive(Debug, Clone)]
pub struct QuorumHandle {
    /// This member's node id.
    id: NodeId,
    commands: mpsc::Sender<Command>,
    leader: watch::Receiver<LeaderAndEpoch>,
}

impl QuorumHandle {
    /// Appends `data` on the leader and resolves with its index once it is committed.
    pub async fn propose(&self, data: Bytes) -> Result<u64, ProposalError> {
        let (reply, rx) = oneshot::channel();
        self.commands
            .send(Command::Propose { data, reply })
            .await
            .map_err(|_| ProposalError::Stopped)?;
        Ok(rx.await.map_err(|_| ProposalError::Stopped)??)
    }

    /// The leader and epoch as this member knows them, updated on every change.
    pub fn leader(&self) -> watch::Receiver<LeaderAndEpoch> {
        self.leader.clone()
    }

    /// DescribeQuorum-style status (`None` if the task stopped). Times are milliseconds on the
    /// member's clock, `QuorumStatus::now_ms` is the present.
    pub async fn status(&self) -> Option<QuorumStatus> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Status { reply }).await.ok()?;
        rx.await.ok()
    }

    /// A clean stop's hand-over (Kafka's EndQuorumEpoch in spirit): if this member leads, it
    /// transfers leadership to the most caught-up voter it heard recently and waits, at most
    /// `limit` (an election timeout; less when the transferee does not campaign, see
    /// `resign::Bound`), until its leader watch shows another leader. Returns at once when it
    /// does not lead, is the only voter, or heard no other voter. The task keeps running either way
    /// (the caller stops it after).
    pub async fn resign(&self, limit: Duration) -> Resignation {
        let mut leader = self.leader.clone();
        let (reply, rx) = oneshot::channel();
        if self.commands.send(Command::Resign { reply }).await.is_err() {
            return Resignation::Stopped;
        }
        let (to, epoch) = match rx.await {
            Err(_) => return Resignation::Stopped,
            Ok(Resign::NotLeader) => return Resignation::NotLeader,
            Ok(Resign::Alone) => return Resignation::Alone,
            Ok(Resign::NoTransferee) => return Resignation::NoTransferee,
            Ok(Resign::Transferring { to, epoch }) => (to, epoch),
        };
        let bound = Bound::for_election_timeout(limit);
        let started = tokio::time::Instant::now();
        loop {
            let view = *leader.borrow_and_update();
            match resign::check(self.id, epoch, view, started.elapsed(), bound) {
                Wait::Done { leader } => {
                    let took = started.elapsed();
                    return Resignation::Handed { to, leader, took };
                }
                Wait::GiveUp(why) => return Resignation::GaveUp { to, why },
                Wait::Until(d) => tokio::select! {
                    changed = leader.changed() => {
                        if changed.is_err() {
                            return Resignation::Stopped;
                        }
                    }
                    _ = tokio::time::sleep(d) => {}
                },
            }
        }
    }
}

/// A running member: its handle, the committed stream for the state machine, and its task.
pub struct Quorum {
    pub handle: QuorumHandle,
    pub committed: mpsc::UnboundedReceiver<Committed>,
    pub task: tokio::task::JoinHandle<Result<(), QuorumError>>,
}

impl Quorum {
    /// Opens the log in `cfg.dir` (recovering it), and spawns the member on `listener` (this
    /// node's CONTROLLER endpoint; `None` for a lone voter, which needs no transport). The task
    /// stops with an error on a log I/O failure, or `Ok` when every handle is dropped; aborting
    /// it stops the transport too. Must be called inside a tokio runtime.
    pub fn start(
        cfg: QuorumConfig,
        listener: Option<TcpListener>,
        snapshots: Box<dyn SnapshotSource>,
    ) -> Result<Quorum, QuorumError> {
        Quorum::start_with(cfg, listener.into(), snapshots)
    }

    /// [`Quorum::start`] with the inbound voter connections coming from `inlet` (e.g. handed
    /// over by a listener that also serves Kafka requests).
    pub fn start_with(
        cfg: QuorumConfig,
        inlet: transport::Inlet,
        snapshots: Box<dyn SnapshotSource>,
    ) -> Result<Quorum, QuorumError> {
        let clock = Instant::now();
        let (disk, recovered) = DiskStorage::open(&cfg.dir)?;
        let node = QuorumNode::new(cfg.node.clone(), recovered, 0)?;
        let (cmd_tx, cmd_rx) = mpsc::channel(1024);
        let (leader_tx, leader_rx) = watch::channel(LeaderAndEpoch::default());
        let (committed_tx, committed_rx) = mpsc::unbounded_channel();
        let peers: Vec<(NodeId, String)> = cfg
            .voters
            .iter()
            .filter(|(id, _)| *id != cfg.node.id)
            .cloned()
            .collect();
        let member = Member {
            node,
            disk,
            clock,
            pending: BTreeMap::new(),
            leader_tx,
            committed_tx,
            snapshots,
        };
        let task = tokio::spawn(member.run(inlet, peers, cmd_rx));
        Ok(Quorum {
            handle: QuorumHandle {
                id: cfg.node.id,
                commands: cmd_tx,
                leader: leader_rx,
            },
            committed: committed_rx,
            task,
        })
    }
}

struct Member {
    node: QuorumNode,
    disk: DiskStorage,
    clock: Instant,
    /// Proposals waiting for commit: index -> (epoch, reply).
    pending: BTreeMap<u64, (u64, oneshot::Sender<Result<u64, ProposeError>>)>,
    leader_tx: watch::Sender<LeaderAndEpoch>,
    committed_tx: mpsc::UnboundedSender<Committed>,
    snapshots: Box<dyn SnapshotSource>,
}

impl Member {
    fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    async fn run(
        mut self,
        inlet: transport::Inlet,
        peers: Vec<(NodeId, String)>,
        mut commands: mpsc::Receiver<Command>,
    ) -> Result<(), QuorumError> {
        let mut tasks = JoinSet::new();
        let (in_tx, mut inbound) = mpsc::channel(4096);
        let out = transport::start(self.node.id(), inlet, &peers, in_tx, &mut tasks);
        loop {
            self.drain(&out)?;
            let wait = Duration::from_millis(self.node.next_tick_in_ms().max(1));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {
                    let now = self.now_ms();
                    self.node.tick(now);
                }
                Some(ev) = inbound.recv() => {
                    let now = self.now_ms();
                    match ev {
                        Inbound::Message(m) => {
                            if let Err(e) = self.node.step(m, now) {
                                tracing::debug!("quorum: {e}");
                            }
                        }
                        Inbound::Unreachable(peer) => self.node.report_unreachable(peer, now),
                    }
                }
                cmd = commands.recv() => match cmd {
                    None => return Ok(()),
                    Some(Command::Propose { data, reply }) => match self.node.propose(data) {
                        Ok((index, epoch)) => {
                            self.pending.insert(index, (epoch, reply));
                        }
                        Err(e) => {
                            let _ = reply.send(Err(e));
                        }
                    },
                    Some(Command::Status { reply }) => {
                        let _ = reply.send(self.node.status());
                    }
                    Some(Command::Resign { reply }) => {
                        // Recent contact is judged at the present, not the last tick.
                        let now = self.now_ms();
                        self.node.tick(now);
                        let _ = reply.send(self.node.resign());
                    }
                },
            }
        }
    }

    /// Performs every pending output: persist, send, apply (the order raft requires).
    fn drain(&mut self, out: &transport::Outbound) -> Result<(), QuorumError> {
        while let Some(o) = self.node.ready()? {
            self.disk.persist(&o.persist)?;
            for (to, m) in o.messages {
                out.send(to, m);
            }
            for c in o.committed {
                self.resolve(&c);
                let _ = self.committed_tx.send(c);
            }
            if let Some(l) = o.leader_change {
                tracing::info!(leader = ?l.leader_id, epoch = l.epoch, "quorum: leader change");
                let _ = self.leader_tx.send(l);
                if l.leader_id != Some(self.node.id()) {
                    for (_, (_, reply)) in std::mem::take(&mut self.pending) {
                        let _ = reply.send(Err(ProposeError::NotLeader {
                            leader_id: l.leader_id,
                        }));
                    }
                }
            }
            if o.snapshot_due {
                match self.snapshots.snapshot() {
                    Some((index, data)) => {
                        if let Err(e) = self.node.compact(index, data) {
                            tracing::warn!("quorum: snapshot not taken: {e}");
                            self.node.snapshot_declined();
                        }
                    }
                    None => self.node.snapshot_declined(),
                }
            }
        }
        Ok(())
    }

    fn resolve(&mut self, c: &Committed) {
        let upto = match c {
            Committed::Entry { index, .. } | Committed::Snapshot { index, .. } => *index,
        };
        let done: Vec<u64> = self.pending.range(..=upto).map(|(i, _)| *i).collect();
        for i in done {
            if let Some((epoch, reply)) = self.pending.remove(&i) {
                let ok = matches!(c, Committed::Entry { index, epoch: e, .. } if *index == i && *e == epoch);
                let _ = reply.send(if ok {
                    Ok(i)
                } else {
                    Err(ProposeError::NotLeader {
                        leader_id: self.node.leader().leader_id,
                    })
                });
            }
        }
    }
}

#[cfg(test)]
mod tcp_tests;
