use super::*;
use crate::metadata::{ConfigResourceType, MetadataRecord, PartitionLeader};

/// A fresh metadata log for broker 1 (as `Broker::open` makes one, without the registration).
fn log() -> Arc<MetadataLog> {
    Arc::new(MetadataLog::new("cid", 1))
}

fn config_in(dir: &Path) -> Arc<Config> {
    Arc::new(Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    })
}

/// A follower holds some partitions of a topic only (`t-1`, `t-4`): they load, keep their topic
/// id and data, and the rebuilt image has exactly those partitions, led here.
#[test]
fn a_partition_set_that_is_not_0_to_n_loads() {
    use crate::record::build_batch;
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    let id = {
        let rm = ReplicaManager::open_adopted(config.clone(), log()).unwrap();
        let t = rm.create_topic_for_test("t", 5, &[]);
        let bytes = bytes::Bytes::from(build_batch(0, 1, (-1, -1, -1), &[(None, Some(b"four"))]));
        let header = crate::record::validate_batch(&bytes).unwrap();
        let settings = crate::replica::partition::AppendSettings {
            timestamp_type: crate::config::TimestampType::CreateTime,
            flush: false,
            origin: crate::replica::partition::AppendOrigin::Client,
        };
        t.partition(4)
            .unwrap()
            .append(&bytes, &header, settings, 1)
            .unwrap();
        rm.checkpoint(true).unwrap();
        t.id
    };
    for p in [0, 2, 3] {
        std::fs::remove_dir_all(dir.path().join(format!("t-{p}"))).unwrap();
    }
    let rm = ReplicaManager::open_adopted(config, log()).unwrap();
    let t = rm.topic("t").expect("topic loaded");
    assert_eq!(t.id, id);
    assert_eq!(t.partitions.keys().copied().collect::<Vec<_>>(), vec![1, 4]);
    assert!(rm.partition("t", 0).is_none());
    let (slice, offsets) = rm.partition("t", 4).unwrap().read(0, 1 << 20).unwrap();
    assert_eq!(offsets.high_watermark, 1);
    assert!(holds(&slice.bytes, b"four"));
    let image = rm.image();
    let ti = image.topic("t").unwrap();
    assert_eq!(ti.id, id);
    assert_eq!(
        ti.partitions.keys().copied().collect::<Vec<_>>(),
        vec![1, 4]
    );
    assert_eq!(
        image.leader_for(1, "t", 4),
        PartitionLeader::Local { leader_epoch: 0 }
    );
    assert_eq!(image.leader_for(1, "t", 2), PartitionLeader::Unknown);
}

/// Committed records drive the hosted logs: creation opens them, growth adds the new ones, a
/// config change reaches the topic, deletion renames them away; the image agrees.
#[test]
fn the_hosted_logs_follow_the_committed_records() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    let rm = ReplicaManager::open_adopted(config.clone(), log()).unwrap();
    let id = rm
        .create_topic_for_test("a", 2, &[("retention.ms", "1000")])
        .id;
    assert_eq!(rm.topic("a").unwrap().config.retention_ms, 1000);
    let grown = crate::replica::metadata_host::topic_records(1, "a", id, 2..3);
    rm.apply_committed(1, grown[1..].to_vec());
    assert_eq!(rm.topic("a").unwrap().partitions.len(), 3);
    assert!(dir.path().join("a-2").join(PARTITION_METADATA).exists());
    assert_eq!(rm.image().topic("a").unwrap().partition_count(), 3);
    let config_record = |value: &str| MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: "a".into(),
        name: "retention.ms".into(),
        value: Some(value.into()),
    };
    rm.apply_committed(2, vec![config_record("2000")]);
    assert_eq!(rm.topic("a").unwrap().config.retention_ms, 2000);
    assert_eq!(
        rm.image()
            .configs(ConfigResourceType::Topic, "a")
            .get("retention.ms")
            .map(String::as_str),
        Some("2000")
    );
    rm.apply_committed(3, vec![MetadataRecord::RemoveTopic { topic_id: id }]);
    assert!(rm.topic("a").is_none() && rm.topic_by_id(id).is_none());
    assert!(rm.image().topic("a").is_none());
    assert!(!dir.path().join("a-0").exists());
}

