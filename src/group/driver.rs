//! The coordinator's async driver: one task owns the [`Coordinator`], takes requests from an mpsc
//! channel and answers on oneshots, appends the records each step produces to
//! `__consumer_offsets` before answering, and sleeps until the earliest group deadline
//! (`sleep_until`, re-armed after every step; never a polling loop).
//!
//! Invariants: a step's offset changes are applied only once its records are written
//! (`Coordinator::apply_written`); under the flush policy the append and its fsync run on tokio's
//! blocking pool and the task awaits them (steps stay in order, answers follow durability, no
//! runtime worker waits for the disk); a step that panics is caught and the state rebuilt by
//! replaying `__consumer_offsets`, so the task never dies with its inbox.
//!
//! [`GroupHandle`] is the cheap, cloneable, thread-safe sending side the API handlers use.
//! [`load`] rebuilds the coordinator from `__consumer_offsets` at startup.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup as ConsumerDescribedGroup;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseTopics;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::consumer::{ConsumerHeartbeatInput, MetadataImage, TopicImage};
use super::coordinator::{Coordinator, JoinInput};
use super::offsets::FetchQuery;
use super::records::{CoordinatorRecord, OFFSETS_TOPIC};
use super::txn_offsets::TxnWrite;
use super::{codes, Effects, GroupConfig, Waiter};
use crate::broker::{now_ms, Broker};
use crate::internal_topic::{
    all_committed, append, append_by_key, catch_step, committed, off_worker, replay_led,
    AppendFailure, NotCommitted, Replayed, Written,
};
use crate::record::ControlType;
use crate::replica::partition::AppendError;

/// Requests the coordinator task serves.
pub enum Request {
    Join(JoinInput, oneshot::Sender<JoinGroupResponse>),
    Sync(SyncGroupRequest, oneshot::Sender<SyncGroupResponse>),
    Heartbeat(HeartbeatRequest, oneshot::Sender<HeartbeatResponse>),
    Leave(i16, LeaveGroupRequest, oneshot::Sender<LeaveGroupResponse>),
    Commit(
        i16,
        OffsetCommitRequest,
        oneshot::Sender<OffsetCommitResponse>,
    ),
    /// Per group: its error code and its committed offsets.
    Fetch(
        Vec<FetchQuery>,
        oneshot::Sender<Vec<(i16, Vec<OffsetFetchResponseTopics>)>>,
    ),
    ConsumerHeartbeat(
        ConsumerHeartbeatInput,
        oneshot::Sender<ConsumerGroupHeartbeatResponse>,
    ),
    ConsumerDescribe(Vec<String>, oneshot::Sender<Vec<ConsumerDescribedGroup>>),
    ShareHeartbeat(
        super::share::ShareHeartbeatInput,
        oneshot::Sender<kafka_protocol::messages::ShareGroupHeartbeatResponse>,
    ),
    ShareDescribe(
        Vec<String>,
        oneshot::Sender<
            Vec<kafka_protocol::messages::share_group_describe_response::DescribedGroup>,
        >,
    ),
    /// DescribeShareGroupOffsets: per group (id, named topics or all), the share-partitions to
    /// read or the group's error.
    ShareOffsetsDescribe(
        Vec<(String, Option<Vec<super::share_offsets::NamedPartitions>>)>,
        oneshot::Sender<Vec<ShareOffsetsTargets>>,
    ),
    ShareOffsetsAlter(
        kafka_protocol::messages::AlterShareGroupOffsetsRequest,
        oneshot::Sender<kafka_protocol::messages::AlterShareGroupOffsetsResponse>,
    ),
    ShareOffsetsDelete(
        kafka_protocol::messages::DeleteShareGroupOffsetsRequest,
        oneshot::Sender<kafka_protocol::messages::DeleteShareGroupOffsetsResponse>,
    ),
    Describe(Vec<String>, i16, bool, oneshot::Sender<Vec<DescribedGroup>>),
    List(Vec<String>, Vec<String>, oneshot::Sender<Vec<ListedGroup>>),
    /// DeleteGroups' first step: the share-partitions of the Empty share groups among the ids
    /// ([`Coordinator::share_state_to_delete`]), whose state goes before the groups do.
    ShareStateToDelete(
        Vec<String>,
        oneshot::Sender<Vec<super::share::ShareStateToDelete>>,
    ),
    Delete(Vec<String>, oneshot::Sender<Vec<DeletableGroupResult>>),
    OffsetDelete(OffsetDeleteRequest, oneshot::Sender<OffsetDeleteResponse>),
    /// A transaction marker was written to `__consumer_offsets` partition `.0` for producer `.1`.
    CompleteTxn(i32, i64, ControlType, oneshot::Sender<()>),
    TxnCommit(
        TxnOffsetCommitRequest,
        oneshot::Sender<TxnOffsetCommitResponse>,
    ),
    /// Tests: the step panics (the driver must catch it and keep serving).
    #[cfg(test)]
    PanicForTest,
}

