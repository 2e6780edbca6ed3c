//! The share coordinator's per-key state: snapshots every N updates, fencing, replay equals
//! apply, delete.

use uuid::Uuid;

use super::*;
use crate::share::partition::RecordState;

fn key() -> ShareKey {
    ShareKey {
        group_id: "g".into(),
        topic_id: Uuid::from_u128(7),
        partition: 0,
    }
}

fn ack(first: i64, last: i64) -> WriteState {
    WriteState {
        state_epoch: 0,
        leader_epoch: 1,
        start_offset: -1,
        state_batches: vec![PersisterStateBatch::new(
            first,
            last,
            RecordState::Acknowledged,
            1,
        )],
    }
}

/// Writes `w`, applies the record, and replays its encoding into `log` (a second coordinator).
fn write(c: &mut ShareCoordinator, log: &mut ShareCoordinator, w: &WriteState) -> StateRecord {
    let r = c.write(&key(), w, 100).unwrap();
    c.apply(&r, 100);
    for (k, v) in r.encode() {
        log.replay(&k, v.as_deref(), 100).unwrap();
    }
    r
}

#[test]
fn the_first_write_is_a_snapshot_then_updates_until_the_limit() {
    let (mut c, mut log) = (ShareCoordinator::new(2), ShareCoordinator::new(2));
    let init = c.initialize(&key(), 0, 10, 50).unwrap();
    c.apply(&init, 50);
    for (k, v) in init.encode() {
        log.replay(&k, v.as_deref(), 50).unwrap();
    }
    let kinds: Vec<&str> = (0..4)
        .map(|i| match write(&mut c, &mut log, &ack(10 + i, 10 + i)) {
            StateRecord::Snapshot(..) => "snapshot",
            StateRecord::Update(..) => "update",
            StateRecord::Delete(..) => "delete",
        })
        .collect();
    assert_eq!(kinds, ["update", "update", "snapshot", "update"]);
    let s = c.read(&key()).unwrap();
    assert_eq!(s.snapshot_epoch, 1);
    assert_eq!(s.leader_epoch, 1);
    // The four acknowledged offsets 10..=13, as one merged batch.
    assert_eq!(
        s.state_batches,
        vec![PersisterStateBatch::new(
            10,
            13,
            RecordState::Acknowledged,
            1
        )]
    );
    assert_eq!(log.read(&key()), Some(s));
}

#[test]
fn a_write_without_state_creates_it() {
    let c = ShareCoordinator::new(500);
    let mut w = ack(3, 4);
    w.start_offset = 3;
    let StateRecord::Snapshot(_, s) = c.write(&key(), &w, 9).unwrap() else {
        panic!("not a snapshot");
    };
    assert_eq!((s.start_offset, s.create_timestamp_ms), (3, 9));
    assert_eq!(s.state_batches, w.state_batches);
}

#[test]
fn older_state_and_leader_epochs_are_fenced() {
    let mut c = ShareCoordinator::new(500);
    let init = c.initialize(&key(), 2, 0, 0).unwrap();
    c.apply(&init, 0);
    let mut w = ack(0, 0);
    w.state_epoch = 1;
    assert_eq!(c.write(&key(), &w, 1), Err(FENCED_STATE_EPOCH));
    w.state_epoch = 2;
    w.leader_epoch = 5;
    let r = c.write(&key(), &w, 1).unwrap();
    c.apply(&r, 1);
    w.leader_epoch = 4;
    assert_eq!(c.write(&key(), &w, 2), Err(FENCED_LEADER_EPOCH));
    assert_eq!(c.initialize(&key(), 1, 0, 3), Err(FENCED_STATE_EPOCH));
}

#[test]
fn delete_removes_the_state_and_replays_as_tombstones() {
    let (mut c, mut log) = (ShareCoordinator::new(500), ShareCoordinator::new(500));
    write(&mut c, &mut log, &ack(0, 1));
    write(&mut c, &mut log, &ack(2, 3));
    let d = c.delete(&key()).unwrap();
    c.apply(&d, 5);
    for (k, v) in d.encode() {
        assert!(v.is_none());
        log.replay(&k, v.as_deref(), 5).unwrap();
    }
    assert_eq!(c.read(&key()), None);
    assert_eq!(log.read(&key()), None);
    assert_eq!(c.delete(&key()), None);
    assert_eq!(c.keys_of("g").count(), 0);
}
