//! The transaction coordinator's async driver: one task owns the [`Coordinator`], takes requests
//! from an mpsc channel and answers on oneshots. Each step's records are appended to
//! `__transaction_state` before its answer is sent; then the step's marker jobs run (a control
//! batch per partition via `Partition::write_txn_marker`, then the group coordinator hears about
//! `__consumer_offsets` partitions) and their "markers written" step is persisted as
//! CompleteCommit/CompleteAbort. After every step the [`TxnView`] is republished for the produce
//! path. The task sleeps until the earliest transaction deadline (`sleep_until`, never polling).
//! Under the flush policy the appends, markers and their fsyncs run on tokio's blocking pool,
//! awaited by the task; a step that panics is caught and the state rebuilt from
//! `__transaction_state` (prepared transactions then resume their markers).
//!
//! [`TxnHandle`] is the cheap, cloneable, thread-safe sending side the API handlers use.
//! [`load`] rebuilds the coordinator from `__transaction_state` at startup; transactions found in
//! PrepareCommit/PrepareAbort get their markers written when the task starts.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::describe_transactions_response::TransactionState as DescribedTxn;
use kafka_protocol::messages::ListTransactionsResponse;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::coordinator::{Coordinator, InitAnswer, InitInput, TxnIdentity};
use super::end_txn::{EndAnswer, EndInput};
use super::list::ListFilter;
use super::records::TRANSACTION_STATE_TOPIC;
use super::view::TxnView;
use super::{codes, Effects, MarkerJob, TxnConfig, TxnRecord};
use crate::broker::{now_ms, Broker};
use crate::internal_topic::{
    all_committed, append_by_key, catch_step, committed, off_worker, replay_led, NotCommitted,
    Replayed, Written,
};
use crate::replica::partition::AppendError;

/// A transactional request's identity, owned.
#[derive(Debug, Clone)]
pub struct Identity {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl Identity {
    fn borrow(&self) -> TxnIdentity<'_> {
        TxnIdentity {
            transactional_id: &self.transactional_id,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
        }
    }
}

/// An AddPartitions request: who, which partitions, the client's transaction version.
#[derive(Debug, Clone)]
pub struct AddInput {
    pub who: Identity,
    pub partitions: Vec<(String, i32)>,
    pub client_version: i16,
}

/// An EndTxn request: who, commit or abort, the client's transaction version.
#[derive(Debug, Clone)]
pub struct EndTxnInput {
    pub who: Identity,
    pub commit: bool,
    pub client_version: i16,
}

/// Requests the coordinator task serves.
pub enum Request {
    InitProducerId(InitInput, oneshot::Sender<InitAnswer>),
    /// Add partitions to the transaction (AddPartitionsToTxn / AddOffsetsToTxn, or the implicit
    /// add of a Transactions V2 Produce / TxnOffsetCommit); the answer is one error code for all
    /// of them.
    AddPartitions(AddInput, oneshot::Sender<i16>),
    /// AddPartitionsToTxn v4+ `verify_only`: one code per partition.
    Verify(Identity, Vec<(String, i32)>, oneshot::Sender<Vec<i16>>),
    /// EndTxn: commit (true) or abort, at the client's transaction version.
    EndTxn(EndTxnInput, oneshot::Sender<EndAnswer>),
    Describe(Vec<String>, oneshot::Sender<Vec<DescribedTxn>>),
    List(ListFilter, oneshot::Sender<ListTransactionsResponse>),
    /// Tests: the step panics (the driver must catch it and keep serving).
    #[cfg(test)]
    PanicForTest,
}

/// The sending side of the coordinator task plus the produce-path view. Thread-safe, cheap to
/// clone.
#[derive(Clone)]
pub struct TxnHandle {
    tx: mpsc::Sender<Request>,
    view: Arc<TxnView>,
}

/// The receiving side, taken once by the task that runs the coordinator.
pub type Inbox = mpsc::Receiver<Request>;

impl TxnHandle {
    pub fn new() -> (TxnHandle, Inbox) {
        let (tx, rx) = mpsc::channel(4096);
        (
            TxnHandle {
                tx,
                view: Arc::new(TxnView::default()),
            },
            rx,
        )
    }

