//! Decompression of a batch's record section, streamed and bounded: the one decoder of Kafka's
//! codecs, used by `log_validator` (produce) and `log::segment::timestamps` (ListOffsets).
//!
//! Codecs as Kafka writes them (attribute bits 0-2): 1 gzip (RFC 1952, members may be
//! concatenated), 2 snappy (either xerial `snappy-java` framing, as the Java client writes, or one
//! raw snappy block, as librdkafka and franz-go write; Kafka's reader accepts both), 3 LZ4 frame
//! format, 4 zstd frames.
//!
//! Memory is bounded whatever the bytes claim: [`Decompressed`] yields at most the caller's
//! `limit` bytes (an error beyond, [`Decompressed::over_limit`] then true) and keeps none of them.
//! Codec state is bounded too: zstd frames may not ask for a window over [`ZSTD_WINDOW_LOG_MAX`],
//! LZ4 blocks are at most 4 MiB by the format, and a snappy block is allocated only once its
//! claimed length fits both the cap and snappy's own best ratio. Pure: no I/O beyond the slice.

use std::io::{self, Read};

/// Largest zstd window a batch may use: 2^24 = 16 MiB (zstd levels 1-19 use at most 2^23; the
/// library's own default limit is 2^27).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;
/// xerial snappy-java stream header: magic, then version and compatible version (i32 each).
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// No snappy block decompresses to more than about 21 times its size (a 3-byte copy of 64).
const SNAPPY_MAX_RATIO: usize = 24;

/// Kafka's name of a compression codec attribute value.
pub fn codec_name(codec: i16) -> &'static str {
    match codec {
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// The decompressed records of `section` (a batch's bytes after its header) under `codec` (1-4),
/// at most `limit` bytes; `Err` for an unknown codec or when the codec refuses the stream's start.
pub fn decompress(codec: i16, section: &[u8], limit: u64) -> io::Result<Decompressed<'_>> {
    let inner: Box<dyn Read + '_> = match codec {
        1 => Box::new(flate2::bufread::MultiGzDecoder::new(section)),
        2 => Box::new(Snappy::new(section, limit)),
        3 => Box::new(lz4_flex::frame::FrameDecoder::new(WholeFrames(section))),
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(section)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(d)
        }
        _ => return Err(corrupt(format!("unknown compression codec {codec}"))),
    };
    Ok(Decompressed {
        inner,
        codec: codec_name(codec),
        total: 0,
        limit,
        over: false,
    })
}

/// A batch's decompressed record section as a `Read` (unbuffered: read it through a buffer),
/// capped at `limit` bytes: reading past the cap is an `InvalidData` error and sets `over_limit`.
pub struct Decompressed<'a> {
    inner: Box<dyn Read + 'a>,
    codec: &'static str,
    total: u64,
    limit: u64,
    over: bool,
}

impl Decompressed<'_> {
    /// Kafka's name of the codec (`gzip`, `snappy`, `lz4`, `zstd`).
    pub fn codec(&self) -> &'static str {
        self.codec
    }
    /// The cap the caller gave.
    pub fn limit(&self) -> u64 {
        self.limit
    }
    /// True once the stream went past the cap.
    pub fn over_limit(&self) -> bool {
        self.over
    }
}

impl Read for Decompressed<'_> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        if self.over {
            return Err(self.too_large());
        }
        let n = self.inner.read(dst)?;
        self.total += n as u64;
        if self.total > self.limit {
            self.over = true;
            return Err(self.too_large());
        }
        Ok(n)
    }
}

impl Decompressed<'_> {
    fn too_large(&self) -> io::Error {
        corrupt(format!(
            "decompressed record batch exceeds {} bytes",
            self.limit
        ))
    }
}

/// The LZ4 section as the frame decoder reads it. `lz4_flex` takes the end of input where a block
/// header should be as the end of the frame; Kafka's reader (and librdkafka's) refuse a frame
/// without its end mark, so a short `read_exact` is an error here, not an end.
struct WholeFrames<'a>(&'a [u8]);

impl Read for WholeFrames<'_> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.0.read(dst)
    }
    fn read_exact(&mut self, dst: &mut [u8]) -> io::Result<()> {
        if dst.len() > self.0.len() {
            return Err(corrupt("LZ4 frame ends without its end mark".into()));
        }
        self.0.read_exact(dst)
    }
}

/// Kafka's snappy input: xerial-framed blocks (`i32` length + raw block) after a 16-byte header,
/// or, without the header, the whole section as one raw block. One block is held at a time.
struct Snappy<'a> {
    input: &'a [u8],
    xerial: bool,
    started: bool,
    out: Vec<u8>,
    pos: usize,
    /// Bytes still allowed out (the stream's cap; `Decompressed` counts the same bytes again).
    budget: u64,
    limit: u64,
    decoder: snap::raw::Decoder,
}

