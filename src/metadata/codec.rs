//! Metadata records to bytes and back, in Kafka's own metadata record format (what
//! `MetadataRecordSerde` writes into a KRaft `__cluster_metadata` batch): an unsigned-varint frame
//! version (1), an unsigned-varint record type id (the JSON spec's `apiKey`), an unsigned-varint
//! record version, then the record's body in the flexible encoding (compact strings and arrays,
//! tagged fields) of `metadata/src/main/resources/common/metadata/*.json`.
//!
//! We write the newest version whose fields we carry (RegisterBroker v3, BrokerRegistrationChange
//! v1, PartitionRecord / PartitionChangeRecord v2 when they carry KIP-966 ELR fields, else v0, the
//! rest v0; fields Sluice does not model keep Kafka's default: no log dirs (unassigned),
//! `LeaderRecoveryState` RECOVERED) and read every version Kafka 4.1 writes of these types,
//! skipping fields we do not model. Decoding never panics and never allocates more than the input
//! can hold: every failure is a [`DecodeError`].

use bytes::BufMut;
use uuid::Uuid;

use crate::protocol::schema::{put_compact_str, put_uvarint, Reader, SchemaError};

use super::quotas::{ClientQuotaRecord, QuotaValue};
use super::records::{
    BrokerEndpoint, ConfigResourceType, MetadataRecord, PartitionChange, PartitionRecord,
    RegisterBroker, NO_LEADER_CHANGE,
};

/// Kafka's `DirectoryId.UNASSIGNED`: a replica's log directory not known to the controller.
const DIRECTORY_UNASSIGNED: Uuid = Uuid::nil();

/// The only frame version Kafka defines.
const FRAME_VERSION: u32 = 1;