    /// Sends a request and waits for its answer; None when the coordinator is gone.
    pub async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Request) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.ok()?;
        rx.await.ok()
    }

    /// Synchronous check for the produce path: may `producer_id` at `producer_epoch` write a
    /// transactional batch to `topic`-`partition`? Err is the Produce error code
    /// (INVALID_TXN_STATE when the partition was not added or no transaction is open,
    /// INVALID_PRODUCER_EPOCH for a fenced epoch, CONCURRENT_TRANSACTIONS while it commits).
    pub fn verify(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), i16> {
        self.view
            .verify(producer_id, producer_epoch, topic, partition)
    }

    /// The view the driver publishes into.
    pub fn view(&self) -> Arc<TxnView> {
        self.view.clone()
    }
}

/// Rebuilds the coordinator from the `__transaction_state` partitions this broker leads in the
/// image (each in offset order; the others belong to other coordinators).
pub fn load(broker: &Broker, config: TxnConfig) -> Coordinator {
    let mut coordinator = Coordinator::new(config);
    // Control batches never reach `__transaction_state`; only its records count.
    // Only the shards this broker leads (with RF 1, the partitions it hosts are the ones it leads).
    let image = broker.image();
    let led = crate::group::shard::led_shard_epochs(
        &image,
        broker.identity.node_id,
        TRANSACTION_STATE_TOPIC,
    );
    let count = load_shards(broker, &mut coordinator, &image, &led);
    if count > 0 {
        tracing::info!(
            "loaded {count} records from {TRANSACTION_STATE_TOPIC}: {} transactional id(s)",
            coordinator.txns.len()
        );
    }
    // The produce path sees the loaded transactions before the first request is served.
    let view = broker.txn.view();
    for id in coordinator.take_dirty() {
        view.publish(&id, coordinator.get(&id));
    }
    coordinator
}

/// Replays the `led` shards (shard -> leader epoch in `image`) into `coordinator` to their log
/// end, as the group coordinator's load (`internal_topic::replay_led`), each at its coordinator
/// epoch. Returns how many records were replayed.
fn load_shards(
    broker: &Broker,
    coordinator: &mut Coordinator,
    image: &crate::metadata::MetadataImage,
    led: &std::collections::BTreeMap<i32, i32>,
) -> usize {
    let shard_count = crate::group::shard::partition_count(image, TRANSACTION_STATE_TOPIC);
    for (&shard, &epoch) in led {
        coordinator.loaded_shard(shard_count, shard, epoch);
    }
    let shards = led.keys().copied().collect();
    replay_led(broker, TRANSACTION_STATE_TOPIC, &shards, |_, _, item| {
        if let Replayed::Record { key, value } = item {
            coordinator.replay(key, value);
        }
    })
}

/// `__transaction_state` as its coordinator creates it (compacted, uncompressed, Kafka's
/// `transaction.state.log.*` settings; `min.insync.replicas` is `transaction.state.log.min.isr`).
pub fn transaction_topic(broker: &Broker) -> crate::internal_topic::InternalTopic {
    crate::internal_topic::InternalTopic {
        name: TRANSACTION_STATE_TOPIC,
        partitions: broker.config.transaction_state_log_num_partitions,
        replication_factor: broker.config.transaction_state_log_replication_factor,
        overrides: vec![
            ("cleanup.policy", "compact".to_string()),
            (
                "segment.bytes",
                broker
                    .config
                    .transaction_state_log_segment_bytes
                    .to_string(),
            ),
            ("compression.type", "uncompressed".to_string()),
            (
                "min.insync.replicas",
                broker.config.transaction_state_log_min_isr.to_string(),
            ),
        ],
    }
}

/// Creates `__transaction_state` through the controller if it does not exist yet.
pub async fn ensure_transaction_topic(
    broker: &Broker,
) -> Option<Arc<crate::replica::manager::Topic>> {
    crate::internal_topic::ensure(broker, transaction_topic(broker)).await
}

