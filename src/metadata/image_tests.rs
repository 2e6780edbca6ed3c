use super::*;
use crate::metadata::log::MetadataLog;
use std::collections::BTreeSet;

fn register(id: i32, epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBroker {
        broker_id: id,
        incarnation_id: Uuid::from_u128(id as u128),
        broker_epoch: epoch,
        endpoints: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: format!("127.0.0.{id}"),
            port: 9092,
            security_protocol: 0,
        }],
        features: vec![],
        rack: Some(format!("r{id}")),
        fenced,
        in_controlled_shutdown: false,
    })
}

fn partition(topic_id: Uuid, p: i32, replicas: &[i32], leader: i32) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id: p,
        topic_id,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader,
        leader_epoch: 0,
        partition_epoch: 0,
        elr: vec![],
        last_known_elr: vec![],
    })
}

fn topic(name: &str, id: Uuid) -> MetadataRecord {
    MetadataRecord::Topic {
        name: name.into(),
        topic_id: id,
    }
}

fn change(topic_id: Uuid, p: i32, leader: i32, isr: Option<Vec<i32>>) -> MetadataRecord {
    MetadataRecord::PartitionChange(PartitionChange {
        partition_id: p,
        topic_id,
        isr,
        leader,
        replicas: None,
        removing_replicas: None,
        adding_replicas: None,
        elr: None,
        last_known_elr: None,
    })
}

const T: Uuid = Uuid::from_u128(0xabc);

fn two_brokers_one_topic() -> MetadataImage {
    let (image, _) = MetadataImage::empty("cid", 1).apply(&[
        register(1, 10, false),
        register(2, 20, false),
        topic("t", T),
        partition(T, 0, &[1, 2], 1),
        partition(T, 1, &[2, 1], 2),
    ]);
    image
}

#[test]
fn records_build_brokers_topics_and_partitions() {
    let image = two_brokers_one_topic();
    assert_eq!(image.offset, 5);
    assert_eq!(image.cluster_id, "cid");
    let b2 = image.broker(2).expect("broker 2");
    assert_eq!(b2.epoch, 20);
    assert_eq!(b2.rack.as_deref(), Some("r2"));
    assert_eq!(
        b2.endpoint("PLAINTEXT").map(|e| e.host.as_str()),
        Some("127.0.0.2")
    );
    assert_eq!(b2.endpoint("SSL"), None);
    let t = image.topic("t").expect("topic");
    assert_eq!(t.id, T);
    assert_eq!(t.partition_count(), 2);
    assert_eq!(image.topic_by_id(T).map(|t| t.name.as_str()), Some("t"));
    assert_eq!(
        image.partition("t", 1).map(|p| p.replicas.clone()),
        Some(vec![2, 1])
    );
}

/// The lookup Produce/Fetch/ListOffsets use: another broker's leadership is NOT_LEADER_OR_FOLLOWER
/// here, this broker's is local with its epoch, an unknown partition is unknown.
#[test]
fn leader_lookup_tells_local_remote_none_and_unknown_apart() {
    let image = two_brokers_one_topic();
    assert_eq!(
        image.leader_for(1, "t", 0),
        PartitionLeader::Local { leader_epoch: 0 }
    );
    assert_eq!(
        image.leader_for(1, "t", 1),
        PartitionLeader::Remote {
            leader: 2,
            leader_epoch: 0
        }
    );
    assert_eq!(image.leader_for(1, "t", 2), PartitionLeader::Unknown);
    assert_eq!(image.leader_for(1, "u", 0), PartitionLeader::Unknown);
    let (offline, _) = image.apply(&[change(T, 1, NO_LEADER, Some(vec![]))]);
    assert_eq!(offline.leader_for(1, "t", 1), PartitionLeader::None);
}

#[test]
fn partition_change_bumps_epochs_as_kafka() {
    let image = two_brokers_one_topic();
    // ISR shrink only: partition epoch up, leader epoch kept.
    let (a, delta) = image.apply(&[change(T, 0, NO_LEADER_CHANGE, Some(vec![1]))]);
    let p = a.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 0, 1));
    assert_eq!(p.isr, vec![1]);
    assert!(delta.changed_partitions.contains(&(T, 0)));
    // New leader: both epochs up.
    let (b, _) = a.apply(&[change(T, 0, 2, Some(vec![2]))]);
    let p = b.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));
    // The same leader named again: the leader epoch still goes up (Kafka's merge, and
    // ControllerState's: a broker's image must not lag the controller's epoch).
    let (c, _) = b.apply(&[change(T, 0, 2, None)]);
    let p = c.partition("t", 0).unwrap();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 2, 3));
    // The old image is untouched.
    assert_eq!(image.partition("t", 0).unwrap().isr, vec![1, 2]);
}

