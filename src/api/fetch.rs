//! Fetch (key 1): read whole batches from each requested partition and long-poll until `min_bytes`
//! are available or `max_wait_ms` passes.
//!
//! Waiting never sleeps in a loop: the request subscribes to each partition's high-watermark watch
//! *before* its first read, so an append between the read and the wait still wakes it. Record bytes
//! travel as the log returned them (`Records`: bytes for small reads, a file range sent with
//! `sendfile` for large ones), spliced into the response by `fetch_encode`.
//! Fetch sessions (KIP-227) are not kept: every answer is a full response with session id 0.
//!
//! Client quotas (`client_quota`): a consumer's fetch (replica id < 0) is capped at its
//! `consumer_byte_rate` over the quota windows, and its answer's size is charged to that rate once
//! read; over the quota it answers empty with the throttle time instead (Kafka's throttled
//! response) and the connection is muted for that long (`Reply::Throttled` / `LaterThrottled`).
//! Followers' fetches are never throttled.
//!
//! Byte limits are Kafka's (KIP-74, `ReplicaManager.readFromLocalLog`): partitions are read in
//! request order, each up to `min(partition_max_bytes, what is left of max_bytes)` in whole
//! batches, and only until a partition has returned records is a first batch sent whole when it
//! exceeds that (minOneMessage). Errored partitions carry -1 offsets and an empty record set, as
//! Kafka's. A damaged batch where a read starts answers CORRUPT_MESSAGE: Kafka's answer, which
//! clients surface to the application (librdkafka as a consumer error with its fetch backoff;
//! KAFKA_STORAGE_ERROR made it refresh metadata and refetch at once from the same leader).
//!
//! isolation_level 1 (read_committed) reads stop at the last stable offset and carry the aborted
//! transactions overlapping the data returned; every partition answer carries the real LSO (both
//! levels, as Kafka). `min_bytes` counts only what the isolation level may return, and a
//! transaction marker is an append, so it wakes read_committed waiters through the same watch.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::select_all;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::{FetchRequest, TopicName};
use tokio::sync::watch;
use uuid::Uuid;

use super::fetch_encode::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData,
};
use super::{error, put_response_header, Chunk, Frame, Reply, RequestContext};
use crate::broker::Broker;
use crate::log::{LogError, Records};
use crate::replica::partition::{Partition, ReplicaFetchCheck};
use crate::replica::replication::leader::FollowerFetch;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// One requested partition, resolved once.
struct Target {
    request: FetchPartition,
    partition: Result<Arc<Partition>, i16>,
}

struct TopicTarget {
    name: TopicName,
    id: Uuid,
    targets: Vec<Target>,
}

struct Plan {
    ctx: RequestContext,
    topics: Vec<TopicTarget>,
    max_bytes: usize,
    min_bytes: usize,
    session_error: i16,
    /// isolation_level 1.
    read_committed: bool,
    /// The fetching follower's broker id (replica id >= 0): reads go to the log end and the
    /// fetch moves the leader's replication state (`replica::partition` replication).
    replica: Option<i32>,
}

