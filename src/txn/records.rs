//! The records the transaction coordinator keeps in `__transaction_state`, in Kafka's own schemas
//! (TransactionLogKey v0, TransactionLogValue v0/v1), so Kafka's DumpLogSegments
//! `--transaction-log-decoder` reads our log and we read Kafka's.
//!
//! Key: `i16 0` (the coordinator record type) + the transactional id as a classic string.
//! Value: `i16 version` + body, or null (a tombstone: the transactional id expired).
//! - v0: ProducerId i64, ProducerEpoch i16, TransactionTimeoutMs i32, TransactionStatus i8,
//!   TransactionPartitions (nullable array of {Topic string, PartitionIds [i32]}),
//!   TransactionLastUpdateTimestampMs i64, TransactionStartTimestampMs i64.
//! - v1: the same fields in the flexible encoding, plus tagged fields PreviousProducerId (tag 0),
//!   NextProducerId (1), ClientTransactionVersion (2) and NextProducerEpoch (3).
//!
//! We write v1 exactly as Kafka 4.1.2 does (its default once `transaction.version` >= 1): of the
//! tagged fields only ClientTransactionVersion, and only when it is not 0. We read v0 and v1 with
//! every tagged field. The fixtures in the tests are records Kafka 4.1.2 wrote.
//! This module performs no I/O.

use std::collections::BTreeSet;

use bytes::BufMut;

use crate::protocol::schema::{put_compact_str, put_str, put_uvarint, Reader, SchemaError};

/// The internal topic holding transaction metadata.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 1;

/// One transactional id's stored state (the fields of TransactionLogValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    /// Tagged (v1): the producer id before the last producer id change; -1 if none.
    pub previous_producer_id: i64,
    /// Tagged (v1): the producer id handed out next (Transactions V2 epoch overflow); -1 if none.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// Tagged (v1): the epoch belonging to `next_producer_id`; -1 if none.
    pub next_producer_epoch: i16,
    pub timeout_ms: i32,
    /// Kafka's TransactionState id (0 Empty ... 7 PrepareEpochFence).
    pub status: i8,
    /// The partitions of the transaction; always empty for Empty (stored as null then).
    pub partitions: BTreeSet<(String, i32)>,
    pub last_update_timestamp_ms: i64,
    pub start_timestamp_ms: i64,
    /// Tagged (v1): the transaction version the client used (0 for Transactions V1).
    pub client_transaction_version: i16,
}

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("unknown transaction log key version {0}")]
    UnknownKeyVersion(i16),
    #[error("unknown transaction log value version {0}")]
    UnknownValueVersion(i16),
    #[error("trailing bytes after the record")]
    Trailing,
}

/// The `__transaction_state` partition that holds `transactional_id` (Java's string hash, as
/// for groups).
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::group::records::partition_for(transactional_id, partitions)
}

pub fn key(transactional_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + transactional_id.len());
    k.put_i16(KEY_VERSION);
    put_str(&mut k, transactional_id);
    k
}

/// Partitions grouped by topic, in topic order.
fn by_topic(partitions: &BTreeSet<(String, i32)>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, p) in partitions {
        match out.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*p),
            _ => out.push((topic.as_str(), vec![*p])),
        }
    }
    out
}

/// TransactionLogValue v1 (flexible). An Empty transaction stores null partitions, as Kafka.
/// `previous_producer_id`, `next_producer_id` and `next_producer_epoch` are not written (Kafka
/// 4.1.2 does not write them either).
pub fn value(v: &TxnLogValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.put_i16(VALUE_VERSION);
    out.put_i64(v.producer_id);
    out.put_i16(v.producer_epoch);
    out.put_i32(v.timeout_ms);
    out.put_i8(v.status);
    if v.status == 0 {
        put_uvarint(&mut out, 0); // null
    } else {
        let topics = by_topic(&v.partitions);
        put_uvarint(&mut out, topics.len() as u32 + 1);
        for (topic, ps) in topics {
            put_compact_str(&mut out, topic);
            put_uvarint(&mut out, ps.len() as u32 + 1);
            for p in ps {
                out.put_i32(p);
            }
            put_uvarint(&mut out, 0); // tagged fields of PartitionsSchema
        }
    }
    out.put_i64(v.last_update_timestamp_ms);
    out.put_i64(v.start_timestamp_ms);
    // Kafka 4.1.2 sets only ClientTransactionVersion among the tagged fields.
    if v.client_transaction_version != 0 {
        put_uvarint(&mut out, 1);
        put_uvarint(&mut out, 2);
        put_uvarint(&mut out, 2);
        out.put_i16(v.client_transaction_version);
    } else {
        put_uvarint(&mut out, 0);
    }
    out
}

