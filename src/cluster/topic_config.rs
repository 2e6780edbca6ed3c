//! Per-topic configuration: Kafka 4.1's topic-level config names, types and defaults, validated,
//! with the broker's (static or dynamic) log settings for whatever a topic does not override.
//!
//! Only the overrides are stored (in `<data>/topic-configs.json`, see `replica::ReplicaManager`).
//! This module performs no I/O.

use std::collections::BTreeMap;

use crate::config::{format_double, Config, TimestampType};

/// A rejected topic config: maps to INVALID_CONFIG (40) with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct TopicConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

impl TopicConfigError {
    fn message(&self) -> String {
        if self.reason == UNKNOWN {
            format!("Unknown topic config name: {}", self.key)
        } else {
            format!(
                "Invalid value {} for configuration {}: {}",
                self.value, self.key, self.reason
            )
        }
    }
}

const UNKNOWN: &str = "Unknown topic config name";

/// DescribeConfigs `config_type` ids (Kafka's `DescribeConfigsResponse.ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// How a value is checked (Kafka's validators, with Kafka's messages).
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    Long {
        min: i64,
    },
    Bool,
    Ratio,
    /// Any DOUBLE.
    Double,
    OneOf(&'static [&'static str]),
    List(&'static [&'static str]),
    Any,
}

/// One topic config as Kafka 4.1 defines it.
#[derive(Debug, Clone, Copy)]
pub struct TopicDef {
    pub name: &'static str,
    pub ty: ConfigType,
    pub kind: Kind,
    /// The broker config that supplies the default (Kafka's `ServerTopicConfigSynonyms`).
    pub synonym: Option<&'static str>,
    /// Kafka's default when neither topic nor broker sets it.
    pub default: &'static str,
    /// The broker synonym has no default of its own (Kafka then reports no synonyms).
    pub broker_default_null: bool,
}

const I32: i64 = i32::MAX as i64;
const LMAX: &str = "9223372036854775807";

const fn def(
    name: &'static str,
    ty: ConfigType,
    kind: Kind,
    synonym: Option<&'static str>,
    default: &'static str,
) -> TopicDef {
    TopicDef {
        name,
        ty,
        kind,
        synonym,
        default,
        broker_default_null: false,
    }
}

const fn null_syn(mut d: TopicDef) -> TopicDef {
    d.broker_default_null = true;
    d
}

use ConfigType as T;