/// Why bytes are not a metadata record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("metadata record: {0}")]
    Schema(#[from] SchemaError),
    #[error("metadata record: unknown frame version {0}")]
    FrameVersion(u32),
    #[error("metadata record: unsupported record type {0}")]
    RecordType(u32),
    #[error("metadata record: type {record_type} has no version {version}")]
    Version { record_type: u32, version: u32 },
    #[error("metadata record: {0}")]
    Invalid(&'static str),
    #[error("metadata record: bytes after the record")]
    TrailingBytes,
}

/// Kafka's record type id (`apiKey`) of a record.
pub fn record_type(record: &MetadataRecord) -> u32 {
    match record {
        MetadataRecord::RegisterBroker(_) => 0,
        MetadataRecord::UnregisterBroker { .. } => 1,
        MetadataRecord::Topic { .. } => 2,
        MetadataRecord::Partition(_) => 3,
        MetadataRecord::Config { .. } => 4,
        MetadataRecord::PartitionChange(_) => 5,
        MetadataRecord::FenceBroker { .. } => 7,
        MetadataRecord::UnfenceBroker { .. } => 8,
        MetadataRecord::RemoveTopic { .. } => 9,
        MetadataRecord::FeatureLevel { .. } => 12,
        MetadataRecord::ClientQuota(_) => 14,
        MetadataRecord::ProducerIds { .. } => 15,
        MetadataRecord::BrokerRegistrationChange { .. } => 17,
    }
}

/// Encodes one record (frame, type, version, body).
pub fn encode(record: &MetadataRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_uvarint(&mut out, FRAME_VERSION);
    put_uvarint(&mut out, record_type(record));
    match record {
        MetadataRecord::RegisterBroker(r) => {
            put_uvarint(&mut out, 3);
            out.put_i32(r.broker_id);
            out.put_i8(0); // IsMigratingZkBroker (v2+)
            put_uuid(&mut out, r.incarnation_id);
            out.put_i64(r.broker_epoch);
            put_uvarint(&mut out, r.endpoints.len() as u32 + 1);
            for e in &r.endpoints {
                put_compact_str(&mut out, &e.name);
                put_compact_str(&mut out, &e.host);
                out.put_u16(e.port);
                out.put_i16(e.security_protocol);
                put_uvarint(&mut out, 0);
            }
            put_uvarint(&mut out, r.features.len() as u32 + 1);
            for (name, min, max) in &r.features {
                put_compact_str(&mut out, name);
                out.put_i16(*min);
                out.put_i16(*max);
                put_uvarint(&mut out, 0);
            }
            put_compact_nullable_str(&mut out, r.rack.as_deref());
            out.put_i8(i8::from(r.fenced));
            out.put_i8(i8::from(r.in_controlled_shutdown));
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::UnregisterBroker {
            broker_id,
            broker_epoch,
        } => {
            put_uvarint(&mut out, 0);
            out.put_i32(*broker_id);
            out.put_i64(*broker_epoch);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::Topic { name, topic_id } => {
            put_uvarint(&mut out, 0);
            put_compact_str(&mut out, name);
            put_uuid(&mut out, *topic_id);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::Partition(p) => {
            // v2 (with Directories, all unassigned) only when there are ELR fields to carry.
            let v2 = !p.elr.is_empty() || !p.last_known_elr.is_empty();
            put_uvarint(&mut out, if v2 { 2 } else { 0 });
            out.put_i32(p.partition_id);
            put_uuid(&mut out, p.topic_id);
            put_i32_array(&mut out, &p.replicas);
            put_i32_array(&mut out, &p.isr);
            put_i32_array(&mut out, &p.removing_replicas);
            put_i32_array(&mut out, &p.adding_replicas);
            out.put_i32(p.leader);
            out.put_i32(p.leader_epoch);
            out.put_i32(p.partition_epoch);
            if v2 {
                put_uvarint(&mut out, p.replicas.len() as u32 + 1);
                for _ in &p.replicas {
                    put_uuid(&mut out, DIRECTORY_UNASSIGNED);
                }
                let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
                for (tag, field) in [(1, &p.elr), (2, &p.last_known_elr)] {
                    if !field.is_empty() {
                        let mut b = Vec::new();
                        put_i32_array(&mut b, field);
                        tags.push((tag, b));
                    }
                }
                put_tagged_fields(&mut out, &tags);
            } else {
                put_uvarint(&mut out, 0);
            }
        }
        MetadataRecord::Config {
            resource_type,
            resource_name,
            name,
            value,
        } => {
            put_uvarint(&mut out, 0);
            out.put_i8(resource_type.id());
            put_compact_str(&mut out, resource_name);
            put_compact_str(&mut out, name);
            put_compact_nullable_str(&mut out, value.as_deref());
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::PartitionChange(c) => {
            // v2 only when the ELR fields (tags 6 and 7, v2+) change.
            let v2 = c.elr.is_some() || c.last_known_elr.is_some();
            put_uvarint(&mut out, if v2 { 2 } else { 0 });
            out.put_i32(c.partition_id);
            put_uuid(&mut out, c.topic_id);
            let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
            let list = |v: &Option<Vec<i32>>| {
                v.as_ref().map(|v| {
                    let mut b = Vec::new();
                    put_i32_array(&mut b, v);
                    b
                })
            };
            if let Some(b) = list(&c.isr) {
                tags.push((0, b));
            }
            if c.leader != NO_LEADER_CHANGE {
                tags.push((1, c.leader.to_be_bytes().to_vec()));
            }
            for (tag, field) in [
                (2, &c.replicas),
                (3, &c.removing_replicas),
                (4, &c.adding_replicas),
                (6, &c.elr),
                (7, &c.last_known_elr),
            ] {
                if let Some(b) = list(field) {
                    tags.push((tag, b));
                }
            }
            put_tagged_fields(&mut out, &tags);
        }
        MetadataRecord::FenceBroker { id, epoch } | MetadataRecord::UnfenceBroker { id, epoch } => {
            put_uvarint(&mut out, 0);
            out.put_i32(*id);
            out.put_i64(*epoch);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::RemoveTopic { topic_id } => {
            put_uvarint(&mut out, 0);
            put_uuid(&mut out, *topic_id);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::FeatureLevel {
            name,
            feature_level,
        } => {
            put_uvarint(&mut out, 0);
            put_compact_str(&mut out, name);
            out.put_i16(*feature_level);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::ProducerIds {
            broker_id,
            broker_epoch,
            next_producer_id,
        } => {
            put_uvarint(&mut out, 0);
            out.put_i32(*broker_id);
            out.put_i64(*broker_epoch);
            out.put_i64(*next_producer_id);
            put_uvarint(&mut out, 0);
        }
        MetadataRecord::BrokerRegistrationChange {
            broker_id,
            broker_epoch,
            fenced,
            in_controlled_shutdown,
        } => {
            put_uvarint(&mut out, 1);
            out.put_i32(*broker_id);
            out.put_i64(*broker_epoch);
            let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
            // Kafka's encoding: Fenced -1 unfenced / 0 unchanged / 1 fenced; InControlledShutdown
            // 0 unchanged / 1 entering (Kafka has no "leaving": re-registration clears it).
            match fenced {
                Some(true) => tags.push((0, vec![1])),
                Some(false) => tags.push((0, vec![0xff])),
                None => {}
            }
            if *in_controlled_shutdown == Some(true) {
                tags.push((1, vec![1]));
            }
            put_tagged_fields(&mut out, &tags);
        }
        MetadataRecord::ClientQuota(q) => {
            put_uvarint(&mut out, 0);
            put_uvarint(&mut out, q.entity.len() as u32 + 1);
            for (entity_type, entity_name) in &q.entity {
                put_compact_str(&mut out, entity_type);
                put_compact_nullable_str(&mut out, entity_name.as_deref());
                put_uvarint(&mut out, 0);
            }
            put_compact_str(&mut out, &q.key);
            // Kafka writes the value even when removing (its default, 0.0).
            let value = if q.remove { 0.0 } else { q.value.0 };
            out.put_f64(value);
            out.put_i8(i8::from(q.remove));
            put_uvarint(&mut out, 0);
        }
    }
    out
}

/// Decodes one record; the whole buffer must be the record.
pub fn decode(bytes: &[u8]) -> Result<MetadataRecord, DecodeError> {
    let mut r = Reader::new(bytes);
    let frame = r.uvarint()?;
    if frame != FRAME_VERSION {
        return Err(DecodeError::FrameVersion(frame));
    }
    let record_type = r.uvarint()?;
    let version = r.uvarint()?;
    r.set_flexible(true);
    let max_version = match record_type {
        0 => 3,
        3 | 5 | 17 => 2,
        1 | 2 | 4 | 7 | 8 | 9 | 12 | 14 | 15 => 0,
        other => return Err(DecodeError::RecordType(other)),
    };
    if version > max_version {
        return Err(DecodeError::Version {
            record_type,
            version,
        });
    }
    let record = match record_type {
        0 => decode_register_broker(&mut r, version)?,
        1 => {
            let broker_id = r.i32()?;
            let broker_epoch = r.i64()?;
            r.skip_tagged_fields()?;
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            }
        }
        2 => {
            let name = r.string()?;
            let topic_id = uuid(&mut r)?;
            r.skip_tagged_fields()?;
            MetadataRecord::Topic { name, topic_id }
        }
        3 => decode_partition(&mut r, version)?,
        4 => {
            let resource_type = match r.i8()? {
                2 => ConfigResourceType::Topic,
                4 => ConfigResourceType::Broker,
                32 => ConfigResourceType::Group,
                _ => return Err(DecodeError::Invalid("unsupported config resource type")),
            };
            let resource_name = r.string()?;
            let name = r.string()?;
            let value = r.nullable_string()?;
            r.skip_tagged_fields()?;
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            }
        }
        5 => decode_partition_change(&mut r)?,
        7 | 8 => {
            let id = r.i32()?;
            let epoch = r.i64()?;
            r.skip_tagged_fields()?;
            if record_type == 7 {
                MetadataRecord::FenceBroker { id, epoch }
            } else {
                MetadataRecord::UnfenceBroker { id, epoch }
            }
        }
        9 => {
            let topic_id = uuid(&mut r)?;
            r.skip_tagged_fields()?;
            MetadataRecord::RemoveTopic { topic_id }
        }
        12 => {
            let name = r.string()?;
            let feature_level = r.i16()?;
            r.skip_tagged_fields()?;
            MetadataRecord::FeatureLevel {
                name,
                feature_level,
            }
        }
        14 => decode_client_quota(&mut r)?,
        15 => {
            let broker_id = r.i32()?;
            let broker_epoch = r.i64()?;
            let next_producer_id = r.i64()?;
            r.skip_tagged_fields()?;
            MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id,
            }
        }
        _ => decode_broker_registration_change(&mut r)?,
    };
    if !r.is_empty() {
        return Err(DecodeError::TrailingBytes);
    }
    Ok(record)
}

fn decode_register_broker(r: &mut Reader<'_>, version: u32) -> Result<MetadataRecord, DecodeError> {
    let broker_id = r.i32()?;
    if version >= 2 {
        r.i8()?; // IsMigratingZkBroker: ZooKeeper migration is gone in Kafka 4.
    }
    let incarnation_id = uuid(r)?;
    let broker_epoch = r.i64()?;
    let n = r.array_len()?.unwrap_or(0);
    let mut endpoints = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let host = r.string()?;
        let port = r.i16()? as u16;
        let security_protocol = r.i16()?;
        r.skip_tagged_fields()?;
        endpoints.push(BrokerEndpoint {
            name,
            host,
            port,
            security_protocol,
        });
    }
    let n = r.array_len()?.unwrap_or(0);
    let mut features = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let min = r.i16()?;
        let max = r.i16()?;
        r.skip_tagged_fields()?;
        features.push((name, min, max));
    }
    let rack = r.nullable_string()?;
    let fenced = r.i8()? != 0;
    let in_controlled_shutdown = if version >= 1 { r.i8()? != 0 } else { false };
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::RegisterBroker(RegisterBroker {
        broker_id,
        incarnation_id,
        broker_epoch,
        endpoints,
        features,
        rack,
        fenced,
        in_controlled_shutdown,
    }))
}

fn decode_partition(r: &mut Reader<'_>, version: u32) -> Result<MetadataRecord, DecodeError> {
    let partition_id = r.i32()?;
    let topic_id = uuid(r)?;
    let replicas = i32_array(r)?.unwrap_or_default();
    let isr = i32_array(r)?.unwrap_or_default();
    let removing_replicas = i32_array(r)?.unwrap_or_default();
    let adding_replicas = i32_array(r)?.unwrap_or_default();
    let leader = r.i32()?;
    let leader_epoch = r.i32()?;
    let partition_epoch = r.i32()?;
    if version >= 1 {
        // Directories (KIP-858): one uuid per replica; Sluice has one log dir per broker.
        let n = r.array_len()?.unwrap_or(0);
        for _ in 0..n {
            uuid(r)?;
        }
    }
    let (mut elr, mut last_known_elr) = (Vec::new(), Vec::new());
    r.tagged_fields(|tag, data| {
        let mut field = Reader::new(data);
        field.set_flexible(true);
        match tag {
            // 0 LeaderRecoveryState: not modelled; 1/2 are v2+ fields.
            1 if version >= 2 => elr = i32_array(&mut field)?.unwrap_or_default(),
            2 if version >= 2 => last_known_elr = i32_array(&mut field)?.unwrap_or_default(),
            _ => {}
        }
        Ok(())
    })?;
    Ok(MetadataRecord::Partition(PartitionRecord {
        partition_id,
        topic_id,
        replicas,
        isr,
        removing_replicas,
        adding_replicas,
        leader,
        leader_epoch,
        partition_epoch,
        elr,
        last_known_elr,
    }))
}

fn decode_partition_change(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let partition_id = r.i32()?;
    let topic_id = uuid(r)?;
    let mut change = PartitionChange::none(topic_id, partition_id);
    r.tagged_fields(|tag, data| {
        let mut field = Reader::new(data);
        field.set_flexible(true);
        match tag {
            0 => change.isr = i32_array(&mut field)?,
            1 => change.leader = field.i32()?,
            2 => change.replicas = i32_array(&mut field)?,
            3 => change.removing_replicas = i32_array(&mut field)?,
            4 => change.adding_replicas = i32_array(&mut field)?,
            6 => change.elr = i32_array(&mut field)?,
            7 => change.last_known_elr = i32_array(&mut field)?,
            // 5 LeaderRecoveryState, 8 Directories: not modelled.
            _ => {}
        }
        Ok(())
    })?;
    Ok(MetadataRecord::PartitionChange(change))
}

fn decode_broker_registration_change(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    let mut fenced = None;
    let mut in_controlled_shutdown = None;
    let mut invalid = false;
    r.tagged_fields(|tag, data| {
        let mut field = Reader::new(data);
        match tag {
            0 => {
                fenced = match field.i8()? {
                    1 => Some(true),
                    -1 => Some(false),
                    0 => None,
                    _ => {
                        invalid = true;
                        None
                    }
                }
            }
            1 => in_controlled_shutdown = (field.i8()? == 1).then_some(true),
            _ => {}
        }
        Ok(())
    })?;
    if invalid {
        return Err(DecodeError::Invalid("BrokerRegistrationChange fenced"));
    }
    Ok(MetadataRecord::BrokerRegistrationChange {
        broker_id,
        broker_epoch,
        fenced,
        in_controlled_shutdown,
    })
}

fn decode_client_quota(r: &mut Reader<'_>) -> Result<MetadataRecord, DecodeError> {
    let n = r.array_len()?.unwrap_or(0);
    let mut entity = Vec::with_capacity(n);
    for _ in 0..n {
        let entity_type = r.string()?;
        let entity_name = r.nullable_string()?;
        r.skip_tagged_fields()?;
        entity.push((entity_type, entity_name));
    }
    let key = r.string()?;
    let value = QuotaValue(f64::from_bits(r.i64()? as u64));
    let remove = r.i8()? != 0; // Kafka reads any non-zero byte as true
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity,
        key,
        value: if remove { QuotaValue(0.0) } else { value },
        remove,
    }))
}

