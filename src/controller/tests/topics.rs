//! Topics, placement, elections and configs.

use std::collections::BTreeMap;

use super::alter_partition::isr;
use super::*;
use crate::cluster::alter::{AlterOp, AlterRequest};

fn set(name: &str, value: &str) -> AlterRequest {
    op(name, AlterOp::Set, Some(value))
}

fn op(name: &str, op: AlterOp, value: Option<&str>) -> AlterRequest {
    AlterRequest {
        name: name.into(),
        op,
        value: value.map(str::to_string),
    }
}

fn create(
    h: &Harness,
    name: &str,
    partitions: i32,
    rf: i16,
    seed: u64,
) -> Outcome<Vec<(String, Result<CreatedTopic, ControllerError>)>> {
    h.c.create_topics(
        &[CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: rf,
            assignments: vec![],
            configs: vec![],
        }],
        seed,
    )
}

fn partitions_of(h: &Harness, name: &str) -> Vec<PartitionState> {
    h.c.state()
        .topic_by_name(name)
        .unwrap()
        .partitions
        .values()
        .cloned()
        .collect()
}

fn leaders(parts: &[PartitionState]) -> BTreeMap<i32, usize> {
    let mut m = BTreeMap::new();
    for p in parts {
        *m.entry(p.leader).or_insert(0) += 1;
    }
    m
}

#[test]
fn twelve_partitions_rf3_on_three_brokers_have_leaders_4_4_4() {
    for seed in 0..20 {
        let mut h = Harness::new();
        h.brokers(&[(1, None), (2, None), (3, None)], 0);
        let out = create(&h, "t", 12, 3, seed);
        let created = out.answer[0].1.clone().unwrap();
        assert_eq!(
            (created.num_partitions, created.replication_factor),
            (12, 3)
        );
        h.commit(out.records);
        let parts = partitions_of(&h, "t");
        for p in &parts {
            let mut r = p.replicas.clone();
            r.sort_unstable();
            assert_eq!(r, vec![1, 2, 3], "seed {seed}");
            assert_eq!(p.isr, p.replicas);
            assert_eq!(p.leader, p.replicas[0]);
            assert_eq!((p.leader_epoch, p.partition_epoch), (0, 0));
        }
        assert_eq!(
            leaders(&parts),
            BTreeMap::from([(1, 4), (2, 4), (3, 4)]),
            "seed {seed}"
        );
    }
}

#[test]
fn placement_spreads_replicas_over_racks() {
    for seed in 0..20 {
        let mut h = Harness::new();
        h.brokers(&[(1, Some("a")), (2, Some("a")), (3, Some("b"))], 0);
        for (name, rf) in [("rf2", 2), ("rf3", 3)] {
            let out = create(&h, name, 12, rf, seed);
            h.commit(out.records);
            let parts = partitions_of(&h, name);
            for p in &parts {
                // Every partition has a replica in each rack.
                assert!(
                    p.replicas.contains(&3),
                    "seed {seed} {name}: {:?}",
                    p.replicas
                );
                assert!(p.replicas.iter().any(|r| *r == 1 || *r == 2));
            }
            // Striping alternates the leader's rack within each run of 3 partitions (the
            // unfenced broker count), then reshuffles: rack b's single broker leads 1 or 2 of
            // every 3, so 4..=8 of 12 (Kafka's StripedReplicaPlacer does not balance leaders
            // per broker over uneven racks).
            let l = leaders(&parts);
            let b = l.get(&3).copied().unwrap_or(0);
            assert!((4..=8).contains(&b), "seed {seed} {name}: {l:?}");
            assert_eq!(l.values().sum::<usize>(), 12);
            // Deterministic: the same seed places the same way.
            let replicas = |records: &[MetadataRecord]| -> Vec<Vec<i32>> {
                records
                    .iter()
                    .filter_map(|r| match r {
                        MetadataRecord::Partition(p) => Some(p.replicas.clone()),
                        _ => None,
                    })
                    .collect()
            };
            let again = create(&h, "again", 12, rf, seed).records;
            let placed: Vec<Vec<i32>> = parts.iter().map(|p| p.replicas.clone()).collect();
            assert_eq!(replicas(&again), placed);
        }
        // One broker per rack: balanced 4/4/4.
        let mut h = Harness::new();
        h.brokers(&[(1, Some("a")), (2, Some("b")), (3, Some("c"))], 0);
        let out = create(&h, "t", 12, 3, seed);
        h.commit(out.records);
        assert_eq!(
            leaders(&partitions_of(&h, "t")),
            BTreeMap::from([(1, 4), (2, 4), (3, 4)])
        );
    }
}