/// The share-partitions a DescribeShareGroupOffsets reads for one group, or its error.
pub type ShareOffsetsTargets = Result<Vec<super::share_offsets::DescribeTarget>, (i16, String)>;

/// The sending side of the coordinator task. Thread-safe and cheap to clone.
#[derive(Clone)]
pub struct GroupHandle {
    tx: mpsc::Sender<Request>,
}

/// The receiving side, taken once by the task that runs the coordinator.
pub type Inbox = mpsc::Receiver<Request>;

impl GroupHandle {
    pub fn new() -> (GroupHandle, Inbox) {
        let (tx, rx) = mpsc::channel(4096);
        (GroupHandle { tx }, rx)
    }

    /// Tells the coordinator that a commit or abort marker for `producer_id` now sits in
    /// `__consumer_offsets` partition `offsets_partition`, so that producer's pending transactional
    /// offsets there become committed (or are dropped). Returns once applied.
    pub async fn complete_txn(
        &self,
        offsets_partition: i32,
        producer_id: i64,
        control: ControlType,
    ) {
        self.call(|tx| Request::CompleteTxn(offsets_partition, producer_id, control, tx))
            .await;
    }

    /// Sends a request and waits for its answer; None when the coordinator is gone.
    pub async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Request) -> Option<T> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).await.ok()?;
        rx.await.ok()
    }
}

/// Rebuilds the coordinator from the `__consumer_offsets` partitions this broker leads in the
/// image (each in offset order, to its log end: `internal_topic::replay_led`; the others belong
/// to other coordinators).
/// Transactional batches stay pending per producer until a marker of that producer appears in
/// the same partition; transactions still open at the end stay pending (the transaction
/// coordinator completes them later through [`GroupHandle::complete_txn`]).
pub fn load(broker: &Broker, config: GroupConfig) -> Coordinator {
    let mut coordinator = Coordinator::new(config);
    coordinator.share = super::share::ShareSettings::from_config(&broker.config);
    let now = now_ms();
    // Only the shards this broker leads (with RF 1, the partitions it hosts are the ones it leads).
    let led = super::shard::led_shards(&broker.image(), broker.identity.node_id, OFFSETS_TOPIC);
    let count = replay_led(
        broker,
        OFFSETS_TOPIC,
        &led,
        |partition, h, item| match item {
            Replayed::Record { key, value } if h.is_transactional() => {
                coordinator.replay_transactional(partition, h.producer_id, key, value, now)
            }
            Replayed::Record { key, value } => coordinator.replay(key, value, now),
            // A transaction marker: ends that producer's pending offsets here.
            Replayed::Marker(Some(control)) => {
                coordinator.replay_marker(partition, h.producer_id, control)
            }
            Replayed::Marker(None) => tracing::warn!(
                "{OFFSETS_TOPIC}-{partition}: skipping unreadable control batch at {}",
                h.base_offset
            ),
        },
    );
    if count > 0 {
        tracing::info!(
            "loaded {count} records from {OFFSETS_TOPIC}: {} group(s)",
            coordinator.groups.len()
        );
    }
    coordinator.finish_share_load(now);
    coordinator
}