/// Every topic config Kafka 4.1 accepts, sorted by name (the order DescribeConfigs lists them).
pub const TOPIC_CONFIGS: &[TopicDef] = &[
    def(
        "cleanup.policy",
        T::List,
        Kind::List(&["compact", "delete"]),
        Some("log.cleanup.policy"),
        "delete",
    ),
    def(
        "compression.gzip.level",
        T::Int,
        Kind::Int { min: -1, max: 9 },
        Some("compression.gzip.level"),
        "-1",
    ),
    def(
        "compression.lz4.level",
        T::Int,
        Kind::Int { min: 1, max: 17 },
        Some("compression.lz4.level"),
        "9",
    ),
    def(
        "compression.type",
        T::String,
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        Some("compression.type"),
        "producer",
    ),
    def(
        "compression.zstd.level",
        T::Int,
        Kind::Int {
            min: -131072,
            max: 22,
        },
        Some("compression.zstd.level"),
        "3",
    ),
    def(
        "delete.retention.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.cleaner.delete.retention.ms"),
        "86400000",
    ),
    def(
        "file.delete.delay.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.segment.delete.delay.ms"),
        "60000",
    ),
    def(
        "flush.messages",
        T::Long,
        Kind::Long { min: 1 },
        Some("log.flush.interval.messages"),
        LMAX,
    ),
    null_syn(def(
        "flush.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.flush.interval.ms"),
        LMAX,
    )),
    def(
        "follower.replication.throttled.replicas",
        T::List,
        Kind::Any,
        None,
        "",
    ),
    def(
        "index.interval.bytes",
        T::Int,
        Kind::Int { min: 0, max: I32 },
        Some("log.index.interval.bytes"),
        "4096",
    ),
    def(
        "leader.replication.throttled.replicas",
        T::List,
        Kind::Any,
        None,
        "",
    ),
    def(
        "local.retention.bytes",
        T::Long,
        Kind::Long { min: -2 },
        Some("log.local.retention.bytes"),
        "-2",
    ),
    def(
        "local.retention.ms",
        T::Long,
        Kind::Long { min: -2 },
        Some("log.local.retention.ms"),
        "-2",
    ),
    def(
        "max.compaction.lag.ms",
        T::Long,
        Kind::Long { min: 1 },
        Some("log.cleaner.max.compaction.lag.ms"),
        LMAX,
    ),
    def(
        "max.message.bytes",
        T::Int,
        Kind::Int { min: 0, max: I32 },
        Some("message.max.bytes"),
        "1048588",
    ),
    def(
        "message.timestamp.after.max.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.message.timestamp.after.max.ms"),
        "3600000",
    ),
    def(
        "message.timestamp.before.max.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.message.timestamp.before.max.ms"),
        LMAX,
    ),
    def(
        "message.timestamp.type",
        T::String,
        Kind::OneOf(&["CreateTime", "LogAppendTime"]),
        Some("log.message.timestamp.type"),
        "CreateTime",
    ),
    def(
        "min.cleanable.dirty.ratio",
        T::Double,
        Kind::Ratio,
        Some("log.cleaner.min.cleanable.ratio"),
        "0.5",
    ),
    def(
        "min.compaction.lag.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.cleaner.min.compaction.lag.ms"),
        "0",
    ),
    def(
        "min.insync.replicas",
        T::Int,
        Kind::Int { min: 1, max: I32 },
        Some("min.insync.replicas"),
        "1",
    ),
    def(
        "preallocate",
        T::Boolean,
        Kind::Bool,
        Some("log.preallocate"),
        "false",
    ),
    def(
        "remote.log.copy.disable",
        T::Boolean,
        Kind::Bool,
        None,
        "false",
    ),
    def(
        "remote.log.delete.on.disable",
        T::Boolean,
        Kind::Bool,
        None,
        "false",
    ),
    def(
        "remote.storage.enable",
        T::Boolean,
        Kind::Bool,
        None,
        "false",
    ),
    def(
        "retention.bytes",
        T::Long,
        Kind::Long { min: i64::MIN },
        Some("log.retention.bytes"),
        "-1",
    ),
    null_syn(def(
        "retention.ms",
        T::Long,
        Kind::Long { min: -1 },
        Some("log.retention.ms"),
        "604800000",
    )),
    def(
        "segment.bytes",
        T::Int,
        Kind::Int {
            min: 1_048_576,
            max: I32,
        },
        Some("log.segment.bytes"),
        "1073741824",
    ),
    def(
        "segment.index.bytes",
        T::Int,
        Kind::Int { min: 4, max: I32 },
        Some("log.index.size.max.bytes"),
        "10485760",
    ),
    null_syn(def(
        "segment.jitter.ms",
        T::Long,
        Kind::Long { min: 0 },
        Some("log.roll.jitter.ms"),
        "0",
    )),
    null_syn(def(
        "segment.ms",
        T::Long,
        Kind::Long { min: 1 },
        Some("log.roll.ms"),
        "604800000",
    )),
    def(
        "unclean.leader.election.enable",
        T::Boolean,
        Kind::Bool,
        Some("unclean.leader.election.enable"),
        "false",
    ),
];

/// The definition of topic config `name`.
pub fn topic_def(name: &str) -> Option<&'static TopicDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks `value` against `kind`; `Err` carries Kafka's reason text.
pub fn check_kind(kind: Kind, value: &str) -> Result<(), String> {
    let v = value.trim();
    match kind {
        Kind::Int { min, max } => match v.parse::<i64>() {
            Ok(n) if n < i32::MIN as i64 || n > I32 => Err("Not a number of type INT".into()),
            Ok(n) if n < min => Err(format!("Value must be at least {min}")),
            Ok(n) if n > max => Err(format!("Value must be no more than {max}")),
            Ok(_) => Ok(()),
            Err(_) => Err("Not a number of type INT".into()),
        },
        Kind::Long { min } => match v.parse::<i64>() {
            Ok(n) if n < min => Err(format!("Value must be at least {min}")),
            Ok(_) => Ok(()),
            Err(_) => Err("Not a number of type LONG".into()),
        },
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err("Expected value to be either true or false".into()),
        },
        Kind::Double => match v.parse::<f64>() {
            Ok(_) => Ok(()),
            Err(_) => Err("Not a number of type DOUBLE".into()),
        },
        Kind::Ratio => match v.parse::<f64>() {
            Ok(n) if n < 0.0 => Err("Value must be at least 0".into()),
            Ok(n) if n > 1.0 => Err("Value must be no more than 1".into()),
            Ok(_) => Ok(()),
            Err(_) => Err("Not a number of type DOUBLE".into()),
        },
        Kind::OneOf(options) => {
            if options.contains(&v) {
                Ok(())
            } else {
                Err(format!("String must be one of: {}", options.join(", ")))
            }
        }
        Kind::List(options) => {
            if split_list(v).iter().all(|x| options.contains(x)) {
                Ok(())
            } else {
                Err(format!("String must be one of: {}", options.join(", ")))
            }
        }
        Kind::Any => Ok(()),
    }
}

