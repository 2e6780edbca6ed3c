//! Metadata (key 3): brokers, cluster id, controller, topics with partitions and topic ids.
//! Auto-creates requested topics when allowed, answering LEADER_NOT_AVAILABLE for them this time
//! (clients retry; the next answer has the topic).

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::cluster::acl;
use crate::replica::manager::Topic;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: MetadataRequest,
) -> MetadataResponse {
    let id = &broker.identity;
    let version = ctx.api_version;
    let (host, port) = ctx.advertised(broker);
    let mut response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(id.node_id))
            .with_host(StrBytes::from_string(host.to_string()))
            .with_port(port)])
        .with_controller_id(BrokerId(id.node_id));
    if version >= 2 {
        response.cluster_id = Some(StrBytes::from_string(id.cluster_id.clone()));
    }
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let allow_auto_create = version < 4 || request.allow_auto_topic_creation;
    let mut topics = Vec::new();
    if all {
        for t in broker.replicas.topics() {
            topics.push(describe(&t, version, broker.identity.node_id));
        }
    } else {
        for requested in request.topics.unwrap_or_default() {
            topics.push(match requested.name {
                Some(name) => describe_by_name(broker, name, version, allow_auto_create),
                None => match broker.replicas.topic_by_id(requested.topic_id) {
                    Some(t) => describe(&t, version, broker.identity.node_id),
                    None => MetadataResponseTopic::default()
                        .with_error_code(error::UNKNOWN_TOPIC_ID)
                        .with_topic_id(requested.topic_id),
                },
            });
        }
    }
    // Authorized operations (no authorizer: all of them), as Kafka: every listed topic, found or
    // not, when asked (v8+); the cluster's only in v8-10.
    if version >= 8 && request.include_topic_authorized_operations {
        for t in &mut topics {
            t.topic_authorized_operations = acl::TOPIC_OPERATIONS;
        }
    }
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = acl::CLUSTER_OPERATIONS;
    }
    response.topics = topics;
    response
}

/// Whether answering `request` may create a topic (a named topic that does not exist yet:
/// auto-creation or an internal topic), so it must run off the runtime workers.
pub fn may_create_topics(broker: &Broker, request: &MetadataRequest) -> bool {
    request.topics.as_ref().is_some_and(|topics| {
        topics.iter().any(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| broker.replicas.topic(n.as_str()).is_none())
        })
    })
}

fn describe_by_name(
    broker: &Arc<Broker>,
    name: TopicName,
    version: i16,
    allow_auto_create: bool,
) -> MetadataResponseTopic {
    if let Some(t) = broker.replicas.topic(name.as_str()) {
        return describe(&t, version, broker.identity.node_id);
    }
    let unknown = MetadataResponseTopic::default().with_name(Some(name.clone()));
    if let Err(_reason) = crate::cluster::validate_topic_name(name.as_str()) {
        return unknown.with_error_code(error::INVALID_TOPIC_EXCEPTION);
    }
    if name.as_str() == crate::group::OFFSETS_TOPIC {
        // Internal topics are created by their coordinator, with their own settings.
        return match crate::group::driver::ensure_offsets_topic(broker) {
            Some(t) => describe(&t, version, broker.identity.node_id),
            None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
        };
    }
    if name.as_str() == crate::txn::TRANSACTION_STATE_TOPIC {
        return match crate::txn::driver::ensure_transaction_topic(broker) {
            Some(t) => describe(&t, version, broker.identity.node_id),
            None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
        };
    }
    if !(allow_auto_create && broker.config.auto_create_topics) {
        return unknown.with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION);
    }
    let config = broker.replicas.default_topic_config();
    match broker
        .replicas
        .create_topic(name.as_str(), broker.config.num_partitions, config)
    {
        Ok(t) => unknown
            .with_error_code(error::LEADER_NOT_AVAILABLE)
            .with_topic_id(t.id),
        Err(crate::replica::manager::TopicError::Collides { name, existing }) => {
            // Kafka's controller refuses it (INVALID_TOPIC_EXCEPTION) and Metadata goes on
            // answering UNKNOWN_TOPIC_OR_PARTITION for the name.
            tracing::debug!("auto-create of {name} refused: collides with {existing}");
            unknown.with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION)
        }
        Err(crate::replica::manager::TopicError::AlreadyExists(_)) => {
            match broker.replicas.topic(name.as_str()) {
                Some(t) => describe(&t, version, broker.identity.node_id),
                None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
            }
        }
        Err(e) => {
            tracing::error!("auto-creating topic {}: {e}", name.as_str());
            unknown.with_error_code(error::KAFKA_STORAGE_ERROR)
        }
    }
}

fn describe(topic: &Topic, version: i16, node_id: i32) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let mut mp = MetadataResponsePartition::default()
                .with_error_code(error::NONE)
                .with_partition_index(p.index)
                .with_leader_id(BrokerId(node_id))
                .with_replica_nodes(vec![BrokerId(node_id)])
                .with_isr_nodes(vec![BrokerId(node_id)]);
            if version >= 7 {
                mp.leader_epoch = p.leader_epoch();
            }
            mp
        })
        .collect();
    MetadataResponseTopic::default()
        .with_error_code(error::NONE)
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(crate::cluster::is_internal_topic(&topic.name))
        .with_partitions(partitions)
}
