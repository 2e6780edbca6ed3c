//! Zero-copy encoder for Fetch response bodies (API key 1, versions 4..=18).
//!
//! The `kafka-protocol` crate's `FetchResponse` encoder copies every record byte into its output
//! buffer. A fetch answer is mostly record bytes read from the log, so we encode only the metadata
//! ourselves and splice each partition's records into the output as their own chunk: the log's
//! `Bytes` for a small read, a file range ([`Records::File`]) for a large one, which the connection
//! writer sends with `sendfile`. Byte chunks go out with vectored writes.
//!
//! Invariants:
//! - The concatenation of the chunks is byte-for-byte what the crate's encoder (and Kafka's
//!   generated `FetchResponseData`) produces for the same fields and version.
//! - Records are never copied: a chunk is a clone of the handle (the same `Bytes` allocation, or
//!   the same open file and range). The body length counts a file range by its promised length.
//! - All metadata is written into one growing `BytesMut`, split off between record chunks, so the
//!   metadata pieces share one allocation too.
//!
//! This module performs no I/O and holds no state. Only the response BODY is encoded: the caller
//! prepends the size prefix and the response header (v0 below Fetch v12, v1 from v12).
//!
//! Wire layout (flexible = v12+: compact lengths as unsigned varint N+1, 0 = null; a tagged-field
//! count after every struct):
//! ```text
//! throttle_time_ms i32 | error_code i16 (v7+) | session_id i32 (v7+) | [topic]
//!   topic: name string (v4..=12) | topic_id uuid (v13+) | [partition]
//!   partition: partition_index i32 | error_code i16 | high_watermark i64 | last_stable_offset i64
//!              | log_start_offset i64 (v5+) | [aborted (producer_id i64, first_offset i64)]? nullable
//!              | preferred_read_replica i32 (v11+) | records bytes? nullable
//! ```
//! Tagged fields: a partition's diverging_epoch (tag 0) when set; current_leader, snapshot_id and
//! the top-level node_endpoints (v16+) are never written.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use super::Chunk;
use crate::log::Records;

/// Lowest Fetch version we encode. Kafka 4.x advertises Fetch 4..=18.
pub const MIN_VERSION: i16 = 4;
/// Highest Fetch version we encode.
pub const MAX_VERSION: i16 = 18;
/// First flexible Fetch version (compact strings/arrays/bytes, tagged fields).
const FIRST_FLEXIBLE: i16 = 12;
/// First version that addresses topics by id instead of name.
const FIRST_TOPIC_ID: i16 = 13;

/// Why a Fetch response could not be encoded. Every variant is a broker bug or an impossible size;
/// the caller should log it and close the connection (there is no well-formed answer to send).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("Fetch version {0} is outside {MIN_VERSION}..={MAX_VERSION}")]
    UnsupportedVersion(i16),
    /// A non-ignorable field (Kafka's schema term) holds a non-default value that the version
    /// cannot carry: `session_id` below v7, `preferred_read_replica` below v11. Kafka's own
    /// encoder refuses these rather than silently dropping them, and so do we.
    #[error("field {field} is set but Fetch v{version} cannot carry it")]
    FieldNotSupported { field: &'static str, version: i16 },
    #[error("{what} is too long to encode ({len})")]
    TooLong { what: &'static str, len: usize },
}

/// One partition of a Fetch answer. Owned by the fetch handler while it builds the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartitionData {
    pub partition_index: i32,
    /// Kafka error code for this partition; 0 when records (or no records) are returned normally.
    pub error_code: i16,
    pub high_watermark: i64,
    /// -1 when unknown.
    pub last_stable_offset: i64,
    /// -1 when unknown; not sent below v5.
    pub log_start_offset: i64,
    /// `(producer_id, first_offset)` of aborted transactions in range (read_committed fetches).
    /// `None` encodes as a null array, which is what Kafka sends for read_uncommitted.
    pub aborted_transactions: Option<Vec<(i64, i64)>>,
    /// -1 unless the broker directs the consumer to a follower; must be -1 below v11.
    pub preferred_read_replica: i32,
    /// Record batches exactly as read from the log (bytes or a file range), spliced into the
    /// output without copying. `None` encodes as null; `Some(empty)` as a zero-length record set.
    pub records: Option<Records>,
    /// `(epoch, end_offset)`: the DivergingEpoch tagged field (v12+) of an answer to a follower
    /// whose last fetched epoch ends earlier in this log; `None` leaves it out (Kafka's default
    /// -1/-1 is never written either).
    pub diverging_epoch: Option<(i32, i64)>,
}

