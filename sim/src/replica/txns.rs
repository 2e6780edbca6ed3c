//! The transaction coordinator of a simulated broker: the real `txn::Coordinator`
//! (`init_producer_id`, `add_partitions`, `end_txn`, `markers_written`, `tick`, `replay`,
//! `restore`, `pending_markers`), `txn::records` (its `__transaction_state` keys and values) and
//! `txn::markers` (`route`, `outcome`) over the simulated `__transaction_state` partitions this
//! broker leads. What `txn::driver` does around it is restated here (keep in step with
//! txn::driver):
//! - one step at a time: a request, a marker job, a "markers written" completion or the timers;
//!   requests wait in the inbox meanwhile (the driver's mpsc channel);
//! - a step's records are appended to their shard as one batch (`persist`: not on a follower,
//!   below the minimum ISR or on a full disk: COORDINATOR_NOT_AVAILABLE, the step undone with
//!   `restore`); the answer waits until the HW passes them (`commit`: NOT_COORDINATOR once the
//!   shard is not led at that epoch, COORDINATOR_NOT_AVAILABLE after `COMMIT_WAIT_MS`, both undo
//!   the step); then the step's marker jobs run;
//! - a marker job sends WriteTxnMarkers to each partition's leader in this broker's image
//!   (`markers::route`; a partition led here goes through the same leader path as a remote one,
//!   where the driver calls `Partition::write_txn_marker` itself: the same checks, the same wait
//!   for the HW), `markers::outcome` deciding done, fenced or retry; an unanswered send counts as
//!   retry after `MARKER_TIMEOUT`. All written: the `markers_written` step; else the job is kept
//!   with the partitions to retry after `RETRY_BACKOFF` (so is a completion that failed);
//! - a change of the led shards or of their leader epochs (between steps, as the driver's
//!   `select` on `LeadershipWatch`) waits until every gained shard's HW reached the log end it
//!   had (at most `GAINED_SHARD_WAIT`), then `change_shards`: the lost shards and those led again
//!   at another epoch are unloaded (`Coordinator::unload_shards`) with their queued marker work,
//!   the gained ones replayed to their log end at their leader epoch (`load_shards`), and their
//!   prepared transactions' markers resumed; the shards kept stay as they are. A gained shard
//!   whose HW is still below its log end waits in `pending` (its ids answer
//!   COORDINATOR_LOAD_IN_PROGRESS) until the HW reaches that end (`Driver::loading`). The first
//!   load replays every led shard (`load`);
//! - the producer ids come from a counter shared by the brokers (the controller's blocks);
//!   `transaction.version` is read from the image before each step; AddPartitionsToTxn and EndTxn
//!   are served at the client version V2 (`world::txns`), and an AddPartitionsToTxn naming a
//!   partition this broker's image lacks attempts nothing (UNKNOWN_TOPIC_OR_PARTITION, as
//!   `api::txn::add_one`: else a marker job routed against the image would skip it as deleted).
//!
//! No clock (time is an argument), no I/O.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use sluice::group::shard::shard_changes;
use sluice::metadata::MetadataImage;
use sluice::txn::coordinator::{InitInput, TxnIdentity};
use sluice::txn::end_txn::EndInput;
use sluice::txn::markers::{outcome, route, Outcome};
use sluice::txn::metadata::TxnMetadata;
use sluice::txn::records::partition_for;
use sluice::txn::{codes, txn_version, Coordinator, Effects, MarkerJob, TxnConfig};
use sluice::txn::{TxnRecord, TRANSACTION_STATE_TOPIC};

use super::{Env, Out, ReplMsg, Replicas, Role, Tp, TxnRequest};
use crate::net::{Addr, Payload, BROKER_BASE};

/// `txn::driver::COMMIT_WAIT_MS`.
const COMMIT_WAIT_MS: u64 = sluice::txn::driver::COMMIT_WAIT_MS as u64;
/// `txn::marker_channel::MARKER_TIMEOUT`.
const MARKER_TIMEOUT_MS: u64 = 5_000;
/// `txn::driver::RETRY_BACKOFF`.
const RETRY_BACKOFF_MS: u64 = 1_000;
/// `group::shard::GAINED_SHARD_WAIT`.
const GAINED_SHARD_WAIT_MS: u64 = 5_000;
/// The simulated brokers' listener (the inter-broker one).
const LISTENER: &str = "PLAINTEXT";

/// A request waiting in the inbox.
struct Inbound {
    client: Addr,
    id: u64,
    request: TxnRequest,
}