/// `__consumer_offsets` as its coordinator creates it (compacted, like Kafka's).
pub fn offsets_topic(broker: &Broker) -> crate::internal_topic::InternalTopic {
    crate::internal_topic::InternalTopic {
        name: OFFSETS_TOPIC,
        partitions: broker.config.offsets_topic_num_partitions,
        replication_factor: broker.config.offsets_topic_replication_factor,
        overrides: vec![
            ("cleanup.policy", "compact".to_string()),
            ("segment.bytes", "104857600".to_string()),
            ("compression.type", "producer".to_string()),
        ],
    }
}

/// Creates `__consumer_offsets` through the controller if it does not exist yet.
pub async fn ensure_offsets_topic(broker: &Broker) -> Option<Arc<crate::replica::manager::Topic>> {
    crate::internal_topic::ensure(broker, offsets_topic(broker)).await
}

/// `__consumer_offsets` if it exists (the driver creates it before a write).
fn offsets_topic_hosted(broker: &Broker) -> Option<Arc<crate::replica::manager::Topic>> {
    broker.replicas.topic(OFFSETS_TOPIC)
}

/// Appends records, one batch per `__consumer_offsets` partition. Err carries the error code the
/// affected requests should report (Kafka's mapping of append errors in its group coordinator:
/// a storage error is NOT_COORDINATOR).
fn persist(broker: &Broker, records: &[CoordinatorRecord], now: i64) -> Result<Vec<Written>, i16> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let topic = offsets_topic_hosted(broker).ok_or(codes::COORDINATOR_NOT_AVAILABLE)?;
    let records = records.iter().map(|r| {
        (
            r.group_id.as_str(),
            (Some(r.key.as_slice()), r.value.as_deref()),
        )
    });
    // Any failed partition fails the step.
    let mut appended = append_by_key(broker, &topic, records, now);
    match appended.failures.pop() {
        None => Ok(appended.written),
        Some(AppendFailure::Invalid(_) | AppendFailure::NotEnoughReplicas { .. }) => {
            Err(codes::COORDINATOR_NOT_AVAILABLE)
        }
        Some(
            AppendFailure::Append(_) | AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..),
        ) => Err(codes::NOT_COORDINATOR),
    }
}

/// Appends a TxnOffsetCommit's offsets as one transactional batch of its producer (base sequence
/// -1, coordinator origin) to the group's `__consumer_offsets` partition, and returns that
/// partition and the batch. Err carries the error code for every partition of the request.
fn persist_txn(broker: &Broker, write: &TxnWrite, now: i64) -> Result<(i32, Written), i16> {
    let topic = offsets_topic_hosted(broker).ok_or(codes::COORDINATOR_NOT_AVAILABLE)?;
    let p = super::records::partition_for(
        &write.group_id,
        crate::internal_topic::partition_count(broker, &topic),
    );
    let records = write.records();
    let kvs: Vec<crate::record::KeyValue<'_>> = records
        .iter()
        .map(|r| (Some(r.key.as_slice()), r.value.as_deref()))
        .collect();
    let producer = Some((write.producer_id, write.producer_epoch));
    let result = match topic.partition(p) {
        Some(partition) => append(broker, partition, &kvs, producer, now),
        None => Err(AppendFailure::NotHosted(p)),
    };
    match result {
        Ok(w) => Ok((p, w)),
        Err(e) => {
            tracing::error!("appending transactional offsets to {OFFSETS_TOPIC}-{p}: {e}");
            Err(match e {
                AppendFailure::Invalid(_) | AppendFailure::NotEnoughReplicas { .. } => {
                    codes::COORDINATOR_NOT_AVAILABLE
                }
                AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..) => {
                    codes::NOT_COORDINATOR
                }
                // A fenced or stale producer epoch is the producer's error, as in Kafka.
                AppendFailure::Append(AppendError::Producer(pe)) => pe.code(),
                AppendFailure::Append(AppendError::Log(_)) => codes::NOT_COORDINATOR,
            })
        }
    }
}

