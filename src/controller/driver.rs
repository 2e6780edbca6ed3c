//! The controller driver: the tokio task that runs the pure [`Controller`] on the quorum
//! (Kafka's `QuorumController` event loop). It owns the controller; each command is handed the
//! controller and a [`CommandContext`] (time, a placement seed, the next metadata offset), its
//! records are proposed as one quorum entry (`metadata::entry`, applied atomically), and its
//! answer is given only once that entry is committed, applied to the controller state and handed
//! to the broker's [`MetadataApplier`] (which publishes the image and lets hosting react).
//!
//! Invariants:
//! - Commands run one at a time, and a command's entry is applied before the next command is
//!   decided (the `Controller` contract), so no two commands decide on the same state.
//! - The controller state and the applier see exactly the committed entries, in log order, each
//!   once: a start replays the snapshot and every later entry; a `Bootstrap` entry whose log
//!   already holds `metadata.version` applies nothing (see `metadata::entry`).
//! - Commands are decided only while this node leads the quorum; otherwise they fail with
//!   NOT_CONTROLLER. On becoming leader the driver calls `Controller::activate` and proposes the
//!   bootstrap records (feature levels), which a log that has them ignores.
//! - The cluster id is not in the log: as in Kafka it lives in `meta.properties`
//!   (`cluster::identity`), written by `sluice format` or the first start.
//!
//! Snapshots: the quorum asks [`ControllerSnapshots`] (on its own task) for the records of the
//! applied state (`Controller::snapshot`) and the offset they include. The state sits behind a
//! `parking_lot::Mutex` taken briefly (never across an `.await`) by the driver, the snapshot
//! source and readers of [`ControllerHandle::read`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use super::metadata_fetch::{SharedTail, TAIL_MAX_BYTES};
use super::{Controller, ControllerSettings, Outcome};
use crate::metadata::entry::{self, EntryKind};
use crate::metadata::MetadataRecord;
use crate::quorum::transport::Inlet;
use crate::quorum::{
    Committed, LeaderAndEpoch, ProposalError, ProposeError, Quorum, QuorumConfig, QuorumError,
    QuorumHandle, SnapshotSource,
};

/// The broker side of the metadata log: applies committed records to the metadata image and
/// performs the hosting reaction. Called from the blocking pool (it may do file I/O), one call
/// at a time, in log order.
pub trait MetadataApplier: Send + Sync + 'static {
    /// The records of the entry at `offset` (never empty).
    fn apply(&self, offset: u64, records: Vec<MetadataRecord>);
    /// Everything up to `offset` at once, replacing what was applied (a snapshot).
    fn load_snapshot(&self, offset: u64, records: Vec<MetadataRecord>);
}

/// The milliseconds clock commands are decided with (injected in tests).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// What a command handler may depend on besides the controller state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandContext {
    pub now_ms: i64,
    /// Seeds placement and new topic ids (differs per command).
    pub seed: u64,
    /// An offset above every applied entry: a new broker epoch (Kafka uses the offset of the
    /// RegisterBroker record; ours may be lower than that record's index, but it is above every
    /// epoch handed out before, which is what epochs are compared for).
    pub next_offset: i64,
}

/// The driver's settings.
#[derive(Clone)]
pub struct DriverConfig {
    pub settings: ControllerSettings,
    /// Records of a new cluster's first entry (`bootstrap_records(BOOTSTRAP_FEATURES)`).
    pub bootstrap: Vec<MetadataRecord>,
    /// How often stale broker sessions are looked for (fencing).
    pub tick_interval: Duration,
    /// Seed of the per-command seeds.
    pub seed: u64,
    pub clock: Clock,
}

/// Why a command got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// Kafka's NOT_CONTROLLER: this node does not lead the quorum (or lost leadership before the
    /// entry committed: then its outcome is unknown, as in Kafka).
    #[error("this node is not the active controller (leader: {leader_id:?})")]
    NotController { leader_id: Option<i32> },
    #[error("the quorum refused the entry: {0}")]
    Refused(String),
    #[error("the controller has stopped")]
    Stopped,
    /// The command's records encode to more than [`MAX_ENTRY_BYTES`]: not proposed, nothing
    /// changed (Kafka's RECORD_LIST_TOO_LARGE, a batch over its raft client's 8 MiB).
    #[error(
        "the command's metadata entry is {bytes} bytes, over the {MAX_ENTRY_BYTES}-byte limit"
    )]
    EntryTooLarge { bytes: usize },
}

