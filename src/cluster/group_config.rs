//! Group configs (DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on GROUP resources,
//! type 32): Kafka 4.1's `GroupConfig` names, types, defaults (the broker's `group.*` settings)
//! and validation with Kafka's messages, and the per-group overrides: ConfigRecords in the metadata
//! log (resource type 32, written through the controller as Kafka does, so every broker reads the
//! same), over a legacy `<data>/group-configs.json` an older Sluice wrote per broker.
//!
//! Only `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` change behaviour here
//! (KIP-848 groups read them through [`GroupConfigStore::consumer_timeouts`]); the `share.*` and
//! `streams.*` keys are stored and described as Kafka does, for groups Sluice does not run.
//! Thread-safe: the store is read by handlers and the group coordinator, written by the alter APIs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use super::topic_config::{check_kind, ConfigEntry, ConfigType, Kind, Synonym};
use crate::config::Config;
use crate::metadata::{ConfigResourceType, MetadataLog};

/// DescribeConfigs source of a group override (`GROUP_CONFIG`).
pub const SOURCE_GROUP: i8 = 8;
const SOURCE_DEFAULT: i8 = 5;

/// Kafka 4.1's defaults of the broker bounds group configs are checked against (Sluice has no
/// keys for them).
const CONSUMER_SESSION_RANGE: (i32, i32) = (45_000, 60_000);
const CONSUMER_HEARTBEAT_RANGE: (i32, i32) = (5_000, 15_000);
const SHARE_SESSION_RANGE: (i32, i32) = (45_000, 60_000);
const SHARE_HEARTBEAT_RANGE: (i32, i32) = (5_000, 15_000);
const SHARE_RECORD_LOCK_RANGE: (i32, i32) = (15_000, 60_000);
const STREAMS_SESSION_RANGE: (i32, i32) = (45_000, 60_000);
const STREAMS_HEARTBEAT_RANGE: (i32, i32) = (5_000, 15_000);
const STREAMS_MAX_STANDBY_REPLICAS: i32 = 2;

