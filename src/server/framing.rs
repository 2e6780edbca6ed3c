//! Request framing: a 4-byte big-endian length, then that many bytes.
//!
//! `FrameReader` reads into one `BytesMut` and splits each complete frame off it without copying.
//! What it does copy is the part of the next frame read along with the current one: reserving
//! room for the next frame moves that part to the front of the buffer. So a read that completes
//! a frame takes at most `READ_CHUNK` bytes past its end, and a frame costs at most one
//! `READ_CHUNK` moved. Reads that look for a length prefix also take up to `READ_CHUNK`, so
//! pipelined small requests still arrive many per read call.
//!
//! Measured (franz-go, 2.5M x 1 KiB records, acks=1, ~780 KB requests, broker and client on one
//! core each): unbounded reads ran into the next frame by up to the buffer's spare room, and
//! moving that was 7% of the broker's CPU (`memmove` in `BytesMut::reserve`). Reading exactly to
//! the frame's end moved nothing but cost throughput (710k against 840k-910k records/s, the
//! client core idle 13-20% of the time instead of 3%), while up to 64 KiB past the end kept the
//! throughput (950k-1.0M) with broker user CPU 0.27-0.30 s instead of 0.36-0.46 s.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::pool::{MemoryPermit, MemoryPool};

/// Read-buffer growth step; also the most a client can make us reserve before sending data.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// Frames up to this size get their whole buffer at once (after the pool granted their length);
/// larger ones grow as bytes arrive, so a client announcing a huge frame and sending nothing
/// costs little.
pub(crate) const EAGER_RESERVE: usize = 1024 * 1024;

/// Frames longer than this acquire their length from the memory pool; shorter ones are read into
/// the connection's own buffer (at most one at a time per connection).
pub(crate) const POOL_MIN_FRAME: usize = READ_CHUNK;

/// Why no frame came.
#[derive(Debug)]
pub(crate) enum FrameEnd {
    Eof,
    Stopped,
    Io(std::io::Error),
    /// The length prefix was `<= 0` or above the limit.
    BadLength(i32),
    /// No byte of a next frame arrived within the idle timeout (the caller decides whether the
    /// connection is idle: its writer may still be busy). Calling `next` again waits anew.
    Idle,
    /// A frame started but did not complete within the read timeout: `received` of its
    /// `declared` bytes (`None`: the length prefix itself was incomplete) had arrived.
    ReadTimeout {
        received: usize,
        declared: Option<usize>,
    },
}

/// A request frame and the pool memory granted to it (held until the request is handled).
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) body: Bytes,
    pub(crate) memory: Option<MemoryPermit>,
}

/// What bounds a [`FrameReader`] besides the frame length.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrameLimits {
    /// Broker-wide memory each frame's length is acquired from before its buffer is reserved.
    pub(crate) pool: Option<Arc<MemoryPool>>,
    /// How long to wait for the first byte of a next frame before reporting `Idle`.
    pub(crate) idle: Option<Duration>,
    /// How long a started frame may take to arrive whole (counted from its first byte for the
    /// length prefix, and from the memory grant for the body).
    pub(crate) read_timeout: Option<Duration>,
}

pub(crate) struct FrameReader<R> {
    rd: R,
    buf: BytesMut,
    max: usize,
    limits: FrameLimits,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames of up to `max` bytes (the length prefix's value) from `rd`, with no pool and no
    /// timeouts (tests).
    #[cfg(test)]
    pub(crate) fn new(rd: R, max: usize) -> FrameReader<R> {
        FrameReader::with_limits(rd, max, FrameLimits::default())
    }

    pub(crate) fn with_limits(rd: R, max: usize, limits: FrameLimits) -> FrameReader<R> {
        FrameReader {
            rd,
            buf: BytesMut::with_capacity(READ_CHUNK),
            max,
            limits,
        }
    }

    /// The next frame's body (without its length prefix) and its memory grant, or why there is
    /// none. Returns `Stopped` as soon as `stop` changes while waiting for bytes or memory.
    pub(crate) async fn next(
        &mut self,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Frame, FrameEnd> {
        if self.buf.is_empty() {
            let idle = self.limits.idle.map(|d| Instant::now() + d);
            self.fill(1, READ_CHUNK, stop, idle, || FrameEnd::Idle)
                .await?;
        }
        // The frame has started: from here on it must arrive within the read timeout.
        let timeout = self.limits.read_timeout;
        if self.buf.len() < 4 {
            let deadline = timeout.map(|d| Instant::now() + d);
            let received = self.buf.len();
            self.fill(4, READ_CHUNK, stop, deadline, move || {
                FrameEnd::ReadTimeout {
                    received,
                    declared: None,
                }
            })
            .await?;
        }
        let len = i32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        if len <= 0 || len as usize > self.max {
            return Err(FrameEnd::BadLength(len));
        }
        let need = 4 + len as usize;
        let memory = match &self.limits.pool {
            // Frames that fit the connection's own read chunk do not draw from the pool, so small
            // requests (heartbeats, metadata, fetches) flow while large frames wait for memory.
            Some(pool) if len as usize > POOL_MIN_FRAME => {
                let pool = pool.clone();
                tokio::select! {
                    _ = stop.changed() => return Err(FrameEnd::Stopped),
                    permit = pool.acquire(len as usize) => Some(permit),
                }
            }
            _ => None,
        };
        if self.buf.len() < need {
            if need <= EAGER_RESERVE {
                self.buf.reserve(need - self.buf.len());
            }
            let deadline = timeout.map(|d| Instant::now() + d);
            self.fill(need, need + READ_CHUNK, stop, deadline, || {
                FrameEnd::ReadTimeout {
                    received: 0,
                    declared: Some(len as usize),
                }
            })
            .await
            .map_err(|e| match e {
                // Report how much of the body had come.
                FrameEnd::ReadTimeout { declared, .. } => FrameEnd::ReadTimeout {
                    received: self.buf.len().saturating_sub(4),
                    declared,
                },
                other => other,
            })?;
        }
        let mut frame = self.buf.split_to(need).freeze();
        frame.advance(4);
        if need > 2 * EAGER_RESERVE {
            // A frame this large grew the buffer past what steady traffic needs; do not keep it
            // for the life of the connection, only what was read past it.
            let rest = std::mem::replace(&mut self.buf, BytesMut::with_capacity(READ_CHUNK));
            self.buf.extend_from_slice(&rest);
        }
        Ok(Frame {
            body: frame,
            memory,
        })
    }

    /// Bytes read but not yet handed out.
    #[cfg(test)]
    fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Reads until the buffer holds at least `want` bytes, never more than `upto` (>= `want`);
    /// `deadline` passing first ends with `on_timeout()`.
    async fn fill(
        &mut self,
        want: usize,
        upto: usize,
        stop: &mut watch::Receiver<bool>,
        deadline: Option<Instant>,
        on_timeout: impl Fn() -> FrameEnd,
    ) -> Result<(), FrameEnd> {
        let expired = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(expired);
        while self.buf.len() < want {
            if self.buf.capacity() == self.buf.len() {
                self.buf
                    .reserve(READ_CHUNK.min(want - self.buf.len()).max(4096));
            }
            let room = upto - self.buf.len();
            let mut limited = (&mut self.buf).limit(room);
            tokio::select! {
                _ = stop.changed() => return Err(FrameEnd::Stopped),
                _ = &mut expired => return Err(on_timeout()),
                n = self.rd.read_buf(&mut limited) => match n {
                    Ok(0) => return Err(FrameEnd::Eof),
                    Ok(_) => {}
                    Err(e) => return Err(FrameEnd::Io(e)),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
