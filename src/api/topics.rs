//! CreateTopics (key 19) and DeleteTopics (key 20): each topic is checked here against the image
//! with Kafka's messages (name rules and the `.`/`_` collision rule, partition counts, a
//! replication factor the registered brokers can reach, manual assignments naming registered
//! brokers, per-topic configs, validate-only), then the controller decides (topic ids,
//! placement, a re-check against its own state) in one command whose entry is in this broker's
//! image before the answer goes out. Nothing here writes a record or touches a directory.

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
use crate::controller;
use crate::controller::driver::DriverError;

/// Upper bound on partitions per CreateTopics topic, so one request cannot exhaust file handles.
pub const MAX_PARTITIONS_PER_TOPIC: i32 = 100_000;

/// CreateTopics: each topic is checked here (Kafka's messages), then the valid ones go to the
/// controller in one command, which decides ids and placement and re-checks against its state.
/// Answered once the new topics are in this broker's image.
pub async fn create(
    broker: Arc<Broker>,
    ctx: RequestContext,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen = std::collections::HashSet::new();
    let mut duplicates = std::collections::HashSet::new();
    for t in &request.topics {
        if !seen.insert(t.name.as_str().to_string()) {
            duplicates.insert(t.name.as_str().to_string());
        }
    }
    let mut checked = Vec::with_capacity(request.topics.len());
    for t in request.topics {
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
            check_one(&broker, t)
        };
        checked.push((name, result));
    }
    let wanted: Vec<controller::CreatableTopic> = checked
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(c, _)| c.clone()))
        .collect();
    let mut decided = if request.validate_only || wanted.is_empty() {
        BTreeMap::new()
    } else {
        create_in_controller(&broker, wanted).await
    };
    let topics = checked
        .into_iter()
        .map(|(name, result)| {
            let result = result.and_then(|(c, overrides)| {
                if request.validate_only {
                    let partitions = c.num_partitions.max(c.assignments.len() as i32);
                    return Ok((Uuid::nil(), partitions, 1, overrides));
                }
                match decided.remove(&c.name) {
                    Some(Ok(t)) => Ok((
                        t.topic_id,
                        t.num_partitions,
                        t.replication_factor,
                        overrides,
                    )),
                    Some(Err(e)) => Err(e),
                    None => Err((error::UNKNOWN_SERVER_ERROR, "no answer".to_string())),
                }
            });
            let mut r = CreatableTopicResult::default().with_name(name);
            match result {
                Ok((id, partitions, replication_factor, overrides)) => {
                    r.error_code = error::NONE;
                    r.error_message = None;
                    if ctx.api_version >= 5 {
                        r.num_partitions = partitions;
                        r.replication_factor = replication_factor;
                        r.topic_config_error_code = error::NONE;
                        r.configs =
                            Some(super::configs::creatable_topic_configs(&broker, &overrides));
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

/// The controller's verdict per topic name: created, or Kafka's error code and message.
pub type Decided = BTreeMap<String, Result<controller::CreatedTopic, (i16, String)>>;

/// Creates `topics` in one controller command (answered once the image shows them).
pub async fn create_in_controller(
    broker: &Broker,
    topics: Vec<controller::CreatableTopic>,
) -> Decided {
    if let Some(forwarder) = broker.forwarder().filter(|f| !f.leads_here()) {
        if let Some(decided) = super::forward::create_topics(broker, &forwarder, &topics).await {
            return decided;
        }
    }
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let answer = broker
        .controller_run(move |c, ctx| c.create_topics(&topics, ctx.seed))
        .await;
    decided(names, answer)
}

/// [`create_in_controller`] for a caller on tokio's blocking pool (Metadata auto-creation).
pub fn create_in_controller_blocking(
    broker: &Broker,
    topics: Vec<controller::CreatableTopic>,
) -> Decided {
    if broker.forwarder().is_some() {
        // A member of a multi-voter quorum may have to forward: the async path, waited on here.
        return match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime.block_on(create_in_controller(broker, topics)),
            Err(_) => decided(
                topics.iter().map(|t| t.name.clone()).collect(),
                Err(DriverError::Stopped),
            ),
        };
    }
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let answer = broker.controller_run_blocking(move |c, ctx| c.create_topics(&topics, ctx.seed));
    decided(names, answer)
}

/// The controller's answers to a CreateTopics command.
type CreateAnswers = Vec<(
    String,
    Result<controller::CreatedTopic, controller::ControllerError>,
)>;

fn decided(names: Vec<String>, answer: Result<CreateAnswers, DriverError>) -> Decided {
    match answer {
        Ok(answers) => answers
            .into_iter()
            .map(|(name, r)| {
                if let Ok(t) = &r {
                    tracing::info!(
                        "created topic {name} with {} partition(s), id {}",
                        t.num_partitions,
                        crate::log::checkpoint::uuid_to_kafka_string(t.topic_id)
                    );
                }
                (name, r.map_err(|e| (e.code(), e.message)))
            })
            .collect(),
        Err(e) => {
            tracing::warn!("creating topics {names:?}: {e}");
            names
                .into_iter()
                .map(|n| (n, Err((e.code(), e.to_string()))))
                .collect()
        }
    }
}

/// A topic `name` with `partitions` partitions of replication factor -1 (the default) and
/// `overrides`, as the controller takes it.
pub fn creatable(
    name: &str,
    partitions: i32,
    overrides: &BTreeMap<String, String>,
) -> controller::CreatableTopic {
    controller::CreatableTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: -1,
        assignments: Vec::new(),
        configs: overrides
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect(),
    }
}

/// Checks one CreateTopics topic against the image and the broker's config (Kafka's order of
/// checks and messages); returns what the controller is asked to create and its overrides.
fn check_one(
    broker: &Broker,
    t: CreatableTopic,
) -> Result<(controller::CreatableTopic, BTreeMap<String, String>), (i16, String)> {
    let name = t.name.as_str();
    validate_topic_name(name).map_err(|m| (error::INVALID_TOPIC_EXCEPTION, m))?;
    let image = broker.image();
    if image.topic(name).is_some() {
        return Err((
            error::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(existing) = colliding_topic(&image, name) {
        return Err((
            error::INVALID_TOPIC_EXCEPTION,
            crate::cluster::collision_message(name, &existing),
        ));
    }
    let registered: Vec<i32> = image.brokers().map(|b| b.id).collect();
    let (partitions, replication_factor, assignments) = if t.assignments.is_empty() {
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
        let live = registered.len();
        if replication_factor < 1
            || usize::try_from(replication_factor).map_or(true, |rf| rf > live)
        {
            return Err((
                error::INVALID_REPLICATION_FACTOR,
                format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only {live} broker(s) are registered."),
            ));
        }
        (
            partitions,
            i16::try_from(replication_factor).unwrap_or(i16::MAX),
            Vec::new(),
        )
    } else {
        // A manual assignment: every replica must be a registered broker.
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
            &registered,
        )
        .map_err(assignment_error)?;
        match i32::try_from(lists.len()) {
            Ok(n) if n <= MAX_PARTITIONS_PER_TOPIC => {}
            _ => return Err((error::INVALID_PARTITIONS, format!("Number of partitions was set to an invalid value {}; it must be between 1 and {MAX_PARTITIONS_PER_TOPIC}.", lists.len()))),
        }
        (t.num_partitions, t.replication_factor, assignments)
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
    let overrides = config.overrides;
    let mut wanted = creatable(name, partitions, &overrides);
    wanted.replication_factor = replication_factor;
    wanted.assignments = assignments;
    Ok((wanted, overrides))
}

/// Another topic of the image whose name equals `name` once `.` and `_` are unified (Kafka's
/// collision rule); `name` itself does not count.
pub fn colliding_topic(image: &crate::metadata::MetadataImage, name: &str) -> Option<String> {
    if !name.contains(['.', '_']) {
        return None;
    }
    let unified = crate::cluster::unify_collision_chars(name);
    image
        .topics()
        .map(|t| &t.name)
        .find(|t| t.as_str() != name && crate::cluster::unify_collision_chars(t) == unified)
        .cloned()
}

/// Kafka's error code and message for a refused manual assignment.
pub fn assignment_error(e: AssignmentError) -> (i16, String) {
    match e {
        AssignmentError::InvalidRequest(m) => (error::INVALID_REQUEST, m),
        AssignmentError::InvalidReplicaAssignment(m) => (error::INVALID_REPLICA_ASSIGNMENT, m),
    }
}

/// DeleteTopics: names and ids are resolved against the image, then the controller removes the
/// topics in one command (answered once the image no longer has them).
pub async fn delete(
    broker: Arc<Broker>,
    ctx: RequestContext,
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
    let image = broker.image();
    let resolved: Vec<Result<String, i16>> = wanted
        .iter()
        .map(|(name, id)| match (name, id.is_nil()) {
            (Some(n), _) => image
                .topic(n.as_str())
                .map(|t| t.name.clone())
                .ok_or(error::UNKNOWN_TOPIC_OR_PARTITION),
            (None, false) => image
                .topic_by_id(*id)
                .map(|t| t.name.clone())
                .ok_or(error::UNKNOWN_TOPIC_ID),
            (None, true) => Err(error::INVALID_REQUEST),
        })
        .collect();
    // Each topic once: the first entry naming it reports the removal, a later one finds it
    // gone (as when the entries are handled one after the other).
    let names: Vec<String> = resolved
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut deleted: BTreeMap<String, Result<Uuid, i16>> = BTreeMap::new();
    if !names.is_empty() {
        let asked = names.clone();
        match broker
            .controller_run(move |c, _| c.delete_topics(&asked))
            .await
        {
            Ok(answers) => {
                for (name, r) in answers {
                    match &r {
                        Ok(_) => tracing::info!("deleted topic {name}"),
                        Err(e) => tracing::debug!("deleting topic {name}: {}", e.message),
                    }
                    deleted.insert(name, r.map_err(|e| e.code()));
                }
            }
            Err(e) => {
                tracing::warn!("deleting topics {names:?}: {e}");
                for n in names {
                    deleted.insert(n, Err(e.code()));
                }
            }
        }
    }
    let mut reported = std::collections::BTreeSet::new();
    let responses = wanted
        .into_iter()
        .zip(resolved)
        .map(|((name, id), resolved)| {
            let gone = if name.is_some() {
                error::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                error::UNKNOWN_TOPIC_ID
            };
            let resolved = resolved.and_then(|n| {
                if reported.insert(n.clone()) {
                    Ok(n)
                } else {
                    Err(gone)
                }
            });
            let mut r = DeletableTopicResult::default()
                .with_name(name.clone())
                .with_topic_id(id);
            let outcome = resolved.and_then(|n| {
                let result = deleted
                    .get(&n)
                    .cloned()
                    .unwrap_or(Err(error::UNKNOWN_SERVER_ERROR));
                result.map(|id| (n, id))
            });
            match outcome {
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
