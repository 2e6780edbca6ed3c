//! Flushing off the partition lock. A segment roll with the broker's background flusher: the
//! append does not wait for the fsync; the producer snapshot and the recovery point follow once
//! the flusher has made the sealed segment durable. The flush policy
//! (`flush.messages = 1`): group commit, and the high watermark waits for the fsync; `flush.messages
//! = N > 1`: the append crossing the count fsyncs, the high watermark does not wait; `flush.ms`:
//! the periodic check fsyncs a log whose last flush is old enough (time as an argument).

use std::sync::mpsc;

use super::txn_tests::snapshot_offsets;
use super::*;
use crate::log::Flusher;
use crate::record::build_batch;

const T: i64 = 1_700_000_000_000;

fn append(p: &Partition, seq: i32) -> i64 {
    let value = [b'x'; 60];
    let recs: Vec<record::KeyValue<'_>> = vec![(None, Some(&value[..]))];
    let bytes = Bytes::from(build_batch(0, T, (7, 0, seq), &recs));
    let header = record::validate_batch(&bytes).unwrap();
    let settings = AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush: false,
        origin: AppendOrigin::Client,
    };
    p.append(&bytes, &header, settings, T).unwrap().base_offset
}

#[test]
fn a_roll_hands_its_fsync_and_snapshot_to_the_flusher() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = Flusher::start().unwrap();
    let config = LogConfig {
        segment_bytes: 400,
        flusher: Some(flusher.clone()),
        ..LogConfig::default()
    };
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        config.clone(),
        Checkpointed::default(),
        T,
    )
    .unwrap();
    // Hold the flusher thread: a job whose continuation waits for our signal.
    let (release, held) = mpsc::channel::<()>();
    let hold = FlushJob {
        label: "hold".into(),
        files: vec![],
        dir: dir.path().to_path_buf(),
        then: Box::new(move || {
            let _ = held.recv();
            Ok(())
        }),
    };
    assert!(flusher.submit(hold).is_ok());
    // About 130 bytes per batch: the fourth append rolls at offset 3 (the third would exceed 400).
    let offsets: Vec<i64> = (0..4).map(|seq| append(&p, seq)).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3]);
    let rolled_at = p.state.read().log.active_base_offset();
    assert!(rolled_at > 0 && rolled_at <= 3, "rolled at {rolled_at}");
    // The appends returned while the flusher was held: no snapshot yet, recovery point unmoved.
    assert_eq!(snapshot_offsets(dir.path()), Vec::<i64>::new());
    assert_eq!(p.checkpoint_offsets().0, 0);
    release.send(()).unwrap();
    flusher.wait_idle();
    assert_eq!(snapshot_offsets(dir.path()), vec![rolled_at]);
    assert_eq!(p.checkpoint_offsets().0, rolled_at);
    // The snapshot holds the producer's state before the roll offset.
    let (state, at) = ProducerStateManager::load_latest_snapshot(dir.path(), 100)
        .unwrap()
        .unwrap();
    assert_eq!(at, rolled_at);
    assert_eq!(state.last_offset_for(7), Some(rolled_at - 1));
    // A crash now recovers from the checkpointed recovery point and the snapshot.
    drop(p);
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        config,
        Checkpointed {
            recovery_point: rolled_at,
            ..Checkpointed::default()
        },
        T,
    )
    .unwrap();
    assert_eq!(p.offsets().log_end_offset, 4);
    assert_eq!(
        append(&p, 4),
        4,
        "the next sequence is accepted after recovery"
    );
}

fn append_with(p: &Partition, flush: bool) -> i64 {
    let recs: Vec<record::KeyValue<'_>> = vec![(None, Some(&b"v"[..]))];
    let bytes = Bytes::from(build_batch(0, T, (-1, -1, -1), &recs));
    let header = record::validate_batch(&bytes).unwrap();
    let settings = AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush,
        origin: AppendOrigin::Client,
    };
    p.append(&bytes, &header, settings, T).unwrap().base_offset
}