#[test]
fn replication_factor_is_bounded_by_the_registered_brokers() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let e = create(&h, "t", 1, 4, 0).answer[0].1.clone().unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
    assert_eq!(
        e.message,
        "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."
    );
    let e = create(&h, "t", 1, 0, 0).answer[0].1.clone().unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
    let e = create(&h, "t", 0, 1, 0).answer[0].1.clone().unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidPartitions);
    let e = create(&h, "t", 10_001, 1, 0).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::PolicyViolation);
    // -1 / -1: num.partitions and default.replication.factor (1 each).
    let out = create(&h, "t", -1, -1, 0);
    let c = out.answer[0].1.clone().unwrap();
    assert_eq!((c.num_partitions, c.replication_factor), (1, 1));
    // A fenced broker may be a follower, never the leader; it is not in the ISR.
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    h.register(3, None, 0);
    let out = create(&h, "f", 6, 3, 1);
    h.commit(out.records);
    for p in partitions_of(&h, "f") {
        assert_eq!(p.replicas.len(), 3);
        assert!(!p.isr.contains(&3) && p.leader != 3, "{p:?}");
    }
    // No unfenced broker at all.
    let mut h = Harness::new();
    h.register(1, None, 0);
    let e = create(&h, "t", 1, 1, 0).answer[0].1.clone().unwrap_err();
    assert_eq!(e.message, "All brokers are currently fenced.");
}

#[test]
fn manual_assignments_are_checked_as_kafka_does() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    h.register(3, None, 0);
    let try_assign = |a: Vec<(i32, Vec<i32>)>, rf: i16| {
        h.c.create_topics(
            &[CreatableTopic {
                name: "m".into(),
                num_partitions: -1,
                replication_factor: rf,
                assignments: a,
                configs: vec![],
            }],
            0,
        )
        .answer[0]
            .1
            .clone()
    };
    let e = try_assign(vec![(0, vec![1, 9])], -1).unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicaAssignment);
    assert_eq!(
        e.message,
        "The manual partition assignment includes broker 9, but no such broker is registered."
    );
    let e = try_assign(vec![(0, vec![1, 1])], -1).unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicaAssignment);
    let e = try_assign(vec![(0, vec![1, 2]), (1, vec![1])], -1).unwrap_err();
    assert!(
        e.message
            .contains("not consistent with previous partitions"),
        "{}",
        e.message
    );
    let e = try_assign(vec![(0, vec![1])], 1).unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidRequest);
    let e = try_assign(vec![(0, vec![3])], -1).unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
    assert_eq!(
        e.message,
        "All brokers specified in the partition assignment for partition 0 are fenced or in controlled shutdown."
    );
    // Fenced 3 in the list: allowed, out of the ISR; the leader is the first active replica.
    let c = try_assign(vec![(0, vec![3, 2, 1])], -1).unwrap();
    assert_eq!((c.num_partitions, c.replication_factor), (1, 3));
    let out = h.c.create_topics(
        &[CreatableTopic {
            name: "m".into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, vec![3, 2, 1])],
            configs: vec![],
        }],
        0,
    );
    h.commit(out.records);
    let p = &partitions_of(&h, "m")[0];
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 1]));
}

#[test]
fn topics_are_created_once_and_deleted() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    let topic = |name: &str| CreatableTopic {
        name: name.into(),
        num_partitions: 2,
        replication_factor: 1,
        assignments: vec![],
        configs: vec![("cleanup.policy".into(), Some("compact".into()))],
    };
    let out = h.c.create_topics(
        &[
            topic("a.b"),
            topic("dup"),
            topic("dup"),
            topic("a_b"),
            topic("bad/name"),
        ],
        3,
    );
    let codes: Vec<_> = out
        .answer
        .iter()
        .map(|(_, r)| r.as_ref().err().map(|e| e.error))
        .collect();
    assert_eq!(
        codes,
        vec![
            None,
            Some(ResponseError::InvalidRequest),
            Some(ResponseError::InvalidRequest),
            Some(ResponseError::InvalidTopicException),
            Some(ResponseError::InvalidTopicException),
        ]
    );
    assert_eq!(
        out.answer[3].1.as_ref().unwrap_err().message,
        "Topic 'a_b' collides with existing topic: a.b"
    );
    h.commit(out.records);
    let id = h.c.state().topic_ids["a.b"];
    assert_eq!(h.c.state().topics[&id].partitions.len(), 2);
    assert_eq!(
        h.c.state()
            .config(ConfigResourceType::Topic, "a.b", "cleanup.policy"),
        Some("compact")
    );
    let e = h.c.create_topics(&[topic("a.b")], 4).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(
        (e.error, e.message.as_str()),
        (
            ResponseError::TopicAlreadyExists,
            "Topic 'a.b' already exists."
        )
    );
    let mut bad = topic("c");
    bad.configs = vec![("retention.ms".into(), Some("soon".into()))];
    let e = h.c.create_topics(&[bad], 4).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidConfig);

    let out = h.c.delete_topics(&["a.b".into(), "nope".into()]);
    assert_eq!(
        out.records,
        vec![MetadataRecord::RemoveTopic { topic_id: id }]
    );
    assert_eq!(out.answer[0].1, Ok(id));
    assert_eq!(out.answer[1].1.as_ref().unwrap_err().code(), 3);
    h.commit(out.records);
    assert!(h.c.state().topics.is_empty() && h.c.state().topic_ids.is_empty());
    assert!(
        h.c.state().configs.is_empty(),
        "a removed topic's configs go with it"
    );
    let out = h.c.delete_topic_ids(&[id]);
    assert_eq!(
        out.answer[0].1.as_ref().unwrap_err().error,
        ResponseError::UnknownTopicId
    );
    // The name is free again.
    assert!(h.c.create_topics(&[topic("a_b")], 5).answer[0].1.is_ok());
}