/// Splits a Kafka LIST value: comma-separated, trimmed, empty items dropped.
pub fn split_list(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Validates one topic override.
pub fn check(key: &str, value: &str) -> Result<(), TopicConfigError> {
    let err = |reason: String| TopicConfigError {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let d = topic_def(key).ok_or_else(|| err(UNKNOWN.into()))?;
    check_kind(d.kind, value).map_err(err)
}

/// Effective configuration of one topic. Immutable; replaced whole when configs change.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    /// The overrides as given (key -> value), kept for persistence and describe.
    pub overrides: BTreeMap<String, String>,
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` (KIP-937).
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub max_message_bytes: i32,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u32,
    pub segment_index_bytes: u32,
    /// `retention.ms`; negative keeps data forever.
    pub retention_ms: i64,
    /// `retention.bytes`; negative means no size limit.
    pub retention_bytes: i64,
    /// `cleanup.policy` contains `delete` (time/size retention applies).
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`.
    pub cleanup_compact: bool,
    pub delete_retention_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub min_insync_replicas: i32,
    pub unclean_leader_election_enable: bool,
    /// `flush.messages` (lock)
    pub flush_messages: i64,
    /// `flush.ms`: its broker synonym `log.flush.interval.ms` defaults to
    /// `log.flush.scheduler.interval.ms` (lock)
    pub flush_ms: i64,
}

fn int<T: TryFrom<i64>>(v: &str, fallback: T) -> T {
    v.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| T::try_from(n.max(0)).ok())
        .unwrap_or(fallback)
}

impl TopicConfig {
    /// The broker's (effective) defaults with no overrides.
    pub fn defaults(broker: &Config) -> TopicConfig {
        Self::build(broker, BTreeMap::new()).expect("no overrides cannot fail")
    }

    /// Validates `overrides` and applies them over the broker's effective defaults.
    pub fn build(
        broker: &Config,
        overrides: BTreeMap<String, String>,
    ) -> Result<TopicConfig, TopicConfigError> {
        for (k, v) in &overrides {
            check(k, v)?;
        }
        let policy = overrides
            .get("cleanup.policy")
            .cloned()
            .unwrap_or_else(|| broker.cleanup_policy.clone());
        let policies = split_list(&policy);
        let o = |k: &str| overrides.get(k).map(String::as_str);
        let long = |k: &str, d: i64| o(k).and_then(|v| v.trim().parse().ok()).unwrap_or(d);
        let bool_ = |k: &str, d: bool| o(k).map(|v| v.eq_ignore_ascii_case("true")).unwrap_or(d);
        let c = TopicConfig {
            message_timestamp_type: o("message.timestamp.type")
                .and_then(TimestampType::parse)
                .unwrap_or(broker.message_timestamp_type),
            message_timestamp_before_max_ms: long(
                "message.timestamp.before.max.ms",
                broker.message_timestamp_before_max_ms,
            ),
            message_timestamp_after_max_ms: long(
                "message.timestamp.after.max.ms",
                broker.message_timestamp_after_max_ms,
            ),
            max_message_bytes: o("max.message.bytes")
                .map(|v| int(v, broker.message_max_bytes))
                .unwrap_or(broker.message_max_bytes),
            segment_bytes: o("segment.bytes")
                .map(|v| int(v, broker.segment_bytes))
                .unwrap_or(broker.segment_bytes),
            segment_ms: long("segment.ms", broker.segment_ms),
            index_interval_bytes: o("index.interval.bytes")
                .map(|v| int(v, broker.index_interval_bytes))
                .unwrap_or(broker.index_interval_bytes),
            segment_index_bytes: o("segment.index.bytes")
                .map(|v| int(v, broker.segment_index_bytes))
                .unwrap_or(broker.segment_index_bytes),
            retention_ms: long("retention.ms", broker.retention_ms),
            retention_bytes: long("retention.bytes", broker.retention_bytes),
            cleanup_delete: policies.contains(&"delete"),
            cleanup_compact: policies.contains(&"compact"),
            delete_retention_ms: long("delete.retention.ms", broker.delete_retention_ms),
            min_cleanable_dirty_ratio: o("min.cleanable.dirty.ratio")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(broker.min_cleanable_dirty_ratio),
            min_compaction_lag_ms: long("min.compaction.lag.ms", broker.min_compaction_lag_ms),
            min_insync_replicas: long("min.insync.replicas", broker.min_insync_replicas as i64)
                .clamp(1, I32) as i32,
            unclean_leader_election_enable: bool_(
                "unclean.leader.election.enable",
                broker.unclean_leader_election_enable,
            ),
            flush_messages: long("flush.messages", broker.flush_interval_messages).max(1),
            flush_ms: long(
                "flush.ms",
                broker
                    .flush_interval_ms
                    .unwrap_or(broker.flush_scheduler_interval_ms),
            )
            .max(0),
            overrides,
        };
        Ok(c)
    }
}

