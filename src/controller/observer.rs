//! A broker-only node's view of the metadata log (Kafka's KRaft observer): it fetches the
//! committed entries from the quorum leader (Fetch on `__cluster_metadata`, served by
//! `controller::metadata_fetch`) over the voters' CONTROLLER listeners and replays them into the
//! same [`MetadataApplier`] a voter's driver feeds (the broker's image and hosting). It finds
//! the leader by asking the voters of `controller.quorum.voters` in turn: a voter that does not
//! lead answers NOT_LEADER_OR_FOLLOWER with the leader it knows, which the next fetch goes to.
//! Without the voters (`controller.quorum.bootstrap.servers` alone, KIP-853) it asks the
//! bootstrap servers in turn the same way and learns the leader's endpoint from the answers'
//! `NodeEndpoints` ([`answer_endpoints`]) into the node's shared [`ControllerEndpoints`], which
//! the broker lifecycle, AlterPartition and forwarding channels read too.
//! When the leader no longer holds the entries after its position (they were compacted into a
//! snapshot), the answer names a snapshot, which the observer reads with FetchSnapshot and loads
//! (`MetadataApplier::load_snapshot`).
//!
//! The decisions on an answer are pure ([`on_fetch_answer`], [`parse_batches`]); the task
//! ([`Observer::start`]) sends, applies on the blocking pool (one call at a time, in log order)
//! and publishes the applied offset (what heartbeats report) and the leader it follows (the
//! lifecycle's, AlterPartition's and forwarding's controller).
//!
//! Where Sluice differs: the position lives in memory only (Kafka's brokers keep a local copy of
//! the metadata log), so a restarted broker fetches from offset 1, or loads a snapshot.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_snapshot_request::{
    PartitionSnapshot, SnapshotId, TopicSnapshot,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, FetchSnapshotRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::time::Instant;

use super::channel::{ChannelConfig, ControllerChannel, ControllerEndpoints};
use super::driver::MetadataApplier;
use super::metadata_fetch::METADATA_TOPIC_ID;
use super::rpc::METADATA_TOPIC;
use crate::metadata::{codec, MetadataRecord};
use crate::quorum::LeaderAndEpoch;
use crate::record::{uncompressed_records, validate_batch, BatchHeader};

/// Fetch version sent (Kafka 4.1's KRaft fetch).
const FETCH_VERSION: i16 = 17;
const FETCH_SNAPSHOT_VERSION: i16 = 1;
/// The long poll asked of the leader (Kafka's `controller.quorum.fetch.timeout.ms` / 4 is near).
const MAX_WAIT_MS: i32 = 500;
/// Bytes asked per fetch (Kafka's observer asks 8 MiB too).
const MAX_BYTES: i32 = 8 * 1024 * 1024;
/// Each request's limit beyond its long poll.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// A fetch's limit, retries included (then the leader is forgotten and the voters asked).
const FETCH_DEADLINE: Duration = Duration::from_millis(2000);
/// Pause after an answer that moved nothing (no leader known, an error).
const BACKOFF: Duration = Duration::from_millis(100);

/// What the observer needs to know.
#[derive(Debug, Clone)]
pub struct ObserverConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// The voters, or the bootstrap servers and what is learned from the answers.
    pub voters: ControllerEndpoints,
}

/// One metadata entry: its offset (raft index) and records.
pub type Entry = (u64, Vec<MetadataRecord>);

/// What to do with one Fetch answer (pure).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Apply these entries (offset, records: never empty), then the position is `upto + 1`.
    Apply {
        entries: Vec<(u64, Vec<MetadataRecord>)>,
        upto: u64,
        leader: Option<LeaderAndEpoch>,
    },
    /// Nothing new (a long poll that ended empty).
    Idle { leader: Option<LeaderAndEpoch> },
    /// Read and load this snapshot (Kafka's end offset: it holds offsets below it).
    LoadSnapshot {
        end_offset: i64,
        epoch: i32,
        leader: Option<LeaderAndEpoch>,
    },
    /// The voter does not lead: follow `leader` (None: unknown, try another voter).
    Redirect { leader: Option<LeaderAndEpoch> },
    /// An error: back off and fetch again (the reason, for one log line).
    Retry(String),
}

