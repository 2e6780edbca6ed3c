//! ShareFetch (78) and ShareAcknowledge (79), v1 and v2, on the partition leader (KIP-932).
//!
//! A ShareFetch first moves its share session (`share::session`: epoch 0 opens, N continues,
//! -1 closes and releases), then applies the piggy-backed acknowledgements, then, for every
//! partition of the session, reads the log from the share-partition's `next_fetch_offset()`
//! (a read at a time, sized from the records still wanted, not the request's whole MaxBytes)
//! and acquires the Available records among the batches read (`SharePartition::acquire`), at
//! most `max_records` in all. The answer carries the batches read up to the last acquired one
//! and the `AcquiredRecords` ranges; the client delivers only those. With nothing acquired it
//! long-polls like Fetch: subscribed to each partition's high-watermark watch and its
//! share-partition's changes (`ShareRegistry::watch`) before the first read, woken by an append,
//! by acknowledgements or releases of other members (records Available again, or the in-flight
//! limit freed), by the earliest acquisition-lock deadline (a timed-out record is Available
//! again) or by `max_wait_ms`, never sleep-polling.
//!
//! Every access to a share-partition first expires its timed-out locks and follows the log
//! start offset, so lock timeouts and the delivery count limit hold without a timer task.
//! State lives in `share::registry`; a share-partition's first use reads its persisted state and
//! every change (acknowledgements, lock timeouts, log-start moves) is written to
//! `__share_group_state` (`share_state`) before the answer goes out.
//! The response is encoded by `share_fetch_encode`, which splices the record bytes in as their own
//! chunks (the log's `Bytes`, not copied again; the read itself is `Partition::read`, in memory,
//! where Fetch may send a large range from the file). A group whose `share.isolation.level` is
//! read_committed reads below the last stable offset only, and the data batches of aborted
//! transactions in a read are archived, never acquired (`share::read_committed`; the answer has
//! no aborted-transactions field for the client to drop them itself).
//!
//! v2 (`protocol::share_v2`): `ShareAcquireMode` record-limit never acquires more than
//! `MaxRecords` (`AcquireMode::RecordLimit`); IsRenewAck allows RENEW (type 4) acknowledgements,
//! which restart the acquisition locks of their records (`SharePartition::acknowledge_renewing`),
//! and a renewing ShareFetch (every fetch limit 0, else INVALID_REQUEST as in Kafka's KafkaApis)
//! only acknowledges: it moves the session but neither reads nor waits. RENEW without IsRenewAck
//! is INVALID_REQUEST for its partition. ShareAcknowledge v2 answers the group's lock duration
//! (AcquisitionLockTimeoutMs).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::future::select_all;
use kafka_protocol::messages::share_acknowledge_response as sar;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;

use super::share_ack_wait::{self, PendingAcks};
use super::share_fetch_encode::encode_share_fetch_response;
use super::{error, put_response_header, Chunk, Frame, Reply, RequestContext};
use crate::broker::Broker;
use crate::protocol::share_v2::{self, ShareAcknowledge, ShareFetch};
use crate::record::{control_type, BatchHeader, ControlType};
use crate::replica::partition::Partition;
use crate::share::partition::{
    AcknowledgementBatch, AcquireMode, FetchedBatch, SharePartition, SharePartitionConfig,
};
use crate::share::read_committed::{aborted_batches, BatchInfo};
use crate::share::registry::{ShareKey, ShareRegistry};
use crate::share::reset::{initial_start_offset, AutoOffsetReset, OffsetSpec};
use crate::share::session::{TopicIdPartition, FINAL_EPOCH, INITIAL_EPOCH};
use crate::share_state;
use crate::share_state::Persisted;

const INVALID_RECORD_STATE: i16 = crate::share::codes::INVALID_RECORD_STATE;

/// A share request's group and member, checked as Kafka's KafkaApis does.
fn ids(group: Option<&str>, member: Option<&str>) -> Result<(String, String), i16> {
    let group = group.unwrap_or("").to_string();
    let member = member.unwrap_or("").to_string();
    if group.is_empty() || member.trim().is_empty() {
        return Err(error::INVALID_REQUEST);
    }
    Ok((group, member))
}