/// The largest metadata entry a command may propose (Kafka's `KafkaRaftClient` batches are at
/// most 8 MiB). Every entry then fits the answer an observer's Fetch gets (`controller::channel`
/// accepts 16 MiB) and a follower's append.
pub const MAX_ENTRY_BYTES: usize = 8 * 1024 * 1024;

impl DriverError {
    /// The Kafka error code a request answered with this error carries.
    pub fn code(&self) -> i16 {
        match self {
            DriverError::NotController { .. } => ResponseError::NotController.code(),
            DriverError::Refused(_) | DriverError::Stopped => {
                ResponseError::UnknownServerError.code()
            }
            DriverError::EntryTooLarge { .. } => ResponseError::RecordListTooLarge.code(),
        }
    }
}

impl From<ProposalError> for DriverError {
    fn from(e: ProposalError) -> Self {
        match e {
            ProposalError::Rejected(ProposeError::NotLeader { leader_id }) => {
                DriverError::NotController { leader_id }
            }
            ProposalError::Rejected(other) => DriverError::Refused(other.to_string()),
            ProposalError::Stopped => DriverError::Stopped,
        }
    }
}

/// A handler that may refuse outright (`register_broker`, `heartbeat`, ...) as a command whose
/// answer is the refusal (with no records) or the answer.
pub fn lift<T>(
    decided: Result<Outcome<T>, super::ControllerError>,
) -> Outcome<Result<T, super::ControllerError>> {
    match decided {
        Ok(Outcome { records, answer }) => Outcome {
            records,
            answer: Ok(answer),
        },
        Err(e) => Outcome {
            records: Vec::new(),
            answer: Err(e),
        },
    }
}

/// The controller and the offset of the last entry applied to it.
struct Applied {
    controller: Controller,
    offset: u64,
}

/// The quorum's snapshot source: the applied controller state as one `Records` entry.
/// Declines (`None`) when nothing was applied since the last snapshot it gave.
pub struct ControllerSnapshots {
    applied: Arc<Mutex<Applied>>,
    last_offset: u64,
    /// Observers' tail: a snapshot drops the entries it holds (`controller::tail`).
    tail: Arc<SharedTail>,
}

impl SnapshotSource for ControllerSnapshots {
    fn snapshot(&mut self) -> Option<(u64, Bytes)> {
        let applied = self.applied.lock();
        if applied.offset <= self.last_offset {
            return None;
        }
        self.last_offset = applied.offset;
        self.tail.trim_to(applied.offset);
        Some((applied.offset, snapshot_entry(&applied.controller)))
    }
}

/// The bytes of a snapshot of `controller`'s replicated state: one `Records` entry.
pub fn snapshot_entry(controller: &Controller) -> Bytes {
    entry::encode(EntryKind::Records, &controller.snapshot())
}

/// The controller a committed snapshot's records make: its state replaced by their replay, the
/// broker sessions empty (the caller activates it if it leads).
pub fn controller_from_snapshot(
    settings: ControllerSettings,
    records: &[MetadataRecord],
) -> Controller {
    Controller::with_state(settings, super::ControllerState::replay(records))
}

/// A command with its answer channel erased. Given the controller it decides and returns its
/// proposal; given the reason it may not run (not leading) it answers that and decides nothing,
/// so a follower's soft state (broker sessions) is never touched by a command.
type Job = Box<
    dyn FnOnce(Result<(&mut Controller, &CommandContext), DriverError>) -> Option<Proposal> + Send,
>;

struct Proposal {
    records: Vec<MetadataRecord>,
    finish: Box<dyn FnOnce(Result<(), DriverError>) + Send>,
}

/// A cheap, cloneable handle to the running controller (thread-safe).
#[derive(Clone)]
pub struct ControllerHandle {
    node_id: i32,
    jobs: mpsc::Sender<Job>,
    applied: Arc<Mutex<Applied>>,
    leader: watch::Receiver<LeaderAndEpoch>,
    quorum: QuorumHandle,
    tail: Arc<SharedTail>,
}

