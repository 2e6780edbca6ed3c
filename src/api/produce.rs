//! Produce (key 0): validate each partition's single record batch (its header and CRC, then its
//! records with `log_validator`, as Kafka's LogValidator does), append it through the partition
//! (which applies the idempotence rules), and answer per partition.
//!
//! Validation walks the records once (uncompressed: over the request's bytes; compressed: over a
//! bounded decompressing stream) and allocates nothing per record. A refused batch appends
//! nothing; its partition answers INVALID_RECORD or INVALID_TIMESTAMP with `error_message` and,
//! for record-level faults, `record_errors` (Produce v8+, KIP-467). The record bytes are a slice of
//! the request frame and reach the log without being copied. acks=0 gets no response.
//!
//! Transactional batches are accepted when the request names a `transactional_id` (Kafka answers
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition otherwise); the partition's producer
//! state applies the transaction rules. Control batches are never accepted from clients, and
//! clients cannot write the internal topics. A transactional batch is verified against the
//! transaction coordinator's view first (Kafka's `transaction.partition.verification.enable`): the
//! partition must be part of the producer's open transaction, else INVALID_TXN_STATE, so a late or
//! zombie batch can never open a transaction nobody will end. Produce v12+ is Transactions V2: its
//! partitions are first added to the transaction implicitly ([`super::implicit_add`]), while the
//! connection waits (a `Reply::Barrier`, so its later requests stay behind the write).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::implicit_add::{self, Refused};
use super::{error, respond, CloseReason, Reply, RequestContext};
use crate::broker::Broker;
use crate::log_validator::{self, Reason, RecordError, Refusal, Rules};
use crate::record::{self, BatchError, BatchHeader};
use crate::replica::manager::Topic;
use crate::replica::partition::{AppendError, AppendOrigin, AppendSettings, Partition};

/// Compression codec id of zstd, which needs Produce v7+.
const ZSTD: i16 = 4;
/// The transaction coordinator's internal topic (Kafka's `Topic.TRANSACTION_STATE_TOPIC_NAME`).
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// Kafka's `RequestUtils.hasTransactionalRecords`: the first batch of some partition has the
/// transactional attribute.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|pd| pd.records.as_ref())
        .filter_map(|r| BatchHeader::parse(r).ok())
        .any(|h| h.is_transactional())
}

/// An append that the flush policy must fsync before it is acknowledged: the partition response
/// at `responses[topic].partition_responses[partition]` answers it.
pub(super) use super::produce_wait::ReplicationWait;

struct PendingSync {
    topic: usize,
    partition: usize,
    target: Arc<Partition>,
    end: i64,
}

/// The reply: ready at once, or (flush policy) a `Reply::Barrier` answered once the appends are
/// fsynced. The fsyncs run on the runtime's blocking pool, so no worker waits for the disk; the
/// connection reads its next request after the fsync, so what follows sees the data (group
/// commit still covers appends from other connections). acks=0 gets no response; its appends
/// are fsynced all the same, before the connection's next request.
///
/// The request's size (`request_bytes`: header and body, Kafka's `request.sizeInBytes`) is
/// recorded against the client's `producer_byte_rate` first, whatever the request's outcome, as
/// Kafka does for every Produce. Over the quota the response carries the throttle time and the
/// reply is `Reply::Throttled`: the connection reads nothing more for that long (KIP-219). With
/// acks=0 there is no response, and the connection is muted all the same, as Kafka mutes it.
pub fn handle(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ProduceRequest,
    request_bytes: usize,
) -> Result<Reply, CloseReason> {
    let client_id = ctx.client_id_str();
    let throttle_ms =
        broker
            .quotas
            .record_produce(&broker.image(), client_id.as_deref(), request_bytes);
    if throttle_ms > 0 {
        tracing::debug!(
            "produce of {request_bytes} bytes by client {client_id:?} over its producer_byte_rate: throttled {throttle_ms} ms"
        );
    }
    let reply = handle_unthrottled(broker, ctx, request, throttle_ms)?;
    Ok(Reply::throttled(throttle_ms, reply))
}

