//! Small text files Kafka keeps next to the logs, in Kafka's exact formats.
//!
//! - Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//!   `replication-offset-checkpoint` in a data directory): line 1 the version `0`, line 2 the entry
//!   count, then `topic partition offset` lines.
//! - `meta.properties` (data directory): Java properties, `version=1`, `node.id`, `cluster.id`,
//!   `directory.id`, ids being Kafka UUIDs (16 bytes, base64url without padding: 22 characters).
//! - `partition.metadata` (partition directory): `version: 0` then `topic_id: <uuid>`.
//!
//! Invariants: every write is atomic (temporary file, fsync, rename, fsync of the directory), so a
//! crash leaves the old or the new file, never a mix. Parsing never panics: bad input is
//! `LogError::Malformed`. Holds no state; functions are safe to call from any thread (callers
//! serialise writers of the same file).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

use super::error::{IoContext, LogError};

/// File name of the recovery-point checkpoint in a data directory.
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// File name of the log-start-offset checkpoint in a data directory.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// File name of the high-watermark checkpoint in a data directory (Kafka's
/// `ReplicaManager.HighWatermarkFilename`).
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
/// File name of the broker/directory identity file in a data directory.
pub const META_PROPERTIES: &str = "meta.properties";
/// File name of the topic-id file in a partition directory.
pub const PARTITION_METADATA: &str = "partition.metadata";

/// Offsets per (topic, partition), sorted (so files are written in a stable order).
pub type OffsetMap = BTreeMap<(String, i32), i64>;

/// Writes `contents` to `path` atomically and durably.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    let mut file = fs::File::create(&tmp).at(&tmp)?;
    file.write_all(contents).at(&tmp)?;
    file.sync_all().at(&tmp)?;
    drop(file);
    fs::rename(&tmp, path).at(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

/// Reads an offset checkpoint. A missing file is an empty map (as in Kafka).
pub fn read_offset_checkpoint(path: &Path) -> Result<OffsetMap, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OffsetMap::new()),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(LogError::malformed(path, "not UTF-8"))
        }
        Err(e) => return Err(LogError::io(path, e)),
    };
    parse_offset_checkpoint(&text).map_err(|why| LogError::malformed(path, why))
}

/// Parses the text of an offset checkpoint.
pub fn parse_offset_checkpoint(text: &str) -> Result<OffsetMap, String> {
    let mut lines = text.lines();
    match lines.next().map(str::trim) {
        Some("0") => {}
        Some(v) => return Err(format!("unsupported version {v:?}")),
        None => return Err("empty file".into()),
    }
    let count: usize = lines
        .next()
        .ok_or("missing entry count")?
        .trim()
        .parse()
        .map_err(|e| format!("bad entry count: {e}"))?;
    let mut map = OffsetMap::new();
    let mut seen = 0usize;
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [topic, partition, offset] = fields[..] else {
            return Err(format!("malformed entry {line:?}"));
        };
        let partition: i32 = partition
            .parse()
            .map_err(|e| format!("bad partition in {line:?}: {e}"))?;
        let offset: i64 = offset
            .parse()
            .map_err(|e| format!("bad offset in {line:?}: {e}"))?;
        map.insert((topic.to_string(), partition), offset);
        seen += 1;
    }
    if seen != count {
        return Err(format!("expected {count} entries, found {seen}"));
    }
    Ok(map)
}

/// Renders an offset checkpoint.
pub fn format_offset_checkpoint(offsets: &OffsetMap) -> String {
    let mut out = format!("0\n{}\n", offsets.len());
    for ((topic, partition), offset) in offsets {
        out.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    out
}

/// Writes an offset checkpoint atomically.
pub fn write_offset_checkpoint(path: &Path, offsets: &OffsetMap) -> Result<(), LogError> {
    write_atomically(path, format_offset_checkpoint(offsets).as_bytes())
}

/// A Kafka UUID as text: base64url of the 16 bytes, no padding.
pub fn uuid_to_kafka_string(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// Parses a Kafka UUID string (22 base64url characters).
pub fn parse_kafka_uuid(text: &str) -> Result<Uuid, String> {
    let bytes = URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|e| format!("bad uuid {text:?}: {e}"))?;
    let bytes: [u8; 16] = bytes
        .try_into()
        .map_err(|_| format!("uuid {text:?} is not 16 bytes"))?;
    Ok(Uuid::from_bytes(bytes))
}

/// A random Kafka UUID, avoiding the values Kafka reserves (all zeros, the metadata topic's
/// `...0001`) and strings starting with `-` (which command lines take for options).
pub fn random_kafka_uuid() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if id.as_u128() > 1 && !uuid_to_kafka_string(id).starts_with('-') {
            return id;
        }
    }
}

