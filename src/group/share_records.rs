//! The share-group records of `__consumer_offsets`, in Kafka 4.1's schemas (KIP-932, the
//! `ShareGroup*` coordinator records), and their replay into a `ShareGroupImage`.
//!
//! Keys are classic (`i16` record type, then the fields): 10 ShareGroupMemberMetadata (group,
//! member), 11 ShareGroupMetadata (group), 12 ShareGroupTargetAssignmentMetadata (group), 13
//! ShareGroupTargetAssignmentMember (group, member), 14 ShareGroupCurrentMemberAssignment (group,
//! member), 15 ShareGroupStatePartitionMetadata (group). Values are `i16` version 0 and a flexible
//! body. A share group's records are derived from its image (`image_records`) and a step writes
//! the difference between the images before and after it (`diff`): new or changed values, and
//! tombstones for keys gone. Replay folds records into a `ShareGroupLoad` per group; a group
//! exists after the load only if its ShareGroupMetadata record does. Golden bytes checked
//! against the generated classes of kafka-group-coordinator 4.1.2 (whose
//! ShareGroupStatePartitionMetadata has no CreateTimestamp yet). This module performs no I/O.

use std::collections::{BTreeMap, BTreeSet};

use bytes::BufMut;
use uuid::Uuid;

use super::records::{CoordinatorRecord, RecordError};
use crate::protocol::schema::{put_compact_str, put_str, put_uvarint, Reader, SchemaError};
use crate::share::assignor::Assignment;
use crate::share::group::{InitializedTopic, ShareGroupImage, ShareMember};

pub const MEMBER_METADATA: i16 = 10;
pub const GROUP_METADATA: i16 = 11;
pub const TARGET_METADATA: i16 = 12;
pub const TARGET_MEMBER: i16 = 13;
pub const CURRENT_ASSIGNMENT: i16 = 14;
pub const STATE_PARTITION_METADATA: i16 = 15;

/// Kafka's `MemberState.STABLE`: share members have no revocation, so always this.
const MEMBER_STATE_STABLE: i8 = 0;

/// Which share-group record a key names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShareKey {
    Member(String),
    Metadata,
    TargetMetadata,
    TargetMember(String),
    CurrentAssignment(String),
    StatePartitionMetadata,
}

impl ShareKey {
    fn record_type(&self) -> i16 {
        match self {
            ShareKey::Member(_) => MEMBER_METADATA,
            ShareKey::Metadata => GROUP_METADATA,
            ShareKey::TargetMetadata => TARGET_METADATA,
            ShareKey::TargetMember(_) => TARGET_MEMBER,
            ShareKey::CurrentAssignment(_) => CURRENT_ASSIGNMENT,
            ShareKey::StatePartitionMetadata => STATE_PARTITION_METADATA,
        }
    }

    fn member(&self) -> Option<&str> {
        match self {
            ShareKey::Member(m) | ShareKey::TargetMember(m) | ShareKey::CurrentAssignment(m) => {
                Some(m)
            }
            _ => None,
        }
    }

    /// Where Kafka writes it among a step's tombstones: a member's assignments, then its
    /// metadata, the group's metadata last (a group without it is gone).
    fn tombstone_rank(&self) -> u8 {
        match self {
            ShareKey::CurrentAssignment(_) => 0,
            ShareKey::TargetMember(_) => 1,
            ShareKey::TargetMetadata => 2,
            ShareKey::Member(_) => 3,
            ShareKey::StatePartitionMetadata => 4,
            ShareKey::Metadata => 5,
        }
    }

    /// Where Kafka writes it among a step's values (a member before the epoch that counts it,
    /// targets before the target epoch).
    fn write_rank(&self) -> u8 {
        match self {
            ShareKey::Member(_) => 0,
            ShareKey::Metadata => 1,
            ShareKey::TargetMember(_) => 2,
            ShareKey::TargetMetadata => 3,
            ShareKey::CurrentAssignment(_) => 4,
            ShareKey::StatePartitionMetadata => 5,
        }
    }
}

/// The key bytes of `key` in `group`.
pub fn encode_key(group: &str, key: &ShareKey) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + group.len());
    k.put_i16(key.record_type());
    put_str(&mut k, group);
    if let Some(m) = key.member() {
        put_str(&mut k, m);
    }
    k
}