fn handle_unthrottled(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ProduceRequest,
    throttle_ms: i32,
) -> Result<Reply, CloseReason> {
    let Some(add) = implicit_add::produce_pending(broker, ctx.api_version, &request) else {
        return append_and_answer(broker, ctx, request, &Refused::new(), throttle_ms);
    };
    let broker = broker.clone();
    Ok(Reply::Barrier(Box::pin(async move {
        let refused = implicit_add::add_for_produce(&broker, add).await;
        match append_and_answer(&broker, ctx, request, &refused, throttle_ms) {
            Ok(Reply::Barrier(fsynced)) => fsynced.await,
            other => other,
        }
    })))
}

/// Appends (partitions in `refused` answer their code instead) and answers, after the fsync the
/// flush policy asks for, with `throttle_ms` as the response's throttle time.
fn append_and_answer(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: ProduceRequest,
    refused: &Refused,
    throttle_ms: i32,
) -> Result<Reply, CloseReason> {
    let acks = request.acks;
    let timeout_ms = request.timeout_ms;
    let (mut response, pending, waits) = append_all(broker, &ctx, request, refused);
    response.throttle_time_ms = throttle_ms;
    let waits = super::produce_wait::still_waiting(waits);
    if pending.is_empty() {
        return super::produce_wait::answer(ctx, acks, response, waits, timeout_ms);
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        // Outside a runtime (direct calls): fsync here.
        apply_sync_failures(&mut response, sync_all(pending));
        return answer(&ctx, acks, &response);
    };
    Ok(Reply::Barrier(Box::pin(async move {
        let at: Vec<(usize, usize)> = pending.iter().map(|p| (p.topic, p.partition)).collect();
        let failed = runtime
            .spawn_blocking(move || sync_all(pending))
            .await
            .unwrap_or_else(|e| {
                tracing::error!("produce fsync task failed: {e}");
                let why = "fsync task failed";
                at.into_iter()
                    .map(|(t, p)| (t, p, why.to_string()))
                    .collect()
            });
        apply_sync_failures(&mut response, failed);
        super::produce_wait::answer(ctx, acks, response, waits, timeout_ms)
    })))
}

/// The encoded response, or none for acks=0.
pub(super) fn answer(
    ctx: &RequestContext,
    acks: i16,
    response: &ProduceResponse,
) -> Result<Reply, CloseReason> {
    if acks == 0 {
        Ok(Reply::Now(None))
    } else {
        respond(ctx, response)
    }
}

/// Runs each pending fsync; returns the ones that failed, with why.
fn sync_all(pending: Vec<PendingSync>) -> Vec<(usize, usize, String)> {
    let mut failed = Vec::new();
    for p in pending {
        if let Err(e) = p.target.sync_and_publish(p.end) {
            tracing::error!("flush of {}-{} failed: {e}", p.target.topic, p.target.index);
            failed.push((p.topic, p.partition, e.to_string()));
        }
    }
    failed
}

/// A partition whose fsync failed answers KAFKA_STORAGE_ERROR instead of its offsets (the
/// producer retries; an idempotent retry is found a duplicate and waits for the fsync again).
fn apply_sync_failures(response: &mut ProduceResponse, failed: Vec<(usize, usize, String)>) {
    for (t, p, why) in failed {
        let r = &mut response.responses[t].partition_responses[p];
        r.error_code = error::KAFKA_STORAGE_ERROR;
        r.base_offset = -1;
        r.log_append_time_ms = -1;
        r.log_start_offset = -1;
        r.error_message = Some(StrBytes::from_string(why));
    }
}