#[test]
fn partition_dir_names_split_at_the_last_dash() {
    assert_eq!(
        parse_partition_dir("my-topic-12"),
        Some(("my-topic".into(), 12))
    );
    assert_eq!(parse_partition_dir("t-0"), Some(("t".into(), 0)));
    assert_eq!(parse_partition_dir("t-x"), None);
    assert_eq!(parse_partition_dir("nodash"), None);
    assert_eq!(parse_partition_dir("t-0.abc-delete"), None);
}

/// Open descriptors of this process under `dir` (Linux `/proc/self/fd`).
fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir))
        .count()
}

fn holds(bytes: &[u8], value: &[u8]) -> bool {
    bytes.windows(value.len()).any(|w| w == value)
}

/// `sluice.log.open.files.max` bounds the descriptors of a broker's partitions, when a topic is
/// created, while every partition is appended to and read, at the final flush and at reload.
#[test]
fn partitions_share_the_configured_descriptor_bound() {
    use crate::config::TimestampType;
    use crate::record::{build_batch, validate_batch};
    use crate::replica::partition::{AppendOrigin, AppendSettings};
    use bytes::Bytes;

    let dir = tempfile::tempdir().unwrap();
    let config = Arc::new(Config {
        data_dir: dir.path().to_path_buf(),
        log_open_files_max: 50,
        ..Config::default()
    });
    let rm = ReplicaManager::open_adopted(config.clone(), log()).unwrap();
    assert_eq!(rm.file_cache().capacity(), 50);
    rm.create_topic_for_test("t", 200, &[]);
    assert_eq!(fds_under(dir.path()), 50);
    let settings = || AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush: false,
        origin: AppendOrigin::Client,
    };
    for round in 0..3i64 {
        for p in 0..200 {
            let value = format!("{p}-{round}");
            let bytes = Bytes::from(build_batch(
                0,
                1,
                (-1, -1, -1),
                &[(None, Some(value.as_bytes()))],
            ));
            let header = validate_batch(&bytes).unwrap();
            let partition = rm.partition("t", p).unwrap();
            let out = partition.append(&bytes, &header, settings(), 1).unwrap();
            assert_eq!(out.base_offset, round);
        }
        assert!(fds_under(dir.path()) <= 50);
    }
    for p in 0..200 {
        let (slice, _) = rm.partition("t", p).unwrap().read(2, 1 << 20).unwrap();
        let want = format!("{p}-2");
        assert!(holds(&slice.bytes, want.as_bytes()), "partition {p}");
    }
    rm.checkpoint(true).unwrap();
    assert!(fds_under(dir.path()) <= 50);
    drop(rm);
    assert_eq!(fds_under(dir.path()), 0);
    let rm = ReplicaManager::open_adopted(config, log()).unwrap();
    assert!(fds_under(dir.path()) <= 50);
    assert_eq!(rm.topic("t").unwrap().partitions.len(), 200);
    let (slice, offsets) = rm.partition("t", 199).unwrap().read(0, 1 << 20).unwrap();
    assert_eq!(offsets.high_watermark, 3);
    assert!(holds(&slice.bytes, b"199-0") && holds(&slice.bytes, b"199-2"));
}

/// Kafka's rule during controlled shutdown: a follower replica whose ISR no longer names this
/// broker stops fetching; before the controlled shutdown it keeps fetching (to rejoin the ISR).
#[tokio::test]
async fn in_controlled_shutdown_a_follower_out_of_the_isr_stops_fetching() {
    use crate::metadata::records::{PartitionChange, PartitionRecord};
    let dir = tempfile::tempdir().unwrap();
    let rm = ReplicaManager::open_adopted(config_in(dir.path()), log()).unwrap();
    let id = uuid::Uuid::from_u128(7);
    let mut records = vec![MetadataRecord::Topic {
        name: "f".into(),
        topic_id: id,
    }];
    for p in 0..2 {
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: id,
            replicas: vec![2, 1],
            isr: vec![2, 1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 2,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: vec![],
            last_known_elr: vec![],
        }));
    }
    rm.apply_committed(1, records);
    let followed = |rm: &ReplicaManager| rm.fetchers().followed().remove(&2).unwrap_or_default();
    assert_eq!(
        followed(&rm),
        vec![("f".to_string(), 0), ("f".to_string(), 1)]
    );
    let shrink = |p: i32| {
        let mut c = PartitionChange::none(id, p);
        c.isr = Some(vec![2]);
        MetadataRecord::PartitionChange(c)
    };
    rm.apply_committed(2, vec![shrink(0)]);
    assert_eq!(
        followed(&rm),
        vec![("f".to_string(), 0), ("f".to_string(), 1)]
    );
    rm.begin_controlled_shutdown();
    rm.apply_committed(3, vec![shrink(1)]);
    assert_eq!(followed(&rm), vec![("f".to_string(), 0)]);
}

