//! The voter side of observers (broker-only nodes, `controller::observer`): Fetch and
//! FetchSnapshot on `__cluster_metadata` partition 0, served on the CONTROLLER listener by the
//! quorum leader, in Kafka's KRaft shapes (`KafkaRaftClient.handleFetchRequest` /
//! `handleFetchSnapshotRequest`).
//!
//! Sluice's voters replicate with raft-rs's own messages (`quorum::transport`), so this is not
//! the log the voters replicate: it is the [`MetadataTail`] the driver fills as it applies
//! committed entries (each entry one record batch at its raft index, its records in Kafka's
//! metadata record format, `metadata::codec`). A fetch below the tail is answered with a
//! `snapshot_id` (error NONE, as Kafka); the snapshot is the applied controller state at the
//! tail's applied offset (`Controller::snapshot`, the records a raft snapshot holds), built on
//! demand and kept while the tail still covers the offset after it, and read in pieces by
//! position with FetchSnapshot.
//!
//! Answers: INCONSISTENT_CLUSTER_ID (top level) for another cluster's id; INVALID_REQUEST (top
//! level) unless exactly one partition is asked; UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION
//! for another topic; NOT_LEADER_OR_FOLLOWER with `current_leader` from a voter that does not
//! lead; OFFSET_OUT_OF_RANGE for a position past the log end. A fetch at the log end waits
//! (long poll) for the next applied entry, at most `max_wait_ms` (bounded by [`MAX_WAIT`]).
//! High watermark = applied offset + 1 (every served entry is committed), log start = base + 1.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{fetch_response, fetch_snapshot_response};
use kafka_protocol::messages::{
    FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::watch;
use uuid::Uuid;

use super::rpc::{ControllerApis, METADATA_TOPIC};
use super::tail::{MetadataTail, TailRead};
use crate::metadata::{codec, MetadataRecord};

/// Kafka's `Uuid.METADATA_TOPIC_ID` (`__cluster_metadata`'s fixed topic id).
pub const METADATA_TOPIC_ID: Uuid = Uuid::from_u64_pair(0, 1);

/// Longest long poll of an observer's fetch (Kafka's observers ask 500 ms).
pub const MAX_WAIT: Duration = Duration::from_secs(5);

/// Bytes of applied batches a voter keeps for observers (beyond: they load a snapshot).
pub const TAIL_MAX_BYTES: usize = 64 * 1024 * 1024;

/// Records per batch of a served snapshot.
const SNAPSHOT_BATCH_RECORDS: usize = 1000;

/// A snapshot as observers read it: its id and its bytes (record batches).
#[derive(Debug, Clone)]
pub struct ServedSnapshot {
    /// Kafka's snapshot end offset: the applied offset it holds + 1.
    pub end_offset: i64,
    pub epoch: i32,
    pub bytes: Bytes,
}

/// The tail, its applied offset as a watch (long polls wait on it) and the last snapshot
/// served. Thread-safe; locks are held briefly, never across an `.await`. Lock order: the
/// driver's applied state, then `tail`, then `snapshot`.
pub struct SharedTail {
    tail: Mutex<MetadataTail>,
    applied: watch::Sender<u64>,
    snapshot: Mutex<Option<ServedSnapshot>>,
    observers: Mutex<Observers>,
}

/// An observer as the leader saw it fetch (DescribeQuorum's `observers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverState {
    /// The last offset it holds (its fetch offset - 1: raft indexes, as the voters' entries).
    pub log_end_offset: u64,
    pub last_fetch_ms: i64,
    /// When it last fetched at the log end (-1: never).
    pub last_caught_up_ms: i64,
}

/// The observers that fetched from this voter, by node id. Pure (time is an argument); at most
/// [`MAX_OBSERVERS`], the least recently seen dropped first; one silent for
/// [`OBSERVER_SESSION_MS`] is forgotten (Kafka's observer session timeout).
#[derive(Debug, Default)]
pub struct Observers {
    by_id: std::collections::BTreeMap<i32, ObserverState>,
}

/// Kafka's `OBSERVER_SESSION_TIMEOUT_MS`.
pub const OBSERVER_SESSION_MS: i64 = 300_000;
/// Observers remembered at most.
pub const MAX_OBSERVERS: usize = 10_000;

