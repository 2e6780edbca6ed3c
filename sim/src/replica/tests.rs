//! The replica role's AlterPartition transport, as the production client sends: one request per
//! partition outstanding, sent again only after NOT_CONTROLLER or `ALTER_DEADLINE_MS` without an
//! answer, and only the last copy's answer read (seed 3102).

use sluice::metadata::{
    BrokerEndpoint, MetadataImage, MetadataRecord, PartitionRecord, RegisterBroker,
};
use uuid::Uuid;

use super::*;
use crate::repl_check::ReplChecker;

const TOPIC: Uuid = Uuid::from_u128(7);
const INELIGIBLE_REPLICA: i16 = 107;

/// Brokers 0 and 1 registered and unfenced; partition 0 of one topic led by broker 0 with the
/// ISR [0] and replicas [0, 1].
fn image() -> MetadataImage {
    let broker = |id: i32| {
        MetadataRecord::RegisterBroker(RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(100 + id as u128),
            broker_epoch: 5,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: format!("broker-{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            features: Vec::new(),
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
        })
    };
    let records = vec![
        broker(0),
        broker(1),
        MetadataRecord::Topic {
            name: "t".into(),
            topic_id: TOPIC,
        },
        MetadataRecord::Partition(PartitionRecord {
            partition_id: 0,
            topic_id: TOPIC,
            replicas: vec![0, 1],
            isr: vec![0],
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }),
    ];
    MetadataImage::empty("sim", -1).apply(&records).0
}

/// Broker 0's replica role leading the partition, with the ISR expansion to [0, 1] proposed
/// (broker 1 fetched at the leader's log end at 100 ms) but not sent yet.
struct Leader {
    r: Replicas,
    check: ReplChecker,
    stats: ReplStats,
}

impl Leader {
    fn new() -> Leader {
        let mut l = Leader {
            r: Replicas::new(0),
            check: ReplChecker::default(),
            stats: ReplStats::default(),
        };
        let image = image();
        l.run(0, |r, env| r.sync(&image, env));
        let fetch = ReplMsg::Fetch {
            id: 1,
            partitions: vec![FetchPartition {
                tp: (TOPIC, 0),
                current_leader_epoch: 0,
                fetch_offset: 0,
                last_fetched_epoch: None,
            }],
        };
        l.run(100, |r, env| r.on_message(BROKER_BASE + 1, fetch, env));
        l
    }

    fn run(&mut self, now: u64, f: impl FnOnce(&mut Replicas, &mut Env) -> Out) -> Out {
        let mut env = Env {
            now,
            mutation: None,
            check: &mut self.check,
            stats: &mut self.stats,
            broker_epoch: Some(5),
            controller: 0,
            trace: Vec::new(),
        };
        f(&mut self.r, &mut env)
    }

    /// The ids of the AlterPartition requests a tick at `now` sends.
    fn tick(&mut self, now: u64) -> Vec<u64> {
        let out = self.run(now, |r, env| r.tick(env));
        out.iter()
            .filter_map(|(_, p)| match p {
                Payload::Request {
                    id,
                    request: Request::AlterPartition(_),
                } => Some(*id),
                _ => None,
            })
            .collect()
    }

    fn answer(&mut self, now: u64, id: u64, reply: Reply) {
        self.run(now, |r, env| r.on_alter_reply(id, reply, env));
    }

    fn in_flight(&self) -> bool {
        self.r
            .parts
            .get(&(TOPIC, 0))
            .and_then(|p| p.leader())
            .is_some_and(|l| l.in_flight().is_some())
    }
}

#[test]
fn an_alter_partition_is_resent_after_the_deadline_and_only_its_last_answer_is_read() {
    let mut l = Leader::new();
    let first = l.tick(200);
    assert_eq!(first.len(), 1, "the proposal is sent at the next tick");
    // Unanswered: not sent again before the deadline.
    for now in (400..200 + ALTER_DEADLINE_MS).step_by(200) {
        assert!(l.tick(now).is_empty(), "resent at {now}");
    }
    let second = l.tick(200 + ALTER_DEADLINE_MS);
    assert_eq!(second.len(), 1, "sent again at the deadline");
    assert_ne!(first, second);
    // The abandoned request's answer is not read: the proposal stays in flight (the HW still
    // counts the follower), whatever that copy was answered.
    let refused = Reply::Refused {
        code: INELIGIBLE_REPLICA,
    };
    l.answer(5_400, first[0], refused.clone());
    assert!(l.in_flight(), "an abandoned request's answer was read");
    l.answer(5_500, second[0], refused);
    assert!(!l.in_flight(), "the last request's answer was not read");
}

#[test]
fn not_controller_sends_the_alter_partition_again_at_the_next_tick() {
    let mut l = Leader::new();
    let first = l.tick(200);
    assert_eq!(first.len(), 1);
    l.answer(300, first[0], Reply::NotController { leader_id: Some(1) });
    assert!(l.in_flight());
    let again = l.tick(400);
    assert_eq!(again.len(), 1, "NOT_CONTROLLER: sent again at once");
    assert_ne!(again, first);
}
