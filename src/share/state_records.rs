//! The records of `__share_group_state`, in Kafka 4.1's share-coordinator schemas:
//! ShareSnapshotKey (type 0) / ShareUpdateKey (type 1), both `GroupId, TopicId, Partition`
//! (classic), and ShareSnapshotValue / ShareUpdateValue v0 (flexible; `StateBatches` of
//! `FirstOffset, LastOffset, DeliveryState, DeliveryCount`). A tombstone of both keys deletes a
//! share-partition's state. Golden bytes checked against kafka-share-coordinator 4.1.2's
//! generated classes. This module performs no I/O.

use bytes::BufMut;
use uuid::Uuid;

use super::persist::{PersisterStateBatch, ShareSnapshot, ShareUpdate};
use super::registry::ShareKey;
use crate::protocol::schema::{put_str, put_uvarint, Reader, SchemaError};

/// The internal topic of the share coordinator.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

const SNAPSHOT_TYPE: i16 = 0;
const UPDATE_TYPE: i16 = 1;

/// Which record a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateRecordType {
    Snapshot,
    Update,
}

/// The coordinator key of a share-partition (`SharePartitionKey.asCoordinatorKey`):
/// `groupId:topicId:partition` with the topic id in Kafka's base64 form. It picks the
/// `__share_group_state` partition (Java's string hash, as for the other internal topics).
pub fn coordinator_key(key: &ShareKey) -> String {
    format!(
        "{}:{}:{}",
        key.group_id,
        crate::log::checkpoint::uuid_to_kafka_string(key.topic_id),
        key.partition
    )
}

/// Why a state record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateRecordError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("unknown record type {0}")]
    UnknownType(i16),
    #[error("unknown value version {0}")]
    UnknownVersion(i16),
}

pub fn encode_key(kind: StateRecordType, key: &ShareKey) -> Vec<u8> {
    let mut k = Vec::with_capacity(26 + key.group_id.len());
    k.put_i16(match kind {
        StateRecordType::Snapshot => SNAPSHOT_TYPE,
        StateRecordType::Update => UPDATE_TYPE,
    });
    put_str(&mut k, &key.group_id);
    k.extend_from_slice(key.topic_id.as_bytes());
    k.put_i32(key.partition);
    k
}

pub fn decode_key(bytes: &[u8]) -> Result<(StateRecordType, ShareKey), StateRecordError> {
    let mut r = Reader::new(bytes);
    let kind = match r.i16()? {
        SNAPSHOT_TYPE => StateRecordType::Snapshot,
        UPDATE_TYPE => StateRecordType::Update,
        t => return Err(StateRecordError::UnknownType(t)),
    };
    let group_id = r.string_or_empty()?;
    let hi = r.i64()? as u64;
    let lo = r.i64()? as u64;
    let partition = r.i32()?;
    Ok((
        kind,
        ShareKey {
            group_id,
            topic_id: Uuid::from_u128((u128::from(hi) << 64) | u128::from(lo)),
            partition,
        },
    ))
}

fn put_batches(out: &mut Vec<u8>, batches: &[PersisterStateBatch]) {
    put_uvarint(out, batches.len() as u32 + 1);
    for b in batches {
        out.put_i64(b.first_offset);
        out.put_i64(b.last_offset);
        out.put_i8(b.delivery_state);
        out.put_i16(b.delivery_count);
        out.push(0);
    }
}

fn read_batches(r: &mut Reader<'_>) -> Result<Vec<PersisterStateBatch>, SchemaError> {
    let n = r.array_len()?.unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let b = PersisterStateBatch {
            first_offset: r.i64()?,
            last_offset: r.i64()?,
            delivery_state: r.i8()?,
            delivery_count: r.i16()?,
        };
        r.skip_tagged_fields()?;
        out.push(b);
    }
    Ok(out)
}

pub fn snapshot_value(s: &ShareSnapshot) -> Vec<u8> {
    let mut v = Vec::with_capacity(48 + 20 * s.state_batches.len());
    v.put_i16(0);
    v.put_i32(s.snapshot_epoch);
    v.put_i32(s.state_epoch);
    v.put_i32(s.leader_epoch);
    v.put_i64(s.start_offset);
    v.put_i64(s.create_timestamp_ms);
    v.put_i64(s.write_timestamp_ms);
    put_batches(&mut v, &s.state_batches);
    v.push(0);
    v
}

pub fn update_value(u: &ShareUpdate) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + 20 * u.state_batches.len());
    v.put_i16(0);
    v.put_i32(u.snapshot_epoch);
    v.put_i32(u.leader_epoch);
    v.put_i64(u.start_offset);
    put_batches(&mut v, &u.state_batches);
    v.push(0);
    v
}