/// One topic of a Fetch answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopicData {
    /// Sent in v4..=12 only.
    pub topic: TopicName,
    /// Sent in v13+ only.
    pub topic_id: Uuid,
    pub partitions: Vec<FetchPartitionData>,
}

/// The body of a Fetch response. Plain data; `Send + Sync`, cheap to clone (records are `Bytes`
/// or file handles).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponseData {
    pub throttle_time_ms: i32,
    /// Top-level error (v7+; not sent below).
    pub error_code: i16,
    /// Fetch session id (KIP-227), 0 for none; must be 0 below v7.
    pub session_id: i32,
    pub responses: Vec<FetchTopicData>,
}

/// Sum of the chunk lengths: the number of bytes a vectored write of `chunks` sends.
pub fn total_len(chunks: &[Chunk]) -> usize {
    chunks.iter().map(Chunk::len).sum()
}

/// Encodes the response BODY (no size prefix, no response header) for `version` and appends it to
/// `out` as chunks whose concatenation is the body. Records appear as their own chunks (same
/// allocation or file range, no copy); metadata is written into one `BytesMut` and split off between them. Empty
/// chunks are never pushed.
///
/// Returns the total body length (the sum of the appended chunks). On `Err`, `out` is left as it
/// was on entry.
pub fn encode_fetch_response(
    resp: &FetchResponseData,
    version: i16,
    out: &mut Vec<Chunk>,
) -> Result<usize, EncodeError> {
    let start = out.len();
    let result = Encoder::new(version, out).and_then(|mut enc| {
        enc.response(resp)?;
        enc.finish()
    });
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Writes one body into `out`. `meta` holds metadata not yet pushed as a chunk.
struct Encoder<'a> {
    version: i16,
    flexible: bool,
    meta: BytesMut,
    out: &'a mut Vec<Chunk>,
    total: usize,
}

impl<'a> Encoder<'a> {
    fn new(version: i16, out: &'a mut Vec<Chunk>) -> Result<Self, EncodeError> {
        if !(MIN_VERSION..=MAX_VERSION).contains(&version) {
            return Err(EncodeError::UnsupportedVersion(version));
        }
        Ok(Encoder {
            version,
            flexible: version >= FIRST_FLEXIBLE,
            // Enough for the top level and a few partitions; grows as needed.
            meta: BytesMut::with_capacity(256),
            out,
            total: 0,
        })
    }

    fn response(&mut self, resp: &FetchResponseData) -> Result<(), EncodeError> {
        self.meta.put_i32(resp.throttle_time_ms);
        if self.version >= 7 {
            self.meta.put_i16(resp.error_code);
            self.meta.put_i32(resp.session_id);
        } else if resp.session_id != 0 {
            return Err(self.not_supported("session_id"));
        }
        self.array_len(Some(resp.responses.len()), "topics array")?;
        for topic in &resp.responses {
            self.topic(topic)?;
        }
        // Top-level tagged fields: node_endpoints (v16+, tag 0) is left out.
        self.no_tagged_fields();
        Ok(())
    }

    fn topic(&mut self, topic: &FetchTopicData) -> Result<(), EncodeError> {
        if self.version < FIRST_TOPIC_ID {
            self.string(topic.topic.as_str())?;
        } else {
            self.meta.put_slice(topic.topic_id.as_bytes());
        }
        self.array_len(Some(topic.partitions.len()), "partitions array")?;
        for partition in &topic.partitions {
            self.partition(partition)?;
        }
        self.no_tagged_fields();
        Ok(())
    }

    fn partition(&mut self, p: &FetchPartitionData) -> Result<(), EncodeError> {
        self.meta.put_i32(p.partition_index);
        self.meta.put_i16(p.error_code);
        self.meta.put_i64(p.high_watermark);
        self.meta.put_i64(p.last_stable_offset);
        if self.version >= 5 {
            self.meta.put_i64(p.log_start_offset);
        }
        let aborted = p.aborted_transactions.as_deref();
        self.array_len(aborted.map(<[_]>::len), "aborted transactions array")?;
        for &(producer_id, first_offset) in aborted.unwrap_or_default() {
            self.meta.put_i64(producer_id);
            self.meta.put_i64(first_offset);
            // Each AbortedTransaction is a struct with its own (empty) tagged fields.
            self.no_tagged_fields();
        }
        if self.version >= 11 {
            self.meta.put_i32(p.preferred_read_replica);
        } else if p.preferred_read_replica != -1 {
            return Err(self.not_supported("preferred_read_replica"));
        }
        self.records(p.records.as_ref())?;
        // Partition tagged fields: diverging_epoch (tag 0) when set; current_leader and
        // snapshot_id are left out.
        match p.diverging_epoch {
            Some((epoch, end_offset)) if self.flexible => {
                // One field: tag 0, size 13 (epoch i32, end_offset i64, its own empty tags).
                self.meta.put_u8(1);
                self.meta.put_u8(0);
                self.meta.put_u8(13);
                self.meta.put_i32(epoch);
                self.meta.put_i64(end_offset);
                self.meta.put_u8(0);
            }
            Some(_) => return Err(self.not_supported("diverging_epoch")),
            None => self.no_tagged_fields(),
        }
        Ok(())
    }