pub fn handle(broker: Arc<Broker>, ctx: RequestContext, request: FetchRequest) -> Reply {
    let by_id = ctx.api_version >= 13;
    // v15+ carries the follower in ReplicaState, older versions in ReplicaId; consumers send -1.
    let replica_id = if ctx.api_version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    // What exists is the image's; the partition's log is the replica manager's.
    let image = broker.image();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = if by_id {
                image.topic_by_id(t.topic_id)
            } else {
                image.topic(t.topic.as_str())
            };
            // As Kafka: an unknown topic id is UNKNOWN_TOPIC_ID (v13+), an unknown partition of a
            // known topic UNKNOWN_TOPIC_OR_PARTITION at every version.
            let missing = if by_id && topic.is_none() {
                error::UNKNOWN_TOPIC_ID
            } else {
                error::UNKNOWN_TOPIC_OR_PARTITION
            };
            let targets = t
                .partitions
                .into_iter()
                .map(|fp| {
                    let partition = match &topic {
                        Some(tp) => {
                            super::image_view::leader_partition(&broker, &tp.name, fp.partition)
                        }
                        None => Err(missing),
                    };
                    Target {
                        request: fp,
                        partition,
                    }
                })
                .collect();
            TopicTarget {
                name: t.topic,
                id: t.topic_id,
                targets,
            }
        })
        .collect();
    let session_error = if request.session_id != 0 {
        FETCH_SESSION_ID_NOT_FOUND
    } else {
        error::NONE
    };
    let mut max_bytes = if request.max_bytes <= 0 {
        usize::MAX
    } else {
        request.max_bytes as usize
    };
    let mut min_bytes = request.min_bytes.max(0) as usize;
    if replica_id < 0 {
        // A consumer under a `consumer_byte_rate` quota fetches at most what the quota allows
        // over its windows (Kafka's `maxQuotaWindowBytes`), and waits for no more than that.
        let client_id = ctx.client_id_str();
        if let Some(cap) = broker.quotas.fetch_max_bytes(&image, client_id.as_deref()) {
            max_bytes = max_bytes.min(cap);
            min_bytes = min_bytes.min(max_bytes);
        }
    }
    let plan = Plan {
        ctx,
        topics,
        max_bytes,
        min_bytes,
        session_error,
        read_committed: request.isolation_level == 1 && replica_id < 0,
        replica: (replica_id >= 0).then_some(replica_id),
    };
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);

    // Subscribe before the first read so no append can slip between the read and the wait.
    let mut watches: Vec<watch::Receiver<i64>> = plan
        .topics
        .iter()
        .flat_map(|t| t.targets.iter())
        .filter_map(|t| {
            t.partition.as_ref().ok().map(|p| match plan.replica {
                Some(_) => p.subscribe_log_end(),
                None => p.subscribe(),
            })
        })
        .collect();
    let first = read_all(&plan);
    if let Some(replica) = plan.replica {
        record_replica_fetch(&broker, &plan, replica);
    }
    if first.ready(plan.min_bytes) || max_wait.is_zero() || watches.is_empty() {
        let (frame, throttle_ms) = answer(&broker, &plan, first);
        return Reply::throttled(throttle_ms, Reply::Now(frame));
    }
    let from_replica = plan.replica.is_some();
    let wait = async move {
        let deadline = tokio::time::Instant::now() + max_wait;
        let outcome = loop {
            let changed = select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
            match tokio::time::timeout_at(deadline, changed).await {
                Err(_elapsed) => break read_all(&plan),
                Ok((Err(_closed), _, _)) => break read_all(&plan),
                Ok((Ok(()), _, _)) => {
                    let outcome = read_all(&plan);
                    if outcome.ready(plan.min_bytes) {
                        break outcome;
                    }
                }
            }
        };
        answer(&broker, &plan, outcome)
    };
    if from_replica {
        // Replication is never throttled by client quotas.
        return Reply::Later(Box::pin(async move { wait.await.0 }));
    }
    Reply::LaterThrottled(Box::pin(async move {
        let (frame, throttle_ms) = wait.await;
        let throttle = Duration::from_millis(u64::try_from(throttle_ms).unwrap_or(0));
        (frame, throttle)
    }))
}

/// The encoded answer of `outcome` and its throttle time. A consumer's answer is charged to its
/// `consumer_byte_rate` (Kafka's `FetchResponse.sizeOf`: 4 + the body's size); over the quota
/// the fetch answers empty with the throttle time instead (Kafka's `getThrottledResponse`: no
/// partitions, the session's error; Java's fetch session handler takes an empty full response
/// with a throttle time as "throttled", KIP-219), and the bytes are not charged.
/// Replicas' fetches are never throttled.
fn answer(broker: &Broker, plan: &Plan, outcome: Outcome) -> (Option<Frame>, i32) {
    let Some((frame, body_len)) = encode(plan, outcome.topics, 0) else {
        return (None, 0);
    };
    if plan.replica.is_some() {
        return (Some(frame), 0);
    }
    let client_id = plan.ctx.client_id_str();
    let throttle_ms =
        broker
            .quotas
            .record_fetch(&broker.image(), client_id.as_deref(), 4 + body_len);
    if throttle_ms == 0 {
        return (Some(frame), 0);
    }
    tracing::debug!(
        "fetch of {} bytes by client {client_id:?} over its consumer_byte_rate: answered empty, throttled {throttle_ms} ms",
        4 + body_len
    );
    drop(frame);
    (
        encode(plan, Vec::new(), throttle_ms).map(|(f, _)| f),
        throttle_ms,
    )
}

struct Outcome {
    topics: Vec<FetchTopicData>,
    bytes: usize,
    has_error: bool,
}

impl Outcome {
    fn ready(&self, min_bytes: usize) -> bool {
        self.has_error || self.bytes >= min_bytes.max(1)
    }
}

