//! Property tests of `SharePartition` against a per-offset model: random acquire / acknowledge
//! / release / timeout sequences by several members over a log of random batches.
//!
//! Checked after every step: a record is only acquired when the model has it Available (so no
//! record is held by two members at once), with exactly the model's delivery count plus one;
//! acknowledgements succeed exactly when the model says every offset is held by that member;
//! every in-flight record's state, delivery count and holder equal the model's; the SPSO is the
//! model's first unfinished offset (it never passes an unacknowledged record); poison records
//! are Archived at the delivery count limit; and the persisted updates folded into a snapshot
//! describe the same state as the partition.

use proptest::prelude::*;

use super::partition::*;
use super::persist::{ShareSnapshot, ShareUpdate};

const LOCK_MS: i64 = 100;
const LIMIT: i16 = 3;
const MEMBERS: [&str; 3] = ["m0", "m1", "m2"];

#[derive(Debug, Clone, Copy, PartialEq)]
struct Model {
    state: RecordState,
    count: i16,
    owner: Option<usize>,
    deadline: i64,
    /// Before the log start offset: the data is gone, a release archives.
    gone: bool,
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        member: usize,
        batches: usize,
        max_records: u32,
    },
    /// Batches laid out from `start`: (gap before, length, types, one type per offset).
    Ack {
        member: usize,
        start: usize,
        batches: Vec<(usize, usize, Vec<i8>, bool)>,
        reversed: bool,
    },
    Release {
        member: usize,
    },
    Advance {
        ms: i64,
    },
    /// Moves the log start offset this far past the SPSO.
    MoveLogStart {
        delta: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 1..4usize, 1..20u32).prop_map(|(member, batches, max_records)| Op::Acquire { member, batches, max_records }),
        3 => (
            0..3usize,
            0..60usize,
            proptest::collection::vec((0..3usize, 1..8usize, proptest::collection::vec(0..4i8, 8), any::<bool>()), 1..4),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(member, start, batches, reversed)| Op::Ack { member, start, batches, reversed }),
        1 => (0..3usize).prop_map(|member| Op::Release { member }),
        2 => (0..150i64).prop_map(|ms| Op::Advance { ms }),
        1 => (0..12i64).prop_map(|delta| Op::MoveLogStart { delta }),
    ]
}

fn release(m: &mut Model) {
    m.state = if m.count >= LIMIT || m.gone {
        RecordState::Archived
    } else {
        RecordState::Available
    };
    m.owner = None;
}

fn apply_ack(m: &mut Model, code: i8) {
    match code {
        1 => {
            m.state = RecordState::Acknowledged;
            m.owner = None;
        }
        2 => release(m),
        _ => {
            m.state = RecordState::Archived;
            m.owner = None;
        }
    }
}

struct Harness {
    sp: SharePartition,
    model: Vec<Model>,
    /// Log batches as (base, last).
    log: Vec<(i64, i64)>,
    persisted: ShareSnapshot,
    max_batch: u64,
    now: i64,
}

