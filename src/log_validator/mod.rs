//! Kafka's `LogValidator` for batches clients produce: what a batch must be, beyond a sound header
//! and CRC (`record::validate_batch`), before the log may store it.
//!
//! - Batch rules (Kafka's `validateBatch` for client appends): the offset range the header
//!   claims (`lastOffsetDelta + 1`) equals `recordCount`, the count is positive, and an idempotent
//!   batch has a sequence. So one produce can never take more offsets than it holds records.
//! - Record framing (Kafka's `DefaultRecord` / `DefaultRecordBatch` readers): every record parses,
//!   exactly `recordCount` of them fill the record section, nothing is left over. Compressed
//!   sections (gzip, snappy, lz4, zstd) are decompressed as a stream into a bounded buffer, under a
//!   cap on the decompressed total (`Rules::max_decompressed_bytes`).
//! - Record rules (Kafka's `validateRecord`), reported per record as Produce `record_errors`
//!   (KIP-467): offset deltas are `0..recordCount` in order; records of compacted topics have
//!   keys; CreateTime timestamps lie within `message.timestamp.before.max.ms` /
//!   `message.timestamp.after.max.ms` of now; clients do not send LogAppendTime batches.
//!
//! Codes and messages, against Kafka 4.1.2 (probed with `scripts/kafka-reference`): count and
//! offset-range faults are INVALID_RECORD in both; record errors (compacted keys, timestamps) carry
//! Kafka's exact `record_errors` and `error_message`. Where Sluice differs: (1) Kafka accepts
//! uncompressed records whose offset deltas are out of order (stored as sent) and fails compressed
//! ones; Sluice never rewrites a client's records, so it refuses both (INVALID_RECORD, per record).
//! (2) Kafka answers UNKNOWN_SERVER_ERROR for bytes its record reader or codec cannot decode
//! (random bytes with a valid CRC, undecodable or truncated compressed sections); Sluice answers
//! INVALID_RECORD, non-retriable like Kafka's answer but naming the fault. (3) Kafka gives batch-level
//! faults no `error_message`; Sluice gives the message its reader would have thrown.
//!
//! Not in `record`, whose parser also serves recovery and followers, where batches with offset
//! gaps (compaction) are valid. Pure: no I/O, no clock (`now_ms` is a rule), no state; memory
//! per call is bounded by the decompression buffers and at most [`MAX_RECORD_ERRORS`] errors.

mod decompress;
mod walk;

#[cfg(test)]
mod tests;

use crate::config::TimestampType;
use crate::record::{BatchHeader, ATTR_TIMESTAMP_TYPE_LOG_APPEND, BATCH_HEADER_LEN};

pub use walk::{Malformed, RecordFields, MIN_RECORD_BYTES};

/// Record errors kept per batch (all are counted; the rest are summarised by the count). Kafka
/// keeps every one; a 1 MiB batch of minimal records could otherwise answer ~20 MB of messages.
pub const MAX_RECORD_ERRORS: usize = 1000;
/// Kafka's `RecordBatch.NO_TIMESTAMP`.
const NO_TIMESTAMP: i64 = -1;

/// What a partition's batch is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The partition, as Kafka names it in messages (`topic-partition`).
    pub topic: &'a str,
    pub partition: i32,
    /// `cleanup.policy` contains `compact`: every record needs a key.
    pub compacted: bool,
    /// The topic's `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` (CreateTime only).
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub now_ms: i64,
    /// Cap on a compressed batch's decompressed records ([`decompressed_limit`]).
    pub max_decompressed_bytes: u64,
}

impl<'a> Rules<'a> {
    /// Partition 0 of `topic` under Kafka's default topic configs (delete policy, CreateTime, no
    /// lower bound on timestamps, at most one hour ahead of `now_ms`) and a 64 MiB decompressed
    /// cap ([`decompressed_limit`] of the default `max.message.bytes`): for tests and benchmarks.
    pub fn defaults(topic: &'a str, now_ms: i64) -> Rules<'a> {
        Rules {
            topic,
            partition: 0,
            compacted: false,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            now_ms,
            max_decompressed_bytes: 64 << 20,
        }
    }
}

/// The decompressed size a compressed batch may reach: 64 times `max.message.bytes`, at least
/// 64 MiB and at most 1 GiB. Only CPU time depends on it (the stream is never held).
pub fn decompressed_limit(max_message_bytes: i32) -> u64 {
    (max_message_bytes.max(0) as u64 * 64).clamp(64 << 20, 1 << 30)
}

/// Which Kafka error a refusal is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// INVALID_RECORD (87).
    InvalidRecord,
    /// INVALID_TIMESTAMP (32).
    InvalidTimestamp,
}