/// Validates and appends every partition's batch; the response, and the appends still waiting
/// for the flush policy's fsync.
fn append_all(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: ProduceRequest,
    not_added: &Refused,
) -> (ProduceResponse, Vec<PendingSync>, Vec<ReplicationWait>) {
    let acks = request.acks;
    let mut pending = Vec::new();
    let mut waits = Vec::new();
    let by_id = ctx.api_version >= 13;
    // Kafka refuses the whole request before looking at any partition.
    let refused = has_transactional_records(&request) && request.transactional_id.is_none();
    // KIP-890 verification against the local view only when this broker coordinates the
    // transaction; one coordinated elsewhere is accepted unverified (see ARCHITECTURE.md).
    let verify = broker.config.transaction_partition_verification_enable
        && request
            .transactional_id
            .as_ref()
            .is_none_or(|id| super::txn::coordinated_here(broker, id.as_str()));
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic_data in request.topic_data {
        let topic = if by_id {
            broker.replicas.topic_by_id(topic_data.topic_id)
        } else {
            broker.replicas.topic(topic_data.name.as_str())
        };
        let missing = if by_id {
            error::UNKNOWN_TOPIC_ID
        } else {
            error::UNKNOWN_TOPIC_OR_PARTITION
        };
        let mut partition_responses = Vec::with_capacity(topic_data.partition_data.len());
        for pd in topic_data.partition_data {
            let result = if refused {
                Err(PartitionError::from((
                    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some("transactional records need a transactional id".to_string()),
                )))
            } else if !(-1..=1).contains(&acks) {
                Err((error::INVALID_REQUIRED_ACKS, None).into())
            } else {
                match &topic {
                    None => Err((missing, None).into()),
                    // Kafka refuses client writes to internal topics: only coordinators write there.
                    Some(t) if crate::cluster::is_internal_topic(&t.name) => {
                        Err((error::INVALID_TOPIC_EXCEPTION, None).into())
                    }
                    Some(t)
                        if !not_added.is_empty()
                            && not_added.contains_key(&(t.name.clone(), pd.index)) =>
                    {
                        let code = not_added[&(t.name.clone(), pd.index)];
                        Err((code, None).into())
                    }
                    Some(t) => append_partition(broker, ctx, t, pd.index, pd.records, acks, verify),
                }
            };
            let result = result.map(|a| {
                if let Some((target, end)) = a.sync {
                    pending.push(PendingSync {
                        topic: responses.len(),
                        partition: partition_responses.len(),
                        target,
                        end,
                    });
                }
                if acks == -1 {
                    waits.push(ReplicationWait {
                        topic: responses.len(),
                        partition: partition_responses.len(),
                        target: a.partition,
                        last_offset: a.last_offset,
                    });
                }
                a.offsets
            });
            partition_responses.push(to_response(pd.index, result, ctx.api_version));
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partition_responses),
        );
    }
    (
        ProduceResponse::default().with_responses(responses),
        pending,
        waits,
    )
}

/// (base offset, log append time, log start offset) of an appended batch.
type Offsets = (i64, i64, i64);
/// A partition's error: its code, its message, and (record-level refusals) the records at fault.
#[derive(Debug)]
struct PartitionError {
    code: i16,
    message: Option<String>,
    record_errors: Vec<RecordError>,
}

impl From<(i16, Option<String>)> for PartitionError {
    fn from((code, message): (i16, Option<String>)) -> Self {
        PartitionError {
            code,
            message,
            record_errors: Vec::new(),
        }
    }
}

impl From<Refusal> for PartitionError {
    fn from(r: Refusal) -> Self {
        PartitionError {
            code: match r.reason {
                Reason::InvalidRecord => error::INVALID_RECORD,
                Reason::InvalidTimestamp => error::INVALID_TIMESTAMP,
            },
            message: Some(r.message),
            record_errors: r.record_errors,
        }
    }
}
type PartitionResult = Result<Offsets, PartitionError>;

/// A batch appended: its offsets for the answer, the fsync it may need, and what an acks=all
/// answer waits for (the high watermark past `last_offset`).
struct Appended {
    offsets: Offsets,
    sync: Option<SyncNeeded>,
    last_offset: i64,
    partition: Arc<Partition>,
}
/// The partition and the offset below which it must be fsynced before the append is answered.
type SyncNeeded = (Arc<Partition>, i64);

fn to_response(index: i32, result: PartitionResult, version: i16) -> PartitionProduceResponse {
    let base = PartitionProduceResponse::default().with_index(index);
    match result {
        Ok((base_offset, log_append_time_ms, log_start_offset)) => base
            .with_error_code(error::NONE)
            .with_base_offset(base_offset)
            .with_log_append_time_ms(log_append_time_ms)
            .with_log_start_offset(log_start_offset),
        Err(e) => {
            let mut r = base
                .with_error_code(e.code)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            if version >= 8 {
                r.error_message = e.message.map(StrBytes::from_string);
                r.record_errors = e
                    .record_errors
                    .into_iter()
                    .map(|re| {
                        BatchIndexAndErrorMessage::default()
                            .with_batch_index(re.batch_index)
                            .with_batch_index_error_message(Some(StrBytes::from_string(re.message)))
                    })
                    .collect();
            }
            r
        }
    }
}

