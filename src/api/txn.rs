//! Transaction APIs: AddPartitionsToTxn (24; v4+ is the batched broker form with `verify_only`),
//! AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions (65) and ListTransactions (66).
//!
//! Handlers check what only the broker knows (do the partitions exist? which `__consumer_offsets`
//! partition holds the group?), forward to the transaction coordinator task (`txn::driver`) and
//! answer as `Reply::Later`. Version shaping happens here: clients older than PRODUCER_FENCED get
//! INVALID_PRODUCER_EPOCH, as Kafka does. The EndTxn version is the client's transaction version:
//! v5+ is Transactions V2 (epoch bump, new producer id/epoch in the answer), older is V1.
//! AddPartitionsToTxn and AddOffsetsToTxn are V1 requests (V2 clients add implicitly through
//! Produce and TxnOffsetCommit).

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TransactionalId,
};

use super::group::later;
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::shard::{self, NotHere};
use crate::txn::codes;
use crate::txn::driver::{AddInput, EndTxnInput, Identity, Request};
use crate::txn::end_txn::EndAnswer;
use crate::txn::list::ListFilter;
use crate::txn::{txn_version, TxnHandle, TRANSACTION_STATE_TOPIC};

/// Kafka's coordinator check for one transactional id: Ok if this broker leads its
/// `__transaction_state` partition in the image, else NOT_COORDINATOR (another leader) or
/// COORDINATOR_NOT_AVAILABLE (no leader). Before the topic exists the local coordinator serves
/// it (creating the topic on its first write), as on a single node.
pub(super) fn txn_shard(broker: &Broker, transactional_id: &str) -> Result<(), i16> {
    // An empty id is left to the coordinator's validation, as Kafka checks it first.
    if transactional_id.is_empty() || coordinated_here(broker, transactional_id) {
        return Ok(());
    }
    let image = broker.image();
    let me = broker.identity.node_id;
    shard::coordinator_shard(&image, me, TRANSACTION_STATE_TOPIC, transactional_id)
        .map(|_| ())
        .map_err(NotHere::code)
}

/// Whether the local transaction view speaks for `transactional_id` (this broker coordinates
/// it, or no `__transaction_state` exists yet so no broker does); never creates the topic.
pub(super) fn coordinated_here(broker: &Broker, transactional_id: &str) -> bool {
    matches!(
        shard::coordinator_shard(
            &broker.image(),
            broker.identity.node_id,
            TRANSACTION_STATE_TOPIC,
            transactional_id
        ),
        Ok(_) | Err(NotHere::NoTopic)
    )
}

/// The first versions that know PRODUCER_FENCED.
const ADD_PARTITIONS_FENCED_SINCE: i16 = 2;
const ADD_OFFSETS_FENCED_SINCE: i16 = 2;
const END_TXN_FENCED_SINCE: i16 = 2;

/// One transaction of an AddPartitionsToTxn request.
struct AddPartitions {
    who: Identity,
    verify_only: bool,
    topics: Vec<AddPartitionsToTxnTopic>,
}

/// The transactional identity a request (or one transaction of a v4+ AddPartitionsToTxn) names.
fn identity(id: &TransactionalId, producer_id: ProducerId, producer_epoch: i16) -> Identity {
    Identity {
        transactional_id: id.as_str().to_string(),
        producer_id: producer_id.0,
        producer_epoch,
    }
}

/// The partitions of `topics` as (topic, partition), and whether each exists.
fn partitions_of(broker: &Broker, topics: &[AddPartitionsToTxnTopic]) -> Vec<(String, i32, bool)> {
    let mut out = Vec::new();
    let image = broker.image();
    for t in topics {
        for p in &t.partitions {
            let exists = image.partition(t.name.as_str(), *p).is_some();
            out.push((t.name.as_str().to_string(), *p, exists));
        }
    }
    out
}

