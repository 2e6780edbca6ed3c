//! The layering: defaults < file < environment < command-line flags. Each layer's entries replace
//! the same key of the layers below; the merged entries go through `Config::from_entries`, and
//! every error names where its key came from (`KAFKA_NUM_PARTITIONS`, `server.properties:12`,
//! `--listen`).
//!
//! Reads the one file it is given; the environment arrives as a list.

use std::collections::BTreeMap;
use std::path::Path;

use super::{env, properties, toml_file, Config, ConfigError, Overrides, Value};

/// Keys that set the same thing: a layer that sets one replaces the others of the layers below
/// (so `--data-dir` beats `KAFKA_LOG_DIRS`, and `KAFKA_LISTENERS` beats a file's `listen`).
const ALIASES: &[&[&str]] = &[
    &["data.dir", "data_dir", "log.dirs", "log.dir"],
    &["listen", "listeners"],
    &["advertise", "advertised.listeners"],
    &["node.id", "broker.id"],
];

/// Inserts `key` from a layer, removing its aliases set by the layers below.
fn insert_layer(entries: &mut BTreeMap<String, Value>, key: String, value: Value) {
    if let Some(group) = ALIASES.iter().find(|g| g.contains(&key.as_str())) {
        for alias in group.iter().filter(|a| **a != key) {
            entries.remove(*alias);
        }
    }
    entries.insert(key, value);
}

/// The syntax of a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// Java properties (`server.properties`).
    Properties,
    Toml,
}

impl ConfigFormat {
    /// By extension (`.properties`, `.toml`), else by content: a file is TOML when it parses as
    /// TOML and has a quoted string, a `[table]` header or a boolean/number-only value shape that
    /// properties files do not use; Kafka's `key=value` files with bare strings are not TOML.
    pub fn detect(path: &Path, text: &str) -> ConfigFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("properties") => return ConfigFormat::Properties,
            Some("toml") => return ConfigFormat::Toml,
            _ => {}
        }
        if text.parse::<toml::Table>().is_ok() {
            ConfigFormat::Toml
        } else {
            ConfigFormat::Properties
        }
    }
}

/// Everything a configuration is built from.
#[derive(Debug, Default, Clone)]
pub struct Sources<'a> {
    pub file: Option<&'a Path>,
    /// The process environment (name, value); only `KAFKA_*` and `CLUSTER_ID` are read.
    pub env: Vec<(String, String)>,
    pub overrides: Overrides,
}

impl Config {
    /// Builds the configuration from defaults, the file, the environment and the flags.
    pub fn load(sources: &Sources<'_>) -> Result<Config, ConfigError> {
        let mut entries: BTreeMap<String, Value> = BTreeMap::new();
        let mut origin: BTreeMap<String, String> = BTreeMap::new();
        if let Some(path) = sources.file {
            let file_err = |reason: String| ConfigError::File {
                path: path.display().to_string(),
                reason,
            };
            let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match ConfigFormat::detect(path, &text) {
                ConfigFormat::Toml => {
                    for (k, v) in toml_file::parse(&text).map_err(file_err)? {
                        origin.insert(k.clone(), name.clone());
                        insert_layer(&mut entries, k, v);
                    }
                }
                ConfigFormat::Properties => {
                    for e in properties::parse(&text).map_err(file_err)? {
                        origin.insert(e.key.clone(), format!("{name}:{}", e.line));
                        // Kafka trims every value it parses.
                        insert_layer(&mut entries, e.key, Value::Str(e.value.trim().to_string()));
                    }
                }
            }
        }
        let environment = env::read(&sources.env);
        for var in &environment.skipped {
            tracing::debug!(
                "environment variable {var} configures the Kafka image's scripts; ignored"
            );
        }
        let mut unrelated = Vec::new();
        for e in environment.entries {
            // A variable whose key is unknown and close to no known key is not a misspelt key but
            // some other tool's KAFKA_-prefixed variable (KAFKA_LIBS): ignored, with a warning.
            // A near miss (KAFKA_NUM_PARTITONS) is a typo and stops startup like a file typo.
            if !super::known_keys::is_known(&e.key)
                && !super::is_sluice_key(&e.key)
                && super::known_keys::closest(&e.key, super::SLUICE_KEYS.iter().copied()).is_none()
            {
                unrelated.push(e.var);
                continue;
            }
            origin.insert(e.key.clone(), e.var.clone());
            insert_layer(&mut entries, e.key, Value::Str(e.value.trim().to_string()));
        }
        let o = &sources.overrides;
        let mut flag = |key: &str, flag: &str, v: String| {
            origin.insert(key.to_string(), flag.to_string());
            insert_layer(&mut entries, key.to_string(), Value::Str(v));
        };
        if let Some(v) = &o.listen {
            flag("listen", "--listen", v.clone());
        }
        if let Some(v) = &o.advertise {
            flag("advertise", "--advertise", v.clone());
        }
        if let Some(v) = &o.data_dir {
            flag("data.dir", "--data-dir", v.display().to_string());
        }
        let mut config = Config::from_entries(&entries).map_err(|e| with_origins(e, &origin))?;
        config.cluster_id = environment.cluster_id;
        config.unrelated_env = unrelated;
        if let Some(id) = &config.cluster_id {
            if let Some(e) = config.finish_cluster_id(id) {
                return Err(e);
            }
        }
        if o.ephemeral {
            config.ephemeral = true;
            // Throwaway test stacks want groups to form at once, unless the file says otherwise.
            if !entries.contains_key("group.initial.rebalance.delay.ms") {
                config.group_initial_rebalance_delay_ms = 0;
            }
        }
        Ok(config)
    }

    fn finish_cluster_id(&self, id: &str) -> Option<ConfigError> {
        (!super::is_kafka_uuid(id)).then(|| {
            super::key_err(
                "CLUSTER_ID",
                format!(
                    "`{id}` is not a cluster id (a base64url-encoded 16-byte UUID, 22 characters, \
                     as `kafka-storage.sh random-uuid` prints)"
                ),
            )
        })
    }
}

/// Adds where each failing key came from: "`num.partitions` (KAFKA_NUM_PARTITIONS)".
fn with_origins(e: ConfigError, origin: &BTreeMap<String, String>) -> ConfigError {
    match e {
        ConfigError::Key { key, reason, .. } => ConfigError::Key {
            origin: origin
                .get(&key)
                .map(|o| format!(" (from {o})"))
                .unwrap_or_default(),
            key,
            reason,
        },
        ConfigError::Several(list) => {
            ConfigError::Several(list.into_iter().map(|e| with_origins(e, origin)).collect())
        }
        other => other,
    }
}