/// How long a write of the transaction coordinator (its `__transaction_state` records, a marker)
/// waits to be committed before it counts as failed: the client's request answers
/// COORDINATOR_NOT_AVAILABLE and retries, a marker is retried. Kafka waits `request.timeout.ms`
/// without holding anything else; this driver takes one step at a time, so it waits less, and
/// less than the marker channel's timeout so a remote leader answers before its sender gives up.
pub const COMMIT_WAIT_MS: i64 = 4000;

/// Appends records, one batch per `__transaction_state` partition, and returns the batches. Err
/// carries the error code the affected requests should report.
pub fn persist(broker: &Broker, records: &[TxnRecord], now: i64) -> Result<Vec<Written>, i16> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let topic = broker
        .replicas
        .topic(TRANSACTION_STATE_TOPIC)
        .ok_or(codes::COORDINATOR_NOT_AVAILABLE)?;
    let records = records.iter().map(|r| {
        let record = (Some(r.key.as_slice()), r.value.as_deref());
        (r.transactional_id.as_str(), record)
    });
    let appended = append_by_key(broker, &topic, records, now);
    if appended.failures.is_empty() {
        Ok(appended.written)
    } else {
        Err(codes::COORDINATOR_NOT_AVAILABLE)
    }
}

/// Waits until `written` is committed (replicated to the ISR of its `__transaction_state`
/// partitions): an answer, or a transaction's markers, must not go out for a state the
/// coordinator's successor would not find. Err: Kafka's code for the client.
async fn commit(written: &[Written], wait_ms: i64) -> Result<(), i16> {
    if all_committed(written) {
        return Ok(());
    }
    committed(written, wait_ms).await.map_err(|e| match e {
        NotCommitted::TimedOut => codes::COORDINATOR_NOT_AVAILABLE,
        NotCommitted::NotLeader => codes::NOT_COORDINATOR,
    })
}

/// Writes the markers of one job: a control batch on every partition of the transaction (locally
/// where this broker leads, with WriteTxnMarkers to the leader elsewhere, `super::markers`
/// deciding), and the group coordinator completes the producer's offsets in `__consumer_offsets`
/// partitions. Returns the partitions whose marker must be retried: storage errors, no leader,
/// an unreachable leader or a retriable answer (Kafka retries markers until they land: a
/// transaction cannot complete, and its LSO cannot move, without them). Deleted partitions are
/// skipped; fencing errors are final (a newer coordinator or producer epoch already wrote
/// there), as in Kafka.
async fn write_markers(broker: &Broker, job: &MarkerJob, now: i64) -> Vec<(String, i32)> {
    // Routed against the newest image on every attempt, so a retry follows a leader change.
    let listener = super::marker_channel::inter_broker_listener(&broker.config);
    let route = super::markers::route(
        &broker.image(),
        broker.identity.node_id,
        &listener,
        &job.partitions,
    );
    for (topic, p) in &route.gone {
        tracing::info!(
            "skipping the {:?} marker of {} for {topic}-{p}: the partition no longer exists",
            job.control,
            job.transactional_id
        );
    }
    let mut failed = route.unavailable.clone();
    // One request per leader, all in flight at once (an unreachable leader costs one timeout).
    let sends = route
        .remote
        .iter()
        .map(|(leader, remote)| send_remote(broker, job, *leader, remote));
    for retry in futures_util::future::join_all(sends).await {
        failed.extend(retry);
    }
    failed.extend(write_local(broker, job, &route.local, now).await);
    failed
}

/// Sends `job`'s markers for `remote`'s partitions to broker `leader` with WriteTxnMarkers (the
/// receiving broker completes its `__consumer_offsets` offsets itself); the partitions to retry.
async fn send_remote(
    broker: &Broker,
    job: &MarkerJob,
    leader: i32,
    remote: &super::markers::RemoteLeader,
) -> Vec<(String, i32)> {
    use super::{marker_channel, markers};
    let request = marker_channel::request(job, &remote.partitions);
    let client_id = format!("sluice-txn-markers-{}", broker.identity.node_id);
    match marker_channel::send(&remote.host, remote.port, &client_id, &request).await {
        Err(e) => {
            tracing::warn!(
                "the {:?} markers of {} for broker {leader}: {e}; retrying",
                job.control,
                job.transactional_id
            );
            remote.partitions.clone()
        }
        Ok(response) => {
            let answered = marker_channel::codes(&response);
            for ((topic, p), code) in markers::fenced(&answered) {
                tracing::warn!(
                    "the {:?} marker of {} (producer {} epoch {}) for {topic}-{p} was refused by broker {leader} (error {code})",
                    job.control,
                    job.transactional_id,
                    job.producer_id,
                    job.producer_epoch
                );
            }
            let retry = markers::to_retry(&remote.partitions, &answered);
            if !retry.is_empty() {
                tracing::warn!(
                    "broker {leader} did not take {} {:?} marker(s) of {}; retrying",
                    retry.len(),
                    job.control,
                    job.transactional_id
                );
            }
            retry
        }
    }
}

