//! `World`: one seeded run. A queue of timed events (message deliveries, voter ticks, broker
//! heartbeats, workload commands, faults, heals, restarts) ordered by (simulated ms, sequence
//! number), so a seed replays one schedule exactly. After every event the invariants of
//! `check` are checked; the run ends with a quiet period (every fault healed) after which the
//! quorum must have a leader and every voter must hold the same log and state (liveness).
//!
//! Faults (from the seed, one every 1 to 9 s until the quiet period): symmetric partitions,
//! one-way link cuts, network weather (drop, duplicate, long random delays that reorder),
//! voter crashes (clean, or during a write with its tail torn or kept) and restarts, clock
//! jumps on one voter (forward or back), broker silence (heartbeats stop, the broker is fenced,
//! its leaderships move; its metadata stops too), broker restarts (new incarnation; the replica
//! role crashes, a third of them with a power loss), disk faults (`Schedule::Second`: a voter's disk
//! fails one write with EIO, is full or slow for a while; a broker's disk is full for a while).
//! The replication workload (`repl`): acks=all
//! produces, a consumer, every broker's replica tick; idempotent producers and consumers in
//! groups (`idem`, `groups`, `Schedule::Third`); transactional producers and a read_committed
//! consumer (`txns`, `Schedule::Fourth`). No wall clock, no OS randomness.

mod groups;
mod idem;
mod repl;
mod txns;

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;

use crate::broker::{SimBroker, HEARTBEAT_INTERVAL_MS};
use crate::check::{Checker, SnapshotStats};
use crate::disk::{DiskFault, TornWrite};
use crate::group_check::GroupChecker;
use crate::net::{Addr, Network, Payload, Reply, Request, BROKER_BASE, CLIENT, CONSUMER, PRODUCER};
use crate::replica::{ReplMsg, ReplStats, Tp, REPLICA_ID_BASE};
use crate::rng::SimRng;
use crate::txn_check::TxnChecker;
use crate::voter::{Ctx, SimVoter};

/// A deliberately broken rule, reachable only from the simulator (the mutation check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The driver answers a command when its entry is appended, not when it is committed.
    AckBeforeCommit,
    /// A crash loses the latest writes the disk had reported as fsynced.
    LyingFsync,
    /// A new leader decides commands before its log is applied (no wait for its Bootstrap
    /// entry), so on a state that may lag what is committed.
    DecideBeforeCatchUp,
    /// A partition leader answers an acks=all produce at its append, not at the HW.
    AcksAtAppend,
    /// A partition leader serves its log end as its HW (to followers, consumers and waiting
    /// produces): the HW from the leader alone, not the ISR.
    HwFromLeader,
    /// A voter whose write failed carries on as if it had succeeded (the error ignored, as in
    /// the fsync-retry bugs), instead of stopping.
    IgnoreWriteErrors,
    /// A voter's snapshot holds the state of its previous snapshot request, labelled with the
    /// later offset it is taken at (a snapshot older than its index).
    StaleSnapshot,
    /// A voter loading a committed snapshot (at a restart, or the leader's) keeps the state it
    /// had.
    SnapshotKeepsState,
    /// A group coordinator answers an OffsetCommit at its append, not once the HW passed its
    /// records.
    CommitBeforeReplicate,
    /// A partition leader appends an idempotent batch the producer state found a duplicate of
    /// one in its log (the retry written twice).
    SkipDedupe,
    /// A partition leader serves read_committed reads up to its HW, not its last stable offset
    /// (records of undecided transactions served).
    LsoFromHw,
}

