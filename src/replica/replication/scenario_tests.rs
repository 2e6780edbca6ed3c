//! The replication pieces together: three replicas, a controller that commits AlterPartition and
//! elects the first live ISR member in replica order, leader failures, restarts with truncation,
//! acks=all produces. Property: no acknowledged record is ever missing from the current leader's
//! log, and every live follower that finished truncating holds a prefix of the leader's log below
//! its high watermark.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::acks::{DelayedProduce, DelayedProduceOutcome};
use super::leader::*;
use super::truncation::*;
use super::*;

const T0: i64 = 1_000_000;
const REPLICAS: [BrokerId; 3] = [1, 2, 3];

#[derive(Debug)]
struct Replica {
    alive: bool,
    /// The leader epoch of each record; the index is the offset.
    log: Vec<i32>,
    cache: LeaderEpochCache,
    high_watermark: i64,
    needs_truncation: bool,
}

impl Replica {
    fn log_end(&self) -> i64 {
        self.log.len() as i64
    }

    fn truncate_to(&mut self, offset: i64) {
        let keep = usize::try_from(offset.max(0)).expect("offset fits");
        self.log.truncate(keep);
        self.cache.truncate_from_end(offset);
        self.high_watermark = self.high_watermark.min(self.log_end());
    }
}

struct World {
    now: i64,
    config: LeaderConfig,
    replicas: Vec<Replica>,
    leader_id: Option<BrokerId>,
    leader: Option<PartitionLeader>,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: BTreeSet<BrokerId>,
    proposals: Vec<AlterPartitionProposal>,
    waiting: Vec<(DelayedProduce, i64, i32)>,
    /// (offset, epoch) of every acknowledged record.
    acked: Vec<(i64, i32)>,
}

fn idx(id: BrokerId) -> usize {
    usize::try_from(id - 1).expect("ids start at 1")
}

impl World {
    fn new(min_insync_replicas: i32) -> World {
        let mut w = World {
            now: T0,
            config: LeaderConfig {
                replica_lag_time_max_ms: leader::DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                min_insync_replicas,
            },
            replicas: REPLICAS
                .iter()
                .map(|_| Replica {
                    alive: true,
                    log: Vec::new(),
                    cache: LeaderEpochCache::new(),
                    high_watermark: 0,
                    needs_truncation: false,
                })
                .collect(),
            leader_id: None,
            leader: None,
            leader_epoch: -1,
            partition_epoch: 0,
            isr: REPLICAS.iter().copied().collect(),
            proposals: Vec::new(),
            waiting: Vec::new(),
            acked: Vec::new(),
        };
        w.elect(1);
        w
    }

    fn registration(&self) -> LeaderAndIsr {
        LeaderAndIsr {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            replicas: REPLICAS.to_vec(),
            isr: self.isr.iter().copied().collect(),
        }
    }

    fn elect(&mut self, id: BrokerId) {
        self.leader_epoch += 1;
        self.partition_epoch += 1;
        self.leader_id = Some(id);
        self.waiting.clear();
        self.proposals.clear();
        let r = &self.replicas[idx(id)];
        let (leader, effects) = PartitionLeader::become_leader(
            id,
            self.config,
            &self.registration(),
            r.log_end(),
            r.high_watermark,
            self.now,
        );
        self.leader = Some(leader);
        self.replicas[idx(id)].needs_truncation = false;
        for other in REPLICAS.iter().filter(|&&o| o != id) {
            self.replicas[idx(*other)].needs_truncation = true;
        }
        self.perform(effects);
    }

    fn perform(&mut self, effects: Vec<Effect>) {
        for e in effects {
            match e {
                Effect::AssignEpochStartOffset(entry) => {
                    let id = self.leader_id.expect("a leader assigns");
                    self.replicas[idx(id)]
                        .cache
                        .assign(entry.epoch, entry.start_offset)
                        .expect("valid entry");
                }
                Effect::SendAlterPartition(p) => self.proposals.push(p),
                Effect::HighWatermarkAdvanced { to, .. } => {
                    let id = self.leader_id.expect("a leader advances");
                    self.replicas[idx(id)].high_watermark = to;
                }
                Effect::IsrCommitted { .. } => {}
            }
        }
    }

    fn produce(&mut self, n: usize) {
        let (Some(id), Some(leader)) = (self.leader_id, self.leader.as_mut()) else {
            return;
        };
        if leader.check_acks_all_append().is_err() {
            return;
        }
        let r = &mut self.replicas[idx(id)];
        let base = r.log_end();
        r.log.extend(std::iter::repeat_n(self.leader_epoch, n));
        r.cache.assign(self.leader_epoch, base).expect("valid");
        let end = r.log_end();
        let effects = leader.on_append(end, self.now);
        self.waiting.push((
            DelayedProduce::new(end - 1, self.now, 30_000),
            base,
            self.leader_epoch,
        ));
        self.perform(effects);
    }

