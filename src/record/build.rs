//! Batches as clients build them, for tests and benchmarks: compressed (the broker never
//! compresses on the produce or fetch path), and with a timestamp per record. Pure.

use std::io::Write;

use crate::record::{
    compute_crc, BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD, NO_PRODUCER_ID, NO_SEQUENCE,
    OFFSET_ATTRIBUTES, OFFSET_BATCH_LENGTH, OFFSET_CRC,
};

/// A batch compression codec (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip = 1,
    /// xerial-framed, as the Java client writes it.
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Codec {
    pub const ALL: [Codec; 4] = [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];
}

/// `data` compressed as a client would put it in a batch of `codec`.
pub fn compress(codec: Codec, data: &[u8]) -> Vec<u8> {
    match codec {
        Codec::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).expect("write to Vec");
            e.finish().expect("write to Vec")
        }
        Codec::Snappy => snappy_xerial(data),
        Codec::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(data).expect("write to Vec");
            e.finish().expect("write to Vec")
        }
        Codec::Zstd => zstd::encode_all(data, 3).expect("zstd of a slice"),
    }
}

/// One raw snappy block, as librdkafka and franz-go write snappy batches.
pub fn snappy_raw(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(data)
        .expect("snappy of a slice")
}

/// snappy-java's stream format: 16-byte header, then 32 KiB blocks each behind its `i32` length.
pub fn snappy_xerial(data: &[u8]) -> Vec<u8> {
    let mut out = super::compression::XERIAL_MAGIC.to_vec();
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]); // version, compatible version
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(32 * 1024) {
        let block = enc.compress_vec(chunk).expect("snappy of a slice");
        out.extend_from_slice(&(block.len() as i32).to_be_bytes());
        out.extend_from_slice(&block);
    }
    out
}

/// `batch` (a whole uncompressed batch) with its record section replaced by `section` (already
/// compressed with `codec`, or any bytes) and its attributes, length and CRC rewritten.
pub fn with_section(batch: &[u8], codec: i16, section: &[u8]) -> Vec<u8> {
    let header = BatchHeader::parse(batch).expect("a built batch");
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + section.len());
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    out.extend_from_slice(section);
    let length = (out.len() - LOG_OVERHEAD) as i32;
    out[OFFSET_BATCH_LENGTH..OFFSET_BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let attrs = (header.attributes & !0x07) | (codec & 0x07);
    out[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    let crc = compute_crc(&out);
    out[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// `batch` (whole, uncompressed) with its records compressed by `codec`.
pub fn compress_batch(batch: &[u8], codec: Codec) -> Vec<u8> {
    let section = compress(codec, &batch[BATCH_HEADER_LEN..]);
    with_section(batch, codec as i16, &section)
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// An uncompressed batch at `base` of one record per timestamp (null key, value `v`), its base
/// timestamp the first, its max timestamp the largest, `attributes` as given (CreateTime unless
/// they say otherwise), no producer, a valid CRC. `timestamps` must not be empty.
pub fn batch_with_timestamps(base: i64, timestamps: &[i64], attributes: i16) -> Vec<u8> {
    let base_ts = timestamps[0];
    let max_ts = timestamps.iter().copied().max().unwrap_or(-1);
    let mut body = Vec::new();
    for (i, ts) in timestamps.iter().enumerate() {
        let mut rec = vec![0u8]; // attributes
        put_varlong(&mut rec, ts - base_ts);
        put_varlong(&mut rec, i as i64);
        put_varlong(&mut rec, -1); // key
        put_varlong(&mut rec, 1);
        rec.push(b'v');
        put_varlong(&mut rec, 0); // headers
        put_varlong(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let n = timestamps.len() as i32;
    let mut b = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
    b.extend_from_slice(&base.to_be_bytes());
    b.extend_from_slice(&((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&(-1i32).to_be_bytes()); // leader epoch
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, below
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(n - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&NO_PRODUCER_ID.to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    b.extend_from_slice(&NO_SEQUENCE.to_be_bytes());
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&body);
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}