/// The leader partition of `tp` here, or the partition error code.
pub(super) fn resolve(
    broker: &Broker,
    (topic_id, index): TopicIdPartition,
) -> Result<Arc<Partition>, i16> {
    let image = broker.image();
    let Some(topic) = image.topic_by_id(topic_id) else {
        return Err(error::UNKNOWN_TOPIC_ID);
    };
    super::image_view::leader_partition(broker, &topic.name, index)
}

/// The share-partition settings of `group`: the broker's `group.share.*`, with the group's
/// `share.record.lock.duration.ms` override.
fn partition_config(broker: &Broker, group: &str) -> SharePartitionConfig {
    let c = &broker.config;
    let lock = broker
        .group_configs
        .get(group)
        .get("share.record.lock.duration.ms")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or(i64::from(c.group_share_record_lock_duration_ms));
    SharePartitionConfig {
        record_lock_duration_ms: lock,
        delivery_count_limit: c.group_share_delivery_count_limit.clamp(1, 10) as i16,
        max_record_locks: c.group_share_partition_max_record_locks.max(1) as u32,
    }
}

/// Whether `group`'s `share.isolation.level` is read_committed (default read_uncommitted).
fn read_committed(broker: &Broker, group: &str) -> bool {
    broker
        .group_configs
        .get(group)
        .get("share.isolation.level")
        .is_some_and(|v| v.trim() == "read_committed")
}

/// A share-partition on first use: its persisted state (`share_state`), or a new one starting
/// where `share.auto.offset.reset` says (default latest).
fn init_partition(
    broker: &Broker,
    key: &ShareKey,
    partition: &Partition,
    now: i64,
) -> SharePartition {
    let snapshot = share_state::initial_snapshot(broker, key, now);
    init_from(broker, key, partition, snapshot, now)
}

/// A share-partition from its persisted state `snapshot`, or, without one, a new one starting
/// where `share.auto.offset.reset` says (default latest).
pub(super) fn init_from(
    broker: &Broker,
    key: &ShareKey,
    partition: &Partition,
    snapshot: Option<crate::share::persist::ShareSnapshot>,
    now: i64,
) -> SharePartition {
    let group = key.group_id.as_str();
    if let Some(snapshot) = snapshot {
        return SharePartition::from_snapshot(partition_config(broker, group), &snapshot);
    }
    let reset = broker
        .group_configs
        .get(group)
        .get("share.auto.offset.reset")
        .and_then(|v| AutoOffsetReset::parse(v))
        .unwrap_or(AutoOffsetReset::Latest);
    let offsets = partition.offsets();
    let spec = reset.offset_spec(now);
    let by_time = match spec {
        OffsetSpec::Timestamp(ts) => partition
            .offset_for_timestamp(ts)
            .ok()
            .flatten()
            .map(|(o, _)| o),
        _ => None,
    };
    let start = initial_start_offset(
        spec,
        offsets.log_start_offset,
        offsets.high_watermark,
        by_time,
    );
    SharePartition::new(partition_config(broker, group), start, 0)
}

/// One share-partition's state brought up to `now`: timed-out locks released, records before the
/// log start offset archived.
fn refreshed<'a>(
    reg: &'a mut ShareRegistry,
    broker: &Broker,
    key: &ShareKey,
    partition: &Partition,
    now: i64,
) -> &'a mut SharePartition {
    let sp = reg.get_or_init(key, || init_partition(broker, key, partition, now));
    let moved = sp.update_log_start_offset(partition.offsets().log_start_offset);
    let expired = sp.expire_locks(now);
    for change in [moved, expired] {
        let (epoch, leader) = (sp.state_epoch(), partition.leader_epoch());
        // Not an answer's content: written, not waited for.
        if let Err(code) = share_state::persist(broker, key, epoch, leader, &change, now) {
            tracing::warn!("share-partition {key:?}: state not persisted (error {code})");
        }
    }
    sp
}

fn leader(partition: Option<&Partition>, me: i32) -> LeaderIdAndEpoch {
    match partition {
        Some(p) => LeaderIdAndEpoch::default()
            .with_leader_id(me)
            .with_leader_epoch(p.leader_epoch()),
        None => LeaderIdAndEpoch::default()
            .with_leader_id(-1)
            .with_leader_epoch(-1),
    }
}

/// One share-partition's acknowledgements and whether RENEW may be among them (IsRenewAck).
struct Acks<'a> {
    tp: TopicIdPartition,
    batches: &'a [AcknowledgementBatch],
    renew: bool,
}

