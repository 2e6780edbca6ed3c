//! The simulated network: addresses, payloads and the fault model of links. Delivery itself is
//! an event of the world's queue; this module only decides, per message, whether it is dropped,
//! duplicated and how long each copy takes (random delays reorder messages).
//!
//! Faults: a directed link (from, to) is blocked while any partition holding it is active
//! (counted, so overlapping partitions heal independently); the "weather" (drop rate, duplicate
//! rate, delay range) applies to every link. A request to a voter (a broker's or the admin
//! client's command) is never duplicated: Kafka's requests travel on a TCP connection, so the
//! controller decides each request sent at most once; a second copy is a resend its client
//! makes, and the client reads only the last copy's answer. A duplicated AlterPartition would be
//! decided after the answer its leader acted on (seed 3102's hazard, see `replica.rs`). Raft
//! messages, answers and replication traffic may be duplicated. Pure; no clock.

use std::collections::BTreeMap;

use raft::prelude::Message;
use sluice::controller::{
    AlterPartitionAnswer, AlterPartitionRequest, BrokerRegistration, HeartbeatAnswer,
    HeartbeatRequest,
};

use crate::replica::ReplMsg;
use crate::rng::SimRng;

/// A process: voters are `0..N` (their Kafka node ids), brokers `BROKER_BASE + i`, the
/// workload clients `CLIENT` (admin), `PRODUCER` and `CONSUMER`.
pub type Addr = i32;
pub const BROKER_BASE: Addr = 100;
pub const CLIENT: Addr = 1000;
pub const PRODUCER: Addr = 1001;
pub const CONSUMER: Addr = 1002;

/// A command sent to a voter (what a broker or admin client asks the active controller).
#[derive(Debug, Clone)]
pub enum Request {
    Register(BrokerRegistration),
    Heartbeat(HeartbeatRequest),
    CreateTopic {
        name: String,
        partitions: i32,
        replication_factor: i16,
    },
    CreatePartitions {
        name: String,
        count: i32,
    },
    DeleteTopic {
        name: String,
    },
    ElectLeaders {
        unclean: bool,
    },
    /// A partition leader's proposed ISR.
    AlterPartition(AlterPartitionRequest),
    /// The driver's own periodic fencing check (`Controller::tick`); never sent on the network.
    Fence,
}

/// A voter's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    NotController {
        leader_id: Option<i32>,
    },
    Registered {
        broker_epoch: i64,
    },
    Heartbeat(HeartbeatAnswer),
    AlterPartition(AlterPartitionAnswer),
    /// The command's records were committed and applied (or it needed none).
    Done,
    /// Refused with Kafka's error code (no records).
    Refused {
        code: i16,
    },
}

#[derive(Debug, Clone)]
pub enum Payload {
    Raft(Message),
    Request {
        id: u64,
        request: Request,
    },
    Reply {
        id: u64,
        reply: Reply,
    },
    /// Replication and the produce / consume workload (brokers and clients).
    Repl(ReplMsg),
}

/// Link faults and weather.
#[derive(Debug, Clone)]
pub struct Network {
    blocked: BTreeMap<(Addr, Addr), u32>,
    pub drop_rate: f64,
    pub dup_rate: f64,
    pub min_delay_ms: u64,
    pub max_delay_ms: u64,
}

/// Delays of a calm network (ms).
pub const CALM_DELAY: (u64, u64) = (1, 10);

impl Default for Network {
    fn default() -> Self {
        Network {
            blocked: BTreeMap::new(),
            drop_rate: 0.0,
            dup_rate: 0.0,
            min_delay_ms: CALM_DELAY.0,
            max_delay_ms: CALM_DELAY.1,
        }
    }
}

impl Network {
    pub fn block(&mut self, links: &[(Addr, Addr)]) {
        for l in links {
            *self.blocked.entry(*l).or_insert(0) += 1;
        }
    }

    pub fn unblock(&mut self, links: &[(Addr, Addr)]) {
        for l in links {
            if let Some(n) = self.blocked.get_mut(l) {
                *n -= 1;
                if *n == 0 {
                    self.blocked.remove(l);
                }
            }
        }
    }

    pub fn heal_all(&mut self) {
        *self = Network::default();
    }

    pub fn is_blocked(&self, from: Addr, to: Addr) -> bool {
        self.blocked.contains_key(&(from, to))
    }

    /// The delays of the copies of one message from `from` to `to` (empty: dropped; a second
    /// copy only if `duplicable`).
    pub fn route(&self, rng: &mut SimRng, from: Addr, to: Addr, duplicable: bool) -> Vec<u64> {
        if self.is_blocked(from, to) || rng.chance(self.drop_rate) {
            return Vec::new();
        }
        let mut delays = vec![rng.range(self.min_delay_ms, self.max_delay_ms + 1)];
        if duplicable && rng.chance(self.dup_rate) {
            delays.push(rng.range(self.min_delay_ms, self.max_delay_ms + 1));
        }
        delays
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_links_drop_and_heal_per_partition() {
        let mut net = Network::default();
        let mut rng = SimRng::new(1);
        net.block(&[(0, 1)]);
        net.block(&[(0, 1), (1, 0)]);
        assert!(net.route(&mut rng, 0, 1, true).is_empty());
        assert_eq!(net.route(&mut rng, 1, 2, true).len(), 1);
        net.unblock(&[(0, 1), (1, 0)]);
        assert!(
            net.is_blocked(0, 1),
            "the first partition still holds the link"
        );
        assert!(!net.is_blocked(1, 0));
        net.unblock(&[(0, 1)]);
        let d = net.route(&mut rng, 0, 1, true);
        assert_eq!(d.len(), 1);
        assert!((CALM_DELAY.0..=CALM_DELAY.1).contains(&d[0]));
        net.drop_rate = 1.0;
        assert!(net.route(&mut rng, 0, 1, true).is_empty());
    }

    #[test]
    fn only_duplicable_messages_are_duplicated() {
        let net = Network {
            dup_rate: 1.0,
            ..Network::default()
        };
        let mut rng = SimRng::new(1);
        assert_eq!(net.route(&mut rng, 0, 1, true).len(), 2);
        assert_eq!(net.route(&mut rng, BROKER_BASE, 0, false).len(), 1);
    }
}