impl Mutation {
    pub fn parse(s: &str) -> Option<Mutation> {
        match s {
            "ack-before-commit" => Some(Mutation::AckBeforeCommit),
            "lying-fsync" => Some(Mutation::LyingFsync),
            "decide-before-catch-up" => Some(Mutation::DecideBeforeCatchUp),
            "acks-at-append" => Some(Mutation::AcksAtAppend),
            "hw-from-leader" => Some(Mutation::HwFromLeader),
            "ignore-write-errors" => Some(Mutation::IgnoreWriteErrors),
            "stale-snapshot" => Some(Mutation::StaleSnapshot),
            "snapshot-keeps-state" => Some(Mutation::SnapshotKeepsState),
            "skip-dedupe" => Some(Mutation::SkipDedupe),
            "commit-before-replicate" => Some(Mutation::CommitBeforeReplicate),
            "lso-from-hw" => Some(Mutation::LsoFromHw),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub voters: usize,
    pub brokers: usize,
    /// Simulated run length (ms), the quiet period included.
    pub duration_ms: u64,
    pub mutation: Option<Mutation>,
    /// Lines of trace kept (the tail).
    pub trace_lines: usize,
    /// Also print every trace line as it happens (a replay: the trace survives a panic).
    pub print_trace: bool,
    /// Which generation of faults and workload a seed draws its schedule from.
    pub schedule: Schedule,
}

/// The generations of the schedule: a newer one draws more kinds of faults and requests, so the
/// same seed is another schedule; a regression seed found before keeps its own generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Schedule {
    /// Network, crash, clock and broker faults; acks=all producers only (until 2026-12-02).
    First,
    /// Also disk faults (a voter's EIO, full or slow disk; a broker's full disk), acks=1
    /// producers beside the acks=all ones, and metadata-log snapshots (each seed draws the
    /// voters' `snapshot_after_bytes` in 2..=16 KiB, a run commits about 50 KiB: they compact several times a run, and a
    /// follower far behind installs the leader's snapshot).
    Second,
    /// Also idempotent producers (`world::idem`, the real producer-state check on the leaders,
    /// retries with the same sequence), whole batches in fetch answers (until 2026-12-05).
    Third,
    /// Also transactional producers on the real transaction coordinator (a replicated
    /// `__transaction_state`, markers through the partitions' leaders) and a read_committed
    /// consumer (the default).
    Fourth,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            voters: if seed.is_multiple_of(3) { 5 } else { 3 },
            brokers: 4,
            duration_ms: 10 * 60 * 1000 + QUIET_MS,
            mutation: None,
            trace_lines: 60,
            print_trace: false,
            schedule: Schedule::Fourth,
        }
    }
}

/// The quiet period at the end: no faults, everything healed.
pub const QUIET_MS: u64 = 30_000;
/// Entries committed this long before the end must have reached every voter (later ones may
/// still be on their way: the workload never stops).
const MARK_BEFORE_END_MS: u64 = 3_000;

/// What one seed did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedReport {
    pub seed: u64,
    pub faults: u64,
    pub sim_ms: u64,
    pub events: u64,
    pub committed: u64,
    pub acked: u64,
    pub elections: u64,
    pub fencings: u64,
    /// Replication's counters.
    pub repl: ReplStats,
    /// Records acknowledged or consumed still promised at the end; promises dropped by an
    /// allowed loss (power loss, unclean election).
    pub promised: u64,
    pub exempt: u64,
    /// Metadata-log snapshots taken, installed, loaded.
    pub snapshots: SnapshotStats,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
}

enum Event {
    Deliver {
        from: Addr,
        to: Addr,
        payload: Payload,
    },
    VoterTick(usize),
    BrokerTick(usize),
    Client,
    Fault,
    Unblock(Vec<(Addr, Addr)>),
    CalmWeather(u64),
    Restart(usize),
    EndSilence,
    Quiet,
    /// Notes the log's end shortly before the run ends: every voter must have applied it.
    Mark,
    ReplicaTick(usize),
    Produce,
    Consume,
    /// The idempotent producers' resends (`Schedule::Third`).
    IdemTick,
    /// A group consumer's turn (`Schedule::Third`).
    GroupTick(usize),
    /// A transactional producer's turn, the read_committed consumer's read (`Schedule::Fourth`).
    TxnTick(usize),
    ReadCommitted,
}

