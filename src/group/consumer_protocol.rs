//! The ConsumerProtocol embedded in JoinGroup/SyncGroup by the `consumer` protocol type: the
//! subscription a classic member sends and the assignment it receives, as a converted group
//! needs them (`migration.rs`). Each message is an `int16` version and the body at that version;
//! newer versions read as the newest known one, as Kafka's deserializer does.
//!
//! Pure functions; counts are bounded by the bytes present (`protocol::bounded`), so malformed
//! client metadata is refused without a large allocation.

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::Encodable;

use super::assignor::Assignment;
use super::classic::sb;
use super::codes;
use super::consumer::MetadataImage;

/// The highest ConsumerProtocol version this broker reads and writes (Kafka 4.1's).
const MAX_CONSUMER_PROTOCOL_VERSION: i16 = 3;

/// A decoded ConsumerProtocol subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub topics: BTreeSet<String>,
    pub owned: Assignment,
    pub rack_id: Option<String>,
}

pub(super) fn read_version(bytes: &[u8]) -> Option<i16> {
    let v = i16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]);
    (v >= 0).then_some(v)
}

/// Reads a ConsumerProtocol message: an `int16` version, then the body at that version (newer
/// versions read as the newest known, as Kafka's deserializer does). Counts are bounded by the
/// bytes present.
fn decode_versioned<T: kafka_protocol::protocol::Decodable>(bytes: &Bytes) -> Option<T> {
    let version = read_version(bytes)?.min(MAX_CONSUMER_PROTOCOL_VERSION);
    let mut body = bytes.slice(2..);
    crate::protocol::bounded::decode(&mut body, version, false).ok()
}

pub fn decode_subscription(bytes: &Bytes) -> Option<Subscription> {
    let s: ConsumerProtocolSubscription = decode_versioned(bytes)?;
    let mut owned = Assignment::new();
    for tp in &s.owned_partitions {
        owned
            .entry(tp.topic.as_str().to_string())
            .or_default()
            .extend(tp.partitions.iter().copied());
    }
    Some(Subscription {
        topics: s.topics.iter().map(|t| t.as_str().to_string()).collect(),
        owned,
        rack_id: s.rack_id.map(|r| r.as_str().to_string()),
    })
}

/// A classic member's assignment (empty bytes: nothing assigned); `Err(code)` when it cannot be
/// carried over (malformed, or user data of a custom assignor that would be lost).
pub(super) fn decode_assignment(bytes: &Bytes) -> Result<Assignment, i16> {
    if bytes.is_empty() {
        return Ok(Assignment::new());
    }
    let a: ConsumerProtocolAssignment = decode_versioned(bytes).ok_or(codes::GROUP_ID_NOT_FOUND)?;
    if a.user_data.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(codes::UNSUPPORTED_VERSION);
    }
    let mut out = Assignment::new();
    for tp in &a.assigned_partitions {
        out.entry(tp.topic.as_str().to_string())
            .or_default()
            .extend(tp.partitions.iter().copied());
    }
    Ok(out)
}

/// `assignment` in the ConsumerProtocol at `version` (capped at the newest known).
pub fn encode_assignment(assignment: &Assignment, version: i16) -> Bytes {
    let version = version.clamp(0, MAX_CONSUMER_PROTOCOL_VERSION);
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assignment
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| {
                AssignedTopic::default()
                    .with_topic(TopicName(sb(t)))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    // Encoding an in-memory message at a version it supports cannot fail; an empty body is
    // the fallback that keeps the member alive if it ever did.
    if let Err(e) = message.encode(&mut buf, version) {
        tracing::warn!("ConsumerProtocol assignment encode failed: {e}");
    }
    buf.freeze()
}

/// Keeps the partitions of topics that exist (Kafka drops unknown topic ids the same way).
pub(super) fn known(a: Assignment, image: &MetadataImage) -> Assignment {
    a.into_iter()
        .filter(|(t, ps)| image.contains_key(t) && !ps.is_empty())
        .collect()
}
