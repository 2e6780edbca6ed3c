//! The share-partition leader's side of the share-state RPCs (Kafka's `PersisterStateManager`):
//! the state of a key whose `__share_group_state` partition another broker leads is read with
//! ReadShareGroupState, created with InitializeShareGroupState and written with
//! WriteShareGroupState (v0) at that broker, the leader of the key's state partition in the
//! metadata image, on its inter-broker listener.
//!
//! Jobs queue per state partition and run one at a time, in order (a WriteShareGroupState is a
//! delta, so two writes of one key must not pass each other): [`Outbox::submit`] spawns the
//! partition's worker on first use. While a partition has queued jobs, `share_state::route`
//! sends that partition's new jobs to the queue even when this broker now leads it, so a change
//! never overtakes an older one; a worker that finds the partition led here runs the job on the
//! local coordinator. A job retries NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//! COORDINATOR_NOT_AVAILABLE and unreachable brokers (the leader is looked up again each time,
//! every 100 ms) until `share.coordinator.write.timeout.ms`, then answers REQUEST_TIMED_OUT. A
//! write sent again after an unknown outcome is harmless: folding the same delta twice gives the
//! same state. A write the coordinator refuses as uninitialized (its state was deleted) first
//! initializes the key at the write's start offset (else its first batch's).
//!
//! Bounds: at most [`MAX_QUEUED`] jobs queued in all (beyond: COORDINATOR_NOT_AVAILABLE at
//! once); one connection per request (`txn::marker_channel::call`, 5 s; no pool yet). Workers
//! hold the broker weakly and end with it.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use kafka_protocol::messages::{
    delete_share_group_state_request as dq, initialize_share_group_state_request as iq,
    read_share_group_state_request as rq, read_share_group_state_summary_request as sq,
    write_share_group_state_request as wq, DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::broker::Broker;
use crate::group::codes;
use crate::internal_topic::{committed, NotCommitted, Written};
use crate::share::coordinator::WriteState;
use crate::share::persist::{PersisterStateBatch, ShareSnapshot};
use crate::share::registry::ShareKey;
use crate::share::state_records::{coordinator_key, SHARE_STATE_TOPIC};

/// The most jobs queued over every state partition.
pub const MAX_QUEUED: usize = 10_000;
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The share-state RPCs' version (the only one Kafka 4.1 has).
const VERSION: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const REQUEST_TIMED_OUT: i16 = 7;

/// A share-state read or write of one key.
pub enum Job {
    /// ReadShareGroupState at the share-partition's leader epoch: the state, `None` when the key
    /// has none, or the error code.
    Read {
        key: ShareKey,
        leader_epoch: i32,
        reply: oneshot::Sender<Result<Option<ShareSnapshot>, i16>>,
    },
    /// InitializeShareGroupState (a share-partition's first use found no state); not answered.
    Initialize {
        key: ShareKey,
        state_epoch: i32,
        start_offset: i64,
    },
    /// ReadShareGroupStateSummary: the start offset and leader epoch, `None` without state.
    Summary {
        key: ShareKey,
        reply: oneshot::Sender<Result<Option<(i64, i32)>, i16>>,
    },
    /// AlterShareGroupOffsets: the key starts afresh at `start_offset` with a state epoch one
    /// past the stored one (ReadShareGroupStateSummary, then InitializeShareGroupState), so a
    /// share-partition leader writing the old state is fenced. The code once committed.
    Reinitialize {
        key: ShareKey,
        start_offset: i64,
        reply: oneshot::Sender<i16>,
    },
    /// DeleteShareGroupState (DeleteShareGroupOffsets): the code once committed.
    Delete {
        key: ShareKey,
        reply: oneshot::Sender<i16>,
    },
    /// WriteShareGroupState: the code once committed at the share coordinator.
    Write {
        key: ShareKey,
        write: WriteState,
        reply: oneshot::Sender<i16>,
    },
}