/// Every topic's id and partition count (from the metadata image), for the consumer-group
/// assignors.
fn metadata_image(broker: &Broker) -> MetadataImage {
    broker
        .image()
        .topics()
        .map(|t| {
            (
                t.name.clone(),
                TopicImage {
                    id: t.id,
                    partitions: t.partition_count(),
                },
            )
        })
        .collect()
}

/// How the driver writes a step's records: [`persist`] to `__consumer_offsets`, unless a test
/// injects a writer that fails.
type Writer =
    Arc<dyn Fn(&Broker, &[CoordinatorRecord], i64) -> Result<Vec<Written>, i16> + Send + Sync>;

/// Kafka's group coordinator's answer for a write that did not commit: a timeout is
/// COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR (the client finds the new one).
fn not_committed_code(e: NotCommitted) -> i16 {
    match e {
        NotCommitted::TimedOut => codes::COORDINATOR_NOT_AVAILABLE,
        NotCommitted::NotLeader => codes::NOT_COORDINATOR,
    }
}

/// A `fail` for [`Driver::reply`] whose request answers as it is when its records are not
/// committed (the coordinator's state changed; the client learns of a failover by its next call).
fn as_is<T>(_: &mut T, _: i16) {}

/// The task state: the coordinator plus the oneshots of parked requests.
struct Driver {
    broker: Arc<Broker>,
    coordinator: Coordinator,
    writer: Writer,
    next_waiter: Waiter,
    joins: HashMap<Waiter, oneshot::Sender<JoinGroupResponse>>,
    syncs: HashMap<Waiter, oneshot::Sender<SyncGroupResponse>>,
}

/// [`off_worker`] for a write whose error is a group error code.
async fn write_off_worker<T: Send + 'static>(
    broker: &Broker,
    write: impl FnOnce() -> Result<T, i16> + Send + 'static,
) -> Result<T, i16> {
    // Created on first use, through the controller (never on a worker's blocking wait).
    let _ = ensure_offsets_topic(broker).await;
    off_worker(broker.config.flush_every_message, write)
        .await
        .unwrap_or(Err(codes::UNKNOWN_SERVER_ERROR))
}

impl Driver {
    fn new(broker: Arc<Broker>, coordinator: Coordinator) -> Driver {
        Driver {
            broker,
            coordinator,
            writer: Arc::new(persist),
            next_waiter: 0,
            joins: HashMap::new(),
            syncs: HashMap::new(),
        }
    }

    fn waiter(&mut self) -> Waiter {
        self.next_waiter += 1;
        self.next_waiter
    }

