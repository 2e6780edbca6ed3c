use std::fs;

use proptest::prelude::*;

use super::snapshot::{decode, encode};
use super::*;
use crate::record::{build_batch, set_base_offset, BatchHeader, KeyValue, ATTR_CONTROL};

const MAX: i32 = i32::MAX;
const CLIENT: AppendOrigin = AppendOrigin::Client;

/// A batch of `n` records from producer `(pid, epoch)` starting at sequence `seq`, placed at `offset`.
#[derive(Debug, Clone, Copy)]
struct B {
    pid: i64,
    epoch: i16,
    seq: i32,
    n: usize,
    offset: i64,
}

fn b(pid: i64, epoch: i16, seq: i32, n: usize, offset: i64) -> B {
    B {
        pid,
        epoch,
        seq,
        n,
        offset,
    }
}

fn header(spec: B) -> BatchHeader {
    let recs: Vec<KeyValue<'_>> = vec![(None, Some(b"v")); spec.n];
    let mut bytes = build_batch(0, 1_000, (spec.pid, spec.epoch, spec.seq), &recs);
    set_base_offset(&mut bytes, spec.offset);
    BatchHeader::parse(&bytes).expect("test batch parses")
}

fn state_with(prior: &[B]) -> ProducerStateManager {
    let mut state = ProducerStateManager::new();
    for (i, spec) in prior.iter().enumerate() {
        state.on_append(&header(*spec), i as i64);
    }
    state
}

/// Producer 7, epoch 0: six 2-record batches, seqs 0,2,..,10 at offsets 100,110,..,150. The first one
/// has left the 5-batch cache.
fn six_batches() -> Vec<B> {
    (0..6)
        .map(|i| b(7, 0, 2 * i as i32, 2, 100 + 10 * i))
        .collect()
}

fn oos(
    producer_id: i64,
    batch_epoch: i16,
    base_sequence: i32,
    last_sequence: i32,
) -> ProducerError {
    ProducerError::OutOfOrderSequence {
        producer_id,
        batch_epoch,
        base_sequence,
        last_sequence,
    }
}

fn dup(base_offset: i64, last_offset: i64) -> Checked {
    Ok(ProducerCheck::Duplicate {
        base_offset,
        last_offset,
    })
}

/// What `check` returns.
type Checked = Result<ProducerCheck, ProducerError>;

const APPEND: Checked = Ok(ProducerCheck::Append);

