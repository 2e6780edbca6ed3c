//! `sluice format` and `sluice random-uuid`, Kafka's `kafka-storage.sh format` / `random-uuid`:
//! a data directory is given its identity (`meta.properties`: version 1, node.id, cluster.id and a
//! new directory.id) before the node first starts, so every node of a cluster carries the cluster
//! id the operator chose. A node started on a formatted directory uses that id; a `CLUSTER_ID`
//! naming another one stops it (`cluster::identity`).
//!
//! Invariants: a formatted directory is never rewritten (without `ignore_formatted` it is an
//! error, with it the directory is skipped); a directory locked by a running node is refused
//! before anything is written there. Where Sluice differs from Kafka: it has one log directory
//! and writes no `bootstrap.checkpoint` (the bootstrap records, such as the feature levels, are
//! written by the first controller itself).

use std::path::{Path, PathBuf};

use crate::config::{quorum::ProcessRoles, Config};
use crate::log::checkpoint::{self, MetaProperties, META_PROPERTIES};
use crate::log::dir_lock::DirLock;

/// What `format` was asked, beyond the config.
#[derive(Debug, Clone, Default)]
pub struct FormatOptions {
    /// `--cluster-id` / `-t`: a Kafka UUID (22 characters of base64url).
    pub cluster_id: String,
    /// `--ignore-formatted` / `-g`: skip a formatted directory instead of failing.
    pub ignore_formatted: bool,
    /// `--standalone` / `-s`: this controller is the quorum's only initial voter (KIP-853).
    pub standalone: bool,
    /// `--initial-controllers` / `-I`: the initial voters of a dynamic quorum (KIP-853).
    pub initial_controllers: Option<String>,
}

/// What happened to one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Formatted {
    /// `meta.properties` written.
    Written { dir: PathBuf, directory_id: String },
    /// Already formatted, skipped (`--ignore-formatted`).
    Skipped(PathBuf),
}

/// Why formatting stopped (nothing is written past the first error).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("Cluster ID string {id} does not appear to be a valid UUID: {why}")]
    BadClusterId { id: String, why: String },
    #[error(
        "You cannot specify controller.quorum.voters and format the node with \
         --initial-controllers or --standalone. If you want to use dynamic quorum, please \
         remove controller.quorum.voters and specify controller.quorum.bootstrap.servers instead."
    )]
    VotersAndDynamic,
    #[error(
        "--standalone and --initial-controllers format a controller; process.roles=broker has none"
    )]
    NotController,
    #[error(
        "--initial-controllers: a dynamic quorum (KIP-853) is not implemented; list the voters \
         in controller.quorum.voters, or use --standalone for a lone controller"
    )]
    InitialControllersUnsupported,
    #[error(
        "Log directory {0} is already formatted. Use --ignore-formatted to ignore this \
         directory and format the others."
    )]
    AlreadyFormatted(PathBuf),
    #[error("{dir}: {reason}")]
    Dir { dir: PathBuf, reason: String },
}

/// Formats every log directory of `config` (Sluice has one: `log.dirs`). Returns what was done
/// per directory, in order.
pub fn format(config: &Config, options: &FormatOptions) -> Result<Vec<Formatted>, FormatError> {
    checkpoint::parse_kafka_uuid(&options.cluster_id).map_err(|why| FormatError::BadClusterId {
        id: options.cluster_id.clone(),
        why,
    })?;
    let dynamic = options.standalone || options.initial_controllers.is_some();
    if dynamic && !config.quorum_voters.is_empty() {
        return Err(FormatError::VotersAndDynamic);
    }
    if dynamic && config.process_roles == ProcessRoles::Broker {
        return Err(FormatError::NotController);
    }
    if options.initial_controllers.is_some() {
        return Err(FormatError::InitialControllersUnsupported);
    }
    // One log directory today; a list so several dirs need no new signature.
    Ok(vec![format_dir(&config.data_dir, config.node_id, options)?])
}

fn format_dir(dir: &Path, node_id: i32, options: &FormatOptions) -> Result<Formatted, FormatError> {
    let dir_err = |reason: String| FormatError::Dir {
        dir: dir.to_path_buf(),
        reason,
    };
    // A running node holds the lock: never format under it.
    let _lock = DirLock::acquire(dir).map_err(|e| dir_err(e.to_string()))?;
    let path = dir.join(META_PROPERTIES);
    let existing = checkpoint::read_meta_properties(&path).map_err(|e| dir_err(e.to_string()));
    match existing {
        Ok(None) => {}
        // A file we cannot read is formatted too: never overwrite it.
        Ok(Some(_)) | Err(_) if options.ignore_formatted => {
            return Ok(Formatted::Skipped(dir.to_path_buf()))
        }
        Ok(Some(_)) => return Err(FormatError::AlreadyFormatted(dir.to_path_buf())),
        Err(e) => return Err(e),
    }
    let directory_id = checkpoint::uuid_to_kafka_string(checkpoint::random_kafka_uuid());
    let meta = MetaProperties {
        node_id,
        cluster_id: options.cluster_id.trim().to_string(),
        directory_id: Some(directory_id.clone()),
    };
    checkpoint::write_meta_properties(&path, &meta).map_err(|e| dir_err(e.to_string()))?;
    Ok(Formatted::Written {
        dir: dir.to_path_buf(),
        directory_id,
    })
}

