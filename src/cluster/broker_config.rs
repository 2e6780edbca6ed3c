//! Broker-level configs as DescribeConfigs and (Incremental)AlterConfigs see them: Kafka's names,
//! types and defaults for the keys Sluice knows, which of them can change at runtime, and the
//! dynamic layers (per broker and cluster-wide default) stored in `<data>/broker-configs.json`.
//!
//! Each key is defined once: [`BROKER_CONFIGS`] for the keys Sluice uses, `config::known_keys`
//! for the types and defaults of every other Kafka key, `kafka_keys` for which of those are
//! dynamic (stored, not used), per-broker-only, listener-prefixed or internal.
//!
//! This module performs no I/O; `replica::ReplicaManager` persists [`DynamicBrokerConfigs`].

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::topic_config::{
    check_kind, source, topic_def, BrokerLayers, ConfigEntry, ConfigType, Kind, TOPIC_CONFIGS,
};
use crate::config::{known_keys, Config};

mod kafka_keys;

/// One broker config Sluice reports.
#[derive(Debug, Clone, Copy)]
pub struct BrokerDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Kafka's default; None when Kafka has none (reported as null).
    pub default: Option<&'static str>,
    /// Can be changed with AlterConfigs / IncrementalAlterConfigs without a restart.
    pub dynamic: bool,
}

const fn b(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    dynamic: bool,
) -> BrokerDef {
    BrokerDef {
        name,
        ty,
        default,
        dynamic,
    }
}

use ConfigType as T;

/// Broker configs Sluice knows, sorted by name.
pub const BROKER_CONFIGS: &[BrokerDef] = &[
    b("advertised.listeners", T::String, None, false),
    b("auto.create.topics.enable", T::Boolean, Some("true"), false),
    b("broker.id", T::Int, Some("-1"), false),
    b("listeners", T::List, Some("PLAINTEXT://:9092"), false),
    b(
        "log.cleaner.delete.retention.ms",
        T::Long,
        Some("86400000"),
        true,
    ),
    b(
        "log.cleaner.min.cleanable.ratio",
        T::Double,
        Some("0.5"),
        true,
    ),
    b(
        "log.cleaner.min.compaction.lag.ms",
        T::Long,
        Some("0"),
        true,
    ),
    b("log.cleaner.enable", T::Boolean, Some("true"), false),
    b("log.cleanup.policy", T::List, Some("delete"), true),
    b("log.dirs", T::String, None, false),
    b(
        "log.flush.interval.messages",
        T::Long,
        Some("9223372036854775807"),
        true,
    ),
    b("log.flush.interval.ms", T::Long, None, true),
    b("log.index.interval.bytes", T::Int, Some("4096"), true),
    b("log.index.size.max.bytes", T::Int, Some("10485760"), true),
    b(
        "log.message.timestamp.after.max.ms",
        T::Long,
        Some("3600000"),
        true,
    ),
    b(
        "log.message.timestamp.before.max.ms",
        T::Long,
        Some("9223372036854775807"),
        true,
    ),
    b(
        "log.message.timestamp.type",
        T::String,
        Some("CreateTime"),
        true,
    ),
    b("log.retention.bytes", T::Long, Some("-1"), true),
    b(
        "log.retention.check.interval.ms",
        T::Long,
        Some("300000"),
        false,
    ),
    b("log.retention.hours", T::Int, Some("168"), false),
    b("log.retention.minutes", T::Int, None, false),
    b("log.retention.ms", T::Long, None, true),
    b("log.roll.hours", T::Int, Some("168"), false),
    b("log.roll.ms", T::Long, None, true),
    b("log.segment.bytes", T::Int, Some("1073741824"), true),
    b("message.max.bytes", T::Int, Some("1048588"), true),
    b("min.insync.replicas", T::Int, Some("1"), true),
    b("node.id", T::Int, None, false),
    b("num.partitions", T::Int, Some("1"), false),
    b("producer.id.expiration.ms", T::Int, Some("86400000"), true),
    b("socket.request.max.bytes", T::Int, Some("104857600"), false),
    b(
        "unclean.leader.election.enable",
        T::Boolean,
        Some("false"),
        true,
    ),
];