#[test]
fn create_partitions_continues_the_placement() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let out = create(&h, "t", 3, 1, 9);
    h.commit(out.records);
    let grow = |count, assignments| CreatePartitionsTopic {
        name: "t".into(),
        count,
        assignments,
    };
    let out = h.c.create_partitions(&[grow(6, None)], 9);
    assert_eq!(out.answer[0].1, Ok(()));
    h.commit(out.records);
    let parts = partitions_of(&h, "t");
    assert_eq!(parts.len(), 6);
    assert_eq!(leaders(&parts), BTreeMap::from([(1, 2), (2, 2), (3, 2)]));
    let e = h.c.create_partitions(&[grow(5, None)], 0).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(
        e.message,
        "The topic t currently has 6 partition(s); 5 would not be an increase."
    );
    let e = h.c.create_partitions(&[grow(6, None)], 0).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(
        (e.error, e.message.as_str()),
        (
            ResponseError::InvalidPartitions,
            "Topic already has 6 partition(s)."
        )
    );
    let e =
        h.c.create_partitions(&[grow(8, Some(vec![vec![1]]))], 0)
            .answer[0]
            .1
            .clone()
            .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidReplicaAssignment);
    let out = h.c.create_partitions(&[grow(7, Some(vec![vec![2]]))], 0);
    h.commit(out.records);
    assert_eq!(partitions_of(&h, "t")[6].replicas, vec![2]);
    let mut missing = grow(9, None);
    missing.name = "nope".into();
    assert_eq!(
        h.c.create_partitions(&[missing], 0).answer[0]
            .1
            .clone()
            .unwrap_err()
            .error,
        ResponseError::UnknownTopicOrPartition
    );
}

#[test]
fn preferred_election_waits_for_the_preferred_replica_to_rejoin_the_isr() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    let tp = [TopicPartition {
        topic: "t".into(),
        partition: 0,
    }];
    let e = h.c.elect_leaders(Election::Preferred, Some(&tp)).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::ElectionNotNeeded);
    // Fence 1: leader 2.
    h.heartbeat(2, 9_000).unwrap();
    h.heartbeat(3, 9_000).unwrap();
    let fence = h.c.tick(9_000);
    h.commit(fence);
    assert_eq!(h.partition(t, 0).leader, 2);
    // 1 comes back but is not in the ISR yet: preferred not available.
    h.heartbeat(1, 9_100).unwrap();
    assert_eq!(
        h.partition(t, 0).leader,
        2,
        "an unfenced broker does not take leadership back by itself"
    );
    let e = h.c.elect_leaders(Election::Preferred, Some(&tp)).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::PreferredLeaderNotAvailable);
    // The leader adds 1 back to the ISR, then the preferred election moves leadership to 1.
    let p = h.partition(t, 0);
    let out =
        h.c.alter_partition(&AlterPartitionRequest {
            broker_id: 2,
            broker_epoch: h.c.state().brokers[&2].epoch(),
            topic_id: t,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr(&[2, 3, 1]),
            leader_recovery_state: LEADER_RECOVERED,
        })
        .unwrap();
    h.commit(out.records);
    // With every partition requested, only the elections performed are reported.
    let out = h.c.elect_leaders(Election::Preferred, None);
    assert_eq!(out.answer, vec![(tp[0].clone(), Ok(()))]);
    h.commit(out.records);
    let p = h.partition(t, 0);
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
    assert!(h
        .c
        .elect_leaders(Election::Preferred, None)
        .answer
        .is_empty());
}

