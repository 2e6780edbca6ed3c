//! The share coordinator's state (Kafka's `ShareCoordinatorShard`), as a pure state machine: per
//! share-partition key (group, topic id, partition) the folded `ShareSnapshot` and how many
//! ShareUpdate records followed the last ShareSnapshot.
//!
//! Every operation that changes state first returns the `StateRecord` to append to
//! `__share_group_state` and changes nothing; the caller appends it and then calls `apply` with
//! it (the same `apply` replays the log at load), so the state never runs ahead of the log.
//! Writes: a key without state gets a ShareSnapshot; after
//! `share.coordinator.snapshot.update.records.per.snapshot` updates the next write is a
//! ShareSnapshot of the folded state (snapshot epoch + 1), else a ShareUpdate. A write or an
//! initialization with an older state epoch is FENCED_STATE_EPOCH, a write with an older leader
//! epoch FENCED_LEADER_EPOCH. No I/O, no clock (`now_ms` is an argument); not thread-safe (the
//! broker keeps it behind a mutex).

use std::collections::HashMap;

use super::persist::{PersisterStateBatch, ShareSnapshot, ShareUpdate};
use super::registry::ShareKey;
use super::state_records::{self, StateRecordError, StateRecordType};

pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const FENCED_STATE_EPOCH: i16 = 124;
pub const INVALID_REQUEST: i16 = 42;

/// A record to append to `__share_group_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    Snapshot(ShareKey, ShareSnapshot),
    Update(ShareKey, ShareUpdate),
    /// Tombstones of both keys (DeleteShareGroupState).
    Delete(ShareKey),
}

impl StateRecord {
    pub fn key(&self) -> &ShareKey {
        match self {
            StateRecord::Snapshot(k, _) | StateRecord::Update(k, _) | StateRecord::Delete(k) => k,
        }
    }

    /// The (key, value) records, value `None` for a tombstone.
    pub fn encode(&self) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        match self {
            StateRecord::Snapshot(k, s) => vec![(
                state_records::encode_key(StateRecordType::Snapshot, k),
                Some(state_records::snapshot_value(s)),
            )],
            StateRecord::Update(k, u) => vec![(
                state_records::encode_key(StateRecordType::Update, k),
                Some(state_records::update_value(u)),
            )],
            StateRecord::Delete(k) => vec![
                (state_records::encode_key(StateRecordType::Update, k), None),
                (
                    state_records::encode_key(StateRecordType::Snapshot, k),
                    None,
                ),
            ],
        }
    }
}

/// A WriteShareGroupState of one share-partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteState {
    pub state_epoch: i32,
    /// -1: not checked.
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub state_batches: Vec<PersisterStateBatch>,
}

#[derive(Debug, Clone, Default)]
struct KeyState {
    /// The snapshot with every later update folded in.
    state: ShareSnapshot,
    updates_since_snapshot: u32,
}

/// The state of every share-partition key this coordinator holds.
#[derive(Debug, Default)]
pub struct ShareCoordinator {
    /// `share.coordinator.snapshot.update.records.per.snapshot`.
    updates_per_snapshot: u32,
    states: HashMap<ShareKey, KeyState>,
    /// Whether `__share_group_state` was replayed into it (the broker loads it on first use).
    pub loaded: bool,
    /// Per `__share_group_state` partition led here, the leader epoch at which its keys were
    /// last reloaded from its log (`share_state::ensure_fresh`): at another epoch the memory may
    /// miss what a previous leader wrote.
    pub loaded_epochs: HashMap<i32, i32>,
}

impl ShareCoordinator {
    pub fn new(updates_per_snapshot: u32) -> Self {
        ShareCoordinator {
            updates_per_snapshot,
            states: HashMap::new(),
            loaded: false,
            loaded_epochs: HashMap::new(),
        }
    }

    /// The current state of `key` (ReadShareGroupState), if any was written.
    pub fn read(&self, key: &ShareKey) -> Option<&ShareSnapshot> {
        self.states.get(key).map(|s| &s.state)
    }