/// The definition of broker config `name` that Sluice uses.
pub fn broker_def(name: &str) -> Option<&'static BrokerDef> {
    BROKER_CONFIGS.iter().find(|d| d.name == name)
}

/// The dynamic Kafka broker configs Sluice stores without using (`kafka_keys::STORED_DYNAMIC`),
/// sorted, with Kafka's types and defaults from `config::known_keys`.
pub fn stored_defs() -> &'static [BrokerDef] {
    static DEFS: LazyLock<Vec<BrokerDef>> = LazyLock::new(|| {
        kafka_keys::STORED_DYNAMIC
            .iter()
            .filter_map(|&name| known_keys::lookup(name).map(|k| known_def(name, k)))
            .collect()
    });
    &DEFS
}

/// A dynamic Kafka broker config that Sluice stores without using.
pub fn stored_def(name: &str) -> Option<&'static BrokerDef> {
    stored_defs().iter().find(|d| d.name == name)
}

/// `known_keys`' row as DescribeConfigs reports it: a class default by its name, "" as null
/// unless Kafka's default is the empty string.
fn known_def(name: &'static str, k: &known_keys::KnownKey) -> BrokerDef {
    use known_keys::Kind as K;
    let ty = match k.kind {
        K::Boolean => T::Boolean,
        K::Int => T::Int,
        K::Short => T::Short,
        K::Long => T::Long,
        K::Double => T::Double,
        K::String => T::String,
        K::List => T::List,
        K::Class => T::Class,
        K::Password => T::Password,
    };
    let default = k.default.strip_prefix("class ").unwrap_or(k.default);
    let default = (!default.is_empty() || kafka_keys::EMPTY_STRING_DEFAULT.contains(&name))
        .then_some(default);
    BrokerDef {
        name,
        ty,
        default,
        dynamic: true,
    }
}

/// A Kafka broker key that cannot change at runtime: known to Kafka, listed by its
/// DescribeConfigs (not internal), and dynamic neither in Kafka's list Sluice stores nor in
/// [`BROKER_CONFIGS`].
fn is_static(key: &str) -> bool {
    known_keys::lookup(key).is_some()
        && !kafka_keys::INTERNAL.contains(&key)
        && !kafka_keys::STORED_DYNAMIC.contains(&key)
        && !broker_def(key).is_some_and(|d| d.dynamic)
}

/// What DescribeConfigs' documentation says of a key Sluice stores without using.
pub const STORED_ONLY_DOC: &str =
    "Accepted and stored as a dynamic broker config for Kafka compatibility; Sluice does not use it.";

/// Dynamic broker configs: the per-broker layer (resource name = this node id) and the
/// cluster-wide default layer (resource name ""). Persisted as JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicBrokerConfigs {
    #[serde(default)]
    pub per_broker: BTreeMap<String, String>,
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
}

impl DynamicBrokerConfigs {
    /// Both layers merged, the per-broker layer winning.
    pub fn merged(&self) -> BTreeMap<String, String> {
        let mut m = self.cluster_default.clone();
        m.extend(self.per_broker.clone());
        m
    }

    /// The static configuration with both dynamic layers applied (the keys Sluice uses; the
    /// others are only stored).
    pub fn effective(&self, static_config: &Config) -> Result<Config, String> {
        let mut used = self.merged();
        used.retain(|k, _| broker_def(k).is_some());
        static_config.with_dynamic(&used).map_err(|e| e.to_string())
    }

    pub fn layers<'a>(&'a self, static_config: &'a Config) -> BrokerLayers<'a> {
        BrokerLayers {
            per_broker: &self.per_broker,
            cluster_default: &self.cluster_default,
            static_config,
        }
    }
}