    /// Sends `answer` once the step's records (`written`) are committed: at once when they are
    /// already (no followers, or nothing written), else from a task awaiting the high watermark,
    /// so the driver goes on with the next request meanwhile (Kafka's coordinator runtime defers
    /// its responses the same way). A write that failed, or did not commit within
    /// `offsets.commit.timeout.ms`, first has `fail(answer, code)` put its error in.
    fn reply<T: Send + 'static>(
        &self,
        written: Result<Vec<Written>, i16>,
        tx: oneshot::Sender<T>,
        mut answer: T,
        fail: fn(&mut T, i16),
    ) {
        let written = match written {
            Ok(w) => w,
            Err(code) => {
                fail(&mut answer, code);
                let _ = tx.send(answer);
                return;
            }
        };
        if all_committed(&written) {
            let _ = tx.send(answer);
            return;
        }
        let timeout_ms = self.coordinator.config.offsets_commit_timeout_ms;
        tokio::spawn(async move {
            if let Err(e) = committed(&written, timeout_ms).await {
                fail(&mut answer, not_committed_code(e));
            }
            let _ = tx.send(answer);
        });
    }

    /// Persists the step's records, applies its offset changes once they are written (a failed
    /// write changes no offset), then answers parked requests once the records are committed.
    /// Returns what was written, for the caller's own answer.
    async fn apply(&mut self, fx: Effects, now: i64) -> Result<Vec<Written>, i16> {
        let result = if fx.records.is_empty() {
            Ok(Vec::new())
        } else {
            let (broker, writer, records) = (self.broker.clone(), self.writer.clone(), fx.records);
            write_off_worker(&self.broker, move || writer(&broker, &records, now)).await
        };
        if result.is_ok() {
            self.coordinator.apply_written(fx.offsets, now);
        }
        if !fx.share_members_gone.is_empty() || !fx.share_groups_deleted.is_empty() {
            let mut shares = self.broker.shares.lock();
            for (group, member) in &fx.share_members_gone {
                shares.close_member(group, member);
            }
            for group in &fx.share_groups_deleted {
                shares.remove_group(group);
                // Its share-partitions' persisted state goes too (DeleteShareGroupState).
                crate::share_state::delete_group(&self.broker, group, now);
            }
        }
        for (w, r) in fx.joins {
            if let Some(tx) = self.joins.remove(&w) {
                self.reply(result.clone(), tx, r, |r, code| r.error_code = code);
            }
        }
        for (w, r) in fx.syncs {
            if let Some(tx) = self.syncs.remove(&w) {
                self.reply(result.clone(), tx, r, |r, code| r.error_code = code);
            }
        }
        result
    }

    async fn serve(&mut self, request: Request) {
        let now = now_ms();
        match request {
            Request::Join(input, tx) => {
                if self
                    .coordinator
                    .consumer_groups
                    .contains_key(input.request.group_id.as_str())
                {
                    // A classic member of a consumer group is assigned with the current topics.
                    self.coordinator.image = metadata_image(&self.broker);
                }
                let w = self.waiter();
                self.joins.insert(w, tx);
                let fx = self.coordinator.join(now, input, w);
                let _ = self.apply(fx, now).await;
            }
            Request::Sync(req, tx) => {
                let w = self.waiter();
                self.syncs.insert(w, tx);
                let fx = self.coordinator.sync(now, req, w);
                let _ = self.apply(fx, now).await;
            }
            Request::Heartbeat(req, tx) => {
                let _ = tx.send(self.coordinator.heartbeat(now, &req));
            }
            Request::Leave(version, req, tx) => {
                let (resp, fx) = self.coordinator.leave(now, version, &req);
                let written = self.apply(fx, now).await;
                self.reply(written, tx, resp, as_is);
            }
            Request::Commit(version, req, tx) => {
                let (resp, fx) = self.coordinator.commit(now, version, &req);
                let written = self.apply(fx, now).await;
                // As Kafka: a failed write fails every partition of the request.
                self.reply(written, tx, resp, |resp, code| {
                    for t in &mut resp.topics {
                        for p in &mut t.partitions {
                            p.error_code = code;
                        }
                    }
                });
            }
            Request::Fetch(queries, tx) => {
                let _ = tx.send(
                    queries
                        .iter()
                        .map(|q| (self.coordinator.fetch_error(q), self.coordinator.fetch(q)))
                        .collect(),
                );
            }
            Request::ConsumerHeartbeat(input, tx) => {
                let image = metadata_image(&self.broker);
                let (response, fx) = self.coordinator.consumer_heartbeat_step(now, input, &image);
                let written = self.apply(fx, now).await;
                self.reply(written, tx, response, as_is);
            }
            Request::ConsumerDescribe(ids, tx) => {
                let image = metadata_image(&self.broker);
                let _ = tx.send(
                    ids.iter()
                        .map(|g| self.coordinator.consumer_describe(g, &image))
                        .collect(),
                );
            }
            Request::ShareHeartbeat(input, tx) => {
                let image = metadata_image(&self.broker);
                let leave = (input.request.member_epoch == -1).then(|| {
                    (
                        input.request.group_id.to_string(),
                        input.request.member_id.to_string(),
                    )
                });
                let group_id = input.request.group_id.to_string();
                let saved = self.coordinator.share_groups.get(&group_id).cloned();
                let (mut response, records) =
                    self.coordinator.share_heartbeat_step(now, input, &image);
                let ok = response.error_code == codes::NONE;
                let fx = Effects {
                    records,
                    // A member that left holds nothing: its share session closes now.
                    share_members_gone: leave.filter(|_| ok).into_iter().collect(),
                    ..Effects::default()
                };
                let written = self.apply(fx, now).await;
                if let Err(code) = written {
                    // Not written: the group stays as it was, the member retries.
                    match saved {
                        Some(g) => self.coordinator.share_groups.insert(group_id, g),
                        None => self.coordinator.share_groups.remove(&group_id),
                    };
                    response = kafka_protocol::messages::ShareGroupHeartbeatResponse::default()
                        .with_error_code(code)
                        .with_member_epoch(-1);
                }
                self.reply(written.or(Ok(Vec::new())), tx, response, as_is);
            }
            Request::ShareDescribe(ids, tx) => {
                let image = metadata_image(&self.broker);
                let _ = tx.send(
                    ids.iter()
                        .map(|g| self.coordinator.share_describe(g, &image))
                        .collect(),
                );
            }
            Request::ShareOffsetsDescribe(groups, tx) => {
                let image = metadata_image(&self.broker);
                let _ = tx.send(
                    groups
                        .iter()
                        .map(|(g, topics)| {
                            self.coordinator
                                .share_offsets_describe(g, topics.as_deref(), &image)
                        })
                        .collect(),
                );
            }
            Request::ShareOffsetsAlter(req, tx) => self.share_offsets_alter(req, tx, now).await,
            Request::ShareOffsetsDelete(req, tx) => self.share_offsets_delete(req, tx, now).await,
            Request::Describe(ids, version, ops, tx) => {
                let _ = tx.send(
                    ids.iter()
                        .map(|g| self.coordinator.describe(g, version, ops))
                        .collect(),
                );
            }
            Request::List(states, types, tx) => {
                let _ = tx.send(self.coordinator.list(&states, &types));
            }
            Request::ShareStateToDelete(ids, tx) => {
                let _ = tx.send(self.coordinator.share_state_to_delete(&ids));
            }
            Request::Delete(ids, tx) => {
                let (resp, fx) = self.coordinator.delete_groups(&ids);
                let written = self.apply(fx, now).await;
                self.reply(written, tx, resp, |resp, code| {
                    for r in resp.iter_mut().filter(|r| r.error_code == codes::NONE) {
                        r.error_code = code;
                    }
                });
            }
            Request::CompleteTxn(partition, producer_id, control, tx) => {
                let fx = self
                    .coordinator
                    .complete_txn(partition, producer_id, control);
                let written = self.apply(fx, now).await;
                self.reply(written, tx, (), as_is);
            }
            Request::TxnCommit(req, tx) => {
                let (resp, write) = self.coordinator.txn_offset_commit(now, &req);
                let mut written = Ok(Vec::new());
                if let Some(write) = write {
                    let broker = self.broker.clone();
                    let appended = write_off_worker(&self.broker, move || {
                        persist_txn(&broker, &write, now).map(|(p, w)| (p, w, write))
                    })
                    .await;
                    written = appended.map(|(partition, w, write)| {
                        self.coordinator.apply_txn_write(partition, write);
                        vec![w]
                    });
                }
                self.reply(written, tx, resp, |resp, code| {
                    for t in &mut resp.topics {
                        for p in &mut t.partitions {
                            if p.error_code == codes::NONE {
                                p.error_code = code;
                            }
                        }
                    }
                });
            }
            Request::OffsetDelete(req, tx) => {
                let (resp, fx) = self.coordinator.offset_delete(&req);
                let written = self.apply(fx, now).await;
                self.reply(written, tx, resp, |resp, code| {
                    *resp = OffsetDeleteResponse::default().with_error_code(code)
                });
            }
            #[cfg(test)]
            Request::PanicForTest => panic!("a coordinator step panicked (test)"),
        }
    }

    async fn tick(&mut self) {
        let now = now_ms();
        let fx = self.coordinator.tick(now);
        let _ = self.apply(fx, now).await;
    }

    /// After a step panicked: the state may be half-changed, so it is rebuilt from
    /// `__consumer_offsets` as at startup (what was written is what counts). Parked JoinGroup and
    /// SyncGroup requests lose their oneshots and answer COORDINATOR_NOT_AVAILABLE, so their
    /// clients rediscover the coordinator and rejoin, as after a coordinator failover.
    async fn recover(&mut self) {
        self.joins.clear();
        self.syncs.clear();
        let broker = self.broker.clone();
        let config = self.coordinator.config.clone();
        let fallback = config.clone();
        self.coordinator = tokio::task::spawn_blocking(move || load(&broker, config))
            .await
            .unwrap_or_else(|_| {
                tracing::error!("reloading the group coordinator panicked too; starting it empty");
                Coordinator::new(fallback)
            });
        self.coordinator.start_offset_expiry(now_ms());
        tracing::warn!(
            "group coordinator state reloaded from {OFFSETS_TOPIC}: {} group(s)",
            self.coordinator.groups.len()
        );
    }

    fn deadline(&self) -> Option<Instant> {
        let at = self.coordinator.next_deadline()?;
        let wait = (at - now_ms()).max(0) as u64;
        Some(Instant::now() + Duration::from_millis(wait))
    }
}

