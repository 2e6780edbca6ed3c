//! Record framing of a magic-2 batch (Kafka's `DefaultRecord`): the walk over the records of one
//! batch, from a slice (uncompressed) or from a decompressing stream.
//!
//! A record is `length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
//! keyLength varint | key | valueLength varint | value | headerCount varint | headers`, each header
//! `keyLength varint | key | valueLength varint | value`; a negative key or value length is null
//! (a header key may not be null). Varints are Kafka's zig-zag varints: at most 5 bytes for 32-bit
//! fields, 10 for the 64-bit timestamp delta.
//!
//! The walk allocates nothing: fields are decoded and key, value and header bytes skipped. It
//! stops at the first framing fault; the records actually present bound its work, never the
//! count the header claims.

/// Why the records of a batch could not be read. Every variant is Kafka's `InvalidRecordException`
/// (INVALID_RECORD) except where noted by the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("Incorrect declared batch size, premature EOF reached")]
    PrematureEof,
    #[error("Invalid record size: expected {expected} bytes in record payload, but instead the buffer has only {remaining} remaining bytes.")]
    RecordTooLong { expected: i64, remaining: usize },
    #[error("Invalid record size {0}")]
    NegativeRecordSize(i32),
    #[error("Found invalid record structure")]
    Structure,
    #[error("Invalid record size: expected to read {expected} bytes in record payload, but instead read {read}")]
    SizeMismatch { expected: usize, read: usize },
    #[error("Found invalid number of record headers {0}")]
    HeaderCount(i32),
    #[error("Invalid negative header key size {0}")]
    HeaderKeySize(i32),
    #[error("Incorrect declared batch size, records still remaining in file")]
    RecordsRemaining,
    #[error("Failed to decompress record stream ({codec}): {why}")]
    Codec { codec: &'static str, why: String },
    #[error("Decompressed record batch exceeds {limit} bytes")]
    TooLarge { limit: u64 },
}

/// What the checks need of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFields {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// Key length; negative is a null key.
    pub key_len: i32,
    /// Value length; negative is a null value.
    pub value_len: i32,
}

/// A source of record bytes. `None` / `false`: the input ended first.
pub(super) trait Input {
    fn byte(&mut self) -> Option<u8>;
    fn skip(&mut self, n: usize) -> bool;
}

/// An uncompressed record section (or one record's body within it).
pub(super) struct Slice<'a>(pub &'a [u8]);

impl Input for Slice<'_> {
    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    #[inline(always)]
    fn skip(&mut self, n: usize) -> bool {
        match self.0.get(n..) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }
}

/// One record's body of `left` bytes read from a stream.
struct Limited<'i, I: Input> {
    inner: &'i mut I,
    left: usize,
}

impl<I: Input> Input for Limited<'_, I> {
    #[inline]
    fn byte(&mut self) -> Option<u8> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.inner.byte()
    }
    #[inline]
    fn skip(&mut self, n: usize) -> bool {
        if n > self.left {
            return false;
        }
        self.left -= n;
        self.inner.skip(n)
    }
}

#[inline(always)]
fn unzigzag32(raw: u32) -> i32 {
    ((raw >> 1) as i32) ^ -((raw & 1) as i32)
}

/// Kafka's `readVarint`: `None` at the end of input or after a fifth continuation byte.
#[inline(always)]
pub(super) fn varint<I: Input>(r: &mut I) -> Option<i32> {
    let b = r.byte()?;
    if b < 0x80 {
        return Some(unzigzag32(b as u32));
    }
    let mut raw = (b & 0x7f) as u32;
    for shift in [7u32, 14, 21, 28] {
        let b = r.byte()?;
        raw |= ((b & 0x7f) as u32) << shift;
        if b < 0x80 {
            return Some(unzigzag32(raw));
        }
    }
    None
}

