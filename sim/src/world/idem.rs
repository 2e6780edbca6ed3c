//! The idempotent producers (`Schedule::Third`), restating the Java client's rules: a producer id
//! and epoch (assigned here: InitProducerId is not simulated), per partition the next sequence and
//! up to 5 batches in flight, sent in sequence order to the partition's leader as a random
//! broker's image names it. A batch is sent again with the same sequence (possibly to a new
//! leader) after a retriable error of its latest send, or when that send went unanswered for
//! `REQUEST_TIMEOUT_MS`. OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_PRODUCER_EPOCH for the oldest
//! unacknowledged batch of a partition (the leader lacks the batch before it: an acks=1 batch
//! lost, or its dedupe state collapsed by a snapshot), or a batch not acknowledged within
//! `DELIVERY_TIMEOUT_MS`, fails the producer's unacknowledged batches and bumps its epoch,
//! sequences starting again at 0 (KIP-360); the same error for a later batch is retried (the one
//! before it is being retried). Producer 0 asks acks=all, producer 1 acks=1.

use std::collections::{BTreeMap, VecDeque};

use super::World;
use crate::net::{Payload, BROKER_BASE, PRODUCER};
use crate::replica::{
    Idempotent, ReplMsg, Tp, INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
};

/// How many idempotent producers run.
pub const PRODUCERS: usize = 2;
/// Their request ids start here (below: the plain producer's, its last record id).
pub const REQUEST_BASE: u64 = 1 << 50;
/// Every this many ms the producers resend what is due.
pub const TICK_MS: u64 = 250;
/// Kafka's `max.in.flight.requests.per.connection` cap with idempotence.
const MAX_IN_FLIGHT: usize = 5;
/// A send unanswered this long is given up and the batch sent again (the client's
/// `request.timeout.ms`, longer than the produce's own timeout at the leader).
const REQUEST_TIMEOUT_MS: u64 = 15_000;
/// A batch not acknowledged this long after its first send fails (`delivery.timeout.ms`).
const DELIVERY_TIMEOUT_MS: u64 = 60_000;
/// The client's retry backoff after an error: `retry.backoff.ms` doubling up to
/// `retry.backoff.max.ms`.
const RETRY_BACKOFF_MS: (u64, u64) = (100, 1_000);

struct Pending {
    seq: i32,
    ids: Vec<u64>,
    first_sent: u64,
    /// When its latest send left (`None`: due to be sent at `due_at`).
    sent_at: Option<u64>,
    due_at: u64,
    /// Errors answered so far (the backoff doubles with each).
    errors: u32,
    /// Its latest send's request id.
    request: u64,
}

#[derive(Default)]
struct PartState {
    next_seq: i32,
    in_flight: VecDeque<Pending>,
}

pub struct IdemProducer {
    producer_id: i64,
    epoch: i16,
    acks: i16,
    parts: BTreeMap<Tp, PartState>,
}

impl IdemProducer {
    pub fn new(k: usize) -> IdemProducer {
        IdemProducer {
            producer_id: 1000 + k as i64,
            epoch: 0,
            acks: if k == 0 { -1 } else { 1 },
            parts: BTreeMap::new(),
        }
    }
}

/// A send in flight: producer, partition, producer epoch, sequence.
pub type SendOf = (usize, Tp, i16, i32);

impl World {
    /// A new batch of 1 to 3 records from a random idempotent producer to a random partition
    /// (unless 5 of that partition's batches are in flight).
    pub(super) fn idem_produce(&mut self) {
        let k = self.rng.below(PRODUCERS);
        let Some((tp, leader)) = self.pick_partition() else {
            return;
        };
        let n = self.rng.range(1, 4);
        let part = self.idem[k].parts.entry(tp).or_default();
        if part.in_flight.len() >= MAX_IN_FLIGHT {
            return;
        }
        let seq = part.next_seq;
        part.next_seq += n as i32;
        let ids = (0..n)
            .map(|_| {
                self.next_record += 1;
                self.next_record
            })
            .collect();
        let now = self.now;
        part.in_flight.push_back(Pending {
            seq,
            ids,
            first_sent: now,
            sent_at: None,
            due_at: now,
            errors: 0,
            request: 0,
        });
        self.idem_send(k, tp, leader);
    }