/// Writes `job`'s markers on the partitions led here and waits until they are committed (a marker
/// only in the leader's log could be lost with it, leaving the transaction open there), then the
/// group coordinator completes the producer's offsets in `__consumer_offsets` partitions; the
/// partitions to retry.
async fn write_local(
    broker: &Broker,
    job: &MarkerJob,
    partitions: &[(String, i32)],
    now: i64,
) -> Vec<(String, i32)> {
    let mut landed: Vec<(&String, i32, Written)> = Vec::new();
    let mut failed = Vec::new();
    for (topic, p) in partitions {
        let partition = broker.replicas.partition(topic, *p);
        let Some(partition) = partition else {
            tracing::info!(
                "skipping the {:?} marker of {} for {topic}-{p}: the partition no longer exists",
                job.control,
                job.transactional_id
            );
            continue;
        };
        // Markers are appended as acks=all (Kafka's coordinator-origin append): below the
        // partition's effective min.insync.replicas nothing is written and the marker is retried.
        if let Err(e) = partition.check_acks_all_append() {
            tracing::warn!(
                "the {:?} marker of {} for {topic}-{p}: {} in-sync replicas, below the minimum {}; retrying",
                job.control,
                job.transactional_id,
                e.isr_size,
                e.min_isr
            );
            failed.push((topic.clone(), *p));
            continue;
        }
        let flush = broker.config.flush_every_message;
        let (id, epoch, coordinator_epoch, control) = (
            job.producer_id,
            job.producer_epoch,
            job.coordinator_epoch,
            job.control,
        );
        let target = partition.clone();
        let written = off_worker(flush, move || {
            target.write_txn_marker(id, epoch, coordinator_epoch, control, flush, now)
        })
        .await;
        let Some(written) = written else {
            tracing::error!("writing a marker to {topic}-{p} panicked; retrying");
            failed.push((topic.clone(), *p));
            continue;
        };
        match written {
            Ok(offset) => landed.push((
                topic,
                *p,
                Written {
                    partition,
                    last_offset: offset,
                },
            )),
            Err(AppendError::Producer(e)) => tracing::warn!(
                "the {:?} marker of {} (producer {} epoch {}) for {topic}-{p} was refused: {e}",
                job.control,
                job.transactional_id,
                job.producer_id,
                job.producer_epoch
            ),
            Err(AppendError::Log(e)) => {
                tracing::warn!(
                    "writing the {:?} marker of {} (producer {} epoch {}) to {topic}-{p}: {e}; retrying",
                    job.control,
                    job.transactional_id,
                    job.producer_id,
                    job.producer_epoch
                );
                failed.push((topic.clone(), *p));
            }
        }
    }
    let deadline = now_ms() + COMMIT_WAIT_MS;
    let mut offsets_partitions = Vec::new();
    for (topic, p, marker) in landed {
        let left = (deadline - now_ms()).max(0);
        if let Err(e) = committed(std::slice::from_ref(&marker), left).await {
            tracing::warn!(
                "the {:?} marker of {} for {topic}-{p} was not committed ({e:?}); retrying",
                job.control,
                job.transactional_id
            );
            failed.push((topic.clone(), p));
        } else if topic == crate::group::OFFSETS_TOPIC {
            offsets_partitions.push(p);
        }
    }
    for p in offsets_partitions {
        broker
            .groups
            .complete_txn(p, job.producer_id, job.control)
            .await;
    }
    failed
}

