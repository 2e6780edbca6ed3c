//! Transactional offset commits, Kafka's way (OffsetMetadataManager): TxnOffsetCommit validates
//! the group and member, then its offsets are written to the group's `__consumer_offsets`
//! partition as one transactional batch of the request's producer and held as *pending* offsets
//! of that transaction. The transaction coordinator's marker in that partition ends them:
//! Commit makes them committed offsets (each only if its record is newer than the committed
//! one), Abort drops them. Replay does the same with the batches and markers it finds.
//!
//! Part of the pure coordinator state machine: `now` is an argument, no I/O. The driver appends
//! a [`TxnWrite`] and only then calls [`Coordinator::apply_txn_write`].

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::classic::{ClassicGroup, GroupState};
use super::coordinator::Coordinator;
use super::pending::{PendingOffset, TxnKey};
use super::records::{self, CoordinatorRecord, OffsetValue, RecordKey};
use super::{codes, Effects};
use crate::record::ControlType;

/// The offsets a TxnOffsetCommit asks to write: one transactional batch of `producer_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnWrite {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// (topic, partition, offset) in request order.
    pub offsets: Vec<(String, i32, OffsetValue)>,
}

impl TxnWrite {
    /// The OffsetCommit records of the batch.
    pub fn records(&self) -> Vec<CoordinatorRecord> {
        self.offsets
            .iter()
            .map(|(topic, partition, value)| CoordinatorRecord {
                group_id: self.group_id.clone(),
                key: records::offset_key(&self.group_id, topic, *partition),
                value: Some(records::offset_value(value)),
            })
            .collect()
    }
}

/// Kafka's TxnOffsetCommit checks against a classic group (`ClassicGroup.validateOffsetCommit`
/// with `isTransactional`): unlike OffsetCommit, a request without member id and generation (the
/// only kind v0-2 can send) is accepted on a non-empty group, and CompletingRebalance is no error.
fn validate_classic(
    group: &ClassicGroup,
    member_id: &str,
    instance_id: Option<&str>,
    generation_id: i32,
) -> Result<(), i16> {
    if group.state == GroupState::Dead {
        return Err(codes::COORDINATOR_NOT_AVAILABLE);
    }
    if generation_id < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
        group.validate_member(member_id, instance_id)?;
        if generation_id != group.generation_id {
            return Err(codes::ILLEGAL_GENERATION);
        }
    }
    Ok(())
}