impl Observers {
    /// Observer `id` fetched at `fetch_offset` at `now_ms`, the log ending at `applied`.
    pub fn on_fetch(&mut self, id: i32, fetch_offset: u64, applied: u64, now_ms: i64) {
        let caught_up = fetch_offset > applied;
        let previous = self.by_id.get(&id).map_or(-1, |o| o.last_caught_up_ms);
        self.by_id.insert(
            id,
            ObserverState {
                log_end_offset: fetch_offset.saturating_sub(1),
                last_fetch_ms: now_ms,
                last_caught_up_ms: if caught_up { now_ms } else { previous },
            },
        );
        while self.by_id.len() > MAX_OBSERVERS {
            let oldest = self
                .by_id
                .iter()
                .min_by_key(|(_, o)| o.last_fetch_ms)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                self.by_id.remove(&id);
            }
        }
    }

    /// The observers seen within the session timeout, by id.
    pub fn live(&mut self, now_ms: i64) -> Vec<(i32, ObserverState)> {
        self.by_id
            .retain(|_, o| now_ms.saturating_sub(o.last_fetch_ms) < OBSERVER_SESSION_MS);
        self.by_id.iter().map(|(id, o)| (*id, *o)).collect()
    }
}

impl SharedTail {
    pub fn new(max_bytes: usize) -> SharedTail {
        SharedTail {
            tail: Mutex::new(MetadataTail::new(max_bytes)),
            applied: watch::channel(0).0,
            snapshot: Mutex::new(None),
            observers: Mutex::new(Observers::default()),
        }
    }

    /// The observers that fetched within the session timeout (DescribeQuorum).
    pub fn observers(&self, now_ms: i64) -> Vec<(i32, ObserverState)> {
        self.observers.lock().live(now_ms)
    }

    /// The entry at `offset` was applied with `records` (empty: it applied nothing).
    pub fn push(&self, offset: u64, records: &[MetadataRecord], timestamp_ms: i64) {
        let batch = (!records.is_empty()).then(|| encode_batch(offset, records, timestamp_ms));
        self.tail.lock().push(offset, batch);
        self.applied.send_replace(offset);
    }

    /// A snapshot at `offset` replaced the applied state.
    pub fn reset(&self, offset: u64) {
        self.tail.lock().reset(offset);
        self.applied.send_replace(offset);
    }

    /// The quorum took a snapshot at `offset`.
    pub fn trim_to(&self, offset: u64) {
        self.tail.lock().trim_to(offset);
    }

    pub fn read(&self, fetch_offset: u64, max_bytes: usize) -> (TailRead, u64, u64) {
        let t = self.tail.lock();
        (t.read(fetch_offset, max_bytes), t.applied(), t.base())
    }

    pub fn applied(&self) -> u64 {
        self.tail.lock().applied()
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }
}

/// One uncompressed batch at `offset` holding `records` (keys null, values Kafka's metadata
/// record bytes), or an empty batch (no records) when `records` is empty.
pub fn encode_batch(offset: u64, records: &[MetadataRecord], timestamp_ms: i64) -> Bytes {
    let values: Vec<Vec<u8>> = records.iter().map(codec::encode).collect();
    let kvs: Vec<crate::record::KeyValue<'_>> =
        values.iter().map(|v| (None, Some(v.as_slice()))).collect();
    let base = i64::try_from(offset).unwrap_or(i64::MAX);
    Bytes::from(crate::record::build_batch(
        base,
        timestamp_ms,
        (-1, -1, -1),
        &kvs,
    ))
}

/// `records` as the batches of a snapshot whose last offset is `offset`.
fn snapshot_bytes(offset: u64, records: &[MetadataRecord], timestamp_ms: i64) -> Bytes {
    let mut out = Vec::new();
    if records.is_empty() {
        out.extend_from_slice(&encode_batch(offset, &[], timestamp_ms));
    }
    for chunk in records.chunks(SNAPSHOT_BATCH_RECORDS) {
        out.extend_from_slice(&encode_batch(offset, chunk, timestamp_ms));
    }
    Bytes::from(out)
}

fn leader_id_and_epoch(apis: &ControllerApis) -> (i32, i32) {
    let l = *apis.handle.leader().borrow();
    (
        l.leader_id.unwrap_or(-1),
        i32::try_from(l.epoch).unwrap_or(i32::MAX),
    )
}

fn leads(apis: &ControllerApis) -> bool {
    apis.handle.leader().borrow().leader_id == Some(apis.handle.node_id())
}