/// How long the driver waits before retrying a step whose records could not be persisted.
const RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// The task state.
struct Driver {
    broker: Arc<Broker>,
    coordinator: Coordinator,
    view: Arc<TxnView>,
    /// Marker jobs whose markers are written but whose completion could not be persisted yet.
    uncompleted: Vec<MarkerJob>,
    /// Marker jobs narrowed to the partitions whose marker failed with a storage error; retried
    /// after the backoff, completed once every marker landed.
    unwritten: Vec<MarkerJob>,
    /// After a failed append, timers wait until then (no busy loop on a broken disk).
    backoff_until: Option<Instant>,
    /// Gained shards not loaded yet because their high watermark had not reached their log end:
    /// shard -> (leader epoch, that log end). Loaded once it has (`load_caught_up`); meanwhile
    /// their transactional ids answer COORDINATOR_LOAD_IN_PROGRESS.
    loading: std::collections::BTreeMap<i32, (i32, i64)>,
}

impl Driver {
    /// Persists the step's records and waits until they are committed (undoing the step if either
    /// fails) and republishes the view.
    /// Returns the marker jobs to run once the answers are sent.
    async fn apply(&mut self, fx: Effects, now: i64) -> Result<Vec<MarkerJob>, i16> {
        let result = if fx.records.is_empty() {
            Ok(())
        } else {
            let (broker, records) = (self.broker.clone(), fx.records);
            // Created on first use, through the controller.
            let _ = ensure_transaction_topic(&self.broker).await;
            let appended = off_worker(self.broker.config.flush_every_message, move || {
                persist(&broker, &records, now)
            })
            .await
            .unwrap_or(Err(codes::COORDINATOR_NOT_AVAILABLE));
            match appended {
                Ok(written) => commit(&written, self.coordinator.config.commit_wait_ms).await,
                Err(code) => Err(code),
            }
        };
        let markers = match result {
            Ok(()) => Ok(fx.markers),
            Err(code) => {
                self.coordinator.restore(fx.undo);
                Err(code)
            }
        };
        self.publish();
        markers
    }

    fn publish(&mut self) {
        for id in self.coordinator.take_dirty() {
            self.view.publish(&id, self.coordinator.get(&id));
        }
    }

    /// Writes each job's markers, then persists its CompleteCommit/CompleteAbort step.
    async fn run_markers(&mut self, jobs: Vec<MarkerJob>) {
        for mut job in jobs {
            let failed = write_markers(&self.broker, &job, now_ms()).await;
            if failed.is_empty() {
                self.complete(job).await;
            } else {
                job.partitions = failed;
                self.unwritten.push(job);
                self.backoff_until = Some(Instant::now() + RETRY_BACKOFF);
            }
        }
    }

    /// The "markers written" step of `job`; kept for a retry when it cannot be persisted.
    async fn complete(&mut self, job: MarkerJob) {
        let now = now_ms();
        let fx = self.coordinator.markers_written(now, &job);
        if let Err(code) = self.apply(fx, now).await {
            tracing::warn!(
                "persisting the completion of {}'s transaction failed ({code}); retrying",
                job.transactional_id
            );
            self.uncompleted.push(job);
            self.backoff_until = Some(Instant::now() + RETRY_BACKOFF);
        }
    }

    /// The coordinator decides at the finalized `transaction.version` of the metadata image
    /// (UpdateFeatures may change it at any time; Kafka's coordinator reads it per request too).
    fn refresh_transaction_version(&mut self) {
        self.coordinator.config.transaction_version = self
            .broker
            .image()
            .finalized_level(super::txn_version::FEATURE);
    }