#[test]
fn rules_table() {
    let wrapped = vec![b(7, 0, MAX - 2, 1, 0), b(7, 0, MAX - 1, 3, 1)]; // seqs MAX-2 | MAX-1, MAX, 0
    let bumped = vec![b(7, 0, 0, 1, 0), b(7, 1, 0, 1, 1)];
    let rows: Vec<(&str, Vec<B>, B, Checked)> = vec![
        ("new producer, seq 0", vec![], b(7, 0, 0, 1, 0), APPEND),
        // Kafka 4.x (KIP-360): no state means any sequence is accepted, no UNKNOWN_PRODUCER_ID.
        ("new producer, seq 42", vec![], b(7, 0, 42, 1, 0), APPEND),
        ("in order", vec![b(7, 0, 0, 3, 0)], b(7, 0, 3, 1, 3), APPEND),
        (
            "gap",
            vec![b(7, 0, 0, 3, 0)],
            b(7, 0, 4, 1, 3),
            Err(oos(7, 0, 4, 2)),
        ),
        (
            "same start, other length",
            vec![b(7, 0, 0, 3, 0)],
            b(7, 0, 0, 2, 3),
            Err(oos(7, 0, 0, 2)),
        ),
        (
            "duplicate of the latest",
            six_batches(),
            b(7, 0, 10, 2, 999),
            dup(150, 151),
        ),
        (
            "duplicate of the 5th latest",
            six_batches(),
            b(7, 0, 2, 2, 999),
            dup(110, 111),
        ),
        (
            "older than the 5 cached",
            six_batches(),
            b(7, 0, 0, 2, 999),
            Err(oos(7, 0, 0, 11)),
        ),
        (
            "in order after six",
            six_batches(),
            b(7, 0, 12, 1, 999),
            APPEND,
        ),
        (
            "lower epoch",
            vec![b(7, 3, 0, 1, 0)],
            b(7, 2, 1, 1, 1),
            Err(ProducerError::InvalidProducerEpoch {
                producer_id: 7,
                batch_epoch: 2,
                current_epoch: 3,
            }),
        ),
        (
            "lower epoch, same sequences as a cached batch",
            vec![b(7, 3, 0, 1, 0)],
            b(7, 2, 0, 1, 1),
            Err(ProducerError::InvalidProducerEpoch {
                producer_id: 7,
                batch_epoch: 2,
                current_epoch: 3,
            }),
        ),
        (
            "epoch bump, seq 0",
            vec![b(7, 0, 0, 5, 0)],
            b(7, 1, 0, 1, 5),
            APPEND,
        ),
        (
            "epoch bump, seq 5",
            vec![b(7, 0, 0, 5, 0)],
            b(7, 1, 5, 1, 5),
            Err(oos(7, 1, 5, -1)),
        ),
        (
            "epoch bump matching an old-epoch batch",
            vec![b(7, 0, 0, 1, 0)],
            b(7, 1, 0, 1, 1),
            APPEND,
        ),
        (
            "old epoch after a bump",
            bumped.clone(),
            b(7, 0, 0, 1, 2),
            Err(ProducerError::InvalidProducerEpoch {
                producer_id: 7,
                batch_epoch: 0,
                current_epoch: 1,
            }),
        ),
        ("retry after a bump", bumped, b(7, 1, 0, 1, 2), dup(1, 1)),
        (
            "wrap: MAX then 0",
            vec![b(7, 0, MAX - 1, 2, 0)],
            b(7, 0, 0, 1, 2),
            APPEND,
        ),
        (
            "wrap: MAX then 1",
            vec![b(7, 0, MAX - 1, 2, 0)],
            b(7, 0, 1, 1, 2),
            Err(oos(7, 0, 1, MAX)),
        ),
        (
            "wrap inside a batch",
            vec![b(7, 0, MAX - 2, 1, 0)],
            b(7, 0, MAX - 1, 3, 1),
            APPEND,
        ),
        (
            "after a wrapped batch",
            wrapped.clone(),
            b(7, 0, 1, 1, 4),
            APPEND,
        ),
        (
            "after a wrapped batch, stale seq",
            wrapped.clone(),
            b(7, 0, MAX, 1, 4),
            Err(oos(7, 0, MAX, 0)),
        ),
        (
            "duplicate of a wrapped batch",
            wrapped,
            b(7, 0, MAX - 1, 3, 9),
            dup(1, 3),
        ),
        (
            "non-idempotent batch",
            six_batches(),
            b(-1, -1, -1, 1, 999),
            APPEND,
        ),
        (
            "other producer id is independent",
            six_batches(),
            b(8, 0, 5, 1, 999),
            APPEND,
        ),
        (
            "producer id without sequence",
            vec![],
            b(7, 0, -1, 1, 0),
            Err(ProducerError::MissingSequence { producer_id: 7 }),
        ),
    ];
    for (name, prior, incoming, expected) in rows {
        let state = state_with(&prior);
        let before = state.clone();
        assert_eq!(
            state.check(&header(incoming), CLIENT),
            expected,
            "row: {name}"
        );
        assert_eq!(state, before, "row {name}: check must not change state");
    }
}

#[test]
fn error_codes_are_kafkas() {
    let epoch = ProducerError::InvalidProducerEpoch {
        producer_id: 1,
        batch_epoch: 0,
        current_epoch: 1,
    };
    assert_eq!(epoch.code(), 47);
    assert_eq!(oos(1, 0, 5, 1).code(), 45);
    assert_eq!(ProducerError::MissingSequence { producer_id: 1 }.code(), 87);
}

#[test]
fn control_batches_are_skipped() {
    let mut state = state_with(&[b(7, 3, 0, 1, 0)]);
    let mut marker = header(b(7, 1, 9, 1, 1));
    marker.attributes |= ATTR_CONTROL;
    assert_eq!(state.check(&marker, CLIENT), APPEND);
    state.on_append(&marker, 5);
    assert_eq!(state.entry(7).map(|e| e.producer_epoch()), Some(3));
    assert_eq!(state.last_offset_for(7), Some(0));
}

#[test]
fn on_append_keeps_five_batches_of_the_current_epoch() {
    let mut state = state_with(&six_batches());
    let entry = state.entry(7).expect("producer 7");
    let firsts: Vec<i32> = entry.batches().map(|m| m.first_seq).collect();
    assert_eq!(firsts, vec![2, 4, 6, 8, 10]);
    assert_eq!(entry.last_sequence(), 11);
    assert_eq!(entry.last_timestamp(), 5);
    state.on_append(&header(b(7, 1, 0, 4, 200)), 6);
    let entry = state.entry(7).expect("producer 7");
    assert_eq!(entry.producer_epoch(), 1);
    assert_eq!(entry.batches().count(), 1);
    assert_eq!(state.last_offset_for(7), Some(203));
}

