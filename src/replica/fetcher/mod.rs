//! Follower fetching (Kafka's `ReplicaFetcherManager` / `ReplicaFetcherThread`): one fetcher task
//! per source broker, batching every partition this broker follows there into one Fetch (v15:
//! topic ids, `ReplicaState` with this broker's id, each partition's `LastFetchedEpoch`), and
//! appending what comes back as follower (`Partition::append_as_follower`: the leader's offsets and
//! epochs kept).
//!
//! Per partition answer: records are appended and the high watermark and log start offset learnt;
//! a `DivergingEpoch` truncates the log to where it agrees with the leader
//! (`Partition::truncation_point`, Kafka's truncation on fetch, KIP-320/595 style: no separate
//! OffsetForLeaderEpoch round); a replica with no epochs at all first truncates to its high
//! watermark. NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
//! UNKNOWN_TOPIC_ID and storage errors pause that partition for `replica.fetch.backoff.ms`
//! (the image moves it to its new leader); OFFSET_OUT_OF_RANGE on an empty or lagging follower
//! restarts it at the leader's log start (asked with ListOffsets earliest). A failed request
//! (connection, timeout, bad answer) drops the connection and retries after the backoff.
//!
//! Membership follows the image (`hosting.rs`): `add` when this broker becomes a follower (moving
//! the partition from the fetcher of its previous leader), `remove` when it leads or stops
//! hosting. Appends and their fsyncs run on the blocking pool, never on a runtime worker.

mod connection;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use uuid::Uuid;

pub use connection::{BrokerConnection, ConnectionError};

use super::isr::now_ms;
use super::partition::{FetchedFrom, Partition};
use crate::metadata::MetadataLog;
use crate::replica::replication::EpochEndOffset;

const FETCH_VERSION: i16 = 15;
const LIST_OFFSETS_VERSION: i16 = 7;
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Extra time a Fetch may take beyond its max wait before it counts as failed
/// (`replica.socket.timeout.ms`, Kafka's default 30 s).
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

/// What a fetcher needs from the broker's configuration.
#[derive(Debug, Clone)]
pub struct FetcherSettings {
    pub local_id: i32,
    /// The listener other brokers are reached on (their registered endpoint of this name).
    pub listener: String,
    pub max_wait_ms: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub backoff: Duration,
}

/// One followed partition.
struct Followed {
    topic: String,
    partition: Arc<Partition>,
    leader_epoch: i32,
    /// Not fetched before this instant (after an error).
    paused_until: Option<Instant>,
    /// A replica without epochs truncates to its high watermark before its first fetch.
    truncated: bool,
}

/// The partitions followed from one leader, shared by the manager and that leader's task.
struct Source {
    leader: i32,
    partitions: Mutex<BTreeMap<(Uuid, i32), Followed>>,
    changed: Notify,
    stopped: AtomicBool,
}

/// The fetcher tasks of this broker, by source broker.
pub struct FetcherManager {
    settings: Mutex<Option<FetcherSettings>>,
    metadata: Arc<MetadataLog>,
    sources: Mutex<HashMap<i32, Arc<Source>>>,
}

impl FetcherManager {
    pub fn new(metadata: Arc<MetadataLog>) -> FetcherManager {
        FetcherManager {
            settings: Mutex::new(None),
            metadata,
            sources: Mutex::new(HashMap::new()),
        }
    }

    /// Enables fetching (until then `add` only records nothing: a broker that never joins a
    /// multi-broker cluster never fetches).
    pub fn configure(&self, settings: FetcherSettings) {
        *self.settings.lock() = Some(settings);
    }