impl ControllerHandle {
    /// Runs `command` on the controller; its answer comes back once its records are committed
    /// and applied (at once if it has none).
    pub async fn run<T: Send + 'static>(
        &self,
        command: impl FnOnce(&mut Controller, &CommandContext) -> Outcome<T> + Send + 'static,
    ) -> Result<T, DriverError> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |decided| match decided {
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
            Ok((controller, ctx)) => {
                let Outcome { records, answer } = command(controller, ctx);
                Some(Proposal {
                    records,
                    finish: Box::new(move |result| {
                        let _ = tx.send(result.map(|()| answer));
                    }),
                })
            }
        });
        self.jobs
            .send(job)
            .await
            .map_err(|_| DriverError::Stopped)?;
        rx.await.map_err(|_| DriverError::Stopped)?
    }

    /// Reads the applied controller state (briefly locked; do not block inside `f`).
    pub fn read<T>(&self, f: impl FnOnce(&Controller) -> T) -> T {
        f(&self.applied.lock().controller)
    }

    /// The offset of the last entry applied, to the controller and to the broker's image.
    pub fn applied_offset(&self) -> u64 {
        self.applied.lock().offset
    }

    /// This voter's node id.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The applied entries observers fetch (`controller::metadata_fetch`).
    pub fn tail(&self) -> &Arc<SharedTail> {
        &self.tail
    }

    /// The applied state as snapshot records and the offset they hold (consistent: the tail's
    /// applied offset moves under the same lock as the controller state).
    pub fn metadata_snapshot(&self) -> (u64, Vec<MetadataRecord>) {
        let applied = self.applied.lock();
        (self.tail.applied(), applied.controller.snapshot())
    }

    /// The quorum leader as this node knows it.
    pub fn leader(&self) -> watch::Receiver<LeaderAndEpoch> {
        self.leader.clone()
    }

    /// The quorum's DescribeQuorum-style status (`None` if the quorum stopped).
    pub async fn quorum_status(&self) -> Option<crate::quorum::QuorumStatus> {
        self.quorum.status().await
    }

    /// Hands the quorum leadership over before a clean stop (`QuorumHandle::resign`).
    pub async fn resign_quorum(&self, limit: std::time::Duration) -> crate::quorum::Resignation {
        self.quorum.resign(limit).await
    }
}

/// A running controller: its handle and the two tasks (driver, quorum member). Dropping every
/// handle stops the driver, which drops the quorum's last handle and so stops the quorum.
pub struct RunningController {
    pub handle: ControllerHandle,
    pub driver: tokio::task::JoinHandle<()>,
    pub quorum: tokio::task::JoinHandle<Result<(), QuorumError>>,
}

impl RunningController {
    /// Drops this handle, then waits for the driver (it ends once every handle is gone) and the
    /// quorum, logging how the quorum stopped (a cancelled task is not an error).
    pub async fn shutdown(self) {
        let RunningController {
            handle,
            driver,
            quorum,
        } = self;
        drop(handle);
        let _ = driver.await;
        match quorum.await {
            Ok(Err(e)) => tracing::error!("metadata quorum stopped with: {e}"),
            Err(e) if !e.is_cancelled() => tracing::error!("metadata quorum task failed: {e}"),
            _ => {}
        }
    }
}

/// Opens the quorum in `quorum.dir` and starts the driver over it. `listener` is the
/// CONTROLLER endpoint (`None` for a lone voter). Must be called inside a tokio runtime.
pub fn start(
    config: DriverConfig,
    quorum: QuorumConfig,
    listener: Option<TcpListener>,
    applier: Arc<dyn MetadataApplier>,
) -> Result<RunningController, QuorumError> {
    start_with(config, quorum, listener.into(), applier)
}