impl Harness {
    fn persist(&mut self, change: StateChange) {
        let update = ShareUpdate {
            start_offset: change.start_offset,
            state_batches: change.state_batches,
            ..ShareUpdate::default()
        };
        self.persisted.apply(&update, self.now);
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let spso = self.sp.start_offset();
        let first_unfinished = self
            .model
            .iter()
            .position(|m| !m.state.is_terminal())
            .unwrap_or(self.model.len()) as i64;
        prop_assert_eq!(spso, first_unfinished, "SPSO");
        let in_flight_end = spso + self.sp.in_flight_records() as i64;
        for (o, m) in self.model.iter().enumerate() {
            let o = o as i64;
            if o < spso {
                continue;
            }
            let got = self.sp.record_state(o);
            if o >= in_flight_end {
                prop_assert_eq!(got, None);
                prop_assert_eq!(
                    (m.state, m.count),
                    (RecordState::Available, 0),
                    "offset {} never in flight",
                    o
                );
                continue;
            }
            let owner = m.owner.map(|i| MEMBERS[i]);
            prop_assert_eq!(got, Some((m.state, m.count, owner)), "offset {}", o);
        }
        // The persisted state agrees for every record not currently acquired.
        prop_assert_eq!(self.persisted.start_offset, spso, "persisted SPSO");
        for (o, m) in self.model.iter().enumerate().skip(spso as usize) {
            if m.state == RecordState::Acquired {
                continue;
            }
            let o = o as i64;
            let persisted = self
                .persisted
                .state_batches
                .iter()
                .find(|b| b.first_offset <= o && o <= b.last_offset)
                .map_or((RecordState::Available.id(), 0), |b| {
                    (b.delivery_state, b.delivery_count)
                });
            prop_assert_eq!(persisted, (m.state.id(), m.count), "persisted offset {}", o);
        }
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Acquire {
                member,
                batches,
                max_records,
            } => {
                let from = self.sp.next_fetch_offset();
                let fetched: Vec<FetchedBatch> = self
                    .log
                    .iter()
                    .filter(|(_, last)| *last >= from)
                    .take(*batches)
                    .map(|(b, l)| FetchedBatch::new(*b, *l))
                    .collect();
                let before = self.model.clone();
                let in_flight_before = self.sp.in_flight_records();
                let got = self
                    .sp
                    .acquire(MEMBERS[*member], &fetched, *max_records, self.now);
                let mut total = 0u64;
                for r in &got {
                    prop_assert!(r.first_offset <= r.last_offset);
                    for o in r.first_offset..=r.last_offset {
                        let m = &mut self.model[o as usize];
                        prop_assert_eq!(
                            m.state,
                            RecordState::Available,
                            "offset {} acquired twice",
                            o
                        );
                        prop_assert_eq!(r.delivery_count, m.count + 1, "delivery count of {}", o);
                        prop_assert!(fetched
                            .iter()
                            .any(|f| f.base_offset <= o && o <= f.last_offset));
                        *m = Model {
                            state: RecordState::Acquired,
                            count: m.count + 1,
                            owner: Some(*member),
                            deadline: self.now + LOCK_MS,
                            gone: m.gone,
                        };
                        total += 1;
                    }
                }
                prop_assert!(
                    total < u64::from(*max_records) + self.max_batch,
                    "acquired {} for max {}",
                    total,
                    max_records
                );
                if got.is_empty() {
                    // Nothing acquired: no fetched in-flight record was Available.
                    let spso = self.sp.start_offset();
                    for f in &fetched {
                        for o in f.base_offset.max(spso)
                            ..(spso + in_flight_before as i64).min(f.last_offset + 1)
                        {
                            prop_assert_ne!(
                                before[o as usize].state,
                                RecordState::Available,
                                "offset {} left",
                                o
                            );
                        }
                    }
                }
                prop_assert!(
                    self.sp.in_flight_records()
                        < u64::from(self.sp.config().max_record_locks) + self.max_batch
                        || self.sp.in_flight_records() <= in_flight_before
                );
            }
            Op::Ack {
                member,
                start,
                batches,
                reversed,
            } => {
                let max = self.model.len() as i64 - 1;
                let mut acks = Vec::new();
                let mut next = *start as i64;
                for (gap, len, types, per_offset) in batches {
                    let first = next + *gap as i64;
                    let last = first + *len as i64 - 1;
                    if last > max + 2 {
                        break;
                    }
                    let n = (last - first + 1) as usize;
                    let types: Vec<i8> = if *per_offset {
                        types.iter().copied().cycle().take(n).collect()
                    } else {
                        vec![types[0]]
                    };
                    acks.push(AcknowledgementBatch {
                        first_offset: first,
                        last_offset: last,
                        acknowledge_types: types,
                    });
                    next = last + 1;
                }
                if acks.is_empty() {
                    return self.check();
                }
                if *reversed {
                    acks.reverse();
                }
                let spso = self.sp.start_offset();
                let in_flight_end = spso + self.sp.in_flight_records() as i64;
                // The code the model expects: 0, INVALID_RECORD_STATE or INVALID_REQUEST; the
                // first failing batch decides.
                let expect: i16 = if *reversed && acks.len() > 1 {
                    42
                } else {
                    acks.iter()
                        .map(|b| {
                            if b.last_offset < spso {
                                121
                            } else if b.last_offset >= in_flight_end {
                                42
                            } else if (b.first_offset.max(spso)..=b.last_offset).all(|o| {
                                self.model.get(o as usize).is_some_and(|m| {
                                    m.state == RecordState::Acquired && m.owner == Some(*member)
                                })
                            }) {
                                0
                            } else {
                                121
                            }
                        })
                        .find(|c| *c != 0)
                        .unwrap_or(0)
                };
                match self.sp.acknowledge(MEMBERS[*member], &acks) {
                    Ok(change) => {
                        prop_assert_eq!(expect, 0, "acks {:?} accepted", acks);
                        for b in &acks {
                            for o in b.first_offset.max(spso)..=b.last_offset {
                                let code = if b.acknowledge_types.len() == 1 {
                                    b.acknowledge_types[0]
                                } else {
                                    b.acknowledge_types[(o - b.first_offset) as usize]
                                };
                                apply_ack(&mut self.model[o as usize], code);
                            }
                        }
                        self.persist(change);
                    }
                    Err(e) => {
                        prop_assert_eq!(e.error_code(), expect, "acks {:?} refused: {}", acks, e);
                    }
                }
            }
            Op::Release { member } => {
                let change = self.sp.release_acquired_records(MEMBERS[*member]);
                for m in self
                    .model
                    .iter_mut()
                    .filter(|m| m.state == RecordState::Acquired && m.owner == Some(*member))
                {
                    release(m);
                }
                self.persist(change);
            }
            Op::Advance { ms } => {
                self.now += ms;
                let change = self.sp.expire_locks(self.now);
                let now = self.now;
                for m in self
                    .model
                    .iter_mut()
                    .filter(|m| m.state == RecordState::Acquired && m.deadline <= now)
                {
                    release(m);
                }
                self.persist(change);
            }
            Op::MoveLogStart { delta } => {
                let lso = (self.sp.start_offset() + delta).min(self.model.len() as i64);
                let change = self.sp.update_log_start_offset(lso);
                for m in self.model.iter_mut().take(lso.max(0) as usize) {
                    m.gone = true;
                    if m.state == RecordState::Available {
                        m.state = RecordState::Archived;
                    }
                }
                self.persist(change);
            }
        }
        self.check()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn share_partition_matches_the_model(
        sizes in proptest::collection::vec(1i64..6, 3..14),
        max_record_locks in 4u32..40,
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        let mut log = Vec::new();
        let mut next = 0;
        for s in &sizes {
            log.push((next, next + s - 1));
            next += s;
        }
        let config = SharePartitionConfig { record_lock_duration_ms: LOCK_MS, delivery_count_limit: LIMIT, max_record_locks };
        let mut h = Harness {
            sp: SharePartition::new(config, 0, 0),
            model: vec![Model { state: RecordState::Available, count: 0, owner: None, deadline: 0, gone: false }; next as usize],
            log,
            persisted: ShareSnapshot::default(),
            max_batch: *sizes.iter().max().unwrap_or(&1) as u64,
            now: 0,
        };
        for op in &ops {
            h.step(op)?;
        }
        // A restart from the persisted state keeps every finished or released record.
        let back = SharePartition::from_snapshot(config, &h.persisted);
        prop_assert_eq!(back.start_offset(), h.sp.start_offset());
        for (o, m) in h.model.iter().enumerate().skip(back.start_offset() as usize) {
            if m.state != RecordState::Acquired && (o as i64) <= back.end_offset() && back.in_flight_records() > 0 {
                prop_assert_eq!(back.record_state(o as i64), Some((m.state, m.count, None)), "restored offset {}", o);
            }
        }
    }
}
