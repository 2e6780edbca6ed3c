//! The replication part of `World`: the replica ticks of every broker, the produce workload
//! (acks=all batches to the leader of a random partition, as a client's image names it), the
//! consumer (reads from the leader from its position), and the delivery of replication messages.
//! Every outcome is counted in `ReplStats`; the invariants are `repl_check`'s.

use super::{Event, Schedule, World};
use crate::net::{Addr, Payload, Reply, BROKER_BASE, CONSUMER, PRODUCER};
use crate::replica::{Env, Out, ReplMsg, OFFSET_OUT_OF_RANGE};

/// A replica tick every this many ms (follower fetches, ISR expiration, produce timeouts).
pub const REPLICA_TICK_MS: u64 = 200;

impl World {
    /// Runs `f` on broker `b`'s replica role with its environment, then sends its output.
    pub(super) fn with_replicas(
        &mut self,
        b: usize,
        f: impl FnOnce(&mut crate::replica::Replicas, &sluice::metadata::MetadataImage, &mut Env) -> Out,
    ) {
        let nvoters = self.voters.len();
        let broker = &mut self.brokers[b];
        let controller = broker
            .controller_hint()
            .unwrap_or_else(|| self.rng.below(nvoters) as i32);
        let mut env = Env {
            now: self.now,
            mutation: self.cfg.mutation,
            check: &mut self.checker.repl,
            stats: &mut self.stats,
            broker_epoch: broker.broker_epoch,
            controller,
            whole_batches: self.cfg.schedule >= Schedule::Third,
            trace: Vec::new(),
            producer_ids: &mut self.producer_ids,
            markers_skipped: Vec::new(),
        };
        let out = f(&mut broker.replicas, &broker.image, &mut env);
        let trace = std::mem::take(&mut env.trace);
        let skipped = std::mem::take(&mut env.markers_skipped);
        let from = broker.addr();
        for (topic, partition) in skipped {
            self.note_marker_skipped(&topic, partition);
        }
        for line in trace {
            self.log(line);
        }
        self.send_all(out.into_iter().map(|(to, p)| (from, to, p)).collect());
    }

    /// A broker's replica tick: metadata (unless silent), activation after a restart, the image
    /// followed, then the periodic work.
    pub(super) fn replica_tick(&mut self, b: usize) {
        let now = self.now;
        if now >= self.brokers[b].silent_until {
            let v = self.brokers[b].follows as usize;
            if self.voters[v].is_up() {
                let upto = self.voters[v].applied;
                self.brokers[b].fetch(&self.checker, upto);
            }
        }
        let broker = &mut self.brokers[b];
        if !broker.replicas.active && broker.registered_in_image() {
            broker.replicas.active = true;
            let line = format!("broker {b} hosts its partitions again");
            self.log(line);
        }
        self.with_replicas(b, |r, image, env| {
            let mut out = r.sync(image, env);
            out.extend(r.tick(env));
            r.sync_groups(image, env, &mut out);
            r.sync_txns(image, env, &mut out);
            out
        });
    }

    /// A broker restart: its replica role crashes (a third of them lose their unflushed tail).
    pub(super) fn crash_replicas(&mut self, b: usize) {
        let power_loss = self.rng.chance(0.33);
        if power_loss {
            self.log(format!(
                "broker {b} loses its unflushed writes (power loss)"
            ));
        }
        self.with_replicas(b, |r, _, env| {
            r.crash(power_loss, env);
            Vec::new()
        });
    }

    /// The producer: one batch of 1 to 3 records to a random partition's leader, as a random
    /// broker's image names it; acks=all, or acks=1 for a third of them (`Schedule::Second`).
    pub(super) fn produce(&mut self) {
        let Some((tp, leader)) = self.pick_partition() else {
            return;
        };
        let acks = match self.cfg.schedule {
            Schedule::First => -1,
            _ if self.rng.chance(0.33) => 1,
            _ => -1,
        };
        let n = self.rng.range(1, 4);
        let ids = (0..n)
            .map(|_| {
                self.next_record += 1;
                self.next_record
            })
            .collect();
        let id = self.next_record;
        let msg = ReplMsg::Produce {
            id,
            tp,
            ids,
            acks,
            idempotent: None,
        };
        self.send_all(vec![(PRODUCER, BROKER_BASE + leader, Payload::Repl(msg))]);
    }