/// Kafka's `readVarlong`: at most 10 bytes.
#[inline(always)]
pub(super) fn varlong<I: Input>(r: &mut I) -> Option<i64> {
    let b = r.byte()?;
    if b < 0x80 {
        return Some(((b >> 1) as i64) ^ -((b & 1) as i64));
    }
    let mut raw = (b & 0x7f) as u64;
    let mut shift = 7u32;
    while shift < 70 {
        let b = r.byte()?;
        raw |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(((raw >> 1) as i64) ^ -((raw & 1) as i64));
        }
        shift += 7;
    }
    None
}

/// Skips a length-prefixed field of `len` bytes (negative: null, nothing to skip).
#[inline(always)]
fn skip_field<I: Input>(r: &mut I, len: i32) -> Result<(), Malformed> {
    if len > 0 && !r.skip(len as usize) {
        return Err(Malformed::Structure);
    }
    Ok(())
}

/// Decodes one record body (everything after its length) from `r`, which ends where the body
/// ends; the caller checks that it was consumed exactly.
#[inline(always)]
fn record_body<I: Input>(r: &mut I) -> Result<RecordFields, Malformed> {
    let _attributes = r.byte().ok_or(Malformed::Structure)?;
    let timestamp_delta = varlong(r).ok_or(Malformed::Structure)?;
    let offset_delta = varint(r).ok_or(Malformed::Structure)?;
    let key_len = varint(r).ok_or(Malformed::Structure)?;
    skip_field(r, key_len)?;
    let value_len = varint(r).ok_or(Malformed::Structure)?;
    skip_field(r, value_len)?;
    let headers = varint(r).ok_or(Malformed::Structure)?;
    if headers < 0 {
        return Err(Malformed::HeaderCount(headers));
    }
    // Each header takes at least two bytes, so a huge count ends at the record's end.
    for _ in 0..headers {
        let key = varint(r).ok_or(Malformed::Structure)?;
        if key < 0 {
            return Err(Malformed::HeaderKeySize(key));
        }
        skip_field(r, key)?;
        let value = varint(r).ok_or(Malformed::Structure)?;
        skip_field(r, value)?;
    }
    Ok(RecordFields {
        timestamp_delta,
        offset_delta,
        key_len,
        value_len,
    })
}

/// Kafka's `readVarint` at `b[*i..]`, with the one- and two-byte encodings (every length and
/// offset delta under 8192) decoded without a loop.
#[inline(always)]
fn varint_at(b: &[u8], i: &mut usize) -> Result<i32, Malformed> {
    let at = *i;
    let Some(&x) = b.get(at) else {
        return Err(Malformed::Structure);
    };
    if x < 0x80 {
        *i = at + 1;
        return Ok(unzigzag32(x as u32));
    }
    if let Some(&y) = b.get(at + 1) {
        if y < 0x80 {
            *i = at + 2;
            return Ok(unzigzag32((x & 0x7f) as u32 | (y as u32) << 7));
        }
    }
    let mut rest = Slice(&b[at..]);
    let v = varint(&mut rest).ok_or(Malformed::Structure)?;
    *i = b.len() - rest.0.len();
    Ok(v)
}

/// Kafka's `readVarlong` at `b[*i..]`, one-byte values without a loop.
#[inline(always)]
fn varlong_at(b: &[u8], i: &mut usize) -> Result<i64, Malformed> {
    let at = *i;
    if let Some(&x) = b.get(at) {
        if x < 0x80 {
            *i = at + 1;
            return Ok(((x >> 1) as i64) ^ -((x & 1) as i64));
        }
    }
    let mut rest = Slice(b.get(at..).unwrap_or_default());
    let v = varlong(&mut rest).ok_or(Malformed::Structure)?;
    *i = b.len() - rest.0.len();
    Ok(v)
}

/// Skips a field of `len` bytes at `i` (negative: null).
#[inline(always)]
fn skip_at(b: &[u8], i: usize, len: i32) -> Result<usize, Malformed> {
    let end = i + len.max(0) as usize;
    if end > b.len() {
        return Err(Malformed::Structure);
    }
    Ok(end)
}

