//! FindCoordinator (key 10): v0-3 ask for one key, v4+ for a batch. A group key (type 0) is
//! coordinated by the leader of its `__consumer_offsets` partition, a transactional id (type 1) by
//! the leader of its `__transaction_state` partition, both read from the metadata image with the
//! leader's endpoint on the client's listener (the internal topic is created on first use, as
//! Kafka does). No leader: COORDINATOR_NOT_AVAILABLE. A share-partition key (type 2, v6+, what a
//! broker's share-partition leader asks before it reads or writes share state) is
//! `groupId:topicId:partition` and is coordinated by the leader of its `__share_group_state`
//! partition (the partition of the key as `SharePartitionKey.asCoordinatorKey` prints it); a key
//! that is not of that form, or the type below v6, is INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::share::registry::ShareKey;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;
/// The first FindCoordinator version that may ask for a share-partition key.
const SHARE_MIN_VERSION: i16 = 6;

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
        KEY_TYPE_SHARE => crate::share_state::ensure_topic(broker).await,
        _ => {}
    }
}

/// Whether the internal topic that coordinates `request`'s key type is still to be created
/// (for share-partition keys: only when every key is one, as Kafka validates them first).
pub fn needs_topic(broker: &Broker, request: &FindCoordinatorRequest, version: i16) -> bool {
    let topic = match request.key_type {
        KEY_TYPE_GROUP => crate::group::OFFSETS_TOPIC,
        KEY_TYPE_TRANSACTION => crate::txn::TRANSACTION_STATE_TOPIC,
        KEY_TYPE_SHARE if version >= SHARE_MIN_VERSION => {
            let mut keys = request.coordinator_keys.iter();
            if !keys.all(|k| parse_share_key(k).is_some()) || request.coordinator_keys.is_empty() {
                return false;
            }
            crate::share::state_records::SHARE_STATE_TOPIC
        }
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
    let found = |topic: &str, partition_key: &str| {
        let image = broker.image();
        let count = image.topic(topic)?.partition_count();
        let p = crate::group::records::partition_for(partition_key, count);
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
                .and_then(|_| found(crate::group::OFFSETS_TOPIC, key.as_str()))
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
                .and_then(|_| found(crate::txn::TRANSACTION_STATE_TOPIC, key.as_str()))
            {
                Some(c) => c,
                None => failed(
                    codes::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                ),
            }
        }
        // Kafka 4.1.2 answers both refusals of a share-partition key with an empty message.
        KEY_TYPE_SHARE if ctx.api_version < SHARE_MIN_VERSION => failed(error::INVALID_REQUEST, ""),
        KEY_TYPE_SHARE => {
            let Some(share_key) = parse_share_key(key.as_str()) else {
                return failed(error::INVALID_REQUEST, "");
            };
            let topic = crate::share::state_records::SHARE_STATE_TOPIC;
            let partition_key = crate::share::state_records::coordinator_key(&share_key);
            match broker
                .replicas
                .topic(topic)
                .and_then(|_| found(topic, &partition_key))
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

/// A share-partition key as Kafka's `SharePartitionKey.getInstance` reads it: exactly three
/// `:`-separated parts (Java's `split`, which drops trailing empty parts), a group id that is
/// not blank (trimmed), a topic id in Kafka's base64 form and a 32-bit partition.
fn parse_share_key(key: &str) -> Option<ShareKey> {
    let mut parts: Vec<&str> = key.split(':').collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    let [group, topic_id, partition] = parts.as_slice() else {
        return None;
    };
    let group = group.trim();
    if group.is_empty() || topic_id.trim() != *topic_id {
        return None;
    }
    Some(ShareKey {
        group_id: group.to_string(),
        topic_id: crate::log::checkpoint::parse_kafka_uuid(topic_id).ok()?,
        partition: partition.parse().ok()?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC_ID: &str = "AAAAAAAAAAAAAAAAAAAAAg";

    #[test]
    fn a_share_partition_key_reads_as_kafka_reads_it() {
        let key = parse_share_key(&format!(" g1 :{TOPIC_ID}:+7")).expect("valid key");
        assert_eq!(key.group_id, "g1");
        assert_eq!(key.topic_id, uuid::Uuid::from_u128(2));
        assert_eq!(key.partition, 7);
        // The partition is picked from the key as Kafka prints it back.
        assert_eq!(
            crate::share::state_records::coordinator_key(&key),
            format!("g1:{TOPIC_ID}:7")
        );
        // Java's split drops trailing empty parts: a trailing ':' is still three parts.
        assert_eq!(
            parse_share_key(&format!("g:{TOPIC_ID}:3:")).map(|k| k.partition),
            Some(3)
        );
    }

    #[test]
    fn malformed_share_partition_keys_are_refused() {
        for bad in [
            String::new(),
            "g".to_string(),
            format!("g:{TOPIC_ID}"),
            format!("g:{TOPIC_ID}:1:extra"),
            format!("  :{TOPIC_ID}:1"),
            format!("g: {TOPIC_ID}:1"),
            "g:not-a-topic-id:1".to_string(),
            format!("g:{TOPIC_ID}:one"),
            format!("g:{TOPIC_ID}:2147483648"),
            format!("a:b:{TOPIC_ID}:1"),
        ] {
            assert!(parse_share_key(&bad).is_none(), "{bad:?} was accepted");
        }
    }
}