/// Applies `member`'s acknowledgements of one share-partition: the partition's error code, and
/// the state batches its answer waits for (`share_ack_wait`) when that code is NONE.
fn acknowledge_one(
    reg: &mut ShareRegistry,
    broker: &Broker,
    (group, member): (&str, &str),
    acks: Acks<'_>,
    now: i64,
) -> ((i16, Option<String>), Persisted) {
    let Acks { tp, batches, renew } = acks;
    let partition = match resolve(broker, tp) {
        Ok(p) => p,
        Err(code) => return ((code, None), Persisted::nothing()),
    };
    let key = ShareKey::new(group, tp);
    if reg.partition(&key).is_none() {
        let message = "the share-partition has no acquired records".into();
        return ((INVALID_RECORD_STATE, Some(message)), Persisted::nothing());
    }
    let sp = refreshed(reg, broker, &key, &partition, now);
    let result = if renew {
        sp.acknowledge_renewing(member, batches, now)
    } else {
        sp.acknowledge(member, batches)
    };
    match result {
        Ok(change) => {
            let (epoch, leader) = (sp.state_epoch(), partition.leader_epoch());
            // Records Available again or the in-flight limit freed: waiting fetches look again.
            reg.changed(&key);
            // The acknowledgement completes once persisted and committed, as Kafka's.
            match share_state::persist(broker, &key, epoch, leader, &change, now) {
                Ok(written) => ((error::NONE, None), written),
                Err(code) => {
                    // Its state was initialized anew (AlterShareGroupOffsets): the next use
                    // reads it again, as Kafka's share-partition does once fenced.
                    if code == crate::share::coordinator::FENCED_STATE_EPOCH {
                        reg.remove(&key);
                    }
                    let message = "the acknowledgement was not persisted".into();
                    ((code, Some(message)), Persisted::nothing())
                }
            }
        }
        Err(e) => ((e.error_code(), Some(e.to_string())), Persisted::nothing()),
    }
}

/// What one read-and-acquire pass over the session's partitions gave.
struct Pass {
    partitions: Vec<(TopicIdPartition, PartitionData)>,
    acquired: bool,
    /// The earliest acquisition-lock deadline among the partitions (ms since the epoch).
    next_lock_deadline: Option<i64>,
}

/// The plan of one ShareFetch after its session and acknowledgements were handled.
struct FetchPlan {
    broker: Arc<Broker>,
    group: String,
    member: String,
    targets: Vec<(TopicIdPartition, Result<Arc<Partition>, i16>)>,
    max_bytes: usize,
    max_records: u32,
    mode: AcquireMode,
    /// The group's `share.isolation.level` is read_committed: reads stop at the last stable
    /// offset and aborted transactions' data is archived.
    read_committed: bool,
    acks: HashMap<TopicIdPartition, (i16, Option<String>)>,
}

/// The batches in `bytes` (whole batches as the log returns them), each with the byte length of
/// the batches up to and including it. With `aborted_txns` (a read_committed read's aborted
/// transactions) the data batches of aborted transactions are marked (`share::read_committed`).
fn batch_ranges(bytes: &[u8], aborted_txns: Option<&[(i64, i64)]>) -> Vec<(FetchedBatch, usize)> {
    let mut out = Vec::new();
    let mut infos = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let Ok(h) = BatchHeader::parse(&bytes[at..]) else {
            break;
        };
        let end = at.saturating_add(h.total_size());
        if end > bytes.len() {
            break;
        }
        out.push((FetchedBatch::new(h.base_offset, h.last_offset()), end));
        if aborted_txns.is_some() {
            // A marker whose type cannot be read ends no transaction and is no data.
            let control = h
                .is_control()
                .then(|| control_type(&bytes[at..end]).unwrap_or(ControlType::Commit));
            infos.push(BatchInfo {
                last_offset: h.last_offset(),
                producer_id: h.producer_id,
                transactional: h.is_transactional(),
                control,
            });
        }
        at = end;
    }
    if let Some(txns) = aborted_txns {
        for ((batch, _), aborted) in out.iter_mut().zip(aborted_batches(&infos, txns)) {
            batch.aborted = aborted;
        }
    }
    out
}

/// Whether `next` continues `prev` (the next offset, the same delivery count).
fn extends(
    prev: &crate::share::partition::AcquiredRecords,
    next: &crate::share::partition::AcquiredRecords,
) -> bool {
    prev.last_offset + 1 == next.first_offset && prev.delivery_count == next.delivery_count
}

