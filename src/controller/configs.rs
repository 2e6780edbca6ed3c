//! Dynamic configs (Kafka's ConfigurationControlManager, IncrementalAlterConfigs semantics) and
//! the feature levels a new cluster starts with (FeatureControlManager / the bootstrap metadata
//! that `kafka-storage format` writes).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};
use super::{Controller, Outcome};
use crate::cluster::topic_config::{self, split_list, Kind};
use crate::metadata::records::{ConfigResourceType, MetadataRecord};

/// Kafka 4.1's finalized features on a freshly formatted cluster, without the ones Sluice does
/// not implement (`eligible.leader.replicas.version`, `share.version`, `streams.version` stay 0):
/// `metadata.version` 27 is 4.1-IV1, Kafka 4.1's latest production level.
pub const BOOTSTRAP_FEATURES: &[(&str, i16)] = &[
    ("metadata.version", 27),
    ("group.version", 1),
    ("transaction.version", 2),
];

/// The FeatureLevel records a new cluster's metadata log begins with (`metadata.version` first).
pub fn bootstrap_records(features: &[(&str, i16)]) -> Vec<MetadataRecord> {
    let mut sorted: Vec<_> = features.iter().filter(|(_, level)| *level != 0).collect();
    sorted.sort_by_key(|(name, _)| *name != "metadata.version");
    sorted
        .into_iter()
        .map(|(name, level)| MetadataRecord::FeatureLevel {
            name: name.to_string(),
            feature_level: *level,
        })
        .collect()
}

/// One IncrementalAlterConfigs operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterConfigOp {
    Set(String),
    Delete,
    /// Add to a list-typed value (if absent).
    Append(String),
    /// Remove from a list-typed value.
    Subtract(String),
}

/// The changes to one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigAlteration {
    pub resource_type: ConfigResourceType,
    /// Topic name, broker id (`""` = the cluster-wide default) or group id.
    pub resource_name: String,
    pub changes: Vec<(String, AlterConfigOp)>,
}

impl Controller {
    /// IncrementalAlterConfigs: per resource, all changes or none. Topic keys are validated as
    /// Kafka 4.1 validates them; broker and group keys are validated by the broker that received
    /// the request (their tables live in `cluster::broker_config` / `group_config`).
    pub fn alter_configs(
        &self,
        resources: &[ConfigAlteration],
    ) -> Outcome<Vec<Result<(), ControllerError>>> {
        let mut records = Vec::new();
        let answer = resources
            .iter()
            .map(|r| {
                let result = self.alter_one(r);
                result.map(|rs| records.extend(rs))
            })
            .collect();
        Outcome { records, answer }
    }

    fn alter_one(&self, r: &ConfigAlteration) -> Result<Vec<MetadataRecord>, ControllerError> {
        match r.resource_type {
            ConfigResourceType::Topic => {
                if !self.state.topic_ids.contains_key(&r.resource_name) {
                    return Err(err(
                        ResponseError::UnknownTopicOrPartition,
                        format!("The topic '{}' does not exist.", r.resource_name),
                    ));
                }
            }
            ConfigResourceType::Broker => {
                if !r.resource_name.is_empty() && r.resource_name.parse::<i32>().is_err() {
                    return Err(err(
                        ResponseError::InvalidRequest,
                        format!("Invalid broker name {}", r.resource_name),
                    ));
                }
            }
            ConfigResourceType::Group => {}
        }
        let mut keys = BTreeSet::new();
        if !r.changes.iter().all(|(k, _)| keys.insert(k.as_str())) {
            return Err(err(
                ResponseError::InvalidRequest,
                "Error due to duplicate config keys",
            ));
        }
        let topic = r.resource_type == ConfigResourceType::Topic;
        let mut out = Vec::with_capacity(r.changes.len());
        for (key, op) in &r.changes {
            let def = topic_config::topic_def(key);
            if topic && def.is_none() {
                return Err(err(
                    ResponseError::InvalidConfig,
                    format!("Unknown topic config name: {key}"),
                ));
            }
            let is_list = def.is_some_and(|d| matches!(d.kind, Kind::List(_)));
            let current = self.state.config(r.resource_type, &r.resource_name, key);
            let value = match op {
                AlterConfigOp::Set(v) => Some(v.clone()),
                AlterConfigOp::Delete => None,
                AlterConfigOp::Append(_) | AlterConfigOp::Subtract(_) if topic && !is_list => {
                    return Err(err(
                        ResponseError::InvalidConfig,
                        format!("Config value append is not allowed for config key: {key}"),
                    ));
                }
                AlterConfigOp::Append(v) => {
                    let mut items: Vec<&str> = current.map(split_list).unwrap_or_default();
                    for item in split_list(v) {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    }
                    Some(items.join(","))
                }
                AlterConfigOp::Subtract(v) => {
                    let remove = split_list(v);
                    let items: Vec<&str> = current
                        .map(split_list)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|i| !remove.contains(i))
                        .collect();
                    Some(items.join(","))
                }
            };
            if let (true, Some(v)) = (topic, &value) {
                topic_config::check(key, v)
                    .map_err(|e| err(ResponseError::InvalidConfig, e.to_string()))?;
            }
            if value.as_deref() == current {
                continue;
            }
            out.push(MetadataRecord::Config {
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                name: key.clone(),
                value,
            });
        }
        Ok(out)
    }
}
