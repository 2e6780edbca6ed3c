//! The records the group coordinator keeps in `__consumer_offsets`, in Kafka's own key/value
//! schemas, so Kafka's tools can read our log and we can read theirs.
//!
//! Key: `i16 version` + body. Versions 0 and 1 are OffsetCommitKey (group, topic, partition),
//! version 2 is GroupMetadataKey (group), 10-15 the share-group records (`share_records`). Value: `i16 version` + body, or null (a tombstone).
//! We write OffsetCommitValue v3 (with leader epoch) and GroupMetadataValue v3 (with group instance
//! ids), the versions Kafka 4.x writes; we read versions 0-4 of both (v4 is flexible).
//! This module performs no I/O.

use bytes::{BufMut, Bytes};

use crate::protocol::schema::{put_bytes, put_nullable_str, put_str, Reader, SchemaError};

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// The `__consumer_offsets` partition that holds `group_id`: Kafka's
/// `Utils.abs(groupId.hashCode()) % partitions` with Java's `String.hashCode` over UTF-16 units.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One member inside a GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group's persisted state: the generation and its members with their assignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

/// A decoded record key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A share-group record (types 10-15, `share_records`).
    Share {
        group: String,
        key: super::share_records::ShareKey,
    },
}

/// A record to append: key bytes and value bytes (None = tombstone), plus the group it belongs to
/// (which picks the partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorRecord {
    pub group_id: String,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

pub fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + group.len() + topic.len());
    k.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_str(&mut k, group);
    put_str(&mut k, topic);
    k.put_i32(partition);
    k
}

pub fn group_key(group: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + group.len());
    k.put_i16(GROUP_METADATA_KEY_VERSION);
    put_str(&mut k, group);
    k
}

pub fn offset_value(v: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + v.metadata.len());
    out.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    out.put_i64(v.offset);
    out.put_i32(v.leader_epoch);
    put_str(&mut out, &v.metadata);
    out.put_i64(v.commit_timestamp);
    out
}

pub fn group_value(v: &GroupValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_str(&mut out, &v.protocol_type);
    out.put_i32(v.generation);
    put_nullable_str(&mut out, v.protocol.as_deref());
    put_nullable_str(&mut out, v.leader.as_deref());
    out.put_i64(v.current_state_timestamp);
    out.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.put_i32(m.rebalance_timeout_ms);
        out.put_i32(m.session_timeout_ms);
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out
}

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("unknown record key version {0}")]
    UnknownKeyVersion(i16),
    #[error("unknown record value version {0}")]
    UnknownValueVersion(i16),
}

pub fn decode_key(key: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = Reader::new(key);
    match r.i16()? {
        0 | 1 => Ok(RecordKey::Offset {
            group: r.string_or_empty()?,
            topic: r.string_or_empty()?,
            partition: r.i32()?,
        }),
        2 => Ok(RecordKey::Group {
            group: r.string_or_empty()?,
        }),
        v @ 10..=15 => {
            let (group, key) = super::share_records::decode_key(v, &mut r)?;
            Ok(RecordKey::Share { group, key })
        }
        v => Err(RecordError::UnknownKeyVersion(v)),
    }
}

pub fn decode_offset_value(value: &[u8]) -> Result<OffsetValue, RecordError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    r.set_flexible(version >= 4);
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string_or_empty()?;
    let commit_timestamp = r.i64()?;
    if version == 1 {
        r.i64()?; // expireTimestamp
    }
    r.skip_tagged_fields()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

pub fn decode_group_value(value: &[u8]) -> Result<GroupValue, RecordError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    r.set_flexible(version >= 4);
    let protocol_type = r.string_or_empty()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let n = r.array_len()?.unwrap_or(0);
    let mut members = Vec::with_capacity(n);
    for _ in 0..n {
        let member_id = r.string_or_empty()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string_or_empty()?;
        let client_host = r.string_or_empty()?;
        let session_or_rebalance = r.i32()?;
        let (rebalance_timeout_ms, session_timeout_ms) = if version >= 1 {
            (session_or_rebalance, r.i32()?)
        } else {
            (session_or_rebalance, session_or_rebalance)
        };
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tagged_fields()?;
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    r.skip_tagged_fields()?;
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

/// The topics of a consumer-protocol subscription (`ConsumerProtocolSubscription`, read with its v0
/// prefix, which every later version keeps). None when the bytes do not follow the schema.
pub fn subscription_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader::new(metadata);
    let version = r.i16().ok()?;
    if version < 0 {
        return None;
    }
    let n = r.array_len().ok()?.unwrap_or(0);
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.nullable_string().ok()??);
    }
    Some(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_follow_java_string_hash_code() {
        // "group".hashCode() = 98629247; 98629247 % 50 = 47.
        assert_eq!(partition_for("group", 50), 47);
        // "".hashCode() = 0.
        assert_eq!(partition_for("", 50), 0);
        // "polygenelubricants".hashCode() = Integer.MIN_VALUE -> Utils.abs gives 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A negative hash: "my-consumer-group-123" hashes below zero in Java.
        let h = "zzzzzzzzzz"
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        assert!(h < 0);
        assert_eq!(partition_for("zzzzzzzzzz", 50), h.abs() % 50);
    }

    #[test]
    fn offset_records_round_trip() {
        let k = offset_key("g", "orders", 3);
        assert_eq!(
            decode_key(&k).unwrap(),
            RecordKey::Offset {
                group: "g".into(),
                topic: "orders".into(),
                partition: 3
            }
        );
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp: 1_700_000_000_000,
        };
        let bytes = offset_value(&v);
        assert_eq!(&bytes[..2], &[0, 3]);
        assert_eq!(decode_offset_value(&bytes).unwrap(), v);
    }

    #[test]
    fn group_records_round_trip() {
        assert_eq!(
            decode_key(&group_key("grp")).unwrap(),
            RecordKey::Group {
                group: "grp".into()
            }
        );
        let v = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 99,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(decode_group_value(&group_value(&v)).unwrap(), v);
    }

    #[test]
    fn truncated_and_unknown_versions_are_errors() {
        let v = offset_value(&OffsetValue {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        });
        assert_eq!(
            decode_offset_value(&v[..v.len() - 1]),
            Err(SchemaError::Truncated.into())
        );
        assert_eq!(decode_key(&[0, 9]), Err(RecordError::UnknownKeyVersion(9)));
        assert_eq!(
            decode_group_value(&[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).unwrap_err(),
            RecordError::Schema(SchemaError::Truncated)
        );
    }

    #[test]
    fn consumer_subscription_topics_are_read_from_the_v0_prefix() {
        let mut m = Vec::new();
        m.put_i16(3);
        m.put_i32(2);
        put_str(&mut m, "a");
        put_str(&mut m, "b");
        m.put_i32(-1); // user data (ignored)
        assert_eq!(subscription_topics(&m), Some(vec!["a".into(), "b".into()]));
        assert_eq!(subscription_topics(b"\x00"), None);
    }
}