fn leader_of(id: i32, epoch: i32) -> Option<LeaderAndEpoch> {
    (id >= 0).then(|| LeaderAndEpoch {
        leader_id: Some(id),
        epoch: u64::try_from(epoch).unwrap_or(0),
    })
}

/// Every whole batch in `bytes` as (base offset, decoded records). A partial batch at the end
/// is ignored (Kafka may cut one); a damaged one or a record that does not decode is an error.
fn decode_batches(mut bytes: &[u8]) -> Result<Vec<(i64, Vec<MetadataRecord>)>, String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let Ok(header) = BatchHeader::parse(bytes) else {
            break; // a partial header
        };
        let size = header.total_size();
        if bytes.len() < size {
            break;
        }
        let (batch, rest) = bytes.split_at(size);
        bytes = rest;
        let header = validate_batch(batch).map_err(|e| format!("metadata batch: {e}"))?;
        let base = header.base_offset;
        let records = uncompressed_records(batch)
            .ok_or_else(|| format!("metadata batch at offset {base}: records do not parse"))?;
        let decoded = records
            .iter()
            .map(|(_, v)| {
                v.as_deref()
                    .ok_or_else(|| "a metadata record without a value".to_string())
                    .and_then(|v| codec::decode(v).map_err(|e| e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push((base, decoded));
    }
    Ok(out)
}

/// The entries of a Fetch answer's records at or past `position`, as (offset, records) for
/// batches holding records, and the last offset covered (None: no batch). One batch is one
/// entry: its base offset is the entry's raft index (its records' offset deltas are the
/// format's, not offsets of their own), strictly increasing.
pub fn parse_batches(bytes: &[u8], position: u64) -> Result<(Vec<Entry>, Option<u64>), String> {
    let mut entries = Vec::new();
    let mut upto: Option<u64> = None;
    for (base, records) in decode_batches(bytes)? {
        let Ok(base) = u64::try_from(base) else {
            return Err(format!("metadata batch at offset {base}"));
        };
        if upto.is_some_and(|u| base <= u) {
            return Err(format!("metadata batch at offset {base} out of order"));
        }
        upto = Some(base);
        if base >= position && !records.is_empty() {
            entries.push((base, records));
        }
    }
    Ok((entries, upto))
}

/// The records of a snapshot's batches, in order.
pub fn snapshot_records(bytes: &[u8]) -> Result<Vec<MetadataRecord>, String> {
    Ok(decode_batches(bytes)?
        .into_iter()
        .flat_map(|(_, r)| r)
        .collect())
}

/// The (node id, "host:port") endpoints a Fetch answer names (Kafka's `NodeEndpoints`, v16+:
/// the leader's endpoint on the listener the request came in on).
pub fn answer_endpoints(r: &FetchResponse) -> Vec<(i32, String)> {
    r.node_endpoints
        .iter()
        .filter_map(|e| {
            let port = u16::try_from(e.port).ok().filter(|p| *p > 0)?;
            let host = e.host.as_str();
            if e.node_id.0 < 0 || host.is_empty() {
                return None;
            }
            let endpoint = crate::config::quorum::QuorumVoter {
                id: e.node_id.0,
                host: host.to_string(),
                port,
            };
            Some((endpoint.id, endpoint.address()))
        })
        .collect()
}

/// The step one Fetch answer calls for, for an observer at `position` (the next offset it wants).
pub fn on_fetch_answer(position: u64, r: &FetchResponse) -> Step {
    if r.error_code != 0 {
        return Step::Retry(format!(
            "fetch refused: {:?}",
            ResponseError::try_from_code(r.error_code)
        ));
    }
    let Some(p) = r
        .responses
        .iter()
        .filter(|t| t.topic_id == METADATA_TOPIC_ID)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == 0)
    else {
        return Step::Retry("the answer names no __cluster_metadata partition".into());
    };
    let leader = leader_of(p.current_leader.leader_id.0, p.current_leader.leader_epoch);
    if p.error_code == ResponseError::NotLeaderOrFollower.code()
        || p.error_code == ResponseError::FencedLeaderEpoch.code()
    {
        return Step::Redirect { leader };
    }
    if p.error_code != 0 {
        return Step::Retry(format!(
            "fetch at {position}: {:?}",
            ResponseError::try_from_code(p.error_code)
        ));
    }
    if p.snapshot_id.end_offset >= 0 {
        return Step::LoadSnapshot {
            end_offset: p.snapshot_id.end_offset,
            epoch: p.snapshot_id.epoch,
            leader,
        };
    }
    let bytes = p.records.as_deref().unwrap_or_default();
    match parse_batches(bytes, position) {
        Err(e) => Step::Retry(e),
        Ok((entries, Some(upto))) if upto >= position => Step::Apply {
            entries,
            upto,
            leader,
        },
        Ok(_) => Step::Idle { leader },
    }
}

/// The running observer.
pub struct Observer {
    leader: watch::Receiver<LeaderAndEpoch>,
    applied: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Starts fetching from offset 1 into `applier`. Must be called inside a tokio runtime.
    pub fn start(config: ObserverConfig, applier: Arc<dyn MetadataApplier>) -> Observer {
        let (leader_tx, leader) = watch::channel(LeaderAndEpoch {
            leader_id: None,
            epoch: 0,
        });
        let (applied_tx, applied) = watch::channel(0);
        let channel = ControllerChannel::new(
            ChannelConfig {
                voters: config.voters.clone(),
                request_timeout: REQUEST_TIMEOUT,
                client_id: format!("sluice-observer-{}", config.node_id),
            },
            Some(leader.clone()),
        );
        let task = tokio::spawn(run(Task {
            config,
            applier,
            channel,
            leader: leader_tx,
            applied: applied_tx,
        }));
        Observer {
            leader,
            applied,
            task,
        }
    }

    /// The quorum leader as the last answer named it.
    pub fn leader(&self) -> watch::Receiver<LeaderAndEpoch> {
        self.leader.clone()
    }

    /// The offset of the last entry applied (what heartbeats report).
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }

    /// Stops fetching (an apply in progress on the blocking pool finishes).
    pub async fn shutdown(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

struct Task {
    config: ObserverConfig,
    applier: Arc<dyn MetadataApplier>,
    channel: ControllerChannel,
    leader: watch::Sender<LeaderAndEpoch>,
    applied: watch::Sender<u64>,
}

impl Task {
    fn follow(&self, leader: Option<LeaderAndEpoch>) {
        let next = leader.unwrap_or(LeaderAndEpoch {
            leader_id: None,
            epoch: self.leader.borrow().epoch,
        });
        self.leader.send_if_modified(|l| {
            let changed = *l != next;
            if changed {
                tracing::info!(
                    "metadata observer {}: quorum leader {:?} (epoch {})",
                    self.config.node_id,
                    next.leader_id,
                    next.epoch
                );
            }
            *l = next;
            changed
        });
    }

    fn position(&self) -> u64 {
        *self.applied.borrow() + 1
    }

    fn fetch_request(&self) -> FetchRequest {
        FetchRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(self.config.cluster_id.clone())))
            .with_replica_id((-1).into())
            .with_replica_state(
                ReplicaState::default()
                    .with_replica_id(self.config.node_id.into())
                    .with_replica_epoch(-1),
            )
            .with_max_wait_ms(MAX_WAIT_MS)
            .with_min_bytes(0)
            .with_max_bytes(MAX_BYTES)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(METADATA_TOPIC_ID)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(i64::try_from(self.position()).unwrap_or(i64::MAX))
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(MAX_BYTES)])])
    }

    /// Applies `entries` in order on the blocking pool, then publishes `upto`.
    async fn apply(&self, entries: Vec<(u64, Vec<MetadataRecord>)>, upto: u64) {
        let applier = self.applier.clone();
        let done = tokio::task::spawn_blocking(move || {
            for (offset, records) in entries {
                applier.apply(offset, records);
            }
        })
        .await;
        if let Err(e) = done {
            tracing::error!("metadata observer: applying up to offset {upto} failed: {e}");
        }
        self.applied.send_replace(upto);
    }

    /// Reads the snapshot `(end_offset, epoch)` whole and loads it; false if it could not.
    async fn load_snapshot(&mut self, end_offset: i64, epoch: i32) -> bool {
        let mut bytes = Vec::new();
        loop {
            let request = FetchSnapshotRequest::default()
                .with_cluster_id(Some(StrBytes::from_string(self.config.cluster_id.clone())))
                .with_replica_id((-1).into())
                .with_max_bytes(MAX_BYTES)
                .with_topics(vec![TopicSnapshot::default()
                    .with_name(kafka_protocol::messages::TopicName(
                        StrBytes::from_static_str(METADATA_TOPIC),
                    ))
                    .with_partitions(vec![PartitionSnapshot::default()
                        .with_partition(0)
                        .with_current_leader_epoch(-1)
                        .with_snapshot_id(
                            SnapshotId::default()
                                .with_end_offset(end_offset)
                                .with_epoch(epoch),
                        )
                        .with_position(bytes.len() as i64)])]);
            let deadline = Instant::now() + REQUEST_TIMEOUT;
            let answer = match self
                .channel
                .send(&request, FETCH_SNAPSHOT_VERSION, deadline)
                .await
            {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("metadata observer: FetchSnapshot: {e}");
                    return false;
                }
            };
            let Some(p) = answer
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.index == 0)
            else {
                return false;
            };
            if p.error_code != 0 || answer.error_code != 0 {
                tracing::info!(
                    "metadata observer: FetchSnapshot of {end_offset}: {:?}",
                    ResponseError::try_from_code(p.error_code.max(answer.error_code))
                );
                return false;
            }
            if p.position != bytes.len() as i64 {
                return false;
            }
            bytes.extend_from_slice(&p.unaligned_records);
            let size = usize::try_from(p.size).unwrap_or(0);
            if bytes.len() >= size || p.unaligned_records.is_empty() {
                break;
            }
        }
        let records = match snapshot_records(&bytes) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!("metadata observer: snapshot {end_offset}: {e}");
                return false;
            }
        };
        let Some(offset) = u64::try_from(end_offset - 1).ok() else {
            return false;
        };
        let applier = self.applier.clone();
        let n = records.len();
        let done =
            tokio::task::spawn_blocking(move || applier.load_snapshot(offset, records)).await;
        if let Err(e) = done {
            tracing::error!("metadata observer: loading the snapshot at {offset} failed: {e}");
        }
        tracing::info!(
            "metadata observer {}: loaded the snapshot at offset {offset} ({n} records)",
            self.config.node_id
        );
        self.applied.send_replace(offset);
        true
    }
}