    /// Writes the length prefix into `meta`, then pushes `meta` and the records as chunks.
    fn records(&mut self, records: Option<&Records>) -> Result<(), EncodeError> {
        let Some(records) = records else {
            if self.flexible {
                self.meta.put_u8(0);
            } else {
                self.meta.put_i32(-1);
            }
            return Ok(());
        };
        let len = records.len();
        if self.flexible {
            let n = u32::try_from(len)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or(EncodeError::TooLong {
                    what: "records",
                    len,
                })?;
            self.uvarint(n);
        } else {
            let n = i32::try_from(len).map_err(|_| EncodeError::TooLong {
                what: "records",
                len,
            })?;
            self.meta.put_i32(n);
        }
        if !records.is_empty() {
            self.flush_meta();
            self.total += len;
            // A refcount bump: the chunk points into the log's buffer or names its file range.
            self.out.push(Chunk::from(records.clone()));
        }
        Ok(())
    }

    /// Non-nullable string: i16 length (v4..=11) or compact (v12).
    fn string(&mut self, s: &str) -> Result<(), EncodeError> {
        let len = s.len();
        if self.flexible {
            let n = u32::try_from(len)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or(EncodeError::TooLong {
                    what: "topic name",
                    len,
                })?;
            self.uvarint(n);
        } else {
            let n = i16::try_from(len).map_err(|_| EncodeError::TooLong {
                what: "topic name",
                len,
            })?;
            self.meta.put_i16(n);
        }
        self.meta.put_slice(s.as_bytes());
        Ok(())
    }

    /// Array count: i32 (-1 = null) or compact unsigned varint N+1 (0 = null).
    fn array_len(&mut self, len: Option<usize>, what: &'static str) -> Result<(), EncodeError> {
        match (len, self.flexible) {
            (None, true) => self.meta.put_u8(0),
            (None, false) => self.meta.put_i32(-1),
            (Some(len), true) => {
                let n = u32::try_from(len)
                    .ok()
                    .and_then(|n| n.checked_add(1))
                    .ok_or(EncodeError::TooLong { what, len })?;
                self.uvarint(n);
            }
            (Some(len), false) => {
                let n = i32::try_from(len).map_err(|_| EncodeError::TooLong { what, len })?;
                self.meta.put_i32(n);
            }
        }
        Ok(())
    }

    /// In flexible versions every struct ends with its tagged fields; we always send none.
    fn no_tagged_fields(&mut self) {
        if self.flexible {
            self.meta.put_u8(0);
        }
    }

    fn uvarint(&mut self, mut n: u32) {
        while n >= 0x80 {
            self.meta.put_u8((n as u8) | 0x80);
            n >>= 7;
        }
        self.meta.put_u8(n as u8);
    }

    /// Moves the pending metadata into its own chunk (no copy: `split` hands over the filled part
    /// of the same allocation and keeps the spare capacity for what follows).
    fn flush_meta(&mut self) {
        if !self.meta.is_empty() {
            self.total += self.meta.len();
            self.out.push(Chunk::Bytes(self.meta.split().freeze()));
        }
    }

    fn finish(mut self) -> Result<usize, EncodeError> {
        self.flush_meta();
        // The frame's size prefix is an i32; a larger body cannot be sent.
        if self.total > i32::MAX as usize {
            return Err(EncodeError::TooLong {
                what: "fetch response body",
                len: self.total,
            });
        }
        Ok(self.total)
    }

    fn not_supported(&self, field: &'static str) -> EncodeError {
        EncodeError::FieldNotSupported {
            field,
            version: self.version,
        }
    }
}

#[cfg(test)]
mod tests;
