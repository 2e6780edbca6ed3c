//! The partition's replication side on real logs: follower appends keep the leader's offsets and
//! epochs, truncation cuts the epoch cache and rebuilds producer state, the leader's high
//! watermark waits for the ISR, the diverging-epoch check, and the epoch cache's file.

use super::*;
use crate::record::build_batch;
use crate::replica::replication::leader::{LeaderAndIsr, LeaderConfig};

const T: i64 = 1_700_000_000_000;

fn open(dir: &Path) -> Partition {
    Partition::open(
        "t",
        0,
        dir,
        LogConfig::default(),
        Checkpointed::default(),
        T,
    )
    .unwrap()
}

/// A batch at `base` of `n` records, stamped with `epoch`, from producer `pid` at sequence `seq`
/// (`pid` -1: not idempotent).
fn leader_batch(base: i64, n: usize, epoch: i32, pid: i64, seq: i32) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..n).map(|i| format!("v{i}").into_bytes()).collect();
    let recs: Vec<record::KeyValue<'_>> = values.iter().map(|v| (None, Some(&v[..]))).collect();
    let (pid, pe, seq) = if pid < 0 { (-1, -1, -1) } else { (pid, 0, seq) };
    let mut b = build_batch(base, T, (pid, pe, seq), &recs);
    record::set_partition_leader_epoch(&mut b[..BATCH_HEADER_LEN], epoch);
    // The CRC covers everything after it, the leader epoch is before: still valid.
    b
}

fn epochs(p: &Partition) -> Vec<(i32, i64)> {
    p.state
        .read()
        .epochs
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

#[test]
fn a_follower_keeps_the_leaders_offsets_epochs_and_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.make_follower(1, 3);
    let mut fetched = leader_batch(0, 3, 0, 42, 0);
    fetched.extend(leader_batch(3, 2, 2, 42, 3));
    // A partial batch at the end of a fetch answer is dropped, not appended.
    let partial = leader_batch(5, 2, 2, 42, 5);
    fetched.extend(&partial[..partial.len() - 7]);
    let a = p.append_as_follower(&fetched, T).unwrap();
    assert_eq!((a.batches, a.log_end_offset), (2, 5));
    assert_eq!(epochs(&p), vec![(0, 0), (2, 3)]);
    let producers = p.active_producers();
    assert_eq!(producers.len(), 1);
    assert_eq!(producers[0].0, 42);
    // Consumers see nothing until the leader's high watermark says so.
    assert_eq!(p.offsets().high_watermark, 0);
    p.update_follower_offsets(4, 0);
    assert_eq!(p.offsets().high_watermark, 4);
    // A leader high watermark past our end is capped at it.
    p.update_follower_offsets(99, 0);
    assert_eq!(p.offsets().high_watermark, 5);
    // The same batches again (a refetch) are skipped.
    let again = p.append_as_follower(&fetched, T).unwrap();
    assert_eq!((again.batches, again.log_end_offset), (0, 5));
    // The bytes are the leader's, epochs included.
    let read = p.fetch_records_for_replica(0, 1 << 20, true).unwrap();
    let bytes = read.records.into_bytes().unwrap();
    assert_eq!(&bytes[..], &fetched[..bytes.len()]);
    // The checkpoint is Kafka's file, and a reopen reads it back.
    let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
    assert_eq!(text, "0\n2\n0 0\n2 3\n");
    drop(p);
    let p = open(dir.path());
    assert_eq!(epochs(&p), vec![(0, 0), (2, 3)]);
}

#[test]
fn a_batch_overlapping_the_log_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.append_as_follower(&leader_batch(0, 3, 0, -1, 0), T)
        .unwrap();
    let err = p.append_as_follower(&leader_batch(2, 3, 0, -1, 0), T);
    assert!(
        err.is_err(),
        "a batch starting inside the log must not be appended"
    );
    assert_eq!(p.offsets().log_end_offset, 3);
    // A gap (the leader compacted) is kept as the leader has it.
    p.append_as_follower(&leader_batch(10, 2, 0, -1, 0), T)
        .unwrap();
    assert_eq!(p.offsets().log_end_offset, 12);
}

#[test]
fn truncation_cuts_the_epochs_and_rebuilds_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    let mut fetched = leader_batch(0, 4, 0, 7, 0);
    fetched.extend(leader_batch(4, 4, 1, 7, 4));
    fetched.extend(leader_batch(8, 4, 1, 9, 0));
    p.append_as_follower(&fetched, T).unwrap();
    assert_eq!(p.active_producers().len(), 2);
    p.update_follower_offsets(12, 0);
    // The leader says epoch 0 ended at 4: everything from 4 goes, producer 9 with it.
    let point = p.truncation_point(EpochEndOffset {
        leader_epoch: 0,
        end_offset: 4,
    });
    assert_eq!(point.offset, 4);
    assert!(point.truncation_completed);
    assert_eq!(p.truncate_to(point.offset).unwrap(), 4);
    assert_eq!(epochs(&p), vec![(0, 0)]);
    assert_eq!(p.offsets().high_watermark, 4);
    let producers = p.active_producers();
    assert_eq!(producers.len(), 1);
    assert_eq!(producers[0].0, 7);
    assert_eq!(producers[0].1.last_sequence(), 3);
    drop(p);
    let p = open(dir.path());
    assert_eq!(p.offsets().log_end_offset, 4);
    assert_eq!(epochs(&p), vec![(0, 0)]);
}