#[test]
fn unclean_election_takes_a_live_replica_outside_the_isr() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("t", &[&[1, 2]]);
    let p = h.partition(t, 0);
    let epoch1 = h.c.state().brokers[&1].epoch();
    let out =
        h.c.alter_partition(&AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: epoch1,
            topic_id: t,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr(&[1]),
            leader_recovery_state: LEADER_RECOVERED,
        })
        .unwrap();
    h.commit(out.records);
    h.heartbeat(2, 9_000).unwrap();
    let fence = h.c.tick(9_000);
    h.commit(fence);
    assert_eq!(h.partition(t, 0).leader, NO_LEADER);
    let tp = [TopicPartition {
        topic: "t".into(),
        partition: 0,
    }];
    let e = h.c.elect_leaders(Election::Preferred, Some(&tp)).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::PreferredLeaderNotAvailable);
    let out = h.c.elect_leaders(Election::Unclean, Some(&tp));
    assert_eq!(out.answer[0].1, Ok(()));
    h.commit(out.records);
    let p = h.partition(t, 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    let e = h.c.elect_leaders(Election::Unclean, Some(&tp)).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(e.error, ResponseError::ElectionNotNeeded);
    let missing = [TopicPartition {
        topic: "t".into(),
        partition: 5,
    }];
    let e = h.c.elect_leaders(Election::Unclean, Some(&missing)).answer[0]
        .1
        .clone()
        .unwrap_err();
    assert_eq!(
        (e.error, e.message.as_str()),
        (
            ResponseError::UnknownTopicOrPartition,
            "No such partition as t-5"
        )
    );
}

#[test]
fn incremental_config_changes_write_config_records() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    h.topic_with("t", &[&[1]]);
    let alter = |changes: Vec<AlterRequest>| ConfigAlteration {
        resource_type: ConfigResourceType::Topic,
        resource_name: "t".into(),
        changes,
    };
    let out = h.c.alter_configs(&[
        alter(vec![set("retention.ms", "60000")]),
        alter(vec![set("retention.ms", "x")]),
        alter(vec![set("no.such.key", "1")]),
        alter(vec![op("retention.ms", AlterOp::Append, Some("1"))]),
        alter(vec![set("retention.ms", "1"), set("retention.ms", "2")]),
    ]);
    let codes: Vec<_> = out
        .answer
        .iter()
        .map(|r| r.as_ref().err().map(|e| e.error))
        .collect();
    assert_eq!(
        codes,
        vec![
            None,
            Some(ResponseError::InvalidConfig),
            Some(ResponseError::InvalidConfig),
            Some(ResponseError::InvalidConfig),
            Some(ResponseError::InvalidRequest),
        ]
    );
    assert_eq!(out.records.len(), 1);
    h.commit(out.records);
    let value = |h: &Harness, key: &str| {
        h.c.state()
            .config(ConfigResourceType::Topic, "t", key)
            .map(str::to_string)
    };
    assert_eq!(value(&h, "retention.ms").as_deref(), Some("60000"));
    // APPEND to an unset LIST key starts from Kafka's default ("delete").
    let out = h.c.alter_configs(&[alter(vec![
        op("cleanup.policy", AlterOp::Append, Some("compact")),
        op("retention.ms", AlterOp::Delete, None),
    ])]);
    assert_eq!(out.answer, vec![Ok(())]);
    h.commit(out.records);
    assert_eq!(
        value(&h, "cleanup.policy").as_deref(),
        Some("delete,compact")
    );
    assert_eq!(value(&h, "retention.ms"), None);
    let out = h.c.alter_configs(&[alter(vec![op(
        "cleanup.policy",
        AlterOp::Subtract,
        Some("delete"),
    )])]);
    h.commit(out.records);
    assert_eq!(value(&h, "cleanup.policy").as_deref(), Some("compact"));
    // Setting the value it already has writes nothing.
    assert!(h
        .c
        .alter_configs(&[alter(vec![set("cleanup.policy", "compact")])])
        .records
        .is_empty());
    let mut missing = alter(vec![op("retention.ms", AlterOp::Delete, None)]);
    missing.resource_name = "gone".into();
    assert_eq!(
        h.c.alter_configs(&[missing]).answer[0]
            .as_ref()
            .unwrap_err()
            .code(),
        3
    );
    // Broker resources: the cluster default ("") or a broker id.
    let out = h.c.alter_configs(&[ConfigAlteration {
        resource_type: ConfigResourceType::Broker,
        resource_name: String::new(),
        changes: vec![set("unclean.leader.election.enable", "true")],
    }]);
    assert_eq!(out.answer, vec![Ok(())]);
    h.commit(out.records);
    assert_eq!(h.c.election_for("t"), Election::Unclean);
    let bad = ConfigAlteration {
        resource_type: ConfigResourceType::Broker,
        resource_name: "one".into(),
        changes: vec![],
    };
    assert_eq!(
        h.c.alter_configs(&[bad]).answer[0]
            .as_ref()
            .unwrap_err()
            .error,
        ResponseError::InvalidRequest
    );
}
