//! Eligible leader replicas (KIP-966): the schedules that lose committed records without them.

use super::*;
use crate::cluster::alter::{AlterOp, AlterRequest};
use crate::controller::partition_change::{ChangeBuilder, ElrRules};
use crate::metadata::records::ConfigResourceType;

/// Brokers 1, 2, 3 unfenced at 0 with the cluster's `min.insync.replicas` = 2 and the
/// bootstrap features `features`.
fn cluster(features: &[(&str, i16)]) -> Harness {
    let mut h = Harness {
        c: Controller::new(ControllerSettings {
            min_insync_replicas: 2,
            ..ControllerSettings::default()
        }),
        offset: 0,
    };
    h.commit(bootstrap_records(features));
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    h
}

/// Fences `id` by letting its session lapse while the others heartbeat at `now`.
fn fence(h: &mut Harness, id: i32, now: i64) {
    for other in [1, 2, 3] {
        if other != id && !h.c.state().brokers[&other].fenced {
            h.heartbeat(other, now).unwrap();
        }
    }
    let records = h.c.tick(now);
    assert!(
        matches!(records.first(), Some(MetadataRecord::FenceBroker { id: f, .. }) if *f == id),
        "{records:?}"
    );
    h.commit(records);
}

/// Registers `id` again (a new process) with `previous_broker_epoch`.
fn restart(h: &mut Harness, id: i32, incarnation: u128, previous_broker_epoch: i64, now: i64) {
    let mut r = Harness::registration(id, None, incarnation);
    r.previous_broker_epoch = previous_broker_epoch;
    let out =
        h.c.register_broker(&r, now, h.offset)
            .expect("registration");
    h.commit(out.records);
}

/// The simulator's seed 3501: the ISR shrinks to the leader (3 fenced), the leader is fenced,
/// loses power and comes back empty; 3, which holds every committed record, returns later.
fn last_member_loses_power(h: &mut Harness) -> Uuid {
    let t = h.topic_with("metrics", &[&[1, 3]]);
    fence(h, 3, 10_000);
    let p = h.partition(t, 0);
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1]));
    fence(h, 1, 20_000);
    assert_eq!(h.partition(t, 0).leader, NO_LEADER);
    let old_epoch = h.c.state().brokers[&1].epoch();
    restart(h, 1, 101, -1, 21_000);
    assert_ne!(h.c.state().brokers[&1].epoch(), old_epoch);
    h.heartbeat(1, 21_500).unwrap();
    t
}

#[test]
fn a_replica_that_lost_power_never_leads_over_an_eligible_one() {
    let mut h = cluster(BOOTSTRAP_FEATURES);
    assert!(h.c.elr_enabled());
    let t = h.topic_with("probe", &[&[2]]);
    assert_eq!(h.partition(t, 0).elr, Vec::<i32>::new());
    let t = last_member_loses_power(&mut h);
    let p = h.partition(t, 0);
    // 1 is back and unfenced but left the ELR at its unclean registration: no leader yet.
    assert!(h.c.state().is_active(1));
    assert_eq!(
        (
            p.leader,
            p.isr.clone(),
            p.elr.clone(),
            p.last_known_elr.clone()
        ),
        (NO_LEADER, vec![], vec![3], vec![1])
    );
    // 3 comes back: elected from the ELR, alone in the ISR.
    let answer = h.heartbeat(3, 22_000).unwrap();
    assert!(!answer.is_fenced);
    let p = h.partition(t, 0);
    assert_eq!(
        (
            p.leader,
            p.isr.clone(),
            p.elr.clone(),
            p.last_known_elr.clone()
        ),
        (3, vec![3], vec![], vec![])
    );
}

#[test]
fn without_elr_the_replica_that_lost_power_leads() {
    // Kafka before 4.1 (and a Sluice cluster whose log predates the feature): the last ISR
    // member stays in the ISR and leads again with whatever it kept.
    let mut h = cluster(&without_elr());
    assert!(!h.c.elr_enabled());
    let t = last_member_loses_power(&mut h);
    let p = h.partition(t, 0);
    assert_eq!(
        (p.leader, p.isr.clone(), p.elr.clone()),
        (1, vec![1], vec![])
    );
}

#[test]
fn a_clean_restart_stays_eligible_and_an_unclean_one_does_not() {
    for (previous, clean) in [(true, true), (false, false)] {
        let mut h = cluster(BOOTSTRAP_FEATURES);
        let t = h.topic_with("t", &[&[1, 2, 3]]);
        fence(&mut h, 3, 10_000);
        fence(&mut h, 2, 20_000);
        let p = h.partition(t, 0);
        assert_eq!((p.isr.clone(), p.elr.clone()), (vec![1], vec![2]));
        let epoch = h.c.state().brokers[&2].epoch();
        restart(&mut h, 2, 202, if previous { epoch } else { -1 }, 21_000);
        let p = h.partition(t, 0);
        let expected: Vec<i32> = if clean { vec![2] } else { vec![] };
        assert_eq!(p.elr, expected, "clean restart {clean}");
        // The leader goes: only an eligible 2 may take over.
        fence(&mut h, 1, 30_000);
        h.heartbeat(2, 30_500).unwrap();
        let p = h.partition(t, 0);
        assert_eq!(
            p.leader,
            if clean { 2 } else { NO_LEADER },
            "clean restart {clean}"
        );
    }
}

