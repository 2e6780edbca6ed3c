//! Checkpoints that contradict the log (a log start offset or a recovery point past its end):
//! warned about, never a cause of lost data.

use super::*;

#[test]
fn a_log_start_checkpoint_beyond_the_log_end_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(1000);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    for i in 0..20 {
        push(&mut log, 3, i, 50, 0);
    }
    log.flush().unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() > 2);
    drop(log);
    let (log, report) =
        PartitionLog::open(dir.path(), config.clone(), 60, Some(1_000_000), 0).unwrap();
    assert_eq!(log.log_start_offset(), 0);
    assert_eq!(log.log_end_offset(), 60);
    assert_eq!(log.segment_base_offsets(), bases);
    assert!(report.quarantined.is_empty());
    assert_eq!(log.read(0, 1, i64::MAX).unwrap().first_batch_base_offset, 0);
    drop(log);
    // A start inside the log is honoured as before.
    let (log, _) = PartitionLog::open(dir.path(), config, 60, Some(9), 0).unwrap();
    assert_eq!(log.log_start_offset(), 9);
}

#[test]
fn a_recovery_point_beyond_the_log_end_revalidates_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(1000);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    for i in 0..20 {
        push(&mut log, 3, i, 50, 0);
    }
    log.flush().unwrap();
    let active = *log.segment_base_offsets().last().unwrap();
    drop(log);
    // Damage a record body in the active segment (its header stays valid: only the CRC tells).
    let path = dir.path().join(file_name(active, "log"));
    let mut data = std::fs::read(&path).unwrap();
    let at = data.len() - 5;
    data[at] ^= 0xff;
    std::fs::write(&path, &data).unwrap();
    let (log, report) = open(dir.path(), config, 1_000_000);
    assert_eq!(report.recovered_segments, 1);
    assert_eq!(log.log_end_offset(), 57);
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(report.quarantined[0].from_offset, 57);
}
