//! FindCoordinator (key 10): v0-3 ask for one key, v4+ for a batch. Group keys (type 0) are
//! and transaction keys (type 1) are coordinated by this node (creating `__consumer_offsets` or
//! `__transaction_state` on first use, as Kafka does).

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::group::codes;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn find_one(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    key: StrBytes,
    key_type: i8,
) -> Coordinator {
    let id = &broker.identity;
    let (host, port) = ctx.advertised(broker);
    // A found coordinator carries Kafka's `Errors.NONE.message()`: an empty string, not null.
    let found = Coordinator::default()
        .with_key(key.clone())
        .with_node_id(BrokerId(id.node_id))
        .with_host(StrBytes::from_string(host.to_string()))
        .with_port(port);
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
            if crate::group::driver::ensure_offsets_topic(broker).is_some() {
                found.with_error_message(Some(StrBytes::from_static_str("")))
            } else {
                failed(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                )
            }
        }
        KEY_TYPE_TRANSACTION => {
            if crate::txn::driver::ensure_transaction_topic(broker).is_some() {
                found.with_error_message(Some(StrBytes::from_static_str("")))
            } else {
                failed(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                )
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
