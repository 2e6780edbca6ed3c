//! Request-header parsing with guards.
//!
//! The crate's header decoder panics on frames shorter than four bytes; this parser never panics:
//! every malformed header is a [`HeaderError`] and the connection is closed by the caller.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::ApiKey;

/// The decoded request header. `client_id` is kept as raw bytes (logged lossily).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<Bytes>,
}

impl RequestHeader {
    pub fn client_id_lossy(&self) -> String {
        match &self.client_id {
            Some(b) => String::from_utf8_lossy(b).into_owned(),
            None => String::new(),
        }
    }
}

/// Why a request header could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("frame of {0} bytes is shorter than a request header")]
    TooShort(usize),
    #[error("client id length {0} is invalid")]
    BadClientId(i16),
    #[error("malformed tagged fields in request header")]
    BadTaggedFields,
}

/// Reads the request header at the start of `frame` and advances `frame` past it. Handles header v1
/// (non-flexible) and v2 (flexible: the client id stays a non-compact string, then tagged fields).
/// `flexible` says which; it depends on the API and version (see [`header_is_flexible`]).
pub fn parse_request_header(frame: &mut Bytes) -> Result<(i16, i16, i32), HeaderError> {
    if frame.len() < 8 {
        return Err(HeaderError::TooShort(frame.len()));
    }
    let api_key = frame.get_i16();
    let api_version = frame.get_i16();
    let correlation_id = frame.get_i32();
    Ok((api_key, api_version, correlation_id))
}

/// Reads the client id and (for flexible headers) the tagged fields that follow the fixed part.
pub fn parse_header_rest(frame: &mut Bytes, flexible: bool) -> Result<Option<Bytes>, HeaderError> {
    if frame.len() < 2 {
        return Err(HeaderError::TooShort(frame.len()));
    }
    let len = frame.get_i16();
    let client_id = match len {
        -1 => None,
        n if n >= 0 && (n as usize) <= frame.len() => Some(frame.split_to(n as usize)),
        n => return Err(HeaderError::BadClientId(n)),
    };
    if flexible {
        skip_tagged_fields(frame)?;
    }
    Ok(client_id)
}

/// Whether the request header of this API and version is v2 (flexible).
pub fn header_is_flexible(api_key: ApiKey, api_version: i16) -> bool {
    api_key.request_header_version(api_version) >= 2
}

fn read_uvarint(buf: &mut Bytes) -> Result<u32, HeaderError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return Err(HeaderError::BadTaggedFields);
        }
        let b = buf.get_u8();
        value |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(HeaderError::BadTaggedFields)
}

fn skip_tagged_fields(buf: &mut Bytes) -> Result<(), HeaderError> {
    let count = read_uvarint(buf)?;
    for _ in 0..count {
        let _tag = read_uvarint(buf)?;
        let size = read_uvarint(buf)? as usize;
        if size > buf.len() {
            return Err(HeaderError::BadTaggedFields);
        }
        buf.advance(size);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_frames_are_errors_not_panics() {
        for n in 0..8 {
            let mut b = Bytes::from(vec![0u8; n]);
            assert_eq!(parse_request_header(&mut b), Err(HeaderError::TooShort(n)));
        }
    }

    #[test]
    fn header_v2_with_tagged_field_is_skipped() {
        let mut raw = vec![0, 18, 0, 3, 0, 0, 0, 9];
        raw.extend_from_slice(&[0, 2, b'i', b'd']);
        raw.extend_from_slice(&[1, 5, 2, 0xaa, 0xbb]); // one tagged field of 2 bytes
        raw.push(0x42);
        let mut b = Bytes::from(raw);
        assert_eq!(parse_request_header(&mut b).unwrap(), (18, 3, 9));
        let id = parse_header_rest(&mut b, true).unwrap();
        assert_eq!(id.as_deref(), Some(&b"id"[..]));
        assert_eq!(&b[..], &[0x42]);
    }

    #[test]
    fn client_id_longer_than_frame_is_rejected() {
        let mut b = Bytes::from(vec![0x7f, 0x00]);
        assert_eq!(
            parse_header_rest(&mut b, false),
            Err(HeaderError::BadClientId(0x7f00))
        );
        let mut b = Bytes::from(vec![0xff, 0xfe]);
        assert_eq!(
            parse_header_rest(&mut b, false),
            Err(HeaderError::BadClientId(-2))
        );
    }

    #[test]
    fn truncated_tagged_fields_are_rejected() {
        let mut b = Bytes::from(vec![0xff, 0xff, 1, 5, 9, 0]);
        assert_eq!(
            parse_header_rest(&mut b, true),
            Err(HeaderError::BadTaggedFields)
        );
    }
}
