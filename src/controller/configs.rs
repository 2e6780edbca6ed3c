//! Dynamic configs (Kafka's ConfigurationControlManager, IncrementalAlterConfigs semantics) and
//! the feature levels a new cluster starts with (FeatureControlManager / the bootstrap metadata
//! that `kafka-storage format` writes).
//!
//! With eligible leader replicas on (KIP-966), `min.insync.replicas` is the ELR's yardstick, so
//! Kafka 4.1 guards it: a broker-level value cannot be altered, the cluster-level one cannot be
//! removed (both INVALID_CONFIG), and a change clears the ELR and last known ELR of the
//! partitions it applies to (a topic's: its partitions; the cluster's, even to the same value:
//! every partition), in the same metadata entry as the config records.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};
use super::{Controller, Outcome};
use crate::cluster::alter::{apply_incremental, AlterOp, AlterRequest, KeyInfo};
use crate::cluster::topic_config::{self, Kind};
use crate::metadata::records::{ConfigResourceType, MetadataRecord, PartitionChange};

/// The key whose changes reset the ELR.
const MIN_ISR: &str = "min.insync.replicas";

/// Kafka 4.1's finalized features on a freshly formatted cluster, without the ones Sluice does
/// not implement (`share.version`, `streams.version` stay 0 here; share groups have their own
/// switch): `metadata.version` 27 is 4.1-IV1, Kafka 4.1's latest production level;
/// `eligible.leader.replicas.version` 1 turns on KIP-966 (a cluster whose metadata log predates
/// it keeps it off, as an upgraded Kafka cluster does).
pub const BOOTSTRAP_FEATURES: &[(&str, i16)] = &[
    ("metadata.version", 27),
    ("eligible.leader.replicas.version", 1),
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

/// The changes to one resource (IncrementalAlterConfigs operations, in order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigAlteration {
    pub resource_type: ConfigResourceType,
    /// Topic name, broker id (`""` = the cluster-wide default) or group id.
    pub resource_name: String,
    pub changes: Vec<AlterRequest>,
}

impl Controller {
    /// IncrementalAlterConfigs: per resource, all changes or none (`cluster::alter` does the
    /// arithmetic). Topic keys are validated as Kafka 4.1 validates them; broker and group keys
    /// are validated by the broker that received the request (their tables live in
    /// `cluster::broker_config` / `group_config`).
    pub fn alter_configs(
        &self,
        resources: &[ConfigAlteration],
    ) -> Outcome<Vec<Result<(), ControllerError>>> {
        let mut records = Vec::new();
        let mut elr_reset = ElrReset::default();
        let answer = resources
            .iter()
            .map(|r| {
                let rs = self.alter_one(r)?;
                elr_reset.note(r, &rs);
                records.extend(rs);
                Ok(())
            })
            .collect();
        if self.elr_enabled() {
            records.extend(self.elr_clearing(&elr_reset));
        }
        Outcome { records, answer }
    }

    /// The PartitionChange records that empty the ELR and last known ELR where `reset` says.
    fn elr_clearing(&self, reset: &ElrReset) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for t in self.state.topics.values() {
            if !reset.everywhere && !reset.topics.contains(t.name.as_str()) {
                continue;
            }
            for (&index, p) in &t.partitions {
                if p.elr.is_empty() && p.last_known_elr.is_empty() {
                    continue;
                }
                let mut change = PartitionChange::none(t.topic_id, index);
                change.elr = Some(Vec::new());
                change.last_known_elr = Some(Vec::new());
                out.push(MetadataRecord::PartitionChange(change));
            }
        }
        out
    }

    /// Kafka 4.1's guard on `min.insync.replicas` while ELR is on (see the module docs).
    fn check_min_isr_change(&self, r: &ConfigAlteration) -> Result<(), ControllerError> {
        if r.resource_type != ConfigResourceType::Broker || !self.elr_enabled() {
            return Ok(());
        }
        let Some(change) = r.changes.iter().find(|c| c.name == MIN_ISR) else {
            return Ok(());
        };
        if !r.resource_name.is_empty() {
            return Err(err(
                ResponseError::InvalidConfig,
                "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
            ));
        }
        if change.op == AlterOp::Delete {
            return Err(err(
                ResponseError::InvalidConfig,
                "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
            ));
        }
        Ok(())
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
        if !r.changes.iter().all(|c| keys.insert(c.name.as_str())) {
            return Err(err(
                ResponseError::InvalidRequest,
                "Error due to duplicate config keys",
            ));
        }
        self.check_min_isr_change(r)?;
        let topic = r.resource_type == ConfigResourceType::Topic;
        if topic {
            if let Some(c) = r
                .changes
                .iter()
                .find(|c| topic_config::topic_def(&c.name).is_none())
            {
                return Err(err(
                    ResponseError::InvalidConfig,
                    format!("Unknown topic config name: {}", c.name),
                ));
            }
        }
        let key = (r.resource_type.id(), r.resource_name.clone());
        let current = self.state.configs.get(&key).cloned().unwrap_or_default();
        let info = |name: &str| {
            let def = topic_config::topic_def(name).filter(|_| topic);
            KeyInfo {
                is_list: def.is_none_or(|d| matches!(d.kind, Kind::List(_))),
                default: def.map(|d| d.default.to_string()),
            }
        };
        let next = apply_incremental(&current, &r.changes, &info)
            .map_err(|m| err(ResponseError::InvalidConfig, m))?;
        let mut out = Vec::new();
        for (name, value) in &next {
            if current.get(name) == Some(value) {
                continue;
            }
            if topic {
                topic_config::check(name, value)
                    .map_err(|e| err(ResponseError::InvalidConfig, e.to_string()))?;
            }
            out.push(MetadataRecord::Config {
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
            });
        }
        for name in current.keys().filter(|k| !next.contains_key(*k)) {
            out.push(MetadataRecord::Config {
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                name: name.clone(),
                value: None,
            });
        }
        Ok(out)
    }
}

/// Where a request's accepted changes reset the ELR: the topics whose `min.insync.replicas`
/// changed, or every partition when the cluster-level one was set (changed or not).
#[derive(Debug, Default)]
struct ElrReset {
    everywhere: bool,
    topics: BTreeSet<String>,
}

impl ElrReset {
    /// Notes what the accepted alteration `r`, which produced `records`, resets.
    fn note(&mut self, r: &ConfigAlteration, records: &[MetadataRecord]) {
        match r.resource_type {
            ConfigResourceType::Topic => {
                let changed = records.iter().any(
                    |rec| matches!(rec, MetadataRecord::Config { name, .. } if name == MIN_ISR),
                );
                if changed {
                    self.topics.insert(r.resource_name.clone());
                }
            }
            ConfigResourceType::Broker if r.resource_name.is_empty() => {
                self.everywhere |= r.changes.iter().any(|c| c.name == MIN_ISR);
            }
            _ => {}
        }
    }
}