    /// This broker follows `partition` of `topic` (`topic_id`) from `leader` in `leader_epoch`.
    pub fn add(
        &self,
        leader: i32,
        leader_epoch: i32,
        topic_id: Uuid,
        topic: &str,
        partition: Arc<Partition>,
    ) {
        let Some(settings) = self.settings.lock().clone() else {
            return;
        };
        let key = (topic_id, partition.index);
        let mut sources = self.sources.lock();
        for (id, source) in sources.iter() {
            if *id != leader {
                source.partitions.lock().remove(&key);
            }
        }
        if leader < 0 || leader == settings.local_id {
            return;
        }
        let source = match sources.get(&leader) {
            Some(s) if !s.stopped.load(Ordering::SeqCst) => s.clone(),
            _ => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    tracing::warn!(
                        "no runtime to fetch {topic}-{} from {leader}",
                        partition.index
                    );
                    return;
                };
                let source = Arc::new(Source {
                    leader,
                    partitions: Mutex::new(BTreeMap::new()),
                    changed: Notify::new(),
                    stopped: AtomicBool::new(false),
                });
                sources.insert(leader, source.clone());
                let task = FetcherTask {
                    source: source.clone(),
                    settings: settings.clone(),
                    metadata: self.metadata.clone(),
                    connection: None,
                };
                runtime.spawn(task.run());
                source
            }
        };
        let mut partitions = source.partitions.lock();
        match partitions.get_mut(&key) {
            Some(f) if Arc::ptr_eq(&f.partition, &partition) => {
                f.leader_epoch = leader_epoch;
                f.paused_until = None;
            }
            _ => {
                partitions.insert(
                    key,
                    Followed {
                        topic: topic.to_string(),
                        partition,
                        leader_epoch,
                        paused_until: None,
                        truncated: false,
                    },
                );
            }
        }
        drop(partitions);
        source.changed.notify_one();
    }

    /// Stops fetching `partition` of `topic_id` (this broker leads it now, or no longer hosts it).
    pub fn remove(&self, topic_id: Uuid, partition: i32) {
        for source in self.sources.lock().values() {
            source.partitions.lock().remove(&(topic_id, partition));
        }
    }

    /// Stops every fetcher task (shutdown).
    pub fn shutdown(&self) {
        for (_, source) in self.sources.lock().drain() {
            source.stopped.store(true, Ordering::SeqCst);
            source.changed.notify_one();
        }
    }

    /// The partitions followed per source broker (tests, diagnostics).
    pub fn followed(&self) -> BTreeMap<i32, Vec<(String, i32)>> {
        self.sources
            .lock()
            .iter()
            .map(|(id, s)| {
                let list = s
                    .partitions
                    .lock()
                    .values()
                    .map(|f| (f.topic.clone(), f.partition.index))
                    .collect();
                (*id, list)
            })
            .collect()
    }
}

struct FetcherTask {
    source: Arc<Source>,
    settings: FetcherSettings,
    metadata: Arc<MetadataLog>,
    connection: Option<BrokerConnection>,
}

/// One partition of a request in flight.
struct InFlight {
    topic_id: Uuid,
    topic: String,
    partition: Arc<Partition>,
    fetch_offset: i64,
    leader_epoch: i32,
}

impl InFlight {
    /// What the answer to this fetch applies under (`Partition::append_as_follower_of`).
    fn from(&self, leader: i32) -> FetchedFrom {
        FetchedFrom {
            leader_id: leader,
            leader_epoch: self.leader_epoch,
            fetch_offset: self.fetch_offset,
        }
    }
}

impl FetcherTask {
    async fn run(mut self) {
        let leader = self.source.leader;
        tracing::debug!("fetcher for broker {leader} started");
        while !self.source.stopped.load(Ordering::SeqCst) {
            let batch = self.prepare().await;
            if batch.is_empty() {
                let idle =
                    tokio::time::timeout(Duration::from_secs(1), self.source.changed.notified());
                let _ = idle.await;
                continue;
            }
            if let Err(e) = self.fetch_once(batch).await {
                tracing::warn!("fetch from broker {leader} failed: {e}");
                self.connection = None;
                tokio::time::sleep(self.settings.backoff).await;
            }
        }
        tracing::debug!("fetcher for broker {leader} stopped");
    }

    /// The partitions to fetch now, after the truncation a replica without epochs owes.
    async fn prepare(&mut self) -> Vec<(Uuid, InFlight, i32, i32)> {
        let now = Instant::now();
        let mut out = Vec::new();
        let mut to_truncate = Vec::new();
        {
            let mut partitions = self.source.partitions.lock();
            for (&(topic_id, _), f) in partitions.iter_mut() {
                if f.paused_until.is_some_and(|t| t > now) {
                    continue;
                }
                f.paused_until = None;
                if !f.truncated {
                    f.truncated = true;
                    to_truncate.push(f.partition.clone());
                }
                let offsets = f.partition.offsets();
                out.push((
                    topic_id,
                    InFlight {
                        topic_id,
                        topic: f.topic.clone(),
                        partition: f.partition.clone(),
                        fetch_offset: offsets.log_end_offset,
                        leader_epoch: f.leader_epoch,
                    },
                    f.leader_epoch,
                    f.partition.latest_epoch().unwrap_or(-1),
                ));
            }
        }
        if to_truncate.is_empty() {
            return out;
        }
        // Kafka's initial state: a replica without epochs truncates to its high watermark.
        for p in &to_truncate {
            let empty_cache = p.latest_epoch().is_none();
            let Some(f) = out.iter().find(|(_, f, _, _)| Arc::ptr_eq(&f.partition, p)) else {
                continue;
            };
            if empty_cache {
                let offsets = p.offsets();
                let from = FetchedFrom {
                    fetch_offset: offsets.log_end_offset,
                    ..f.1.from(self.source.leader)
                };
                let partition = p.clone();
                let hw = offsets.high_watermark;
                let _ = tokio::task::spawn_blocking(move || {
                    partition.truncate_as_follower_of(from, hw)
                })
                .await;
            }
        }
        for (_, f, _, last) in out.iter_mut() {
            f.fetch_offset = f.partition.offsets().log_end_offset;
            *last = f.partition.latest_epoch().unwrap_or(-1);
        }
        out
    }