/// A value for a Kafka kind of config, checked by type (Kafka's messages).
fn type_kind(ty: ConfigType) -> Kind {
    match ty {
        T::Boolean => Kind::Bool,
        T::Int => Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
        T::Short => Kind::Int {
            min: i16::MIN as i64,
            max: i16::MAX as i64,
        },
        T::Long => Kind::Long { min: i64::MIN },
        T::Double => Kind::Double,
        _ => Kind::Any,
    }
}

/// Checks one dynamic broker config as Kafka's `DynamicBrokerConfig.validateConfigs` does, for
/// the per-broker resource (`per_broker`) or the cluster default; Kafka's message on failure
/// (INVALID_REQUEST). Keys Kafka does not know are accepted (and stored), as in Kafka; keys under
/// a `listener.name.<listener>.` prefix are checked as their base key.
pub fn check_dynamic(key: &str, value: &str, per_broker: bool) -> Result<(), String> {
    let listener_base = key
        .strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .map(|(_, base)| base);
    let base = listener_base.unwrap_or(key);
    let sluice = broker_def(key);
    if is_static(key) || sluice.is_some_and(|d| !d.dynamic) {
        return Err(format!(
            "Cannot update these configs dynamically: Set({key})"
        ));
    }
    if listener_base.is_none() && kafka_keys::LISTENER_PREFIX_ONLY.contains(&key) {
        return Err(format!(
            "These security configs can be dynamically updated only per-listener using the listener prefix: HashSet({key})"
        ));
    }
    let kind = TOPIC_CONFIGS
        .iter()
        .find(|t| t.synonym == Some(base))
        .map(|t| t.kind)
        .or_else(|| broker_def(base).map(|d| type_kind(d.ty)))
        .or_else(|| stored_def(base).map(|d| type_kind(d.ty)))
        .unwrap_or(Kind::Any);
    check_kind(kind, value)
        .map_err(|r| format!("Invalid value {value} for configuration {key}: {r}"))?;
    let per_broker_key = match listener_base {
        Some(b) => !kafka_keys::CLUSTER_LEVEL_LISTENER_CONFIGS.contains(&b),
        None => kafka_keys::PER_BROKER_ONLY.contains(&key),
    };
    if per_broker_key && !per_broker {
        return Err(format!(
            "Cannot update these configs at default cluster level, broker id must be specified: Set({key})"
        ));
    }
    Ok(())
}

/// The value of a non-dynamic broker key read from the running configuration.
fn static_value(c: &Config, key: &str) -> Option<String> {
    Some(match key {
        "advertised.listeners" => format!("PLAINTEXT://{}:{}", c.advertise.0, c.advertise.1),
        "listeners" => format!("PLAINTEXT://{}", c.listen),
        "auto.create.topics.enable" => c.auto_create_topics.to_string(),
        "broker.id" | "node.id" => c.node_id.to_string(),
        "log.dirs" => c.data_dir.display().to_string(),
        "num.partitions" => c.num_partitions.to_string(),
        "socket.request.max.bytes" => c.max_request_bytes.to_string(),
        "log.retention.check.interval.ms" => c.retention_check_interval_ms.to_string(),
        "log.cleaner.backoff.ms" => c.cleaner_backoff_ms.to_string(),
        "log.cleaner.enable" => c.cleaner_enable.to_string(),
        _ => return None,
    })
}