/// The per-state-partition queues of one broker.
pub struct Outbox {
    broker: Weak<Broker>,
    queues: parking_lot::Mutex<Queues>,
}

#[derive(Default)]
struct Queues {
    senders: HashMap<i32, mpsc::UnboundedSender<Job>>,
    /// Jobs submitted and not finished, per state partition.
    pending: HashMap<i32, usize>,
    total: usize,
}

impl Outbox {
    pub fn new(broker: Weak<Broker>) -> Outbox {
        Outbox {
            broker,
            queues: parking_lot::Mutex::new(Queues::default()),
        }
    }

    /// Whether jobs of state partition `partition` are queued or running.
    pub fn busy(&self, partition: i32) -> bool {
        self.queues
            .lock()
            .pending
            .get(&partition)
            .is_some_and(|n| *n > 0)
    }

    /// Queues `job` behind the other jobs of state partition `partition`. Err:
    /// COORDINATOR_NOT_AVAILABLE when [`MAX_QUEUED`] jobs wait already or no runtime runs.
    pub fn submit(&self, partition: i32, job: Job) -> Result<(), i16> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| codes::COORDINATOR_NOT_AVAILABLE)?;
        let mut q = self.queues.lock();
        if q.total >= MAX_QUEUED {
            tracing::warn!("share state: {MAX_QUEUED} reads and writes queued already; refusing");
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        let broker = self.broker.clone();
        let sender = q.senders.entry(partition).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            runtime.spawn(work(broker, partition, rx));
            tx
        });
        if sender.send(job).is_err() {
            q.senders.remove(&partition);
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        *q.pending.entry(partition).or_default() += 1;
        q.total += 1;
        Ok(())
    }

    fn finished(&self, partition: i32) {
        let mut q = self.queues.lock();
        if let Some(n) = q.pending.get_mut(&partition) {
            *n = n.saturating_sub(1);
        }
        q.total = q.total.saturating_sub(1);
    }
}

/// Reads `key`'s state through its state partition's queue (the partition's leader, or the local
/// coordinator once it leads here).
pub async fn read(
    broker: &Broker,
    partition: i32,
    key: &ShareKey,
    leader_epoch: i32,
) -> Result<Option<ShareSnapshot>, i16> {
    let (reply, answer) = oneshot::channel();
    let job = Job::Read {
        key: key.clone(),
        leader_epoch,
        reply,
    };
    broker.share_remote.submit(partition, job)?;
    answer
        .await
        .unwrap_or(Err(codes::COORDINATOR_NOT_AVAILABLE))
}

/// The start offset and leader epoch of `key` (DescribeShareGroupOffsets) through its state
/// partition's queue.
pub async fn summary(
    broker: &Broker,
    partition: i32,
    key: &ShareKey,
) -> Result<Option<(i64, i32)>, i16> {
    let (reply, answer) = oneshot::channel();
    let job = Job::Summary {
        key: key.clone(),
        reply,
    };
    broker.share_remote.submit(partition, job)?;
    answer
        .await
        .unwrap_or(Err(codes::COORDINATOR_NOT_AVAILABLE))
}

async fn work(broker: Weak<Broker>, partition: i32, mut jobs: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = jobs.recv().await {
        let Some(b) = broker.upgrade() else {
            return;
        };
        run(&b, partition, job).await;
        b.share_remote.finished(partition);
    }
}

