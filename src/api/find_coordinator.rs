//! FindCoordinator (key 10): v0-3 ask for one key, v4+ for a batch. A group key (type 0) is
//! coordinated by the leader of its `__consumer_offsets` partition, a transactional id (type 1) by
//! the leader of its `__transaction_state` partition, both read from the metadata image with the
//! leader's endpoint on the client's listener (the internal topic is created on first use, as
//! Kafka does). No leader: COORDINATOR_NOT_AVAILABLE.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::group::codes;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// Creates the internal topic that coordinates `key_type` if it does not exist yet (through the
/// controller, on first use, as Kafka does). The handler then only reads the image.
pub async fn ensure_topic(broker: &Broker, key_type: i8) {
    match key_type {
        KEY_TYPE_GROUP => {
            let _ = crate::group::driver::ensure_offsets_topic(broker).await;
        }
        KEY_TYPE_TRANSACTION => {
            let _ = crate::txn::driver::ensure_transaction_topic(broker).await;
        }
        _ => {}
    }
}

/// Whether `key_type`'s internal topic is still to be created.
pub fn needs_topic(broker: &Broker, key_type: i8) -> bool {
    let topic = match key_type {
        KEY_TYPE_GROUP => crate::group::OFFSETS_TOPIC,
        KEY_TYPE_TRANSACTION => crate::txn::TRANSACTION_STATE_TOPIC,
        _ => return false,
    };
    broker.replicas.topic(topic).is_none()
}

fn find_one(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    key: StrBytes,
    key_type: i8,
) -> Coordinator {
    let found = |topic: &str| {
        let image = broker.image();
        let count = image.topic(topic)?.partition_count();
        let p = crate::group::records::partition_for(key.as_str(), count);
        let leader = image.partition(topic, p)?.leader;
        let listener = super::image_view::listener_name(broker, ctx, &image);
        let (host, port) = super::image_view::endpoint(image.broker(leader)?, &listener)?;
        Some(
            Coordinator::default()
                .with_key(key.clone())
                .with_node_id(BrokerId(leader))
                .with_host(StrBytes::from_string(host))
                .with_port(port)
                // Kafka's `Errors.NONE.message()`: an empty string, not null.
                .with_error_message(Some(StrBytes::from_static_str(""))),
        )
    };
    let failed = |code: i16, message: &str| {
        Coordinator::default()
            .with_key(key.clone())
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::from_static_str(""))
            .with_port(-1)
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message.to_string())))
    };
    match key_type {
        KEY_TYPE_GROUP => {
            match broker
                .replicas
                .topic(crate::group::OFFSETS_TOPIC)
                .and_then(|_| found(crate::group::OFFSETS_TOPIC))
            {
                Some(c) => c,
                None => failed(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                ),
            }
        }
        KEY_TYPE_TRANSACTION => {
            match broker
                .replicas
                .topic(crate::txn::TRANSACTION_STATE_TOPIC)
                .and_then(|_| found(crate::txn::TRANSACTION_STATE_TOPIC))
            {
                Some(c) => c,
                None => failed(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                ),
            }
        }
        other => failed(
            error::INVALID_REQUEST,
            &format!("Unknown coordinator type {other}"),
        ),
    }
}

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let version = ctx.api_version;
    // v0 has no key type: it always asks for a group coordinator.
    let key_type = if version >= 1 {
        request.key_type
    } else {
        KEY_TYPE_GROUP
    };
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|k| find_one(broker, ctx, k, key_type))
            .collect();
        return FindCoordinatorResponse::default()
            .with_error_message(None)
            .with_coordinators(coordinators);
    }
    let c = find_one(broker, ctx, request.key, key_type);
    let mut response = FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port);
    // Kafka's v1-v3 answer carries `Errors.message()`, which is "NONE" for no error (v4's
    // per-key answers carry an empty string).
    response.error_message = match (version, c.error_code) {
        (0, _) => None,
        (_, 0) => Some(StrBytes::from_static_str("NONE")),
        _ => c.error_message,
    };
    response
}