    fn fetch(&mut self, id: BrokerId, max: usize) {
        let Some(leader_id) = self.leader_id else {
            return;
        };
        if id == leader_id || !self.replicas[idx(id)].alive {
            return;
        }
        let (leader_log, leader_cache, leader_hw) = {
            let l = &self.replicas[idx(leader_id)];
            (l.log.clone(), l.cache.clone(), l.high_watermark)
        };
        let leader_end = leader_log.len() as i64;
        let f = &mut self.replicas[idx(id)];
        if f.needs_truncation {
            for _ in 0..10 {
                match truncation_request(&f.cache, f.high_watermark) {
                    TruncationRequest::TruncateToHighWatermark(hw) => {
                        f.truncate_to(hw);
                        break;
                    }
                    TruncationRequest::AskLeader { leader_epoch } => {
                        let answer = leader_cache.end_offset_for(leader_epoch, leader_end);
                        let state = offset_truncation_state(
                            &f.cache,
                            f.log_end(),
                            f.high_watermark,
                            answer,
                        );
                        f.truncate_to(state.offset);
                        if state.truncation_completed {
                            break;
                        }
                    }
                }
            }
            f.needs_truncation = false;
        }
        if let Some(last_epoch) = f.cache.latest_epoch() {
            match diverging_epoch(&leader_cache, leader_end, f.log_end(), last_epoch) {
                Ok(None) => {}
                Ok(Some(diverging)) => {
                    let state =
                        offset_truncation_state(&f.cache, f.log_end(), f.high_watermark, diverging);
                    f.truncate_to(state.offset);
                    f.needs_truncation = !state.truncation_completed;
                    return;
                }
                Err(_) => panic!("follower {id} fetch out of range: {f:?} vs {leader_cache:?}"),
            }
        }
        let fetch_offset = f.log_end();
        let leader = self.leader.as_mut().expect("leader state");
        let effects = leader
            .on_follower_fetch(
                FollowerFetch {
                    replica_id: id,
                    current_leader_epoch: Some(self.leader_epoch),
                    fetch_offset,
                    log_start_offset: 0,
                },
                self.now,
            )
            .expect("fetch accepted");
        let from = usize::try_from(fetch_offset).expect("offset fits");
        for (i, &epoch) in leader_log.iter().enumerate().skip(from).take(max) {
            f.log.push(epoch);
            f.cache.assign(epoch, i as i64).expect("valid");
        }
        f.high_watermark = leader_hw.min(f.log_end());
        self.perform(effects);
    }

    fn answer_proposals(&mut self) {
        for p in std::mem::take(&mut self.proposals) {
            let response = if p.leader_epoch != self.leader_epoch {
                AlterPartitionResponse::Error(AlterPartitionError::FencedLeaderEpoch)
            } else if p.partition_epoch != self.partition_epoch {
                AlterPartitionResponse::Error(AlterPartitionError::InvalidUpdateVersion)
            } else if p.new_isr.iter().any(|&m| !self.replicas[idx(m)].alive) {
                AlterPartitionResponse::Error(AlterPartitionError::IneligibleReplica)
            } else {
                self.partition_epoch += 1;
                self.isr = p.new_isr.iter().copied().collect();
                AlterPartitionResponse::Committed {
                    leader_epoch: self.leader_epoch,
                    partition_epoch: self.partition_epoch,
                    isr: p.new_isr.clone(),
                }
            };
            if let Some(leader) = self.leader.as_mut() {
                let effects = leader.on_alter_partition_response(&p, response, self.now);
                self.perform(effects);
            }
        }
    }

    fn kill(&mut self, id: BrokerId) {
        if !self.replicas[idx(id)].alive {
            return;
        }
        self.replicas[idx(id)].alive = false;
        let rest: BTreeSet<BrokerId> = self.isr.iter().copied().filter(|&m| m != id).collect();
        if Some(id) == self.leader_id {
            self.leader = None;
            self.leader_id = None;
            self.waiting.clear();
            if rest.is_empty() {
                return; // offline: the ISR keeps its last member
            }
            self.isr = rest;
            let next = REPLICAS
                .iter()
                .copied()
                .find(|m| self.isr.contains(m) && self.replicas[idx(*m)].alive);
            if let Some(next) = next {
                self.elect(next);
            }
        } else if self.isr.contains(&id) && !rest.is_empty() {
            self.isr = rest;
            self.partition_epoch += 1;
            let reg = self.registration();
            if let Some(leader) = self.leader.as_mut() {
                let effects = leader.on_leader_and_isr(&reg, self.now);
                self.perform(effects);
            }
        }
    }

