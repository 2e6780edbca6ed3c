//! The share-partition state as Kafka's share coordinator persists it in `__share_group_state`:
//! the contents of `ShareSnapshotValue` (the whole state) and `ShareUpdateValue` (a delta), as data.
//!
//! Encoding the records is the next slice's job; this module fixes what they carry and how a
//! delta folds into a snapshot (`ShareSnapshot::apply`), the rule the coordinator uses to compact
//! updates into the next snapshot. Invariant kept by `apply`: the batches are sorted, do not
//! overlap, lie at or after `start_offset`, and adjacent batches with equal state and delivery
//! count are merged. Pure: no I/O.

use super::partition::RecordState;

/// One persisted range of records with one delivery state (Kafka's `PersisterStateBatch`, the
/// `StateBatches` entries of ShareSnapshot/ShareUpdate and of Read/WriteShareGroupState).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersisterStateBatch {
    pub first_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    /// `RecordState::id()`: 0 Available, 1 Acquired, 2 Acknowledged, 4 Archived.
    pub delivery_state: i8,
    pub delivery_count: i16,
}

impl PersisterStateBatch {
    pub fn new(
        first_offset: i64,
        last_offset: i64,
        state: RecordState,
        delivery_count: i16,
    ) -> Self {
        PersisterStateBatch {
            first_offset,
            last_offset,
            delivery_state: state.id(),
            delivery_count,
        }
    }
}

/// `ShareSnapshotValue`: the full state of one share-partition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareSnapshot {
    pub snapshot_epoch: i32,
    /// Bumped when the share-partition is (re)initialized, e.g. by AlterShareGroupOffsets; a
    /// write carrying an older state epoch is fenced (FENCED_STATE_EPOCH).
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// The share-partition start offset (SPSO).
    pub start_offset: i64,
    pub create_timestamp_ms: i64,
    pub write_timestamp_ms: i64,
    pub state_batches: Vec<PersisterStateBatch>,
}

/// `ShareUpdateValue`: a delta written after acknowledgements, releases and lock timeouts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareUpdate {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub state_batches: Vec<PersisterStateBatch>,
}

impl ShareSnapshot {
    /// Folds `update` into this snapshot: the update's start offset wins when it is ahead (the
    /// SPSO never moves back through an update), batches of the update override the snapshot's
    /// for the offsets they cover, and everything before the start offset is dropped.
    pub fn apply(&mut self, update: &ShareUpdate, write_timestamp_ms: i64) {
        self.start_offset = self.start_offset.max(update.start_offset);
        self.leader_epoch = self.leader_epoch.max(update.leader_epoch);
        self.write_timestamp_ms = write_timestamp_ms;
        let mut batches = std::mem::take(&mut self.state_batches);
        // A snapshot read from a log is not trusted to be sorted.
        if !batches.is_sorted_by_key(|b| b.first_offset) {
            batches.sort_by_key(|b| b.first_offset);
        }
        for new in update
            .state_batches
            .iter()
            .filter(|b| b.first_offset <= b.last_offset)
        {
            batches = override_range(batches, *new);
        }
        self.state_batches = normalize(batches, self.start_offset);
    }
}

/// Replaces the offsets `new` covers in the sorted, non-overlapping `batches` (one pass: the
/// output stays sorted by first offset).
fn override_range(
    batches: Vec<PersisterStateBatch>,
    new: PersisterStateBatch,
) -> Vec<PersisterStateBatch> {
    let mut out = Vec::with_capacity(batches.len() + 2);
    let mut placed = false;
    for b in batches {
        if b.last_offset < new.first_offset {
            out.push(b);
            continue;
        }
        if b.first_offset > new.last_offset {
            if !placed {
                out.push(new);
                placed = true;
            }
            out.push(b);
            continue;
        }
        if b.first_offset < new.first_offset {
            out.push(PersisterStateBatch {
                last_offset: new.first_offset - 1,
                ..b
            });
        }
        if b.last_offset > new.last_offset {
            if !placed {
                out.push(new);
                placed = true;
            }
            out.push(PersisterStateBatch {
                first_offset: new.last_offset + 1,
                ..b
            });
        }
    }
    if !placed {
        out.push(new);
    }
    out
}

