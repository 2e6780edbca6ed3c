//! `FrameReader` over in-memory pipes: frames of every size arrive whole and in order, a read that
//! completes a frame takes at most `READ_CHUNK` past its end, the allocation is reused, small
//! pipelined frames share read calls, and bad prefixes, end of stream and stop end the stream with
//! their reason.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncWriteExt, DuplexStream, ReadBuf};

use super::*;

/// Counts the read calls that returned bytes.
struct Counting {
    inner: DuplexStream,
    reads: usize,
}

impl AsyncRead for Counting {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.reads += 1;
        }
        r
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    let mut f = (len as i32).to_be_bytes().to_vec();
    f.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    f
}

/// A reader over a pipe already holding `frames`, written before the first read.
async fn reader_with(frames: &[Vec<u8>], max: usize) -> (FrameReader<Counting>, DuplexStream) {
    let total: usize = frames.iter().map(Vec::len).sum();
    let (mut client, server) = tokio::io::duplex(total.max(64));
    for f in frames {
        client.write_all(f).await.unwrap();
    }
    (
        FrameReader::new(
            Counting {
                inner: server,
                reads: 0,
            },
            max,
        ),
        client,
    )
}

fn stop_signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(false)
}

#[tokio::test]
async fn frames_of_every_size_arrive_whole_and_in_order_across_split_writes() {
    let sizes = [
        1,
        3,
        200,
        65_532,
        65_533,
        300_000,
        17,
        EAGER_RESERVE + 5,
        9,
        2 * EAGER_RESERVE + 1,
        4,
    ];
    let frames: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(n, i as u8))
        .collect();
    let (mut client, server) = tokio::io::duplex(8192);
    let wire: Vec<u8> = frames.concat();
    let writer = tokio::spawn(async move {
        // uneven write sizes, so prefixes and bodies straddle reads
        let mut at = 0;
        let mut step = 1;
        while at < wire.len() {
            let end = (at + step).min(wire.len());
            client.write_all(&wire[at..end]).await.unwrap();
            at = end;
            step = step * 7 % 100_003 + 1;
        }
        client
    });
    let mut rd = FrameReader::new(server, 4 * EAGER_RESERVE);
    let (_tx, mut stop) = stop_signal();
    for (i, f) in frames.iter().enumerate() {
        let got = rd.next(&mut stop).await.unwrap().body;
        assert_eq!(got.len(), sizes[i], "frame {i}");
        assert!(got[..] == f[4..], "frame {i} body differs");
    }
    let client = writer.await.unwrap();
    drop(client);
    assert!(matches!(rd.next(&mut stop).await, Err(FrameEnd::Eof)));
}

#[tokio::test]
async fn reads_stop_one_chunk_past_a_large_frame_and_the_next_reuses_the_buffer_front() {
    // the first is the largest, so the allocation it grows has room past the end of the others
    let frames: Vec<Vec<u8>> = [400_000, 300_000, 350_000, 200_000, 330_000]
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(n, i as u8))
        .collect();
    let (mut rd, _client) = reader_with(&frames, EAGER_RESERVE).await;
    let (_tx, mut stop) = stop_signal();
    let mut starts = Vec::new();
    let mut most_buffered = 0;
    for (i, f) in frames.iter().enumerate() {
        let got = rd.next(&mut stop).await.unwrap().body;
        assert!(got[..] == f[4..], "frame {i} body differs");
        // the rest of the wire is already in the pipe, yet at most one chunk of it was read
        assert!(
            rd.buffered() <= READ_CHUNK,
            "frame {i}: {} bytes read past it",
            rd.buffered()
        );
        most_buffered = most_buffered.max(rd.buffered());
        starts.push(got.as_ptr() as usize);
        drop(got);
    }
    assert_eq!(
        most_buffered, READ_CHUNK,
        "reads past a frame's end never happened"
    );
    // every frame landed where frame 1 did, at the front of the allocation it grew: no new buffer,
    // and what was read of a frame early was moved there (at most one chunk), not its body
    assert_eq!(starts, vec![starts[0]; 5]);
}

