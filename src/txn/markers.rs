//! Where each transaction marker goes and what a WriteTxnMarkers answer means (Kafka's
//! `TransactionMarkerChannelManager` routing and `TransactionMarkerRequestCompletionHandler`
//! decisions, as data).
//!
//! A marker job's partitions are routed against the newest metadata image on every attempt:
//! partitions this broker leads are written locally, those led elsewhere are grouped by leader
//! and sent to its endpoint on the inter-broker listener, those with no leader (or a leader
//! without that endpoint) wait for a retry, and those no longer in the image are skipped (the
//! topic was deleted). A partition's answer code says whether it is done, fenced (a newer
//! coordinator or producer epoch wrote there: final, as for a local marker) or to be retried.
//!
//! Invariants: pure (no I/O, no clock); a partition of the job lands in exactly one bucket of
//! the [`Route`].

use std::collections::BTreeMap;

use crate::metadata::{MetadataImage, NO_LEADER};

/// One `(topic, partition)` of a transaction.
pub type TxnPartition = (String, i32);

/// The partitions of one marker job, by destination.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Route {
    /// Led here: written with `Partition::write_txn_marker`.
    pub local: Vec<TxnPartition>,
    /// Led by another broker: its id, its inter-broker endpoint, the partitions.
    pub remote: BTreeMap<i32, RemoteLeader>,
    /// No leader, or its leader has no endpoint on the listener: retried later.
    pub unavailable: Vec<TxnPartition>,
    /// Not in the image any more (deleted): nothing to write.
    pub gone: Vec<TxnPartition>,
}

/// A leader on another broker and the partitions it gets markers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLeader {
    pub host: String,
    pub port: u16,
    pub partitions: Vec<TxnPartition>,
}

/// Routes `partitions` as seen by broker `me`, to endpoints on `listener`.
pub fn route(image: &MetadataImage, me: i32, listener: &str, partitions: &[TxnPartition]) -> Route {
    let mut out = Route::default();
    for tp in partitions {
        let Some(p) = image.partition(&tp.0, tp.1) else {
            out.gone.push(tp.clone());
            continue;
        };
        if p.leader == me {
            out.local.push(tp.clone());
            continue;
        }
        let endpoint = (p.leader != NO_LEADER)
            .then(|| image.broker(p.leader))
            .flatten()
            .and_then(|b| b.endpoint(listener));
        match endpoint {
            Some(e) => out
                .remote
                .entry(p.leader)
                .or_insert_with(|| RemoteLeader {
                    host: e.host.clone(),
                    port: e.port,
                    partitions: Vec::new(),
                })
                .partitions
                .push(tp.clone()),
            None => out.unavailable.push(tp.clone()),
        }
    }
    out
}

/// What one partition's WriteTxnMarkers answer means for its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The marker is written (or, for an old message format, not needed).
    Done,
    /// A newer producer or coordinator epoch wrote there: final, never retried.
    Fenced,
    /// Send it again after the backoff, re-routed against the newest image.
    Retry,
}

/// Kafka's handling of a partition's error code in a WriteTxnMarkers answer. Leadership moves
/// (NOT_LEADER_OR_FOLLOWER), a partition the leader does not know yet, replication shortfalls,
/// timeouts and storage errors are retried; so is any unexpected code (a marker must land for
/// the transaction to complete; Kafka fails hard there, we keep retrying with a log line).
pub fn outcome(code: i16) -> Outcome {
    const NONE: i16 = 0;
    const UNSUPPORTED_FOR_MESSAGE_FORMAT: i16 = 43;
    const INVALID_PRODUCER_EPOCH: i16 = 47;
    const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
    match code {
        NONE | UNSUPPORTED_FOR_MESSAGE_FORMAT => Outcome::Done,
        INVALID_PRODUCER_EPOCH | TRANSACTION_COORDINATOR_FENCED => Outcome::Fenced,
        _ => Outcome::Retry,
    }
}