/// Per-topic results from per-partition codes, in request order.
fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    mut code: impl FnMut(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code(t.name.as_str(), *p))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Runs one transaction's AddPartitions (or verification) and gives its per-topic results.
async fn add_one(
    handle: &TxnHandle,
    known: Vec<(String, i32, bool)>,
    add: AddPartitions,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let missing = known.iter().any(|(_, _, exists)| !exists);
    if missing {
        // Kafka attempts nothing when a partition is unknown.
        return topic_results(&add.topics, |topic, p| {
            let exists = known.iter().any(|(t, q, e)| t == topic && *q == p && *e);
            if exists {
                codes::OPERATION_NOT_ATTEMPTED
            } else {
                codes::UNKNOWN_TOPIC_OR_PARTITION
            }
        });
    }
    let partitions: Vec<(String, i32)> = known.into_iter().map(|(t, p, _)| (t, p)).collect();
    if add.verify_only {
        let n = partitions.len();
        let codes_by_partition = handle
            .call(|tx| Request::Verify(add.who, partitions.clone(), tx))
            .await
            .unwrap_or_else(|| vec![codes::COORDINATOR_NOT_AVAILABLE; n]);
        return topic_results(&add.topics, |topic, p| {
            partitions
                .iter()
                .position(|(t, q)| t == topic && *q == p)
                .and_then(|i| codes_by_partition.get(i).copied())
                .unwrap_or(codes::NONE)
        });
    }
    // v5 is what a partition leader sends for a Transactions V2 producer (KIP-890).
    let client_version = if version >= 5 {
        txn_version::V2
    } else {
        txn_version::V1
    };
    let input = AddInput {
        who: add.who,
        partitions,
        client_version,
    };
    let code = handle
        .call(|tx| Request::AddPartitions(input, tx))
        .await
        .unwrap_or(codes::COORDINATOR_NOT_AVAILABLE);
    let code = codes::for_version(code, version, ADD_PARTITIONS_FENCED_SINCE);
    topic_results(&add.topics, |_, _| code)
}

pub fn add_partitions(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AddPartitionsToTxnRequest,
) -> Reply {
    let handle = broker.txn.clone();
    let version = ctx.api_version;
    let adds: Vec<AddPartitions> = if version >= 4 {
        request
            .transactions
            .into_iter()
            .map(|t| AddPartitions {
                who: identity(&t.transactional_id, t.producer_id, t.producer_epoch),
                verify_only: t.verify_only,
                topics: t.topics,
            })
            .collect()
    } else {
        vec![AddPartitions {
            who: identity(
                &request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
            ),
            verify_only: false,
            topics: request.v3_and_below_topics,
        }]
    };
    let known: Vec<_> = adds
        .iter()
        .map(|a| partitions_of(broker, &a.topics))
        .collect();
    let gates: Vec<_> = adds
        .iter()
        .map(|a| txn_shard(broker, &a.who.transactional_id))
        .collect();
    later(ctx, async move {
        let mut response = AddPartitionsToTxnResponse::default();
        for ((add, known), gate) in adds.into_iter().zip(known).zip(gates) {
            let id = add.who.transactional_id.clone();
            let results = match gate {
                // Not coordinated here: every partition of this transaction answers the code.
                Err(code) => topic_results(&add.topics, |_, _| code),
                Ok(_) => add_one(&handle, known, add, version).await,
            };
            if version >= 4 {
                response.results_by_transaction.push(
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(TransactionalId(id.into()))
                        .with_topic_results(results),
                );
            } else {
                response.results_by_topic_v3_and_below = results;
            }
        }
        response
    })
}

pub fn add_offsets(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: AddOffsetsToTxnRequest,
) -> Reply {
    let handle = broker.txn.clone();
    let version = ctx.api_version;
    let who = identity(
        &request.transactional_id,
        request.producer_id,
        request.producer_epoch,
    );
    if let Err(code) = txn_shard(broker, &who.transactional_id) {
        return super::group::now(
            ctx,
            AddOffsetsToTxnResponse::default().with_error_code(code),
        );
    }
    // The group's offsets partition joins the transaction, so the markers reach it.
    let broker = broker.clone();
    later(ctx, async move {
        let offsets = crate::group::driver::ensure_offsets_topic(&broker)
            .await
            .map(|t| {
                crate::group::records::partition_for(
                    request.group_id.as_str(),
                    // The image's count: this broker hosts only some of the partitions.
                    crate::internal_topic::partition_count(&broker, &t),
                )
            });
        let code = match offsets {
            None => codes::COORDINATOR_NOT_AVAILABLE,
            Some(p) => {
                let input = AddInput {
                    who,
                    partitions: vec![(crate::group::OFFSETS_TOPIC.to_string(), p)],
                    client_version: txn_version::V1,
                };
                handle
                    .call(|tx| Request::AddPartitions(input, tx))
                    .await
                    .unwrap_or(codes::COORDINATOR_NOT_AVAILABLE)
            }
        };
        AddOffsetsToTxnResponse::default().with_error_code(codes::for_version(
            code,
            version,
            ADD_OFFSETS_FENCED_SINCE,
        ))
    })
}