async fn run(b: &Broker, shard: i32, job: Job) {
    match job {
        Job::Read {
            key,
            leader_epoch,
            reply,
        } => {
            let _ = reply.send(read_state(b, shard, &key, leader_epoch).await);
        }
        Job::Initialize {
            key,
            state_epoch,
            start_offset,
        } => {
            let code = initialize_state(b, shard, &key, state_epoch, start_offset).await;
            if code != codes::NONE {
                tracing::warn!("share-partition {key:?}: state not initialized (error {code})");
            }
        }
        Job::Reinitialize {
            key,
            start_offset,
            reply,
        } => {
            let code = match summary_state(b, shard, &key).await {
                Ok(summary) => {
                    let epoch = summary.map_or(0, |s| s.2.saturating_add(1));
                    initialize_state(b, shard, &key, epoch, start_offset).await
                }
                Err(code) => code,
            };
            let _ = reply.send(code);
        }
        Job::Delete { key, reply } => {
            let _ = reply.send(delete_state(b, shard, &key).await);
        }
        Job::Summary { key, reply } => {
            let summary = summary_state(b, shard, &key).await;
            let _ = reply.send(summary.map(|s| s.map(|(start, leader, _)| (start, leader))));
        }
        Job::Write { key, write, reply } => {
            let code = write_state(b, shard, &key, &write).await;
            if code != codes::NONE {
                tracing::warn!("share-partition {key:?}: state not written (error {code})");
            }
            // Initialized anew meanwhile (AlterShareGroupOffsets): the share-partition is
            // dropped here so that its next use reads the new state.
            if code == crate::share::coordinator::FENCED_STATE_EPOCH {
                b.shares.lock().remove(&key);
            }
            let _ = reply.send(code);
        }
    }
}

/// Where a key's state is served now.
enum Where {
    Here,
    There { id: i32, host: String, port: u16 },
    Nobody,
}

fn locate(b: &Broker, key: &ShareKey) -> Where {
    use crate::group::shard::{coordinator_shard, NotHere};
    let image = b.image();
    let me = b.identity.node_id;
    match coordinator_shard(&image, me, SHARE_STATE_TOPIC, &coordinator_key(key)) {
        Ok(_) | Err(NotHere::NoTopic) => Where::Here,
        Err(NotHere::NoLeader) => Where::Nobody,
        Err(NotHere::Remote { leader }) => {
            let listener = crate::txn::marker_channel::inter_broker_listener(&b.config);
            match image.broker(leader).and_then(|r| r.endpoint(&listener)) {
                Some(e) => Where::There {
                    id: leader,
                    host: e.host.clone(),
                    port: e.port,
                },
                None => Where::Nobody,
            }
        }
    }
}

fn retriable(code: i16) -> bool {
    matches!(
        code,
        codes::NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS | codes::COORDINATOR_NOT_AVAILABLE
    )
}

/// Runs one job against wherever `key` is served: `here` on the local coordinator (its state
/// partition reloaded first), `there` as a request to the leader. A retriable code (and no
/// leader, or no answer) is tried again every [`RETRY_BACKOFF`], the leader looked up again,
/// until `share.coordinator.write.timeout.ms`, then REQUEST_TIMED_OUT.
async fn retrying<T, H, HF, R, RF>(
    b: &Broker,
    shard: i32,
    key: &ShareKey,
    mut here: H,
    mut there: R,
) -> Result<T, i16>
where
    H: FnMut(Instant) -> HF,
    HF: std::future::Future<Output = Result<T, i16>>,
    R: FnMut(i32, String, u16) -> RF,
    RF: std::future::Future<Output = Result<T, i16>>,
{
    let ms = b.config.share_coordinator_write_timeout_ms.max(0) as u64;
    let deadline = Instant::now() + Duration::from_millis(ms);
    loop {
        let outcome = match locate(b, key) {
            Where::Here => {
                crate::share_state::ensure_fresh(b, shard).await;
                here(deadline).await
            }
            Where::There { id, host, port } => there(id, host, port).await,
            Where::Nobody => Err(codes::COORDINATOR_NOT_AVAILABLE),
        };
        match outcome {
            Err(code) if retriable(code) => {
                if Instant::now() + RETRY_BACKOFF >= deadline {
                    return Err(REQUEST_TIMED_OUT);
                }
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            done => return done,
        }
    }
}

/// A local append's outcome once committed (or not) by `deadline`.
async fn committed_by(written: Result<Vec<Written>, i16>, deadline: Instant) -> Result<(), i16> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .as_millis() as i64;
    match committed(&written?, left).await {
        Ok(()) => Ok(()),
        Err(NotCommitted::TimedOut) => Err(REQUEST_TIMED_OUT),
        Err(NotCommitted::NotLeader) => Err(codes::NOT_COORDINATOR),
    }
}