/// The first read of a ShareFetch's partition, and the least of every later one: how many bytes
/// `MaxRecords` records take is known only once some were read.
const FIRST_READ_BYTES: usize = 64 * 1024;
/// The most one later read takes (each is sized from the bytes per record read so far).
const MAX_READ_BYTES: usize = 8 << 20;

impl FetchPlan {
    /// Reads `partition` from `sp.next_fetch_offset()` and acquires its Available records for the
    /// member, a read at a time, until `max_records` are acquired, `max_bytes` were read, the log
    /// ends at the high watermark, or nothing further could be acquired (the in-flight limit).
    /// One read of the whole `max_bytes` (the client's fetch.max.bytes: 50 MiB by default, for
    /// max.poll.records 500) copied up to a hundred times more of the log into memory than the
    /// answer carries. Returns the answer's record bytes (the batches from the first read that
    /// acquired anything to the last acquired batch) and the acquired ranges; an error of the
    /// first read is the partition's error, one of a later read ends the reading.
    fn read_and_acquire(
        &self,
        sp: &mut SharePartition,
        partition: &Partition,
        max_records: u32,
        max_bytes: usize,
        now: i64,
    ) -> Result<(Bytes, Vec<crate::share::partition::AcquiredRecords>), crate::log::LogError> {
        let mut at = sp.next_fetch_offset();
        let (mut records_left, mut read_left) = (max_records, max_bytes);
        let mut step = FIRST_READ_BYTES;
        // The answer's bytes, in log order; reads without an acquisition after the first one
        // with (`between`) go in only if a later read acquires.
        let mut parts: Vec<Bytes> = Vec::new();
        let mut between: Vec<Bytes> = Vec::new();
        let mut acquired = Vec::new();
        let (mut bytes_read, mut records_read) = (0usize, 0usize);
        while records_left > 0 && read_left > 0 && sp.can_acquire_from(at) {
            let read = if self.read_committed {
                partition
                    .read_committed(at, step.min(read_left))
                    .map(|r| (r.slice, Some(r.aborted_transactions)))
            } else {
                partition
                    .read(at, step.min(read_left))
                    .map(|(slice, _)| (slice, None))
            };
            let (slice, aborted_txns) = match read {
                Ok(read) => read,
                Err(crate::log::LogError::OffsetOutOfRange { .. }) => break,
                Err(e) if bytes_read == 0 => return Err(e),
                Err(e) => {
                    tracing::warn!(
                        "share fetch from {}-{} stopped reading: {e}",
                        partition.topic,
                        partition.index
                    );
                    break;
                }
            };
            let ranges = batch_ranges(&slice.bytes, aborted_txns.as_deref());
            let (Some((first, _)), Some((last, _))) = (ranges.first(), ranges.last()) else {
                break; // the high watermark
            };
            let batches: Vec<FetchedBatch> = ranges.iter().map(|(b, _)| *b).collect();
            let got = sp.acquire_in_mode(&self.member, &batches, records_left, self.mode, now);
            if let Some(end_offset) = got.last().map(|a| a.last_offset) {
                let end = ranges
                    .iter()
                    .find(|(b, _)| b.last_offset >= end_offset)
                    .map_or(slice.bytes.len(), |(_, end)| *end);
                parts.append(&mut between);
                parts.push(slice.bytes.slice(..end));
                let count: i64 = got.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
                records_left = records_left.saturating_sub(count.max(0) as u32);
                for a in got {
                    // one range for what consecutive reads acquired with one delivery count
                    match acquired.last_mut() {
                        Some(prev) if extends(prev, &a) => prev.last_offset = a.last_offset,
                        _ => acquired.push(a),
                    }
                }
            } else if !parts.is_empty() {
                between.push(slice.bytes.clone());
            }
            read_left = read_left.saturating_sub(slice.bytes.len());
            bytes_read += slice.bytes.len();
            records_read += (last.last_offset - first.base_offset + 1).max(1) as usize;
            at = last.last_offset + 1;
            let per_record = bytes_read.div_ceil(records_read);
            step = (records_left as usize)
                .saturating_mul(per_record)
                .clamp(FIRST_READ_BYTES, MAX_READ_BYTES);
        }
        let bytes = match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().unwrap_or_default(),
            _ => {
                let mut all = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
                for p in &parts {
                    all.extend_from_slice(p);
                }
                all.freeze()
            }
        };
        Ok((bytes, acquired))
    }

    fn pass(&self, now: i64) -> Pass {
        let me = self.broker.config.node_id;
        let mut reg = self.broker.shares.lock();
        let mut budget = self.max_bytes;
        let mut records_left = self.max_records;
        let mut acquired_any = false;
        let mut next_lock: Option<i64> = None;
        let mut partitions = Vec::with_capacity(self.targets.len());
        for (tp, target) in &self.targets {
            let (ack_code, ack_message) = self.acks.get(tp).cloned().unwrap_or((error::NONE, None));
            let mut data = PartitionData::default()
                .with_partition_index(tp.1)
                .with_acknowledge_error_code(ack_code)
                .with_acknowledge_error_message(ack_message.map(StrBytes::from_string));
            let partition = match target {
                Ok(p) => p,
                Err(code) => {
                    data = data
                        .with_error_code(*code)
                        .with_current_leader(leader(None, me));
                    partitions.push((*tp, data));
                    continue;
                }
            };
            data = data.with_current_leader(leader(Some(partition), me));
            let key = ShareKey::new(&self.group, *tp);
            let sp = refreshed(&mut reg, &self.broker, &key, partition, now);
            let mut records = Bytes::new();
            if records_left > 0 && budget > 0 {
                match self.read_and_acquire(sp, partition, records_left, budget, now) {
                    Ok((bytes, got)) => {
                        if !got.is_empty() {
                            budget = budget.saturating_sub(bytes.len());
                            let count: i64 =
                                got.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
                            records_left = records_left.saturating_sub(count.max(0) as u32);
                            acquired_any = true;
                            records = bytes;
                        }
                        data.acquired_records = got
                            .iter()
                            .map(|a| {
                                AcquiredRecords::default()
                                    .with_first_offset(a.first_offset)
                                    .with_last_offset(a.last_offset)
                                    .with_delivery_count(a.delivery_count)
                            })
                            .collect();
                    }
                    Err(e) => {
                        tracing::error!(
                            "share fetch from {}-{} failed: {e}",
                            partition.topic,
                            partition.index
                        );
                        data.error_code = error::KAFKA_STORAGE_ERROR;
                    }
                }
            }
            if let Some(d) = sp.next_lock_deadline() {
                next_lock = Some(next_lock.map_or(d, |n: i64| n.min(d)));
            }
            data.records = Some(records);
            partitions.push((*tp, data));
        }
        Pass {
            partitions,
            acquired: acquired_any,
            next_lock_deadline: next_lock,
        }
    }

    fn response(&self, pass: Pass) -> ShareFetchResponse {
        let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
        for ((topic_id, _), data) in pass.partitions {
            match topics.last_mut() {
                Some(t) if t.topic_id == topic_id => t.partitions.push(data),
                _ => topics.push(
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(topic_id)
                        .with_partitions(vec![data]),
                ),
            }
        }
        let lock = partition_config(&self.broker, &self.group).record_lock_duration_ms;
        ShareFetchResponse::default()
            .with_acquisition_lock_timeout_ms(lock.clamp(0, i64::from(i32::MAX)) as i32)
            .with_responses(topics)
    }
}

