//! Committed entries and snapshots reach the image and the hosted logs; topics on disk the log
//! does not name are adopted with their ids or, under a name the log gives another id, set aside
//! without losing a byte.

use std::path::Path;
use std::sync::Arc;

use uuid::Uuid;

use super::*;
use crate::config::Config;
use crate::metadata::{MetadataLog, PartitionLeader};

fn config_in(dir: &Path) -> Arc<Config> {
    Arc::new(Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    })
}

fn log() -> Arc<MetadataLog> {
    Arc::new(MetadataLog::new("cid", 1))
}

/// Topic `a` (2 partitions, cleanup.policy=compact) created the single-node way, with one record
/// in `a-1`; returns its id.
fn legacy_topic(config: &Arc<Config>) -> Uuid {
    let rm = ReplicaManager::open_adopted(config.clone(), log()).expect("open");
    let t = rm.create_topic_for_test("a", 2, &[("cleanup.policy", "compact")]);
    let bytes = bytes::Bytes::from(crate::record::build_batch(
        0,
        1,
        (-1, -1, -1),
        &[(Some(b"k".as_slice()), Some(b"kept".as_slice()))],
    ));
    let header = crate::record::validate_batch(&bytes).expect("batch");
    let settings = crate::replica::partition::AppendSettings {
        timestamp_type: crate::config::TimestampType::CreateTime,
        flush: false,
        origin: crate::replica::partition::AppendOrigin::Client,
    };
    t.partition(1)
        .expect("a-1")
        .append(&bytes, &header, settings, 1)
        .expect("append");
    rm.checkpoint(true).expect("checkpoint");
    t.id
}

fn high_watermark(rm: &ReplicaManager, topic: &str, p: i32) -> i64 {
    let (_, offsets) = rm
        .partition(topic, p)
        .expect("hosted")
        .read(0, 1 << 20)
        .expect("read");
    offsets.high_watermark
}

#[test]
fn an_unlogged_topic_is_adopted_with_its_id_and_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_in(dir.path());
    let id = legacy_topic(&config);
    let rm = ReplicaManager::open_unlogged(config, log()).expect("open");
    assert!(rm.image().topic("a").is_none(), "nothing committed at open");
    assert_eq!(rm.topic("a").map(|t| t.id), Some(id), "but hosted");
    let unlogged = rm.unlogged_topics();
    assert!(unlogged.strays.is_empty());
    assert!(unlogged.adopt.contains(&MetadataRecord::Topic {
        name: "a".into(),
        topic_id: id
    }));
    assert!(unlogged.adopt.contains(&MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: "a".into(),
        name: "cleanup.policy".into(),
        value: Some("compact".into()),
    }));
    rm.apply_committed(7, unlogged.adopt);
    let image = rm.image();
    let topic = image.topic("a").expect("adopted");
    assert_eq!(topic.id, id);
    assert_eq!(topic.partition_count(), 2);
    assert_eq!(
        image.leader_for(1, "a", 1),
        PartitionLeader::Local { leader_epoch: 0 }
    );
    assert_eq!(high_watermark(&rm, "a", 1), 1, "the record is still there");
    assert_eq!(rm.unlogged_topics(), Unlogged::default());
}

/// The log, not `topic-configs.json`, says what a logged topic's overrides are: a replay that
/// names topic `a` without its file's `cleanup.policy=compact` leaves it at the default.
#[test]
fn a_replayed_topic_takes_the_logs_overrides_not_the_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_in(dir.path());
    let id = legacy_topic(&config);
    let rm = ReplicaManager::open_unlogged(config, log()).expect("open");
    assert!(
        rm.topic("a").expect("hosted").config.cleanup_compact,
        "from the file"
    );
    rm.apply_committed(3, topic_records(1, "a", id, 0..2));
    let hosted = rm.topic("a").expect("hosted");
    assert_eq!(hosted.id, id);
    assert!(!hosted.config.cleanup_compact, "the log names no override");
    assert!(hosted.config.overrides.is_empty());
    assert_eq!(high_watermark(&rm, "a", 1), 1, "the same log, data kept");
}

#[test]
fn a_topic_whose_name_the_log_gives_another_id_is_renamed_aside_never_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_in(dir.path());
    let disk_id = legacy_topic(&config);
    let rm = ReplicaManager::open_unlogged(config.clone(), log()).expect("open");
    let logged_id = Uuid::from_u128(42);
    rm.apply_committed(3, topic_records(1, "a", logged_id, 0..2));
    assert_eq!(rm.topic("a").map(|t| t.id), Some(logged_id));
    assert_eq!(high_watermark(&rm, "a", 1), 0, "a fresh log");
    for p in 0..2 {
        let aside = dir.path().join(format!("a-{p}.stray+{}", disk_id.simple()));
        assert!(aside.is_dir(), "{} kept", aside.display());
        assert_eq!(
            crate::replica::manager::read_partition_metadata(&aside),
            Some(disk_id)
        );
    }
    let segment_bytes: u64 =
        std::fs::read_dir(dir.path().join(format!("a-1.stray+{}", disk_id.simple())))
            .expect("read aside")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
    assert!(segment_bytes > 0, "the stray's records are kept");
    assert_eq!(rm.unlogged_topics(), Unlogged::default());
    rm.checkpoint(true).expect("checkpoint");
    drop(rm);
    // The renamed directories are not loaded again.
    let rm = ReplicaManager::open_unlogged(config, log()).expect("reopen");
    assert_eq!(rm.topic("a").map(|t| t.id), Some(logged_id));
}

#[test]
fn a_snapshot_replaces_the_topics_it_does_not_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rm = ReplicaManager::open_unlogged(config_in(dir.path()), log()).expect("open");
    let a = Uuid::from_u128(1);
    let b = Uuid::from_u128(2);
    rm.apply_committed(1, topic_records(1, "a", a, 0..1));
    rm.load_committed_snapshot(5, topic_records(1, "b", b, 0..3));
    let image = rm.image();
    assert!(image.topic("a").is_none());
    assert_eq!(
        image.topic("b").map(|t| (t.id, t.partition_count())),
        Some((b, 3))
    );
    assert!(rm.topic("a").is_none());
    assert_eq!(rm.topic("b").map(|t| t.partitions.len()), Some(3));
}