/// One request to broker `id`; `None` (one debug line) when it did not answer.
async fn call<R: kafka_protocol::protocol::Request>(
    b: &Broker,
    id: i32,
    (host, port): (&str, u16),
    request: &R,
) -> Option<R::Response> {
    let client_id = format!("sluice-share-persister-{}", b.identity.node_id);
    match crate::txn::marker_channel::call(host, port, &client_id, VERSION, request).await {
        Ok(r) => Some(r),
        Err(e) => {
            tracing::debug!("share state at broker {id}: {e}");
            None
        }
    }
}

/// The one partition a share-state answer carries (no answer: retriable).
macro_rules! only_partition {
    ($answer:expr) => {
        match $answer {
            None => Err(codes::COORDINATOR_NOT_AVAILABLE),
            Some(r) => r
                .results
                .into_iter()
                .next()
                .and_then(|t| t.partitions.into_iter().next())
                .ok_or(codes::UNKNOWN_SERVER_ERROR),
        }
    };
}

/// The code of the one partition a share-state answer carries, as a result.
macro_rules! only_code {
    ($answer:expr) => {
        only_partition!($answer).and_then(|p| match p.error_code {
            codes::NONE => Ok(()),
            code => Err(code),
        })
    };
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn code_of(outcome: Result<(), i16>) -> i16 {
    outcome.err().unwrap_or(codes::NONE)
}

async fn write_once(b: &Broker, shard: i32, key: &ShareKey, w: &WriteState) -> Result<(), i16> {
    let request = &write_request(key, w);
    retrying(
        b,
        shard,
        key,
        move |deadline| async move {
            let now = crate::broker::now_ms();
            committed_by(crate::share_state::write_here(b, key, w, now), deadline).await
        },
        move |id, host, port| async move { only_code!(call(b, id, (&host, port), request).await) },
    )
    .await
}

async fn write_state(b: &Broker, shard: i32, key: &ShareKey, w: &WriteState) -> i16 {
    match write_once(b, shard, key, w).await {
        // Its state was deleted (or never initialized): created at the write's start, then
        // written.
        Err(codes::INVALID_REQUEST) => {
            let start = if w.start_offset >= 0 {
                w.start_offset
            } else {
                w.state_batches.first().map_or(0, |b| b.first_offset)
            };
            match initialize_state(b, shard, key, w.state_epoch.max(0), start).await {
                codes::NONE => code_of(write_once(b, shard, key, w).await),
                code => code,
            }
        }
        outcome => code_of(outcome),
    }
}

async fn initialize_state(
    b: &Broker,
    shard: i32,
    key: &ShareKey,
    state_epoch: i32,
    start: i64,
) -> i16 {
    let request = &InitializeShareGroupStateRequest::default()
        .with_group_id(sb(&key.group_id))
        .with_topics(vec![iq::InitializeStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![iq::PartitionData::default()
                .with_partition(key.partition)
                .with_state_epoch(state_epoch)
                .with_start_offset(start)])]);
    let outcome = retrying(
        b,
        shard,
        key,
        move |deadline| async move {
            let now = crate::broker::now_ms();
            let written = crate::share_state::initialize_here(b, key, state_epoch, start, now);
            committed_by(written, deadline).await
        },
        move |id, host, port| async move { only_code!(call(b, id, (&host, port), request).await) },
    )
    .await;
    code_of(outcome)
}

async fn delete_state(b: &Broker, shard: i32, key: &ShareKey) -> i16 {
    let request = &DeleteShareGroupStateRequest::default()
        .with_group_id(sb(&key.group_id))
        .with_topics(vec![dq::DeleteStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![
                dq::PartitionData::default().with_partition(key.partition)
            ])]);
    let outcome = retrying(
        b,
        shard,
        key,
        move |deadline| async move {
            let now = crate::broker::now_ms();
            committed_by(crate::share_state::delete_here(b, key, now), deadline).await
        },
        move |id, host, port| async move { only_code!(call(b, id, (&host, port), request).await) },
    )
    .await;
    code_of(outcome)
}