#[test]
fn truncate_to_drops_batches_at_and_after_the_offset() {
    // producer 7 at offsets 100..151 (six_batches), producer 8 only at 160.
    let mut prior = six_batches();
    prior.push(b(8, 0, 0, 1, 160));
    let mut state = state_with(&prior);
    state.truncate_to(130); // drops the batch at 130..131 and everything after
    assert_eq!(state.last_offset_for(7), Some(121));
    assert_eq!(state.entry(7).map(|e| e.last_sequence()), Some(5));
    assert_eq!(state.check(&header(b(7, 0, 6, 2, 121)), CLIENT), APPEND);
    assert_eq!(
        state.check(&header(b(7, 0, 8, 2, 121)), CLIENT),
        Err(oos(7, 0, 8, 5))
    );
    assert_eq!(
        state.check(&header(b(7, 0, 4, 2, 121)), CLIENT),
        dup(120, 121)
    );
    // Producer 8 had nothing before the cut: it is unknown again.
    assert!(state.entry(8).is_none());
    assert_eq!(state.producer_count(), 1);
    state.truncate_to(0);
    assert!(state.is_empty());
}

#[test]
fn remove_expired_uses_the_last_append_time() {
    let mut state = ProducerStateManager::new();
    state.on_append(&header(b(1, 0, 0, 1, 0)), 1_000);
    state.on_append(&header(b(2, 0, 0, 1, 1)), 5_000);
    state.remove_expired(5_999, 5_000); // producer 1 idle 4_999 ms
    assert_eq!(state.producer_count(), 2);
    state.remove_expired(6_000, 5_000); // producer 1 idle exactly 5_000 ms: expired
    assert!(state.entry(1).is_none());
    assert!(state.entry(2).is_some());
}

#[test]
fn snapshot_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut prior = six_batches();
    prior.push(b(9, 4, MAX - 1, 3, 300));
    let state = state_with(&prior);
    state.write_snapshot(dir.path(), 303).expect("write");
    assert!(dir.path().join("00000000000000000303.snapshot").is_file());

    let (loaded, offset) = ProducerStateManager::load_latest_snapshot(dir.path(), 303)
        .expect("read")
        .expect("a snapshot");
    assert_eq!(offset, 303);
    assert_eq!(loaded.producer_count(), 2);
    assert_eq!(loaded.last_offset_for(7), Some(151));
    assert_eq!(loaded.last_offset_for(9), Some(302));
    let p9 = loaded.entry(9).expect("producer 9");
    assert_eq!((p9.producer_epoch(), p9.last_sequence()), (4, 0));
    assert_eq!(p9.last_timestamp(), 6);
    assert_eq!(p9.coordinator_epoch(), -1);
    assert_eq!(p9.current_txn_first_offset(), None);
    // Only the last batch of each producer survives (Kafka's format); its retry is still a duplicate,
    // with the wrapped first sequence recovered from the offset delta.
    assert_eq!(
        loaded.check(&header(b(9, 4, MAX - 1, 3, 999)), CLIENT),
        dup(300, 302)
    );
    assert_eq!(
        loaded.check(&header(b(7, 0, 10, 2, 999)), CLIENT),
        dup(150, 151)
    );
    assert_eq!(loaded.check(&header(b(7, 0, 12, 1, 999)), CLIENT), APPEND);
    assert_eq!(
        loaded.check(&header(b(7, 0, 8, 2, 999)), CLIENT),
        Err(oos(7, 0, 8, 11))
    );
}

#[test]
fn snapshot_bytes_follow_kafkas_version_1_layout() {
    let state = state_with(&[b(7, 2, 5, 3, 40)]);
    let bytes = encode(&state);
    assert_eq!(bytes.len(), 10 + 46);
    assert_eq!(&bytes[0..2], &1i16.to_be_bytes()); // version
    let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    assert_eq!(crc, crc32c::crc32c(&bytes[6..]));
    assert_eq!(&bytes[6..10], &1i32.to_be_bytes()); // entry count
    let mut entry = Vec::new();
    entry.extend_from_slice(&7i64.to_be_bytes()); // producer id
    entry.extend_from_slice(&2i16.to_be_bytes()); // epoch
    entry.extend_from_slice(&7i32.to_be_bytes()); // last sequence
    entry.extend_from_slice(&42i64.to_be_bytes()); // last offset
    entry.extend_from_slice(&2i32.to_be_bytes()); // offset delta
    entry.extend_from_slice(&0i64.to_be_bytes()); // timestamp
    entry.extend_from_slice(&(-1i32).to_be_bytes()); // coordinator epoch
    entry.extend_from_slice(&(-1i64).to_be_bytes()); // current txn first offset
    assert_eq!(&bytes[10..], &entry[..]);
}