/// The identity of a data directory (`meta.properties`, version 1, KRaft).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    pub node_id: i32,
    /// Kafka UUID string (22 characters).
    pub cluster_id: String,
    /// Kafka UUID string of this directory, when present.
    pub directory_id: Option<String>,
}

/// Parses Java-properties text into key/value pairs (comments, `=`/`:` separators, backslash escapes).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let mut key = String::new();
        let mut chars = line.chars();
        let mut escaped = false;
        for c in chars.by_ref() {
            if escaped {
                key.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '=' || c == ':' || c.is_whitespace() {
                break;
            } else {
                key.push(c);
            }
        }
        let rest = chars.as_str().trim_start();
        let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim_start();
        let mut value = String::new();
        let mut escaped = false;
        for c in rest.chars() {
            if escaped {
                value.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else {
                value.push(c);
            }
        }
        map.insert(key, value.trim_end().to_string());
    }
    map
}

/// Reads `meta.properties`; `Ok(None)` when the file does not exist.
pub fn read_meta_properties(path: &Path) -> Result<Option<MetaProperties>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, e)),
    };
    let props = parse_properties(&text);
    let get = |k: &str| props.get(k).map(String::as_str);
    match get("version") {
        Some("1") => {}
        other => {
            return Err(LogError::malformed(
                path,
                format!("unsupported version {other:?}"),
            ))
        }
    }
    let node_id = get("node.id")
        .ok_or_else(|| LogError::malformed(path, "missing node.id"))?
        .parse::<i32>()
        .map_err(|e| LogError::malformed(path, format!("bad node.id: {e}")))?;
    let cluster_id = get("cluster.id")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| LogError::malformed(path, "missing cluster.id"))?
        .to_string();
    let directory_id = match get("directory.id") {
        Some(d) => {
            parse_kafka_uuid(d).map_err(|why| LogError::malformed(path, why))?;
            Some(d.to_string())
        }
        None => None,
    };
    Ok(Some(MetaProperties {
        node_id,
        cluster_id,
        directory_id,
    }))
}

/// Writes `meta.properties` atomically, in the layout Kafka's storage tool produces.
pub fn write_meta_properties(path: &Path, meta: &MetaProperties) -> Result<(), LogError> {
    let mut out = String::from("#\n#Written by Sluice\n");
    out.push_str(&format!("cluster.id={}\n", meta.cluster_id));
    if let Some(d) = &meta.directory_id {
        out.push_str(&format!("directory.id={d}\n"));
    }
    out.push_str(&format!("node.id={}\nversion=1\n", meta.node_id));
    write_atomically(path, out.as_bytes())
}

/// Reads a partition directory's topic id from `partition.metadata`; `Ok(None)` if absent.
pub fn read_partition_metadata(path: &Path) -> Result<Option<Uuid>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(path, e)),
    };
    parse_partition_metadata(&text)
        .map(Some)
        .map_err(|why| LogError::malformed(path, why))
}

/// Parses the text of `partition.metadata`.
pub fn parse_partition_metadata(text: &str) -> Result<Uuid, String> {
    let mut lines = text.lines();
    let version = lines.next().ok_or("empty file")?;
    match version.split_once(':') {
        Some(("version", v)) if v.trim() == "0" => {}
        _ => return Err(format!("bad version line {version:?}")),
    }
    let topic = lines.next().ok_or("missing topic_id line")?;
    match topic.split_once(':') {
        Some(("topic_id", id)) => parse_kafka_uuid(id),
        _ => Err(format!("bad topic_id line {topic:?}")),
    }
}

