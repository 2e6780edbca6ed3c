//! Replica placement: Kafka's `StripedReplicaPlacer`. Brokers are grouped by rack (no rack is a
//! rack of its own); each partition takes its leader from the next rack in turn (an unfenced
//! broker), then one broker from each following rack, wrapping, so replicas spread over racks and
//! leaders rotate over racks and over the brokers of a rack. After as many partitions as there are
//! unfenced brokers the rack and broker orders are reshuffled. Adding partitions to a topic
//! continues the rotation after its last partition.
//!
//! Pure and deterministic: randomness comes from [`Rng`], seeded by the caller.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};

/// A small deterministic generator (splitmix64): the injected randomness of placement and ids.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A value in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// Fisher-Yates, as Java's `Collections.shuffle`.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// A broker placement may use (registered, not in controlled shutdown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsableBroker {
    pub id: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

#[derive(Default)]
struct BrokerList {
    brokers: Vec<i32>,
    index: usize,
    offset: usize,
    epoch: usize,
}

impl BrokerList {
    fn initialize(&mut self, rng: &mut Rng, previous: Option<usize>) {
        if self.brokers.is_empty() {
            return;
        }
        self.brokers.sort_unstable();
        self.offset = match previous {
            Some(p) => (p + 1) % self.brokers.len(),
            None => rng.below(self.brokers.len()),
        };
    }
    fn next(&mut self, epoch: usize) -> Option<i32> {
        if self.brokers.is_empty() {
            return None;
        }
        if self.epoch != epoch {
            self.epoch = epoch;
            self.index = 0;
            self.offset = (self.offset + 1) % self.brokers.len();
        }
        if self.index >= self.brokers.len() {
            return None;
        }
        let b = self.brokers[(self.index + self.offset) % self.brokers.len()];
        self.index += 1;
        Some(b)
    }
}

#[derive(Default)]
struct Rack {
    fenced: BrokerList,
    unfenced: BrokerList,
}

impl Rack {
    fn next(&mut self, epoch: usize) -> Option<i32> {
        self.unfenced
            .next(epoch)
            .or_else(|| self.fenced.next(epoch))
    }
}

struct RackList<'r> {
    rng: &'r mut Rng,
    names: Vec<Option<String>>,
    racks: BTreeMap<Option<String>, Rack>,
    unfenced: usize,
    epoch: usize,
    offset: usize,
}

impl<'r> RackList<'r> {
    fn new(rng: &'r mut Rng, brokers: &[UsableBroker], existing: &[Vec<i32>]) -> RackList<'r> {
        let mut racks: BTreeMap<Option<String>, Rack> = BTreeMap::new();
        let mut rack_of: BTreeMap<i32, Option<String>> = BTreeMap::new();
        let mut unfenced = 0;
        for b in brokers {
            rack_of.insert(b.id, b.rack.clone());
            let rack = racks.entry(b.rack.clone()).or_default();
            if b.fenced {
                rack.fenced.brokers.push(b.id);
            } else {
                unfenced += 1;
                rack.unfenced.brokers.push(b.id);
            }
        }
        for (name, rack) in racks.iter_mut() {
            rack.fenced.initialize(rng, None);
            // The unfenced list continues after this rack's broker in the latest partition.
            let mut sorted = rack.unfenced.brokers.clone();
            sorted.sort_unstable();
            let previous = existing
                .iter()
                .rev()
                .flat_map(|replicas| replicas.iter())
                .find(|id| rack_of.get(id).is_some_and(|r| r == name))
                .and_then(|id| sorted.iter().position(|b| b == id));
            rack.unfenced.initialize(rng, previous);
        }
        let names: Vec<Option<String>> = racks.keys().cloned().collect();
        let previous_rack = existing
            .last()
            .and_then(|replicas| replicas.first())
            .and_then(|leader| rack_of.get(leader))
            .and_then(|rack| names.iter().position(|n| n == rack));
        let offset = match previous_rack {
            Some(i) => (i + 1) % names.len(),
            None if names.is_empty() => 0,
            None => rng.below(names.len()),
        };
        RackList {
            rng,
            names,
            racks,
            unfenced,
            epoch: 0,
            offset,
        }
    }

    fn rack(&mut self, index: usize) -> &mut Rack {
        let name = &self.names[index];
        self.racks.entry(name.clone()).or_default()
    }

    /// One partition's replicas; the caller checked `1 <= rf <= total` and `unfenced > 0`.
    fn place(&mut self, rf: usize) -> Vec<i32> {
        if self.epoch == self.unfenced && self.unfenced > 1 {
            self.rng.shuffle(&mut self.names);
            for rack in self.racks.values_mut() {
                self.rng.shuffle(&mut rack.fenced.brokers);
                self.rng.shuffle(&mut rack.unfenced.brokers);
            }
            self.epoch = 0;
        }
        if self.offset == self.names.len() {
            self.offset = 0;
        }
        let n = self.names.len();
        let epoch = self.epoch;
        let mut brokers = Vec::with_capacity(rf);
        let mut first_rack = Some(self.offset);
        // At least one rack has an unfenced broker, so this finds one within n steps.
        for step in 0..n {
            let i = (self.offset + step) % n;
            if let Some(b) = self.rack(i).unfenced.next(epoch) {
                brokers.push(b);
                first_rack = Some(i);
                break;
            }
        }
        let mut rack_index = self.offset;
        // Every broker is returned at most once per epoch and rf <= total, so this ends.
        let mut guard = 0usize;
        while brokers.len() < rf && guard <= 2 * n * (rf + 1) {
            guard += 1;
            let mut result = None;
            if first_rack == Some(rack_index) {
                first_rack = None;
            } else {
                result = self.rack(rack_index).next(epoch);
            }
            rack_index = (rack_index + 1) % n;
            if let Some(b) = result {
                brokers.push(b);
            }
        }
        self.epoch += 1;
        self.offset += 1;
        brokers
    }
}

/// Replica lists for `num_partitions` new partitions with `rf` replicas each. `existing` is the
/// topic's current assignment (empty for a new topic).
pub fn place(
    brokers: &[UsableBroker],
    existing: &[Vec<i32>],
    num_partitions: usize,
    rf: i16,
    rng: &mut Rng,
) -> Result<Vec<Vec<i32>>, ControllerError> {
    if rf <= 0 {
        return Err(err(
            ResponseError::InvalidReplicationFactor,
            format!("Invalid replication factor {rf}: the replication factor must be positive."),
        ));
    }
    let unfenced = brokers.iter().filter(|b| !b.fenced).count();
    if unfenced == 0 {
        return Err(err(
            ResponseError::InvalidReplicationFactor,
            "All brokers are currently fenced.",
        ));
    }
    if rf as usize > brokers.len() {
        return Err(err(
            ResponseError::InvalidReplicationFactor,
            format!(
                "The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                brokers.len()
            ),
        ));
    }
    let mut racks = RackList::new(rng, brokers, existing);
    Ok((0..num_partitions)
        .map(|_| racks.place(rf as usize))
        .collect())
}