pub fn decode_key(key: &[u8]) -> Result<String, RecordError> {
    let mut r = Reader::new(key);
    match r.i16()? {
        KEY_VERSION => Ok(r.string()?),
        v => Err(RecordError::UnknownKeyVersion(v)),
    }
}

pub fn decode_value(value: &[u8]) -> Result<TxnLogValue, RecordError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(RecordError::UnknownValueVersion(version));
    }
    r.set_flexible(version >= 1);
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = r.array_len()? {
        for _ in 0..topics {
            let topic = r.string()?;
            let n = r.array_len()?.unwrap_or(0);
            for _ in 0..n {
                partitions.insert((topic.clone(), r.i32()?));
            }
            r.skip_tagged_fields()?;
        }
    }
    let last_update_timestamp_ms = r.i64()?;
    let start_timestamp_ms = r.i64()?;
    let mut v = TxnLogValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        next_producer_epoch: -1,
        timeout_ms,
        status,
        partitions,
        last_update_timestamp_ms,
        start_timestamp_ms,
        client_transaction_version: 0,
    };
    let fixed = |data: &[u8], n: usize| -> Result<[u8; 8], SchemaError> {
        if data.len() != n {
            return Err(SchemaError::Truncated);
        }
        let mut a = [0u8; 8];
        a[8 - n..].copy_from_slice(data);
        Ok(a)
    };
    r.tagged_fields(|tag, data| {
        match tag {
            0 => v.previous_producer_id = i64::from_be_bytes(fixed(data, 8)?),
            1 => v.next_producer_id = i64::from_be_bytes(fixed(data, 8)?),
            2 => v.client_transaction_version = i64::from_be_bytes(fixed(data, 2)?) as i16,
            3 => v.next_producer_epoch = i64::from_be_bytes(fixed(data, 2)?) as i16,
            _ => {}
        }
        Ok(())
    })?;
    if !r.is_empty() {
        return Err(RecordError::Trailing);
    }
    if v.status == 0 {
        v.partitions.clear();
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TxnLogValue {
        TxnLogValue {
            producer_id: 1000,
            previous_producer_id: -1,
            next_producer_id: -1,
            producer_epoch: 3,
            next_producer_epoch: -1,
            timeout_ms: 60_000,
            status: 1,
            partitions: BTreeSet::from([
                ("a".to_string(), 0),
                ("a".to_string(), 2),
                ("b".to_string(), 1),
            ]),
            last_update_timestamp_ms: 1_700_000_000_123,
            start_timestamp_ms: 1_700_000_000_000,
            client_transaction_version: 0,
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Key and values Kafka 4.1.2 wrote to `__transaction_state` for InitProducerId("kafka-tx",
    /// timeout 60000) and then AddPartitionsToTxn(orders 2, 0).
    const KAFKA_KEY: &str = "000000086b61666b612d7478";
    const KAFKA_EMPTY: &str =
        "0001000000000000000000000000ea600000000001a22913d7edffffffffffffffff00";
    const KAFKA_ONGOING: &str = "0001000000000000000000000000ea600102076f72646572730300000002\
                                 0000000000000001a22913d810000001a22913d81000";

    #[test]
    fn key_is_version_zero_and_a_classic_string() {
        assert_eq!(key("tx"), vec![0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&key("tx")).unwrap(), "tx");
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            Err(RecordError::UnknownKeyVersion(1))
        );
    }

    #[test]
    fn value_round_trips() {
        let v = sample();
        assert_eq!(decode_value(&value(&v)).unwrap(), v);
        let empty = TxnLogValue {
            status: 0,
            partitions: BTreeSet::new(),
            previous_producer_id: -1,
            start_timestamp_ms: -1,
            ..sample()
        };
        assert_eq!(decode_value(&value(&empty)).unwrap(), empty);
    }

    #[test]
    fn kafkas_records_decode_and_re_encode_byte_for_byte() {
        assert_eq!(key("kafka-tx"), hex(KAFKA_KEY));
        assert_eq!(decode_key(&hex(KAFKA_KEY)).unwrap(), "kafka-tx");

        let empty = decode_value(&hex(KAFKA_EMPTY)).unwrap();
        let t = 0x1a22913d7ed;
        assert_eq!(
            empty,
            TxnLogValue {
                producer_id: 0,
                previous_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: 0,
                next_producer_epoch: -1,
                timeout_ms: 60_000,
                status: 0,
                partitions: BTreeSet::new(),
                last_update_timestamp_ms: t,
                start_timestamp_ms: -1,
                client_transaction_version: 0,
            }
        );
        assert_eq!(value(&empty), hex(KAFKA_EMPTY));

        let ongoing = decode_value(&hex(KAFKA_ONGOING)).unwrap();
        assert_eq!(ongoing.status, 1);
        assert_eq!(
            ongoing.partitions,
            BTreeSet::from([("orders".to_string(), 0), ("orders".to_string(), 2)])
        );
        assert_eq!(ongoing.start_timestamp_ms, 0x1a22913d810);
        // Kafka wrote the partition ids in hash-set order (2, 0); we write them sorted.
        let ours = hex(&KAFKA_ONGOING.replace("0000000200000000", "0000000000000002"));
        assert_eq!(value(&ongoing), ours);
    }

    /// Field order of TransactionLogValue v1 with a non-default tagged field.
    #[test]
    fn value_bytes_follow_kafkas_schema() {
        let v = TxnLogValue {
            client_transaction_version: 2,
            ..sample()
        };
        let mut want: Vec<u8> = vec![0, 1]; // version 1
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.push(3); // 2 topics + 1
        want.extend_from_slice(&[2, b'a', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
        want.extend_from_slice(&[2, b'b', 2, 0, 0, 0, 1, 0]);
        want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        want.extend_from_slice(&[1, 2, 2, 0, 2]); // tag 2 (ClientTransactionVersion), 2 bytes
        assert_eq!(value(&v), want);
        assert_eq!(decode_value(&want).unwrap(), v);
    }

    #[test]
    fn every_tagged_field_is_read() {
        let mut bytes = value(&sample());
        bytes.pop(); // no tagged fields
        bytes.extend_from_slice(&[4, 0, 8]);
        bytes.extend_from_slice(&999i64.to_be_bytes());
        bytes.extend_from_slice(&[1, 8]);
        bytes.extend_from_slice(&1001i64.to_be_bytes());
        bytes.extend_from_slice(&[2, 2, 0, 2, 3, 2, 0, 5]);
        let v = decode_value(&bytes).unwrap();
        assert_eq!(
            (
                v.previous_producer_id,
                v.next_producer_id,
                v.client_transaction_version,
                v.next_producer_epoch
            ),
            (999, 1001, 2, 5)
        );
    }

    #[test]
    fn version_zero_values_are_read() {
        let mut v0: Vec<u8> = vec![0, 0];
        v0.extend_from_slice(&7i64.to_be_bytes());
        v0.extend_from_slice(&1i16.to_be_bytes());
        v0.extend_from_slice(&1000i32.to_be_bytes());
        v0.push(2); // PrepareCommit
        v0.extend_from_slice(&1i32.to_be_bytes());
        v0.extend_from_slice(&[0, 1, b't']);
        v0.extend_from_slice(&2i32.to_be_bytes());
        v0.extend_from_slice(&4i32.to_be_bytes());
        v0.extend_from_slice(&5i32.to_be_bytes());
        v0.extend_from_slice(&20i64.to_be_bytes());
        v0.extend_from_slice(&10i64.to_be_bytes());
        let v = decode_value(&v0).unwrap();
        assert_eq!(v.producer_id, 7);
        assert_eq!(v.producer_epoch, 1);
        assert_eq!(v.status, 2);
        assert_eq!(
            v.partitions,
            BTreeSet::from([("t".to_string(), 4), ("t".to_string(), 5)])
        );
        assert_eq!((v.last_update_timestamp_ms, v.start_timestamp_ms), (20, 10));
        assert_eq!(v.previous_producer_id, -1);
    }

    #[test]
    fn corrupt_values_are_errors() {
        let bytes = value(&sample());
        assert_eq!(
            decode_value(&bytes[..bytes.len() - 1]),
            Err(SchemaError::Truncated.into())
        );
        assert_eq!(
            decode_value(&[0, 9]),
            Err(RecordError::UnknownValueVersion(9))
        );
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode_value(&long), Err(RecordError::Trailing));
    }

    #[test]
    fn partition_uses_java_hash() {
        // "group".hashCode() % 50 = 47, the same rule as __consumer_offsets.
        assert_eq!(partition_for("group", 50), 47);
    }
}