/// One refused record (Produce `record_errors`: `batch_index`, `batch_index_error_message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Why a batch was refused: the partition's error, its message, and the records at fault (empty
/// when the batch as a whole is malformed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    pub message: String,
    pub record_errors: Vec<RecordError>,
}

impl Refusal {
    fn batch(message: String) -> Refusal {
        Refusal {
            reason: Reason::InvalidRecord,
            message,
            record_errors: Vec::new(),
        }
    }
}

/// Validates the one whole batch `batch` (`header` is its parsed, CRC-checked header and
/// `batch.len() == header.total_size()`) as Kafka validates a client's append.
pub fn validate(batch: &[u8], header: &BatchHeader, rules: &Rules<'_>) -> Result<(), Refusal> {
    check_batch(header, rules)?;
    let section = batch
        .get(BATCH_HEADER_LEN..header.total_size())
        .ok_or_else(|| Refusal::batch(Malformed::PrematureEof.to_string()))?;
    // Pass 1: the framing, and the record rules folded into one flag without a branch per rule.
    let mut screen = Screen::new(header, rules);
    walk_records(header, section, rules, |i, f| screen.record(i, f))?;
    if !screen.suspect {
        return Ok(());
    }
    // Pass 2, only for a batch that breaks (or may break) a record rule: name its records.
    let mut checks = RecordChecks::new(header, rules);
    walk_records(header, section, rules, |i, f| checks.record(i, f))?;
    checks.finish()
}

/// Walks the records of `section` (decompressing it if the batch is compressed).
fn walk_records(
    header: &BatchHeader,
    section: &[u8],
    rules: &Rules<'_>,
    on_record: impl FnMut(i32, &RecordFields),
) -> Result<(), Refusal> {
    let walked = match header.compression() {
        0 => walk::walk_slice(section, header.record_count, on_record),
        codec => match decompress::open(codec, section, rules.max_decompressed_bytes) {
            Err(e) => Err(e),
            Ok(mut stream) => {
                let walked = walk::walk_stream(&mut stream, header.record_count, on_record);
                // A codec fault or the cap ends the stream early: it is the cause.
                match stream.fault.take() {
                    Some(fault) => Err(fault),
                    None => walked,
                }
            }
        },
    };
    walked.map_err(|e| Refusal::batch(format!("{e} in topic partition {}", tp(rules))))
}

/// The record rules as one flag: set when some record may break one ([`RecordChecks`] decides).
/// A batch claiming LogAppendTime always goes to the full checks.
struct Screen {
    base_timestamp: i64,
    now_ms: i64,
    before: i64,
    after: i64,
    compacted: bool,
    create_time: bool,
    suspect: bool,
}

impl Screen {
    fn new(h: &BatchHeader, rules: &Rules<'_>) -> Screen {
        Screen {
            base_timestamp: h.base_timestamp,
            now_ms: rules.now_ms,
            before: rules.timestamp_before_max_ms,
            after: rules.timestamp_after_max_ms,
            compacted: rules.compacted,
            create_time: rules.timestamp_type == TimestampType::CreateTime,
            suspect: h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND != 0,
        }
    }

    #[inline(always)]
    fn record(&mut self, index: i32, f: &RecordFields) {
        let timestamp = self.base_timestamp.wrapping_add(f.timestamp_delta);
        let diff = self.now_ms.wrapping_sub(timestamp);
        let out_of_range = (diff > self.before) | (diff.wrapping_neg() > self.after);
        let bad_timestamp = self.create_time & (timestamp != NO_TIMESTAMP) & out_of_range;
        self.suspect |=
            (f.offset_delta != index) | (self.compacted & (f.key_len < 0)) | bad_timestamp;
    }
}

fn tp(rules: &Rules<'_>) -> String {
    format!("{}-{}", rules.topic, rules.partition)
}

/// Kafka's `validateBatch` for client appends (base offset 0 is checked by the caller).
fn check_batch(h: &BatchHeader, rules: &Rules<'_>) -> Result<(), Refusal> {
    let last = h.last_offset_delta as i64;
    let count_from_offsets = last + 1;
    if count_from_offsets <= 0 {
        return Err(Refusal::batch(format!(
            "Batch has an invalid offset range: [0, {last}] in topic partition {}",
            tp(rules)
        )));
    }
    if h.record_count <= 0 {
        return Err(Refusal::batch(format!(
            "Invalid reported count for record batch: {} in topic partition {}",
            h.record_count,
            tp(rules)
        )));
    }
    if count_from_offsets != h.record_count as i64 {
        return Err(Refusal::batch(format!(
            "Inconsistent batch offset range [0, {last}] and count of records {} in topic partition {}",
            h.record_count,
            tp(rules)
        )));
    }
    if h.has_producer_id() && h.base_sequence < 0 {
        return Err(Refusal::batch(format!(
            "Invalid sequence number {} in record batch with producerId {} in topic partition {}",
            h.base_sequence,
            h.producer_id,
            tp(rules)
        )));
    }
    Ok(())
}