/// [`start`] with the quorum's inbound voter connections coming from `inlet`.
pub fn start_with(
    config: DriverConfig,
    quorum: QuorumConfig,
    inlet: Inlet,
    applier: Arc<dyn MetadataApplier>,
) -> Result<RunningController, QuorumError> {
    let node_id = quorum.node.id;
    let applied = Arc::new(Mutex::new(Applied {
        controller: Controller::new(config.settings.clone()),
        offset: 0,
    }));
    let tail = Arc::new(SharedTail::new(TAIL_MAX_BYTES));
    let q = Quorum::start_with(
        quorum,
        inlet,
        Box::new(ControllerSnapshots {
            applied: applied.clone(),
            last_offset: 0,
            tail: tail.clone(),
        }),
    )?;
    let leader = q.handle.leader();
    let (jobs_tx, jobs) = mpsc::channel(256);
    let driver = Driver {
        node_id,
        config,
        applied: applied.clone(),
        applier,
        quorum: q.handle.clone(),
        committed: q.committed,
        leader: leader.clone(),
        leading: false,
        leading_epoch: None,
        commands: 0,
        tail: tail.clone(),
    };
    Ok(RunningController {
        handle: ControllerHandle {
            node_id,
            jobs: jobs_tx,
            applied,
            leader,
            quorum: q.handle,
            tail,
        },
        driver: tokio::spawn(driver.run(jobs)),
        quorum: q.task,
    })
}

struct Driver {
    node_id: i32,
    config: DriverConfig,
    applied: Arc<Mutex<Applied>>,
    applier: Arc<dyn MetadataApplier>,
    quorum: QuorumHandle,
    committed: mpsc::UnboundedReceiver<Committed>,
    leader: watch::Receiver<LeaderAndEpoch>,
    /// Whether this node led the quorum at the last leader change seen.
    leading: bool,
    /// The quorum epoch this node last became the active controller in: a leadership of a later
    /// epoch is a new one even if no change in between was seen (the watch keeps only the
    /// latest value), so it activates and writes its Bootstrap entry again.
    leading_epoch: Option<u64>,
    /// Commands decided so far (varies the per-command seed).
    commands: u64,
    tail: Arc<SharedTail>,
}

/// The epoch of a leadership of `me` that starts with `now` (after leading `leading_epoch`, if
/// ever): this node leads `now` in an epoch it has not activated in. A leadership lost and won
/// back between two looks at the leader watch is a new one (the entries another leader committed
/// meanwhile are applied only after the new epoch's Bootstrap entry is).
fn new_leadership(leading_epoch: Option<u64>, now: LeaderAndEpoch, me: i32) -> Option<u64> {
    (now.leader_id == Some(me) && leading_epoch != Some(now.epoch)).then_some(now.epoch)
}