    async fn serve(&mut self, request: Request) {
        let Some(request) = self.refuse_while_loading(request) else {
            return;
        };
        self.refresh_transaction_version();
        let now = now_ms();
        let jobs = match request {
            Request::InitProducerId(mut input, tx) => {
                if self
                    .coordinator
                    .needs_producer_id(&input.transactional_id, input.expected)
                {
                    match self.broker.producer_ids.next_id() {
                        Ok(id) => input.fresh_producer_id = Some(id),
                        Err(e) => tracing::error!("allocating a producer id failed: {e}"),
                    }
                }
                let (answer, fx) = self.coordinator.init_producer_id(now, input);
                match self.apply(fx, now).await {
                    Ok(jobs) => {
                        let _ = tx.send(answer);
                        jobs
                    }
                    Err(code) => {
                        let _ = tx.send(InitAnswer {
                            error: code,
                            producer_id: -1,
                            producer_epoch: -1,
                        });
                        Vec::new()
                    }
                }
            }
            Request::AddPartitions(add, tx) => {
                let (code, fx) = self.coordinator.add_partitions(
                    now,
                    add.who.borrow(),
                    &add.partitions,
                    add.client_version,
                );
                let (code, jobs) = match self.apply(fx, now).await {
                    Ok(jobs) => (code, jobs),
                    Err(e) => (e, Vec::new()),
                };
                let _ = tx.send(code);
                jobs
            }
            Request::Verify(who, partitions, tx) => {
                let _ = tx.send(self.coordinator.verify(who.borrow(), &partitions));
                Vec::new()
            }
            Request::EndTxn(end, tx) => {
                let id = end.who.transactional_id.as_str();
                let mut fresh_producer_id = None;
                if self
                    .coordinator
                    .end_txn_needs_producer_id(id, end.client_version)
                {
                    match self.broker.producer_ids.next_id() {
                        Ok(id) => fresh_producer_id = Some(id),
                        Err(e) => tracing::error!("allocating a producer id failed: {e}"),
                    }
                }
                let input = EndInput {
                    who: end.who.borrow(),
                    commit: end.commit,
                    client_version: end.client_version,
                    fresh_producer_id,
                };
                let (answer, fx) = self.coordinator.end_txn(now, input);
                let (answer, jobs) = match self.apply(fx, now).await {
                    Ok(jobs) => (answer, jobs),
                    Err(e) => (
                        EndAnswer {
                            error: e,
                            producer_id: -1,
                            producer_epoch: -1,
                        },
                        Vec::new(),
                    ),
                };
                let _ = tx.send(answer);
                jobs
            }
            Request::Describe(ids, tx) => {
                let _ = tx.send(ids.iter().map(|id| self.coordinator.describe(id)).collect());
                Vec::new()
            }
            Request::List(filter, tx) => {
                let _ = tx.send(self.coordinator.list(now, &filter));
                Vec::new()
            }
            #[cfg(test)]
            Request::PanicForTest => panic!("a transaction coordinator step panicked (test)"),
        };
        self.run_markers(jobs).await;
    }

    async fn tick(&mut self) {
        self.load_caught_up().await;
        self.backoff_until = None;
        let unwritten = std::mem::take(&mut self.unwritten);
        self.run_markers(unwritten).await;
        for job in std::mem::take(&mut self.uncompleted) {
            self.complete(job).await;
        }
        self.refresh_transaction_version();
        let now = now_ms();
        let fx = self.coordinator.tick(now);
        match self.apply(fx, now).await {
            Ok(jobs) => self.run_markers(jobs).await,
            Err(code) => {
                tracing::warn!("transaction timers: persisting failed ({code}); retrying");
                self.backoff_until = Some(Instant::now() + RETRY_BACKOFF);
            }
        }
    }

    /// After a step panicked: the state may be half-changed, so it is rebuilt from
    /// `__transaction_state` as at startup (what was written is what counts), and prepared
    /// transactions resume their markers.
    async fn recover(&mut self) {
        let broker = self.broker.clone();
        let config = self.coordinator.config.clone();
        let fallback = config.clone();
        self.coordinator = tokio::task::spawn_blocking(move || load(&broker, config))
            .await
            .unwrap_or_else(|_| {
                tracing::error!(
                    "reloading the transaction coordinator panicked too; starting it empty"
                );
                Coordinator::new(fallback)
            });
        self.uncompleted.clear();
        self.unwritten.clear();
        self.loading.clear();
        self.publish();
        let pending = self.coordinator.pending_markers();
        tracing::warn!(
            "transaction coordinator state reloaded from {TRANSACTION_STATE_TOPIC}: {} transactional id(s), {} to complete",
            self.coordinator.txns.len(),
            pending.len()
        );
        self.run_markers(pending).await;
    }