/// Runs the coordinator until `stop` turns true or every handle is gone. A step that panics is
/// caught ([`catch_step`]) and the state reloaded, so the group APIs keep working.
pub async fn run(
    broker: Arc<Broker>,
    coordinator: Coordinator,
    inbox: Inbox,
    stop: watch::Receiver<bool>,
) {
    run_driver(Driver::new(broker, coordinator), inbox, stop).await
}

async fn run_driver(mut driver: Driver, mut inbox: Inbox, mut stop: watch::Receiver<bool>) {
    driver.coordinator.start_offset_expiry(now_ms());
    let mut leadership = super::shard::LeadershipWatch::new(
        driver.broker.replicas.metadata().subscribe(),
        driver.broker.identity.node_id,
        OFFSETS_TOPIC,
    );
    loop {
        // Far in the future when no group has a timer; re-armed after every step.
        let deadline = driver
            .deadline()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        let stepped = tokio::select! {
            _ = stop.changed() => return,
            request = inbox.recv() => match request {
                Some(r) => catch_step("group coordinator", driver.serve(r)).await,
                None => return,
            },
            _ = tokio::time::sleep_until(deadline) => {
                catch_step("group coordinator", driver.tick()).await
            }
            (gained, lost) = leadership.changed() => {
                // Gained or lost a `__consumer_offsets` partition (a failover): the state is
                // rebuilt from the shards led now, as at startup.
                tracing::info!(
                    "group coordinator shards changed (gained {gained:?}, lost {lost:?}): reloading"
                );
                super::shard::committed_to_log_end(
                    &driver.broker.replicas,
                    OFFSETS_TOPIC,
                    &gained.keys().copied().collect(),
                    super::shard::GAINED_SHARD_WAIT,
                )
                .await;
                None
            }
        };
        if stepped.is_none() {
            driver.recover().await;
        }
    }
}

#[path = "driver_share_offsets.rs"]
mod share_offsets_io;

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