/// How a group config value is checked before the cross-key checks.
#[derive(Debug, Clone, Copy)]
enum Check {
    Kind(Kind),
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration>`.
    AutoOffsetReset,
}

/// One group config: name, type, value check, default (from the broker's config).
struct GroupDef {
    name: &'static str,
    ty: ConfigType,
    check: Check,
    default: fn(&Config) -> String,
}

const fn int(min: i64) -> Check {
    Check::Kind(Kind::Int {
        min,
        max: i32::MAX as i64,
    })
}

/// Kafka 4.1's group configs, sorted by name.
const GROUP_CONFIGS: &[GroupDef] = &[
    GroupDef {
        name: "consumer.heartbeat.interval.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |c| c.group_consumer_heartbeat_interval_ms.to_string(),
    },
    GroupDef {
        name: "consumer.session.timeout.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |c| c.group_consumer_session_timeout_ms.to_string(),
    },
    GroupDef {
        name: "share.auto.offset.reset",
        ty: ConfigType::String,
        check: Check::AutoOffsetReset,
        default: |_| "latest".into(),
    },
    GroupDef {
        name: "share.heartbeat.interval.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |_| "5000".into(),
    },
    GroupDef {
        name: "share.isolation.level",
        ty: ConfigType::String,
        check: Check::Kind(Kind::OneOf(&["read_committed", "read_uncommitted"])),
        default: |_| "read_uncommitted".into(),
    },
    GroupDef {
        name: "share.record.lock.duration.ms",
        ty: ConfigType::Int,
        check: int(1000),
        default: |_| "30000".into(),
    },
    GroupDef {
        name: "share.session.timeout.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |_| "45000".into(),
    },
    GroupDef {
        name: "streams.heartbeat.interval.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |_| "5000".into(),
    },
    GroupDef {
        name: "streams.num.standby.replicas",
        ty: ConfigType::Int,
        check: int(0),
        default: |_| "0".into(),
    },
    GroupDef {
        name: "streams.session.timeout.ms",
        ty: ConfigType::Int,
        check: int(1),
        default: |_| "45000".into(),
    },
];

fn group_def(name: &str) -> Option<&'static GroupDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// Whether `name` is a group config of type LIST (none is: APPEND/SUBTRACT are refused).
pub fn is_group_key(name: &str) -> bool {
    group_def(name).is_some()
}

/// Kafka's `by_duration:` form: an ISO-8601 duration (`PnDTnHnMn.nS`), not negative.
fn is_duration(s: &str) -> bool {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"^[+]?P(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:[.,]\d{0,9})?S)?)?$")
            .expect("static pattern")
    });
    re.is_match(s) && !s.ends_with('P') && !s.ends_with('T')
}

fn check_one(def: &GroupDef, value: &str) -> Result<(), String> {
    let reason = match def.check {
        Check::Kind(kind) => check_kind(kind, value).err(),
        Check::AutoOffsetReset => {
            let ok = value == "earliest"
                || value == "latest"
                || value.strip_prefix("by_duration:").is_some_and(is_duration);
            (!ok).then(|| format!(
                "Invalid value `{value}` for configuration {}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                def.name
            ))
        }
    };
    match reason {
        Some(r) => Err(format!(
            "Invalid value {value} for configuration {}: {r}",
            def.name
        )),
        None => Ok(()),
    }
}

/// The effective integer value of `name` with `overrides` over the broker defaults.
fn int_value(overrides: &BTreeMap<String, String>, cfg: &Config, name: &str) -> i64 {
    let def = group_def(name).expect("known group config");
    overrides
        .get(name)
        .cloned()
        .unwrap_or_else(|| (def.default)(cfg))
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Kafka's `GroupConfig.validate` on a group's complete overrides: names, then each value, then
/// the bounds and the session-vs-heartbeat rules (INVALID_CONFIG with Kafka's message).
pub fn validate(overrides: &BTreeMap<String, String>, cfg: &Config) -> Result<(), String> {
    for (k, v) in overrides {
        let def = group_def(k).ok_or_else(|| format!("Unknown group config name: {k}"))?;
        check_one(def, v)?;
    }
    let value = |name: &str| int_value(overrides, cfg, name);
    let bounds: [(&str, (i32, i32), &str); 7] = [
        (
            "consumer.heartbeat.interval.ms",
            CONSUMER_HEARTBEAT_RANGE,
            "group.consumer.%.heartbeat.interval.ms",
        ),
        (
            "consumer.session.timeout.ms",
            CONSUMER_SESSION_RANGE,
            "group.consumer.%.session.timeout.ms",
        ),
        (
            "share.heartbeat.interval.ms",
            SHARE_HEARTBEAT_RANGE,
            "group.share.%.heartbeat.interval.ms",
        ),
        (
            "share.session.timeout.ms",
            SHARE_SESSION_RANGE,
            "group.share.%.session.timeout.ms",
        ),
        (
            "share.record.lock.duration.ms",
            SHARE_RECORD_LOCK_RANGE,
            "group.share.%.record.lock.duration.ms",
        ),
        (
            "streams.heartbeat.interval.ms",
            STREAMS_HEARTBEAT_RANGE,
            "group.streams.%.heartbeat.interval.ms",
        ),
        (
            "streams.session.timeout.ms",
            STREAMS_SESSION_RANGE,
            "group.streams.%.session.timeout.ms",
        ),
    ];
    for (name, (min, max), bound) in bounds {
        let v = value(name);
        if v < i64::from(min) {
            let b = bound.replace('%', "min");
            return Err(format!("{name} must be greater than or equal to {b}"));
        }
        if v > i64::from(max) {
            let b = bound.replace('%', "max");
            return Err(format!("{name} must be less than or equal to {b}"));
        }
    }
    if value("streams.num.standby.replicas") > i64::from(STREAMS_MAX_STANDBY_REPLICAS) {
        return Err("streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas".into());
    }
    for kind in ["consumer", "share", "streams"] {
        if value(&format!("{kind}.session.timeout.ms"))
            <= value(&format!("{kind}.heartbeat.interval.ms"))
        {
            return Err(format!(
                "{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms"
            ));
        }
    }
    Ok(())
}

/// Every group config of a group with `overrides`, as DescribeConfigs reports them (the only
/// synonym is the entry's own layer, as Kafka 4.1 answers).
pub fn describe(overrides: &BTreeMap<String, String>, cfg: &Config) -> Vec<ConfigEntry> {
    GROUP_CONFIGS
        .iter()
        .map(|d| {
            let (value, source) = match overrides.get(d.name) {
                Some(v) => (v.clone(), SOURCE_GROUP),
                None => ((d.default)(cfg), SOURCE_DEFAULT),
            };
            ConfigEntry {
                name: d.name.to_string(),
                value: Some(value.clone()),
                source,
                read_only: false,
                ty: d.ty,
                synonyms: vec![Synonym {
                    name: d.name.to_string(),
                    value: Some(value),
                    source,
                }],
            }
        })
        .collect()
}

const FILE: &str = "group-configs.json";

/// The group config overrides: the metadata log's (ConfigRecords of resource type 32, as Kafka
/// keeps them, so every broker of a cluster sees the same values), over those an older Sluice
/// kept in `<data>/group-configs.json` (the legacy layer: read, folded into the log at the
/// group's next alter, never written again).
pub struct GroupConfigStore {
    path: PathBuf,
    legacy: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
    /// Where the logged overrides are read (absent: tests, `set` keeps them in `legacy`).
    metadata: Option<Arc<MetadataLog>>,
}

impl std::fmt::Debug for GroupConfigStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConfigStore")
            .field("path", &self.path)
            .field("legacy", &*self.legacy.read())
            .field("metadata", &self.metadata.is_some())
            .finish()
    }
}

impl GroupConfigStore {
    /// Loads the legacy `<data_dir>/group-configs.json` (absent: none) under the metadata log's.
    pub fn open(data_dir: &Path, metadata: Arc<MetadataLog>) -> std::io::Result<GroupConfigStore> {
        let path = data_dir.join(FILE);
        let legacy = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        Ok(GroupConfigStore {
            path,
            legacy: RwLock::new(legacy),
            metadata: Some(metadata),
        })
    }

    /// A store without a metadata log, never persisted (tests).
    pub fn in_memory() -> GroupConfigStore {
        GroupConfigStore {
            path: PathBuf::new(),
            legacy: RwLock::new(BTreeMap::new()),
            metadata: None,
        }
    }

    /// The overrides of `group` (empty when none): the logged ones over the legacy file's.
    pub fn get(&self, group: &str) -> BTreeMap<String, String> {
        let mut overrides = self.legacy.read().get(group).cloned().unwrap_or_default();
        overrides.extend(self.logged(group));
        overrides
    }

    /// The overrides of `group` the metadata log holds.
    pub fn logged(&self, group: &str) -> BTreeMap<String, String> {
        self.metadata.as_ref().map_or_else(BTreeMap::new, |m| {
            m.image().configs(ConfigResourceType::Group, group)
        })
    }

    /// Groups that have overrides, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut groups: BTreeSet<String> = self.legacy.read().keys().cloned().collect();
        if let Some(m) = &self.metadata {
            groups.extend(m.image().config_names(ConfigResourceType::Group));
        }
        groups.into_iter().collect()
    }

    /// Replaces `group`'s overrides in a store without a metadata log, after validating them
    /// (tests; the brokers' alter APIs write ConfigRecords through the controller).
    pub fn set(
        &self,
        group: &str,
        overrides: BTreeMap<String, String>,
        cfg: &Config,
        validate_only: bool,
    ) -> Result<(), SetError> {
        validate(&overrides, cfg).map_err(SetError::Invalid)?;
        if validate_only {
            return Ok(());
        }
        let mut legacy = self.legacy.write();
        if overrides.is_empty() {
            legacy.remove(group);
        } else {
            legacy.insert(group.to_string(), overrides);
        }
        Ok(())
    }

    /// Drops `group` from the legacy file once its overrides are in the metadata log (written
    /// before it returns; nothing to do when the file never named the group).
    pub fn forget_legacy(&self, group: &str) -> Result<(), SetError> {
        let mut legacy = self.legacy.write();
        let Some(previous) = legacy.remove(group) else {
            return Ok(());
        };
        if self.path.as_os_str().is_empty() {
            return Ok(());
        }
        let bytes =
            serde_json::to_vec_pretty(&*legacy).map_err(|e| SetError::Write(e.to_string()))?;
        if let Err(e) = crate::log::checkpoint::write_atomically(&self.path, &bytes) {
            legacy.insert(group.to_string(), previous);
            return Err(SetError::Write(e.to_string()));
        }
        Ok(())
    }

    /// The KIP-848 session timeout and heartbeat interval overrides of `group`, if set.
    pub fn consumer_timeouts(&self, group: &str) -> (Option<i32>, Option<i32>) {
        let o = self.get(group);
        let int = |k: &str| o.get(k).and_then(|v| v.trim().parse().ok());
        (
            int("consumer.session.timeout.ms"),
            int("consumer.heartbeat.interval.ms"),
        )
    }
}

/// A refused group config change.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// INVALID_CONFIG with Kafka's message.
    #[error("{0}")]
    Invalid(String),
    #[error("rewriting the legacy group-configs.json: {0}")]
    Write(String),
}

#[cfg(test)]
mod tests;