fn read_all(plan: &Plan) -> Outcome {
    let mut budget = plan.max_bytes;
    let mut bytes = 0usize;
    let mut has_error = false;
    let mut topics = Vec::with_capacity(plan.topics.len());
    for t in &plan.topics {
        let mut partitions = Vec::with_capacity(t.targets.len());
        for target in &t.targets {
            let data = match plan.replica {
                Some(replica) => read_for_replica(target, replica, &mut budget, bytes == 0),
                None => read_one(target, &mut budget, bytes == 0, plan.read_committed),
            };
            if data.error_code != error::NONE {
                has_error = true;
            }
            bytes += data.records.as_ref().map_or(0, |r| r.len());
            partitions.push(data);
        }
        topics.push(FetchTopicData {
            topic: t.name.clone(),
            topic_id: t.id,
            partitions,
        });
    }
    Outcome {
        topics,
        bytes,
        has_error,
    }
}

/// A partition answered with an error, as Kafka answers every error of a read (its
/// `createLogReadResult` / `partitionResponse`): offsets -1 and an EMPTY record set
/// (`MemoryRecords.EMPTY`: length 0), never a null one, at every version. librdkafka rejects a
/// whole response whose errored partition carries null records ("invalid MessageSetSize -1").
fn empty(index: i32, error_code: i16) -> FetchPartitionData {
    FetchPartitionData {
        partition_index: index,
        error_code,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: Some(Records::empty()),
        diverging_epoch: None,
    }
}

fn read_one(
    target: &Target,
    budget: &mut usize,
    first: bool,
    read_committed: bool,
) -> FetchPartitionData {
    let fp = &target.request;
    let partition = match &target.partition {
        Ok(p) => p,
        // Kafka answers a partition its metadata does not have before reading (KafkaApis'
        // `FetchResponse.partitionResponse`), with an empty aborted_transactions list where its
        // read path (`empty`) leaves it null.
        Err(code) => {
            return FetchPartitionData {
                aborted_transactions: Some(Vec::new()),
                ..empty(fp.partition, *code)
            }
        }
    };
    let epoch = partition.leader_epoch();
    if fp.current_leader_epoch >= 0 && fp.current_leader_epoch != epoch {
        let code = if fp.current_leader_epoch > epoch {
            UNKNOWN_LEADER_EPOCH
        } else {
            FENCED_LEADER_EPOCH
        };
        return empty(fp.partition, code);
    }
    // KIP-74, as Kafka's readFromLocalLog: the limit is the smaller of partition_max_bytes and
    // what is left of max_bytes; until a partition has returned records, the first batch is sent
    // whole even when it exceeds both (`first`, Kafka's minOneMessage). After that a batch that
    // does not fit is not sent, and an exhausted budget yields empty data (with offsets).
    let limit = (fp.partition_max_bytes.max(0) as usize).min(*budget);
    let read = if limit == 0 && !first {
        Ok((Records::empty(), partition.offsets(), Vec::new()))
    } else {
        partition
            .fetch_records(fp.fetch_offset, limit, read_committed, first)
            .map(|r| (r.records, r.offsets, r.aborted_transactions))
    };
    let (records, offsets, aborted) = {
        match read {
            Ok(r) => r,
            // Kafka answers -1 offsets here too (the consumer then asks ListOffsets).
            Err(LogError::OffsetOutOfRange { .. }) => {
                return empty(fp.partition, error::OFFSET_OUT_OF_RANGE)
            }
            // A batch header that does not parse where the read starts (the intact batches before
            // it were served by earlier reads). Kafka answers CORRUPT_MESSAGE here (its read path
            // throws CorruptRecordException, which does not take the log directory offline);
            // consumers surface it (Java: "Encountered corrupt message when fetching offset")
            // and librdkafka backs off. The partition counted it and logged it once.
            Err(LogError::DamagedBatch { .. }) => {
                return empty(fp.partition, error::CORRUPT_MESSAGE);
            }
            Err(e) => {
                tracing::error!(
                    "fetch from {}-{} failed: {e}",
                    partition.topic,
                    partition.index
                );
                return empty(fp.partition, error::KAFKA_STORAGE_ERROR);
            }
        }
    };
    *budget = budget.saturating_sub(records.len());
    FetchPartitionData {
        partition_index: fp.partition,
        error_code: error::NONE,
        high_watermark: offsets.high_watermark,
        last_stable_offset: offsets.last_stable_offset,
        log_start_offset: offsets.log_start_offset,
        // Kafka sends an array (maybe empty) for read_committed and null for read_uncommitted.
        aborted_transactions: read_committed.then_some(aborted),
        preferred_read_replica: -1,
        records: Some(records),
        diverging_epoch: None,
    }
}