struct World {
    cfg: SimConfig,
    now: u64,
    seq: u64,
    /// Boxed: the tree moves its values as it rebalances, and a delivery is hundreds of bytes.
    queue: BTreeMap<(u64, u64), Box<Event>>,
    rng: SimRng,
    net: Network,
    voters: Vec<SimVoter>,
    brokers: Vec<SimBroker>,
    checker: Checker,
    faults: u64,
    events: u64,
    weather: u64,
    client_hint: Option<i32>,
    client_requests: u64,
    /// The client's unanswered request (timed out at the next one: the hint is dropped).
    client_awaiting: Option<u64>,
    trace: VecDeque<String>,
    quiet: bool,
    /// The longest log's end at `Mark`.
    mark: u64,
    stats: ReplStats,
    /// The last record id produced (also the produce request id).
    next_record: u64,
    /// The consumer's position per partition.
    positions: BTreeMap<Tp, i64>,
    /// The idempotent producers, their sends in flight by request id, the last request id.
    idem: Vec<idem::IdemProducer>,
    idem_sends: BTreeMap<u64, idem::SendOf>,
    idem_request: u64,
    /// The consumers in groups (`Schedule::Third`) and the committed-offset invariant.
    consumers: Vec<groups::GroupConsumer>,
    group_check: GroupChecker,
    /// The transactional producers, the read_committed consumer's positions, invariants 17-18
    /// (`Schedule::Fourth`), and the last producer id the coordinators handed out.
    txn_producers: Vec<txns::TxnProducer>,
    rc_positions: BTreeMap<Tp, i64>,
    txn_check: TxnChecker,
    producer_ids: i64,
}

const TOPICS: [&str; 6] = ["orders", "clicks", "audit", "logs", "metrics", "events"];

impl World {
    fn new(cfg: SimConfig) -> World {
        let mut rng = SimRng::new(cfg.seed);
        let ids: Vec<i32> = (0..cfg.voters as i32).collect();
        let snapshot_after_bytes = match cfg.schedule {
            Schedule::First => u64::MAX,
            Schedule::Second | Schedule::Third | Schedule::Fourth => {
                rng.range(2 * 1024, 16 * 1024 + 1)
            }
        };
        let voters = ids
            .iter()
            .map(|&id| SimVoter::new(id, ids.clone(), rng.next_u64(), snapshot_after_bytes))
            .collect();
        let brokers = (0..cfg.brokers)
            .map(|b| SimBroker::new(b as i32, (b % cfg.voters) as i32, &mut rng))
            .collect();
        let mut w = World {
            cfg,
            now: 0,
            seq: 0,
            queue: BTreeMap::new(),
            rng,
            net: Network::default(),
            voters,
            brokers,
            checker: Checker::default(),
            faults: 0,
            events: 0,
            weather: 0,
            client_hint: None,
            client_requests: 0,
            client_awaiting: None,
            trace: VecDeque::new(),
            quiet: false,
            mark: 0,
            stats: ReplStats::default(),
            next_record: 0,
            positions: BTreeMap::new(),
            idem: (0..idem::PRODUCERS).map(idem::IdemProducer::new).collect(),
            idem_sends: BTreeMap::new(),
            idem_request: 0,
            consumers: Vec::new(),
            group_check: GroupChecker::default(),
            txn_producers: Vec::new(),
            rc_positions: BTreeMap::new(),
            txn_check: TxnChecker::default(),
            producer_ids: 100_000,
        };
        if w.cfg.schedule >= Schedule::Third {
            w.consumers = (0..groups::GROUPS.len())
                .map(groups::GroupConsumer::new)
                .collect();
        }
        if w.cfg.schedule >= Schedule::Fourth {
            w.txn_producers = (0..txns::PRODUCERS).map(txns::TxnProducer::new).collect();
        }
        let tick = w.voters_tick_ms();
        for v in 0..w.voters.len() {
            let at = w.rng.range(1, tick + 1);
            w.at(at, Event::VoterTick(v));
        }
        for b in 0..w.brokers.len() {
            let at = w.rng.range(1, HEARTBEAT_INTERVAL_MS);
            w.at(at, Event::BrokerTick(b));
        }
        w.at(1000, Event::Client);
        w.schedule_replication();
        let first_fault = w.rng.range(5_000, 9_000);
        w.at(first_fault, Event::Fault);
        w.at(w.cfg.duration_ms - QUIET_MS, Event::Quiet);
        w.at(w.cfg.duration_ms - MARK_BEFORE_END_MS, Event::Mark);
        w
    }

