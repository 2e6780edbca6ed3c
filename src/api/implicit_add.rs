//! Transactions V2's implicit AddPartitionsToTxn (KIP-890 part 2): a transactional Produce v12+
//! adds its partitions to the producer's transaction, and a TxnOffsetCommit v5+ adds the group's
//! `__consumer_offsets` partition, by asking the transaction coordinator task before the write
//! (Kafka's `AddPartitionsToTxnManager` with the `addPartition` operation). Older versions are
//! Transactions V1 clients, which add partitions themselves; their writes are only verified.
//!
//! Only partitions the coordinator's view already holds in the producer's open transaction skip
//! the coordinator. Every other one is asked for, as Kafka asks for every partition: the view is
//! a copy that may be a step behind, and only the coordinator task orders the add against the
//! transaction's own steps. A partition the view showed completing (PrepareCommit/PrepareAbort)
//! must not be refused on a later look at the view: the markers may land between two looks, and
//! the second one would answer INVALID_TXN_STATE, fatal to the client, for a produce that only
//! came early (franz-go's TestTxnEtl hit this). The coordinator's refusals become the codes Kafka
//! gives the client (see [`produce_error`], [`offset_commit_error`]). This module performs no I/O
//! beyond the coordinator call.

use std::collections::HashMap;

use kafka_protocol::messages::ProduceRequest;

use crate::broker::Broker;
use crate::record::BatchHeader;
use crate::txn::codes;
use crate::txn::driver::{AddInput, Identity, Request};
use crate::txn::{txn_version, TxnHandle};

/// The first Produce version of Transactions V2 (Kafka: Produce v12+ adds partitions).
pub const PRODUCE_V2_SINCE: i16 = 12;
/// The first TxnOffsetCommit version of Transactions V2.
pub const TXN_OFFSET_COMMIT_V2_SINCE: i16 = 5;

/// The error codes the implicit add left for partitions it could not add; empty when every
/// partition was added (or none needed to be).
pub type Refused = HashMap<(String, i32), i16>;

/// Partitions of a request to add to one producer's transaction.
#[derive(Debug, Clone)]
pub struct Pending {
    pub who: Identity,
    pub partitions: Vec<(String, i32)>,
}

/// The partitions of a transactional Produce v12+ that need adding: those whose first batch is
/// transactional, written by the request's producer, and that the view does not show in its
/// open transaction ([`needs_coordinator`]). Unknown topics and partitions are left to the
/// produce path, which refuses them.
pub fn produce_pending(broker: &Broker, version: i16, request: &ProduceRequest) -> Option<Pending> {
    let transactional_id = request.transactional_id.as_ref()?;
    if version < PRODUCE_V2_SINCE || !broker.config.transaction_partition_verification_enable {
        return None;
    }
    let by_id = version >= 13;
    let mut who: Option<Identity> = None;
    let mut partitions = Vec::new();
    for t in &request.topic_data {
        let topic = if by_id {
            broker.replicas.topic_by_id(t.topic_id)
        } else {
            broker.replicas.topic(t.name.as_str())
        };
        let Some(topic) = topic else { continue };
        for pd in &t.partition_data {
            // The hosted partitions of a broker of several need not be 0..n.
            let exists = topic.partition(pd.index).is_some();
            let header = pd.records.as_ref().and_then(|r| BatchHeader::parse(r).ok());
            let Some(h) = header.filter(|h| exists && h.is_transactional()) else {
                continue;
            };
            let producer = who.get_or_insert_with(|| Identity {
                transactional_id: transactional_id.as_str().to_string(),
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
            });
            // One producer per request; a batch of another one is only verified.
            if (producer.producer_id, producer.producer_epoch) != (h.producer_id, h.producer_epoch)
            {
                continue;
            }
            let seen = broker
                .txn
                .verify(h.producer_id, h.producer_epoch, &topic.name, pd.index);
            if needs_coordinator(seen) {
                partitions.push((topic.name.clone(), pd.index));
            }
        }
    }
    let who = who?;
    (!partitions.is_empty()).then_some(Pending { who, partitions })
}

/// Whether a Transactions V2 write must ask the coordinator, given what the view answered for
/// it: always, unless the view shows the partition in the producer's open transaction at its
/// epoch. A fenced epoch, a transaction still completing or one not started are the
/// coordinator's to decide (see the module docs).
pub fn needs_coordinator(view_answer: Result<(), i16>) -> bool {
    view_answer.is_err()
}

/// Asks the coordinator to add the partitions (Transactions V2); the coordinator's code.
pub async fn add(handle: &TxnHandle, pending: Pending) -> i16 {
    let input = AddInput {
        who: pending.who,
        partitions: pending.partitions,
        client_version: txn_version::V2,
    };
    handle
        .call(|tx| Request::AddPartitions(input, tx))
        .await
        .unwrap_or(codes::COORDINATOR_NOT_AVAILABLE)
}

