//! Cluster identity: the cluster id kept in `meta.properties` so it is stable across restarts, the
//! node id, and the endpoint advertised to clients.

use std::io;
use std::path::Path;

use base64::Engine;

/// Who this broker is. Immutable after startup.
#[derive(Debug, Clone)]
pub struct ClusterIdentity {
    /// 22-character base64url cluster id, as Kafka formats it.
    pub cluster_id: String,
    pub node_id: i32,
    pub advertised_host: String,
    pub advertised_port: i32,
}

/// Formats a UUID the way Kafka prints ids: base64url without padding.
pub fn uuid_to_kafka_string(id: uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Parses Kafka's base64url id form.
pub fn uuid_from_kafka_string(s: &str) -> Option<uuid::Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s.trim())
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// Reads `meta.properties` from `data_dir`, or creates it with a new cluster id. A file naming a
/// different node id is an error: the directory belongs to another broker.
pub fn load_or_create(data_dir: &Path, node_id: i32) -> io::Result<String> {
    let path = data_dir.join("meta.properties");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mut cluster_id = None;
            let mut file_node = None;
            for line in text.lines() {
                let line = line.trim();
                if line.starts_with('#') {
                    continue;
                }
                if let Some((k, v)) = line.split_once('=') {
                    match k.trim() {
                        "cluster.id" => cluster_id = Some(v.trim().to_string()),
                        "node.id" | "broker.id" => file_node = v.trim().parse::<i32>().ok(),
                        _ => {}
                    }
                }
            }
            if let Some(n) = file_node {
                if n != node_id {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} belongs to node.id {n}, but this broker is node.id {node_id}", path.display()),
                    ));
                }
            }
            cluster_id.filter(|c| !c.is_empty()).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} has no cluster.id", path.display()),
                )
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let cluster_id = uuid_to_kafka_string(uuid::Uuid::new_v4());
            let directory_id = uuid_to_kafka_string(uuid::Uuid::new_v4());
            let text = format!(
                "#\n#Written by sluice\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\ncluster.id={cluster_id}\n"
            );
            crate::fsutil::write_atomically(&path, text.as_bytes())?;
            Ok(cluster_id)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_id_is_stable_across_loads() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path(), 1).unwrap();
        let b = load_or_create(dir.path(), 1).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 22);
        assert!(load_or_create(dir.path(), 2).is_err());
    }

    #[test]
    fn kafka_uuid_strings_round_trip() {
        let id = uuid::Uuid::new_v4();
        let s = uuid_to_kafka_string(id);
        assert_eq!(s.len(), 22);
        assert_eq!(uuid_from_kafka_string(&s), Some(id));
        assert_eq!(uuid_from_kafka_string("not base64!"), None);
    }
}
