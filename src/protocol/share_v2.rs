//! ShareFetch (78) and ShareAcknowledge (79) v2 (Kafka 4.2+: KIP-1206 `ShareAcquireMode`,
//! KIP-1222 Renew), which the `kafka-protocol` crate (Kafka 4.1 schemas) does not know.
//!
//! Every v2 change is a field inserted right after fixed-width fields, nothing else moves:
//!
//! ```text
//! ShareFetchRequest v2       = v1 with ShareAcquireMode int8, IsRenewAck bool after BatchSize
//! ShareAcknowledgeRequest v2 = v1 with IsRenewAck bool after ShareSessionEpoch
//! ShareAcknowledgeResponse v2= v1 with AcquisitionLockTimeoutMs int32 after ErrorMessage
//! ShareFetchResponse v2      = v1 (the same bytes; `api::share_fetch_encode` writes both)
//! ```
//!
//! (as Kafka 4.4.0's generated `*Data` classes write them). So a v2 request is read by walking its
//! prefix with `schema::Reader` (bounded: every length is checked against the bytes left), taking
//! the v2 fields out, and decoding the remaining v1 bytes with the crate through
//! `protocol::bounded` (no count larger than the frame is ever allocated). Encoders (responses,
//! and the requests for tests and fuzz seeds) insert the fields into the crate's v1 bytes the same
//! way. Performs no I/O.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
};
use kafka_protocol::protocol::Encodable;

use super::bounded;
use super::schema::{Reader, SchemaError};

/// The version the crate encodes and decodes for both APIs.
const V1: i16 = 1;
/// The newest version of both APIs.
pub const V2: i16 = 2;

/// `ShareAcquireMode` (KIP-1206): how a ShareFetch counts `MaxRecords`.
pub const BATCH_OPTIMIZED: i8 = 0;
/// Never acquire more than `MaxRecords`, cutting a batch if needed.
pub const RECORD_LIMIT: i8 = 1;

/// A ShareFetch request of any supported version with its v2 fields (v1: batch-optimized, no
/// renew).
#[derive(Debug, Clone, PartialEq)]
pub struct ShareFetch {
    pub request: ShareFetchRequest,
    pub share_acquire_mode: i8,
    /// The acknowledgements carry Renew (type 4); the fetch itself is not done.
    pub is_renew_ack: bool,
}

/// A ShareAcknowledge request of any supported version with its v2 field.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareAcknowledge {
    pub request: ShareAcknowledgeRequest,
    pub is_renew_ack: bool,
}

/// The byte length of a flexible body's prefix: two compact nullable strings (GroupId,
/// MemberId) then `int32s` int32 fields.
fn prefix_len(body: &[u8], int32s: usize) -> Result<usize, SchemaError> {
    let mut r = Reader::new(body);
    r.set_flexible(true);
    r.nullable_string()?;
    r.nullable_string()?;
    for _ in 0..int32s {
        r.i32()?;
    }
    Ok(body.len() - r.remaining())
}

/// ShareFetch's prefix: GroupId, MemberId, then ShareSessionEpoch, MaxWaitMs, MinBytes,
/// MaxBytes, MaxRecords, BatchSize.
const FETCH_INT32S: usize = 6;
/// ShareAcknowledge's prefix: GroupId, MemberId, ShareSessionEpoch.
const ACK_INT32S: usize = 1;

/// Takes `n` bytes at `at` out of `frame` and decodes the rest as a v1 body with the crate.
/// Returns the removed bytes and the request; `frame` is advanced past the body.
fn decode_without<T: kafka_protocol::protocol::Decodable>(
    frame: &mut Bytes,
    at: usize,
    n: usize,
) -> anyhow::Result<(Vec<u8>, T)> {
    if frame.len() < at + n {
        anyhow::bail!("v2 fields truncated");
    }
    let removed = frame[at..at + n].to_vec();
    let mut v1 = BytesMut::with_capacity(frame.len() - n);
    v1.extend_from_slice(&frame[..at]);
    v1.extend_from_slice(&frame[at + n..]);
    let mut v1 = v1.freeze();
    let whole = v1.len();
    let request = bounded::decode(&mut v1, V1, true)?;
    let consumed = whole - v1.len();
    frame.advance(consumed + n);
    Ok((removed, request))
}