    /// The consumer: reads a random partition from its position at the leader.
    pub(super) fn consume(&mut self) {
        let Some((tp, leader)) = self.pick_partition() else {
            return;
        };
        let offset = *self.positions.entry(tp).or_insert(0);
        let msg = ReplMsg::ConsumerFetch {
            tp,
            offset,
            read_committed: false,
        };
        self.send_all(vec![(CONSUMER, BROKER_BASE + leader, Payload::Repl(msg))]);
    }

    pub(super) fn pick_partition(&mut self) -> Option<(crate::replica::Tp, i32)> {
        let b = self.rng.below(self.brokers.len());
        let image = &self.brokers[b].image;
        let parts: Vec<_> = image
            .topics()
            // Clients do not produce to, or read, the coordinators' internal topics.
            .filter(|t| {
                t.name != sluice::group::records::OFFSETS_TOPIC
                    && t.name != sluice::txn::TRANSACTION_STATE_TOPIC
            })
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |(i, p)| ((t.id, *i), p.leader))
            })
            .filter(|(_, leader)| *leader >= 0)
            .collect();
        if parts.is_empty() {
            return None;
        }
        Some(parts[self.rng.below(parts.len())])
    }

    /// A replication message for `to` (a broker or a client).
    pub(super) fn deliver_repl(&mut self, from: Addr, to: Addr, msg: ReplMsg) {
        if to == CONSUMER {
            if let ReplMsg::ConsumerRecords {
                tp,
                epoch,
                offset,
                result,
                ..
            } = msg
            {
                let pos = self.positions.entry(tp).or_insert(0);
                match result {
                    Ok(records) if *pos == offset => {
                        *pos += records.len() as i64;
                        self.checker
                            .repl
                            .on_consumer_delivered(tp, epoch, offset, &records);
                    }
                    Err(OFFSET_OUT_OF_RANGE) => {
                        *pos = 0;
                        self.checker.repl.on_consumer_reset(tp);
                    }
                    _ => {}
                }
            }
            return;
        }
        let consumer = to - super::groups::GROUP_CONSUMER_BASE;
        if (0..self.consumers.len() as i32).contains(&consumer) {
            return self.deliver_group(consumer as usize, from, msg);
        }
        let producer = to - super::txns::TXN_PRODUCER_BASE;
        if (0..self.txn_producers.len() as i32).contains(&producer) {
            return self.deliver_txn(producer as usize, from, msg);
        }
        if to == super::txns::READ_COMMITTED_CONSUMER {
            return self.deliver_read_committed(msg);
        }
        if to == PRODUCER {
            if let ReplMsg::ProduceResponse { id, code } = msg {
                if id > super::idem::REQUEST_BASE {
                    self.on_idem_answer(id, code);
                }
            }
            return;
        }
        let b = (to - BROKER_BASE) as usize;
        if to < BROKER_BASE || b >= self.brokers.len() {
            return;
        }
        match msg {
            ReplMsg::OffsetCommit { .. } | ReplMsg::OffsetFetch { .. } => {
                self.with_replicas(b, |r, image, env| r.on_group_message(from, msg, image, env))
            }
            ReplMsg::Txn { .. } | ReplMsg::ProduceResponse { .. } => {
                self.with_replicas(b, |r, image, env| r.on_txn_message(from, msg, image, env))
            }
            msg => self.with_replicas(b, |r, _, env| r.on_message(from, msg, env)),
        }
    }

    /// An answer to a replica role's AlterPartition.
    pub(super) fn deliver_alter_reply(&mut self, b: usize, from: Addr, id: u64, reply: Reply) {
        self.brokers[b].on_reply(from, id, reply.clone());
        self.with_replicas(b, |r, _, env| r.on_alter_reply(id, reply, env));
    }

    pub(super) fn schedule_replication(&mut self) {
        for b in 0..self.brokers.len() {
            let at = self.rng.range(1, REPLICA_TICK_MS);
            self.at(at, Event::ReplicaTick(b));
        }
        self.at(2_000, Event::Produce);
        self.at(2_500, Event::Consume);
        if self.cfg.schedule >= Schedule::Third {
            self.at(2_100, Event::IdemTick);
            for k in 0..self.consumers.len() {
                self.at(2_200 + 100 * k as u64, Event::GroupTick(k));
            }
        }
        if self.cfg.schedule >= Schedule::Fourth {
            for k in 0..self.txn_producers.len() {
                self.at(2_600 + 50 * k as u64, Event::TxnTick(k));
            }
            self.at(2_700, Event::ReadCommitted);
        }
    }
}
