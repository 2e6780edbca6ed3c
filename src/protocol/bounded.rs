//! Request-body decoding through `kafka-protocol` with array counts bounded by the bytes that are
//! actually there, before the crate sizes a `Vec` from them.
//!
//! `kafka-protocol` 0.18 (the newest release) reads an array count and calls
//! `Vec::with_capacity(count)` before it reads an element, and sizes a `Vec<u8>` field from its
//! length the same way: a 100-byte body claiming 2^31-1 elements asks for hundreds of GiB. Every
//! element and every byte takes at least one byte on the wire, so a count larger than the bytes
//! left in the frame is invalid whatever the schema says. The crate's decoders are generic over the
//! buffer, so [`decode`] hands them a [`BoundedBuf`] that knows no schema but sees every count as
//! it is read:
//!
//! - Flexible versions encode every count and length as an unsigned varint (Kafka's generator uses
//!   compact arrays, strings and bytes there), and varints are the only values read byte by byte
//!   besides booleans. At every byte-by-byte read, the varint that would start there is checked: one
//!   whose value exceeds the remaining bytes by more than one (compact encodings store count + 1)
//!   fails the read, so the crate never allocates from it. Values up to [`SMALL`] always pass: they
//!   cannot cause a large allocation, and tag numbers are plain values.
//! - Classic versions encode counts and `bytes` lengths as `int32`, which plain fields share
//!   (`timeout_ms`...), so an `int32` larger than `max(remaining + 1, SMALL)` is read as that
//!   bound instead: as a count it stays impossible and the decode fails after a small allocation;
//!   as a plain field it is wrong, so when any value was bounded and the decode succeeded, the
//!   body is decoded a second time with the real values, which are then known to be safe (the
//!   structure of a body depends on its counts and lengths only, never on plain values).
//!
//! What is refused that Kafka would read: a boolean byte >= 0x80 (Kafka's clients write 0 or 1)
//! whose bytes read as a large varint. `int16` string lengths
//! are checked by the crate before it copies. `alloc_guard` stays as the backstop.
//!
//! Performs no I/O. Flexible bodies and classic bodies without large `int32` values are decoded
//! once; a classic body with one (an old client's produce timeout larger than its body) twice.

use std::ops::Range;

use bytes::{Buf, Bytes};
use kafka_protocol::protocol::buf::ByteBuf;
use kafka_protocol::protocol::Decodable;

/// Counts and lengths up to this value always pass (at most this many elements are allocated).
pub const SMALL: u64 = 1024;

/// Decodes a request body of `version` (`flexible`: the version uses compact encodings) from
/// `frame`, refusing any count or length larger than the bytes left. On success `frame` is
/// advanced past the body, as the crate's own decode would leave it.
pub fn decode<T: Decodable>(frame: &mut Bytes, version: i16, flexible: bool) -> anyhow::Result<T> {
    let mut buf = BoundedBuf::new(frame.clone(), flexible);
    let first = T::decode(&mut buf, version);
    if let Some(refused) = buf.refused {
        anyhow::bail!(
            "a count or length of {} exceeds the {} bytes left in the request",
            refused.value,
            refused.available
        );
    }
    let value = first?;
    if !buf.bounded {
        *frame = buf.inner;
        return Ok(value);
    }
    T::decode(frame, version)
}

/// A count or length the buffer refused.
#[derive(Debug, Clone, Copy)]
struct Refused {
    value: u64,
    available: usize,
}

/// A `Bytes` reader for the crate's decoders that bounds counts by the bytes left (see the module
/// doc). Owned by one decode call; not shared.
pub struct BoundedBuf {
    inner: Bytes,
    /// Classic version: `int32` values are bounded (flexible versions have no `int32` counts).
    bound_int32: bool,
    /// An `int32` was read as its bound instead of its value.
    bounded: bool,
    refused: Option<Refused>,
}

impl BoundedBuf {
    pub fn new(inner: Bytes, flexible: bool) -> BoundedBuf {
        BoundedBuf {
            inner,
            bound_int32: !flexible,
            bounded: false,
            refused: None,
        }
    }
}

impl Buf for BoundedBuf {
    fn remaining(&self) -> usize {
        self.inner.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.inner.chunk()
    }

    fn advance(&mut self, cnt: usize) {
        self.inner.advance(cnt)
    }

    /// Only varints and booleans are read byte by byte. Whatever this byte is, the varint that
    /// would start here is checked (as the crate assembles it: at most 5 bytes, 32 bits), so every
    /// real varint is checked at its first byte. A suffix of a valid varint is never larger than
    /// it, so only a boolean byte >= 0x80 can be refused wrongly.
    fn try_get_u8(&mut self) -> Result<u8, bytes::TryGetError> {
        if let Some((value, len)) = varint_at(self.inner.chunk()) {
            let available = self.inner.remaining() - len;
            if value > SMALL && value - 1 > available as u64 {
                self.refused = Some(Refused { value, available });
                return Err(bytes::TryGetError {
                    requested: usize::try_from(value).unwrap_or(usize::MAX),
                    available,
                });
            }
        }
        self.inner.try_get_u8()
    }

    fn try_get_i32(&mut self) -> Result<i32, bytes::TryGetError> {
        let v = self.inner.try_get_i32()?;
        if !self.bound_int32 {
            return Ok(v);
        }
        let bound = (self.inner.remaining() as u64 + 1).max(SMALL);
        if v as i64 > bound as i64 {
            self.bounded = true;
            return Ok(bound.min(i32::MAX as u64) as i32);
        }
        Ok(v)
    }
}

impl ByteBuf for BoundedBuf {
    fn peek_bytes(&mut self, r: Range<usize>) -> Bytes {
        self.inner.slice(r)
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        self.inner.split_to(size)
    }
}

/// The unsigned varint at the start of `bytes` as `kafka-protocol` reads it (at most 5 bytes, the
/// fifth byte's high bits dropped) and its length; `None` when `bytes` ends inside it (the crate's
/// read then fails without allocating).
fn varint_at(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u32 = 0;
    for (i, &b) in bytes.iter().take(5).enumerate() {
        value |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 || i == 4 {
            return Some((value as u64, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests;
