//! InitProducerId (key 22) for idempotent producers: a fresh producer id at epoch 0.
//! Transactional ids need the transaction coordinator, which does not exist yet: such requests are
//! refused with a clear error instead of pretending.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{error, RequestContext};
use crate::broker::Broker;

pub fn handle(
    broker: &Arc<Broker>,
    _ctx: &RequestContext,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if request.transactional_id.is_some() {
        tracing::warn!(
            "InitProducerId with a transactional id refused: transactions are not supported yet"
        );
        return refused.with_error_code(error::TRANSACTIONAL_ID_NOT_FOUND);
    }
    match broker.producer_ids.next_id() {
        Ok(id) => InitProducerIdResponse::default()
            .with_error_code(error::NONE)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!("allocating a producer id failed: {e}");
            refused.with_error_code(error::KAFKA_STORAGE_ERROR)
        }
    }
}