#[tokio::test]
async fn pipelined_small_frames_share_read_calls() {
    let frames: Vec<Vec<u8>> = (0..100).map(|i| frame(100 + i, i as u8)).collect();
    let (mut rd, _client) = reader_with(&frames, EAGER_RESERVE).await;
    let (_tx, mut stop) = stop_signal();
    for (i, f) in frames.iter().enumerate() {
        let got = rd.next(&mut stop).await.unwrap().body;
        assert!(got[..] == f[4..], "frame {i} body differs");
    }
    // 100 frames, 15,350 bytes: one read of up to READ_CHUNK
    assert_eq!(rd.rd.reads, 1);
}

#[tokio::test]
async fn a_frame_far_above_steady_sizes_does_not_keep_its_buffer() {
    let frames = vec![frame(2 * EAGER_RESERVE + 1, 1), frame(50, 2)];
    let (mut rd, _client) = reader_with(&frames, 4 * EAGER_RESERVE).await;
    let (_tx, mut stop) = stop_signal();
    assert_eq!(
        rd.next(&mut stop).await.unwrap().body.len(),
        2 * EAGER_RESERVE + 1
    );
    assert_eq!(rd.buf.capacity(), READ_CHUNK);
    assert_eq!(rd.next(&mut stop).await.unwrap().body.len(), 50);
}