/// The per-record rules, fed one record at a time by the walk.
struct RecordChecks<'r> {
    rules: &'r Rules<'r>,
    base_timestamp: i64,
    /// Set for a batch that claims LogAppendTime: its records' timestamp is the max timestamp.
    log_append_time: Option<i64>,
    create_time: bool,
    /// `now - before` and `now + after`, as Kafka computes them (wrapping `long`s).
    lower: i64,
    upper: i64,
    errors: Vec<RecordError>,
    total: usize,
    timestamp_errors: bool,
}

impl<'r> RecordChecks<'r> {
    fn new(h: &BatchHeader, rules: &'r Rules<'r>) -> RecordChecks<'r> {
        RecordChecks {
            rules,
            base_timestamp: h.base_timestamp,
            log_append_time: (h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND != 0)
                .then_some(h.max_timestamp),
            create_time: rules.timestamp_type == TimestampType::CreateTime,
            lower: rules.now_ms.wrapping_sub(rules.timestamp_before_max_ms),
            upper: rules.now_ms.wrapping_add(rules.timestamp_after_max_ms),
            errors: Vec::new(),
            total: 0,
            timestamp_errors: false,
        }
    }

    #[inline(always)]
    fn record(&mut self, index: i32, f: &RecordFields) {
        if f.offset_delta != index {
            self.fail(
                index,
                Reason::InvalidRecord,
                format_args!(
                    "Record at index {index} has offset delta {}, expected {index} in topic partition {}",
                    f.offset_delta,
                    tp(self.rules)
                ),
            );
            return;
        }
        if self.rules.compacted && f.key_len < 0 {
            self.fail(
                index,
                Reason::InvalidRecord,
                format_args!(
                    "Compacted topic cannot accept message without key in topic partition {}",
                    tp(self.rules)
                ),
            );
            return;
        }
        let timestamp = match self.log_append_time {
            Some(t) => t,
            None => self.base_timestamp.wrapping_add(f.timestamp_delta),
        };
        if self.create_time && timestamp != NO_TIMESTAMP {
            if self.out_of_range(timestamp) {
                let (lower, upper) = (self.lower, self.upper);
                self.fail(
                    index,
                    Reason::InvalidTimestamp,
                    format_args!(
                        "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{lower}, {upper}]",
                        f.offset_delta
                    ),
                );
            }
        } else if self.log_append_time.is_some() {
            self.fail(
                index,
                Reason::InvalidTimestamp,
                format_args!(
                    "Invalid timestamp type in message DefaultRecord(offset={}, timestamp={timestamp}, key={} bytes, value={} bytes). Producer should not set timestamp type to LogAppendTime.",
                    f.offset_delta,
                    f.key_len.max(0),
                    f.value_len.max(0)
                ),
            );
        }
    }

    /// Kafka's `recordHasInvalidTimestamp`.
    #[inline(always)]
    fn out_of_range(&self, timestamp: i64) -> bool {
        let diff = self.rules.now_ms.wrapping_sub(timestamp);
        diff > self.rules.timestamp_before_max_ms
            || diff.wrapping_neg() > self.rules.timestamp_after_max_ms
    }

    #[cold]
    fn fail(&mut self, batch_index: i32, reason: Reason, message: std::fmt::Arguments<'_>) {
        self.total += 1;
        self.timestamp_errors |= reason == Reason::InvalidTimestamp;
        if self.errors.len() < MAX_RECORD_ERRORS {
            self.errors.push(RecordError {
                batch_index,
                message: message.to_string(),
            });
        }
    }

    /// Kafka's `processRecordErrors`: any timestamp error makes the batch INVALID_TIMESTAMP.
    fn finish(self) -> Result<(), Refusal> {
        if self.total == 0 {
            return Ok(());
        }
        if self.timestamp_errors {
            return Err(Refusal {
                reason: Reason::InvalidTimestamp,
                message: "One or more records have been rejected due to invalid timestamp".into(),
                record_errors: self.errors,
            });
        }
        let shown: Vec<String> = self
            .errors
            .iter()
            .take(3)
            .map(|e| {
                format!(
                    "RecordError(batchIndex={}, message='{}')",
                    e.batch_index, e.message
                )
            })
            .collect();
        Err(Refusal {
            reason: Reason::InvalidRecord,
            message: format!(
                "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                self.total,
                shown.join(", ")
            ),
            record_errors: self.errors,
        })
    }
}