#[test]
fn fencing_needs_the_current_broker_epoch() {
    let image = two_brokers_one_topic();
    let (a, delta) = image.apply(&[MetadataRecord::FenceBroker { id: 2, epoch: 19 }]);
    assert!(!a.broker(2).unwrap().fenced, "stale epoch ignored");
    assert!(delta.changed_brokers.is_empty());
    let (b, delta) = a.apply(&[MetadataRecord::FenceBroker { id: 2, epoch: 20 }]);
    assert!(b.broker(2).unwrap().fenced);
    assert_eq!(
        delta.changed_brokers.iter().copied().collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(b.live_brokers().map(|b| b.id).collect::<Vec<_>>(), vec![1]);
    let (c, _) = b.apply(&[MetadataRecord::UnfenceBroker { id: 2, epoch: 20 }]);
    assert_eq!(c.live_brokers().count(), 2);
}

#[test]
fn records_for_unknown_topics_are_ignored() {
    let image = two_brokers_one_topic();
    let other = Uuid::from_u128(7);
    let (a, delta) = image.apply(&[
        partition(other, 0, &[1], 1),
        change(other, 0, 1, None),
        change(T, 9, 1, None),
        MetadataRecord::RemoveTopic { topic_id: other },
        // A second Topic record with a taken name is ignored.
        topic("t", other),
    ]);
    assert!(delta.changed_partitions.is_empty() && delta.deleted_topics.is_empty());
    assert_eq!(a.topic("t").unwrap().id, T);
    assert!(a.topic_by_id(other).is_none());
    assert_eq!(a.offset, image.offset + 5);
}

#[test]
fn configs_set_and_delete_keys_and_go_with_their_topic() {
    let image = two_brokers_one_topic();
    let set = |name: &str, value: Option<&str>| MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: "t".into(),
        name: name.into(),
        value: value.map(str::to_string),
    };
    let (a, delta) = image.apply(&[set("retention.ms", Some("1000")), set("x", Some("y"))]);
    assert_eq!(delta.changed_topic_configs().collect::<Vec<_>>(), vec!["t"]);
    assert_eq!(a.configs(ConfigResourceType::Topic, "t").len(), 2);
    let (b, _) = a.apply(&[set("x", None)]);
    let c = b.configs(ConfigResourceType::Topic, "t");
    assert_eq!(c.get("retention.ms").map(String::as_str), Some("1000"));
    assert_eq!(c.len(), 1);
    let (gone, delta) = b.apply(&[MetadataRecord::RemoveTopic { topic_id: T }]);
    assert!(gone.configs(ConfigResourceType::Topic, "t").is_empty());
    assert!(gone.topic("t").is_none() && gone.topic_by_id(T).is_none());
    assert!(delta.deleted_topics.contains_key(&T));
}

#[test]
fn local_changes_split_leaders_followers_and_deletes() {
    let image = MetadataImage::empty("cid", 1);
    let (image, delta) = image.apply(&[
        register(1, 10, false),
        register(2, 20, false),
        topic("t", T),
        partition(T, 0, &[1, 2], 1),
        partition(T, 1, &[2, 1], 2),
        partition(T, 2, &[2], 2),
    ]);
    let local = delta.local_changes(1, &image);
    let idx = |v: &[super::super::delta::LocalPartition]| {
        v.iter().map(|p| p.partition).collect::<Vec<_>>()
    };
    assert_eq!(idx(&local.leaders), vec![0]);
    assert_eq!(idx(&local.followers), vec![1]);
    // Partition 2 is not ours: listed as a delete, which the hosting side skips when absent.
    assert_eq!(local.deletes, vec![("t".to_string(), T, 2)]);

    // Reassignment away from broker 1, then removal of the topic.
    let (moved, delta) = image.apply(&[MetadataRecord::PartitionChange(PartitionChange {
        partition_id: 0,
        topic_id: T,
        isr: Some(vec![2]),
        leader: 2,
        replicas: Some(vec![2]),
        removing_replicas: None,
        adding_replicas: None,
        elr: None,
        last_known_elr: None,
    })]);
    let local = delta.local_changes(1, &moved);
    assert_eq!(local.deletes, vec![("t".to_string(), T, 0)]);
    assert!(local.leaders.is_empty() && local.followers.is_empty());
    let (_, delta) = moved.apply(&[MetadataRecord::RemoveTopic { topic_id: T }]);
    let mut deletes = delta.local_changes(1, &moved).deletes;
    deletes.sort();
    assert_eq!(deletes, vec![("t".to_string(), T, 1)]);
}

