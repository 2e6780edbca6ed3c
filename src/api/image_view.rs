//! What handlers read from the metadata image: the listener a client's answers name, each
//! broker's endpoint on it, and the partition a Produce/Fetch/ListOffsets/DeleteRecords may use
//! here (Kafka's per-partition UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER).

use std::sync::Arc;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::metadata::{BrokerRegistration, MetadataImage, PartitionLeader, PartitionRegistration};
use crate::replica::Partition;

/// The partition `topic`-`index` if this broker leads it and hosts its log; else Kafka's code:
/// UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition, NOT_LEADER_OR_FOLLOWER when
/// another broker (or none) leads it, or its log is not hosted here.
pub fn leader_partition(broker: &Broker, topic: &str, index: i32) -> Result<Arc<Partition>, i16> {
    leader_code(&broker.image(), broker.identity.node_id, topic, index)?;
    broker
        .replicas
        .partition(topic, index)
        .ok_or(error::NOT_LEADER_OR_FOLLOWER)
}

/// The image lookup under [`leader_partition`] (pure).
pub fn leader_code(image: &MetadataImage, me: i32, topic: &str, index: i32) -> Result<i32, i16> {
    match image.leader_for(me, topic, index) {
        PartitionLeader::Local { leader_epoch } => Ok(leader_epoch),
        PartitionLeader::Remote { .. } | PartitionLeader::None => {
            Err(error::NOT_LEADER_OR_FOLLOWER)
        }
        PartitionLeader::Unknown => Err(error::UNKNOWN_TOPIC_OR_PARTITION),
    }
}

/// The listener name whose endpoints this client is told about: the client listener it
/// connected through (Kafka's rule), else (controller listener, in-process calls) the one this
/// broker's primary advertised endpoint belongs to.
pub fn listener_name(broker: &Broker, ctx: &RequestContext, image: &MetadataImage) -> String {
    if let Some(l) = ctx
        .listener
        .and_then(|i| broker.config.listeners.get(i))
        .filter(|l| !l.controller)
    {
        return l.name.clone();
    }
    let id = &broker.identity;
    let me = image.broker(id.node_id);
    me.and_then(|b| {
        b.endpoints
            .iter()
            .find(|e| e.host == id.advertised_host && i32::from(e.port) == id.advertised_port)
            .or(b.endpoints.first())
    })
    .map(|e| e.name.clone())
    .unwrap_or_else(|| "PLAINTEXT".to_string())
}

/// The assigned replicas of `p` that are not live (unregistered or fenced): Kafka's
/// `offline_replicas`.
pub fn offline_replicas(image: &MetadataImage, p: &PartitionRegistration) -> Vec<i32> {
    p.replicas
        .iter()
        .copied()
        .filter(|&r| image.broker(r).is_none_or(|b| b.fenced))
        .collect()
}

/// `broker`'s (host, port) on `listener`, if it registered one.
pub fn endpoint(broker: &BrokerRegistration, listener: &str) -> Option<(String, i32)> {
    broker
        .endpoint(listener)
        .map(|e| (e.host.clone(), i32::from(e.port)))
}