    /// Sends the due batches of producer `k` to `tp`'s `leader`, in sequence order.
    fn idem_send(&mut self, k: usize, tp: Tp, leader: i32) {
        let p = &mut self.idem[k];
        let (producer_id, producer_epoch, acks) = (p.producer_id, p.epoch, p.acks);
        let Some(part) = p.parts.get_mut(&tp) else {
            return;
        };
        let mut out = Vec::new();
        let now = self.now;
        for b in part
            .in_flight
            .iter_mut()
            .filter(|b| b.sent_at.is_none() && b.due_at <= now)
        {
            self.idem_request += 1;
            let id = REQUEST_BASE + self.idem_request;
            b.request = id;
            b.sent_at = Some(self.now);
            self.idem_sends.insert(id, (k, tp, producer_epoch, b.seq));
            let msg = ReplMsg::Produce {
                id,
                tp,
                ids: b.ids.clone(),
                acks,
                idempotent: Some(Idempotent {
                    producer_id,
                    producer_epoch,
                    base_sequence: b.seq,
                    transactional: false,
                }),
            };
            out.push((PRODUCER, BROKER_BASE + leader, Payload::Repl(msg)));
        }
        self.send_all(out);
    }

    /// The producers' periodic work: sends unanswered too long are due again, batches past the
    /// delivery timeout fail (an epoch bump), due batches go to the leader a random image names.
    pub(super) fn idem_tick(&mut self) {
        let now = self.now;
        for k in 0..PRODUCERS {
            let mut expired = false;
            let mut due = Vec::new();
            for (tp, part) in self.idem[k].parts.iter_mut() {
                for b in part.in_flight.iter_mut() {
                    if now.saturating_sub(b.first_sent) >= DELIVERY_TIMEOUT_MS {
                        expired = true;
                    }
                    if b.sent_at
                        .is_some_and(|t| now.saturating_sub(t) >= REQUEST_TIMEOUT_MS)
                    {
                        b.sent_at = None;
                        b.due_at = now;
                    }
                }
                if part
                    .in_flight
                    .iter()
                    .any(|b| b.sent_at.is_none() && b.due_at <= now)
                {
                    due.push(*tp);
                }
            }
            if expired {
                self.bump_epoch(k, "a batch passed the delivery timeout");
                continue;
            }
            for tp in due {
                if let Some(leader) = self.leader_of(tp) {
                    self.idem_send(k, tp, leader);
                }
            }
        }
    }

    /// The leader of `tp` as a random broker's image names it.
    pub(super) fn leader_of(&mut self, tp: Tp) -> Option<i32> {
        let b = self.rng.below(self.brokers.len());
        let image = &self.brokers[b].image;
        let leader = image
            .topics()
            .find(|t| t.id == tp.0)
            .and_then(|t| t.partitions.get(&tp.1))
            .map(|p| p.leader)?;
        (leader >= 0).then_some(leader)
    }

    /// The answer `code` to idempotent send `request`.
    pub(super) fn on_idem_answer(&mut self, request: u64, code: i16) {
        let Some((k, tp, epoch, seq)) = self.idem_sends.remove(&request) else {
            return;
        };
        let p = &mut self.idem[k];
        if p.epoch != epoch {
            return; // a batch failed at an epoch bump
        }
        let Some(part) = p.parts.get_mut(&tp) else {
            return;
        };
        let Some(i) = part.in_flight.iter().position(|b| b.seq == seq) else {
            return; // acknowledged already
        };
        let latest = part.in_flight[i].request == request;
        match code {
            0 => {
                part.in_flight.remove(i);
                self.stats.idempotent_acked += 1;
            }
            OUT_OF_ORDER_SEQUENCE_NUMBER | INVALID_PRODUCER_EPOCH if i == 0 && latest => {
                self.bump_epoch(
                    k,
                    &format!("error {code} for its oldest batch of {}-{}", tp.0, tp.1),
                );
            }
            _ if latest => {
                let b = &mut part.in_flight[i];
                let backoff = RETRY_BACKOFF_MS.0 << b.errors.min(4);
                b.errors += 1;
                b.sent_at = None;
                b.due_at = self.now + backoff.min(RETRY_BACKOFF_MS.1);
            }
            _ => {}
        }
    }

    /// Fails producer `k`'s unacknowledged batches and bumps its epoch (sequences from 0).
    fn bump_epoch(&mut self, k: usize, why: &str) {
        let p = &mut self.idem[k];
        p.epoch += 1;
        p.parts.clear();
        self.stats.epoch_bumps += 1;
        let line = format!(
            "producer {} bumps its epoch to {} ({why})",
            p.producer_id, p.epoch
        );
        self.log(line);
    }
}