/// Waits (bounded) until the partition's log end offset reaches `leo`.
fn await_log_end(p: &Partition, leo: i64) {
    for _ in 0..1000 {
        if p.offsets().log_end_offset >= leo {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("log end offset never reached {leo}: {:?}", p.offsets());
}

#[test]
fn the_flush_policy_commits_concurrent_appends_with_one_fsync_off_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let p = std::sync::Arc::new(
        Partition::open(
            "t",
            0,
            dir.path(),
            LogConfig::default(),
            Checkpointed::default(),
            T,
        )
        .unwrap(),
    );
    assert_eq!(append_with(&p, false), 0);
    assert_eq!(append_with(&p, true), 1);
    assert_eq!(p.flush_policy_syncs(), 1);
    assert_eq!(p.offsets().high_watermark, 2);
    // Hold the fsync turn: two flushing appenders write, then queue for it.
    let turn = p.sync_turn.lock();
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || append_with(&p, true))
        })
        .collect();
    await_log_end(&p, 4);
    // Both batches are in the log, neither is durable yet: consumers do not see them, and a
    // read still works while they wait (the partition lock is free).
    assert_eq!(p.offsets().high_watermark, 2);
    assert_eq!(p.offsets().log_end_offset, 4);
    assert!(p.read(2, 1 << 20).unwrap().0.bytes.is_empty());
    drop(turn);
    let mut bases: Vec<i64> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    bases.sort();
    assert_eq!(bases, vec![2, 3]);
    // The first to get the turn synced through offset 4; the other found its batch covered.
    assert_eq!(p.flush_policy_syncs(), 2);
    assert_eq!(p.offsets().high_watermark, 4);
}

fn with_policy(messages: i64, ms: i64) -> LogConfig {
    LogConfig {
        flush: crate::log::FlushPolicy { messages, ms },
        ..LogConfig::default()
    }
}

/// One single-record batch appended with `append_unsynced` (flush left to the log's policy):
/// its base offset and the offset it must fsync through, if the policy asks for one.
fn append_policy(p: &Partition, records: usize) -> (i64, Option<i64>) {
    let recs: Vec<record::KeyValue<'_>> = (0..records).map(|_| (None, Some(&b"v"[..]))).collect();
    let bytes = Bytes::from(build_batch(0, T, (-1, -1, -1), &recs));
    let header = record::validate_batch(&bytes).unwrap();
    let settings = AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush: false,
        origin: AppendOrigin::Client,
    };
    let (o, sync) = p.append_unsynced(&bytes, &header, settings, T).unwrap();
    (o.base_offset, sync)
}

#[test]
fn flush_messages_3_fsyncs_on_every_third_message_and_never_holds_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        with_policy(3, i64::MAX),
        Checkpointed::default(),
        T,
    )
    .unwrap();
    assert_eq!(append_policy(&p, 1), (0, None));
    assert_eq!(append_policy(&p, 1), (1, None));
    // Visible at once: with N > 1 the high watermark is not tied to the fsync.
    assert_eq!(p.offsets().high_watermark, 2);
    assert_eq!(p.durable_offset(), 0);
    // The third message crosses the count: this append must fsync through offset 3.
    assert_eq!(append_policy(&p, 1), (2, Some(3)));
    assert_eq!(p.offsets().high_watermark, 3);
    // While that fsync has not run, the next appends do not ask for another one.
    assert_eq!(append_policy(&p, 1), (3, None));
    assert_eq!(p.flush_policy_syncs(), 0);
    p.sync_and_publish(3).unwrap();
    assert_eq!(p.flush_policy_syncs(), 1);
    // Group commit: the fsync covered the log end as it was then, offset 3 included.
    assert_eq!(p.durable_offset(), 4);
    // Counting goes on from what is durable: offsets 4, 5 and 6 are the next three.
    assert_eq!(append_policy(&p, 1), (4, None));
    assert_eq!(append_policy(&p, 1), (5, None));
    assert_eq!(append_policy(&p, 1), (6, Some(7)));
    p.sync_and_publish(7).unwrap();
    assert_eq!((p.flush_policy_syncs(), p.durable_offset()), (2, 7));
    // A batch of 5 messages crosses the count on its own.
    assert_eq!(append_policy(&p, 5), (7, Some(12)));
    assert_eq!(p.offsets().high_watermark, 12);
}

