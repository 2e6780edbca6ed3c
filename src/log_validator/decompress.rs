//! A compressed batch's records as the walk reads them: [`record::compression`]'s bounded
//! decompressed stream read through one 16 KiB buffer, its faults kept as [`Malformed`].
//!
//! The decompressed bytes are never kept; the cap (`limit`, [`Malformed::TooLarge`] beyond) and
//! the codecs' own bounds are `record::compression`'s.
//!
//! [`record::compression`]: crate::record::compression

use std::io::{self, Read};

use super::walk::{Input, Malformed, StreamInput};
use crate::record::compression::{self, codec_name, Decompressed};

const READ_BUFFER: usize = 16 * 1024;

/// The decompressed records of `section` under `codec` (1-4) as a [`StreamInput`]; `Err` when the
/// codec refuses the stream's start.
pub(super) fn open(codec: i16, section: &[u8], limit: u64) -> Result<Stream<'_>, Malformed> {
    let inner = compression::decompress(codec, section, limit).map_err(|e| Malformed::Codec {
        codec: codec_name(codec),
        why: e.to_string(),
    })?;
    Ok(Stream {
        inner,
        buf: vec![0; READ_BUFFER],
        pos: 0,
        end: 0,
        fault: None,
        eof: false,
    })
}

/// A decompressor read through one buffer. A codec error or the cap is kept in `fault` (the walk
/// then sees the end of input); the caller reports it first.
pub(super) struct Stream<'a> {
    inner: Decompressed<'a>,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    pub fault: Option<Malformed>,
    eof: bool,
}

impl Stream<'_> {
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
                    self.pos = 0;
                    self.end = n;
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.fault = Some(if self.inner.over_limit() {
                        Malformed::TooLarge {
                            limit: self.inner.limit(),
                        }
                    } else {
                        Malformed::Codec {
                            codec: self.inner.codec(),
                            why: e.to_string(),
                        }
                    });
                    return false;
                }
            }
        }
    }
}

impl Input for Stream<'_> {
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

impl StreamInput for Stream<'_> {
    fn at_end(&mut self) -> bool {
        self.pos == self.end && !self.fill()
    }
}