/// An answer: (client, request id, (code, producer id, producer epoch)).
type Answer = (Addr, u64, (i16, i64, i16));

/// A step whose records wait for the HW.
struct Persist {
    /// Each shard's batch: partition, leader epoch at the append, base and last offset.
    written: Vec<(Tp, i32, i64, i64)>,
    deadline: u64,
    undo: Vec<(String, Option<TxnMetadata>)>,
    answer: Option<Answer>,
    markers: Vec<MarkerJob>,
    /// A "markers written" step: kept for a retry when it fails.
    completes: Option<MarkerJob>,
}

/// A marker job whose WriteTxnMarkers are out.
struct Writing {
    job: MarkerJob,
    sent: BTreeMap<u64, (String, i32)>,
    failed: Vec<(String, i32)>,
    /// The retriable codes answered (the trace's).
    codes: Vec<i16>,
    deadline: u64,
}

enum Busy {
    Persist(Persist),
    Markers(Writing),
}

#[derive(Default)]
pub struct TxnHost {
    coordinator: Option<Coordinator>,
    /// The shards led in the image last seen and those the coordinator was loaded from
    /// (`None`: not loaded yet), each with its leader epoch.
    led: BTreeMap<i32, i32>,
    loaded: Option<BTreeMap<i32, i32>>,
    /// Loading: each gained shard's log end at the start, and the deadline.
    loading: Option<(BTreeMap<i32, i64>, u64)>,
    /// Gained shards whose HW was below their log end after the wait: shard -> (leader epoch,
    /// that log end); loaded once the HW reaches it (`Driver::loading`).
    pending: BTreeMap<i32, (i32, i64)>,
    inbox: VecDeque<Inbound>,
    busy: Option<Busy>,
    /// Marker jobs to run, completions to persist (in this order, before any request).
    jobs: VecDeque<MarkerJob>,
    completions: VecDeque<MarkerJob>,
    unwritten: Vec<MarkerJob>,
    uncompleted: Vec<MarkerJob>,
    backoff_until: u64,
    /// The marker jobs being retried (transactional id, producer id, epoch) and since when (the
    /// liveness check after the quiet period).
    retrying: BTreeMap<(String, i64, i16), u64>,
}

fn txn_tp(image: &MetadataImage, shard: i32) -> Option<Tp> {
    image.topic(TRANSACTION_STATE_TOPIC).map(|t| (t.id, shard))
}

fn txn_answer(id: u64, (code, producer_id, producer_epoch): (i16, i64, i16)) -> Payload {
    Payload::Repl(ReplMsg::TxnResponse {
        id,
        code,
        producer_id,
        producer_epoch,
    })
}

impl Replicas {
    /// Since when this broker's transaction coordinator has had markers to retry, without a
    /// break.
    pub fn markers_retrying_since(&self) -> Option<u64> {
        self.txns.retrying.values().min().copied()
    }