/// Describes broker configs. `per_broker` is true for resource name = node id (every config),
/// false for the cluster default resource "" (only the dynamic defaults that are set).
pub fn describe_broker(
    dynamic: &DynamicBrokerConfigs,
    static_config: &Config,
    per_broker: bool,
) -> Vec<ConfigEntry> {
    let layers = dynamic.layers(static_config);
    let mut out = Vec::new();
    for d in BROKER_CONFIGS.iter().chain(stored_defs()) {
        let mut synonyms = layers.synonyms(d.name, d.default);
        // Sluice's own settings that Kafka spells differently: report the value in use.
        if !static_config.explicit.contains_key(d.name) {
            if let Some(v) = static_value(static_config, d.name) {
                if d.default != Some(v.as_str()) {
                    synonyms.retain(|s| s.source != source::DEFAULT);
                    synonyms.push(super::topic_config::Synonym {
                        name: d.name.to_string(),
                        value: Some(v),
                        source: source::STATIC_BROKER,
                    });
                }
            }
        }
        if !per_broker {
            synonyms.retain(|s| s.source == source::DYNAMIC_DEFAULT_BROKER);
            if synonyms.is_empty() {
                continue;
            }
        }
        let value = synonyms.first().and_then(|s| s.value.clone());
        out.push(ConfigEntry {
            name: d.name.to_string(),
            value,
            source: synonyms.first().map_or(source::DEFAULT, |s| s.source),
            read_only: !d.dynamic,
            ty: d.ty,
            synonyms,
        });
    }
    out
}