fn corrupt(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

impl<'a> Snappy<'a> {
    fn new(input: &'a [u8], limit: u64) -> Snappy<'a> {
        let xerial = input.len() >= XERIAL_HEADER && input[..8] == XERIAL_MAGIC;
        Snappy {
            input,
            xerial,
            started: false,
            out: Vec::new(),
            pos: 0,
            budget: limit,
            limit,
            decoder: snap::raw::Decoder::new(),
        }
    }

    /// The next raw block, or None at the end.
    fn next_block(&mut self) -> io::Result<Option<&'a [u8]>> {
        if !self.xerial {
            if self.started {
                return Ok(None);
            }
            self.started = true;
            return Ok(Some(self.input));
        }
        loop {
            // snappy-java also accepts a concatenated stream's header between blocks.
            if self.input.len() >= XERIAL_HEADER && self.input[..8] == XERIAL_MAGIC {
                self.input = &self.input[XERIAL_HEADER..];
                continue;
            }
            if self.input.is_empty() {
                return Ok(None);
            }
            let Some((len, rest)) = self.input.split_first_chunk::<4>() else {
                return Err(corrupt("truncated xerial block length".into()));
            };
            let len = i32::from_be_bytes(*len);
            let Some(block) = usize::try_from(len).ok().and_then(|l| rest.get(..l)) else {
                return Err(corrupt(format!(
                    "xerial block of {len} bytes overruns the batch"
                )));
            };
            self.input = &rest[block.len()..];
            return Ok(Some(block));
        }
    }
}

impl Read for Snappy<'_> {
    fn read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.out.len() {
            let Some(block) = self.next_block()? else {
                return Ok(0);
            };
            let claimed = snap::raw::decompress_len(block).map_err(|e| corrupt(e.to_string()))?;
            if claimed as u64 > self.budget {
                return Err(corrupt(format!(
                    "a block of {claimed} bytes takes the batch over {} decompressed bytes",
                    self.limit
                )));
            }
            if claimed > block.len().saturating_mul(SNAPPY_MAX_RATIO) + 64 {
                return Err(corrupt(format!(
                    "snappy block of {} bytes claims {claimed}",
                    block.len()
                )));
            }
            self.budget -= claimed as u64;
            self.out.clear();
            self.out.resize(claimed, 0);
            let n = self
                .decoder
                .decompress(block, &mut self.out)
                .map_err(|e| corrupt(e.to_string()))?;
            self.out.truncate(n);
            self.pos = 0;
        }
        let n = (self.out.len() - self.pos).min(dst.len());
        dst[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::build::{compress, snappy_raw, Codec};

    fn read_all(codec: i16, section: &[u8], limit: u64) -> (io::Result<Vec<u8>>, bool) {
        let mut d = match decompress(codec, section, limit) {
            Ok(d) => d,
            Err(e) => return (Err(e), false),
        };
        let mut out = Vec::new();
        let r = d.read_to_end(&mut out).map(|_| out);
        (r, d.over_limit())
    }

    #[test]
    fn every_codec_round_trips_up_to_the_cap_and_stops_past_it() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let n = data.len() as u64;
        let mut sections: Vec<(i16, Vec<u8>)> = Codec::ALL
            .iter()
            .map(|&c| (c as i16, compress(c, &data)))
            .collect();
        sections.push((2, snappy_raw(&data)));
        for (codec, section) in &sections {
            let (got, over) = read_all(*codec, section, n);
            assert_eq!(got.expect("decompresses"), data, "codec {codec}");
            assert!(!over, "codec {codec}");
            let (got, over) = read_all(*codec, section, n - 1);
            let e = got.expect_err("over the cap");
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "codec {codec}");
            assert!(e.to_string().contains(&(n - 1).to_string()), "{e}");
            // snappy refuses a block over the budget before decoding it (not `over_limit`)
            assert_eq!(over, *codec != 2, "codec {codec}");
        }
    }

    #[test]
    fn unknown_codecs_and_unterminated_lz4_frames_are_refused() {
        assert!(decompress(5, b"x", 1 << 20).is_err());
        let mut lz4 = compress(Codec::Lz4, b"some records");
        lz4.truncate(lz4.len() - 4); // drop the end mark
        let (got, _) = read_all(3, &lz4, 1 << 20);
        assert!(got.is_err());
        let mut gz = compress(Codec::Gzip, b"one");
        gz.extend_from_slice(&compress(Codec::Gzip, b"two"));
        assert_eq!(read_all(1, &gz, 1 << 20).0.expect("two members"), b"onetwo");
    }
}