    /// Kafka's `onResignation` and `onElection` for the shards whose leadership changed: the
    /// `lost` ones (and one led again at another epoch) are forgotten with their pending marker
    /// work; the `gained` ones (shard -> leader epoch) are replayed to their log end at that
    /// coordinator epoch, and their prepared transactions resume their markers. The shards kept
    /// stay as they are: a step that failed stays undone even when its records reached the log
    /// (replaying a kept shard brought back a timeout's PrepareAbort that was never committed,
    /// and its markers then aborted a transaction the next coordinator committed: simulator
    /// seed 22303).
    async fn change_shards(
        &mut self,
        gained: std::collections::BTreeMap<i32, i32>,
        lost: std::collections::BTreeSet<i32>,
    ) {
        let image = self.broker.image();
        let shard_count = crate::group::shard::partition_count(&image, TRANSACTION_STATE_TOPIC);
        let mut changed = lost;
        changed.extend(gained.keys().copied());
        self.loading.retain(|s, _| !changed.contains(s));
        // A gained shard whose high watermark is below its log end waits: its tail may hold
        // records no later leader will have (a timeout's PrepareAbort its predecessor never
        // committed), and acting on them (markers) could contradict the next coordinator.
        let mut gained = gained;
        gained.retain(|&shard, &mut epoch| {
            let end = self
                .broker
                .replicas
                .partition(TRANSACTION_STATE_TOPIC, shard)
                .map(|p| p.offsets())
                .filter(|o| o.high_watermark < o.log_end_offset)
                .map(|o| o.log_end_offset);
            if let Some(end) = end {
                self.loading.insert(shard, (epoch, end));
            }
            end.is_none()
        });
        let mut coordinator = std::mem::take(&mut self.coordinator);
        let broker = self.broker.clone();
        let unload = changed.clone();
        let loaded = tokio::task::spawn_blocking(move || {
            coordinator.unload_shards(shard_count, &unload);
            let count = load_shards(&broker, &mut coordinator, &image, &gained);
            (coordinator, count, gained)
        })
        .await;
        let Ok((coordinator, count, gained)) = loaded else {
            tracing::error!("loading the gained transaction coordinator shards panicked");
            return self.recover().await;
        };
        self.coordinator = coordinator;
        let c = &self.coordinator;
        self.unwritten
            .retain(|j| !c.in_shards(&j.transactional_id, &changed));
        self.uncompleted
            .retain(|j| !c.in_shards(&j.transactional_id, &changed));
        self.publish();
        let gained: std::collections::BTreeSet<i32> = gained.into_keys().collect();
        let pending: Vec<MarkerJob> = self
            .coordinator
            .pending_markers()
            .into_iter()
            .filter(|j| self.coordinator.in_shards(&j.transactional_id, &gained))
            .collect();
        tracing::info!(
            "transaction coordinator shards {gained:?} loaded ({count} records), {changed:?} \
             reset; {} transaction(s) to complete",
            pending.len()
        );
        self.run_markers(pending).await;
    }

    /// Loads the shards of `loading` whose high watermark reached the log end they waited for.
    async fn load_caught_up(&mut self) {
        let ready: std::collections::BTreeMap<i32, i32> = self
            .loading
            .iter()
            .filter(|(&shard, &(_, end))| {
                self.broker
                    .replicas
                    .partition(TRANSACTION_STATE_TOPIC, shard)
                    .is_some_and(|p| p.offsets().high_watermark >= end)
            })
            .map(|(&shard, &(epoch, _))| (shard, epoch))
            .collect();
        if !ready.is_empty() {
            self.change_shards(ready, Default::default()).await;
        }
    }

    /// Whether `transactional_id`'s shard waits in `loading`.
    fn is_loading(&self, transactional_id: &str) -> bool {
        if self.loading.is_empty() {
            return false;
        }
        let count =
            crate::group::shard::partition_count(&self.broker.image(), TRANSACTION_STATE_TOPIC);
        count > 0
            && self
                .loading
                .contains_key(&super::records::partition_for(transactional_id, count))
    }