/// EndTxn: the request's version is the client's transaction version (v5+ is V2, whose answer
/// carries the bumped producer id and epoch).
pub fn end_txn(broker: &Arc<Broker>, ctx: RequestContext, request: EndTxnRequest) -> Reply {
    let handle = broker.txn.clone();
    let version = ctx.api_version;
    let input = EndTxnInput {
        who: identity(
            &request.transactional_id,
            request.producer_id,
            request.producer_epoch,
        ),
        commit: request.committed,
        client_version: txn_version::of_end_txn(version),
    };
    if let Err(code) = txn_shard(broker, &input.who.transactional_id) {
        let refused = EndTxnResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        return super::group::now(ctx, refused);
    }
    later(ctx, async move {
        let answer = handle
            .call(|tx| Request::EndTxn(input, tx))
            .await
            .unwrap_or(EndAnswer {
                error: codes::COORDINATOR_NOT_AVAILABLE,
                producer_id: -1,
                producer_epoch: -1,
            });
        EndTxnResponse::default()
            .with_error_code(codes::for_version(
                answer.error,
                version,
                END_TXN_FENCED_SINCE,
            ))
            .with_producer_id(ProducerId(answer.producer_id))
            .with_producer_epoch(answer.producer_epoch)
    })
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    request: DescribeTransactionsRequest,
) -> Reply {
    let handle = broker.txn.clone();
    let ids: Vec<String> = request
        .transactional_ids
        .iter()
        .map(|id| id.as_str().to_string())
        .collect();
    use kafka_protocol::messages::describe_transactions_response::TransactionState;
    let failed = |id: &str, code: i16| {
        TransactionState::default()
            .with_transactional_id(TransactionalId(id.to_string().into()))
            .with_error_code(code)
    };
    // Ids coordinated elsewhere answer their own error, in request order (as Kafka).
    let gates: Vec<Result<(), i16>> = ids.iter().map(|id| txn_shard(broker, id)).collect();
    let local: Vec<String> = ids
        .iter()
        .zip(&gates)
        .filter(|(_, g)| g.is_ok())
        .map(|(id, _)| id.clone())
        .collect();
    later(ctx, async move {
        let answered = if local.is_empty() {
            Some(Vec::new())
        } else {
            handle.call(|tx| Request::Describe(local, tx)).await
        };
        let mut answered = answered.map(Vec::into_iter);
        let states = ids
            .iter()
            .zip(gates)
            .map(|(id, gate)| match (gate, answered.as_mut()) {
                (Err(code), _) => failed(id, code),
                (Ok(_), Some(a)) => a
                    .next()
                    .unwrap_or_else(|| failed(id, codes::COORDINATOR_NOT_AVAILABLE)),
                (Ok(_), None) => failed(id, codes::COORDINATOR_NOT_AVAILABLE),
            })
            .collect();
        DescribeTransactionsResponse::default().with_transaction_states(states)
    })
}

pub fn list(broker: &Arc<Broker>, ctx: RequestContext, request: ListTransactionsRequest) -> Reply {
    let handle = broker.txn.clone();
    let version = ctx.api_version;
    let filter = ListFilter {
        states: request
            .state_filters
            .iter()
            .map(|s| s.as_str().to_string())
            .collect(),
        producer_ids: request.producer_id_filters.iter().map(|p| p.0).collect(),
        min_duration_ms: if version >= 1 {
            request.duration_filter
        } else {
            -1
        },
        transactional_id_pattern: if version >= 2 {
            request
                .transactional_id_pattern
                .as_ref()
                .map(|p| p.as_str().to_string())
        } else {
            None
        },
    };
    // Only the transactions of the shards led here (Kafka lists each broker's own shards).
    let image = broker.image();
    let led = shard::led_shards(&image, broker.identity.node_id, TRANSACTION_STATE_TOPIC);
    let count = shard::partition_count(&image, TRANSACTION_STATE_TOPIC);
    later(ctx, async move {
        let mut response = handle
            .call(|tx| Request::List(filter, tx))
            .await
            .unwrap_or_else(|| {
                ListTransactionsResponse::default()
                    .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
            });
        // No topic yet: nothing is coordinated elsewhere.
        if count > 0 {
            response
                .transaction_states
                .retain(|t| shard::is_led(&led, count, t.transactional_id.as_str()));
        }
        response
    })
}