#[test]
fn flush_messages_1_still_holds_the_high_watermark_until_the_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        with_policy(1, i64::MAX),
        Checkpointed::default(),
        T,
    )
    .unwrap();
    assert_eq!(append_policy(&p, 1), (0, Some(1)));
    assert_eq!(p.offsets().high_watermark, 0);
    p.sync_and_publish(1).unwrap();
    assert_eq!(p.offsets().high_watermark, 1);
    assert_eq!(p.flush_policy_syncs(), 1);
}

#[test]
fn flush_ms_fsyncs_a_log_whose_last_flush_is_old_enough() {
    let dir = tempfile::tempdir().unwrap();
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        with_policy(i64::MAX, 1000),
        Checkpointed::default(),
        T,
    )
    .unwrap();
    // Nothing unflushed: nothing to do.
    assert!(!p.flush_if_due(T + 5000).unwrap());
    assert_eq!(append_policy(&p, 2), (0, None));
    assert_eq!(p.offsets().high_watermark, 2);
    // The last flush is the open, at T.
    assert!(!p.flush_if_due(T + 999).unwrap());
    assert_eq!(p.flush_policy_syncs(), 0);
    assert!(p.flush_if_due(T + 1000).unwrap());
    assert_eq!((p.flush_policy_syncs(), p.durable_offset()), (1, 2));
    assert!(!p.flush_if_due(T + 1500).unwrap(), "nothing new");
    assert_eq!(append_policy(&p, 1), (2, None));
    assert!(!p.flush_if_due(T + 1999).unwrap(), "flushed 999 ms ago");
    assert!(p.flush_if_due(T + 2000).unwrap());
    assert_eq!((p.flush_policy_syncs(), p.durable_offset()), (2, 3));
}

/// fsyncgate: after a failed fsync the kernel may have dropped the pages and marked them clean,
/// so a retry would "succeed" without the record on disk. With the broker's flusher (its
/// `LogDirHealth`), no later fsync succeeds: the record a producer would retry is never
/// acknowledged (the high watermark stays below it) and the directory reports offline.
#[test]
fn after_a_failed_fsync_a_retry_never_publishes_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let flusher = Flusher::start().unwrap();
    let config = LogConfig {
        flusher: Some(flusher.clone()),
        ..with_policy(1, i64::MAX)
    };
    let p = Partition::open("t", 0, dir.path(), config, Checkpointed::default(), T).unwrap();
    assert_eq!(append_policy(&p, 1), (0, Some(1)));
    p.sync_and_publish(1).unwrap();
    assert_eq!(p.offsets().high_watermark, 1);

    assert_eq!(append_policy(&p, 1), (1, Some(2)));
    flusher.health().fail_next_fsync();
    let first = p.sync_and_publish(2).unwrap_err().to_string();
    assert!(first.contains("fsync of"), "{first}");
    let retry = p.sync_and_publish(2).unwrap_err().to_string();
    assert!(retry.contains("log directory offline"), "{retry}");
    assert_eq!(p.durable_offset(), 1);
    assert_eq!(p.offsets().high_watermark, 1);
    // The full flush (a checkpoint's, shutdown's) fails too, so the recovery point stays put.
    let recovery_point = p.checkpoint_offsets().0;
    assert!(p.flush_and_snapshot().is_err());
    assert_eq!(p.checkpoint_offsets().0, recovery_point);
    assert!(flusher.health().offline_reason().is_some());
}