    /// The keys of `group` with state.
    pub fn keys_of<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a ShareKey> + 'a {
        self.states.keys().filter(move |k| k.group_id == group)
    }

    /// WriteShareGroupState: the record to append, or the error code.
    pub fn write(&self, key: &ShareKey, w: &WriteState, now_ms: i64) -> Result<StateRecord, i16> {
        let Some(current) = self.states.get(key) else {
            let snapshot = ShareSnapshot {
                snapshot_epoch: 0,
                state_epoch: w.state_epoch,
                leader_epoch: w.leader_epoch,
                start_offset: w.start_offset,
                create_timestamp_ms: now_ms,
                write_timestamp_ms: now_ms,
                state_batches: Vec::new(),
            };
            let mut folded = snapshot.clone();
            folded.apply(&update_of(&snapshot, w), now_ms);
            return Ok(StateRecord::Snapshot(key.clone(), folded));
        };
        let s = &current.state;
        if w.leader_epoch != -1 && w.leader_epoch < s.leader_epoch {
            return Err(FENCED_LEADER_EPOCH);
        }
        if w.state_epoch != -1 && w.state_epoch < s.state_epoch {
            return Err(FENCED_STATE_EPOCH);
        }
        let update = update_of(s, w);
        // A ShareUpdate carries no state epoch: a newer one is written as a snapshot.
        if current.updates_since_snapshot >= self.updates_per_snapshot
            || w.state_epoch > s.state_epoch
        {
            let mut folded = s.clone();
            folded.apply(&update, now_ms);
            folded.snapshot_epoch = s.snapshot_epoch.saturating_add(1);
            folded.state_epoch = w.state_epoch.max(s.state_epoch);
            return Ok(StateRecord::Snapshot(key.clone(), folded));
        }
        Ok(StateRecord::Update(key.clone(), update))
    }

    /// ReadShareGroupState of a share-partition leader at `leader_epoch`: the state, and the
    /// record to append first when the epoch is newer than the stored one (Kafka's
    /// `readStateAndMaybeUpdateLeaderEpoch`). No state: INVALID_REQUEST; an older leader epoch
    /// (-1 included, as Kafka 4.1.2): FENCED_LEADER_EPOCH.
    pub fn read_as_leader(
        &self,
        key: &ShareKey,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<(ShareSnapshot, Option<StateRecord>), i16> {
        let Some(current) = self.states.get(key) else {
            return Err(INVALID_REQUEST);
        };
        let s = &current.state;
        if s.leader_epoch > leader_epoch {
            return Err(FENCED_LEADER_EPOCH);
        }
        if s.leader_epoch == leader_epoch {
            return Ok((s.clone(), None));
        }
        let epoch_only = WriteState {
            state_epoch: s.state_epoch,
            leader_epoch,
            start_offset: s.start_offset,
            state_batches: Vec::new(),
        };
        let record = self.write(key, &epoch_only, now_ms)?;
        let mut after = s.clone();
        after.leader_epoch = leader_epoch;
        Ok((after, Some(record)))
    }

    /// InitializeShareGroupState (and AlterShareGroupOffsets): a fresh snapshot at
    /// `start_offset` with `state_epoch`, nothing in flight, leader epoch 0 (Kafka's
    /// uninitialized epoch). An older state epoch than the stored one is fenced (-1 is not
    /// checked).
    pub fn initialize(
        &self,
        key: &ShareKey,
        state_epoch: i32,
        start_offset: i64,
        now_ms: i64,
    ) -> Result<StateRecord, i16> {
        let previous = self.states.get(key).map(|s| &s.state);
        if state_epoch != -1 && previous.is_some_and(|s| state_epoch < s.state_epoch) {
            return Err(FENCED_STATE_EPOCH);
        }
        Ok(StateRecord::Snapshot(
            key.clone(),
            ShareSnapshot {
                snapshot_epoch: previous.map_or(0, |s| s.snapshot_epoch.saturating_add(1)),
                state_epoch,
                leader_epoch: 0,
                start_offset,
                create_timestamp_ms: now_ms,
                write_timestamp_ms: now_ms,
                state_batches: Vec::new(),
            },
        ))
    }

    /// Forgets the state of every key `drop` selects (their partition's log is replayed next).
    pub fn forget(&mut self, mut drop: impl FnMut(&ShareKey) -> bool) {
        self.states.retain(|k, _| !drop(k));
    }

    /// DeleteShareGroupState: the tombstones, or `None` when `key` has no state.
    pub fn delete(&self, key: &ShareKey) -> Option<StateRecord> {
        self.states
            .contains_key(key)
            .then(|| StateRecord::Delete(key.clone()))
    }

    /// Applies a record once it is written (or replayed). An update of a key without a snapshot
    /// is ignored (its snapshot was deleted or never written).
    pub fn apply(&mut self, record: &StateRecord, now_ms: i64) {
        match record {
            StateRecord::Snapshot(k, s) => {
                self.states.insert(
                    k.clone(),
                    KeyState {
                        state: s.clone(),
                        updates_since_snapshot: 0,
                    },
                );
            }
            StateRecord::Update(k, u) => {
                if let Some(ks) = self.states.get_mut(k) {
                    ks.state.apply(u, now_ms);
                    ks.updates_since_snapshot = ks.updates_since_snapshot.saturating_add(1);
                }
            }
            StateRecord::Delete(k) => {
                self.states.remove(k);
            }
        }
    }

    /// Replays one record of `__share_group_state` (a tombstone of either key deletes the
    /// key's state).
    pub fn replay(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        now_ms: i64,
    ) -> Result<(), StateRecordError> {
        let (kind, k) = state_records::decode_key(key)?;
        let record = match (kind, value) {
            (_, None) => StateRecord::Delete(k),
            (StateRecordType::Snapshot, Some(v)) => {
                StateRecord::Snapshot(k, state_records::decode_snapshot(v)?)
            }
            (StateRecordType::Update, Some(v)) => {
                StateRecord::Update(k, state_records::decode_update(v)?)
            }
        };
        self.apply(&record, now_ms);
        Ok(())
    }
}

fn update_of(s: &ShareSnapshot, w: &WriteState) -> ShareUpdate {
    ShareUpdate {
        snapshot_epoch: s.snapshot_epoch,
        leader_epoch: if w.leader_epoch == -1 {
            s.leader_epoch
        } else {
            w.leader_epoch
        },
        start_offset: if w.start_offset == -1 {
            s.start_offset
        } else {
            w.start_offset
        },
        state_batches: w.state_batches.clone(),
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