fn value_reader(bytes: &[u8]) -> Result<Reader<'_>, StateRecordError> {
    let mut r = Reader::new(bytes);
    match r.i16()? {
        0 => {
            r.set_flexible(true);
            Ok(r)
        }
        v => Err(StateRecordError::UnknownVersion(v)),
    }
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<ShareSnapshot, StateRecordError> {
    let mut r = value_reader(bytes)?;
    let s = ShareSnapshot {
        snapshot_epoch: r.i32()?,
        state_epoch: r.i32()?,
        leader_epoch: r.i32()?,
        start_offset: r.i64()?,
        create_timestamp_ms: r.i64()?,
        write_timestamp_ms: r.i64()?,
        state_batches: read_batches(&mut r)?,
    };
    r.skip_tagged_fields()?;
    Ok(s)
}

pub fn decode_update(bytes: &[u8]) -> Result<ShareUpdate, StateRecordError> {
    let mut r = value_reader(bytes)?;
    let u = ShareUpdate {
        snapshot_epoch: r.i32()?,
        leader_epoch: r.i32()?,
        start_offset: r.i64()?,
        state_batches: read_batches(&mut r)?,
    };
    r.skip_tagged_fields()?;
    Ok(u)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPIC: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

    fn key() -> ShareKey {
        ShareKey {
            group_id: "g".into(),
            topic_id: TOPIC,
            partition: 3,
        }
    }

    fn batch() -> PersisterStateBatch {
        PersisterStateBatch {
            first_offset: 7,
            last_offset: 8,
            delivery_state: 2,
            delivery_count: 1,
        }
    }

    #[test]
    fn records_match_kafka_4_1_2s_bytes() {
        let mut want = vec![0, 0, 0, 1, b'g'];
        want.extend_from_slice(TOPIC.as_bytes());
        want.extend_from_slice(&[0, 0, 0, 3]);
        assert_eq!(encode_key(StateRecordType::Snapshot, &key()), want);
        want[1] = 1;
        assert_eq!(encode_key(StateRecordType::Update, &key()), want);
        let s = ShareSnapshot {
            snapshot_epoch: 1,
            state_epoch: 2,
            leader_epoch: 3,
            start_offset: 4,
            create_timestamp_ms: 5,
            write_timestamp_ms: 6,
            state_batches: vec![batch()],
        };
        let want: Vec<u8> = [
            &[0u8, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3][..],
            &4i64.to_be_bytes(),
            &5i64.to_be_bytes(),
            &6i64.to_be_bytes(),
            &[2],
            &7i64.to_be_bytes(),
            &8i64.to_be_bytes(),
            &[2, 0, 1, 0, 0],
        ]
        .concat();
        assert_eq!(snapshot_value(&s), want);
        assert_eq!(decode_snapshot(&want), Ok(s));
        let u = ShareUpdate {
            snapshot_epoch: 1,
            leader_epoch: 3,
            start_offset: 4,
            state_batches: vec![batch()],
        };
        let want: Vec<u8> = [
            &[0u8, 0, 0, 0, 0, 1, 0, 0, 0, 3][..],
            &4i64.to_be_bytes(),
            &[2],
            &7i64.to_be_bytes(),
            &8i64.to_be_bytes(),
            &[2, 0, 1, 0, 0],
        ]
        .concat();
        assert_eq!(update_value(&u), want);
        assert_eq!(decode_update(&want), Ok(u));
    }

    #[test]
    fn keys_round_trip_and_bad_bytes_are_errors() {
        let k = encode_key(StateRecordType::Update, &key());
        assert_eq!(decode_key(&k), Ok((StateRecordType::Update, key())));
        assert_eq!(
            decode_key(&[0, 9, 0, 0]),
            Err(StateRecordError::UnknownType(9))
        );
        assert!(decode_key(&k[..k.len() - 1]).is_err());
        let v = update_value(&ShareUpdate::default());
        assert!(decode_update(&v[..v.len() - 1]).is_err());
        assert_eq!(
            decode_snapshot(&[0, 1]),
            Err(StateRecordError::UnknownVersion(1))
        );
    }

    #[test]
    fn the_coordinator_key_uses_kafkas_topic_id_text() {
        let k = ShareKey {
            group_id: "g".into(),
            topic_id: Uuid::nil(),
            partition: 0,
        };
        assert_eq!(coordinator_key(&k), "g:AAAAAAAAAAAAAAAAAAAAAA:0");
    }
}
