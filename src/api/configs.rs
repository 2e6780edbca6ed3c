//! DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44) for topic, broker and
//! group resources, ListConfigResources (74), answering as Kafka's `ConfigHelper` and controller do: every known config with its
//! value, source, synonyms and type; changes validated first and applied without a restart.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::CreatableTopicConfigs;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListConfigResourcesRequest,
    ListConfigResourcesResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::cluster::alter::{apply_incremental, AlterOp, AlterRequest, KeyInfo};
use crate::cluster::broker_config::{self, broker_def};
use crate::cluster::group_config;
use crate::cluster::topic_config::{describe_topic, topic_def, ConfigEntry, ConfigType};
use crate::cluster::validate_topic_name;
use crate::replica::manager::TopicError;

/// `ConfigResource.Type` ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = 32;

pub(super) type ApiError = (i16, Option<String>);
pub(super) type Configs = BTreeMap<String, String>;
/// Computes a resource's new dynamic configs from its current ones.
type Change<'a> = &'a dyn Fn(&Configs) -> Result<Configs, ApiError>;

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// The configs of topic `name` (which must exist) as DescribeConfigs reports them.
pub fn topic_entries(broker: &Broker, overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    let dynamic = broker.replicas.dynamic_broker_configs();
    let effective = broker.replicas.effective_config();
    describe_topic(overrides, &dynamic.layers(&broker.config), &effective)
}

/// CreateTopics v5+ echoes every config of the new topic (no synonyms).
pub fn creatable_topic_configs(
    broker: &Broker,
    overrides: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    topic_entries(broker, overrides)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(s(e.name))
                .with_value(e.value.map(s))
                .with_read_only(e.read_only)
                .with_config_source(e.source)
                .with_is_sensitive(false)
        })
        .collect()
}

/// Resolves a broker resource name: "" is the cluster default, otherwise it must be this node.
/// Returns whether it names this broker (true) or the cluster default (false).
pub(super) fn broker_resource(broker: &Broker, name: &str) -> Result<bool, ApiError> {
    if name.is_empty() {
        return Ok(false);
    }
    let id: i32 = name.parse().map_err(|_| {
        (
            error::INVALID_REQUEST,
            Some(format!("Broker id must be an integer, but it is: {name}")),
        )
    })?;
    if id != broker.identity.node_id {
        return Err((
            error::INVALID_REQUEST,
            Some(format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.identity.node_id
            )),
        ));
    }
    Ok(true)
}