/// Drops and trims batches before `start_offset` and merges adjacent equal batches.
fn normalize(batches: Vec<PersisterStateBatch>, start_offset: i64) -> Vec<PersisterStateBatch> {
    let mut out: Vec<PersisterStateBatch> = Vec::with_capacity(batches.len());
    for mut b in batches {
        if b.last_offset < start_offset {
            continue;
        }
        b.first_offset = b.first_offset.max(start_offset);
        match out.last_mut() {
            Some(prev)
                if prev.last_offset.checked_add(1) == Some(b.first_offset)
                    && prev.delivery_state == b.delivery_state
                    && prev.delivery_count == b.delivery_count =>
            {
                prev.last_offset = b.last_offset;
            }
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Folding updates equals overwriting a per-offset map, cut at the highest start offset.
        #[test]
        fn apply_matches_a_per_offset_model(
            updates in proptest::collection::vec(
                (0i64..40, proptest::collection::vec((0i64..60, 0i64..8, 0usize..3, 0i16..4), 0..5)),
                1..8,
            ),
        ) {
            let states = [RecordState::Available, RecordState::Acknowledged, RecordState::Archived];
            let mut snap = ShareSnapshot::default();
            let mut model: BTreeMap<i64, (i8, i16)> = BTreeMap::new();
            let mut start = 0;
            for (update_start, batches) in &updates {
                let update = ShareUpdate {
                    start_offset: *update_start,
                    state_batches: batches
                        .iter()
                        .map(|(first, len, s, c)| batch(*first, first + len, states[*s], *c))
                        .collect(),
                    ..ShareUpdate::default()
                };
                snap.apply(&update, 0);
                start = start.max(*update_start);
                for b in &update.state_batches {
                    for o in b.first_offset..=b.last_offset {
                        model.insert(o, (b.delivery_state, b.delivery_count));
                    }
                }
                model.retain(|o, _| *o >= start);
                prop_assert_eq!(snap.start_offset, start);
                let mut flat: BTreeMap<i64, (i8, i16)> = BTreeMap::new();
                for (i, b) in snap.state_batches.iter().enumerate() {
                    prop_assert!(b.first_offset <= b.last_offset && b.first_offset >= start);
                    if let Some(next) = snap.state_batches.get(i + 1) {
                        prop_assert!(b.last_offset < next.first_offset, "sorted, disjoint");
                        let mergeable = b.last_offset + 1 == next.first_offset
                            && (b.delivery_state, b.delivery_count) == (next.delivery_state, next.delivery_count);
                        prop_assert!(!mergeable, "equal neighbours merged");
                    }
                    for o in b.first_offset..=b.last_offset {
                        flat.insert(o, (b.delivery_state, b.delivery_count));
                    }
                }
                prop_assert_eq!(&flat, &model);
            }
        }
    }

    fn batch(first: i64, last: i64, state: RecordState, count: i16) -> PersisterStateBatch {
        PersisterStateBatch::new(first, last, state, count)
    }

    #[test]
    fn update_overrides_the_middle_of_a_batch_and_moves_the_start_offset() {
        let mut snap = ShareSnapshot {
            start_offset: 10,
            state_batches: vec![batch(10, 19, RecordState::Available, 1)],
            ..ShareSnapshot::default()
        };
        let update = ShareUpdate {
            start_offset: 12,
            state_batches: vec![
                batch(10, 11, RecordState::Acknowledged, 1),
                batch(14, 15, RecordState::Archived, 5),
            ],
            ..ShareUpdate::default()
        };
        snap.apply(&update, 77);
        assert_eq!(snap.start_offset, 12);
        assert_eq!(snap.write_timestamp_ms, 77);
        assert_eq!(
            snap.state_batches,
            vec![
                batch(12, 13, RecordState::Available, 1),
                batch(14, 15, RecordState::Archived, 5),
                batch(16, 19, RecordState::Available, 1),
            ]
        );
    }

    #[test]
    fn start_offset_never_moves_back_and_equal_neighbours_merge() {
        let mut snap = ShareSnapshot {
            start_offset: 20,
            state_batches: vec![batch(20, 24, RecordState::Acknowledged, 1)],
            ..ShareSnapshot::default()
        };
        let update = ShareUpdate {
            start_offset: 5,
            state_batches: vec![
                batch(25, 29, RecordState::Acknowledged, 1),
                batch(3, 4, RecordState::Archived, 1),
            ],
            ..ShareUpdate::default()
        };
        snap.apply(&update, 1);
        assert_eq!(snap.start_offset, 20);
        assert_eq!(
            snap.state_batches,
            vec![batch(20, 29, RecordState::Acknowledged, 1)]
        );
    }
}
