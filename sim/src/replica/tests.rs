//! The replica role's requests as the production clients send them. AlterPartition: one request
//! per partition outstanding, sent again only after NOT_CONTROLLER or `ALTER_DEADLINE_MS` without
//! an answer, and only the last copy's answer read (seed 3102). Fetch: only the outstanding
//! fetch's answer read (seed 9241).

use sluice::metadata::{
    BrokerEndpoint, MetadataImage, MetadataRecord, PartitionRecord, RegisterBroker,
};
use sluice::replica::replication::EpochEndOffset;
use uuid::Uuid;

use super::*;
use crate::repl_check::ReplChecker;

const TOPIC: Uuid = Uuid::from_u128(7);
const INELIGIBLE_REPLICA: i16 = 107;

/// Brokers 0 and 1 registered and unfenced; partition 0 of one topic led by broker 0 in
/// `leader_epoch` with the ISR `isr` and replicas [0, 1].
fn image(leader_epoch: i32, isr: Vec<i32>) -> MetadataImage {
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
            isr,
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: 0,
            leader_epoch,
            partition_epoch: 0,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }),
    ];
    MetadataImage::empty("sim", -1).apply(&records).0
}

/// A broker's replica role with its checker and counters.
struct Broker {
    r: Replicas,
    check: ReplChecker,
    stats: ReplStats,
    producer_ids: i64,
}

/// Broker 0's replica role leading the partition, with the ISR expansion to [0, 1] proposed
/// (broker 1 fetched at the leader's log end at 100 ms) but not sent yet.
type Leader = Broker;