fn leader_endpoint(apis: &ControllerApis) -> Option<(i32, String, u16)> {
    let id = apis.handle.leader().borrow().leader_id?;
    let v = apis.voters.iter().find(|v| v.id == id)?;
    Some((v.id, v.host.clone(), v.port))
}

/// The snapshot to serve: the cached one while the tail still covers the offsets after it,
/// else a new one of the applied state.
fn current_snapshot(apis: &ControllerApis) -> ServedSnapshot {
    let tail = apis.handle.tail();
    let base = tail.tail.lock().base();
    if let Some(s) = tail.snapshot.lock().as_ref() {
        if u64::try_from(s.end_offset).unwrap_or(0) > base {
            return s.clone();
        }
    }
    let (offset, records) = apis.handle.metadata_snapshot();
    let (_, epoch) = leader_id_and_epoch(apis);
    let s = ServedSnapshot {
        end_offset: i64::try_from(offset).unwrap_or(i64::MAX - 1) + 1,
        epoch,
        bytes: snapshot_bytes(offset, &records, (apis.wall_clock)()),
    };
    *tail.snapshot.lock() = Some(s.clone());
    s
}

/// Fetch on `__cluster_metadata` (see the module doc).
pub async fn fetch(apis: &ControllerApis, r: FetchRequest, version: i16) -> FetchResponse {
    use fetch_response::{FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData};
    let top = |e: ResponseError| FetchResponse::default().with_error_code(e.code());
    if r.cluster_id
        .as_ref()
        .is_some_and(|c| c.as_str() != apis.cluster_id)
    {
        return top(ResponseError::InconsistentClusterId);
    }
    let (topic, partition) = match r.topics.as_slice() {
        [t] if t.partitions.len() == 1 => (t, &t.partitions[0]),
        _ => return top(ResponseError::InvalidRequest),
    };
    let by_id = version >= 13;
    let respond = |p: PartitionData| {
        let mut t = FetchableTopicResponse::default().with_partitions(vec![p]);
        if by_id {
            t.topic_id = topic.topic_id;
        } else {
            t.topic = topic.topic.clone();
        }
        let mut response = FetchResponse::default().with_responses(vec![t]);
        if version >= 16 {
            if let Some((id, host, port)) = leader_endpoint(apis) {
                response.node_endpoints = vec![NodeEndpoint::default()
                    .with_node_id(id.into())
                    .with_host(StrBytes::from_string(host))
                    .with_port(i32::from(port))];
            }
        }
        response
    };
    let base = PartitionData::default()
        .with_partition_index(partition.partition)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1);
    let known = if by_id {
        topic.topic_id == METADATA_TOPIC_ID
    } else {
        topic.topic.as_str() == METADATA_TOPIC
    };
    if !known || partition.partition != 0 {
        let e = if by_id && !known {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        return respond(base.with_error_code(e.code()));
    }
    let current_leader = || {
        let (id, epoch) = leader_id_and_epoch(apis);
        LeaderIdAndEpoch::default()
            .with_leader_id(id.into())
            .with_leader_epoch(epoch)
    };
    let tail = apis.handle.tail();
    let mut applied_rx = tail.subscribe();
    let wait = Duration::from_millis(u64::try_from(r.max_wait_ms).unwrap_or(0)).min(MAX_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    let fetch_offset = u64::try_from(partition.fetch_offset).unwrap_or(0);
    let replica_id = if version >= 15 {
        r.replica_state.replica_id.0
    } else {
        r.replica_id.0
    };
    let observer =
        (replica_id >= 0 && !apis.voters.iter().any(|v| v.id == replica_id)).then_some(replica_id);
    let max_bytes = usize::try_from(partition.partition_max_bytes.min(r.max_bytes))
        .unwrap_or(0)
        .max(1);
    loop {
        if !leads(apis) {
            return respond(
                base.with_error_code(ResponseError::NotLeaderOrFollower.code())
                    .with_current_leader(current_leader()),
            );
        }
        let _ = applied_rx.borrow_and_update();
        let (read, applied, log_base) = tail.read(fetch_offset, max_bytes);
        if let Some(id) = observer {
            tail.observers
                .lock()
                .on_fetch(id, fetch_offset.max(1), applied, (apis.wall_clock)());
        }
        let ok = base
            .clone()
            .with_high_watermark(i64::try_from(applied).unwrap_or(i64::MAX - 1) + 1)
            .with_last_stable_offset(i64::try_from(applied).unwrap_or(i64::MAX - 1) + 1)
            .with_log_start_offset(i64::try_from(log_base).unwrap_or(i64::MAX - 1) + 1)
            .with_current_leader(current_leader());
        match read {
            TailRead::Entries { batches, upto } => {
                let mut records = Vec::new();
                let last = batches.last().map(|(o, _)| *o);
                for (_, b) in &batches {
                    records.extend_from_slice(b);
                }
                if last.is_none_or(|o| o < upto) {
                    // Entries applied as nothing up to `upto`: an empty batch moves the
                    // observer past them.
                    records.extend_from_slice(&encode_batch(upto, &[], (apis.wall_clock)()));
                }
                return respond(ok.with_records(Some(Bytes::from(records))));
            }
            TailRead::SnapshotNeeded => {
                let s = current_snapshot(apis);
                return respond(
                    ok.with_snapshot_id(
                        fetch_response::SnapshotId::default()
                            .with_end_offset(s.end_offset)
                            .with_epoch(s.epoch),
                    )
                    .with_records(Some(Bytes::new())),
                );
            }
            TailRead::AheadOfLog => {
                return respond(ok.with_error_code(ResponseError::OffsetOutOfRange.code()));
            }
            TailRead::UpToDate => {
                let now = tokio::time::Instant::now();
                if now >= deadline {
                    return respond(ok.with_records(Some(Bytes::new())));
                }
                let mut leader = apis.handle.leader();
                tokio::select! {
                    _ = applied_rx.changed() => {}
                    _ = leader.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
            }
        }
    }
}

/// FetchSnapshot of `__cluster_metadata` (see the module doc): the snapshot named by the
/// Fetch answer, from `position`, at most `max_bytes`; SNAPSHOT_NOT_FOUND once it is replaced.
pub async fn fetch_snapshot(
    apis: &ControllerApis,
    r: FetchSnapshotRequest,
) -> FetchSnapshotResponse {
    use fetch_snapshot_response::{LeaderIdAndEpoch, PartitionSnapshot, SnapshotId, TopicSnapshot};
    let top = |e: ResponseError| FetchSnapshotResponse::default().with_error_code(e.code());
    if r.cluster_id
        .as_ref()
        .is_some_and(|c| c.as_str() != apis.cluster_id)
    {
        return top(ResponseError::InconsistentClusterId);
    }
    let (topic, p) = match r.topics.as_slice() {
        [t] if t.partitions.len() == 1 => (t, &t.partitions[0]),
        _ => return top(ResponseError::InvalidRequest),
    };
    let respond = |part: PartitionSnapshot| {
        FetchSnapshotResponse::default().with_topics(vec![TopicSnapshot::default()
            .with_name(topic.name.clone())
            .with_partitions(vec![part])])
    };
    let (leader_id, epoch) = leader_id_and_epoch(apis);
    let base = PartitionSnapshot::default()
        .with_index(p.partition)
        .with_snapshot_id(
            SnapshotId::default()
                .with_end_offset(p.snapshot_id.end_offset)
                .with_epoch(p.snapshot_id.epoch),
        )
        .with_current_leader(
            LeaderIdAndEpoch::default()
                .with_leader_id(leader_id.into())
                .with_leader_epoch(epoch),
        );
    if topic.name.as_str() != METADATA_TOPIC || p.partition != 0 {
        return respond(base.with_error_code(ResponseError::UnknownTopicOrPartition.code()));
    }
    if !leads(apis) {
        return respond(base.with_error_code(ResponseError::NotLeaderOrFollower.code()));
    }
    let cached = apis.handle.tail().snapshot.lock().clone();
    let Some(s) = cached
        .filter(|s| s.end_offset == p.snapshot_id.end_offset && s.epoch == p.snapshot_id.epoch)
    else {
        return respond(base.with_error_code(ResponseError::SnapshotNotFound.code()));
    };
    let size = s.bytes.len();
    let Some(position) = usize::try_from(p.position).ok().filter(|pos| *pos <= size) else {
        return respond(base.with_error_code(ResponseError::PositionOutOfRange.code()));
    };
    let max = usize::try_from(r.max_bytes).unwrap_or(0).max(1);
    let end = size.min(position.saturating_add(max));
    respond(
        base.with_size(size as i64)
            .with_position(position as i64)
            .with_unaligned_records(s.bytes.slice(position..end)),
    )
}

#[cfg(test)]
#[path = "metadata_fetch_tests.rs"]
mod tests;
