//! The controller quorum's keys: `process.roles`, `controller.quorum.voters` and
//! `controller.quorum.bootstrap.servers` parsed and checked together as Kafka's `KafkaConfig` and
//! `QuorumConfig` do (Kafka's messages), and the effective `metadata.log.dir`. Pure; no I/O.

use std::path::PathBuf;

use super::{key_err, value, Config, ConfigError};

/// One entry of `controller.quorum.voters`: `id@host:port` (the voter's CONTROLLER endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

impl QuorumVoter {
    /// `host:port`, IPv6 hosts in brackets.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `process.roles`: which of Kafka's two roles this node plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessRoles {
    /// `broker,controller` (Sluice's default): a broker and a voter of the controller quorum.
    Combined,
    /// `broker` alone: serves clients, follows the metadata log without voting.
    Broker,
    /// `controller` alone: a voter serving only the CONTROLLER listener.
    Controller,
}

impl ProcessRoles {
    /// Parses the list (order and repetition do not matter; an empty list is ZooKeeper mode,
    /// which Kafka 4 removed).
    pub(crate) fn parse(text: &str) -> Result<ProcessRoles, ConfigError> {
        let mut roles: Vec<&str> = value::split_list(text);
        roles.sort_unstable();
        roles.dedup();
        match roles.as_slice() {
            ["broker", "controller"] => Ok(ProcessRoles::Combined),
            ["broker"] => Ok(ProcessRoles::Broker),
            ["controller"] => Ok(ProcessRoles::Controller),
            _ => Err(key_err(
                "process.roles",
                format!("`{text}`: expected broker, controller or broker,controller"),
            )),
        }
    }

    pub fn is_broker(self) -> bool {
        self != ProcessRoles::Controller
    }

    pub fn is_controller(self) -> bool {
        self != ProcessRoles::Broker
    }
}

/// Kafka's cross-key checks of the roles, once listeners and voters are resolved.
pub(crate) fn check_roles(
    c: &Config,
    voters_given: bool,
    bootstrap: Option<&str>,
    controller_names: Option<&str>,
    inter_broker: Option<&str>,
) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let bootstrap_list = bootstrap.map(value::split_list).unwrap_or_default();
    for b in &bootstrap_list {
        let ok = b
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if !ok {
            errors.push(key_err(
                "controller.quorum.bootstrap.servers",
                format!("Failed to parse bootstrap server `{b}` (expected HOST:PORT)"),
            ));
        }
    }
    let listeners = c.effective_listeners();
    // A broker-only node finds the quorum through the bootstrap servers (its observer learns the
    // leader's endpoint from their Fetch answers); a voter must know its fellow voters.
    let learns_voters = !bootstrap_list.is_empty() && !voters_given;
    if learns_voters
        && c.process_roles.is_controller()
        && !is_standalone(c, &bootstrap_list, &listeners)
    {
        errors.push(key_err(
            "controller.quorum.bootstrap.servers",
            format!(
                "`{}`: learning the voters from bootstrap servers (a dynamic quorum, KIP-853) is \
                 not implemented for a controller: Sluice accepts a broker-only node's bootstrap \
                 servers, and a controller whose one bootstrap server is its own CONTROLLER \
                 listener (a standalone voter, `kafka-storage format --standalone`); list the voters in controller.quorum.voters (ID@HOST:PORT each), \
                 the bootstrap servers may stay (with both keys set the voters are used)",
                bootstrap.unwrap_or_default().trim()
            ),
        ));
    }
    let no_quorum = !voters_given && bootstrap_list.is_empty();
    let no_names = controller_names.is_none_or(|n| value::split_list(n).is_empty());
    match c.process_roles {
        ProcessRoles::Combined => {}
        ProcessRoles::Broker => {
            if no_names {
                errors.push(key_err(
                    "controller.listener.names",
                    "controller.listener.names must contain at least one value when running \
                     KRaft with just the broker role",
                ));
            }
            if listeners.iter().any(|l| l.controller) {
                errors.push(key_err(
                    "listeners",
                    "controller.listener.names must not contain a value appearing in the \
                     'listeners' configuration when running KRaft with just the broker role",
                ));
            }
            if no_quorum {
                errors.push(no_quorum_error());
            }
            if c.quorum_voters.iter().any(|v| v.id == c.node_id) {
                errors.push(key_err(
                    "controller.quorum.voters",
                    format!(
                        "If process.roles contains just the 'broker' role, the node id {} must \
                         not be included in the set of voters controller.quorum.voters",
                        c.node_id
                    ),
                ));
            }
        }
        ProcessRoles::Controller => {
            if no_names {
                errors.push(key_err(
                    "controller.listener.names",
                    "controller.listener.names must contain at least one value when running \
                     KRaft with just the controller role",
                ));
            } else if listeners.iter().any(|l| !l.controller) {
                errors.push(key_err(
                    "listeners",
                    "The listeners config must only contain KRaft controller listeners from \
                     controller.listener.names when process.roles=controller",
                ));
            }
            if no_quorum {
                errors.push(no_quorum_error());
            }
            let names = controller_names.map(value::split_list).unwrap_or_default();
            if let Some(ib) = inter_broker {
                if names.iter().any(|n| n.eq_ignore_ascii_case(ib.trim())) {
                    errors.push(key_err(
                        "inter.broker.listener.name",
                        "controller.listener.names must not contain an explicitly set \
                         inter.broker.listener.name configuration value when \
                         process.roles=controller",
                    ));
                }
            }
        }
    }
    errors
}