/// Decodes a ShareFetch request body of `version` (1 or 2) from `frame`.
pub fn decode_share_fetch(frame: &mut Bytes, version: i16) -> anyhow::Result<ShareFetch> {
    if version < V2 {
        let request = bounded::decode(frame, version, true)?;
        return Ok(ShareFetch {
            request,
            share_acquire_mode: BATCH_OPTIMIZED,
            is_renew_ack: false,
        });
    }
    let at = prefix_len(frame, FETCH_INT32S)?;
    let (v2, request) = decode_without(frame, at, 2)?;
    Ok(ShareFetch {
        request,
        share_acquire_mode: v2[0] as i8,
        is_renew_ack: v2[1] != 0,
    })
}

/// Decodes a ShareAcknowledge request body of `version` (1 or 2) from `frame`.
pub fn decode_share_acknowledge(
    frame: &mut Bytes,
    version: i16,
) -> anyhow::Result<ShareAcknowledge> {
    if version < V2 {
        let request = bounded::decode(frame, version, true)?;
        return Ok(ShareAcknowledge {
            request,
            is_renew_ack: false,
        });
    }
    let at = prefix_len(frame, ACK_INT32S)?;
    let (v2, request) = decode_without(frame, at, 1)?;
    Ok(ShareAcknowledge {
        request,
        is_renew_ack: v2[0] != 0,
    })
}

/// The crate's v1 bytes of `message` with `insert` placed at the offset `at` finds in them.
fn encode_with(
    message: &impl Encodable,
    version: i16,
    insert: &[u8],
    at: impl Fn(&[u8]) -> Result<usize, SchemaError>,
) -> anyhow::Result<Vec<u8>> {
    let mut v1 = BytesMut::new();
    message.encode(&mut v1, V1)?;
    if version < V2 {
        return Ok(v1.to_vec());
    }
    let at = at(&v1)?;
    let mut out = Vec::with_capacity(v1.len() + insert.len());
    out.extend_from_slice(&v1[..at]);
    out.extend_from_slice(insert);
    out.extend_from_slice(&v1[at..]);
    Ok(out)
}

/// Encodes a ShareFetch request body at `version` (1 refuses v2-only values, as Kafka's
/// builder does).
pub fn encode_share_fetch(fetch: &ShareFetch, version: i16) -> anyhow::Result<Vec<u8>> {
    if version < V2 && (fetch.is_renew_ack || fetch.share_acquire_mode != BATCH_OPTIMIZED) {
        anyhow::bail!("ShareFetch v1 has no ShareAcquireMode or IsRenewAck");
    }
    let insert = [fetch.share_acquire_mode as u8, u8::from(fetch.is_renew_ack)];
    encode_with(&fetch.request, version, &insert, |b| {
        prefix_len(b, FETCH_INT32S)
    })
}

/// Encodes a ShareAcknowledge request body at `version`.
pub fn encode_share_acknowledge(ack: &ShareAcknowledge, version: i16) -> anyhow::Result<Vec<u8>> {
    if version < V2 && ack.is_renew_ack {
        anyhow::bail!("ShareAcknowledge v1 has no IsRenewAck");
    }
    let insert = [u8::from(ack.is_renew_ack)];
    encode_with(&ack.request, version, &insert, |b| {
        prefix_len(b, ACK_INT32S)
    })
}

/// Where a response's AcquisitionLockTimeoutMs goes: after ThrottleTimeMs, ErrorCode and the
/// compact nullable ErrorMessage.
fn after_error_message(body: &[u8]) -> Result<usize, SchemaError> {
    let mut r = Reader::new(body);
    r.set_flexible(true);
    r.i32()?;
    r.i16()?;
    r.nullable_string()?;
    Ok(body.len() - r.remaining())
}

/// Encodes a ShareAcknowledge response body at `version` into `buf`; v2 carries
/// `acquisition_lock_timeout_ms` (the group's record lock duration).
pub fn encode_share_acknowledge_response(
    response: &ShareAcknowledgeResponse,
    version: i16,
    acquisition_lock_timeout_ms: i32,
    buf: &mut BytesMut,
) -> anyhow::Result<()> {
    let insert = acquisition_lock_timeout_ms.to_be_bytes();
    let body = encode_with(response, version, &insert, after_error_message)?;
    buf.put_slice(&body);
    Ok(())
}

#[cfg(test)]
#[path = "share_v2_tests.rs"]
mod tests;