#[test]
fn a_missing_checkpoint_is_rebuilt_from_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    let mut fetched = leader_batch(0, 2, 3, -1, 0);
    fetched.extend(leader_batch(2, 2, 5, -1, 0));
    p.append_as_follower(&fetched, T).unwrap();
    drop(p);
    std::fs::remove_file(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
    let p = open(dir.path());
    assert_eq!(epochs(&p), vec![(3, 0), (5, 2)]);
    assert!(dir.path().join(LEADER_EPOCH_CHECKPOINT).exists());
}

fn leader_config() -> LeaderConfig {
    LeaderConfig {
        replica_lag_time_max_ms: 10_000,
        min_insync_replicas: 2,
    }
}

fn client_append(p: &Partition, n: usize) -> i64 {
    let bytes = Bytes::from(leader_batch(0, n, 0, -1, 0));
    let header = record::validate_batch(&bytes).unwrap();
    let settings = AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush: false,
        origin: AppendOrigin::Client,
    };
    p.append(&bytes, &header, settings, T).unwrap().base_offset
}

fn fetch(replica: i32, offset: i64) -> FollowerFetch {
    FollowerFetch {
        replica_id: replica,
        current_leader_epoch: Some(4),
        fetch_offset: offset,
        log_start_offset: 0,
    }
}

#[test]
fn the_leaders_high_watermark_waits_for_every_isr_member() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    let reg = LeaderAndIsr {
        leader_epoch: 4,
        partition_epoch: 1,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
    };
    assert!(p
        .make_leader(1, leader_config(), &reg, BTreeSet::new(), T)
        .is_empty());
    assert_eq!(epochs(&p), vec![(4, 0)]);
    assert_eq!(p.check_acks_all_append(), Ok(()));
    client_append(&p, 5);
    assert_eq!(p.offsets().high_watermark, 0, "no follower has it yet");
    assert_eq!(
        p.check_replica_fetch(2, 4, 0, -1),
        ReplicaFetchCheck::Read,
        "a follower reads past the high watermark"
    );
    let read = p.fetch_records_for_replica(0, 1 << 20, true).unwrap();
    assert!(!read.records.is_empty());
    p.on_replica_fetch(fetch(2, 5), T + 1);
    assert_eq!(p.offsets().high_watermark, 0, "broker 3 has not fetched");
    p.on_replica_fetch(fetch(3, 5), T + 2);
    assert_eq!(p.offsets().high_watermark, 5);
    let view = p.replication_view().unwrap();
    assert_eq!((view.high_watermark, view.maximal_isr_size), (5, 3));
    // Stale and future epochs are refused; so is a broker that is not a replica.
    assert_eq!(
        p.check_replica_fetch(2, 3, 5, 4),
        ReplicaFetchCheck::Error(74)
    );
    assert_eq!(
        p.check_replica_fetch(2, 5, 5, 4),
        ReplicaFetchCheck::Error(75)
    );
    assert_eq!(
        p.check_replica_fetch(9, 4, 5, 4),
        ReplicaFetchCheck::Error(6)
    );
    // Stepping down: no replication view, waiting produces fail over.
    p.make_follower(2, 5);
    assert_eq!(p.replication_view(), None);
    assert_eq!(
        p.check_replica_fetch(3, 5, 5, 4),
        ReplicaFetchCheck::Error(6)
    );
}

#[test]
fn a_follower_whose_epoch_ended_earlier_is_told_where() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.append_as_follower(&leader_batch(0, 10, 0, -1, 0), T)
        .unwrap();
    p.append_as_follower(&leader_batch(10, 10, 2, -1, 0), T)
        .unwrap();
    let reg = LeaderAndIsr {
        leader_epoch: 4,
        partition_epoch: 1,
        replicas: vec![1, 2],
        isr: vec![1, 2],
    };
    p.make_leader(1, leader_config(), &reg, BTreeSet::new(), T);
    assert_eq!(epochs(&p), vec![(0, 0), (2, 10), (4, 20)]);
    // The follower wrote in epoch 1, which this log never had: epoch 0 ended at 10.
    assert_eq!(
        p.check_replica_fetch(2, 4, 15, 1),
        ReplicaFetchCheck::Diverging(EpochEndOffset {
            leader_epoch: 0,
            end_offset: 10
        })
    );
    // A follower at 20 in epoch 2 continues the log.
    assert_eq!(p.check_replica_fetch(2, 4, 20, 2), ReplicaFetchCheck::Read);
    // Epoch 2 ended at 20 here: a follower claiming 25 in epoch 2 diverges at 20.
    assert_eq!(
        p.check_replica_fetch(2, 4, 25, 2),
        ReplicaFetchCheck::Diverging(EpochEndOffset {
            leader_epoch: 2,
            end_offset: 20
        })
    );
}