/// Kafka 4.1's own `server.properties`: a controller whose one bootstrap server is the port of
/// its own CONTROLLER listener is the lone voter `format --standalone` makes it (Sluice's
/// default voter set: this node alone).
fn is_standalone(c: &Config, bootstrap: &[&str], listeners: &[super::Listener]) -> bool {
    let [only] = bootstrap else {
        return false;
    };
    let port = only
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok());
    c.process_roles.is_controller()
        && listeners
            .iter()
            .any(|l| l.controller && Some(l.bind.port()) == port)
}

fn no_quorum_error() -> ConfigError {
    key_err(
        "controller.quorum.voters",
        "If using process.roles, either controller.quorum.bootstrap.servers must contain the \
         set of bootstrap controllers or controller.quorum.voters must contain a parseable set \
         of controllers.",
    )
}

/// Kafka's directory name of the metadata log partition.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

/// Parses `controller.quorum.voters`; with the controller role this node must be a voter.
pub(crate) fn parse_voters(
    voters: &str,
    node_id: i32,
    controller_role: bool,
) -> Result<Vec<QuorumVoter>, ConfigError> {
    let key = "controller.quorum.voters";
    let mut out: Vec<QuorumVoter> = Vec::new();
    for v in value::split_list(voters) {
        let parsed = v.split_once('@').and_then(|(id, endpoint)| {
            let (host, port) = endpoint.rsplit_once(':')?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if host.is_empty() {
                return None;
            }
            Some(QuorumVoter {
                id: id.trim().parse::<i32>().ok().filter(|id| *id >= 0)?,
                host: host.to_string(),
                port: port.parse::<u16>().ok()?,
            })
        });
        let Some(voter) = parsed else {
            return Err(key_err(
                key,
                format!("Failed to parse voter string `{v}` (expected ID@HOST:PORT)"),
            ));
        };
        if out.iter().any(|o| o.id == voter.id) {
            return Err(key_err(key, format!("voter id {} appears twice", voter.id)));
        }
        out.push(voter);
    }
    if controller_role && !out.iter().any(|v| v.id == node_id) {
        return Err(key_err(
            key,
            format!(
                "`{voters}`: with the controller role in process.roles, the node id {node_id} \
                 must be included in the set of voters"
            ),
        ));
    }
    Ok(out)
}

