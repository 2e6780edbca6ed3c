//! ListOffsets (key 2): offsets by special timestamp (-1 latest, -2 earliest, -3 max timestamp,
//! -4 earliest local, -5 latest tiered) or the first offset whose timestamp is >= T.
//!
//! A timestamp T answers the first RECORD whose timestamp is >= T (its offset and timestamp, found
//! inside the batch the time index leads to), and -3 the first record with the largest
//! timestamp, as Kafka 4.x (compressed batches: at batch level, see `log::segment::search_batch`).
//! Without tiered storage -4 answers the log start offset and -5 offset -1 (Kafka 4.1's answers).
//!
//! As Kafka's `Partition.fetchOffsetForTimestamp`, the isolation level sets the last fetchable
//! offset (read_committed: the last stable offset; read_uncommitted: the high watermark): LATEST
//! answers it, and timestamp lookups (including -3) find nothing at or beyond it.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::log::LogError;
use crate::replica::partition::Partition;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const LATEST_TIERED: i64 = -5;

const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic = broker.image().topic(t.name.as_str()).cloned();
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    let partition = match &topic {
                        Some(tp) => {
                            super::image_view::leader_partition(broker, &tp.name, p.partition_index)
                        }
                        None => Err(error::UNKNOWN_TOPIC_OR_PARTITION),
                    };
                    match partition {
                        Err(code) => base
                            .with_error_code(code)
                            .with_timestamp(-1)
                            .with_offset(-1),
                        Ok(part) => lookup(
                            &part,
                            p.timestamp,
                            p.current_leader_epoch,
                            (ctx.api_version, request.isolation_level == 1),
                            base,
                        ),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(
    part: &Partition,
    timestamp: i64,
    current_leader_epoch: i32,
    (version, read_committed): (i16, bool),
    base: ListOffsetsPartitionResponse,
) -> ListOffsetsPartitionResponse {
    let epoch = part.leader_epoch();
    if current_leader_epoch >= 0 && current_leader_epoch != epoch {
        let code = if current_leader_epoch > epoch {
            UNKNOWN_LEADER_EPOCH
        } else {
            FENCED_LEADER_EPOCH
        };
        return base
            .with_error_code(code)
            .with_timestamp(-1)
            .with_offset(-1);
    }
    let offsets = part.offsets();
    let last_fetchable = if read_committed {
        offsets.last_stable_offset
    } else {
        offsets.high_watermark
    };
    let fetchable = |found: Option<(i64, i64)>| found.filter(|&(o, _)| o < last_fetchable);
    let found: Result<Option<(i64, i64)>, LogError> = match timestamp {
        LATEST => Ok(Some((last_fetchable, -1))),
        EARLIEST | EARLIEST_LOCAL => Ok(Some((offsets.log_start_offset, -1))),
        MAX_TIMESTAMP if version >= 7 => part.max_timestamp_record().map(fetchable),
        LATEST_TIERED if version >= 9 => Ok(None),
        t if t < 0 => return failed(base, error::UNSUPPORTED_VERSION),
        t => part.offset_for_timestamp(t).map(fetchable),
    };
    let found = found.map_err(|e| {
        tracing::error!(
            "timestamp lookup in {}-{} failed: {e}",
            part.topic,
            part.index
        );
        error::KAFKA_STORAGE_ERROR
    });
    match found {
        Ok(Some((offset, ts))) => {
            let r = base
                .with_error_code(error::NONE)
                .with_offset(offset)
                .with_timestamp(ts);
            // leader_epoch exists from v4; the encoder refuses it on older versions.
            if version >= 4 {
                r.with_leader_epoch(epoch)
            } else {
                r
            }
        }
        Ok(None) => base
            .with_error_code(error::NONE)
            .with_offset(-1)
            .with_timestamp(-1),
        Err(code) => failed(base, code),
    }
}

fn failed(base: ListOffsetsPartitionResponse, code: i16) -> ListOffsetsPartitionResponse {
    base.with_error_code(code)
        .with_offset(-1)
        .with_timestamp(-1)
}