async fn read_state(
    b: &Broker,
    shard: i32,
    key: &ShareKey,
    leader_epoch: i32,
) -> Result<Option<ShareSnapshot>, i16> {
    let request = &ReadShareGroupStateRequest::default()
        .with_group_id(sb(&key.group_id))
        .with_topics(vec![rq::ReadStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![rq::PartitionData::default()
                .with_partition(key.partition)
                .with_leader_epoch(leader_epoch)])]);
    retrying(
        b,
        shard,
        key,
        move |_| async move {
            let now = crate::broker::now_ms();
            Ok(crate::share_state::initial_snapshot(b, key, now))
        },
        move |id, host, port| async move {
            let p = only_partition!(call(b, id, (&host, port), request).await)?;
            match p.error_code {
                codes::NONE => Ok(Some(snapshot_of(&p, leader_epoch, crate::broker::now_ms()))),
                // Kafka's answer for a key without state.
                codes::INVALID_REQUEST => Ok(None),
                code => Err(code),
            }
        },
    )
    .await
}

/// (start offset, leader epoch, state epoch) of `key`, `None` without state.
async fn summary_state(
    b: &Broker,
    shard: i32,
    key: &ShareKey,
) -> Result<Option<(i64, i32, i32)>, i16> {
    let request = &ReadShareGroupStateSummaryRequest::default()
        .with_group_id(sb(&key.group_id))
        .with_topics(vec![sq::ReadStateSummaryData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![sq::PartitionData::default()
                .with_partition(key.partition)
                .with_leader_epoch(0)])]);
    retrying(
        b,
        shard,
        key,
        move |_| async move {
            let now = crate::broker::now_ms();
            Ok(crate::share_state::summary_with_epoch(b, key, now))
        },
        move |id, host, port| async move {
            let p = only_partition!(call(b, id, (&host, port), request).await)?;
            match p.error_code {
                // Kafka's answer without state: start offset -1.
                codes::NONE if p.start_offset < 0 => Ok(None),
                codes::NONE => Ok(Some((p.start_offset, p.leader_epoch, p.state_epoch))),
                code => Err(code),
            }
        },
    )
    .await
}

/// The state a ReadShareGroupState answered, as the snapshot a share-partition starts from.
fn snapshot_of(
    p: &kafka_protocol::messages::read_share_group_state_response::PartitionResult,
    leader_epoch: i32,
    now: i64,
) -> ShareSnapshot {
    ShareSnapshot {
        snapshot_epoch: 0,
        state_epoch: p.state_epoch,
        leader_epoch,
        start_offset: p.start_offset,
        create_timestamp_ms: now,
        write_timestamp_ms: now,
        state_batches: p
            .state_batches
            .iter()
            .map(|b| PersisterStateBatch {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                delivery_state: b.delivery_state,
                delivery_count: b.delivery_count,
            })
            .collect(),
    }
}

fn write_request(key: &ShareKey, w: &WriteState) -> WriteShareGroupStateRequest {
    let batches = w.state_batches.iter().map(|b| {
        wq::StateBatch::default()
            .with_first_offset(b.first_offset)
            .with_last_offset(b.last_offset)
            .with_delivery_state(b.delivery_state)
            .with_delivery_count(b.delivery_count)
    });
    WriteShareGroupStateRequest::default()
        .with_group_id(sb(&key.group_id))
        .with_topics(vec![wq::WriteStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![wq::PartitionData::default()
                .with_partition(key.partition)
                .with_state_epoch(w.state_epoch)
                .with_leader_epoch(w.leader_epoch)
                .with_start_offset(w.start_offset)
                .with_state_batches(batches.collect())])])
}

#[cfg(test)]
#[path = "share_state_remote_tests.rs"]
mod tests;