impl Config {
    /// `metadata.log.dir`, or Kafka's default `<log.dirs>/__cluster_metadata-0`.
    pub fn effective_metadata_log_dir(&self) -> PathBuf {
        match &self.metadata_log_dir {
            Some(d) => d.clone(),
            None => self.data_dir.join(METADATA_LOG_DIR_NAME),
        }
    }

    /// The voters, or this node alone on its own address when the key is unset (the
    /// zero-config single node; a controller-only node: its CONTROLLER listener).
    pub fn effective_quorum_voters(&self) -> Vec<QuorumVoter> {
        if !self.quorum_voters.is_empty() {
            return self.quorum_voters.clone();
        }
        let own = match self.process_roles {
            ProcessRoles::Controller => self
                .effective_listeners()
                .into_iter()
                .find(|l| l.controller)
                .map_or(self.listen, |l| l.bind),
            _ => self.listen,
        };
        vec![QuorumVoter {
            id: self.node_id,
            host: own.ip().to_string(),
            port: own.port(),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_parse_and_must_include_this_node_with_the_controller_role() {
        let v = parse_voters("1@127.0.0.1:9093, 2@[::1]:9094,3@host-c:9095", 2, true).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1].address(), "[::1]:9094");
        assert_eq!(
            v[2],
            QuorumVoter {
                id: 3,
                host: "host-c".into(),
                port: 9095
            }
        );
        let e = parse_voters("1@a:9093,3@b:9093", 2, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node id 2") && e.contains("controller.quorum.voters"),
            "{e}"
        );
        // A broker-only node needs not be a voter.
        assert_eq!(parse_voters("1@a:9093", 2, false).unwrap().len(), 1);
        for bad in [
            "1@a",
            "x@a:1",
            "1@:9093",
            "1@a:99999",
            "-1@a:1",
            "a:9093",
            "1@a:1,1@b:2",
        ] {
            assert!(parse_voters(bad, 1, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn quorum_keys_take_kafka_names_and_defaults() {
        let c = Config::default();
        assert_eq!(c.quorum_election_timeout_ms, 1000);
        assert_eq!(c.quorum_fetch_timeout_ms, 2000);
        assert_eq!(c.quorum_election_backoff_max_ms, 1000);
        assert_eq!(
            c.metadata_log_max_record_bytes_between_snapshots,
            20 * 1024 * 1024
        );
        assert_eq!(
            c.effective_metadata_log_dir(),
            c.data_dir.join("__cluster_metadata-0")
        );
        assert_eq!(c.effective_quorum_voters()[0].id, c.node_id);
        let mut entries = std::collections::BTreeMap::new();
        for (k, v) in [
            ("node.id", "2"),
            (
                "controller.quorum.voters",
                "1@127.0.0.1:9093,2@127.0.0.2:9093,3@127.0.0.3:9093",
            ),
            ("controller.quorum.election.timeout.ms", "1500"),
            ("controller.quorum.fetch.timeout.ms", "3000"),
            ("controller.quorum.election.backoff.max.ms", "500"),
            ("metadata.log.dir", "/var/meta"),
            ("metadata.log.max.record.bytes.between.snapshots", "4096"),
        ] {
            entries.insert(k.to_string(), value::Value::Str(v.to_string()));
        }
        let c = Config::from_entries(&entries).unwrap();
        assert_eq!(c.quorum_voters.len(), 3);
        assert_eq!(c.quorum_election_timeout_ms, 1500);
        assert_eq!(c.quorum_fetch_timeout_ms, 3000);
        assert_eq!(c.quorum_election_backoff_max_ms, 500);
        assert_eq!(c.effective_metadata_log_dir(), PathBuf::from("/var/meta"));
        assert_eq!(c.metadata_log_max_record_bytes_between_snapshots, 4096);
    }
}