    async fn connection(&mut self) -> Result<&mut BrokerConnection, ConnectionError> {
        if self.connection.is_none() {
            let leader = self.source.leader;
            let image = self.metadata.image();
            let endpoint = image
                .broker(leader)
                .and_then(|b| crate::api::image_view::endpoint(b, &self.settings.listener));
            let Some((host, port)) = endpoint else {
                return Err(ConnectionError::Invalid {
                    addr: format!("broker {leader}"),
                    reason: format!("no {} endpoint registered", self.settings.listener),
                });
            };
            let max_response = self.settings.max_bytes.max(0) as usize + (64 << 20);
            let conn = BrokerConnection::connect(
                &format!("{host}:{port}"),
                &format!("sluice-replica-fetcher-{}", self.settings.local_id),
                max_response,
                SOCKET_TIMEOUT,
            )
            .await?;
            self.connection = Some(conn);
        }
        Ok(self.connection.as_mut().expect("set above"))
    }

    async fn fetch_once(
        &mut self,
        batch: Vec<(Uuid, InFlight, i32, i32)>,
    ) -> Result<(), ConnectionError> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        let mut in_flight: HashMap<(Uuid, i32), InFlight> = HashMap::new();
        for (topic_id, f, leader_epoch, last_fetched_epoch) in batch {
            let offsets = f.partition.offsets();
            let part = FetchPartition::default()
                .with_partition(f.partition.index)
                .with_current_leader_epoch(leader_epoch)
                .with_fetch_offset(f.fetch_offset)
                .with_last_fetched_epoch(last_fetched_epoch)
                .with_log_start_offset(offsets.log_start_offset)
                .with_partition_max_bytes(self.settings.partition_max_bytes);
            match topics.iter_mut().find(|t| t.topic_id == topic_id) {
                Some(t) => t.partitions.push(part),
                None => topics.push(
                    FetchTopic::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![part]),
                ),
            }
            in_flight.insert((topic_id, f.partition.index), f);
        }
        let request = FetchRequest::default()
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(BrokerId(self.settings.local_id))
                    .with_replica_epoch(-1),
            )
            .with_max_wait_ms(self.settings.max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(self.settings.max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(topics);
        let timeout =
            Duration::from_millis(self.settings.max_wait_ms.max(0) as u64) + SOCKET_TIMEOUT;
        let response: FetchResponse = self
            .connection()
            .await?
            .call(FETCH_VERSION, &request, timeout)
            .await?;
        if response.error_code != 0 {
            return Err(ConnectionError::Invalid {
                addr: format!("broker {}", self.source.leader),
                reason: format!("fetch answered error {}", response.error_code),
            });
        }
        for topic in response.responses {
            for p in topic.partitions {
                let Some(f) = in_flight.remove(&(topic.topic_id, p.partition_index)) else {
                    continue;
                };
                self.handle_partition(f, p).await;
            }
        }
        Ok(())
    }

    async fn handle_partition(
        &mut self,
        f: InFlight,
        p: kafka_protocol::messages::fetch_response::PartitionData,
    ) {
        let partition = f.partition.clone();
        if p.error_code == OFFSET_OUT_OF_RANGE {
            self.on_out_of_range(&f).await;
            return;
        }
        if p.error_code != 0 {
            tracing::debug!(
                "fetch of {}-{} from broker {}: error {}",
                f.topic,
                partition.index,
                self.source.leader,
                p.error_code
            );
            self.pause(&f);
            return;
        }
        if p.diverging_epoch.epoch >= 0 && p.diverging_epoch.end_offset >= 0 {
            let leader = EpochEndOffset {
                leader_epoch: p.diverging_epoch.epoch,
                end_offset: p.diverging_epoch.end_offset,
            };
            let point = partition.truncation_point(leader);
            tracing::info!(
                "{}-{}: leader {} diverges at epoch {} end {}: truncating to {}",
                f.topic,
                partition.index,
                self.source.leader,
                leader.leader_epoch,
                leader.end_offset,
                point.offset
            );
            let part = partition.clone();
            let from = f.from(self.source.leader);
            let done = tokio::task::spawn_blocking(move || {
                part.truncate_as_follower_of(from, point.offset)
            })
            .await;
            if !matches!(done, Ok(Ok(_))) {
                tracing::warn!(
                    "{}-{}: truncation failed: {done:?}",
                    f.topic,
                    partition.index
                );
                self.pause(&f);
            }
            return;
        }
        let records = p.records.unwrap_or_default();
        let (hw, log_start) = (p.high_watermark, p.log_start_offset);
        let part = partition.clone();
        let from = f.from(self.source.leader);
        let appended = tokio::task::spawn_blocking(move || {
            let appended = if records.is_empty() {
                None
            } else {
                // None: the partition's state changed since the fetch was sent; dropped.
                let a = part.append_as_follower_of(from, &records, now_ms())?;
                if let Some(end) = a.as_ref().and_then(|a| a.sync) {
                    part.sync_and_publish(end)?;
                }
                a
            };
            part.update_follower_offsets(hw, log_start);
            Ok::<_, crate::replica::partition::AppendError>(appended)
        })
        .await;
        match appended {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(
                    "{}-{}: follower append failed: {e}",
                    f.topic,
                    partition.index
                );
                self.pause(&f);
            }
            Err(e) => {
                tracing::warn!("{}-{}: follower append task: {e}", f.topic, partition.index);
                self.pause(&f);
            }
        }
    }

    /// OFFSET_OUT_OF_RANGE: the follower is below the leader's log start (retention there) or
    /// ahead of its log end. Kafka's rule: ask the leader's earliest and latest offsets; a
    /// follower ahead truncates to the leader's end, one behind restarts at the leader's start.
    async fn on_out_of_range(&mut self, f: &InFlight) {
        let ends = self.leader_offsets(f).await;
        let Ok((earliest, latest)) = ends else {
            self.pause(f);
            return;
        };
        let part = f.partition.clone();
        let from = f.from(self.source.leader);
        let leo = part.offsets().log_end_offset;
        // Only while this replica still follows as the fetch did (a leader's log is never cut).
        let result = tokio::task::spawn_blocking(move || {
            if leo > latest {
                part.truncate_as_follower_of(from, latest).map(|_| ())
            } else {
                part.truncate_fully_as_follower_of(from, earliest)
                    .map(|_| ())
            }
        })
        .await;
        tracing::info!(
            "{}-{}: out of range at {leo} (leader {earliest}..{latest}): {result:?}",
            f.topic,
            f.partition.index
        );
    }

    async fn leader_offsets(&mut self, f: &InFlight) -> Result<(i64, i64), ConnectionError> {
        let local_id = self.settings.local_id;
        let ask = |timestamp: i64| {
            ListOffsetsRequest::default()
                .with_replica_id(BrokerId(local_id))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(f.topic.clone())))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(f.partition.index)
                        .with_timestamp(timestamp)])])
        };
        let mut ends = [0i64; 2];
        for (i, timestamp) in [-2i64, -1].into_iter().enumerate() {
            let request = ask(timestamp);
            let answer: ListOffsetsResponse = self
                .connection()
                .await?
                .call(LIST_OFFSETS_VERSION, &request, SOCKET_TIMEOUT)
                .await?;
            let offset = answer
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .filter(|p| p.error_code == 0)
                .map(|p| p.offset);
            ends[i] = offset.ok_or_else(|| ConnectionError::Invalid {
                addr: format!("broker {}", self.source.leader),
                reason: "ListOffsets failed".into(),
            })?;
        }
        let _ = f.topic_id;
        Ok((ends[0], ends[1]))
    }

    fn pause(&self, f: &InFlight) {
        let until = Instant::now() + self.settings.backoff;
        if let Some(followed) = self
            .source
            .partitions
            .lock()
            .get_mut(&(f.topic_id, f.partition.index))
        {
            followed.paused_until = Some(until);
        }
    }
}
