//! The log side of transactions: WriteTxnMarkers (27) and DescribeProducers (61).
//!
//! WriteTxnMarkers is the inter-broker API a transaction coordinator uses to end a transaction on
//! each partition; Kafka accepts it without client authentication checks we would apply, and so do
//! we, which also lets tests drive markers over the wire. Each marker is written with
//! [`Partition::write_txn_marker`] on the reader task (so markers keep request order); the reply
//! waits until each marker is committed (the partition's high watermark passed it: as Kafka's
//! acks=all append of markers; a partition's timeout answers REQUEST_TIMED_OUT and the coordinator
//! retries), then markers in `__consumer_offsets` are handed to the group coordinator, whose
//! answer the reply awaits too.
//! DescribeProducers lists a partition's producer state (Kafka's `activeProducerState`).

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};

use super::group::later;
use super::{error, Reply, RequestContext};
use crate::broker::Broker;
use crate::group::OFFSETS_TOPIC;
use crate::internal_topic::{committed, NotCommitted, Written};
use crate::record::ControlType;
use crate::replica::partition::{AppendError, Partition};
use crate::txn::driver::COMMIT_WAIT_MS;

/// The partition `index` of `topic`, if it exists here (DescribeProducers).
fn find_partition(broker: &Broker, topic: &str, index: i32) -> Option<Arc<Partition>> {
    broker.replicas.partition(topic, index)
}

/// WriteTxnMarkers: one marker per (marker, partition), Kafka's per-partition error codes
/// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH,
/// TRANSACTION_COORDINATOR_FENCED, KAFKA_STORAGE_ERROR). As Kafka (which keys its results by producer id), markers of the same
/// producer id share one result entry, topics of the same name one topic entry.
pub fn write_txn_markers(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: WriteTxnMarkersRequest,
) -> Reply {
    let now = super::now_ms();
    let flush = broker.config.flush_every_message;
    // Each marker written: where its answer is (marker, topic, partition entry), its batch, and
    // for `__consumer_offsets` what the group coordinator completes once it is committed.
    type Landed = (
        (usize, usize, usize),
        Written,
        Option<(i32, i64, ControlType)>,
    );
    let mut landed: Vec<Landed> = Vec::new();
    let mut results: Vec<WritableTxnMarkerResult> = Vec::new();
    for m in request.markers {
        let control = if m.transaction_result {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let producer_id = m.producer_id.0;
        let at = match results.iter().position(|r| r.producer_id.0 == producer_id) {
            Some(at) => at,
            None => {
                results.push(WritableTxnMarkerResult::default().with_producer_id(m.producer_id));
                results.len() - 1
            }
        };
        for t in m.topics {
            let topics = &mut results[at].topics;
            let ti = match topics.iter().position(|r| r.name == t.name) {
                Some(ti) => ti,
                None => {
                    topics.push(WritableTxnMarkerTopicResult::default().with_name(t.name.clone()));
                    topics.len() - 1
                }
            };
            for &index in &t.partition_indexes {
                let name = t.name.as_str();
                // Only the leader writes a marker (Kafka's append path): another broker's
                // partition answers NOT_LEADER_OR_FOLLOWER and the coordinator re-routes it.
                // Markers are appended as acks=all, as Kafka's coordinator-origin append:
                // NOT_ENOUGH_REPLICAS below the effective min.insync.replicas (retried).
                let code = match super::image_view::leader_partition(broker, name, index) {
                    Err(code) => code,
                    Ok(p) if p.check_acks_all_append().is_err() => error::NOT_ENOUGH_REPLICAS,
                    Ok(p) => match p.write_txn_marker(
                        producer_id,
                        m.producer_epoch,
                        m.coordinator_epoch,
                        control,
                        flush,
                        now,
                    ) {
                        Ok(offset) => {
                            let at = (at, ti, topics[ti].partitions.len());
                            let written = Written {
                                partition: p.clone(),
                                last_offset: offset,
                            };
                            let completes =
                                (name == OFFSETS_TOPIC).then_some((index, producer_id, control));
                            landed.push((at, written, completes));
                            error::NONE
                        }
                        Err(AppendError::Producer(e)) => e.code(),
                        Err(AppendError::Log(e)) => {
                            tracing::error!(
                                "writing a transaction marker to {name}-{index} failed: {e}"
                            );
                            error::KAFKA_STORAGE_ERROR
                        }
                    },
                };
                topics[ti].partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
        }
    }
    let mut response = WriteTxnMarkersResponse::default().with_markers(results);
    let groups = broker.groups.clone();
    later(ctx, async move {
        let deadline = super::now_ms() + COMMIT_WAIT_MS;
        let mut completions = Vec::new();
        for ((m, t, p), marker, completes) in landed {
            let left = (deadline - super::now_ms()).max(0);
            match committed(std::slice::from_ref(&marker), left).await {
                Ok(()) => completions.extend(completes),
                Err(e) => {
                    response.markers[m].topics[t].partitions[p].error_code = match e {
                        NotCommitted::TimedOut => error::REQUEST_TIMED_OUT,
                        NotCommitted::NotLeader => error::NOT_LEADER_OR_FOLLOWER,
                    }
                }
            }
        }
        // As Kafka: the marker is committed before the group coordinator materialises (or drops)
        // the producer's pending offsets, and the answer waits for that.
        for (partition, producer_id, control) in completions {
            groups.complete_txn(partition, producer_id, control).await;
        }
        response
    })
}

/// DescribeProducers: the producer state of each requested partition.
pub fn describe_producers(
    broker: &Arc<Broker>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let base = PartitionResponse::default().with_partition_index(index);
                    match find_partition(broker, t.name.as_str(), index) {
                        None => base.with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION),
                        Some(p) => base.with_active_producers(
                            p.active_producers()
                                .into_iter()
                                .map(|(id, e)| {
                                    ProducerState::default()
                                        .with_producer_id(ProducerId(id))
                                        .with_producer_epoch(e.producer_epoch() as i32)
                                        .with_last_sequence(e.last_sequence())
                                        .with_last_timestamp(e.last_timestamp())
                                        .with_coordinator_epoch(e.coordinator_epoch())
                                        .with_current_txn_start_offset(
                                            e.current_txn_first_offset().unwrap_or(-1),
                                        )
                                })
                                .collect(),
                        ),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

#[cfg(test)]
#[path = "txn_log_tests.rs"]
mod tests;