#[test]
fn a_topic_created_and_removed_in_one_delta_leaves_no_trace() {
    let (image, delta) = MetadataImage::empty("cid", 1).apply(&[
        topic("t", T),
        partition(T, 0, &[1], 1),
        MetadataRecord::RemoveTopic { topic_id: T },
    ]);
    assert!(image.topic("t").is_none());
    assert!(delta.created_topics.is_empty());
    assert!(delta.changed_partitions.is_empty());
    assert!(delta.local_changes(1, &image).is_empty());
}

#[test]
fn the_log_publishes_only_what_the_hosting_side_accepted() {
    let log = MetadataLog::new("cid", 1);
    let mut seen = log.subscribe();
    let refused: Result<_, &str> = log.commit(vec![topic("t", T)], |_, _| Err("disk full"));
    assert_eq!(refused.err(), Some("disk full"));
    assert!(log.image().topic("t").is_none());
    assert_eq!(log.image().offset, 0);
    assert!(!seen.has_changed().unwrap());
    let image = log
        .commit::<()>(
            vec![topic("t", T), partition(T, 0, &[1], 1)],
            |img, delta| {
                assert!(img.topic("t").is_some());
                assert_eq!(delta.local_changes(1, img).leaders.len(), 1);
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(image.offset, 2);
    assert!(seen.has_changed().unwrap());
    assert_eq!(seen.borrow_and_update().offset, 2);
    // The records applied to an empty image give the published one.
    let (replayed, _) =
        MetadataImage::empty("cid", 1).apply(&[topic("t", T), partition(T, 0, &[1], 1)]);
    assert_eq!(replayed, *log.image());
}

/// A snapshot is the whole state: what it no longer names is gone from the image (a broker, a
/// config key, a feature, a topic), and the delta is the difference, so hosting reacts to it.
#[test]
fn a_snapshot_replaces_the_image_and_its_delta_is_the_difference() {
    let config = |resource: &str, name: &str, value: &str| MetadataRecord::Config {
        resource_type: ConfigResourceType::Broker,
        resource_name: resource.into(),
        name: name.into(),
        value: Some(value.into()),
    };
    let feature = |level| MetadataRecord::FeatureLevel {
        name: "metadata.version".into(),
        feature_level: level,
    };
    let (before, _) = two_brokers_one_topic().apply(&[
        config("", "log.retention.ms", "1000"),
        config("2", "log.cleaner.threads", "2"),
        feature(20),
    ]);
    let other = Uuid::from_u128(0xdef);
    let snapshot = [
        register(1, 10, false),
        topic("t", T),
        partition(T, 0, &[1, 2], 1), // unchanged
        MetadataRecord::Partition(PartitionRecord {
            leader_epoch: 1,
            ..match partition(T, 1, &[2, 1], 1) {
                MetadataRecord::Partition(p) => p,
                _ => unreachable!(),
            }
        }),
        topic("u", other),
        partition(other, 0, &[1], 1),
        config("", "log.retention.ms", "1000"), // unchanged
        feature(21),
    ];
    let (after, delta) = before.load_snapshot(&snapshot);

    assert_eq!(after.offset, before.offset + snapshot.len() as u64);
    assert_eq!((after.cluster_id.as_str(), after.controller_id), ("cid", 1));
    assert_eq!(after.brokers().map(|b| b.id).collect::<Vec<_>>(), vec![1]);
    assert!(after.configs(ConfigResourceType::Broker, "2").is_empty());
    assert_eq!(after.feature_level("metadata.version"), Some(21));
    assert_eq!(after.topic("u").map(|t| t.id), Some(other));

    assert_eq!(delta.changed_brokers, BTreeSet::from([2]));
    assert_eq!(delta.created_topics, BTreeSet::from([other]));
    assert_eq!(
        delta.changed_partitions,
        BTreeSet::from([(T, 1), (other, 0)])
    );
    assert!(delta.deleted_topics.is_empty());
    assert_eq!(
        delta.changed_configs,
        BTreeSet::from([(ConfigResourceType::Broker, "2".to_string())])
    );
    assert_eq!(
        delta.changed_features,
        BTreeSet::from(["metadata.version".to_string()])
    );

    // A snapshot without the topic deletes it, with the topic as it was.
    let (gone, delta) = after.load_snapshot(&[register(1, 10, false)]);
    assert!(gone.topic("t").is_none() && gone.topic("u").is_none());
    assert_eq!(delta.deleted_topics.len(), 2);
    assert_eq!(delta.deleted_topics[&T].partition_count(), 2);
    assert!(delta.changed_partitions.is_empty() && delta.created_topics.is_empty());
    // The same snapshot again changes nothing.
    let (_, none) = gone.load_snapshot(&[register(1, 10, false)]);
    assert!(none.is_empty(), "{none:?}");
}
