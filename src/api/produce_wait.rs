//! acks=all after the append (Kafka's `DelayedProduce`): a produce is answered once the high
//! watermark of every partition it wrote passed its batch, decided per partition by the pure
//! `replica::replication::acks::DelayedProduce` (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell
//! below the minimum, REQUEST_TIMED_OUT at the request's `timeout_ms`, NOT_LEADER_OR_FOLLOWER when
//! this broker stopped leading meanwhile).
//!
//! Waiting is data: the reply is a `Reply::Later` that awaits each partition's high-watermark
//! watch (subscribed before the check, so no move is missed) or the deadline, never a sleep loop.
//! The connection's reader goes on reading (pipelined produces wait side by side; the writer
//! answers in request order). A partition led with no followers has its high watermark at the log
//! end already, so it never waits.

use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;

use super::produce::answer as encode_answer;
use super::{error, CloseReason, Reply, RequestContext};
use crate::replica::isr::now_ms;
use crate::replica::partition::Partition;
use crate::replica::replication::acks::{DelayedProduce, DelayedProduceOutcome};

const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// One acks=all partition answer that waits for the high watermark: the answer at
/// `responses[topic].partition_responses[partition]`.
pub struct ReplicationWait {
    pub topic: usize,
    pub partition: usize,
    pub target: Arc<Partition>,
    pub last_offset: i64,
}

/// The waits the high watermark has not yet satisfied.
pub fn still_waiting(waits: Vec<ReplicationWait>) -> Vec<ReplicationWait> {
    waits
        .into_iter()
        .filter(|w| !w.target.committed_through(w.last_offset))
        .collect()
}

/// The answer: at once when nothing waits (or acks is not -1), else once every wait is decided.
pub fn answer(
    ctx: RequestContext,
    acks: i16,
    response: ProduceResponse,
    waits: Vec<ReplicationWait>,
    timeout_ms: i32,
) -> Result<Reply, CloseReason> {
    if waits.is_empty() || acks != -1 {
        return encode_answer(&ctx, acks, &response);
    }
    let arrived = now_ms();
    Ok(Reply::Later(Box::pin(async move {
        let mut response = response;
        for w in waits {
            let slot = &mut response.responses[w.topic].partition_responses[w.partition];
            if slot.error_code != error::NONE {
                continue; // its fsync failed: already answered with that error
            }
            let delayed = DelayedProduce::new(w.last_offset, arrived, timeout_ms);
            let code = wait_one(&w.target, delayed).await;
            if code != error::NONE {
                slot.error_code = code;
                slot.error_message = Some(StrBytes::from_static_str(match code {
                    NOT_ENOUGH_REPLICAS_AFTER_APPEND => {
                        "The ISR shrank below min.insync.replicas after the append"
                    }
                    error::REQUEST_TIMED_OUT => "Timed out waiting for the in-sync replicas",
                    _ => "This broker stopped leading the partition",
                }));
                if code != NOT_ENOUGH_REPLICAS_AFTER_APPEND {
                    slot.base_offset = -1;
                    slot.log_append_time_ms = -1;
                    slot.log_start_offset = -1;
                }
            }
        }
        match encode_answer(&ctx, acks, &response) {
            Ok(Reply::Now(frame)) => frame,
            _ => None,
        }
    })))
}

/// Waits until `delayed` is decided on `partition`; its error code (NONE when replicated).
async fn wait_one(partition: &Partition, delayed: DelayedProduce) -> i16 {
    match partition.wait_replicated(delayed).await {
        DelayedProduceOutcome::Completed => error::NONE,
        DelayedProduceOutcome::NotEnoughReplicasAfterAppend => NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        DelayedProduceOutcome::RequestTimedOut => error::REQUEST_TIMED_OUT,
        // Pending is never the outcome of a finished wait.
        DelayedProduceOutcome::NotLeaderOrFollower | DelayedProduceOutcome::Pending => {
            error::NOT_LEADER_OR_FOLLOWER
        }
    }
}