impl Coordinator {
    /// TxnOffsetCommit: the response, plus the offsets to append as one transactional batch when
    /// any partition passed. Nothing becomes pending until [`Coordinator::apply_txn_write`].
    /// Group-level failures answer every partition with the same code, as Kafka does.
    pub fn txn_offset_commit(
        &mut self,
        now: i64,
        req: &TxnOffsetCommitRequest,
    ) -> (TxnOffsetCommitResponse, Option<TxnWrite>) {
        let group_id = req.group_id.as_str();
        let group_error = self.validate_txn_commit(now, req).err();
        let producer_id: i64 = req.producer_id.into();
        let max_metadata = self.config.offset_metadata_max_bytes;
        let mut write = TxnWrite {
            group_id: group_id.to_string(),
            producer_id,
            producer_epoch: req.producer_epoch,
            offsets: Vec::new(),
        };
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in &req.topics {
            let topic = t.name.as_str();
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for p in &t.partitions {
                let metadata = p.committed_metadata.as_ref().map_or("", |m| m.as_str());
                let code = match group_error {
                    Some(code) => code,
                    None if metadata.len() > max_metadata => codes::OFFSET_METADATA_TOO_LARGE,
                    None => {
                        write.offsets.push((
                            topic.to_string(),
                            p.partition_index,
                            OffsetValue {
                                offset: p.committed_offset,
                                leader_epoch: p.committed_leader_epoch,
                                metadata: metadata.to_string(),
                                commit_timestamp: now,
                            },
                        ));
                        codes::NONE
                    }
                };
                partitions.push(
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code),
                );
            }
            topics.push(
                TxnOffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        let response = TxnOffsetCommitResponse::default().with_topics(topics);
        let write = (!write.offsets.is_empty()).then_some(write);
        (response, write)
    }

    fn validate_txn_commit(&mut self, now: i64, req: &TxnOffsetCommitRequest) -> Result<(), i16> {
        let group_id = req.group_id.as_str();
        if group_id.is_empty() {
            return Err(codes::INVALID_GROUP_ID);
        }
        if i64::from(req.producer_id) < 0 {
            // No producer: Kafka 4.1.2's transaction verification answers this code.
            return Err(codes::INVALID_PRODUCER_ID_MAPPING);
        }
        let generation = req.generation_id;
        let member_id = req.member_id.as_str();
        let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
        match (
            self.consumer_groups.get(group_id),
            self.groups.get(group_id),
        ) {
            (Some(g), _) => g.validate_txn_commit(member_id, generation),
            (None, Some(g)) => validate_classic(g, member_id, instance, generation),
            (None, None) if generation < 0 => {
                // A "simple" group: offsets without membership.
                self.groups
                    .insert(group_id.to_string(), ClassicGroup::new(group_id, now));
                Ok(())
            }
            // Kafka answers ILLEGAL_GENERATION (not GROUP_ID_NOT_FOUND) at every version.
            (None, None) => Err(codes::ILLEGAL_GENERATION),
        }
    }

    /// The batch of `write` is in `__consumer_offsets` partition `offsets_partition`: its offsets
    /// become pending offsets of that transaction (replacing its earlier ones for a partition).
    pub fn apply_txn_write(&mut self, offsets_partition: i32, write: TxnWrite) {
        let txn = (offsets_partition, write.producer_id);
        for (topic, partition, value) in write.offsets {
            let order = self.take_order();
            self.pending.put(
                txn,
                &write.group_id,
                &topic,
                partition,
                PendingOffset { value, order },
            );
        }
    }

    /// A transaction of `producer_id` ended with a marker in `__consumer_offsets` partition
    /// `offsets_partition`: its pending offsets there become committed offsets (Commit) or are
    /// dropped (Abort). A committed offset written after the pending one wins (Kafka keeps the
    /// record with the larger log offset). The marker itself is the durable record: nothing is
    /// written.
    pub fn complete_txn(
        &mut self,
        offsets_partition: i32,
        producer_id: i64,
        control: ControlType,
    ) -> Effects {
        let txn: TxnKey = (offsets_partition, producer_id);
        let Some(groups) = self.pending.take(txn) else {
            return Effects::default();
        };
        if control == ControlType::Commit {
            for (group, offsets) in groups {
                for ((topic, partition), pending) in offsets {
                    let key = (group.clone(), topic.clone(), partition);
                    let newer = self
                        .committed_order
                        .get(&key)
                        .is_none_or(|&committed| pending.order > committed);
                    if newer {
                        self.put_committed(&group, &topic, partition, pending.value, pending.order);
                    } else {
                        tracing::info!(
                            "group {group}: transactional offset of {topic}-{partition} from \
                             producer {producer_id} is older than the committed one; not applied"
                        );
                    }
                }
            }
        }
        Effects::default()
    }

    /// Replays one record of a transactional batch of `producer_id` in `__consumer_offsets`
    /// partition `offsets_partition` (startup load): offset commits become pending offsets of
    /// that transaction; anything else applies as in [`Coordinator::replay`].
    pub fn replay_transactional(
        &mut self,
        offsets_partition: i32,
        producer_id: i64,
        key: &[u8],
        value: Option<&[u8]>,
        now: i64,
    ) {
        let (
            Ok(RecordKey::Offset {
                group,
                topic,
                partition,
            }),
            Some(bytes),
        ) = (records::decode_key(key), value)
        else {
            return self.replay(key, value, now);
        };
        match records::decode_offset_value(bytes) {
            Ok(value) => {
                if !self.consumer_groups.contains_key(&group) {
                    self.groups
                        .entry(group.clone())
                        .or_insert_with(|| ClassicGroup::new(&group, now));
                }
                let order = self.take_order();
                self.pending.put(
                    (offsets_partition, producer_id),
                    &group,
                    &topic,
                    partition,
                    PendingOffset { value, order },
                );
            }
            Err(e) => tracing::warn!("transactional offset record of group {group}: {e}"),
        }
    }

    /// Replays a transaction marker of `producer_id` found in `__consumer_offsets` partition
    /// `offsets_partition` (startup load).
    pub fn replay_marker(
        &mut self,
        offsets_partition: i32,
        producer_id: i64,
        control: ControlType,
    ) {
        let _ = self.complete_txn(offsets_partition, producer_id, control);
    }
}
