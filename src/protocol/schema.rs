//! Kafka's message-schema primitives, classic and flexible (KIP-482), for the records the
//! coordinators keep in their internal topics (`group::records`, `txn::records`): a `Reader`
//! cursor and `put_*` writers over a `Vec<u8>`.
//!
//! The reader never panics: a length or count that runs past the buffer is `Truncated`.
//! This module performs no I/O.

use bytes::{BufMut, Bytes};

/// Why a primitive could not be read.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("record truncated")]
    Truncated,
    #[error("string is not UTF-8")]
    Utf8,
}

/// A cursor over Kafka's classic or flexible primitive encodings. Starts classic (record keys and
/// version prefixes are classic); `set_flexible` switches once the version is known.
pub struct Reader<'a> {
    buf: &'a [u8],
    flexible: bool,
}

impl<'a> Reader<'a> {
    /// A classic reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            flexible: false,
        }
    }

    /// Whether strings, arrays and bytes use the compact (flexible) encoding and tagged fields
    /// are present.
    pub fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// How many bytes are left (the position is the input's length minus this).
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SchemaError> {
        if self.buf.len() < n {
            return Err(SchemaError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SchemaError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn i8(&mut self) -> Result<i8, SchemaError> {
        Ok(self.take(1)?[0] as i8)
    }
    pub fn i16(&mut self) -> Result<i16, SchemaError> {
        Ok(i16::from_be_bytes(self.array()?))
    }
    pub fn i32(&mut self) -> Result<i32, SchemaError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    pub fn i64(&mut self) -> Result<i64, SchemaError> {
        Ok(i64::from_be_bytes(self.array()?))
    }
    pub fn uvarint(&mut self) -> Result<u32, SchemaError> {
        let mut v: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(SchemaError::Truncated)
    }
    /// Length of a string (`wide` false: i16) or bytes (`wide` true: i32) field; None for null.
    fn len(&mut self, wide: bool) -> Result<Option<usize>, SchemaError> {
        if self.flexible {
            let n = self.uvarint()?;
            Ok(if n == 0 { None } else { Some(n as usize - 1) })
        } else {
            let n = if wide {
                self.i32()?
            } else {
                self.i16()? as i32
            };
            Ok(if n < 0 { None } else { Some(n as usize) })
        }
    }
    /// A nullable string (classic or compact).
    pub fn nullable_string(&mut self) -> Result<Option<String>, SchemaError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => String::from_utf8(self.take(n)?.to_vec())
                .map(Some)
                .map_err(|_| SchemaError::Utf8),
        }
    }
    /// A non-nullable string: null is corrupt (`Truncated`).
    pub fn string(&mut self) -> Result<String, SchemaError> {
        self.nullable_string()?.ok_or(SchemaError::Truncated)
    }
    /// A string where null reads as empty (lenient reading of older writers).
    pub fn string_or_empty(&mut self) -> Result<String, SchemaError> {
        Ok(self.nullable_string()?.unwrap_or_default())
    }
    /// A bytes field (i32 length or compact); null reads as empty.
    pub fn bytes(&mut self) -> Result<Bytes, SchemaError> {
        match self.len(true)? {
            None => Ok(Bytes::new()),
            Some(n) => Ok(Bytes::copy_from_slice(self.take(n)?)),
        }
    }
    /// An array length; None for a null array. Each element takes at least one byte, so a count
    /// larger than what is left is corrupt.
    pub fn array_len(&mut self) -> Result<Option<usize>, SchemaError> {
        let n = if self.flexible {
            match self.uvarint()? {
                0 => None,
                n => Some(n as usize - 1),
            }
        } else {
            match self.i32()? {
                n if n < 0 => None,
                n => Some(n as usize),
            }
        };
        if n.is_some_and(|n| n > self.buf.len()) {
            return Err(SchemaError::Truncated);
        }
        Ok(n)
    }
    /// Reads the tagged fields (none in the classic encoding); calls `f(tag, data)` for each.
    pub fn tagged_fields(
        &mut self,
        mut f: impl FnMut(u32, &[u8]) -> Result<(), SchemaError>,
    ) -> Result<(), SchemaError> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            f(tag, self.take(size)?)?;
        }
        Ok(())
    }
    /// Reads and ignores the tagged fields.
    pub fn skip_tagged_fields(&mut self) -> Result<(), SchemaError> {
        self.tagged_fields(|_, _| Ok(()))
    }
}

/// An unsigned varint (compact lengths, tagged-field counts, tags and sizes).
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A classic string: i16 length + UTF-8.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    out.put_i16(s.len() as i16);
    out.extend_from_slice(s.as_bytes());
}

/// A classic nullable string (length -1 for null).
pub fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.put_i16(-1),
    }
}

/// A compact string: uvarint length + 1, then UTF-8.
pub fn put_compact_str(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

/// Classic bytes: i32 length + the bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_and_compact_strings_round_trip() {
        let mut out = Vec::new();
        put_str(&mut out, "ab");
        put_nullable_str(&mut out, None);
        put_bytes(&mut out, b"xyz");
        let mut r = Reader::new(&out);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.nullable_string().unwrap(), None);
        assert_eq!(r.bytes().unwrap(), Bytes::from_static(b"xyz"));
        assert!(r.is_empty());

        let mut out = Vec::new();
        put_compact_str(&mut out, "topic");
        put_uvarint(&mut out, 0); // null string
        put_uvarint(&mut out, 300);
        let mut r = Reader::new(&out);
        r.set_flexible(true);
        assert_eq!(r.string().unwrap(), "topic");
        assert_eq!(r.string(), Err(SchemaError::Truncated));
        assert_eq!(r.uvarint().unwrap(), 300);
    }

    #[test]
    fn null_string_is_empty_when_lenient() {
        let mut r = Reader::new(&[0xff, 0xff]);
        assert_eq!(r.string_or_empty().unwrap(), "");
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        assert_eq!(Reader::new(&[0]).i16(), Err(SchemaError::Truncated));
        assert_eq!(
            Reader::new(&[0, 5, b'a']).string(),
            Err(SchemaError::Truncated)
        );
        assert_eq!(Reader::new(&[0, 1, 0xff]).string(), Err(SchemaError::Utf8));
        // A count larger than the bytes left.
        assert_eq!(
            Reader::new(&[0, 0, 0, 9, 1]).array_len(),
            Err(SchemaError::Truncated)
        );
        assert_eq!(
            Reader::new(&[0xff; 6]).uvarint(),
            Err(SchemaError::Truncated)
        );
        let mut r = Reader::new(&[1, 0, 5, 1]);
        r.set_flexible(true);
        assert_eq!(r.skip_tagged_fields(), Err(SchemaError::Truncated));
    }
}