impl Broker {
    fn new() -> Leader {
        let mut l = Broker {
            r: Replicas::new(0),
            check: ReplChecker::default(),
            stats: ReplStats::default(),
            producer_ids: 0,
        };
        let image = image(0, vec![0]);
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
            whole_batches: true,
            trace: Vec::new(),
            producer_ids: &mut self.producer_ids,
            markers_skipped: Vec::new(),
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

impl Broker {
    /// Broker 1's replica role following broker 0 in leader epoch 1.
    fn follower() -> Broker {
        let mut f = Broker {
            r: Replicas::new(1),
            check: ReplChecker::default(),
            stats: ReplStats::default(),
            producer_ids: 0,
        };
        let image = image(1, vec![0, 1]);
        f.run(0, |r, env| r.sync(&image, env));
        f
    }

    /// The id of the fetch a tick at `now` sends to broker 0.
    fn fetch(&mut self, now: u64) -> u64 {
        let out = self.run(now, |r, env| r.tick(env));
        let ids: Vec<u64> = out
            .iter()
            .filter_map(|(to, p)| match p {
                Payload::Repl(ReplMsg::Fetch { id, .. }) if *to == BROKER_BASE => Some(*id),
                _ => None,
            })
            .collect();
        assert_eq!(ids.len(), 1, "{out:?}");
        ids[0]
    }

    /// Broker 0 answers fetch `id` (sent at `fetch_offset` after a last fetched `last_epoch`).
    fn answer_fetch(
        &mut self,
        now: u64,
        id: u64,
        (fetch_offset, last_epoch): (i64, Option<i32>),
        result: FetchResult,
    ) {
        let f = FetchPartition {
            tp: (TOPIC, 0),
            current_leader_epoch: 1,
            fetch_offset,
            last_fetched_epoch: last_epoch,
        };
        let msg = ReplMsg::FetchResponse {
            id,
            answers: vec![(f, result)],
        };
        self.run(now, |r, env| r.on_message(BROKER_BASE, msg, env));
    }

    fn log(&self) -> Vec<u64> {
        self.r.parts[&(TOPIC, 0)].log.iter().map(|r| r.id).collect()
    }
}

#[test]
fn a_follower_reads_only_its_outstanding_fetch_answer() {
    let rec = |epoch, id| Rec {
        epoch,
        id,
        batch: BatchOf::plain(1, 0),
        kv: None,
    };
    let mut f = Broker::follower();
    let first = f.fetch(200);
    let records = vec![rec(0, 1), rec(0, 2)];
    let answer = FetchResult::Records {
        base: 0,
        records,
        high_watermark: 1,
    };
    f.answer_fetch(210, first, (0, None), answer);
    assert_eq!(f.log(), [1, 2]);
    // The leader's log diverges after offset 1: the follower truncates there, then fetches the
    // leader's record 3 back to the same log end.
    let second = f.fetch(400);
    let diverging = FetchResult::Diverging(EpochEndOffset {
        leader_epoch: 0,
        end_offset: 1,
    });
    f.answer_fetch(410, second, (2, Some(0)), diverging.clone());
    assert_eq!(f.log(), [1]);
    let third = f.fetch(600);
    let answer = FetchResult::Records {
        base: 1,
        records: vec![rec(1, 3)],
        high_watermark: 1,
    };
    f.answer_fetch(610, third, (1, Some(0)), answer);
    assert_eq!(f.log(), [1, 3]);
    // A second copy of the diverging answer (its fetch offset matches the log end again) is
    // not read: record 3 stays.
    f.answer_fetch(700, second, (2, Some(0)), diverging);
    assert_eq!(f.log(), [1, 3], "a stale fetch answer truncated the log");
    // Nor is the answer to a fetch given up on (sent again after `RETRY_MS`).
    let given_up = f.fetch(800);
    let again = f.fetch(800 + RETRY_MS);
    assert_ne!(given_up, again);
    let answer = FetchResult::Records {
        base: 2,
        records: vec![rec(1, 4)],
        high_watermark: 2,
    };
    f.answer_fetch(1_900, given_up, (2, Some(1)), answer.clone());
    assert_eq!(f.log(), [1, 3]);
    f.answer_fetch(1_910, again, (2, Some(1)), answer);
    assert_eq!(f.log(), [1, 3, 4]);
}

/// A retried idempotent batch is answered as a duplicate of the one in the log (nothing
/// appended); a batch past a gap in the sequence is refused OUT_OF_ORDER_SEQUENCE_NUMBER; the
/// next in sequence is appended.
#[test]
fn a_leader_answers_a_retried_idempotent_batch_as_a_duplicate() {
    let mut l = Broker::new();
    let produce = |id, base_sequence, ids: Vec<u64>| ReplMsg::Produce {
        id,
        tp: (TOPIC, 0),
        ids,
        acks: 1,
        idempotent: Some(Idempotent {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence,
            transactional: false,
        }),
    };
    let codes = |out: Out| -> Vec<i16> {
        out.into_iter()
            .filter_map(|(_, p)| match p {
                Payload::Repl(ReplMsg::ProduceResponse { code, .. }) => Some(code),
                _ => None,
            })
            .collect()
    };
    let from = crate::net::PRODUCER;
    let out = l.run(200, |r, env| {
        r.on_message(from, produce(1, 0, vec![1, 2]), env)
    });
    assert_eq!(codes(out), [0]);
    let out = l.run(210, |r, env| {
        r.on_message(from, produce(2, 0, vec![1, 2]), env)
    });
    assert_eq!(codes(out), [0]);
    assert_eq!(l.log(), [1, 2]);
    assert_eq!(l.stats.duplicates, 1);
    let out = l.run(220, |r, env| {
        r.on_message(from, produce(3, 5, vec![3]), env)
    });
    assert_eq!(codes(out), [OUT_OF_ORDER_SEQUENCE_NUMBER]);
    let out = l.run(230, |r, env| {
        r.on_message(from, produce(4, 2, vec![3]), env)
    });
    assert_eq!(codes(out), [0]);
    assert_eq!(l.log(), [1, 2, 3]);
}

/// A follower whose epoch cache ends with an epoch that wrote nothing here (it led that epoch
/// briefly) is told its log diverges at its own log end: it cuts the empty epoch, as the real
/// fetcher's truncation does, and fetches with its last written epoch next (before, it kept the
/// empty epoch and was told to diverge forever: seed 10 of `Schedule::Fourth`).
#[test]
fn a_diverging_answer_at_the_log_end_cuts_an_epoch_that_wrote_nothing() {
    let rec = |id| Rec {
        epoch: 0,
        id,
        batch: BatchOf::plain(1, 0),
        kv: None,
    };
    let mut f = Broker::follower();
    let first = f.fetch(200);
    let answer = FetchResult::Records {
        base: 0,
        records: vec![rec(1), rec(2)],
        high_watermark: 2,
    };
    f.answer_fetch(210, first, (0, None), answer);
    let cache = &mut f.r.parts.get_mut(&(TOPIC, 0)).expect("hosted").cache;
    cache.assign(1, 2).expect("a newer epoch at the log end");
    assert_eq!(cache.latest_epoch(), Some(1));
    let second = f.fetch(400);
    let diverging = FetchResult::Diverging(EpochEndOffset {
        leader_epoch: 0,
        end_offset: 2,
    });
    f.answer_fetch(410, second, (2, Some(1)), diverging);
    assert_eq!(f.log(), [1, 2], "nothing of the log is cut");
    let r = &f.r.parts[&(TOPIC, 0)];
    assert_eq!(r.cache.latest_epoch(), Some(0), "the empty epoch stays");
}