/// Whether `key` is a topic config (used to give a clearer error for topic keys sent to a broker).
pub fn is_topic_key(key: &str) -> bool {
    topic_def(key).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_keys_are_checked_like_their_topic_configs() {
        assert!(check_dynamic("log.retention.ms", "1000", true).is_ok());
        assert_eq!(
            check_dynamic("log.retention.ms", "-2", true).unwrap_err(),
            "Invalid value -2 for configuration log.retention.ms: Value must be at least -1"
        );
        assert_eq!(
            check_dynamic("num.partitions", "3", true).unwrap_err(),
            "Cannot update these configs dynamically: Set(num.partitions)"
        );
        assert!(check_dynamic("log.cleanup.policy", "compact,delete", false).is_ok());
        assert!(check_dynamic("log.cleanup.policy", "shred", true).is_err());
    }

    #[test]
    fn kafkas_other_dynamic_keys_are_stored_with_kafkas_rules() {
        // (key, value, per-broker resource, Kafka 4.1.2's answer)
        let cases: [(&str, &str, bool, Result<(), &str>); 12] = [
            ("sasl.kerberos.min.time.before.relogin", "60000", true, Ok(())),
            ("sasl.kerberos.min.time.before.relogin", "60000", false, Err("Cannot update these configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)")),
            ("sasl.kerberos.min.time.before.relogin", "abc", true, Err("Invalid value abc for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG")),
            ("sasl.kerberos.ticket.renew.jitter", "abc", true, Err("Invalid value abc for configuration sasl.kerberos.ticket.renew.jitter: Not a number of type DOUBLE")),
            ("log.preallocate", "abc", true, Err("Invalid value abc for configuration log.preallocate: Expected value to be either true or false")),
            ("background.threads", "abc", false, Err("Invalid value abc for configuration background.threads: Not a number of type INT")),
            ("log.cleaner.threads", "2", false, Ok(())),
            ("foo.bar", "1", false, Ok(())),
            ("broker.id", "2", true, Err("Cannot update these configs dynamically: Set(broker.id)")),
            ("log.retention.hours", "1", true, Err("Cannot update these configs dynamically: Set(log.retention.hours)")),
            ("ssl.keystore.location", "/x", true, Err("These security configs can be dynamically updated only per-listener using the listener prefix: HashSet(ssl.keystore.location)")),
            ("listener.name.plaintext.ssl.keystore.location", "/x", false, Err("Cannot update these configs at default cluster level, broker id must be specified: Set(listener.name.plaintext.ssl.keystore.location)")),
        ];
        for (key, value, per_broker, want) in cases {
            let got = check_dynamic(key, value, per_broker);
            assert_eq!(
                got.as_ref().map(|_| ()).map_err(String::as_str),
                want,
                "{key}={value}"
            );
        }
        assert!(check_dynamic("listener.name.plaintext.ssl.keystore.location", "/x", true).is_ok());
        assert!(check_dynamic("listener.name.plaintext.max.connections", "10", false).is_ok());
        assert_eq!(
            stored_defs().len(),
            kafka_keys::STORED_DYNAMIC.len(),
            "all in known_keys"
        );
    }

    #[test]
    fn every_kafka_key_is_defined_once() {
        // Kafka 4.1.2 lists 73 dynamic keys besides Sluice's own dynamic ones; 3 of them Sluice
        // now implements (in BROKER_CONFIGS).
        assert_eq!(stored_defs().len(), 70);
        let mut names: Vec<&str> = BROKER_CONFIGS
            .iter()
            .chain(stored_defs())
            .map(|d| d.name)
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a key in both tables");
        let described = describe_broker(&DynamicBrokerConfigs::default(), &Config::default(), true);
        assert_eq!(described.len(), n);
        for key in [
            "log.flush.interval.ms",
            "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
        ] {
            let d = broker_def(key).expect(key);
            assert!(d.dynamic && stored_def(key).is_none(), "{key}");
        }
        // a dynamic log.flush.interval.ms reaches the flush policy's setting
        let mut dynamic = DynamicBrokerConfigs::default();
        dynamic
            .per_broker
            .insert("log.flush.interval.ms".into(), "5".into());
        let c = dynamic.effective(&Config::default()).unwrap();
        assert_eq!(c.flush_interval_ms, Some(5));
        // Kafka's static keys: 226 in its DescribeConfigs answer (Sluice's static ones included),
        // and `listeners` (dynamic per broker in Kafka, static in Sluice)
        let statics: Vec<&str> = known_keys::KAFKA_BROKER_KEYS
            .iter()
            .map(|k| k.name)
            .filter(|k| is_static(k))
            .collect();
        assert_eq!(statics.len(), 227);
        assert!(statics.contains(&"listeners"));
        assert!(statics.contains(&"queued.max.requests"));
        assert!(
            !statics.contains(&"unstable.api.versions.enable"),
            "internal"
        );
        // types and defaults as Kafka reports them
        let d = stored_def("principal.builder.class").unwrap();
        assert_eq!(
            (d.ty, d.default),
            (
                T::Class,
                Some("org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder")
            )
        );
        assert_eq!(stored_def("ssl.cipher.suites").unwrap().default, Some(""));
        assert_eq!(stored_def("sasl.jaas.config").unwrap().default, None);
        assert_eq!(stored_def("log.cleaner.threads").unwrap().ty, T::Int);
    }

    #[test]
    fn broker_describe_reports_layers_in_precedence_order() {
        let mut dynamic = DynamicBrokerConfigs::default();
        dynamic
            .cluster_default
            .insert("log.retention.bytes".into(), "100".into());
        dynamic
            .per_broker
            .insert("log.retention.bytes".into(), "200".into());
        let entries = describe_broker(&dynamic, &Config::default(), true);
        let e = entries
            .iter()
            .find(|e| e.name == "log.retention.bytes")
            .unwrap();
        assert_eq!(e.value.as_deref(), Some("200"));
        assert_eq!(e.source, source::DYNAMIC_BROKER);
        let sources: Vec<i8> = e.synonyms.iter().map(|s| s.source).collect();
        assert_eq!(
            sources,
            vec![
                source::DYNAMIC_BROKER,
                source::DYNAMIC_DEFAULT_BROKER,
                source::DEFAULT
            ]
        );
        assert!(!e.read_only);
        let ms = entries
            .iter()
            .find(|e| e.name == "log.retention.ms")
            .unwrap();
        assert_eq!(ms.value, None);
        assert_eq!(ms.source, source::DEFAULT);
        let np = entries.iter().find(|e| e.name == "num.partitions").unwrap();
        assert!(np.read_only);
        assert_eq!(np.value.as_deref(), Some("1"));

        let defaults = describe_broker(&dynamic, &Config::default(), false);
        assert_eq!(defaults.len(), 1);
        assert_eq!(defaults[0].value.as_deref(), Some("100"));
    }
}