async fn run(mut t: Task) {
    loop {
        let request = t.fetch_request();
        let position = t.position();
        // A leader that went away is given up on soon: the voters are asked in turn.
        let deadline = Instant::now() + FETCH_DEADLINE;
        let answer = t.channel.send(&request, FETCH_VERSION, deadline).await;
        let answer = match answer {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("metadata observer: fetch: {e}");
                t.follow(None);
                continue;
            }
        };
        // Learned before the leader is published: whoever follows it finds its address.
        for (id, address) in answer_endpoints(&answer) {
            if t.config.voters.learn(id, address.clone()) {
                tracing::info!("metadata observer: controller {id} is at {address}");
            }
        }
        match on_fetch_answer(position, &answer) {
            Step::Apply {
                entries,
                upto,
                leader,
            } => {
                t.follow(leader);
                t.apply(entries, upto).await;
            }
            Step::Idle { leader } => t.follow(leader),
            Step::LoadSnapshot {
                end_offset,
                epoch,
                leader,
            } => {
                t.follow(leader);
                if !t.load_snapshot(end_offset, epoch).await {
                    tokio::time::sleep(BACKOFF).await;
                }
            }
            Step::Redirect { leader } => {
                // A leader whose address is not known yet is no use: ask the next endpoint.
                let known = leader
                    .and_then(|l| l.leader_id)
                    .is_some_and(|id| t.config.voters.address_of(id).is_some());
                t.follow(leader);
                if !known {
                    t.channel.move_on();
                    tokio::time::sleep(BACKOFF).await;
                }
            }
            Step::Retry(why) => {
                tracing::debug!("metadata observer: {why}");
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
}

#[cfg(test)]
#[path = "observer_tests.rs"]
mod tests;