/// Validates the one batch a Produce v3+ partition entry must carry.
fn validate(
    records: Option<Bytes>,
    version: i16,
    max_message_bytes: i32,
) -> Result<(Bytes, BatchHeader), (i16, Option<String>)> {
    let records = records.unwrap_or_default();
    if records.is_empty() {
        return Err((
            error::INVALID_RECORD,
            Some("produce request carries no record batch".into()),
        ));
    }
    let header = match record::validate_batch(&records) {
        Ok(h) => h,
        Err(BatchError::BadMagic(m)) => {
            return Err((
                error::UNSUPPORTED_FOR_MESSAGE_FORMAT,
                Some(format!(
                    "record batch magic {m} is not supported; use magic 2"
                )),
            ))
        }
        Err(
            e @ (BatchError::BadCrc { .. }
            | BatchError::Truncated { .. }
            | BatchError::TooShort(_)
            | BatchError::BadLength(_)),
        ) => return Err((error::CORRUPT_MESSAGE, Some(e.to_string()))),
        Err(e) => return Err((error::INVALID_RECORD, Some(e.to_string()))),
    };
    if header.total_size() != records.len() {
        return Err((
            error::INVALID_RECORD,
            Some("produce requests v3+ must carry exactly one record batch per partition".into()),
        ));
    }
    if header.total_size() > max_message_bytes.max(0) as usize {
        return Err((
            error::MESSAGE_TOO_LARGE,
            Some(format!(
                "record batch of {} bytes exceeds max.message.bytes {max_message_bytes}",
                header.total_size()
            )),
        ));
    }
    if header.base_offset != 0 {
        return Err((
            error::INVALID_RECORD,
            Some("record batch base offset must be 0".into()),
        ));
    }
    if header.record_count == 0 {
        return Err((
            error::INVALID_RECORD,
            Some("record batch holds no records".into()),
        ));
    }
    if header.is_control() {
        return Err((
            error::INVALID_RECORD,
            Some("clients may not write control batches".into()),
        ));
    }
    match header.compression() {
        0..=3 => {}
        ZSTD if version >= 7 => {}
        ZSTD => {
            return Err((
                error::UNSUPPORTED_COMPRESSION_TYPE,
                Some("zstd needs Produce v7 or later".into()),
            ))
        }
        c => {
            return Err((
                error::CORRUPT_MESSAGE,
                Some(format!("unknown compression codec {c}")),
            ))
        }
    }
    Ok((records, header))
}

/// The Produce error for a failed transaction verification: CONCURRENT_TRANSACTIONS (a commit or
/// abort still in flight) becomes the retriable NOT_ENOUGH_REPLICAS, as Kafka does for clients that
/// do not know the former in Produce; the rest pass through.
fn verification_error(code: i16) -> i16 {
    const CONCURRENT_TRANSACTIONS: i16 = 51;
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    if code == CONCURRENT_TRANSACTIONS {
        NOT_ENOUGH_REPLICAS
    } else {
        code
    }
}