/// Reads the rest of a share-group key whose record type is `record_type` (already read).
pub fn decode_key(record_type: i16, r: &mut Reader<'_>) -> Result<(String, ShareKey), RecordError> {
    let group = r.string_or_empty()?;
    let key = match record_type {
        MEMBER_METADATA => ShareKey::Member(r.string_or_empty()?),
        GROUP_METADATA => ShareKey::Metadata,
        TARGET_METADATA => ShareKey::TargetMetadata,
        TARGET_MEMBER => ShareKey::TargetMember(r.string_or_empty()?),
        CURRENT_ASSIGNMENT => ShareKey::CurrentAssignment(r.string_or_empty()?),
        STATE_PARTITION_METADATA => ShareKey::StatePartitionMetadata,
        v => return Err(RecordError::UnknownKeyVersion(v)),
    };
    Ok((group, key))
}

fn value_start() -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.put_i16(0);
    v
}

fn put_compact_len(out: &mut Vec<u8>, n: usize) {
    put_uvarint(out, n as u32 + 1);
}

fn put_uuid(out: &mut Vec<u8>, id: &Uuid) {
    out.extend_from_slice(id.as_bytes());
}

fn put_int32s(out: &mut Vec<u8>, ps: &BTreeSet<i32>) {
    put_compact_len(out, ps.len());
    for p in ps {
        out.put_i32(*p);
    }
}

/// `[]TopicPartitions { TopicId, Partitions }` (the assignment values' shape).
fn put_assignment(out: &mut Vec<u8>, a: &Assignment) {
    let topics: Vec<_> = a.iter().filter(|(_, ps)| !ps.is_empty()).collect();
    put_compact_len(out, topics.len());
    for (id, ps) in topics {
        put_uuid(out, id);
        put_int32s(out, ps);
        out.push(0); // tagged fields
    }
}

/// ShareGroupMemberMetadataValue v0.
pub fn member_value(m: &ShareMember) -> Vec<u8> {
    let mut v = value_start();
    match &m.rack_id {
        Some(r) => put_compact_str(&mut v, r),
        None => v.push(0),
    }
    put_compact_str(&mut v, &m.client_id);
    put_compact_str(&mut v, &m.client_host);
    put_compact_len(&mut v, m.subscribed_topic_names.len());
    for t in &m.subscribed_topic_names {
        put_compact_str(&mut v, t);
    }
    v.push(0);
    v
}

/// ShareGroupMetadataValue v0.
pub fn metadata_value(epoch: i32, metadata_hash: i64) -> Vec<u8> {
    let mut v = value_start();
    v.put_i32(epoch);
    v.put_i64(metadata_hash);
    v.push(0);
    v
}

/// ShareGroupTargetAssignmentMetadataValue v0.
pub fn target_metadata_value(assignment_epoch: i32) -> Vec<u8> {
    let mut v = value_start();
    v.put_i32(assignment_epoch);
    v.push(0);
    v
}

/// ShareGroupTargetAssignmentMemberValue v0.
pub fn target_member_value(a: &Assignment) -> Vec<u8> {
    let mut v = value_start();
    put_assignment(&mut v, a);
    v.push(0);
    v
}

/// ShareGroupCurrentMemberAssignmentValue v0 (state STABLE; the previous epoch is the current
/// one, as share members never wait for a revocation).
pub fn current_assignment_value(member_epoch: i32, a: &Assignment) -> Vec<u8> {
    let mut v = value_start();
    v.put_i32(member_epoch);
    v.put_i32(member_epoch);
    v.put_i8(MEMBER_STATE_STABLE);
    put_assignment(&mut v, a);
    v.push(0);
    v
}

/// ShareGroupStatePartitionMetadataValue v0: the used topics as `InitializedTopics`; nothing
/// initializing or deleting (those are steps of Kafka's persister hand-shake this broker does
/// not take).
pub fn state_partition_value(initialized: &BTreeMap<Uuid, InitializedTopic>) -> Vec<u8> {
    let mut v = value_start();
    put_compact_len(&mut v, 0); // InitializingTopics
    put_compact_len(&mut v, initialized.len());
    for (id, t) in initialized {
        put_uuid(&mut v, id);
        put_compact_str(&mut v, &t.topic_name);
        put_int32s(&mut v, &t.partitions);
        v.push(0);
    }
    put_compact_len(&mut v, 0); // DeletingTopics
    v.push(0);
    v
}