/// `random-uuid`: a new Kafka UUID for `--cluster-id`.
pub fn random_uuid() -> String {
    checkpoint::uuid_to_kafka_string(checkpoint::random_kafka_uuid())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::identity::{load_or_format, IdentityError};

    const ID: &str = "MkU3OEVBNTcwNTJENDM2Qg";

    fn config(dir: &Path, node_id: i32) -> Config {
        Config {
            data_dir: dir.to_path_buf(),
            node_id,
            ..Config::default()
        }
    }

    fn options(cluster_id: &str) -> FormatOptions {
        FormatOptions {
            cluster_id: cluster_id.into(),
            ..FormatOptions::default()
        }
    }

    #[test]
    fn format_writes_kafkas_meta_properties_and_a_started_node_uses_its_id() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let done = format(&config(&dir, 3), &options(ID)).unwrap();
        let [Formatted::Written { directory_id, .. }] = done.as_slice() else {
            panic!("{done:?}");
        };
        let text = std::fs::read_to_string(dir.join(META_PROPERTIES)).unwrap();
        let props = checkpoint::parse_properties(&text);
        assert_eq!(props["version"], "1");
        assert_eq!(props["node.id"], "3");
        assert_eq!(props["cluster.id"], ID);
        assert_eq!(&props["directory.id"], directory_id);
        assert_eq!(directory_id.len(), 22);
        // The node started there takes the formatted id; another CLUSTER_ID is refused.
        assert_eq!(load_or_format(&dir, 3, None).unwrap(), ID);
        assert_eq!(load_or_format(&dir, 3, Some(ID)).unwrap(), ID);
        assert!(matches!(
            load_or_format(&dir, 3, Some("AAAAAAAAAAAAAAAAAAAAAA")),
            Err(IdentityError::OtherCluster { .. })
        ));
    }

    #[test]
    fn a_formatted_directory_is_refused_or_skipped_never_rewritten() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(tmp.path(), 1);
        format(&c, &options(ID)).unwrap();
        let before = std::fs::read_to_string(tmp.path().join(META_PROPERTIES)).unwrap();
        let other = random_uuid();
        let e = format(&c, &options(&other)).unwrap_err().to_string();
        assert!(
            e.contains("is already formatted. Use --ignore-formatted"),
            "{e}"
        );
        let skipped = format(
            &c,
            &FormatOptions {
                ignore_formatted: true,
                ..options(&other)
            },
        )
        .unwrap();
        assert_eq!(skipped, vec![Formatted::Skipped(tmp.path().to_path_buf())]);
        let after = std::fs::read_to_string(tmp.path().join(META_PROPERTIES)).unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn bad_ids_locked_dirs_and_dynamic_quorum_options_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(tmp.path(), 1);
        let e = format(&c, &options("bad")).unwrap_err();
        assert!(matches!(e, FormatError::BadClusterId { .. }), "{e}");
        let lock = DirLock::acquire(tmp.path()).unwrap();
        assert!(matches!(
            format(&c, &options(ID)),
            Err(FormatError::Dir { .. })
        ));
        drop(lock);
        let mut voters = c.clone();
        voters.quorum_voters = vec![crate::config::quorum::QuorumVoter {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9093,
        }];
        let standalone = FormatOptions {
            standalone: true,
            ..options(ID)
        };
        assert!(matches!(
            format(&voters, &standalone),
            Err(FormatError::VotersAndDynamic)
        ));
        let initial = FormatOptions {
            initial_controllers: Some("1@127.0.0.1:9093:AAAAAAAAAAAAAAAAAAAAAA".into()),
            ..options(ID)
        };
        assert!(matches!(
            format(&c, &initial),
            Err(FormatError::InitialControllersUnsupported)
        ));
        assert!(!tmp.path().join(META_PROPERTIES).exists());
        // A lone controller formatted --standalone is Sluice's default voter set.
        assert_eq!(format(&c, &standalone).unwrap().len(), 1);
        assert!(random_uuid() != random_uuid());
    }
}
