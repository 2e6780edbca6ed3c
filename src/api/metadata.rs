//! Metadata (key 3): brokers, cluster id, controller, topics with partitions and topic ids, all
//! read from the metadata image (brokers as registered, with their endpoint on the listener the
//! client connected through; per partition the image's leader, leader epoch, replicas and ISR).
//! Auto-creates requested topics when allowed, answering LEADER_NOT_AVAILABLE for them this time
//! (clients retry; the next answer has the topic).

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{error, image_view, RequestContext};
use crate::broker::Broker;
use crate::cluster::acl;
use crate::metadata::{MetadataImage, TopicImage, NO_LEADER};

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: MetadataRequest,
) -> MetadataResponse {
    let version = ctx.api_version;
    let image = broker.image();
    let listener = image_view::listener_name(broker, ctx, &image);
    let brokers = image
        .live_brokers()
        .filter_map(|b| {
            let (host, port) = image_view::endpoint(b, &listener)?;
            let mut mb = MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(host))
                .with_port(port);
            if version >= 1 {
                mb.rack = b.rack.clone().map(StrBytes::from_string);
            }
            Some(mb)
        })
        .collect();
    let mut response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_controller_id(BrokerId(image.controller_id));
    if version >= 2 {
        response.cluster_id = Some(StrBytes::from_string(image.cluster_id.clone()));
    }
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && version == 0,
    };
    let allow_auto_create = version < 4 || request.allow_auto_topic_creation;
    let mut topics = Vec::new();
    if all {
        for t in image.topics() {
            topics.push(describe(&image, t, version));
        }
    } else {
        for requested in request.topics.unwrap_or_default() {
            topics.push(match requested.name {
                Some(name) => describe_by_name(broker, name, version, allow_auto_create),
                None => match image.topic_by_id(requested.topic_id) {
                    Some(t) => describe(&image, t, version),
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
                .is_some_and(|n| broker.image().topic(n.as_str()).is_none())
        })
    })
}

fn describe_by_name(
    broker: &Arc<Broker>,
    name: TopicName,
    version: i16,
    allow_auto_create: bool,
) -> MetadataResponseTopic {
    // Described from the image as it is after any creation below.
    let described = |broker: &Broker| {
        let image = broker.image();
        image
            .topic(name.as_str())
            .map(|t| describe(&image, t, version))
    };
    if let Some(t) = described(broker) {
        return t;
    }
    let unknown = MetadataResponseTopic::default().with_name(Some(name.clone()));
    if let Err(_reason) = crate::cluster::validate_topic_name(name.as_str()) {
        return unknown.with_error_code(error::INVALID_TOPIC_EXCEPTION);
    }
    if name.as_str() == crate::group::OFFSETS_TOPIC {
        // Internal topics are created by their coordinator, with their own settings.
        let spec = crate::group::driver::offsets_topic(broker);
        return match crate::internal_topic::ensure_blocking(broker, spec).and(described(broker)) {
            Some(t) => t,
            None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
        };
    }
    if name.as_str() == crate::txn::TRANSACTION_STATE_TOPIC {
        let spec = crate::txn::driver::transaction_topic(broker);
        return match crate::internal_topic::ensure_blocking(broker, spec).and(described(broker)) {
            Some(t) => t,
            None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
        };
    }
    if !(allow_auto_create && broker.config.auto_create_topics) {
        return unknown.with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION);
    }
    let wanted = crate::api::topics::creatable(
        name.as_str(),
        broker.config.num_partitions,
        &std::collections::BTreeMap::new(),
    );
    let mut decided = crate::api::topics::create_in_controller_blocking(broker, vec![wanted]);
    match decided.remove(name.as_str()) {
        Some(Ok(t)) => unknown
            .with_error_code(error::LEADER_NOT_AVAILABLE)
            .with_topic_id(t.topic_id),
        Some(Err((code, message))) if code == error::TOPIC_ALREADY_EXISTS => {
            tracing::debug!("auto-create of {}: {message}", name.as_str());
            match described(broker) {
                Some(t) => t,
                None => unknown.with_error_code(error::LEADER_NOT_AVAILABLE),
            }
        }
        Some(Err((code, message))) if code == error::INVALID_TOPIC_EXCEPTION => {
            // A name colliding with another: Kafka's controller refuses it and Metadata goes on
            // answering UNKNOWN_TOPIC_OR_PARTITION for the name.
            tracing::debug!("auto-create of {} refused: {message}", name.as_str());
            unknown.with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION)
        }
        Some(Err((code, message))) => {
            // As Kafka's auto-creation, which does not wait for the controller's verdict.
            tracing::warn!(
                "auto-creating topic {}: error {code}: {message}",
                name.as_str()
            );
            unknown.with_error_code(error::LEADER_NOT_AVAILABLE)
        }
        None => unknown.with_error_code(error::UNKNOWN_SERVER_ERROR),
    }
}

fn describe(image: &MetadataImage, topic: &TopicImage, version: i16) -> MetadataResponseTopic {
    let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
    let partitions = topic
        .partitions
        .iter()
        .map(|(&index, p)| {
            let code = if p.leader == NO_LEADER {
                error::LEADER_NOT_AVAILABLE
            } else {
                error::NONE
            };
            let mut mp = MetadataResponsePartition::default()
                .with_error_code(code)
                .with_partition_index(index)
                .with_leader_id(BrokerId(p.leader))
                .with_replica_nodes(ids(&p.replicas))
                .with_isr_nodes(ids(&p.isr));
            if version >= 5 {
                mp.offline_replicas = ids(&image_view::offline_replicas(image, p));
            }
            if version >= 7 {
                mp.leader_epoch = p.leader_epoch;
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