/// Every record of a share group's image, by key.
pub fn image_records(image: &ShareGroupImage) -> BTreeMap<ShareKey, Vec<u8>> {
    let mut out = BTreeMap::new();
    out.insert(
        ShareKey::Metadata,
        metadata_value(image.group_epoch, image.metadata_hash),
    );
    out.insert(
        ShareKey::TargetMetadata,
        target_metadata_value(image.assignment_epoch),
    );
    for m in &image.members {
        out.insert(ShareKey::Member(m.member_id.clone()), member_value(m));
        out.insert(
            ShareKey::CurrentAssignment(m.member_id.clone()),
            current_assignment_value(m.member_epoch, &m.assignment),
        );
    }
    for (member, a) in &image.target {
        out.insert(
            ShareKey::TargetMember(member.clone()),
            target_member_value(a),
        );
    }
    if !image.initialized.is_empty() {
        out.insert(
            ShareKey::StatePartitionMetadata,
            state_partition_value(&image.initialized),
        );
    }
    out
}

/// The records that turn `before` into `after` for `group` (`None`: the group does not exist):
/// tombstones first (members' records, then the group's, metadata last), then new or changed
/// values in Kafka's write order.
pub fn diff(
    group: &str,
    before: Option<&ShareGroupImage>,
    after: Option<&ShareGroupImage>,
) -> Vec<CoordinatorRecord> {
    let before = before.map(image_records).unwrap_or_default();
    let after = after.map(image_records).unwrap_or_default();
    let mut gone: Vec<&ShareKey> = before.keys().filter(|k| !after.contains_key(k)).collect();
    gone.sort_by_key(|k| k.tombstone_rank());
    let mut changed: Vec<(&ShareKey, &Vec<u8>)> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .collect();
    changed.sort_by_key(|(k, _)| k.write_rank());
    let record = |k: &ShareKey, value: Option<Vec<u8>>| CoordinatorRecord {
        group_id: group.to_string(),
        key: encode_key(group, k),
        value,
    };
    gone.into_iter()
        .map(|k| record(k, None))
        .chain(changed.into_iter().map(|(k, v)| record(k, Some(v.clone()))))
        .collect()
}

fn read_uuid(r: &mut Reader<'_>) -> Result<Uuid, SchemaError> {
    let hi = r.i64()? as u64;
    let lo = r.i64()? as u64;
    Ok(Uuid::from_u128((u128::from(hi) << 64) | u128::from(lo)))
}

fn read_int32s(r: &mut Reader<'_>) -> Result<BTreeSet<i32>, SchemaError> {
    let n = r.array_len()?.unwrap_or(0);
    (0..n).map(|_| r.i32()).collect()
}

fn read_assignment(r: &mut Reader<'_>) -> Result<Assignment, SchemaError> {
    let n = r.array_len()?.unwrap_or(0);
    let mut a = Assignment::new();
    for _ in 0..n {
        let id = read_uuid(r)?;
        let ps = read_int32s(r)?;
        r.skip_tagged_fields()?;
        a.entry(id).or_default().extend(ps);
    }
    Ok(a)
}

/// A flexible v0 value reader (later versions are refused: their fields are unknown here).
fn value_reader(value: &[u8]) -> Result<Reader<'_>, RecordError> {
    let mut r = Reader::new(value);
    match r.i16()? {
        0 => {
            r.set_flexible(true);
            Ok(r)
        }
        v => Err(RecordError::UnknownValueVersion(v)),
    }
}

/// A member's persisted parts, from its three records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct LoadedMember {
    metadata: Option<(Option<String>, String, String, BTreeSet<String>)>,
    current: Option<(i32, Assignment)>,
}

/// The records of one share group read so far at load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroupLoad {
    metadata: Option<(i32, i64)>,
    assignment_epoch: i32,
    members: BTreeMap<String, LoadedMember>,
    target: BTreeMap<String, Assignment>,
    initialized: BTreeMap<Uuid, InitializedTopic>,
}

