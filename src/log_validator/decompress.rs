//! Decompression of a batch's record section for validation, streamed and bounded.
//!
//! Codecs as Kafka writes them: gzip (RFC 1952, members may be concatenated), snappy (either
//! xerial `snappy-java` framing, as the Java client writes, or one raw snappy block, as
//! librdkafka and franz-go write; Kafka's reader accepts both), LZ4 frame format, zstd frames.
//!
//! Memory is bounded whatever the bytes claim: the decompressed stream is read through one 16 KiB
//! buffer and never kept; the total it yields is capped (`limit`, [`Malformed::TooLarge`]
//! beyond). Codec state is bounded too: zstd frames may not ask for a window over
//! [`ZSTD_WINDOW_LOG_MAX`], LZ4 blocks are at most 4 MiB by the format, and a snappy block is
//! allocated only once its claimed length fits both the cap and snappy's own best ratio.

use std::io::{self, Read};

use super::walk::{Input, Malformed, StreamInput};

/// Largest zstd window a batch may use: 2^24 = 16 MiB (zstd levels 1-19 use at most 2^23; the
/// library's own default limit is 2^27).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;
const READ_BUFFER: usize = 16 * 1024;
/// xerial snappy-java stream header: magic, then version and compatible version (i32 each).
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// No snappy block decompresses to more than about 21 times its size (a 3-byte copy of 64).
const SNAPPY_MAX_RATIO: usize = 24;

pub fn codec_name(codec: i16) -> &'static str {
    match codec {
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => "unknown",
    }
}

/// The decompressed records of `section` under `codec` (1-4) as a [`StreamInput`]; `Err` when the
/// codec refuses the stream's start.
pub(super) fn open(
    codec: i16,
    section: &[u8],
    limit: u64,
) -> Result<Stream<Box<dyn Read + '_>>, Malformed> {
    let name = codec_name(codec);
    let fault = |e: io::Error| Malformed::Codec {
        codec: name,
        why: e.to_string(),
    };
    let reader: Box<dyn Read + '_> = match codec {
        1 => Box::new(flate2::bufread::MultiGzDecoder::new(section)),
        2 => Box::new(Snappy::new(section, limit)),
        3 => Box::new(lz4_flex::frame::FrameDecoder::new(WholeFrames(section))),
        4 => {
            let mut d = zstd::stream::read::Decoder::with_buffer(section).map_err(fault)?;
            d.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(fault)?;
            Box::new(d)
        }
        _ => {
            return Err(Malformed::Codec {
                codec: name,
                why: format!("unknown compression codec {codec}"),
            })
        }
    };
    Ok(Stream {
        inner: reader,
        codec: name,
        buf: vec![0; READ_BUFFER],
        pos: 0,
        end: 0,
        total: 0,
        limit,
        fault: None,
        eof: false,
    })
}

/// A decompressor read through one buffer, counting what it yields. A codec error or the cap is
/// kept in `fault` (the walk then sees the end of input); the caller reports it first.
pub(super) struct Stream<R: Read> {
    inner: R,
    codec: &'static str,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    total: u64,
    limit: u64,
    pub fault: Option<Malformed>,
    eof: bool,
}

impl<R: Read> Stream<R> {
    /// Refills the buffer; false at the end of the stream or on a fault.
    fn fill(&mut self) -> bool {
        if self.eof || self.fault.is_some() {
            return false;
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    return false;
                }
                Ok(n) => {
                    self.total += n as u64;
                    if self.total > self.limit {
                        self.fault = Some(Malformed::TooLarge { limit: self.limit });
                        return false;
                    }
                    self.pos = 0;
                    self.end = n;
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.fault = Some(Malformed::Codec {
                        codec: self.codec,
                        why: e.to_string(),
                    });
                    return false;
                }
            }
        }
    }
}

impl<R: Read> Input for Stream<R> {
    #[inline]
    fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill() {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    fn skip(&mut self, mut n: usize) -> bool {
        loop {
            let here = (self.end - self.pos).min(n);
            self.pos += here;
            n -= here;
            if n == 0 {
                return true;
            }
            if !self.fill() {
                return false;
            }
        }
    }
}

impl<R: Read> StreamInput for Stream<R> {
    fn at_end(&mut self) -> bool {
        self.pos == self.end && !self.fill()
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
    /// Bytes still allowed out (the stream's cap; the `Stream` counts the same bytes again).
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