/// Writes `partition.metadata` atomically.
pub fn write_partition_metadata(path: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let text = format!("version: 0\ntopic_id: {}\n", uuid_to_kafka_string(topic_id));
    write_atomically(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_checkpoint_round_trips_in_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        assert!(read_offset_checkpoint(&path).unwrap().is_empty());
        let mut map = OffsetMap::new();
        map.insert(("orders".into(), 1), 42);
        map.insert(("orders".into(), 0), 7);
        map.insert(("__consumer_offsets".into(), 12), 0);
        write_offset_checkpoint(&path, &map).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n3\n__consumer_offsets 12 0\norders 0 7\norders 1 42\n"
        );
        assert_eq!(read_offset_checkpoint(&path).unwrap(), map);
        assert!(!dir
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());
    }

    #[test]
    fn malformed_offset_checkpoints_are_errors() {
        for text in [
            "",
            "1\n0\n",
            "0\n",
            "0\nx\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt 0\n",
            "0\n1\nt zero 1\n",
            "0\n1\nt 0 1 extra\n",
            "0\n0\nt 0 1\n",
        ] {
            assert!(parse_offset_checkpoint(text).is_err(), "accepted {text:?}");
        }
        assert_eq!(parse_offset_checkpoint("0\n0\n").unwrap().len(), 0);
    }

    #[test]
    fn meta_properties_round_trip_and_read_kafka_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(META_PROPERTIES);
        assert_eq!(read_meta_properties(&path).unwrap(), None);
        let meta = MetaProperties {
            node_id: 3,
            cluster_id: uuid_to_kafka_string(random_kafka_uuid()),
            directory_id: Some(uuid_to_kafka_string(random_kafka_uuid())),
        };
        write_meta_properties(&path, &meta).unwrap();
        assert_eq!(read_meta_properties(&path).unwrap(), Some(meta));

        // As written by Kafka's StorageTool.
        let kafka =
            "#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=1\ndirectory.id=l0t8SJMTQzKwdjnqJmqxpg\n\
                     version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        fs::write(&path, kafka).unwrap();
        let got = read_meta_properties(&path).unwrap().unwrap();
        assert_eq!(got.node_id, 1);
        assert_eq!(got.cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
        assert_eq!(got.directory_id.as_deref(), Some("l0t8SJMTQzKwdjnqJmqxpg"));

        fs::write(&path, "version=0\nbroker.id=1\n").unwrap();
        assert!(read_meta_properties(&path).is_err());
        fs::write(&path, "version=1\nnode.id=x\ncluster.id=a\n").unwrap();
        assert!(read_meta_properties(&path).is_err());
    }

    #[test]
    fn uuid_strings_are_kafka_shaped() {
        let id = random_kafka_uuid();
        let s = uuid_to_kafka_string(id);
        assert_eq!(s.len(), 22);
        assert!(!s.starts_with('-'));
        assert_eq!(parse_kafka_uuid(&s).unwrap(), id);
        assert_eq!(uuid_to_kafka_string(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        assert!(parse_kafka_uuid("short").is_err());
        assert!(parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAAAA").is_err());
    }

    #[test]
    fn partition_metadata_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(PARTITION_METADATA);
        let id = random_kafka_uuid();
        write_partition_metadata(&path, id).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("version: 0\ntopic_id: {}\n", uuid_to_kafka_string(id))
        );
        assert_eq!(read_partition_metadata(&path).unwrap(), Some(id));
        assert!(
            parse_partition_metadata("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n").is_err()
        );
        assert!(parse_partition_metadata("version: 0\n").is_err());
        assert!(parse_partition_metadata("version: 0\ntopic_id: nope\n").is_err());
    }

    proptest! {
        #[test]
        fn checkpoint_parsing_never_panics(text in "[0-9a-z \\n-]{0,80}") {
            let _ = parse_offset_checkpoint(&text);
            let _ = parse_partition_metadata(&text);
            let _ = parse_properties(&text);
        }

        #[test]
        fn checkpoint_round_trips(entries in proptest::collection::btree_map(
            ("[a-zA-Z0-9._-]{1,20}", 0i32..1000), any::<i64>(), 0..20)) {
            let text = format_offset_checkpoint(&entries);
            prop_assert_eq!(parse_offset_checkpoint(&text).unwrap(), entries);
        }
    }
}