/// DescribeConfigs `config_source` ids (Kafka's `DescribeConfigsResponse.ConfigSource`).
pub mod source {
    pub const TOPIC: i8 = 1;
    pub const DYNAMIC_BROKER: i8 = 2;
    pub const DYNAMIC_DEFAULT_BROKER: i8 = 3;
    pub const STATIC_BROKER: i8 = 4;
    pub const DEFAULT: i8 = 5;
}

/// One synonym in a DescribeConfigs entry: a config name, its value in one layer, the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synonym {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
}

/// One described config (what DescribeConfigs and CreateTopics v5+ report).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub ty: ConfigType,
    /// Highest precedence first; the first one is where the value comes from.
    pub synonyms: Vec<Synonym>,
}

/// The layers a broker config can be set in, highest precedence first (dynamic per-broker,
/// dynamic cluster default, static file, Kafka's default).
pub struct BrokerLayers<'a> {
    pub per_broker: &'a BTreeMap<String, String>,
    pub cluster_default: &'a BTreeMap<String, String>,
    pub static_config: &'a Config,
}

impl BrokerLayers<'_> {
    /// The synonyms of broker config `key` in every layer that sets it; `kafka_default` is its
    /// default when none does (None: Kafka has no default for it).
    pub fn synonyms(&self, key: &str, kafka_default: Option<&str>) -> Vec<Synonym> {
        let mut out = Vec::new();
        let mut push = |value: Option<&String>, source| {
            if let Some(v) = value {
                out.push(Synonym {
                    name: key.to_string(),
                    value: Some(v.clone()),
                    source,
                });
            }
        };
        push(self.per_broker.get(key), source::DYNAMIC_BROKER);
        push(
            self.cluster_default.get(key),
            source::DYNAMIC_DEFAULT_BROKER,
        );
        push(self.static_config.explicit.get(key), source::STATIC_BROKER);
        if let Some(d) = kafka_default {
            out.push(Synonym {
                name: key.to_string(),
                value: Some(d.to_string()),
                source: source::DEFAULT,
            });
        }
        out
    }
}

/// Describes every topic config of a topic with `overrides`, given the broker's layers and its
/// effective (static + dynamic) configuration, as Kafka's `ConfigHelper` does.
pub fn describe_topic(
    overrides: &BTreeMap<String, String>,
    layers: &BrokerLayers,
    effective: &Config,
) -> Vec<ConfigEntry> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| {
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(d.name) {
                synonyms.push(Synonym {
                    name: d.name.to_string(),
                    value: Some(v.clone()),
                    source: source::TOPIC,
                });
            }
            let mut broker_value = None;
            if let Some(syn) = d.synonym {
                broker_value = effective.log_value(syn);
                if !d.broker_default_null {
                    let default = Config::default().log_value(syn);
                    let default = default.as_deref().unwrap_or(d.default);
                    synonyms.extend(layers.synonyms(syn, Some(default)));
                } else {
                    // Kafka lists only layers that set this exact broker key.
                    synonyms.extend(layers.synonyms(syn, None));
                }
            }
            let value = overrides
                .get(d.name)
                .cloned()
                .or(broker_value)
                .or_else(|| synonyms.first().and_then(|s| s.value.clone()))
                .unwrap_or_else(|| d.default.to_string());
            let value = if d.ty == ConfigType::Double {
                value
                    .trim()
                    .parse::<f64>()
                    .map(format_double)
                    .unwrap_or(value)
            } else {
                value
            };
            ConfigEntry {
                name: d.name.to_string(),
                value: Some(value),
                source: synonyms.first().map_or(source::DEFAULT, |s| s.source),
                read_only: false,
                ty: d.ty,
                synonyms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