    /// A request for a transactional id whose shard is still loading is answered
    /// COORDINATOR_LOAD_IN_PROGRESS (Kafka's answer while a coordinator loads; the client retries)
    /// and None returned; any other request comes back to be served.
    fn refuse_while_loading(&self, request: Request) -> Option<Request> {
        const LOADING: i16 = codes::COORDINATOR_LOAD_IN_PROGRESS;
        match request {
            Request::InitProducerId(input, tx) if self.is_loading(&input.transactional_id) => {
                let _ = tx.send(InitAnswer {
                    error: LOADING,
                    producer_id: -1,
                    producer_epoch: -1,
                });
                None
            }
            Request::AddPartitions(add, tx) if self.is_loading(&add.who.transactional_id) => {
                let _ = tx.send(LOADING);
                None
            }
            Request::Verify(who, partitions, tx) if self.is_loading(&who.transactional_id) => {
                let _ = tx.send(vec![LOADING; partitions.len()]);
                None
            }
            Request::EndTxn(end, tx) if self.is_loading(&end.who.transactional_id) => {
                let _ = tx.send(EndAnswer {
                    error: LOADING,
                    producer_id: -1,
                    producer_epoch: -1,
                });
                None
            }
            other => Some(other),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        let timers = self.coordinator.next_deadline().map(|at| {
            let wait = (at - now_ms()).clamp(0, 3_600_000) as u64;
            Instant::now() + Duration::from_millis(wait)
        });
        let retry = (!self.uncompleted.is_empty() || !self.unwritten.is_empty()).then(Instant::now);
        // Shards waiting for their high watermark are looked at again every quarter second.
        let loading =
            (!self.loading.is_empty()).then(|| Instant::now() + Duration::from_millis(250));
        let retry = retry.into_iter().chain(loading).min();
        let at = timers.into_iter().chain(retry).min()?;
        Some(self.backoff_until.map_or(at, |b| at.max(b)))
    }
}

/// Runs the coordinator until `stop` turns true or every handle is gone. Transactions loaded in
/// PrepareCommit/PrepareAbort get their markers first.
pub async fn run(
    broker: Arc<Broker>,
    coordinator: Coordinator,
    view: Arc<TxnView>,
    mut inbox: Inbox,
    mut stop: watch::Receiver<bool>,
) {
    let mut driver = Driver {
        broker,
        coordinator,
        view,
        uncompleted: Vec::new(),
        unwritten: Vec::new(),
        backoff_until: None,
        loading: Default::default(),
    };
    driver.publish();
    let pending = driver.coordinator.pending_markers();
    if !pending.is_empty() {
        tracing::info!("resuming the markers of {} transaction(s)", pending.len());
    }
    driver.run_markers(pending).await;
    let mut leadership = crate::group::shard::LeadershipWatch::new(
        driver.broker.replicas.metadata().subscribe(),
        driver.broker.identity.node_id,
        TRANSACTION_STATE_TOPIC,
    );
    loop {
        // Far in the future when nothing has a deadline; re-armed after every step.
        let deadline = driver
            .deadline()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let stepped = tokio::select! {
            _ = stop.changed() => return,
            request = inbox.recv() => match request {
                Some(r) => catch_step("transaction coordinator", driver.serve(r)).await,
                None => return,
            },
            _ = tokio::time::sleep_until(deadline) => {
                catch_step("transaction coordinator", driver.tick()).await
            }
            (gained, lost) = leadership.changed() => {
                // Gained or lost a `__transaction_state` partition (a failover), or led one
                // again at another epoch: those shards are reloaded, the others kept.
                tracing::info!(
                    "transaction coordinator shards changed (gained {gained:?}, lost {lost:?})"
                );
                crate::group::shard::committed_to_log_end(
                    &driver.broker.replicas,
                    TRANSACTION_STATE_TOPIC,
                    &gained.keys().copied().collect(),
                    crate::group::shard::GAINED_SHARD_WAIT,
                )
                .await;
                let changed = driver.change_shards(gained, lost);
                catch_step("transaction coordinator", changed).await
            }
        };
        if stepped.is_none() {
            driver.recover().await;
        }
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