    /// A transactional producer's request, or a WriteTxnMarkers answer.
    pub fn on_txn_message(
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
            ReplMsg::Txn { id, request } => self.txns.inbox.push_back(Inbound {
                client: from,
                id,
                request,
            }),
            ReplMsg::ProduceResponse { id, code } => {
                if let Some(Busy::Markers(w)) = &mut self.txns.busy {
                    if let Some(tp) = w.sent.remove(&id) {
                        match outcome(code) {
                            Outcome::Done | Outcome::Fenced => env.stats.markers_written += 1,
                            Outcome::Retry => {
                                w.failed.push(tp);
                                w.codes.push(code);
                            }
                        }
                    }
                }
            }
            _ => return out,
        }
        self.pump_txns(image, env, &mut out);
        out
    }

    /// Follows the image's leadership of `__transaction_state` (at every replica tick), then
    /// runs what is due.
    pub fn sync_txns(&mut self, image: &MetadataImage, env: &mut Env, out: &mut Out) {
        let led = if self.active {
            sluice::group::shard::led_shard_epochs(image, self.id, TRANSACTION_STATE_TOPIC)
        } else {
            BTreeMap::new()
        };
        if led != self.txns.led {
            self.txns.led = led;
        }
        self.pump_txns(image, env, out);
    }

    /// Runs steps until one waits (or nothing is due).
    fn pump_txns(&mut self, image: &MetadataImage, env: &mut Env, out: &mut Out) {
        loop {
            self.check_busy(env, out);
            if self.txns.busy.is_some() {
                return;
            }
            let h = &mut self.txns;
            if h.loaded.as_ref() != Some(&h.led) && h.loading.is_none() {
                // The driver's leadership watch: wait for the gained shards, then load them.
                let before = h.loaded.clone().unwrap_or_default();
                let (gained, _) = shard_changes(&before, &h.led);
                let ends = gained
                    .keys()
                    .filter_map(|&s| {
                        let tp = txn_tp(image, s)?;
                        Some((s, self.parts.get(&tp).map_or(0, |r| r.log_end())))
                    })
                    .collect();
                let h = &mut self.txns;
                h.loading = Some((ends, env.now + GAINED_SHARD_WAIT_MS));
                if !h.led.is_empty() || !before.is_empty() {
                    env.trace.push(format!(
                        "broker {} transaction coordinator reloads (led shards {:?})",
                        self.id, h.led
                    ));
                }
            }
            if let Some((ends, deadline)) = &self.txns.loading {
                let caught_up = ends.iter().all(|(&s, &end)| {
                    txn_tp(image, s)
                        .and_then(|tp| self.parts.get(&tp))
                        .is_some_and(|r| r.high_watermark >= end)
                });
                if !caught_up && env.now < *deadline {
                    return;
                }
                self.load_txns(image, env);
            }
            if self.txns.coordinator.is_none() {
                return;
            }
            self.load_caught_up_txns(image, env);
            let now = env.now;
            let h = &mut self.txns;
            if let Some(job) = h.completions.pop_front() {
                let c = h.coordinator.as_mut().expect("loaded");
                let fx = c.markers_written(now as i64, &job);
                self.apply_txn_step(fx, None, Some(job), image, env, out);
            } else if let Some(job) = h.jobs.pop_front() {
                self.start_markers(job, image, env, out);
            } else if let Some(req) = h.inbox.pop_front() {
                self.serve_txn(req, image, env, out);
            } else if now >= h.backoff_until
                && !(h.unwritten.is_empty() && h.uncompleted.is_empty())
            {
                // The driver's `tick`: the markers to retry, then the completions.
                let unwritten = std::mem::take(&mut h.unwritten);
                h.jobs.extend(unwritten);
                let uncompleted = std::mem::take(&mut h.uncompleted);
                h.completions.extend(uncompleted);
            } else {
                let c = h.coordinator.as_mut().expect("loaded");
                let due = c.next_deadline().is_some_and(|d| d <= now as i64);
                if !due || now < h.backoff_until {
                    return;
                }
                c.config.transaction_version = image.finalized_level(txn_version::FEATURE);
                let fx = c.tick(now as i64);
                if fx.records.is_empty() {
                    return;
                }
                self.apply_txn_step(fx, None, None, image, env, out);
            }
        }
    }

    /// `driver::load` (the first time) or `Driver::change_shards`: the shards lost or led at
    /// another epoch unloaded with their queued marker work, the gained ones replayed to their
    /// log end at their leader epoch (`load_shards`) and their prepared transactions' markers
    /// queued.
    fn load_txns(&mut self, image: &MetadataImage, env: &mut Env) {
        let h = &mut self.txns;
        let before = h.loaded.clone().unwrap_or_default();
        let (gained, mut changed) = shard_changes(&before, &h.led);
        changed.extend(gained.keys().copied());
        h.pending.retain(|s, _| !changed.contains(s));
        // `change_shards`: a gained shard whose HW is below its log end waits in `pending`.
        let mut ready = BTreeMap::new();
        for (s, epoch) in gained {
            let end = txn_tp(image, s)
                .and_then(|tp| self.parts.get(&tp))
                .filter(|r| r.high_watermark < r.log_end())
                .map(|r| r.log_end());
            match end {
                Some(end) => {
                    self.txns.pending.insert(s, (epoch, end));
                }
                None => {
                    ready.insert(s, epoch);
                }
            }
        }
        self.change_txn_shards(ready, changed, image, env);
        let h = &mut self.txns;
        h.loaded = Some(h.led.clone());
        h.loading = None;
    }

    /// `Driver::load_caught_up`: the pending shards whose HW reached their log end are loaded.
    fn load_caught_up_txns(&mut self, image: &MetadataImage, env: &mut Env) {
        let ready: BTreeMap<i32, i32> = self
            .txns
            .pending
            .iter()
            .filter(|(&s, &(_, end))| {
                txn_tp(image, s)
                    .and_then(|tp| self.parts.get(&tp))
                    .is_some_and(|r| r.high_watermark >= end)
            })
            .map(|(&s, &(epoch, _))| (s, epoch))
            .collect();
        if ready.is_empty() {
            return;
        }
        self.txns.pending.retain(|s, _| !ready.contains_key(s));
        self.change_txn_shards(ready, BTreeSet::new(), image, env);
    }

    /// `Driver::change_shards` once the gained shards are ready: the `changed` shards unloaded
    /// with their queued marker work, the `gained` ones replayed at their leader epoch and their
    /// prepared transactions' markers queued.
    fn change_txn_shards(
        &mut self,
        gained: BTreeMap<i32, i32>,
        changed: BTreeSet<i32>,
        image: &MetadataImage,
        env: &mut Env,
    ) {
        let h = &mut self.txns;
        let shard_count = image
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(0, |t| t.partition_count());
        let mut c = h.coordinator.take().unwrap_or_else(|| {
            let mut config = TxnConfig {
                commit_wait_ms: COMMIT_WAIT_MS as i64,
                ..TxnConfig::default()
            };
            config.transaction_version = image.finalized_level(txn_version::FEATURE);
            Coordinator::new(config)
        });
        c.unload_shards(shard_count, &changed);
        for (&s, &epoch) in &gained {
            c.loaded_shard(shard_count, s, epoch);
            let Some(r) = txn_tp(image, s).and_then(|tp| self.parts.get(&tp)) else {
                continue;
            };
            for rec in &r.log {
                if let Some(kv) = &rec.kv {
                    c.replay(&kv.0, kv.1.as_deref());
                }
            }
        }
        let h = &mut self.txns;
        let unloaded = |j: &MarkerJob| c.in_shards(&j.transactional_id, &changed);
        h.jobs.retain(|j| !unloaded(j));
        h.completions.retain(|j| !unloaded(j));
        h.unwritten.retain(|j| !unloaded(j));
        h.uncompleted.retain(|j| !unloaded(j));
        h.retrying
            .retain(|(id, _, _), _| !c.in_shards(id, &changed));
        let shards: BTreeSet<i32> = gained.keys().copied().collect();
        h.jobs.extend(
            c.pending_markers()
                .into_iter()
                .filter(|j| c.in_shards(&j.transactional_id, &shards)),
        );
        h.coordinator = Some(c);
        if !gained.is_empty() {
            env.stats.txn_coordinator_loads += 1;
        }
    }

    /// Serves one request (`driver::serve`).
    fn serve_txn(&mut self, req: Inbound, image: &MetadataImage, env: &mut Env, out: &mut Out) {
        let Inbound {
            client,
            id,
            request,
        } = req;
        let me = self.id;
        let txn_id = request.transactional_id().to_string();
        if let Err(e) =
            sluice::group::shard::coordinator_shard(image, me, TRANSACTION_STATE_TOPIC, &txn_id)
        {
            return out.push((client, txn_answer(id, (e.code(), -1, -1))));
        }
        // `Driver::refuse_while_loading`.
        let count = image
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(1, |t| t.partition_count().max(1));
        if self
            .txns
            .pending
            .contains_key(&partition_for(&txn_id, count))
        {
            let code = codes::COORDINATOR_LOAD_IN_PROGRESS;
            return out.push((client, txn_answer(id, (code, -1, -1))));
        }
        let c = self.txns.coordinator.as_mut().expect("loaded");
        c.config.transaction_version = image.finalized_level(txn_version::FEATURE);
        let now = env.now as i64;
        let (answer, fx) = match request {
            TxnRequest::InitProducerId {
                timeout_ms,
                expected,
                ..
            } => {
                let mut input = InitInput {
                    transactional_id: txn_id.clone(),
                    timeout_ms,
                    expected,
                    fresh_producer_id: None,
                };
                if c.needs_producer_id(&txn_id, expected) {
                    *env.producer_ids += 1;
                    input.fresh_producer_id = Some(*env.producer_ids);
                }
                let (a, fx) = c.init_producer_id(now, input);
                ((a.error, a.producer_id, a.producer_epoch), fx)
            }
            TxnRequest::AddPartitionsToTxn {
                producer_id,
                producer_epoch,
                partitions,
                ..
            } => {
                // `api::txn::add_one`: a partition unknown to this broker's image attempts
                // nothing (UNKNOWN_TOPIC_OR_PARTITION, retriable).
                if partitions
                    .iter()
                    .any(|(t, p)| image.partition(t, *p).is_none())
                {
                    let code = codes::UNKNOWN_TOPIC_OR_PARTITION;
                    return out.push((client, txn_answer(id, (code, -1, -1))));
                }
                let who = TxnIdentity {
                    transactional_id: &txn_id,
                    producer_id,
                    producer_epoch,
                };
                let (code, fx) = c.add_partitions(now, who, &partitions, txn_version::V2);
                ((code, -1, -1), fx)
            }
            TxnRequest::EndTxn {
                producer_id,
                producer_epoch,
                commit,
                ..
            } => {
                let who = TxnIdentity {
                    transactional_id: &txn_id,
                    producer_id,
                    producer_epoch,
                };
                let mut fresh_producer_id = None;
                if c.end_txn_needs_producer_id(&txn_id, txn_version::V2) {
                    *env.producer_ids += 1;
                    fresh_producer_id = Some(*env.producer_ids);
                }
                let input = EndInput {
                    who,
                    commit,
                    client_version: txn_version::V2,
                    fresh_producer_id,
                };
                let (a, fx) = c.end_txn(now, input);
                ((a.error, a.producer_id, a.producer_epoch), fx)
            }
        };
        self.apply_txn_step(fx, Some((client, id, answer)), None, image, env, out);
    }

    /// `driver::apply`: appends the step's records (one batch per shard) and waits for the HW;
    /// without records the answer goes at once and the markers follow.
    fn apply_txn_step(
        &mut self,
        fx: Effects,
        answer: Option<Answer>,
        completes: Option<MarkerJob>,
        image: &MetadataImage,
        env: &mut Env,
        out: &mut Out,
    ) {
        if fx.records.is_empty() {
            if let Some((client, id, a)) = answer {
                out.push((client, txn_answer(id, a)));
            }
            self.txns.jobs.extend(fx.markers);
            return;
        }
        let count = image
            .topic(TRANSACTION_STATE_TOPIC)
            .map_or(0, |t| t.partition_count());
        let mut by_shard: BTreeMap<i32, Vec<&TxnRecord>> = BTreeMap::new();
        for r in &fx.records {
            let shard = partition_for(&r.transactional_id, count.max(1));
            by_shard.entry(shard).or_default().push(r);
        }
        // `persist`: every shard's leader here, its ISR at the minimum, the disk not full.
        let full = env.now < self.disk_full_until;
        let appendable = !full
            && by_shard.keys().all(|&s| {
                txn_tp(image, s)
                    .and_then(|tp| self.parts.get(&tp))
                    .and_then(|r| r.leader())
                    .is_some_and(|l| l.check_acks_all_append().is_ok())
            });
        if !appendable {
            if full {
                env.stats.storage_errors += 1;
            }
            return self.fail_txn_step(
                fx.undo,
                answer,
                completes,
                codes::COORDINATOR_NOT_AVAILABLE,
                env,
                out,
            );
        }
        let me = self.id;
        let mut written = Vec::new();
        for (shard, records) in by_shard {
            let Some(tp) = txn_tp(image, shard) else {
                continue;
            };
            let Some(r) = self.parts.get_mut(&tp) else {
                continue;
            };
            let Role::Leader(l) = &mut r.role else {
                continue;
            };
            let epoch = l.leader.leader_epoch();
            let kvs = records.iter().map(|tr| (tr.key.clone(), tr.value.clone()));
            let (base, end) = r.append_records(me, epoch, kvs, env);
            written.push((tp, epoch, base, end - 1));
            if let Role::Leader(l) = &mut r.role {
                let effects = l.leader.on_append(end, env.now as i64);
                super::leading::perform(me, tp, r, effects, env, out);
            }
        }
        self.txns.busy = Some(Busy::Persist(Persist {
            written,
            deadline: env.now + COMMIT_WAIT_MS,
            undo: fx.undo,
            answer,
            markers: fx.markers,
            completes,
        }));
    }

    /// A step whose records were not appended or not committed: undone, answered `code`; a
    /// completion is kept for a retry; timers and retries wait for the backoff.
    fn fail_txn_step(
        &mut self,
        undo: Vec<(String, Option<TxnMetadata>)>,
        answer: Option<Answer>,
        completes: Option<MarkerJob>,
        code: i16,
        env: &mut Env,
        out: &mut Out,
    ) {
        let h = &mut self.txns;
        if let Some(c) = h.coordinator.as_mut() {
            c.restore(undo);
        }
        match answer {
            Some((client, id, _)) => out.push((client, txn_answer(id, (code, -1, -1)))),
            None => h.backoff_until = env.now + RETRY_BACKOFF_MS,
        }
        if let Some(job) = completes {
            h.uncompleted.push(job);
        }
    }

    /// Sends a marker job's WriteTxnMarkers (`driver::write_markers`).
    fn start_markers(
        &mut self,
        job: MarkerJob,
        image: &MetadataImage,
        env: &mut Env,
        out: &mut Out,
    ) {
        let me = self.id;
        let rt = route(image, me, LISTENER, &job.partitions);
        env.markers_skipped.extend(rt.gone.iter().cloned());
        let mut targets: Vec<(i32, (String, i32))> =
            rt.local.iter().map(|tp| (me, tp.clone())).collect();
        for (leader, remote) in &rt.remote {
            targets.extend(remote.partitions.iter().map(|tp| (*leader, tp.clone())));
        }
        let mut sent = BTreeMap::new();
        for (leader, (topic, p)) in targets {
            let Some(t) = image.topic(&topic) else {
                continue;
            };
            let id = self.next_id();
            let msg = ReplMsg::WriteTxnMarker {
                id,
                tp: (t.id, p),
                topic: topic.clone(),
                producer_id: job.producer_id,
                producer_epoch: job.producer_epoch,
                coordinator_epoch: job.coordinator_epoch,
                control: job.control,
            };
            out.push((BROKER_BASE + leader, Payload::Repl(msg)));
            sent.insert(id, (topic, p));
        }
        self.txns.busy = Some(Busy::Markers(Writing {
            job,
            sent,
            failed: rt.unavailable,
            codes: Vec::new(),
            deadline: env.now + MARKER_TIMEOUT_MS,
        }));
    }

    /// Finishes the busy step once it is decided.
    fn check_busy(&mut self, env: &mut Env, out: &mut Out) {
        let now = env.now;
        match self.txns.busy.take() {
            None => {}
            Some(Busy::Persist(p)) => {
                let mut code = codes::NONE;
                for &(tp, epoch, _, last) in &p.written {
                    let r = self.parts.get(&tp);
                    let leads = r
                        .and_then(|r| r.leader())
                        .is_some_and(|l| l.leader_epoch() == epoch);
                    if !leads {
                        code = codes::NOT_COORDINATOR;
                        break;
                    }
                    if r.is_some_and(|r| r.high_watermark <= last) {
                        code = codes::COORDINATOR_NOT_AVAILABLE;
                    }
                }
                if code == codes::COORDINATOR_NOT_AVAILABLE && now < p.deadline {
                    self.txns.busy = Some(Busy::Persist(p));
                    return;
                }
                if code != codes::NONE {
                    return self.fail_txn_step(p.undo, p.answer, p.completes, code, env, out);
                }
                for &(tp, epoch, base, last) in &p.written {
                    if let Some(r) = self.parts.get(&tp) {
                        // The coordinator's committed state is promised as an acks=all batch.
                        env.check
                            .on_acked(tp, epoch, base, &r.log[base as usize..=last as usize]);
                    }
                }
                if let Some((client, id, a)) = p.answer {
                    out.push((client, txn_answer(id, a)));
                }
                self.txns.jobs.extend(p.markers);
            }
            Some(Busy::Markers(mut w)) => {
                if !w.sent.is_empty() && now < w.deadline {
                    self.txns.busy = Some(Busy::Markers(w));
                    return;
                }
                w.failed.extend(std::mem::take(&mut w.sent).into_values());
                let h = &mut self.txns;
                if w.failed.is_empty() {
                    let job = &w.job;
                    let key = (
                        job.transactional_id.clone(),
                        job.producer_id,
                        job.producer_epoch,
                    );
                    h.retrying.remove(&key);
                    h.completions.push_back(w.job);
                } else {
                    env.trace.push(format!(
                        "broker {} retries {} {:?} marker(s) of {} {:?} (answers {:?})",
                        self.id,
                        w.failed.len(),
                        w.job.control,
                        w.job.transactional_id,
                        w.failed,
                        w.codes
                    ));
                    w.job.partitions = w.failed;
                    let key = (
                        w.job.transactional_id.clone(),
                        w.job.producer_id,
                        w.job.producer_epoch,
                    );
                    h.retrying.entry(key).or_insert(now);
                    h.unwritten.push(w.job);
                    h.backoff_until = now + RETRY_BACKOFF_MS;
                }
            }
        }
    }
}