#[tokio::test]
async fn bad_prefixes_end_the_stream_with_their_value() {
    for (prefix, max) in [(0i32, 100), (-1, 100), (i32::MIN, 100), (101, 100)] {
        let (mut rd, _client) = reader_with(&[prefix.to_be_bytes().to_vec()], max).await;
        let (_tx, mut stop) = stop_signal();
        match rd.next(&mut stop).await {
            Err(FrameEnd::BadLength(n)) => assert_eq!(n, prefix),
            other => panic!("prefix {prefix}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn end_of_stream_inside_a_frame_and_a_stop_are_reported() {
    let mut partial = frame(1000, 0);
    partial.truncate(500);
    let (mut rd, client) = reader_with(&[partial], EAGER_RESERVE).await;
    drop(client);
    let (_tx, mut stop) = stop_signal();
    assert!(matches!(rd.next(&mut stop).await, Err(FrameEnd::Eof)));

    let (mut rd, _client) = reader_with(&[frame(1000, 0)[..10].to_vec()], EAGER_RESERVE).await;
    let (tx, mut stop) = stop_signal();
    let waiting = tokio::spawn(async move { rd.next(&mut stop).await.map(|f| f.body.len()) });
    tokio::task::yield_now().await;
    tx.send(true).unwrap();
    assert!(matches!(waiting.await.unwrap(), Err(FrameEnd::Stopped)));
}

fn limited(server: DuplexStream, limits: FrameLimits) -> FrameReader<Counting> {
    FrameReader::with_limits(
        Counting {
            inner: server,
            reads: 0,
        },
        EAGER_RESERVE,
        limits,
    )
}

/// Generous bound for an event the test waits for (never a claim about how fast it comes).
const EVENT: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test]
async fn a_stalled_or_trickling_frame_ends_with_a_read_timeout() {
    let timeout = Some(std::time::Duration::from_millis(50));
    // A length prefix of 1000 and 10 bytes of body, then nothing.
    let (mut client, server) = tokio::io::duplex(4096);
    client.write_all(&frame(1000, 0)[..14]).await.unwrap();
    let mut rd = limited(
        server,
        FrameLimits {
            read_timeout: timeout,
            ..FrameLimits::default()
        },
    );
    let (_tx, mut stop) = stop_signal();
    match tokio::time::timeout(EVENT, rd.next(&mut stop))
        .await
        .unwrap()
    {
        Err(FrameEnd::ReadTimeout { received, declared }) => {
            assert_eq!((received, declared), (10, Some(1000)))
        }
        other => panic!("{other:?}"),
    }

    // Half a length prefix.
    let (mut client, server) = tokio::io::duplex(4096);
    client.write_all(&[0, 0]).await.unwrap();
    let mut rd = limited(
        server,
        FrameLimits {
            read_timeout: timeout,
            ..FrameLimits::default()
        },
    );
    match tokio::time::timeout(EVENT, rd.next(&mut stop))
        .await
        .unwrap()
    {
        Err(FrameEnd::ReadTimeout { received, declared }) => {
            assert_eq!((received, declared), (2, None))
        }
        other => panic!("{other:?}"),
    }

    // A client trickling one byte at a time does not extend the deadline.
    let (mut client, server) = tokio::io::duplex(4096);
    let mut rd = limited(
        server,
        FrameLimits {
            read_timeout: timeout,
            ..FrameLimits::default()
        },
    );
    // The length prefix at once (a loaded machine may stretch the sleeps past the deadline
    // before four single bytes arrive), then the body a byte at a time.
    let whole = frame(100_000, 0);
    client.write_all(&whole[..4]).await.unwrap();
    let trickle = tokio::spawn(async move {
        for b in whole.into_iter().skip(4) {
            if client.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    });
    match tokio::time::timeout(EVENT, rd.next(&mut stop))
        .await
        .unwrap()
    {
        Err(FrameEnd::ReadTimeout { declared, .. }) => assert_eq!(declared, Some(100_000)),
        other => panic!("{other:?}"),
    }
    drop(rd);
    trickle.await.unwrap();
}

#[tokio::test]
async fn no_bytes_for_the_idle_time_reports_idle_and_reading_can_go_on() {
    let (mut client, server) = tokio::io::duplex(4096);
    let mut rd = limited(
        server,
        FrameLimits {
            idle: Some(std::time::Duration::from_millis(30)),
            ..FrameLimits::default()
        },
    );
    let (_tx, mut stop) = stop_signal();
    let r = tokio::time::timeout(EVENT, rd.next(&mut stop))
        .await
        .unwrap();
    assert!(matches!(r, Err(FrameEnd::Idle)), "{r:?}");
    client.write_all(&frame(20, 3)).await.unwrap();
    let f = tokio::time::timeout(EVENT, rd.next(&mut stop))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(f.body[..], frame(20, 3)[4..]);
}

#[tokio::test]
async fn a_frame_holds_its_length_of_pool_memory_until_dropped() {
    const LEN: usize = 100_000;
    let pool = MemoryPool::new(150_000);
    let (mut client, server) = tokio::io::duplex(1 << 20);
    client.write_all(&frame(LEN, 1)).await.unwrap();
    client.write_all(&frame(LEN, 2)).await.unwrap();
    client.write_all(&frame(POOL_MIN_FRAME, 3)).await.unwrap();
    let mut rd = limited(
        server,
        FrameLimits {
            pool: Some(pool.clone()),
            ..FrameLimits::default()
        },
    );
    let (_tx, mut stop) = stop_signal();
    let first = rd.next(&mut stop).await.unwrap();
    assert_eq!(first.memory.as_ref().map(|m| m.bytes()), Some(LEN));
    assert_eq!(pool.in_use(), LEN);
    // The second frame's bytes are there, but its memory is not granted while the first holds
    // it: the reader waits.
    let second = tokio::spawn(async move {
        let f = rd.next(&mut stop).await.unwrap();
        let small = rd.next(&mut stop).await.unwrap();
        (f.body, small.memory.is_none(), small.body.len())
    });
    while pool.waiting() != 1 {
        tokio::task::yield_now().await;
    }
    drop(first);
    let (body, small_unpooled, small_len) =
        tokio::time::timeout(EVENT, second).await.unwrap().unwrap();
    assert_eq!(body[..], frame(LEN, 2)[4..]);
    assert!(
        small_unpooled,
        "a frame of READ_CHUNK bytes does not draw from the pool"
    );
    assert_eq!(small_len, POOL_MIN_FRAME);
    assert_eq!(pool.peak(), LEN);
    assert_eq!(pool.in_use(), 0);
}