fn describe_one(
    broker: &Broker,
    resource_type: i8,
    name: &str,
) -> Result<Vec<ConfigEntry>, ApiError> {
    match resource_type {
        RESOURCE_TOPIC => {
            validate_topic_name(name).map_err(|m| (error::INVALID_TOPIC_EXCEPTION, Some(m)))?;
            let overrides = topic_overrides(broker, name)
                .ok_or((error::UNKNOWN_TOPIC_OR_PARTITION, Some(String::new())))?;
            Ok(topic_entries(broker, &overrides))
        }
        RESOURCE_BROKER => {
            let per_broker = broker_resource(broker, name)?;
            Ok(broker_config::describe_broker(
                &broker.replicas.dynamic_broker_configs(),
                &broker.config,
                per_broker,
            ))
        }
        RESOURCE_GROUP => {
            if name.is_empty() {
                return Err((
                    error::INVALID_REQUEST,
                    Some("Group name must not be empty".into()),
                ));
            }
            Ok(group_config::describe(
                &broker.group_configs.get(name),
                &broker.replicas.effective_config(),
            ))
        }
        RESOURCE_BROKER_LOGGER => {
            if name.is_empty() {
                return Err((
                    error::INVALID_REQUEST,
                    Some("Broker id must not be empty".into()),
                ));
            }
            broker_resource(broker, name)?;
            Ok(Vec::new()) // Sluice has no log4j loggers to report
        }
        other => Err((
            error::INVALID_REQUEST,
            Some(format!("Unsupported resource type: {other}")),
        )),
    }
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let v = ctx.api_version;
    let results = request
        .resources
        .into_iter()
        .map(|r| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match describe_one(broker, r.resource_type, r.resource_name.as_str()) {
                Ok(entries) => {
                    let wanted: Option<HashSet<&str>> = r
                        .configuration_keys
                        .as_ref()
                        .map(|keys| keys.iter().map(|k| k.as_str()).collect());
                    let configs = entries
                        .into_iter()
                        .filter(|e| wanted.as_ref().is_none_or(|w| w.contains(e.name.as_str())))
                        .map(|e| {
                            let documented = v >= 3 && request.include_documentation;
                            let stored_only = r.resource_type == RESOURCE_BROKER
                                && broker_config::stored_def(&e.name).is_some();
                            let mut result = to_result(e, request.include_synonyms, v);
                            if documented && stored_only {
                                result.documentation = Some(s(broker_config::STORED_ONLY_DOC));
                            }
                            result
                        })
                        .collect();
                    result.with_error_code(error::NONE).with_configs(configs)
                }
                Err((code, message)) => result
                    .with_error_code(code)
                    .with_error_message(message.map(s)),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn to_result(
    mut e: ConfigEntry,
    include_synonyms: bool,
    version: i16,
) -> DescribeConfigsResourceResult {
    // Passwords are never shown (Kafka: null value, sensitive).
    let sensitive = e.ty == ConfigType::Password;
    if sensitive {
        e.value = None;
        for y in &mut e.synonyms {
            y.value = None;
        }
    }
    let mut r = DescribeConfigsResourceResult::default()
        .with_name(s(e.name))
        .with_value(e.value.map(s))
        .with_read_only(e.read_only)
        .with_config_source(e.source)
        .with_is_sensitive(sensitive)
        .with_documentation(None);
    if include_synonyms {
        r.synonyms = e
            .synonyms
            .into_iter()
            .map(|y| {
                DescribeConfigsSynonym::default()
                    .with_name(s(y.name))
                    .with_value(y.value.map(s))
                    .with_source(y.source)
            })
            .collect();
    }
    if version >= 3 {
        r.config_type = e.ty as i8;
    }
    r
}

/// Topic `name`'s overrides, None when the topic does not exist: a hosted topic's own, else the
/// metadata image's (in a cluster a topic need not have a replica on the broker asked).
fn topic_overrides(broker: &Broker, name: &str) -> Option<Configs> {
    if let Some(topic) = broker.replicas.topic(name) {
        return Some(topic.config.overrides.clone());
    }
    let image = broker.image();
    image.topic(name)?;
    Some(image.configs(crate::metadata::ConfigResourceType::Topic, name))
}

fn topic_error(name: &str, e: TopicError) -> ApiError {
    match e {
        TopicError::Unknown(_) => (
            error::UNKNOWN_TOPIC_OR_PARTITION,
            Some(format!("The topic '{name}' does not exist.")),
        ),
        TopicError::InvalidConfig(m) => (error::INVALID_CONFIG, Some(m)),
        other => {
            tracing::error!("altering configs of {name}: {other}");
            (error::KAFKA_STORAGE_ERROR, Some(other.to_string()))
        }
    }
}

/// Replaces topic `name`'s overrides `old` with `new` (validated first) through the controller:
/// one SET per changed key, one DELETE per removed key. Called on the blocking pool; answered
/// once the image (and hosting) has the new overrides.
fn set_topic_overrides(
    broker: &Broker,
    name: &str,
    old: &Configs,
    new: Configs,
    validate_only: bool,
) -> Result<(), ApiError> {
    crate::cluster::TopicConfig::build(&broker.replicas.effective_config(), new.clone())
        .map_err(|e| (error::INVALID_CONFIG, Some(e.to_string())))?;
    if validate_only {
        return Ok(());
    }
    let changes = changes_between(old, &new);
    if changes.is_empty() {
        return Ok(());
    }
    decide(
        broker,
        crate::metadata::ConfigResourceType::Topic,
        name,
        changes,
    )?;
    tracing::info!("topic {name}: config overrides now {new:?}");
    Ok(())
}

/// The SET and DELETE operations that turn `old` into `new`.
pub(super) fn changes_between(old: &Configs, new: &Configs) -> Vec<AlterRequest> {
    let mut changes: Vec<AlterRequest> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| AlterRequest {
            name: k.clone(),
            op: AlterOp::Set,
            value: Some(v.clone()),
        })
        .collect();
    changes.extend(
        old.keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| AlterRequest {
                name: k.clone(),
                op: AlterOp::Delete,
                value: None,
            }),
    );
    changes
}

/// Has the controller decide `changes` to one resource's configs (ConfigRecords); answered once
/// this node applied them. Called on the blocking pool.
pub(super) fn decide(
    broker: &Broker,
    resource_type: crate::metadata::ConfigResourceType,
    name: &str,
    changes: Vec<AlterRequest>,
) -> Result<(), ApiError> {
    let alteration = crate::controller::ConfigAlteration {
        resource_type,
        resource_name: name.to_string(),
        changes,
    };
    let answer = broker
        .controller_run_blocking(move |c, _| c.alter_configs(std::slice::from_ref(&alteration)));
    match answer {
        Ok(mut results) => match results.pop() {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err((e.code(), Some(e.message))),
            None => Err((error::UNKNOWN_SERVER_ERROR, None)),
        },
        Err(e) => Err((e.code(), Some(e.to_string()))),
    }
}

/// Applies new topic overrides or new broker layers (validated), for both alter APIs.
fn apply(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    forwarded: bool,
    change: Change,
) -> Result<(), ApiError> {
    match resource_type {
        RESOURCE_TOPIC => {
            validate_topic_name(name).map_err(|m| (error::INVALID_TOPIC_EXCEPTION, Some(m)))?;
            let overrides = topic_overrides(broker, name)
                .ok_or_else(|| topic_error(name, TopicError::Unknown(name.into())))?;
            let new = change(&overrides)?;
            set_topic_overrides(broker, name, &overrides, new, validate_only)
        }
        RESOURCE_BROKER => {
            super::broker_configs::set(broker, name, validate_only, forwarded, change)
        }
        RESOURCE_GROUP => {
            if name.is_empty() {
                return Err((
                    error::INVALID_REQUEST,
                    Some("Default group resources are not allowed.".into()),
                ));
            }
            let store = &broker.group_configs;
            let new = change(&store.get(name))?;
            group_config::validate(&new, &broker.replicas.effective_config())
                .map_err(|m| (error::INVALID_CONFIG, Some(m)))?;
            if validate_only {
                return Ok(());
            }
            // Against the logged overrides: a legacy file's values go into the log with the change.
            let changes = changes_between(&store.logged(name), &new);
            if !changes.is_empty() {
                decide(
                    broker,
                    crate::metadata::ConfigResourceType::Group,
                    name,
                    changes,
                )?;
            }
            store.forget_legacy(name).map_err(|e| {
                tracing::error!("altering configs of group {name}: {e}");
                (error::KAFKA_STORAGE_ERROR, Some(e.to_string()))
            })
        }
        other => Err((
            error::INVALID_REQUEST,
            Some(format!("Unsupported resource type: {other}")),
        )),
    }
}

/// AlterConfigs (legacy): the given configs replace all of the resource's dynamic configs.
pub fn alter(
    broker: &Arc<Broker>,
    request: AlterConfigsRequest,
    forwarded: bool,
) -> AlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str();
            let mut given = BTreeMap::new();
            let mut bad = None;
            for c in &r.configs {
                match &c.value {
                    Some(v) => {
                        given.insert(c.name.as_str().to_string(), v.as_str().to_string());
                    }
                    None => {
                        bad = Some((
                            error::INVALID_REQUEST,
                            Some(format!(
                                "Null value not supported for : {}",
                                c.name.as_str()
                            )),
                        ))
                    }
                }
            }
            let outcome = match bad {
                Some(e) => Err(e),
                None => apply(
                    broker,
                    r.resource_type,
                    name,
                    request.validate_only,
                    forwarded,
                    &|_| Ok(given.clone()),
                ),
            };
            resource_response(r.resource_type, r.resource_name.clone(), outcome)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

fn resource_response(
    resource_type: i8,
    name: StrBytes,
    outcome: Result<(), ApiError>,
) -> kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse {
    let (code, message) = outcome.err().unwrap_or((error::NONE, None));
    kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default()
        .with_resource_type(resource_type)
        .with_resource_name(name)
        .with_error_code(code)
        .with_error_message(message.map(s))
}

/// What APPEND / SUBTRACT need to know about a key of `resource_type`.
fn key_info(resource_type: i8, key: &str) -> KeyInfo {
    if resource_type == RESOURCE_GROUP {
        // No group config is a LIST; defaults do not matter to SET/DELETE.
        return KeyInfo {
            is_list: false,
            default: None,
        };
    }
    if resource_type == RESOURCE_TOPIC {
        let d = topic_def(key);
        KeyInfo {
            is_list: d.is_some_and(|d| d.ty == ConfigType::List),
            default: d.map(|d| d.default.to_string()),
        }
    } else {
        let d = broker_def(key).or_else(|| broker_config::stored_def(key));
        KeyInfo {
            is_list: d.is_some_and(|d| d.ty == ConfigType::List),
            default: d.and_then(|d| d.default).map(str::to_string),
        }
    }
}

/// IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on the resource's dynamic configs.
pub fn incremental_alter(
    broker: &Arc<Broker>,
    request: IncrementalAlterConfigsRequest,
    forwarded: bool,
) -> IncrementalAlterConfigsResponse {
    let responses = request
        .resources
        .into_iter()
        .map(|r| {
            let rt = r.resource_type;
            let mut ops = Vec::new();
            let mut keys = HashSet::new();
            let mut bad = None;
            for c in &r.configs {
                if !keys.insert(c.name.as_str()) {
                    bad = Some((
                        error::INVALID_REQUEST,
                        Some("Error due to duplicate config keys".to_string()),
                    ));
                }
                match AlterOp::from_id(c.config_operation) {
                    Some(op) => ops.push(AlterRequest {
                        name: c.name.as_str().to_string(),
                        op,
                        value: c.value.as_ref().map(|v| v.as_str().to_string()),
                    }),
                    None => {
                        bad = Some((
                            error::INVALID_REQUEST,
                            Some(format!("Unknown operation type {}", c.config_operation)),
                        ))
                    }
                }
            }
            let outcome = match bad {
                Some(e) => Err(e),
                None => apply(
                    broker,
                    rt,
                    r.resource_name.as_str(),
                    request.validate_only,
                    forwarded,
                    &|current| {
                        apply_incremental(current, &ops, &|k| key_info(rt, k)).map_err(|m| {
                            // Kafka: a null SET value is a bad request (seen on group resources).
                            let code = if rt == RESOURCE_GROUP && m.starts_with("Null value") {
                                error::INVALID_REQUEST
                            } else {
                                error::INVALID_CONFIG
                            };
                            (code, Some(m))
                        })
                    },
                ),
            };
            let (code, message) = outcome.err().unwrap_or((error::NONE, None));
            kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(rt)
                .with_resource_name(r.resource_name)
                .with_error_code(code)
                .with_error_message(message.map(s))
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// ListConfigResources (74): v0 lists client-metrics subscriptions (Sluice has none); v1 lists
/// the resources of the requested types (all when none are named), as Kafka 4.1 does: the
/// broker logger and the broker (this node id), every topic, and the groups with configs. A type
/// Kafka does not list is UNSUPPORTED_VERSION.
pub fn list_config_resources(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    use kafka_protocol::messages::list_config_resources_response::ConfigResource;
    const LISTED: [i8; 5] = [
        RESOURCE_BROKER_LOGGER,
        RESOURCE_BROKER,
        RESOURCE_TOPIC,
        RESOURCE_GROUP,
        RESOURCE_CLIENT_METRICS,
    ];
    let response = ListConfigResourcesResponse::default();
    let wanted: Vec<i8> = if ctx.api_version == 0 {
        vec![RESOURCE_CLIENT_METRICS]
    } else if request.resource_types.is_empty() {
        LISTED.to_vec()
    } else {
        request.resource_types.clone()
    };
    if wanted.iter().any(|t| !LISTED.contains(t)) {
        return response.with_error_code(error::UNSUPPORTED_VERSION);
    }
    let node = broker.identity.node_id.to_string();
    let mut resources = Vec::new();
    let mut push = |resource_type: i8, name: String| {
        let mut r = ConfigResource::default().with_resource_name(s(name));
        if ctx.api_version >= 1 {
            r.resource_type = resource_type;
        }
        resources.push(r);
    };
    for t in LISTED.iter().filter(|t| wanted.contains(t)) {
        match *t {
            RESOURCE_BROKER_LOGGER | RESOURCE_BROKER => push(*t, node.clone()),
            RESOURCE_TOPIC => {
                let mut names: Vec<String> = broker
                    .replicas
                    .topics()
                    .iter()
                    .map(|t| t.name.clone())
                    .collect();
                names.sort();
                for n in names {
                    push(RESOURCE_TOPIC, n);
                }
            }
            RESOURCE_GROUP => {
                for g in broker.group_configs.groups() {
                    push(RESOURCE_GROUP, g);
                }
            }
            _ => {} // client metrics: Sluice keeps no subscriptions
        }
    }
    response
        .with_error_code(error::NONE)
        .with_config_resources(resources)
}
