//! One entry of the replicated metadata log: the records of one controller command (or of a
//! snapshot), applied atomically, in order (Kafka writes one command's records as one atomic
//! batch; here one quorum entry is that batch).
//!
//! Layout (Sluice's own framing around Kafka's record bytes): one kind byte, then for each
//! record a big-endian `u32` length and the record in Kafka's metadata record format
//! (`codec::encode`). Kinds:
//! - [`EntryKind::Records`]: always applied.
//! - [`EntryKind::Bootstrap`]: the feature levels of a new cluster, applied only if the log
//!   before it set no `metadata.version` (so a node that proposes it again after a restart, or a
//!   second voter racing the first, changes nothing). The decision depends only on the log, so
//!   every replica decides alike.
//!
//! Decoding never panics and never allocates more than the input holds. No I/O.

use bytes::{BufMut, Bytes};

use super::codec::{self, DecodeError};
use super::records::MetadataRecord;

/// How an entry's records are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Records,
    Bootstrap,
}

impl EntryKind {
    fn byte(self) -> u8 {
        match self {
            EntryKind::Records => 0,
            EntryKind::Bootstrap => 1,
        }
    }
}

/// Why bytes are not a metadata log entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("metadata entry: empty")]
    Empty,
    #[error("metadata entry: unknown kind {0}")]
    Kind(u8),
    #[error("metadata entry: record length {len} exceeds the {left} bytes left")]
    Truncated { len: usize, left: usize },
    #[error(transparent)]
    Record(#[from] DecodeError),
}

/// Encodes `records` as one entry of `kind`.
pub fn encode(kind: EntryKind, records: &[MetadataRecord]) -> Bytes {
    let mut out = Vec::with_capacity(1 + records.len() * 64);
    out.put_u8(kind.byte());
    for r in records {
        let bytes = codec::encode(r);
        out.put_u32(bytes.len() as u32);
        out.extend_from_slice(&bytes);
    }
    Bytes::from(out)
}

/// Decodes one entry.
pub fn decode(bytes: &[u8]) -> Result<(EntryKind, Vec<MetadataRecord>), EntryError> {
    let (&kind, mut rest) = bytes.split_first().ok_or(EntryError::Empty)?;
    let kind = match kind {
        0 => EntryKind::Records,
        1 => EntryKind::Bootstrap,
        other => return Err(EntryError::Kind(other)),
    };
    let mut records = Vec::new();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(EntryError::Truncated {
                len: 4,
                left: rest.len(),
            });
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > tail.len() {
            return Err(EntryError::Truncated {
                len,
                left: tail.len(),
            });
        }
        let (record, after) = tail.split_at(len);
        records.push(codec::decode(record)?);
        rest = after;
    }
    Ok((kind, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sample() -> Vec<MetadataRecord> {
        vec![
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                feature_level: 27,
            },
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: Uuid::from_u128(7),
            },
            MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(7),
            },
        ]
    }

    #[test]
    fn round_trips_each_kind() {
        for kind in [EntryKind::Records, EntryKind::Bootstrap] {
            let bytes = encode(kind, &sample());
            assert_eq!(bytes[0], kind.byte());
            assert_eq!(decode(&bytes), Ok((kind, sample())));
        }
        assert_eq!(
            decode(&encode(EntryKind::Records, &[])),
            Ok((EntryKind::Records, vec![]))
        );
    }

    #[test]
    fn refuses_damage_without_panicking() {
        let bytes = encode(EntryKind::Records, &sample());
        assert_eq!(decode(&[]), Err(EntryError::Empty));
        assert_eq!(decode(&[9]), Err(EntryError::Kind(9)));
        // A cut inside a record is an error; only a cut between records decodes (to a prefix:
        // entry integrity is the quorum's job).
        let mut refused = 0;
        for cut in 1..bytes.len() {
            match decode(&bytes[..cut]) {
                Ok((_, prefix)) => {
                    assert!(sample().starts_with(&prefix) && prefix.len() < sample().len());
                    assert_eq!(encode(EntryKind::Records, &prefix).len(), cut);
                }
                Err(_) => refused += 1,
            }
        }
        assert_eq!(refused, bytes.len() - 1 - sample().len());
        // A length prefix claiming more than is there.
        let mut lying = vec![0u8];
        lying.extend_from_slice(&u32::MAX.to_be_bytes());
        lying.push(1);
        assert_eq!(
            decode(&lying),
            Err(EntryError::Truncated {
                len: u32::MAX as usize,
                left: 1
            })
        );
    }
}