fn put_uuid(out: &mut Vec<u8>, id: Uuid) {
    out.extend_from_slice(id.as_bytes());
}

fn uuid(r: &mut Reader<'_>) -> Result<Uuid, SchemaError> {
    let hi = r.i64()? as u64;
    let lo = r.i64()? as u64;
    Ok(Uuid::from_u64_pair(hi, lo))
}

fn put_compact_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(out, s),
        None => put_uvarint(out, 0),
    }
}

fn put_i32_array(out: &mut Vec<u8>, v: &[i32]) {
    put_uvarint(out, v.len() as u32 + 1);
    for x in v {
        out.put_i32(*x);
    }
}

/// A compact (nullable) array of int32; the count is bounded by the bytes left.
fn i32_array(r: &mut Reader<'_>) -> Result<Option<Vec<i32>>, SchemaError> {
    let Some(n) = r.array_len()? else {
        return Ok(None);
    };
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(r.i32()?);
    }
    Ok(Some(v))
}

fn put_tagged_fields(out: &mut Vec<u8>, tags: &[(u32, Vec<u8>)]) {
    put_uvarint(out, tags.len() as u32);
    for (tag, data) in tags {
        put_uvarint(out, *tag);
        put_uvarint(out, data.len() as u32);
        out.extend_from_slice(data);
    }
}

#[cfg(test)]
mod tests;
