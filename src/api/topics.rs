//! CreateTopics (key 19) and DeleteTopics (key 20), the basics: name rules (and Kafka's `.`/`_`
//! collision rule), partition counts, replication factor 1 on a single node, manual replica
//! assignments naming this node, per-topic configs, validate-only.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::cluster::assignment::{create_topic_assignment, AssignmentError};
use crate::cluster::{validate_topic_name, TopicConfig};
use crate::replica::manager::TopicError;

/// Upper bound on partitions per CreateTopics topic, so one request cannot exhaust file handles.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;

/// A created (or validated) topic: id (nil when validate-only), partitions, config overrides.
type Created = (Uuid, i32, BTreeMap<String, String>);

pub fn create(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen = std::collections::HashSet::new();
    let mut duplicates = std::collections::HashSet::new();
    for t in &request.topics {
        if !seen.insert(t.name.as_str().to_string()) {
            duplicates.insert(t.name.as_str().to_string());
        }
    }
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.name.clone();
            let result = if duplicates.contains(name.as_str()) {
                Err((
                    error::INVALID_REQUEST,
                    format!(
                        "Create topics request from client contains a duplicate topic: {}",
                        name.as_str()
                    ),
                ))
            } else {
                create_one(broker, t, request.validate_only)
            };
            let mut r = CreatableTopicResult::default().with_name(name);
            match result {
                Ok((id, partitions, overrides)) => {
                    r.error_code = error::NONE;
                    r.error_message = None;
                    if ctx.api_version >= 5 {
                        r.num_partitions = partitions;
                        r.replication_factor = 1;
                        r.topic_config_error_code = error::NONE;
                        r.configs =
                            Some(super::configs::creatable_topic_configs(broker, &overrides));
                    }
                    if ctx.api_version >= 7 {
                        r.topic_id = id;
                    }
                }
                Err((code, message)) => {
                    r.error_code = code;
                    r.error_message = Some(StrBytes::from_string(message));
                    r.num_partitions = -1;
                    r.replication_factor = -1;
                    // Kafka answers an empty (not null) config list for a refused topic (v5+).
                    r.configs = (ctx.api_version >= 5).then(Vec::new);
                }
            }
            r
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

fn create_one(
    broker: &Arc<Broker>,
    t: CreatableTopic,
    validate_only: bool,
) -> Result<Created, (i16, String)> {
    let name = t.name.as_str();
    validate_topic_name(name).map_err(|m| (error::INVALID_TOPIC_EXCEPTION, m))?;
    if broker.replicas.topic(name).is_some() {
        return Err((
            error::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(existing) = broker.replicas.colliding_topic(name) {
        return Err((
            error::INVALID_TOPIC_EXCEPTION,
            crate::cluster::collision_message(name, &existing),
        ));
    }
    let partitions = if t.assignments.is_empty() {
        let partitions = match t.num_partitions {
            -1 => broker.config.num_partitions,
            n if (1..=MAX_PARTITIONS_PER_TOPIC).contains(&n) => n,
            n if n < 1 => return Err((error::INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.".into())),
            n => return Err((error::INVALID_PARTITIONS, format!("Number of partitions was set to an invalid value {n}; it must be between 1 and {MAX_PARTITIONS_PER_TOPIC}."))),
        };
        // -1: `default.replication.factor` (config).
        let replication_factor = match t.replication_factor {
            -1 => broker.config.default_replication_factor,
            n => i32::from(n),
        };
        match replication_factor {
            1 => {}
            n => {
                return Err((
                    error::INVALID_REPLICATION_FACTOR,
                    format!("Unable to replicate the partition {n} time(s): The target replication factor of {n} cannot be reached because only 1 broker(s) are registered."),
                ))
            }
        }
        partitions
    } else {
        // A manual assignment: on this node every replica list must be exactly [node id].
        let assignments: Vec<(i32, Vec<i32>)> = t
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        let lists = create_topic_assignment(
            t.num_partitions,
            t.replication_factor,
            &assignments,
            &broker.image().brokers().map(|b| b.id).collect::<Vec<_>>(),
        )
        .map_err(assignment_error)?;
        match i32::try_from(lists.len()) {
            Ok(n) if n <= MAX_PARTITIONS_PER_TOPIC => n,
            _ => return Err((error::INVALID_PARTITIONS, format!("Number of partitions was set to an invalid value {}; it must be between 1 and {MAX_PARTITIONS_PER_TOPIC}.", lists.len()))),
        }
    };
    let mut overrides = BTreeMap::new();
    for c in t.configs {
        match c.value {
            Some(v) => {
                overrides.insert(c.name.as_str().to_string(), v.as_str().to_string());
            }
            None => {
                return Err((
                    error::INVALID_CONFIG,
                    format!(
                        "Null value not supported for topic configs: {}",
                        c.name.as_str()
                    ),
                ))
            }
        }
    }
    let config = TopicConfig::build(&broker.replicas.effective_config(), overrides)
        .map_err(|e| (error::INVALID_CONFIG, e.to_string()))?;
    let overrides = config.overrides.clone();
    if validate_only {
        return Ok((Uuid::nil(), partitions, overrides));
    }
    match broker.replicas.create_topic(name, partitions, config) {
        Ok(topic) => Ok((topic.id, partitions, overrides)),
        Err(TopicError::AlreadyExists(_)) => Err((
            error::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        )),
        Err(e @ TopicError::Collides { .. }) => {
            Err((error::INVALID_TOPIC_EXCEPTION, e.to_string()))
        }
        Err(e) => {
            tracing::error!("creating topic {name}: {e}");
            Err((error::KAFKA_STORAGE_ERROR, e.to_string()))
        }
    }
}

/// Kafka's error code and message for a refused manual assignment.
pub fn assignment_error(e: AssignmentError) -> (i16, String) {
    match e {
        AssignmentError::InvalidRequest(m) => (error::INVALID_REQUEST, m),
        AssignmentError::InvalidReplicaAssignment(m) => (error::INVALID_REPLICA_ASSIGNMENT, m),
    }
}

pub fn delete(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v0-5 name topics in `topic_names`; v6 uses `topics` with a name or a topic id.
    let wanted: Vec<(Option<TopicName>, Uuid)> = if ctx.api_version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::nil()))
            .collect()
    };
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let resolved = match (&name, id.is_nil()) {
                (Some(n), _) => broker
                    .replicas
                    .topic(n.as_str())
                    .map(|t| t.name.clone())
                    .ok_or(error::UNKNOWN_TOPIC_OR_PARTITION),
                (None, false) => broker
                    .replicas
                    .topic_by_id(id)
                    .map(|t| t.name.clone())
                    .ok_or(error::UNKNOWN_TOPIC_ID),
                (None, true) => Err(error::INVALID_REQUEST),
            };
            let mut r = DeletableTopicResult::default()
                .with_name(name.clone())
                .with_topic_id(id);
            match resolved.and_then(|n| {
                broker
                    .replicas
                    .delete_topic(&n)
                    .map(|id| (n, id))
                    .map_err(|e| match e {
                        TopicError::Unknown(_) => error::UNKNOWN_TOPIC_OR_PARTITION,
                        other => {
                            tracing::error!("deleting topic: {other}");
                            error::KAFKA_STORAGE_ERROR
                        }
                    })
            }) {
                Ok((n, deleted_id)) => {
                    r.error_code = error::NONE;
                    if ctx.api_version >= 6 {
                        r.name = Some(TopicName(StrBytes::from_string(n)));
                        r.topic_id = deleted_id;
                    }
                }
                Err(code) => r.error_code = code,
            }
            r
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
