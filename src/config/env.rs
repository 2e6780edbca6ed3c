//! Environment variables as the Kafka images read them.
//!
//! - apache/kafka and confluentinc images: `KAFKA_<NAME>` is the key `<name>` lower-cased with
//!   `___` -> `_`, `__` -> `-`, `_` -> `.` (`KAFKA_LISTENER_SECURITY_PROTOCOL_MAP` ->
//!   `listener.security.protocol.map`). The image's own script variables are not keys and are
//!   skipped: those the apache/kafka image excludes (`KAFKA_VERSION`, `KAFKA_HEAP_OPTS`,
//!   `KAFKA_OPTS`, `KAFKA_JMX_OPTS`, `KAFKA_JVM_PERFORMANCE_OPTS`, `KAFKA_GC_LOG_OPTS`,
//!   `KAFKA_LOG4J_OPTS`, `KAFKA_LOG4J_ROOT_LOGLEVEL`, `KAFKA_LOG4J_LOGGERS`,
//!   `KAFKA_TOOLS_LOG4J_LOGLEVEL`) and, as the confluent image does, every `KAFKA_JMX_*` and
//!   `KAFKA_LOG4J_*`.
//! - bitnami images: `KAFKA_CFG_<NAME>`, same mapping. When any `KAFKA_CFG_` variable is set,
//!   only those are keys: bitnami's other `KAFKA_*` variables configure its scripts.
//! - `CLUSTER_ID` (apache/confluent) and bitnami's `KAFKA_KRAFT_CLUSTER_ID`: the cluster id used
//!   when the data directory is formatted.
//!
//! Pure: takes the variables as a list, so tests need no process environment.

/// One variable that maps to a configuration key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvEntry {
    /// The variable's name (for messages: "KAFKA_FOO (foo)").
    pub var: String,
    pub key: String,
    pub value: String,
}

/// What the environment says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EnvConfig {
    pub entries: Vec<EnvEntry>,
    pub cluster_id: Option<String>,
    /// Image-script variables that were skipped (named at debug level).
    pub skipped: Vec<String>,
}

/// Script variables of the apache/kafka image (`kafka-propertiesSpec.json` "excludes"; the image
/// spells the heap one `KAFKA_HEAP_OPT`, its scripts read `KAFKA_HEAP_OPTS`).
const EXCLUDED: &[&str] = &[
    "KAFKA_VERSION",
    "KAFKA_HEAP_OPT",
    "KAFKA_HEAP_OPTS",
    "KAFKA_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_DEBUG",
    "KAFKA_HOME",
];
/// Prefixes of script variables (JMX and log4j settings of the apache and confluent images).
const EXCLUDED_PREFIXES: &[&str] = &["KAFKA_JMX_", "KAFKA_LOG4J_"];

const CFG_PREFIX: &str = "KAFKA_CFG_";
const PREFIX: &str = "KAFKA_";

/// Reads the Kafka configuration out of `vars` (name, value) pairs.
pub fn read(vars: &[(String, String)]) -> EnvConfig {
    let mut out = EnvConfig::default();
    let bitnami = vars.iter().any(|(k, _)| k.starts_with(CFG_PREFIX));
    for (var, value) in vars {
        match var.as_str() {
            "CLUSTER_ID" => {
                out.cluster_id = Some(value.trim().to_string());
                continue;
            }
            "KAFKA_KRAFT_CLUSTER_ID" if bitnami => {
                out.cluster_id = Some(value.trim().to_string());
                continue;
            }
            _ => {}
        }
        let rest = if bitnami {
            var.strip_prefix(CFG_PREFIX)
        } else {
            var.strip_prefix(PREFIX)
        };
        let Some(rest) = rest else {
            if var.starts_with(PREFIX) {
                out.skipped.push(var.clone());
            }
            continue;
        };
        if !bitnami
            && (EXCLUDED.contains(&var.as_str())
                || EXCLUDED_PREFIXES.iter().any(|p| var.starts_with(p)))
        {
            out.skipped.push(var.clone());
            continue;
        }
        if rest.is_empty() {
            continue;
        }
        out.entries.push(EnvEntry {
            var: var.clone(),
            key: key_of(rest),
            value: value.clone(),
        });
    }
    out.entries.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// `LISTENER_SECURITY_PROTOCOL_MAP` -> `listener.security.protocol.map`; `___` -> `_`,
/// `__` -> `-`, `_` -> `.` (longest run first, as the image's `utility` does).
pub fn key_of(name: &str) -> String {
    name.to_ascii_lowercase()
        .replace("___", "\u{0}")
        .replace("__", "-")
        .replace('_', ".")
        .replace('\u{0}', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn underscores_map_as_the_image_maps_them() {
        assert_eq!(
            key_of("LISTENER_SECURITY_PROTOCOL_MAP"),
            "listener.security.protocol.map"
        );
        assert_eq!(key_of("A__B"), "a-b");
        assert_eq!(key_of("A___B_C"), "a_b.c");
        assert_eq!(key_of("A____B"), "a_.b");
    }

    #[test]
    fn apache_image_variables() {
        let e = read(&vars(&[
            ("KAFKA_NODE_ID", "1"),
            ("KAFKA_HEAP_OPTS", "-Xmx1G"),
            ("KAFKA_JMX_PORT", "9999"),
            ("KAFKA_LOG4J_ROOT_LOGLEVEL", "INFO"),
            ("CLUSTER_ID", "MkU3OEVBNTcwNTJENDM2Qk"),
            ("PATH", "/bin"),
        ]));
        let keys: Vec<_> = e.entries.iter().map(|x| x.key.as_str()).collect();
        assert_eq!(keys, vec!["node.id"]);
        assert_eq!(e.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qk"));
        assert_eq!(e.skipped.len(), 3);
    }

    #[test]
    fn bitnami_prefix_takes_over_when_present() {
        let e = read(&vars(&[
            ("KAFKA_CFG_NODE_ID", "0"),
            ("KAFKA_CFG_PROCESS_ROLES", "controller,broker"),
            ("KAFKA_KRAFT_CLUSTER_ID", "abc"),
            ("KAFKA_CLIENT_USERS", "user"),
        ]));
        let keys: Vec<_> = e.entries.iter().map(|x| x.key.as_str()).collect();
        assert_eq!(keys, vec!["node.id", "process.roles"]);
        assert_eq!(e.entries[0].var, "KAFKA_CFG_NODE_ID");
        assert_eq!(e.cluster_id.as_deref(), Some("abc"));
        assert_eq!(e.skipped, vec!["KAFKA_CLIENT_USERS".to_string()]);
    }
}