fn append_values(p: &Partition, values: &[&[u8]]) {
    let refs: Vec<crate::record::KeyValue<'_>> = values.iter().map(|v| (None, Some(*v))).collect();
    let bytes = bytes::Bytes::from(crate::record::build_batch(0, 1, (-1, -1, -1), &refs));
    let header = crate::record::validate_batch(&bytes).unwrap();
    let settings = crate::replica::partition::AppendSettings {
        timestamp_type: crate::config::TimestampType::CreateTime,
        flush: false,
        origin: crate::replica::partition::AppendOrigin::Client,
    };
    p.append(&bytes, &header, settings, 1).unwrap();
}

/// `replication-offset-checkpoint` holds every hosted partition's high watermark in Kafka's
/// offset-checkpoint text; a replica opens with its entry (bounded to its log, the log start when
/// absent), and a lone leader's high watermark is its log end again as soon as it leads.
#[test]
fn high_watermarks_are_checkpointed_in_kafkas_format_and_opened_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_in(dir.path());
    let path = dir.path().join(REPLICATION_OFFSET_CHECKPOINT);
    {
        let rm = ReplicaManager::open_adopted(config.clone(), log()).unwrap();
        let t = rm.create_topic_for_test("t", 3, &[]);
        for value in [b"a", b"b", b"c"] {
            append_values(t.partition(0).unwrap(), &[value]);
        }
        append_values(t.partition(1).unwrap(), &[b"d"]);
        rm.checkpoint_high_watermarks().unwrap();
        let mut want = OffsetMap::new();
        want.insert(("t".to_string(), 0), 3);
        want.insert(("t".to_string(), 1), 1);
        want.insert(("t".to_string(), 2), 0);
        assert_eq!(checkpoint::read_offset_checkpoint(&path).unwrap(), want);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n3\nt 0 3\nt 1 1\nt 2 0\n"
        );
        rm.checkpoint(true).unwrap();
    }
    // As a restarted follower would find it: t-0 committed up to 1 of its 3 records, t-1 past its
    // log end (a log cut by recovery), t-2 without an entry.
    std::fs::write(&path, "0\n2\nt 0 1\nt 1 9\n").unwrap();
    {
        // Loaded, not placed by an image yet: the checkpoint's values.
        let rm = ReplicaManager::open_unlogged(config.clone(), log()).unwrap();
        let hw = |p: i32| rm.partition("t", p).unwrap().offsets().high_watermark;
        assert_eq!((hw(0), hw(1), hw(2)), (1, 1, 0));
        assert_eq!(rm.partition("t", 0).unwrap().offsets().log_end_offset, 3);
        let (slice, _) = rm.partition("t", 0).unwrap().read(0, 1 << 20).unwrap();
        assert!(holds(&slice.bytes, b"a"));
        assert!(!holds(&slice.bytes, b"b"), "read above the checkpointed HW");
    }
    // A single node leads every partition with an ISR of itself: every record is visible at once.
    let rm = ReplicaManager::open_adopted(config, log()).unwrap();
    let p = rm.partition("t", 0).unwrap();
    assert_eq!(p.offsets().high_watermark, 3);
    let (slice, _) = p.read(0, 1 << 20).unwrap();
    assert!(holds(&slice.bytes, b"c"));
    assert_eq!(rm.partition("t", 1).unwrap().offsets().high_watermark, 1);
}
