use super::*;

fn entry(epoch: i32, start_offset: i64) -> EpochEntry {
    EpochEntry {
        epoch,
        start_offset,
    }
}

/// The example in Kafka's `LeaderEpochCheckpointFile` doc, byte for byte.
const KAFKA_EXAMPLE: &str = "0\n2\n0 1\n1 2\n";

#[test]
fn parses_and_renders_kafkas_example_byte_for_byte() {
    let entries = parse_leader_epoch_checkpoint(KAFKA_EXAMPLE).expect("valid");
    assert_eq!(entries, vec![entry(0, 1), entry(1, 2)]);
    assert_eq!(format_leader_epoch_checkpoint(&entries), KAFKA_EXAMPLE);
}

#[test]
fn renders_an_empty_cache_as_version_and_zero() {
    assert_eq!(format_leader_epoch_checkpoint(&[]), "0\n0\n");
    assert_eq!(parse_leader_epoch_checkpoint("0\n0\n"), Ok(vec![]));
}

#[test]
fn accepts_any_whitespace_between_fields() {
    assert_eq!(
        parse_leader_epoch_checkpoint("0\n1\n3 \t 1200\n"),
        Ok(vec![entry(3, 1200)])
    );
}

#[test]
fn refuses_malformed_files() {
    for bad in [
        "",
        "1\n0\n",
        "0\n",
        "0\nx\n",
        "0\n2\n0 0\n",
        "0\n1\n0 0\n1 5\n",
        "0\n1\n0 0 7\n",
        "0\n1\n0\n",
        "0\n1\na 0\n",
        "0\n1\n0 b\n",
        "0\n1\n\n",
        "0\n1\n99999999999 0\n",
    ] {
        assert!(
            parse_leader_epoch_checkpoint(bad).is_err(),
            "accepted {bad:?}"
        );
    }
}

#[test]
fn write_then_read_round_trips_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
    assert_eq!(
        read_leader_epoch_checkpoint(&path).expect("missing"),
        vec![]
    );
    let entries = vec![entry(0, 0), entry(3, 1200), entry(7, 4096)];
    write_leader_epoch_checkpoint(&path, &entries).expect("write");
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        "0\n3\n0 0\n3 1200\n7 4096\n"
    );
    assert_eq!(read_leader_epoch_checkpoint(&path).expect("read"), entries);
    write_leader_epoch_checkpoint(&path, &entries[..1]).expect("rewrite");
    assert_eq!(
        read_leader_epoch_checkpoint(&path).expect("read"),
        vec![entry(0, 0)]
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![LEADER_EPOCH_CHECKPOINT.to_string()]);
}

#[test]
fn a_garbled_file_is_a_malformed_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
    std::fs::write(&path, "0\n1\nnot numbers\n").expect("write");
    let err = read_leader_epoch_checkpoint(&path).expect_err("garbled");
    assert!(err.to_string().contains(LEADER_EPOCH_CHECKPOINT), "{err}");
}

/// What Apache Kafka 4.1.2 wrote for `golden-0` (one node: 3 records in leader epoch 0, a broker
/// restart, which re-elects the leader at epoch 2, then 2 more records).
const KAFKA_4_1_2_WRITTEN: &[u8] = b"0\n2\n0 0\n2 3\n";

#[test]
fn reads_and_rewrites_a_file_kafka_wrote() {
    let text = std::str::from_utf8(KAFKA_4_1_2_WRITTEN).expect("ascii");
    let entries = parse_leader_epoch_checkpoint(text).expect("Kafka's file");
    assert_eq!(entries, vec![entry(0, 0), entry(2, 3)]);
    assert_eq!(
        format_leader_epoch_checkpoint(&entries).as_bytes(),
        KAFKA_4_1_2_WRITTEN
    );
    let cache = crate::replica::replication::LeaderEpochCache::from_entries(entries)
        .expect("valid entries");
    // Epoch 1 never wrote: a follower asking for it learns epoch 0 ended at 3.
    assert_eq!(
        cache.end_offset_for(1, 5),
        crate::replica::replication::EpochEndOffset {
            leader_epoch: 0,
            end_offset: 3
        }
    );
    assert_eq!(cache.epoch_for_offset(4), Some(2));
}