fn top_error(code: i16, message: &str) -> ShareFetchResponse {
    ShareFetchResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}

/// The whole response frame: size, header, and the body from `share_fetch_encode` (record bytes
/// spliced in, not copied). `None` (close the connection) if it cannot be encoded.
fn frame(ctx: &RequestContext, response: &ShareFetchResponse) -> Option<Frame> {
    let mut head = BytesMut::with_capacity(16);
    head.put_i32(0);
    put_response_header(&mut head, ctx);
    let mut chunks: Vec<Chunk> = vec![Chunk::Bytes(Bytes::new())];
    match encode_share_fetch_response(response, ctx.api_version, &mut chunks) {
        Ok(body_len) => {
            let len = (head.len() - 4 + body_len) as i32;
            head[..4].copy_from_slice(&len.to_be_bytes());
            chunks[0] = Chunk::Bytes(head.freeze());
            Some(chunks)
        }
        Err(e) => {
            tracing::error!(
                "encoding ShareFetch v{} response failed: {e}",
                ctx.api_version
            );
            None
        }
    }
}

fn reply(ctx: &RequestContext, response: &ShareFetchResponse) -> Reply {
    Reply::Now(frame(ctx, response))
}

fn ack_batches<'a>(
    batches: impl Iterator<Item = (i64, i64, &'a Vec<i8>)>,
) -> Vec<AcknowledgementBatch> {
    batches
        .map(|(first, last, types)| AcknowledgementBatch {
            first_offset: first,
            last_offset: last,
            acknowledge_types: types.clone(),
        })
        .collect()
}