    fn voters_tick_ms(&self) -> u64 {
        100
    }

    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.queue.insert((t, self.seq), Box::new(e));
    }

    fn after(&mut self, delay: u64, e: Event) {
        self.at(self.now + delay, e);
    }

    fn log(&mut self, line: String) {
        let line = format!("{:>9} ms  {line}", self.now);
        if self.cfg.print_trace {
            // A closed stdout (`| head`) ends the printing, not the run.
            let _ = writeln!(std::io::stdout(), "{line}");
        }
        self.trace.push_back(line);
        if self.trace.len() > self.cfg.trace_lines {
            self.trace.pop_front();
        }
    }

    fn send_all(&mut self, out: Vec<(Addr, Addr, Payload)>) {
        self.send_all_after(0, out)
    }

    /// Sends `out` once `stall` ms have passed (a voter busy with a slow write).
    fn send_all_after(&mut self, stall: u64, out: Vec<(Addr, Addr, Payload)>) {
        for (from, to, payload) in out {
            if let Payload::Repl(ReplMsg::WriteTxnMarker { tp, topic, .. }) = &payload {
                self.note_marker_route(*tp, topic);
            }
            let duplicable = !matches!(payload, Payload::Request { .. });
            for d in self.net.route(&mut self.rng, from, to, duplicable) {
                let payload = payload.clone();
                self.after(stall + d, Event::Deliver { from, to, payload });
            }
        }
    }

    /// Runs `f` on voter `v` with a context, then routes its output.
    fn with_voter(&mut self, v: usize, f: impl FnOnce(&mut SimVoter, &mut Ctx)) {
        let mut ctx = Ctx {
            now: self.now,
            rng: &mut self.rng,
            checker: &mut self.checker,
            mutation: self.cfg.mutation,
            out: Vec::new(),
            trace: Vec::new(),
            out_delay: 0,
        };
        f(&mut self.voters[v], &mut ctx);
        let Ctx {
            out,
            trace,
            out_delay,
            ..
        } = ctx;
        for line in trace {
            self.log(line);
        }
        self.send_all_after(out_delay, out);
        if std::mem::take(&mut self.voters[v].halted) {
            // The operator restarts a voter its disk stopped (after freeing space, or on a
            // repaired disk).
            let restart = self.rng.range(1_000, 10_000);
            self.log(format!("voter {v} restarts in {restart} ms"));
            self.after(restart, Event::Restart(v));
        }
    }

    fn run(mut self) -> SeedReport {
        let mut stopped = false;
        while let Some(((t, _), e)) = self.queue.pop_first() {
            if t > self.cfg.duration_ms {
                break;
            }
            self.now = t;
            self.events += 1;
            self.handle(*e);
            let leaders: Vec<(i32, u64)> = self.voters.iter().filter_map(|v| v.leads()).collect();
            self.checker.after_step(&leaders);
            let found = self.checker.violations.len()
                + self.checker.repl.violations.len()
                + self.group_check.violations.len()
                + self.txn_check.violations.len();
            if found > 20 {
                stopped = true;
                break;
            }
        }
        self.now = self.now.max(self.cfg.duration_ms);
        // A run stopped at its violations never reached its quiet period: no liveness verdict.
        if !stopped {
            self.final_checks();
        }
        let mut violations = self.checker.violations.clone();
        violations.extend(self.checker.repl.violations.iter().cloned());
        violations.extend(self.group_check.violations.iter().cloned());
        violations.extend(self.txn_check.violations.iter().cloned());
        SeedReport {
            seed: self.cfg.seed,
            faults: self.faults,
            sim_ms: self.now,
            events: self.events,
            committed: self.checker.committed_len(),
            acked: self.checker.acked() as u64,
            elections: self.checker.elections,
            fencings: self.checker.fencings,
            repl: self.stats.clone(),
            promised: self.checker.repl.promised() as u64,
            exempt: self.checker.repl.exempt + self.group_check.exempt + self.txn_check.exempt,
            snapshots: self.checker.snapshots,
            violations,
            trace: self.trace.into_iter().collect(),
        }
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Deliver { from, to, payload } => self.deliver(from, to, payload),
            Event::VoterTick(v) => {
                if self.voters[v].busy_until <= self.now {
                    self.with_voter(v, |voter, ctx| voter.tick(ctx));
                }
                let tick = self.voters_tick_ms();
                self.after(tick, Event::VoterTick(v));
            }
            Event::BrokerTick(b) => {
                self.broker_tick(b);
                self.after(HEARTBEAT_INTERVAL_MS, Event::BrokerTick(b));
            }
            Event::Client => {
                self.client();
                let d = self.rng.range(200, 3000);
                self.after(d, Event::Client);
            }
            Event::Fault => {
                if !self.quiet {
                    self.fault();
                    let d = self.rng.range(1_000, 9_000);
                    self.after(d, Event::Fault);
                }
            }
            Event::Unblock(links) => self.net.unblock(&links),
            Event::CalmWeather(generation) => {
                if generation == self.weather {
                    self.net.drop_rate = 0.0;
                    self.net.dup_rate = 0.0;
                    self.net.min_delay_ms = crate::net::CALM_DELAY.0;
                    self.net.max_delay_ms = crate::net::CALM_DELAY.1;
                }
            }
            Event::Restart(v) => {
                if self.voters[v].is_up() {
                    // The armed crash never happened (no write came): disarm it.
                    self.voters[v].crash_on_write = None;
                } else {
                    self.log(format!("voter {v} restarts"));
                    self.with_voter(v, |voter, ctx| voter.restart(ctx));
                }
            }
            Event::EndSilence => {}
            Event::Quiet => self.heal_everything(),
            Event::Mark => self.mark = self.checker.last_index(),
            Event::ReplicaTick(b) => {
                self.replica_tick(b);
                self.after(repl::REPLICA_TICK_MS, Event::ReplicaTick(b));
            }
            Event::Produce => {
                if self.cfg.schedule >= Schedule::Third && self.rng.chance(0.5) {
                    self.idem_produce();
                } else {
                    self.produce();
                }
                let d = self.rng.range(100, 600);
                self.after(d, Event::Produce);
            }
            Event::IdemTick => {
                self.idem_tick();
                self.after(idem::TICK_MS, Event::IdemTick);
            }
            Event::GroupTick(k) => {
                self.group_tick(k);
                self.after(groups::TICK_MS, Event::GroupTick(k));
            }
            Event::TxnTick(k) => {
                self.txn_tick(k);
                self.after(txns::TICK_MS, Event::TxnTick(k));
            }
            Event::ReadCommitted => {
                self.read_committed_consume();
                let d = self.rng.range(300, 900);
                self.after(d, Event::ReadCommitted);
            }
            Event::Consume => {
                self.consume();
                let d = self.rng.range(300, 900);
                self.after(d, Event::Consume);
            }
        }
    }

    fn deliver(&mut self, from: Addr, to: Addr, payload: Payload) {
        if (0..self.voters.len() as i32).contains(&to) {
            let busy_until = self.voters[to as usize].busy_until;
            if busy_until > self.now {
                return self.at(busy_until, Event::Deliver { from, to, payload });
            }
            self.with_voter(to as usize, |voter, ctx| voter.deliver(from, payload, ctx));
            return;
        }
        let (id, reply) = match payload {
            Payload::Reply { id, reply } => (id, reply),
            Payload::Repl(msg) => return self.deliver_repl(from, to, msg),
            Payload::Raft(_) | Payload::Request { .. } => return,
        };
        if to == CLIENT {
            if self.client_awaiting == Some(id) {
                self.client_awaiting = None;
            }
            self.client_hint = match reply {
                Reply::NotController { leader_id } => leader_id,
                _ => Some(from),
            };
        } else if id > REPLICA_ID_BASE && to >= BROKER_BASE {
            let b = (to - BROKER_BASE) as usize;
            if b < self.brokers.len() {
                self.deliver_alter_reply(b, from, id, reply);
            }
        } else if let Some(b) = self.brokers.get_mut((to - BROKER_BASE) as usize) {
            b.on_reply(from, id, reply);
        }
    }

    fn broker_tick(&mut self, b: usize) {
        let nvoters = self.voters.len();
        let follows = self.brokers[b].follows as usize;
        if !self.voters[follows].is_up() {
            self.brokers[b].follows = self.rng.below(nvoters) as i32;
        }
        if self.rng.chance(0.3) {
            self.brokers[b].replicas.flush(self.now);
        }
        let v = &self.voters[self.brokers[b].follows as usize];
        // A silent broker is cut off from the quorum: no metadata either.
        if v.is_up() && self.now >= self.brokers[b].silent_until {
            let upto = v.applied;
            self.brokers[b].fetch(&self.checker, upto);
            if self.brokers[b].applied == upto {
                let state = v.controller.state();
                self.brokers[b].check_image(state, &mut self.checker);
            }
        }
        let now = self.now;
        if let Some((to, payload)) = self.brokers[b].heartbeat(now, nvoters, &mut self.rng) {
            let from = self.brokers[b].addr();
            self.send_all(vec![(from, to, payload)]);
        }
    }

    fn client(&mut self) {
        let offsets = sluice::group::records::OFFSETS_TOPIC;
        let missing = self.cfg.schedule >= Schedule::Third
            && self.checker.reference().topic_by_name(offsets).is_none();
        let transactions = sluice::txn::TRANSACTION_STATE_TOPIC;
        let txn_missing = self.cfg.schedule >= Schedule::Fourth
            && self
                .checker
                .reference()
                .topic_by_name(transactions)
                .is_none();
        let name = TOPICS[self.rng.below(TOPICS.len())].to_string();
        let request = match self.rng.below(10) {
            // The consumers' coordinators need `__consumer_offsets` (Kafka creates it at the
            // first FindCoordinator; RF 3 as `offsets.topic.replication.factor`).
            _ if missing => Request::CreateTopic {
                name: offsets.to_string(),
                partitions: groups::OFFSETS_PARTITIONS,
                replication_factor: 3,
            },
            // The transactional producers' coordinators need `__transaction_state` (RF 3 as
            // `transaction.state.log.replication.factor`).
            _ if txn_missing => Request::CreateTopic {
                name: transactions.to_string(),
                partitions: txns::TXN_PARTITIONS,
                replication_factor: 3,
            },
            0..=3 => Request::CreateTopic {
                name,
                partitions: self.rng.range(1, 5) as i32,
                replication_factor: self.rng.range(1, 4) as i16,
            },
            4..=5 => {
                let current = self
                    .checker
                    .reference()
                    .topic_by_name(&name)
                    .map_or(1, |t| t.partitions.len() as i32);
                Request::CreatePartitions {
                    name,
                    count: current + self.rng.range(1, 3) as i32,
                }
            }
            6 => Request::DeleteTopic { name },
            7..=8 => Request::ElectLeaders { unclean: false },
            _ => Request::ElectLeaders { unclean: true },
        };
        if self.client_awaiting.take().is_some() {
            self.client_hint = None;
        }
        let to = self
            .client_hint
            .unwrap_or_else(|| self.rng.below(self.voters.len()) as i32);
        self.client_requests += 1;
        let id = self.client_requests;
        self.client_awaiting = Some(id);
        self.send_all(vec![(CLIENT, to, Payload::Request { id, request })]);
    }

    fn all_addrs(&self) -> Vec<Addr> {
        let mut a: Vec<Addr> = (0..self.voters.len() as i32).collect();
        a.extend(self.brokers.iter().map(|b| b.addr()));
        a.extend([CLIENT, PRODUCER, CONSUMER]);
        a.extend((0..self.consumers.len() as Addr).map(|k| groups::GROUP_CONSUMER_BASE + k));
        if self.cfg.schedule >= Schedule::Fourth {
            a.extend((0..self.txn_producers.len() as Addr).map(|k| txns::TXN_PRODUCER_BASE + k));
            a.push(txns::READ_COMMITTED_CONSUMER);
        }
        a
    }

    fn fault(&mut self) {
        self.faults += 1;
        let nv = self.voters.len();
        let kinds = match self.cfg.schedule {
            Schedule::First => 100,
            Schedule::Second | Schedule::Third | Schedule::Fourth => 112,
        };
        match self.rng.below(kinds) {
            0..=19 => {
                let addrs = self.all_addrs();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for x in addrs {
                    if self.rng.chance(0.5) {
                        a.push(x)
                    } else {
                        b.push(x)
                    }
                }
                let links: Vec<(Addr, Addr)> = a
                    .iter()
                    .flat_map(|x| b.iter().flat_map(move |y| [(*x, *y), (*y, *x)]))
                    .collect();
                let heal = self.rng.range(1_000, 20_000);
                self.log(format!("fault: partition {a:?} | {b:?} for {heal} ms"));
                self.net.block(&links);
                self.after(heal, Event::Unblock(links));
            }
            20..=34 => {
                let from = self.rng.below(nv) as Addr;
                let targets: Vec<Addr> = if self.rng.chance(0.5) {
                    let mut t: Vec<Addr> = self.all_addrs();
                    t.retain(|x| *x != from);
                    t
                } else {
                    let mut to = self.rng.below(nv) as Addr;
                    if to == from {
                        to = (to + 1) % nv as Addr;
                    }
                    vec![to]
                };
                let heal = self.rng.range(1_000, 20_000);
                let (links, dir) = if self.rng.chance(0.5) {
                    (
                        targets.iter().map(|t| (from, *t)).collect::<Vec<_>>(),
                        "out of",
                    )
                } else {
                    (targets.iter().map(|t| (*t, from)).collect(), "into")
                };
                self.log(format!(
                    "fault: one-way cut {dir} voter {from} ({} links) for {heal} ms",
                    links.len()
                ));
                self.net.block(&links);
                self.after(heal, Event::Unblock(links));
            }
            35..=49 => {
                self.weather += 1;
                self.net.drop_rate = self.rng.range(0, 50) as f64 / 100.0;
                self.net.dup_rate = self.rng.range(0, 20) as f64 / 100.0;
                self.net.max_delay_ms = self.rng.range(20, 800);
                let heal = self.rng.range(2_000, 20_000);
                self.log(format!(
                    "fault: weather drop {:.2} dup {:.2} delay 1..{} ms for {heal} ms",
                    self.net.drop_rate, self.net.dup_rate, self.net.max_delay_ms
                ));
                let generation = self.weather;
                self.after(heal, Event::CalmWeather(generation));
            }
            50..=69 => {
                let up: Vec<usize> = (0..nv).filter(|v| self.voters[*v].is_up()).collect();
                if up.is_empty() {
                    self.faults -= 1;
                    return;
                }
                let v = up[self.rng.below(up.len())];
                let restart = self.rng.range(500, 15_000);
                match self.rng.below(3) {
                    0 => {
                        self.log(format!("fault: voter {v} crashes, restart in {restart} ms"));
                        let lying = self.cfg.mutation == Some(Mutation::LyingFsync);
                        self.with_voter(v, |voter, ctx| {
                            voter.crash(ctx);
                            if lying {
                                voter.disk.lose_recent_writes();
                            }
                        });
                    }
                    k => {
                        let how = if k == 1 {
                            TornWrite::Torn
                        } else {
                            TornWrite::Kept
                        };
                        self.log(format!(
                            "fault: voter {v} will crash during its next write ({how:?}), restart in {restart} ms"
                        ));
                        self.voters[v].crash_on_write = Some(how);
                    }
                }
                self.after(restart, Event::Restart(v));
            }
            70..=79 => {
                let v = self.rng.below(nv);
                let jump = if self.rng.chance(0.8) {
                    self.rng.range(1_000, 60_000) as i64
                } else {
                    -(self.rng.range(1_000, 30_000) as i64)
                };
                self.voters[v].clock_offset += jump;
                self.log(format!("fault: voter {v}'s clock jumps {jump} ms"));
            }
            80..=93 => {
                let b = self.rng.below(self.brokers.len());
                let d = self.rng.range(3_000, 30_000);
                self.brokers[b].silent_until = self.now + d;
                self.log(format!("fault: broker {b} silent for {d} ms"));
                self.after(d, Event::EndSilence);
            }
            100..=105 => self.voter_disk_fault(),
            106..=111 => {
                let b = self.rng.below(self.brokers.len());
                let d = self.rng.range(2_000, 30_000);
                self.brokers[b].replicas.disk_full_until = self.now + d;
                self.log(format!("fault: broker {b}'s disk is full for {d} ms"));
            }
            _ => {
                let b = self.rng.below(self.brokers.len());
                self.brokers[b].restart(&mut self.rng);
                self.log(format!("fault: broker {b} restarts (new incarnation)"));
                self.crash_replicas(b);
            }
        }
    }

    /// A voter's disk fails: EIO on its next write, full for a while, or slow for a while.
    fn voter_disk_fault(&mut self) {
        let v = self.rng.below(self.voters.len());
        let d = self.rng.range(2_000, 30_000);
        let until = self.now + d;
        let fault = match self.rng.below(3) {
            0 => DiskFault::Eio,
            1 => DiskFault::Full { until },
            _ => DiskFault::Slow {
                until,
                ms: self.rng.range(50, 2_000),
            },
        };
        let what = match fault {
            DiskFault::Eio => "fails its next write (EIO)".to_string(),
            DiskFault::Full { .. } => format!("is full for {d} ms"),
            DiskFault::Slow { ms, .. } => format!("takes {ms} ms per write for {d} ms"),
        };
        self.log(format!("fault: voter {v}'s disk {what}"));
        self.voters[v].disk.fault = Some(fault);
    }

    fn heal_everything(&mut self) {
        self.quiet = true;
        self.log("quiet: every fault healed".into());
        self.net.heal_all();
        self.weather += 1;
        for v in 0..self.voters.len() {
            self.voters[v].crash_on_write = None;
            self.voters[v].disk.fault = None;
            if !self.voters[v].is_up() {
                self.with_voter(v, |voter, ctx| voter.restart(ctx));
            }
        }
        for b in &mut self.brokers {
            b.silent_until = 0;
            b.replicas.disk_full_until = 0;
        }
    }

    /// Liveness after the quiet period, and invariant 4 on every voter.
    fn final_checks(&mut self) {
        self.txn_final_check();
        // Every fault healed 30 s ago: markers land (their partitions' ISR is back at the
        // minimum), a coordinator does not retry them through the quiet period.
        for b in &self.brokers {
            let quiet = self.cfg.duration_ms - QUIET_MS;
            if let Some(t) = b.replicas.markers_retrying_since().filter(|&t| t <= quiet) {
                self.checker.violations.push(format!(
                    "liveness: broker {} has retried transaction markers since {t} ms, through the quiet period",
                    b.replicas.id
                ));
            }
        }
        let leaders: Vec<(i32, u64)> = self.voters.iter().filter_map(|v| v.leads()).collect();
        let Some(&(leader, term)) = leaders.iter().max_by_key(|(_, t)| *t) else {
            self.checker
                .violations
                .push("liveness: no Raft leader after the quiet period".into());
            return;
        };
        let len = self.checker.last_index();
        let mark = self.mark;
        for v in &self.voters {
            if v.applied < mark {
                self.checker.violations.push(format!(
                    "liveness: voter {} applied up to {} after the quiet period, the log held {mark} {MARK_BEFORE_END_MS} ms before the end (leader {leader}, term {term})",
                    v.id, v.applied
                ));
            } else if v.applied == len && v.controller.state() != self.checker.reference() {
                self.checker.violations.push(format!(
                    "voter {}: controller state differs from a replay of the committed log",
                    v.id
                ));
            }
        }
    }
}

/// Runs one seed.
pub fn run_seed(cfg: SimConfig) -> SeedReport {
    World::new(cfg).run()
}