fn append_partition(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    topic: &Topic,
    index: i32,
    records: Option<Bytes>,
    acks: i16,
    verify: bool,
) -> Result<Appended, PartitionError> {
    let partition = super::image_view::leader_partition(broker, &topic.name, index)
        .map_err(|code| (code, None))?;
    // Kafka's leader check before the append: acks=all needs the effective minimum of in-sync
    // replicas, `min(min.insync.replicas, replication factor)` (Kafka 4.x).
    if acks == -1 {
        if let Err(e) = partition.check_acks_all_append() {
            return Err((
                error::NOT_ENOUGH_REPLICAS,
                Some(format!(
                    "The size of the current ISR ({}) is insufficient to satisfy the min.isr requirement of {} for partition {}-{index}",
                    e.isr_size, e.min_isr, topic.name
                )),
            )
                .into());
        }
    }
    let (batch, header) = validate(records, ctx.api_version, topic.config.max_message_bytes)?;
    let now_ms = super::now_ms();
    log_validator::validate(&batch, &header, &validation_rules(topic, index, now_ms))?;
    if header.is_transactional() && verify {
        broker
            .txn
            .verify(
                header.producer_id,
                header.producer_epoch,
                &topic.name,
                index,
            )
            .map_err(|code| (verification_error(code), None))?;
    }
    let settings = AppendSettings {
        timestamp_type: topic.config.message_timestamp_type,
        // The topic's flush policy (`flush.messages`, its `LogConfig`) decides in the partition.
        flush: false,
        origin: AppendOrigin::Client,
    };
    match partition.append_unsynced(&batch, &header, settings, now_ms) {
        Ok((o, sync)) => Ok(Appended {
            offsets: (o.base_offset, o.log_append_time_ms, o.log_start_offset),
            sync: sync.map(|end| (partition.clone(), end)),
            last_offset: o.base_offset + i64::from(header.last_offset_delta),
            partition: partition.clone(),
        }),
        Err(AppendError::Producer(e)) => Err((e.code(), Some(e.to_string())).into()),
        Err(AppendError::Log(e)) => {
            tracing::error!("append to {}-{index} failed: {e}", topic.name);
            Err((error::KAFKA_STORAGE_ERROR, Some(e.to_string())).into())
        }
    }
}

/// What `log_validator` checks a batch of `topic`'s partition `index` against.
fn validation_rules(topic: &Topic, index: i32, now_ms: i64) -> Rules<'_> {
    let c = &topic.config;
    Rules {
        topic: &topic.name,
        partition: index,
        compacted: c.cleanup_compact,
        timestamp_type: c.message_timestamp_type,
        timestamp_before_max_ms: c.message_timestamp_before_max_ms,
        timestamp_after_max_ms: c.message_timestamp_after_max_ms,
        now_ms,
        max_decompressed_bytes: log_validator::decompressed_limit(c.max_message_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Bytes {
        Bytes::from(record::build_batch(
            0,
            1,
            (-1, -1, -1),
            &[(None, Some(b"v"))],
        ))
    }

    #[test]
    fn validation_maps_each_fault_to_kafkas_code() {
        assert!(validate(Some(batch()), 9, 1_000_000).is_ok());
        assert_eq!(
            validate(None, 9, 1_000_000).unwrap_err().0,
            error::INVALID_RECORD
        );
        let mut two = batch().to_vec();
        two.extend_from_slice(&batch());
        assert_eq!(
            validate(Some(two.into()), 9, 1_000_000).unwrap_err().0,
            error::INVALID_RECORD
        );
        assert_eq!(
            validate(Some(batch()), 9, 10).unwrap_err().0,
            error::MESSAGE_TOO_LARGE
        );
        let mut bad = batch().to_vec();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(
            validate(Some(bad.into()), 9, 1_000_000).unwrap_err().0,
            error::CORRUPT_MESSAGE
        );
        let mut off = batch().to_vec();
        record::set_base_offset(&mut off, 5);
        assert_eq!(
            validate(Some(off.into()), 9, 1_000_000).unwrap_err().0,
            error::INVALID_RECORD
        );
        let txn = Bytes::from(record::build_transactional_batch(
            1,
            (7, 0, 0),
            &[(None, Some(b"v"))],
        ));
        assert!(validate(Some(txn), 9, 1_000_000).is_ok());
        let marker = Bytes::from(record::build_control_batch(
            7,
            0,
            0,
            record::ControlType::Commit,
            1,
        ));
        assert_eq!(
            validate(Some(marker), 9, 1_000_000).unwrap_err().0,
            error::INVALID_RECORD
        );
        let mut magic = batch().to_vec();
        magic[record::OFFSET_MAGIC] = 1;
        assert_eq!(
            validate(Some(magic.into()), 9, 1_000_000).unwrap_err().0,
            error::UNSUPPORTED_FOR_MESSAGE_FORMAT
        );
    }
}