/// Kafka's check of a renewing ShareFetch (KafkaApis): every fetch limit must be 0.
fn renew_fetch_error(request: &kafka_protocol::messages::ShareFetchRequest) -> Option<String> {
    let mut msg = String::new();
    for (name, value) in [
        ("maxBytes", request.max_bytes),
        ("minBytes", request.min_bytes),
        ("maxRecords", request.max_records),
        ("maxWaitMs", request.max_wait_ms),
    ] {
        if value != 0 {
            msg.push_str(&format!("{name} must be set to 0, "));
        }
    }
    (!msg.is_empty()).then(|| msg + "if isRenewAck is true.")
}

/// ShareFetch: the share-partitions it adds whose state another broker's share coordinator
/// holds are read from there first (`share_preload`), then [`fetch_loaded`].
pub fn fetch(broker: Arc<Broker>, ctx: RequestContext, fetch: ShareFetch) -> Reply {
    let loads = super::share_preload::needed(&broker, &fetch);
    if loads.is_empty() {
        return fetch_loaded(broker, ctx, fetch, HashMap::new());
    }
    Reply::Later(Box::pin(async move {
        let unavailable = super::share_preload::load(&broker, loads).await;
        fetch_loaded(broker, ctx, fetch, unavailable)
            .resolve()
            .await
            .ok()
            .flatten()
    }))
}

/// ShareFetch once its share-partitions' state is at hand: those in `unavailable` (their state
/// could not be read) answer that error instead of records.
fn fetch_loaded(
    broker: Arc<Broker>,
    ctx: RequestContext,
    fetch: ShareFetch,
    unavailable: HashMap<TopicIdPartition, i16>,
) -> Reply {
    let now = super::now_ms();
    let ShareFetch {
        request,
        share_acquire_mode,
        is_renew_ack,
    } = fetch;
    let mode = match share_acquire_mode {
        share_v2::BATCH_OPTIMIZED => AcquireMode::BatchOptimized,
        share_v2::RECORD_LIMIT => AcquireMode::RecordLimit,
        other => {
            let msg = format!("Unknown share acquire mode id: {other}");
            return reply(&ctx, &top_error(error::INVALID_REQUEST, &msg));
        }
    };
    if is_renew_ack {
        if let Some(msg) = renew_fetch_error(&request) {
            return reply(&ctx, &top_error(error::INVALID_REQUEST, &msg));
        }
    }
    let (group, member) = match ids(
        request.group_id.as_ref().map(|g| g.as_str()),
        request.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(v) => v,
        Err(code) => return reply(&ctx, &top_error(code, "GroupId and MemberId must be set.")),
    };
    let epoch = request.share_session_epoch;
    let mut added: Vec<TopicIdPartition> = Vec::new();
    let mut acks: Vec<(TopicIdPartition, Vec<AcknowledgementBatch>)> = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let tp = (t.topic_id, p.partition_index);
            added.push(tp);
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types));
                acks.push((tp, ack_batches(batches)));
            }
        }
    }
    if epoch == INITIAL_EPOCH && !acks.is_empty() {
        let msg = "Acknowledge data present in the initial ShareFetch request.";
        return reply(&ctx, &top_error(error::INVALID_REQUEST, msg));
    }
    let forgotten: Vec<TopicIdPartition> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let mut pending = PendingAcks::default();
    let (session, ack_results) = {
        let mut reg = broker.shares.lock();
        // Acknowledgements go first (Kafka's order), so a closing request's are applied before
        // its session's remaining records are released.
        let mut ack_results: HashMap<TopicIdPartition, (i16, Option<String>)> = HashMap::new();
        if matches!(reg.sessions.expected_epoch(&group, &member),
            Some(e) if e == epoch || epoch == FINAL_EPOCH)
        {
            for (tp, b) in &acks {
                let acks = Acks {
                    tp: *tp,
                    batches: b,
                    renew: is_renew_ack,
                };
                let (r, written) = acknowledge_one(&mut reg, &broker, (&group, &member), acks, now);
                ack_results.insert(*tp, r);
                pending.push(*tp, written);
            }
        }
        match reg
            .sessions
            .fetch(&group, &member, epoch, &added, &forgotten)
        {
            Ok(s) => {
                reg.release(&group, &member, &s.release);
                (s, ack_results)
            }
            Err(code) => {
                drop(reg);
                return reply(&ctx, &top_error(code, "share session"));
            }
        }
    };
    let targets = session
        .fetch
        .iter()
        .map(|tp| match unavailable.get(tp) {
            Some(code) => (*tp, Err(*code)),
            None => (*tp, resolve(&broker, *tp)),
        })
        .collect::<Vec<_>>();
    // A closing or renewing request only acknowledges (Kafka skips the fetch of a renewing one:
    // reading could outlast the renewed locks).
    let ack_only = epoch == FINAL_EPOCH || is_renew_ack;
    let plan = FetchPlan {
        read_committed: read_committed(&broker, &group),
        broker: broker.clone(),
        group,
        member,
        targets: if ack_only {
            ack_results
                .keys()
                .map(|tp| (*tp, resolve(&broker, *tp)))
                .collect()
        } else {
            targets
        },
        max_bytes: if request.max_bytes <= 0 {
            usize::MAX
        } else {
            request.max_bytes as usize
        },
        max_records: if ack_only {
            0
        } else if request.max_records <= 0 {
            u32::MAX
        } else {
            request.max_records as u32
        },
        mode,
        acks: ack_results,
    };
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    if pending.committed() {
        return answer(ctx, plan, max_wait, ack_only, now);
    }
    // The acknowledgements' results wait for their state records to be committed; the fetch
    // (and its long poll) runs after.
    let timeout = broker.config.share_coordinator_write_timeout_ms;
    Reply::Later(Box::pin(async move {
        let failed = pending.wait(timeout).await;
        let mut plan = plan;
        share_ack_wait::apply(&mut plan.acks, failed);
        answer(ctx, plan, max_wait, ack_only, super::now_ms())
            .resolve()
            .await
            .ok()
            .flatten()
    }))
}