/// The partitions of `sent` to retry after an answer: those whose code says so, and those the
/// answer does not mention (a partial answer proves nothing about them). Fenced ones are logged
/// by the caller from [`fenced`].
pub fn to_retry(sent: &[TxnPartition], answered: &[(TxnPartition, i16)]) -> Vec<TxnPartition> {
    sent.iter()
        .filter(|tp| {
            answered
                .iter()
                .find(|(a, _)| a == *tp)
                .is_none_or(|(_, code)| outcome(*code) == Outcome::Retry)
        })
        .cloned()
        .collect()
}

/// The partitions of an answer whose marker was refused for good (fencing).
pub fn fenced(answered: &[(TxnPartition, i16)]) -> Vec<(TxnPartition, i16)> {
    answered
        .iter()
        .filter(|(_, code)| outcome(*code) == Outcome::Fenced)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{BrokerEndpoint, MetadataRecord, PartitionRecord, RegisterBroker};
    use uuid::Uuid;

    fn register(id: i32, listener: &str, port: u16) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBroker {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 1,
            endpoints: vec![BrokerEndpoint {
                name: listener.into(),
                host: format!("127.0.0.{id}"),
                port,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
        })
    }

    /// Topic `t`: partition 0 led by 1 (me), 1 and 2 by 2, 3 by 3 (no INTERNAL endpoint), 4 by
    /// nobody.
    fn image() -> MetadataImage {
        let t = Uuid::from_u128(9);
        let part = |p: i32, leader: i32| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: t,
                replicas: vec![1],
                isr: vec![1],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: vec![],
                last_known_elr: vec![],
            })
        };
        let mut records = vec![
            register(1, "INTERNAL", 9091),
            register(2, "INTERNAL", 9092),
            register(3, "EXTERNAL", 9093),
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: t,
            },
        ];
        records.extend([
            part(0, 1),
            part(1, 2),
            part(2, 2),
            part(3, 3),
            part(4, NO_LEADER),
        ]);
        MetadataImage::empty("c", 1).apply(&records).0
    }

    fn tp(p: i32) -> TxnPartition {
        ("t".to_string(), p)
    }

    #[test]
    fn partitions_are_routed_to_their_leaders() {
        let all: Vec<_> = (0..6).map(tp).chain([("gone".into(), 0)]).collect();
        let r = route(&image(), 1, "INTERNAL", &all);
        assert_eq!(r.local, vec![tp(0)]);
        assert_eq!(
            r.remote,
            BTreeMap::from([(
                2,
                RemoteLeader {
                    host: "127.0.0.2".into(),
                    port: 9092,
                    partitions: vec![tp(1), tp(2)],
                }
            )])
        );
        assert_eq!(r.unavailable, vec![tp(3), tp(4)]);
        assert_eq!(r.gone, vec![tp(5), ("gone".to_string(), 0)]);
        // Seen from broker 2, partition 0 is remote and 1, 2 are local.
        let r = route(&image(), 2, "INTERNAL", &all[..3]);
        assert_eq!(r.local, vec![tp(1), tp(2)]);
        assert_eq!(r.remote[&1].partitions, vec![tp(0)]);
    }

    #[test]
    fn answer_codes_decide_retries() {
        assert_eq!(outcome(0), Outcome::Done);
        assert_eq!(outcome(43), Outcome::Done);
        assert_eq!(outcome(47), Outcome::Fenced);
        assert_eq!(outcome(52), Outcome::Fenced);
        for retriable in [6, 3, 19, 20, 7, 56, 2, -1] {
            assert_eq!(outcome(retriable), Outcome::Retry, "code {retriable}");
        }
        let sent = vec![tp(1), tp(2), tp(3), tp(4)];
        let answered = vec![(tp(1), 0), (tp(2), 6), (tp(3), 52)];
        // 2 moved leader, 4 is missing from the answer; 1 is done, 3 fenced.
        assert_eq!(to_retry(&sent, &answered), vec![tp(2), tp(4)]);
        assert_eq!(fenced(&answered), vec![(tp(3), 52)]);
    }
}
