//! The read-only view of open transactions the produce path checks transactional batches against
//! (Kafka's `transaction.partition.verification`): producer id -> epoch, state and the partitions
//! added to its transaction.
//!
//! Owned by the coordinator task, which republishes the entries of every transactional id a step
//! touched; read by any thread (`parking_lot::RwLock`, held only for a lookup or an update).

use std::collections::{HashMap, HashSet};

use parking_lot::RwLock;

use super::codes;
use super::metadata::{TxnMetadata, TxnState};

#[derive(Debug, Clone)]
struct Entry {
    epoch: i16,
    state: TxnState,
    /// topic -> partitions of the transaction.
    partitions: HashMap<String, HashSet<i32>>,
}

#[derive(Debug, Default)]
struct Inner {
    by_producer: HashMap<i64, Entry>,
    /// transactional id -> the producer id its entry sits under.
    owner: HashMap<String, i64>,
}

/// Thread-safe; see the module docs.
#[derive(Debug, Default)]
pub struct TxnView {
    inner: RwLock<Inner>,
}

/// Kafka's verification rule for one partition of a transactional write: the producer's epoch
/// must be current, its transaction open (not committing/aborting) and the partition added.
/// Fenced epochs answer INVALID_PRODUCER_EPOCH, which is what producers expect from Produce.
pub fn verify_rule(
    state: TxnState,
    current_epoch: i16,
    epoch: i16,
    partition_added: bool,
) -> Result<(), i16> {
    if epoch != current_epoch {
        Err(codes::INVALID_PRODUCER_EPOCH)
    } else if state.is_preparing() {
        Err(codes::CONCURRENT_TRANSACTIONS)
    } else if state != TxnState::Ongoing || !partition_added {
        Err(codes::INVALID_TXN_STATE)
    } else {
        Ok(())
    }
}

impl TxnView {
    /// Replaces what the view knows of `transactional_id` (None: it is gone).
    pub fn publish(&self, transactional_id: &str, metadata: Option<&TxnMetadata>) {
        let mut inner = self.inner.write();
        if let Some(old) = inner.owner.remove(transactional_id) {
            inner.by_producer.remove(&old);
        }
        if let Some(m) = metadata {
            let mut partitions: HashMap<String, HashSet<i32>> = HashMap::new();
            for (t, p) in &m.partitions {
                partitions.entry(t.clone()).or_default().insert(*p);
            }
            inner.by_producer.insert(
                m.producer_id,
                Entry {
                    epoch: m.producer_epoch,
                    state: m.state,
                    partitions,
                },
            );
            inner
                .owner
                .insert(transactional_id.to_string(), m.producer_id);
        }
    }

    /// May `producer_id` at `producer_epoch` write transactional data to `topic`-`partition`?
    /// Err carries the Produce error code. An unknown producer id has no open transaction.
    pub fn verify(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
    ) -> Result<(), i16> {
        let inner = self.inner.read();
        let Some(e) = inner.by_producer.get(&producer_id) else {
            return Err(codes::INVALID_TXN_STATE);
        };
        let added = e
            .partitions
            .get(topic)
            .is_some_and(|ps| ps.contains(&partition));
        verify_rule(e.state, e.epoch, producer_epoch, added)
    }
}