impl ShareGroupLoad {
    /// Applies one record (`None` value: a tombstone). A later record of a key replaces an
    /// earlier one, as compaction would.
    pub fn apply(&mut self, key: ShareKey, value: Option<&[u8]>) -> Result<(), RecordError> {
        let Some(value) = value else {
            match key {
                ShareKey::Metadata => self.metadata = None,
                ShareKey::TargetMetadata => self.assignment_epoch = 0,
                ShareKey::Member(m) => {
                    if let Some(l) = self.members.get_mut(&m) {
                        l.metadata = None;
                    }
                }
                ShareKey::CurrentAssignment(m) => {
                    if let Some(l) = self.members.get_mut(&m) {
                        l.current = None;
                    }
                }
                ShareKey::TargetMember(m) => {
                    self.target.remove(&m);
                }
                ShareKey::StatePartitionMetadata => self.initialized.clear(),
            }
            self.members
                .retain(|_, l| l.metadata.is_some() || l.current.is_some());
            return Ok(());
        };
        let mut r = value_reader(value)?;
        match key {
            ShareKey::Metadata => self.metadata = Some((r.i32()?, r.i64()?)),
            ShareKey::TargetMetadata => self.assignment_epoch = r.i32()?,
            ShareKey::Member(m) => {
                let rack = r.nullable_string()?;
                let client_id = r.string_or_empty()?;
                let client_host = r.string_or_empty()?;
                let n = r.array_len()?.unwrap_or(0);
                let topics = (0..n)
                    .map(|_| r.string_or_empty())
                    .collect::<Result<_, _>>()?;
                self.members.entry(m).or_default().metadata =
                    Some((rack, client_id, client_host, topics));
            }
            ShareKey::CurrentAssignment(m) => {
                let epoch = r.i32()?;
                let _previous_epoch = r.i32()?;
                let _state = r.i8()?;
                let a = read_assignment(&mut r)?;
                self.members.entry(m).or_default().current = Some((epoch, a));
            }
            ShareKey::TargetMember(m) => {
                let a = read_assignment(&mut r)?;
                self.target.insert(m, a);
            }
            ShareKey::StatePartitionMetadata => {
                let initializing = r.array_len()?.unwrap_or(0);
                for _ in 0..initializing {
                    read_uuid(&mut r)?;
                    r.string_or_empty()?;
                    read_int32s(&mut r)?;
                    r.skip_tagged_fields()?;
                }
                let n = r.array_len()?.unwrap_or(0);
                let mut initialized = BTreeMap::new();
                for _ in 0..n {
                    let id = read_uuid(&mut r)?;
                    let topic_name = r.string_or_empty()?;
                    let partitions = read_int32s(&mut r)?;
                    r.skip_tagged_fields()?;
                    initialized.insert(
                        id,
                        InitializedTopic {
                            topic_name,
                            partitions,
                        },
                    );
                }
                self.initialized = initialized;
            }
        }
        Ok(())
    }

    /// The group the records describe; `None` without a ShareGroupMetadata record (deleted, or
    /// never fully written). A member needs its metadata record; one without a current
    /// assignment starts at epoch 0 with nothing.
    pub fn into_image(self) -> Option<ShareGroupImage> {
        let (group_epoch, metadata_hash) = self.metadata?;
        let members = self
            .members
            .into_iter()
            .filter_map(|(member_id, l)| {
                let (rack_id, client_id, client_host, subscribed_topic_names) = l.metadata?;
                let (member_epoch, assignment) = l.current.unwrap_or_default();
                Some(ShareMember {
                    member_id,
                    member_epoch,
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topic_names,
                    assignment,
                    session_deadline_ms: 0,
                })
            })
            .collect::<Vec<_>>();
        let ids: BTreeSet<&String> = members.iter().map(|m| &m.member_id).collect();
        let target = self
            .target
            .into_iter()
            .filter(|(m, _)| ids.contains(m))
            .collect();
        Some(ShareGroupImage {
            group_epoch,
            metadata_hash,
            assignment_epoch: self.assignment_epoch,
            members,
            target,
            initialized: self.initialized,
        })
    }
}

#[cfg(test)]
#[path = "share_records_tests.rs"]
mod tests;