/// This broker's own endpoint for this client (from its registration in the image; the
/// configured advertised endpoint if the image lacks it).
pub fn self_endpoint(
    broker: &Broker,
    ctx: &RequestContext,
    image: &MetadataImage,
) -> (String, i32) {
    let name = listener_name(broker, ctx, image);
    image
        .broker(broker.identity.node_id)
        .and_then(|b| endpoint(b, &name))
        .unwrap_or_else(|| {
            let (host, port) = ctx.advertised(broker);
            (host.to_string(), port)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataRecord, PartitionRecord};
    use uuid::Uuid;

    /// A partition led by broker 2 answers NOT_LEADER_OR_FOLLOWER on broker 1 (the only way to
    /// see it on one node), one led by 1 is used, one that does not exist is unknown.
    #[test]
    fn leadership_maps_to_kafka_codes() {
        let t = Uuid::from_u128(1);
        let part = |p: i32, leader: i32| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: t,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader,
                leader_epoch: 4,
                partition_epoch: 0,
                elr: vec![],
                last_known_elr: vec![],
            })
        };
        let (image, _) = MetadataImage::empty("c", 1).apply(&[
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: t,
            },
            part(0, 1),
            part(1, 2),
            part(2, crate::metadata::NO_LEADER),
        ]);
        assert_eq!(leader_code(&image, 1, "t", 0), Ok(4));
        assert_eq!(
            leader_code(&image, 1, "t", 1),
            Err(error::NOT_LEADER_OR_FOLLOWER)
        );
        assert_eq!(leader_code(&image, 2, "t", 1), Ok(4));
        assert_eq!(
            leader_code(&image, 1, "t", 2),
            Err(error::NOT_LEADER_OR_FOLLOWER)
        );
        assert_eq!(
            leader_code(&image, 1, "t", 3),
            Err(error::UNKNOWN_TOPIC_OR_PARTITION)
        );
        assert_eq!(
            leader_code(&image, 1, "x", 0),
            Err(error::UNKNOWN_TOPIC_OR_PARTITION)
        );
    }

    /// On a real broker: once the image says broker 2 leads `t-1` (broker 2 registered, a
    /// PartitionChange), Metadata lists both brokers and names 2 as the leader at epoch 1, and the
    /// produce/fetch lookup refuses `t-1` here with NOT_LEADER_OR_FOLLOWER while `t-0` is served.
    #[test]
    fn handlers_follow_the_image_not_the_hosted_logs() {
        use crate::metadata::{BrokerEndpoint, PartitionChange, RegisterBroker};
        use kafka_protocol::messages::{ApiKey, MetadataRequest};
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::Config {
            data_dir: dir.path().to_path_buf(),
            ..crate::config::Config::default()
        };
        let registration = crate::cluster::identity::registration(&config, 0);
        let broker = Broker::open(config).unwrap();
        // This broker registered (as its start does through the controller), then topic `t`.
        broker
            .replicas
            .apply_committed(0, vec![MetadataRecord::RegisterBroker(registration)]);
        let topic = broker.replicas.create_topic_for_test("t", 2, &[]);
        broker
            .metadata
            .commit::<()>(
                vec![
                    MetadataRecord::RegisterBroker(RegisterBroker {
                        broker_id: 2,
                        incarnation_id: Uuid::from_u128(2),
                        broker_epoch: 5,
                        endpoints: vec![BrokerEndpoint {
                            name: "PLAINTEXT".into(),
                            host: "127.0.0.2".into(),
                            port: 9092,
                            security_protocol: 0,
                        }],
                        features: vec![],
                        rack: Some("r2".into()),
                        fenced: false,
                        in_controlled_shutdown: false,
                    }),
                    MetadataRecord::PartitionChange(PartitionChange {
                        partition_id: 1,
                        topic_id: topic.id,
                        isr: Some(vec![2]),
                        leader: 2,
                        replicas: Some(vec![1, 2]),
                        removing_replicas: None,
                        adding_replicas: None,
                        elr: None,
                        last_known_elr: None,
                    }),
                ],
                |_, _| Ok(()),
            )
            .unwrap();
        let ctx = RequestContext {
            api_key: ApiKey::Metadata,
            api_version: 12,
            correlation_id: 1,
            client_id: None,
            peer: None,
            listener: None,
            forwarded: false,
        };
        let response = crate::api::metadata::handle(
            &broker,
            &ctx,
            MetadataRequest::default().with_topics(None),
        );
        let brokers: Vec<_> = response
            .brokers
            .iter()
            .map(|b| {
                (
                    b.node_id.0,
                    b.host.to_string(),
                    b.rack.as_ref().map(|r| r.to_string()),
                )
            })
            .collect();
        assert_eq!(brokers.len(), 2);
        assert_eq!(
            brokers[1],
            (2, "127.0.0.2".to_string(), Some("r2".to_string()))
        );
        let t = &response.topics[0];
        let p1 = &t.partitions[1];
        assert_eq!((p1.leader_id.0, p1.leader_epoch), (2, 1));
        assert_eq!(
            p1.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(
            p1.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(t.partitions[0].leader_id.0, 1);
        assert_eq!(
            leader_partition(&broker, "t", 1).err(),
            Some(error::NOT_LEADER_OR_FOLLOWER)
        );
        assert!(leader_partition(&broker, "t", 0).is_ok());
        assert_eq!(
            leader_partition(&broker, "t", 2).err(),
            Some(error::UNKNOWN_TOPIC_OR_PARTITION)
        );
    }
}
