//! Per-topic configuration: Kafka's topic-level config names, validated, with broker defaults for
//! whatever a topic does not override.
//!
//! Only the overrides are stored (in `<data>/topic-configs.json`, see `replica::ReplicaManager`).

use std::collections::BTreeMap;

use crate::config::{Config, TimestampType};

/// A rejected topic config: maps to INVALID_CONFIG (40) with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid value {value} for configuration {key}: {reason}")]
pub struct TopicConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// Effective configuration of one topic. Immutable; replaced whole when configs change.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    /// The overrides as given (key -> value), kept for persistence and describe.
    pub overrides: BTreeMap<String, String>,
    pub message_timestamp_type: TimestampType,
    pub max_message_bytes: i32,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u32,
    pub segment_index_bytes: u32,
}

#[derive(Clone, Copy)]
enum Kind {
    Int { min: i64 },
    Bool,
    OneOf(&'static [&'static str]),
    List(&'static [&'static str]),
    Any,
}

/// Topic config names Kafka accepts, with how their values are checked. Keys listed here but not yet
/// acted on (retention, compaction) are stored so tools that set them keep working.
const KNOWN: &[(&str, Kind)] = &[
    ("cleanup.policy", Kind::List(&["delete", "compact"])),
    (
        "compression.type",
        Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
    ),
    ("delete.retention.ms", Kind::Int { min: 0 }),
    ("file.delete.delay.ms", Kind::Int { min: 0 }),
    ("flush.messages", Kind::Int { min: 1 }),
    ("flush.ms", Kind::Int { min: 0 }),
    ("index.interval.bytes", Kind::Int { min: 0 }),
    ("max.compaction.lag.ms", Kind::Int { min: 1 }),
    ("max.message.bytes", Kind::Int { min: 0 }),
    (
        "message.timestamp.type",
        Kind::OneOf(&["CreateTime", "LogAppendTime"]),
    ),
    ("message.timestamp.before.max.ms", Kind::Int { min: 0 }),
    ("message.timestamp.after.max.ms", Kind::Int { min: 0 }),
    ("message.timestamp.difference.max.ms", Kind::Int { min: 0 }),
    ("min.cleanable.dirty.ratio", Kind::Any),
    ("min.compaction.lag.ms", Kind::Int { min: 0 }),
    ("min.insync.replicas", Kind::Int { min: 1 }),
    ("preallocate", Kind::Bool),
    ("retention.bytes", Kind::Int { min: -1 }),
    ("retention.ms", Kind::Int { min: -1 }),
    ("segment.bytes", Kind::Int { min: 14 }),
    ("segment.index.bytes", Kind::Int { min: 4 }),
    ("segment.jitter.ms", Kind::Int { min: 0 }),
    ("segment.ms", Kind::Int { min: 1 }),
    ("unclean.leader.election.enable", Kind::Bool),
    ("message.downconversion.enable", Kind::Bool),
];

fn check(key: &str, value: &str) -> Result<(), TopicConfigError> {
    let err = |reason: &str| TopicConfigError {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    };
    let kind = KNOWN
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, kind)| *kind)
        .ok_or_else(|| TopicConfigError {
            key: key.to_string(),
            value: value.to_string(),
            reason: "Unknown topic config name".into(),
        })?;
    match kind {
        Kind::Int { min } => match value.trim().parse::<i64>() {
            Ok(v) if v >= min => Ok(()),
            Ok(_) => Err(err(&format!("Value must be at least {min}"))),
            Err(_) => Err(err("Value must be a number")),
        },
        Kind::Bool => match value {
            "true" | "false" => Ok(()),
            _ => Err(err("Expected value to be either true or false")),
        },
        Kind::OneOf(options) => {
            if options.contains(&value) {
                Ok(())
            } else {
                Err(err(&format!(
                    "String must be one of: {}",
                    options.join(", ")
                )))
            }
        }
        Kind::List(options) => {
            if value.split(',').all(|v| options.contains(&v.trim())) {
                Ok(())
            } else {
                Err(err(&format!(
                    "Each value must be one of: {}",
                    options.join(", ")
                )))
            }
        }
        Kind::Any => Ok(()),
    }
}

impl TopicConfig {
    /// The broker defaults with no overrides.
    pub fn defaults(broker: &Config) -> TopicConfig {
        TopicConfig {
            overrides: BTreeMap::new(),
            message_timestamp_type: broker.message_timestamp_type,
            max_message_bytes: broker.message_max_bytes,
            segment_bytes: broker.segment_bytes,
            segment_ms: broker.segment_ms,
            index_interval_bytes: broker.index_interval_bytes,
            segment_index_bytes: broker.segment_index_bytes,
        }
    }

    /// Validates `overrides` and applies them over the broker defaults.
    pub fn build(
        broker: &Config,
        overrides: BTreeMap<String, String>,
    ) -> Result<TopicConfig, TopicConfigError> {
        let mut c = TopicConfig::defaults(broker);
        for (k, v) in &overrides {
            check(k, v)?;
            // `check` guarantees numbers parse and are in range for the keys read below.
            match k.as_str() {
                "message.timestamp.type" => {
                    c.message_timestamp_type =
                        TimestampType::parse(v).unwrap_or(TimestampType::CreateTime)
                }
                "max.message.bytes" => c.max_message_bytes = clamp_i32(v),
                "segment.bytes" => c.segment_bytes = clamp_i32(v) as u64,
                "segment.ms" => c.segment_ms = v.trim().parse().unwrap_or(c.segment_ms),
                "index.interval.bytes" => c.index_interval_bytes = clamp_i32(v) as u32,
                "segment.index.bytes" => c.segment_index_bytes = clamp_i32(v) as u32,
                _ => {}
            }
        }
        c.overrides = overrides;
        Ok(c)
    }
}

fn clamp_i32(v: &str) -> i32 {
    v.trim()
        .parse::<i64>()
        .map(|n| n.clamp(0, i32::MAX as i64) as i32)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(pairs: &[(&str, &str)]) -> Result<TopicConfig, TopicConfigError> {
        let m = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TopicConfig::build(&Config::default(), m)
    }

    #[test]
    fn overrides_apply_over_defaults() {
        let c = build(&[
            ("message.timestamp.type", "LogAppendTime"),
            ("segment.bytes", "4096"),
        ])
        .unwrap();
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(c.segment_bytes, 4096);
        assert_eq!(c.max_message_bytes, Config::default().message_max_bytes);
    }

    #[test]
    fn bad_values_and_unknown_keys_are_rejected_with_the_key() {
        let e = build(&[("segment.bytes", "tiny")]).unwrap_err();
        assert_eq!(e.key, "segment.bytes");
        let e = build(&[("cleanup.policy", "shred")]).unwrap_err();
        assert!(e.to_string().contains("cleanup.policy"));
        let e = build(&[("no.such.config", "1")]).unwrap_err();
        assert_eq!(e.reason, "Unknown topic config name");
        assert!(build(&[("cleanup.policy", "compact,delete")]).is_ok());
        assert!(build(&[("segment.bytes", "10")]).is_err());
    }
}