/// Adds the partitions at the transaction's coordinator: the local task, or, when the image
/// names another broker as the transactional id's coordinator, AddPartitionsToTxn v5 to it (as
/// Kafka's `AddPartitionsToTxnManager`; a coordinator that cannot be reached is
/// COORDINATOR_NOT_AVAILABLE, retriable for the client). The coordinator's code.
pub async fn add_anywhere(broker: &Broker, pending: Pending) -> i16 {
    use crate::group::shard::{coordinator_shard, NotHere};
    use crate::txn::marker_channel;
    let image = broker.image();
    let me = broker.identity.node_id;
    let topic = crate::txn::TRANSACTION_STATE_TOPIC;
    let leader = match coordinator_shard(&image, me, topic, &pending.who.transactional_id) {
        Ok(_) | Err(NotHere::NoTopic) => return add(&broker.txn, pending).await,
        Err(NotHere::NoLeader) => return codes::COORDINATOR_NOT_AVAILABLE,
        Err(NotHere::Remote { leader }) => leader,
    };
    let listener = marker_channel::inter_broker_listener(&broker.config);
    let Some(endpoint) = image.broker(leader).and_then(|b| b.endpoint(&listener)) else {
        return codes::COORDINATOR_NOT_AVAILABLE;
    };
    let request = marker_channel::add_partitions_request(&pending.who, &pending.partitions);
    let client_id = format!("sluice-txn-verify-{me}");
    let version = marker_channel::ADD_PARTITIONS_VERSION;
    let (host, port) = (endpoint.host.clone(), endpoint.port);
    match marker_channel::call(&host, port, &client_id, version, &request).await {
        Ok(r) => marker_channel::add_partitions_code(&r),
        Err(e) => {
            tracing::warn!(
                "adding partitions of {} at coordinator {leader}: {e}",
                pending.who.transactional_id
            );
            codes::COORDINATOR_NOT_AVAILABLE
        }
    }
}

/// Adds a Produce request's pending partitions; the ones refused, with their Produce codes.
pub async fn add_for_produce(broker: &Broker, pending: Pending) -> Refused {
    let partitions = pending.partitions.clone();
    let code = add_anywhere(broker, pending).await;
    if code == codes::NONE {
        return Refused::new();
    }
    let code = produce_error(code);
    partitions.into_iter().map(|p| (p, code)).collect()
}

/// The Produce code for a refused implicit add, as Kafka maps it: a fenced producer gets
/// INVALID_PRODUCER_EPOCH, coordinator trouble and a transaction still completing the retriable
/// NOT_ENOUGH_REPLICAS; the rest pass through.
pub fn produce_error(code: i16) -> i16 {
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    match code {
        codes::PRODUCER_FENCED => codes::INVALID_PRODUCER_EPOCH,
        codes::CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_NOT_AVAILABLE
        | codes::COORDINATOR_LOAD_IN_PROGRESS
        | codes::NOT_COORDINATOR => NOT_ENOUGH_REPLICAS,
        c => c,
    }
}

/// The TxnOffsetCommit code for a refused implicit add: Kafka's group coordinator turns the
/// retriable ones into COORDINATOR_NOT_AVAILABLE (the client looks the coordinator up again and
/// retries); a fenced producer gets INVALID_PRODUCER_EPOCH.
pub fn offset_commit_error(code: i16) -> i16 {
    match code {
        codes::PRODUCER_FENCED => codes::INVALID_PRODUCER_EPOCH,
        codes::CONCURRENT_TRANSACTIONS
        | codes::COORDINATOR_LOAD_IN_PROGRESS
        | codes::NOT_COORDINATOR => codes::COORDINATOR_NOT_AVAILABLE,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_partition_the_view_shows_open_skips_the_coordinator() {
        assert!(!needs_coordinator(Ok(())));
        for seen in [
            codes::INVALID_TXN_STATE,
            codes::CONCURRENT_TRANSACTIONS,
            codes::INVALID_PRODUCER_EPOCH,
        ] {
            assert!(needs_coordinator(Err(seen)), "view answered {seen}");
        }
    }

    #[test]
    fn refusals_map_to_the_codes_kafka_gives_each_api() {
        assert_eq!(
            produce_error(codes::PRODUCER_FENCED),
            codes::INVALID_PRODUCER_EPOCH
        );
        assert_eq!(produce_error(codes::CONCURRENT_TRANSACTIONS), 19);
        assert_eq!(produce_error(codes::COORDINATOR_NOT_AVAILABLE), 19);
        assert_eq!(
            produce_error(codes::INVALID_PRODUCER_ID_MAPPING),
            codes::INVALID_PRODUCER_ID_MAPPING
        );
        assert_eq!(
            offset_commit_error(codes::CONCURRENT_TRANSACTIONS),
            codes::COORDINATOR_NOT_AVAILABLE
        );
        assert_eq!(
            offset_commit_error(codes::PRODUCER_FENCED),
            codes::INVALID_PRODUCER_EPOCH
        );
        assert_eq!(offset_commit_error(codes::NONE), codes::NONE);
    }
}