#[test]
fn the_elr_empties_once_the_isr_reaches_the_minimum_again() {
    let mut h = cluster(BOOTSTRAP_FEATURES);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    fence(&mut h, 3, 10_000);
    assert_eq!(
        h.partition(t, 0).elr,
        Vec::<i32>::new(),
        "ISR [1, 2] is at the minimum"
    );
    fence(&mut h, 2, 20_000);
    assert_eq!(h.partition(t, 0).elr, vec![2]);
    // An ISR back at the minimum clears the ELR.
    let p = h.partition(t, 0);
    let change = ChangeBuilder {
        topic_id: t,
        partition_id: 0,
        partition: &p,
        target_isr: vec![1, 3],
        election: Election::Online,
        assignment: None,
        elr: Some(ElrRules {
            min_isr: 2,
            unclean_shutdown: None,
        }),
    }
    .build(&|_| true)
    .expect("a change");
    assert_eq!((change.isr, change.elr), (Some(vec![1, 3]), Some(vec![])));
}

fn set_min_isr(resource_type: ConfigResourceType, name: &str, op: AlterOp) -> ConfigAlteration {
    ConfigAlteration {
        resource_type,
        resource_name: name.into(),
        changes: vec![AlterRequest {
            name: "min.insync.replicas".into(),
            op,
            value: (op == AlterOp::Set).then(|| "2".to_string()),
        }],
    }
}

fn elr_state(h: &Harness, t: Uuid) -> (i32, Vec<i32>, Vec<i32>) {
    let p = h.partition(t, 0);
    (p.leader, p.elr, p.last_known_elr)
}

#[test]
fn a_min_isr_change_clears_the_elr_it_applies_to() {
    let mut h = cluster(BOOTSTRAP_FEATURES);
    let other = h.topic_with("other", &[&[2, 3]]);
    let t = last_member_loses_power(&mut h);
    let before = elr_state(&h, t);
    assert_eq!(before, (NO_LEADER, vec![3], vec![1]));

    // The same fences left `other` (2 and 3) with ELR [3].
    assert_eq!(elr_state(&h, other).1, vec![3]);

    // Another topic's min ISR clears only that topic's ELR.
    let out = h.c.alter_configs(&[set_min_isr(
        ConfigResourceType::Topic,
        "other",
        AlterOp::Set,
    )]);
    assert!(out.answer.iter().all(|r| r.is_ok()), "{:?}", out.answer);
    let changed: Vec<Uuid> = out
        .records
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::PartitionChange(c) => Some(c.topic_id),
            _ => None,
        })
        .collect();
    assert_eq!(changed, vec![other]);
    h.commit(out.records);
    assert_eq!(elr_state(&h, t), before);
    assert_eq!(elr_state(&h, other).1, Vec::<i32>::new());

    // The topic's own: ELR and last known ELR emptied in the same entry; still leaderless.
    let out = h.c.alter_configs(&[set_min_isr(
        ConfigResourceType::Topic,
        "metrics",
        AlterOp::Set,
    )]);
    assert!(out.answer.iter().all(|r| r.is_ok()), "{:?}", out.answer);
    assert!(matches!(
        out.records.first(),
        Some(MetadataRecord::Config { .. })
    ));
    h.commit(out.records);
    assert_eq!(elr_state(&h, t), (NO_LEADER, vec![], vec![]));
}

#[test]
fn the_cluster_min_isr_clears_every_elr_even_unchanged() {
    let mut h = cluster(BOOTSTRAP_FEATURES);
    // The cluster-level value set while no partition has an ELR.
    let out =
        h.c.alter_configs(&[set_min_isr(ConfigResourceType::Broker, "", AlterOp::Set)]);
    assert!(matches!(out.records[..], [MetadataRecord::Config { .. }]));
    h.commit(out.records);
    let t = last_member_loses_power(&mut h);
    let u = h.topic_with("u", &[&[1, 2]]);
    assert_eq!(elr_state(&h, t).1, vec![3]);
    // Set again to the same value: no config record, and still every ELR cleared.
    let out =
        h.c.alter_configs(&[set_min_isr(ConfigResourceType::Broker, "", AlterOp::Set)]);
    assert!(
        !out.records
            .iter()
            .any(|r| matches!(r, MetadataRecord::Config { .. })),
        "the value is unchanged: no config record"
    );
    h.commit(out.records);
    assert_eq!(elr_state(&h, t), (NO_LEADER, vec![], vec![]));
    assert_eq!(elr_state(&h, u).1, Vec::<i32>::new());
}

#[test]
fn with_elr_the_min_isr_is_guarded_as_kafka_guards_it() {
    let h = cluster(BOOTSTRAP_FEATURES);
    let refused = |a: ConfigAlteration| {
        let out = h.c.alter_configs(&[a]);
        assert!(out.records.is_empty());
        let e = out.answer[0].clone().expect_err("refused");
        (e.error, e.message)
    };
    assert_eq!(
        refused(set_min_isr(ConfigResourceType::Broker, "1", AlterOp::Set)),
        (
            ResponseError::InvalidConfig,
            "Broker-level min.insync.replicas cannot be altered while ELR is enabled.".into()
        )
    );
    assert_eq!(
        refused(set_min_isr(ConfigResourceType::Broker, "", AlterOp::Delete)),
        (
            ResponseError::InvalidConfig,
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.".into()
        )
    );
    // Without ELR both are ordinary changes.
    let h = cluster(&without_elr());
    for a in [
        set_min_isr(ConfigResourceType::Broker, "1", AlterOp::Set),
        set_min_isr(ConfigResourceType::Broker, "", AlterOp::Delete),
    ] {
        assert!(h.c.alter_configs(&[a]).answer[0].is_ok());
    }
}