#[test]
fn corrupt_snapshot_is_deleted_and_the_older_one_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    state_with(&[b(7, 0, 0, 1, 0)])
        .write_snapshot(dir.path(), 1)
        .expect("write");
    state_with(&[b(7, 0, 0, 1, 0), b(7, 0, 1, 1, 1)])
        .write_snapshot(dir.path(), 2)
        .expect("write");
    let newest = dir.path().join("00000000000000000002.snapshot");
    let mut bytes = fs::read(&newest).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    fs::write(&newest, &bytes).expect("write");

    let (loaded, offset) = ProducerStateManager::load_latest_snapshot(dir.path(), 10)
        .expect("read")
        .expect("the older snapshot");
    assert_eq!(offset, 1);
    assert_eq!(loaded.last_offset_for(7), Some(0));
    assert!(!newest.exists(), "corrupt snapshot must be deleted");
}

#[test]
fn unreadable_or_too_new_snapshots_give_none() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("00000000000000000003.snapshot"), b"junk").expect("write");
    fs::write(dir.path().join("00000000000000000004.snapshot"), b"").expect("write");
    fs::write(dir.path().join("notes.txt"), b"not a snapshot").expect("write");
    state_with(&[b(7, 0, 0, 1, 0)])
        .write_snapshot(dir.path(), 50)
        .expect("write");
    // Log end offset 10: the snapshot at 50 describes log that is gone; 3 and 4 are garbage.
    let loaded = ProducerStateManager::load_latest_snapshot(dir.path(), 10).expect("read");
    assert!(loaded.is_none());
    let left: Vec<String> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, vec!["notes.txt".to_string()]);
    let missing = dir.path().join("no-such-dir");
    assert!(ProducerStateManager::load_latest_snapshot(&missing, 10)
        .expect("missing dir is not an error")
        .is_none());
}

#[test]
fn negative_snapshot_offset_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let err = ProducerStateManager::new()
        .write_snapshot(dir.path(), -1)
        .expect_err("negative offset");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

/// Reference model: the full history of each producer's current epoch, and plain rules.
#[derive(Default, Clone)]
struct ModelProducer {
    epoch: i16,
    /// (first seq, last seq, base offset, last offset), oldest first, current epoch only.
    history: Vec<(i32, i32, i64, i64)>,
}

fn next_seq(seq: i32) -> i32 {
    if seq == MAX {
        0
    } else {
        seq + 1
    }
}

fn last_seq_of(first: i32, n: usize) -> i32 {
    ((first as i64 + n as i64 - 1) % (MAX as i64 + 1)) as i32
}