/// Reads and acquires for `plan` and answers: at once when records were acquired (or nothing may
/// wait), else once a partition moves, acknowledgements or releases change a share-partition of
/// the session (`ShareRegistry::watch`), a lock times out, or `max_wait` passes.
fn answer(
    ctx: RequestContext,
    plan: FetchPlan,
    max_wait: Duration,
    ack_only: bool,
    now: i64,
) -> Reply {
    // Subscribe before the first read so no append, acknowledgement or release slips between the
    // read and the wait.
    let mut watches: Vec<watch::Receiver<i64>> = plan
        .targets
        .iter()
        .filter_map(|(_, t)| t.as_ref().ok().map(|p| p.subscribe()))
        .collect();
    if !watches.is_empty() && !ack_only && !max_wait.is_zero() {
        let mut reg = plan.broker.shares.lock();
        for (tp, target) in &plan.targets {
            if target.is_ok() {
                watches.push(reg.watch(&ShareKey::new(&plan.group, *tp)));
            }
        }
    }
    let first = plan.pass(now);
    if first.acquired || ack_only || max_wait.is_zero() || watches.is_empty() {
        return reply(&ctx, &plan.response(first));
    }
    let mut lock_deadline = first.next_lock_deadline;
    Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            // Woken early by the first lock that times out: its records are Available again.
            let wake = lock_deadline
                .map(|at| {
                    let wait = (at - super::now_ms()).max(0) as u64;
                    tokio::time::Instant::now() + Duration::from_millis(wait)
                })
                .map_or(deadline, |at| at.min(deadline));
            let changed = select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
            let closed = matches!(
                tokio::time::timeout_at(wake, changed).await,
                Ok((Err(_), _, _))
            );
            let pass = plan.pass(super::now_ms());
            if pass.acquired || closed || tokio::time::Instant::now() >= deadline {
                return frame(&ctx, &plan.response(pass));
            }
            lock_deadline = pass.next_lock_deadline;
        }
    }))
}