    fn restart(&mut self, id: BrokerId) {
        if self.replicas[idx(id)].alive {
            return;
        }
        self.replicas[idx(id)].alive = true;
        self.replicas[idx(id)].needs_truncation = true;
        if self.leader_id.is_none() && self.isr.contains(&id) {
            self.elect(id);
        }
    }

    fn settle(&mut self) {
        let view = self.leader.as_ref().map(|l| l.replication_view());
        let now = self.now;
        let mut acked = Vec::new();
        self.waiting
            .retain(|(p, base, epoch)| match p.check(view.as_ref(), now) {
                DelayedProduceOutcome::Pending => true,
                DelayedProduceOutcome::Completed => {
                    acked.extend((*base..p.required_offset).map(|o| (o, *epoch)));
                    false
                }
                _ => false,
            });
        self.acked.extend(acked);
    }

    fn check(&self) -> Result<(), String> {
        let Some(leader_id) = self.leader_id else {
            return Ok(());
        };
        let log = &self.replicas[idx(leader_id)].log;
        for &(o, e) in &self.acked {
            let at = usize::try_from(o).expect("offset fits");
            if log.get(at) != Some(&e) {
                return Err(format!(
                    "acked record ({o}, epoch {e}) missing from leader {leader_id}'s log {log:?}"
                ));
            }
        }
        for id in REPLICAS {
            let r = &self.replicas[idx(id)];
            if id == leader_id || !r.alive || r.needs_truncation {
                continue;
            }
            let below = usize::try_from(r.high_watermark).expect("offset fits");
            if r.log.get(..below) != log.get(..below) {
                return Err(format!(
                    "follower {id} disagrees below its HW {below}: {:?} vs {log:?}",
                    r.log
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Event {
    Produce(usize),
    Fetch(BrokerId, usize),
    Tick(i64),
    Answer,
    Kill(BrokerId),
    Restart(BrokerId),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        4 => (1usize..4).prop_map(Event::Produce),
        10 => (1i32..=3, 1usize..6).prop_map(|(id, max)| Event::Fetch(id, max)),
        3 => (0i64..20_000).prop_map(Event::Tick),
        3 => Just(Event::Answer),
        1 => (1i32..=3).prop_map(Event::Kill),
        2 => (1i32..=3).prop_map(Event::Restart),
    ]
}

fn run(min_isr: i32, events: &[Event]) -> Result<World, String> {
    let mut w = World::new(min_isr);
    for ev in events {
        match *ev {
            Event::Produce(n) => w.produce(n),
            Event::Fetch(id, max) => w.fetch(id, max),
            Event::Tick(ms) => {
                w.now += ms;
                if let Some(leader) = w.leader.as_mut() {
                    let effects = leader.maybe_shrink_isr(w.now);
                    w.perform(effects);
                }
            }
            Event::Answer => w.answer_proposals(),
            Event::Kill(id) => w.kill(id),
            Event::Restart(id) => w.restart(id),
        }
        w.settle();
        w.check().map_err(|e| format!("after {ev:?}: {e}"))?;
    }
    Ok(w)
}

#[test]
fn acked_records_survive_a_leader_change_and_the_old_leader_truncates() {
    use Event::*;
    let events = [
        Produce(3),
        Fetch(2, 5),
        Fetch(3, 5),
        Fetch(2, 5),
        Fetch(3, 5),
        Produce(2), // offsets 3, 4: only on the leader
        Kill(1),    // 2 leads at epoch 1
        Produce(1), // offset 3 in epoch 1
        Fetch(3, 5),
        Fetch(3, 5),
        Restart(1),
        Fetch(1, 5),
        Fetch(1, 5),
    ];
    let w = run(2, &events).expect("no acked record lost");
    assert_eq!(w.leader_id, Some(2));
    assert_eq!(w.replicas[idx(2)].log, vec![0, 0, 0, 1]);
    // The old leader dropped its two unreplicated epoch-0 records and took epoch 1's.
    assert_eq!(w.replicas[idx(1)].log, vec![0, 0, 0, 1]);
    assert_eq!(w.acked, vec![(0, 0), (1, 0), (2, 0), (3, 1)]);
    assert_eq!(
        w.replicas[idx(1)].cache.entries(),
        vec![
            EpochEntry {
                epoch: 0,
                start_offset: 0
            },
            EpochEntry {
                epoch: 1,
                start_offset: 3
            }
        ]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn no_acknowledged_record_is_lost(
        min_isr in 1i32..=3,
        events in prop::collection::vec(event(), 1..150),
    ) {
        if let Err(e) = run(min_isr, &events) {
            return Err(TestCaseError::fail(e));
        }
    }
}
