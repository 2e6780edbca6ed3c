//! TxnOffsetCommit (28, v0-5): a transactional producer's consumer offsets, forwarded to the group
//! coordinator task, which appends them as one transactional batch and keeps them pending until
//! the transaction ends.
//!
//! As Kafka's `KafkaApis`: partitions of unknown topics (or past a topic's partition count) answer
//! UNKNOWN_TOPIC_OR_PARTITION here and never reach the coordinator (checked against Kafka 4.1.2).
//! Before any group check the producer is verified with the transaction coordinator, as Kafka
//! 4.1.2 does: the group's `__consumer_offsets` partition must be part of the producer's open
//! transaction (AddOffsetsToTxn), else INVALID_TXN_STATE; an old epoch is INVALID_PRODUCER_EPOCH.
//! v5+ is Transactions V2: a partition not yet in the transaction is added implicitly first
//! ([`super::implicit_add`]), since V2 clients send no AddOffsetsToTxn.
//! Not done: authorization.

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::error;
use super::group::later;
use super::implicit_add::{self, Pending, TXN_OFFSET_COMMIT_V2_SINCE};
use super::offsets::{merge_topics, take_unknown};
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::group::driver::Request;
use crate::txn::driver::Identity;

pub fn commit(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    mut request: TxnOffsetCommitRequest,
) -> Reply {
    let mut unknown = Vec::new();
    for t in &mut request.topics {
        let missing = take_unknown(broker, t.name.as_str(), &mut t.partitions, |p| {
            p.partition_index
        });
        if !missing.is_empty() {
            unknown.push(topic_errors(
                &t.name,
                missing.into_iter(),
                error::UNKNOWN_TOPIC_OR_PARTITION,
            ));
        }
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    // A group coordinated elsewhere: every partition the coordinator would see answers the code.
    if !request.topics.is_empty() {
        if let Err(code) = super::group::group_shard(broker, request.group_id.as_str()) {
            let mut failed = all_failed(&request, code);
            failed.topics.extend(unknown);
            return super::group::now(ctx, failed);
        }
    }
    // Transactions V2 (v5+): the group's partition joins the transaction here, implicitly.
    let mut implicit = None;
    match verify(broker, &request, ctx.api_version) {
        Ok(()) => {}
        seen if ctx.api_version >= TXN_OFFSET_COMMIT_V2_SINCE
            && implicit_add::needs_coordinator(seen) =>
        {
            implicit = Some(Pending {
                who: Identity {
                    transactional_id: request.transactional_id.as_str().to_string(),
                    producer_id: request.producer_id.0,
                    producer_epoch: request.producer_epoch,
                },
                partitions: vec![(
                    crate::group::OFFSETS_TOPIC.to_string(),
                    offsets_partition(broker, &request),
                )],
            })
        }
        Err(code) => {
            let mut failed = all_failed(&request, code);
            failed.topics.extend(unknown);
            return later(ctx, async move { failed });
        }
    }
    let handle = broker.groups.clone();
    let broker = broker.clone();
    later(ctx, async move {
        if let Some(pending) = implicit {
            let code = implicit_add::add_anywhere(&broker, pending).await;
            if code != codes::NONE {
                let mut failed = all_failed(&request, implicit_add::offset_commit_error(code));
                failed.topics.extend(unknown);
                return failed;
            }
        }
        let mut response = if request.topics.is_empty() {
            TxnOffsetCommitResponse::default()
        } else {
            let fallback = all_failed(&request, codes::COORDINATOR_NOT_AVAILABLE);
            handle
                .call(|tx| Request::TxnCommit(request, tx))
                .await
                .unwrap_or(fallback)
        };
        // As Kafka's response builder: the refused partitions first, the coordinator's answer
        // merged into the same topic entries.
        response.topics = merge_topics(
            unknown,
            std::mem::take(&mut response.topics),
            |a, b| a.name == b.name,
            |a, b| a.partitions.extend(b.partitions),
        );
        response
    })
}

/// Kafka's transaction verification: the producer's open transaction must hold the group's
/// `__consumer_offsets` partition. Producer id -1 is left to the coordinator (it answers
/// INVALID_PRODUCER_ID_MAPPING).
fn verify(broker: &Broker, request: &TxnOffsetCommitRequest, version: i16) -> Result<(), i16> {
    if request.producer_id.0 < 0
        || request.topics.is_empty()
        || !broker.config.transaction_partition_verification_enable
    {
        return Ok(());
    }
    // The local view knows only the transactions coordinated here. Another broker's: a V2
    // request adds the partition there (as not yet added); a V1 one is accepted unverified (no
    // AddPartitionsToTxn verify_only round trip yet).
    if !super::txn::coordinated_here(broker, request.transactional_id.as_str()) {
        return if version >= TXN_OFFSET_COMMIT_V2_SINCE {
            Err(crate::txn::codes::INVALID_TXN_STATE)
        } else {
            Ok(())
        };
    }
    broker.txn.verify(
        request.producer_id.0,
        request.producer_epoch,
        crate::group::OFFSETS_TOPIC,
        offsets_partition(broker, request),
    )
}

/// The `__consumer_offsets` partition of the request's group.
fn offsets_partition(broker: &Broker, request: &TxnOffsetCommitRequest) -> i32 {
    let partitions = broker
        .image()
        .topic(crate::group::OFFSETS_TOPIC)
        .map_or(broker.config.offsets_topic_num_partitions, |t| {
            t.partition_count()
        });
    crate::group::records::partition_for(request.group_id.as_str(), partitions)
}

fn topic_errors(
    name: &TopicName,
    partitions: impl Iterator<Item = i32>,
    code: i16,
) -> TxnOffsetCommitResponseTopic {
    TxnOffsetCommitResponseTopic::default()
        .with_name(name.clone())
        .with_partitions(
            partitions
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect(),
        )
}

/// Every partition of the request answered with `code`.
fn all_failed(request: &TxnOffsetCommitRequest, code: i16) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|t| {
                topic_errors(
                    &t.name,
                    t.partitions.iter().map(|p| p.partition_index),
                    code,
                )
            })
            .collect(),
    )
}