/// A follower's read of one partition (Kafka's `FetchIsolation.LOG_END`): the leader's checks
/// (leadership, leader epoch, assignment, diverging epoch), then whole batches up to the log end.
fn read_for_replica(
    target: &Target,
    replica: i32,
    budget: &mut usize,
    first: bool,
) -> FetchPartitionData {
    let fp = &target.request;
    let partition = match &target.partition {
        Ok(p) => p,
        Err(code) => return empty(fp.partition, *code),
    };
    let check = partition.check_replica_fetch(
        replica,
        fp.current_leader_epoch,
        fp.fetch_offset,
        fp.last_fetched_epoch,
    );
    let offsets = partition.offsets();
    let answer = |records: Records, diverging_epoch| FetchPartitionData {
        partition_index: fp.partition,
        error_code: error::NONE,
        high_watermark: offsets.high_watermark,
        last_stable_offset: offsets.last_stable_offset,
        log_start_offset: offsets.log_start_offset,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: Some(records),
        diverging_epoch,
    };
    match check {
        ReplicaFetchCheck::Error(code) => empty(fp.partition, code),
        ReplicaFetchCheck::Diverging(d) => {
            answer(Records::empty(), Some((d.leader_epoch, d.end_offset)))
        }
        ReplicaFetchCheck::Read => {
            let limit = (fp.partition_max_bytes.max(0) as usize).min(*budget);
            match partition.fetch_records_for_replica(fp.fetch_offset, limit, first) {
                Ok(read) => {
                    *budget = budget.saturating_sub(read.records.len());
                    answer(read.records, None)
                }
                Err(LogError::OffsetOutOfRange { .. }) => {
                    empty(fp.partition, error::OFFSET_OUT_OF_RANGE)
                }
                Err(LogError::DamagedBatch { .. }) => empty(fp.partition, error::CORRUPT_MESSAGE),
                Err(e) => {
                    tracing::error!(
                        "replica fetch from {}-{} failed: {e}",
                        partition.topic,
                        partition.index
                    );
                    empty(fp.partition, error::KAFKA_STORAGE_ERROR)
                }
            }
        }
    }
}

/// A follower's fetch, once read, moves the leader's view of it (its log end offset, caught-up
/// time): maybe the high watermark, maybe an ISR expansion, sent to the controller.
fn record_replica_fetch(broker: &Broker, plan: &Plan, replica: i32) {
    let now = crate::replica::isr::now_ms();
    for target in plan.topics.iter().flat_map(|t| t.targets.iter()) {
        let Ok(partition) = &target.partition else {
            continue;
        };
        let fp = &target.request;
        let fetch = FollowerFetch {
            replica_id: replica,
            current_leader_epoch: (fp.current_leader_epoch >= 0).then_some(fp.current_leader_epoch),
            fetch_offset: fp.fetch_offset,
            log_start_offset: fp.log_start_offset,
        };
        let check = partition.check_replica_fetch(
            replica,
            fp.current_leader_epoch,
            fp.fetch_offset,
            fp.last_fetched_epoch,
        );
        if check != ReplicaFetchCheck::Read {
            continue;
        }
        let proposals = partition.on_replica_fetch(fetch, now);
        broker
            .replicas
            .submit_alter_partitions(partition, proposals);
    }
}

/// The response frame for `topics` and the length of its body.
fn encode(
    plan: &Plan,
    topics: Vec<FetchTopicData>,
    throttle_time_ms: i32,
) -> Option<(Frame, usize)> {
    let response = FetchResponseData {
        throttle_time_ms,
        error_code: plan.session_error,
        session_id: 0,
        responses: if plan.session_error == error::NONE {
            topics
        } else {
            Vec::new()
        },
    };
    let mut head = BytesMut::with_capacity(16);
    head.put_i32(0);
    put_response_header(&mut head, &plan.ctx);
    let mut chunks: Vec<Chunk> = Vec::with_capacity(8);
    chunks.push(Chunk::Bytes(Bytes::new()));
    match encode_fetch_response(&response, plan.ctx.api_version, &mut chunks) {
        Ok(body_len) => {
            let len = (head.len() - 4 + body_len) as i32;
            head[..4].copy_from_slice(&len.to_be_bytes());
            chunks[0] = Chunk::Bytes(head.freeze());
            Some((chunks, body_len))
        }
        Err(e) => {
            tracing::error!(
                "encoding fetch v{} response failed: {e}",
                plan.ctx.api_version
            );
            None
        }
    }
}