#[derive(Debug, Clone)]
enum Op {
    InOrder { pid: usize, n: usize },
    Retry { pid: usize, back: usize },
    Gap { pid: usize, skip: i32, n: usize },
    Bump { pid: usize, seq: i32 },
    Stale { pid: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let pid = 0usize..2;
    prop_oneof![
        3 => (pid.clone(), 1usize..4).prop_map(|(pid, n)| Op::InOrder { pid, n }),
        2 => (pid.clone(), 0usize..8).prop_map(|(pid, back)| Op::Retry { pid, back }),
        1 => (pid.clone(), prop_oneof![Just(-3), Just(-1), 1..4i32], 1usize..3)
            .prop_map(|(pid, skip, n)| Op::Gap { pid, skip, n }),
        1 => (pid.clone(), prop_oneof![Just(0), Just(0), 1..3i32]).prop_map(|(pid, seq)| Op::Bump { pid, seq }),
        1 => pid.prop_map(|pid| Op::Stale { pid }),
    ]
}

proptest! {
    #[test]
    fn matches_a_simple_model(
        starts in proptest::collection::vec(prop_oneof![Just(0), Just(MAX - 4), 0..1000i32], 2),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mut state = ProducerStateManager::new();
        let mut model: Vec<Option<ModelProducer>> = vec![None, None];
        let mut log_end = 0i64;
        for (now, op) in ops.into_iter().enumerate() {
            let pid_of = |p: usize| 100 + p as i64;
            // The batch this op sends: (model index, epoch, first seq, record count).
            let (p, epoch, seq, n) = match op {
                Op::InOrder { pid, n } => match &model[pid] {
                    None => (pid, 0, starts[pid], n),
                    Some(m) => {
                        let seq = m.history.last().map_or(0, |h| next_seq(h.1));
                        (pid, m.epoch, seq, n)
                    }
                },
                Op::Retry { pid, back } => match &model[pid] {
                    Some(m) if !m.history.is_empty() => {
                        let h = m.history[m.history.len() - 1 - back.min(m.history.len() - 1)];
                        let n = (h.3 - h.2 + 1) as usize;
                        (pid, m.epoch, h.0, n)
                    }
                    _ => continue,
                },
                Op::Gap { pid, skip, n } => match &model[pid] {
                    Some(m) if !m.history.is_empty() => {
                        let last = m.history.last().map_or(0, |h| h.1);
                        let seq = (last as i64 + 1 + skip as i64).rem_euclid(MAX as i64 + 1) as i32;
                        (pid, m.epoch, seq, n)
                    }
                    _ => continue,
                },
                Op::Bump { pid, seq } => match &model[pid] {
                    Some(m) => (pid, m.epoch + 1, seq, 1),
                    None => continue,
                },
                Op::Stale { pid } => match &model[pid] {
                    Some(m) if m.epoch > 0 => (pid, m.epoch - 1, 0, 1),
                    _ => continue,
                },
            };
            let producer_id = pid_of(p);
            let last = last_seq_of(seq, n);
            let expected = match &model[p] {
                None => APPEND,
                Some(m) => {
                    let recent = &m.history[m.history.len().saturating_sub(5)..];
                    let last_known = m.history.last().map_or(-1, |h| h.1);
                    if let Some(h) = recent.iter().find(|h| epoch == m.epoch && h.0 == seq && h.1 == last) {
                        dup(h.2, h.3)
                    } else if epoch < m.epoch {
                        Err(ProducerError::InvalidProducerEpoch { producer_id, batch_epoch: epoch, current_epoch: m.epoch })
                    } else if epoch > m.epoch {
                        if seq == 0 { APPEND } else { Err(oos(producer_id, epoch, seq, -1)) }
                    } else if !m.history.is_empty() && seq == next_seq(last_known) {
                        APPEND
                    } else {
                        Err(oos(producer_id, epoch, seq, last_known))
                    }
                }
            };
            let batch = header(b(producer_id, epoch, seq, n, log_end));
            prop_assert_eq!(state.check(&batch, CLIENT), expected);
            if expected == APPEND {
                state.on_append(&batch, now as i64);
                let m = model[p].get_or_insert_with(ModelProducer::default);
                if m.epoch != epoch {
                    m.history.clear();
                    m.epoch = epoch;
                }
                m.history.push((seq, last, log_end, log_end + n as i64 - 1));
                log_end += n as i64;
            }
            for (i, m) in model.iter().enumerate() {
                let expected_last = m.as_ref().and_then(|m| m.history.last()).map(|h| h.3);
                prop_assert_eq!(state.last_offset_for(pid_of(i)), expected_last);
            }
        }
        // The snapshot encoding keeps each producer's epoch and last batch.
        let decoded = decode(&encode(&state)).expect("own snapshot decodes");
        prop_assert_eq!(decoded.producer_count(), state.producer_count());
        for i in 0..2 {
            let pid = 100 + i as i64;
            let (Some(live), Some(read)) = (state.entry(pid), decoded.entry(pid)) else { continue };
            prop_assert_eq!(live.producer_epoch(), read.producer_epoch());
            let key = |m: &BatchMetadata| (m.first_seq, m.last_seq, m.base_offset, m.last_offset);
            prop_assert_eq!(live.batches().last().map(key), read.batches().last().map(key));
            prop_assert_eq!(read.batches().count(), 1);
        }
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }
}

#[test]
fn older_snapshots_are_removed_and_the_newest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let state = ProducerStateManager::new();
    for offset in [10, 20, 30] {
        state.write_snapshot(dir.path(), offset).unwrap();
    }
    std::fs::write(dir.path().join("unrelated.txt"), b"x").unwrap();
    assert_eq!(super::remove_snapshots_below(dir.path(), 30).unwrap(), 2);
    assert!(super::snapshot_path(dir.path(), 30).exists());
    assert!(!super::snapshot_path(dir.path(), 10).exists());
    assert!(dir.path().join("unrelated.txt").exists());
}