/// ShareAcknowledge: answered once the acknowledgements' state records are committed
/// (`share_ack_wait`), at once when they are already.
pub fn acknowledge(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    ack: ShareAcknowledge,
) -> Result<Reply, super::CloseReason> {
    let lock_ms = ack.request.group_id.as_ref().map_or(
        i64::from(broker.config.group_share_record_lock_duration_ms),
        |g| partition_config(broker, g.as_str()).record_lock_duration_ms,
    );
    let lock_ms = lock_ms.clamp(0, i64::from(i32::MAX)) as i32;
    let (mut response, pending) = acknowledge_now(broker, ack.request, ack.is_renew_ack);
    if pending.committed() {
        return ack_frame(ctx, &response, lock_ms).map(|f| Reply::Now(Some(f)));
    }
    let timeout = broker.config.share_coordinator_write_timeout_ms;
    let ctx = ctx.clone();
    Ok(Reply::Later(Box::pin(async move {
        let failed = pending.wait(timeout).await;
        for ((topic_id, index), code, message) in failed {
            let partitions = response
                .responses
                .iter_mut()
                .filter(|t| t.topic_id == topic_id)
                .flat_map(|t| t.partitions.iter_mut())
                .filter(|p| p.partition_index == index);
            for p in partitions {
                p.error_code = code;
                p.error_message = Some(StrBytes::from_string(message.clone()));
            }
        }
        ack_frame(&ctx, &response, lock_ms).ok()
    })))
}

/// A ShareAcknowledge response frame at the request's version (v2 through `share_v2`, which
/// adds the lock duration).
fn ack_frame(
    ctx: &RequestContext,
    response: &ShareAcknowledgeResponse,
    lock_ms: i32,
) -> Result<Frame, super::CloseReason> {
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0);
    put_response_header(&mut buf, ctx);
    share_v2::encode_share_acknowledge_response(response, ctx.api_version, lock_ms, &mut buf)
        .map_err(|e| super::CloseReason::Encode {
            key: ctx.api_key,
            version: ctx.api_version,
            reason: e.to_string(),
        })?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(vec![Chunk::Bytes(buf.freeze())])
}

fn acknowledge_now(
    broker: &Arc<Broker>,
    request: ShareAcknowledgeRequest,
    renew: bool,
) -> (ShareAcknowledgeResponse, PendingAcks) {
    let now = super::now_ms();
    let mut pending = PendingAcks::default();
    let refuse = |code: i16| {
        let response = ShareAcknowledgeResponse::default().with_error_code(code);
        (response, PendingAcks::default())
    };
    let Ok((group, member)) = ids(
        request.group_id.as_ref().map(|g| g.as_str()),
        request.member_id.as_ref().map(|m| m.as_str()),
    ) else {
        return refuse(error::INVALID_REQUEST);
    };
    let epoch = request.share_session_epoch;
    let mut reg = broker.shares.lock();
    match reg.sessions.expected_epoch(&group, &member) {
        None => return refuse(crate::share::session::SHARE_SESSION_NOT_FOUND),
        Some(e) if e != epoch && epoch != FINAL_EPOCH => {
            return refuse(crate::share::session::INVALID_SHARE_SESSION_EPOCH)
        }
        Some(_) => {}
    }
    let me = broker.config.node_id;
    let mut responses: Vec<sar::ShareAcknowledgeTopicResponse> = Vec::new();
    for t in &request.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let tp: (Uuid, i32) = (t.topic_id, p.partition_index);
            let batches = ack_batches(
                p.acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types)),
            );
            let acks = Acks {
                tp,
                batches: &batches,
                renew,
            };
            let ((code, message), written) =
                acknowledge_one(&mut reg, broker, (&group, &member), acks, now);
            pending.push(tp, written);
            let leader = match resolve(broker, tp) {
                Ok(part) => sar::LeaderIdAndEpoch::default()
                    .with_leader_id(me)
                    .with_leader_epoch(part.leader_epoch()),
                Err(_) => sar::LeaderIdAndEpoch::default()
                    .with_leader_id(-1)
                    .with_leader_epoch(-1),
            };
            parts.push(
                sar::PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
                    .with_current_leader(leader),
            );
        }
        responses.push(
            sar::ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(parts),
        );
    }
    // The session moves (or closes) once the acknowledgements are applied.
    match reg.sessions.acknowledge(&group, &member, epoch) {
        Ok(release) => reg.release(&group, &member, &release),
        Err(code) => return refuse(code),
    }
    let response = ShareAcknowledgeResponse::default().with_responses(responses);
    (response, pending)
}