impl Driver {
    async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut tick = tokio::time::interval(self.config.tick_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                committed = self.committed.recv() => match committed {
                    Some(c) => self.apply(c).await,
                    None => {
                        tracing::error!("controller: the quorum stopped; the controller stops");
                        return;
                    }
                },
                changed = self.leader.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.on_leader_change().await;
                }
                job = jobs.recv() => match job {
                    Some(job) => self.handle(job).await,
                    None => return,
                },
                _ = tick.tick() => self.tick().await,
            }
        }
    }

    fn leader_id(&self) -> Option<i32> {
        self.leader.borrow().leader_id
    }

    async fn on_leader_change(&mut self) {
        let now_leader = *self.leader.borrow_and_update();
        let leading = now_leader.leader_id == Some(self.node_id);
        if let Some(epoch) = new_leadership(self.leading_epoch, now_leader, self.node_id) {
            self.leading_epoch = Some(epoch);
            let now = (self.config.clock)();
            self.applied.lock().controller.activate(now);
            tracing::info!("controller: node {} is the active controller", self.node_id);
            let bootstrap = entry::encode(EntryKind::Bootstrap, &self.config.bootstrap);
            if let Err(e) = self.propose_and_apply(bootstrap).await {
                tracing::warn!("controller: bootstrap entry not committed: {e}");
            }
        }
        self.leading = leading;
    }

    async fn handle(&mut self, job: Job) {
        if self.leader.has_changed().unwrap_or(false) {
            self.on_leader_change().await;
        }
        if !self.leading {
            let leader_id = self.leader_id();
            let _ = job(Err(DriverError::NotController { leader_id }));
            return;
        }
        // Entries another leader committed come first (the contract: decide on applied state).
        while let Ok(c) = self.committed.try_recv() {
            self.apply(c).await;
        }
        let Some(proposal) = self.decide(job) else {
            return;
        };
        if proposal.records.is_empty() {
            (proposal.finish)(Ok(()));
            return;
        }
        let entry = entry::encode(EntryKind::Records, &proposal.records);
        if entry.len() > MAX_ENTRY_BYTES {
            // Decided on the applied state but never proposed: the next command sees the same
            // state (a command changes nothing until its entry is applied).
            let bytes = entry.len();
            tracing::warn!("controller: a command's metadata entry of {bytes} bytes refused (limit {MAX_ENTRY_BYTES})");
            (proposal.finish)(Err(DriverError::EntryTooLarge { bytes }));
            return;
        }
        let result = self.propose_and_apply(entry).await;
        (proposal.finish)(result);
    }

    fn decide(&mut self, job: Job) -> Option<Proposal> {
        self.commands += 1;
        let mut applied = self.applied.lock();
        let ctx = CommandContext {
            now_ms: (self.config.clock)(),
            seed: self.config.seed ^ self.commands.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            next_offset: i64::try_from(applied.offset).unwrap_or(i64::MAX - 1) + 1,
        };
        job(Ok((&mut applied.controller, &ctx)))
    }

    /// Fences stale brokers (one per `Controller::tick` call, as Kafka), a bounded number per tick.
    async fn tick(&mut self) {
        if !self.leading {
            return;
        }
        for _ in 0..16 {
            let now = (self.config.clock)();
            let records = self.applied.lock().controller.tick(now);
            if records.is_empty() {
                return;
            }
            let entry = entry::encode(EntryKind::Records, &records);
            if let Err(e) = self.propose_and_apply(entry).await {
                tracing::warn!("controller: fencing not committed: {e}");
                return;
            }
        }
    }

    /// Proposes `entry` and returns once it (and everything before it) is applied.
    async fn propose_and_apply(&mut self, entry: Bytes) -> Result<(), DriverError> {
        let index = self.quorum.propose(entry).await?;
        while self.applied.lock().offset < index {
            match self.committed.recv().await {
                Some(c) => self.apply(c).await,
                None => return Err(DriverError::Stopped),
            }
        }
        Ok(())
    }

    /// Applies one committed entry or snapshot to the controller, then to the applier.
    async fn apply(&mut self, committed: Committed) {
        let (offset, data, snapshot) = match committed {
            Committed::Entry { index, data, .. } => (index, data, false),
            Committed::Snapshot { index, data, .. } => (index, data, true),
        };
        let records = match entry::decode(&data) {
            Ok((EntryKind::Bootstrap, records)) => {
                let bootstrapped = self
                    .applied
                    .lock()
                    .controller
                    .state()
                    .features
                    .contains_key("metadata.version");
                if bootstrapped {
                    Vec::new()
                } else {
                    records
                }
            }
            Ok((EntryKind::Records, records)) => records,
            Err(e) => {
                // Only this code writes entries; a bad one is a bug, not client input.
                tracing::error!("controller: metadata entry at offset {offset} skipped: {e}");
                Vec::new()
            }
        };
        {
            let mut applied = self.applied.lock();
            if snapshot {
                applied.controller =
                    controller_from_snapshot(self.config.settings.clone(), &records);
                if self.leading {
                    applied.controller.activate((self.config.clock)());
                }
            } else {
                for r in &records {
                    applied.controller.apply(r);
                }
            }
            // Under the same lock as the state: observers' snapshots read both.
            if snapshot {
                self.tail.reset(offset);
            } else {
                self.tail.push(offset, &records, (self.config.clock)());
            }
            if records.is_empty() && !snapshot {
                applied.offset = offset;
                return;
            }
        }
        let applier = self.applier.clone();
        let done = tokio::task::spawn_blocking(move || {
            if snapshot {
                applier.load_snapshot(offset, records);
            } else {
                applier.apply(offset, records);
            }
        })
        .await;
        if let Err(e) = done {
            tracing::error!("controller: applying metadata offset {offset} failed: {e}");
        }
        // Only now does the broker's heartbeat report the offset: its image and hosting hold
        // the entry (the controller's lowest-active-offset rule relies on it).
        self.applied.lock().offset = offset;
    }
}

#[cfg(test)]
mod tests;