/// [`record_body`] over one record's bytes `b` with a single index (the produce hot path):
/// the fields and how many bytes they took.
#[inline(always)]
fn record_body_at(b: &[u8]) -> Result<(RecordFields, usize), Malformed> {
    if b.is_empty() {
        return Err(Malformed::Structure);
    }
    let mut i = 1; // attributes
    let timestamp_delta = varlong_at(b, &mut i)?;
    let offset_delta = varint_at(b, &mut i)?;
    let key_len = varint_at(b, &mut i)?;
    i = skip_at(b, i, key_len)?;
    let value_len = varint_at(b, &mut i)?;
    i = skip_at(b, i, value_len)?;
    let headers = varint_at(b, &mut i)?;
    if headers < 0 {
        return Err(Malformed::HeaderCount(headers));
    }
    for _ in 0..headers {
        let key = varint_at(b, &mut i)?;
        if key < 0 {
            return Err(Malformed::HeaderKeySize(key));
        }
        i = skip_at(b, i, key)?;
        let value = varint_at(b, &mut i)?;
        i = skip_at(b, i, value)?;
    }
    let fields = RecordFields {
        timestamp_delta,
        offset_delta,
        key_len,
        value_len,
    };
    Ok((fields, i))
}

/// The smallest record: a one-byte length and six one-byte fields.
pub const MIN_RECORD_BYTES: usize = 7;

/// Walks the `count` records of an uncompressed record section, handing each to `on_record`
/// with its index. The section must hold exactly those records.
#[inline]
pub(super) fn walk_slice(
    section: &[u8],
    count: i32,
    mut on_record: impl FnMut(i32, &RecordFields),
) -> Result<(), Malformed> {
    // A claim the bytes cannot hold fails here, before any record is read.
    if count as usize > section.len() / MIN_RECORD_BYTES {
        return Err(Malformed::PrematureEof);
    }
    let mut rest = Slice(section);
    for index in 0..count {
        let len = varint(&mut rest).ok_or(Malformed::PrematureEof)?;
        if len < 0 {
            return Err(Malformed::NegativeRecordSize(len));
        }
        let len = len as usize;
        let Some(body) = rest.0.get(..len) else {
            return Err(Malformed::RecordTooLong {
                expected: len as i64,
                remaining: rest.0.len(),
            });
        };
        rest.0 = &rest.0[len..];
        let (fields, read) = record_body_at(body)?;
        if read != len {
            return Err(Malformed::SizeMismatch {
                expected: len,
                read,
            });
        }
        on_record(index, &fields);
    }
    if !rest.0.is_empty() {
        return Err(Malformed::RecordsRemaining);
    }
    Ok(())
}

/// A stream input that can tell whether it is exhausted (a decompressor).
pub(super) trait StreamInput: Input {
    /// True when no byte is left (reads ahead if needed).
    fn at_end(&mut self) -> bool;
}

/// Like [`walk_slice`] over a decompressing stream.
pub(super) fn walk_stream<S: StreamInput>(
    input: &mut S,
    count: i32,
    mut on_record: impl FnMut(i32, &RecordFields),
) -> Result<(), Malformed> {
    for index in 0..count {
        let len = varint(input).ok_or(Malformed::PrematureEof)?;
        if len < 0 {
            return Err(Malformed::NegativeRecordSize(len));
        }
        let len = len as usize;
        let mut body = Limited {
            inner: input,
            left: len,
        };
        let fields = record_body(&mut body)?;
        if body.left != 0 {
            return Err(Malformed::SizeMismatch {
                expected: len,
                read: len - body.left,
            });
        }
        on_record(index, &fields);
    }
    if !input.at_end() {
        return Err(Malformed::RecordsRemaining);
    }
    Ok(())
}
