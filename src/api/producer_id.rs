//! InitProducerId (key 22). Without a transactional id (idempotent producers): a fresh producer
//! id at epoch 0, answered at once. With one: forwarded to the transaction coordinator task,
//! which bumps the epoch (fencing older instances), aborts a transaction the previous instance
//! left open, and honours KIP-360's producer id/epoch (v3+).

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::group::later;
use super::{error, Reply, RequestContext};
use crate::broker::Broker;
use crate::txn::codes;
use crate::txn::coordinator::InitInput;
use crate::txn::driver::Request;

/// The first version that knows PRODUCER_FENCED.
const FENCED_SINCE: i16 = 4;

fn answer(code: i16, producer_id: i64, epoch: i16) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
        .with_error_code(code)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
}

pub fn handle(broker: &Arc<Broker>, ctx: RequestContext, request: InitProducerIdRequest) -> Reply {
    let version = ctx.api_version;
    let Some(transactional_id) = request.transactional_id.as_ref() else {
        let response = match broker.producer_ids.next_id() {
            Ok(id) => answer(error::NONE, id, 0),
            // Multi-node: the controller's block is not here yet (Kafka's answer; retriable).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => answer(
                kafka_protocol::error::ResponseError::CoordinatorLoadInProgress.code(),
                -1,
                -1,
            ),
            Err(e) => {
                tracing::error!("allocating a producer id failed: {e}");
                answer(error::KAFKA_STORAGE_ERROR, -1, -1)
            }
        };
        return later(ctx, async move { response });
    };
    // KIP-360: both -1 means "no producer yet"; exactly one -1 is malformed.
    let expected = match (request.producer_id.0, request.producer_epoch) {
        _ if version < 3 => Ok(None),
        (-1, -1) => Ok(None),
        (-1, _) | (_, -1) => Err(codes::INVALID_REQUEST),
        (pid, epoch) => Ok(Some((pid, epoch))),
    };
    let input = expected.map(|expected| InitInput {
        transactional_id: transactional_id.as_str().to_string(),
        timeout_ms: request.transaction_timeout_ms,
        expected,
        fresh_producer_id: None,
    });
    if let Err(code) = super::txn::txn_shard(broker, transactional_id.as_str()) {
        return later(ctx, async move { answer(code, -1, -1) });
    }
    let handle = broker.txn.clone();
    later(ctx, async move {
        let input = match input {
            Ok(i) => i,
            Err(code) => return answer(code, -1, -1),
        };
        match handle.call(|tx| Request::InitProducerId(input, tx)).await {
            Some(a) => answer(
                codes::for_version(a.error, version, FENCED_SINCE),
                a.producer_id,
                a.producer_epoch,
            ),
            None => answer(codes::COORDINATOR_NOT_AVAILABLE, -1, -1),
        }
    })
}