#[test]
fn a_replayed_older_leadership_does_not_rewrite_the_epoch_cache() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    let mut fetched = leader_batch(0, 5, 3, -1, 0);
    fetched.extend(leader_batch(5, 5, 6, -1, 0));
    p.append_as_follower(&fetched, T).unwrap();
    // Startup replays this broker's leadership in epoch 1 (long past): the cache keeps its history.
    let reg = |epoch: i32| LeaderAndIsr {
        leader_epoch: epoch,
        partition_epoch: epoch,
        replicas: vec![1, 2],
        isr: vec![1, 2],
    };
    p.make_leader(1, leader_config(), &reg(1), BTreeSet::new(), T);
    assert_eq!(epochs(&p), vec![(3, 0), (6, 5)]);
    // A leadership newer than everything here starts at the log end.
    p.make_leader(1, leader_config(), &reg(8), BTreeSet::new(), T);
    assert_eq!(epochs(&p), vec![(3, 0), (6, 5), (8, 10)]);
}

#[test]
fn a_truncation_at_the_log_end_drops_an_epoch_that_wrote_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.append_as_follower(&leader_batch(0, 5, 3, -1, 0), T)
        .unwrap();
    // Led epoch 4 briefly without writing, then follows a leader whose epoch 3 ends at 5.
    let reg = LeaderAndIsr {
        leader_epoch: 4,
        partition_epoch: 4,
        replicas: vec![1, 2],
        isr: vec![1, 2],
    };
    p.make_leader(1, leader_config(), &reg, BTreeSet::new(), T);
    assert_eq!(epochs(&p), vec![(3, 0), (4, 5)]);
    p.make_follower(2, 5);
    let point = p.truncation_point(EpochEndOffset {
        leader_epoch: 3,
        end_offset: 5,
    });
    assert_eq!(point.offset, 5);
    assert_eq!(p.truncate_to(point.offset).unwrap(), 5);
    assert_eq!(
        epochs(&p),
        vec![(3, 0)],
        "the next fetch says epoch 3, which the leader has"
    );
    assert_eq!(p.latest_epoch(), Some(3));
}

/// A fetch answered by the old leader after the image made this replica the leader (seen in a
/// 3-node durability run: the old epoch's batches landed after the new epoch's start, and the
/// followers were told to diverge, truncated and fetched them again, for half a minute). The
/// answer is dropped: no append, no truncation, no high watermark from the old leader.
#[test]
fn a_fetch_answer_that_arrives_after_becoming_leader_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.make_follower(2, 4);
    p.append_as_follower(&leader_batch(0, 3, 4, -1, 0), T)
        .unwrap();
    let sent = FetchedFrom {
        leader_id: 2,
        leader_epoch: 4,
        fetch_offset: 3,
    };
    let reg = LeaderAndIsr {
        leader_epoch: 5,
        partition_epoch: 2,
        replicas: vec![1, 2],
        isr: vec![1, 2],
    };
    p.make_leader(1, leader_config(), &reg, BTreeSet::new(), T);
    let late = leader_batch(3, 2, 4, -1, 0);
    assert!(p.append_as_follower_of(sent, &late, T).unwrap().is_none());
    assert_eq!(p.offsets().log_end_offset, 3);
    assert_eq!(epochs(&p), vec![(4, 0), (5, 3)]);
    assert_eq!(p.truncate_as_follower_of(sent, 1).unwrap(), None);
    assert!(!p.truncate_fully_as_follower_of(sent, 0).unwrap());
    assert_eq!(p.offsets().log_end_offset, 3);
    p.update_follower_offsets(3, 0);
    assert_eq!(
        p.offsets().high_watermark,
        0,
        "a leader keeps its own high watermark"
    );

    // Still following as the fetch was sent: applied. Not at the fetch offset any more (the log
    // moved meanwhile), or another leader or epoch: dropped.
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path());
    p.make_follower(2, 4);
    let at_zero = FetchedFrom {
        fetch_offset: 0,
        ..sent
    };
    let first = p.append_as_follower_of(at_zero, &leader_batch(0, 3, 4, -1, 0), T);
    assert_eq!(first.unwrap().map(|a| a.log_end_offset), Some(3));
    let again = p.append_as_follower_of(at_zero, &leader_batch(0, 3, 4, -1, 0), T);
    assert!(again.unwrap().is_none());
    let other_leader = FetchedFrom {
        leader_id: 3,
        ..sent
    };
    assert!(p
        .append_as_follower_of(other_leader, &late, T)
        .unwrap()
        .is_none());
    p.make_follower(2, 6);
    assert_eq!(p.truncate_as_follower_of(sent, 1).unwrap(), None);
    let current = FetchedFrom {
        leader_epoch: 6,
        ..sent
    };
    // Applied (cut at the start of the batch holding offset 1).
    assert_eq!(p.truncate_as_follower_of(current, 1).unwrap(), Some(0));
}
