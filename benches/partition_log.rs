//! `log::PartitionLog` append (16 KiB batches into a tempdir segment, page cache only, no fsync) and
//! read (16 KiB batches at random offsets of a 64 MiB log; and 1 MiB reads as the fetch path makes
//! them: `read_1MiB_mem` copies into memory, `read_1MiB_file` walks the headers only and returns a
//! file range for sendfile).
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sluice::log::{AppendMeta, LogConfig, PartitionLog};
use sluice::record::{build_batch, set_base_offset, validate_batch};

const RECORDS_PER_BATCH: i64 = 16;

fn batch() -> Vec<u8> {
    let value = vec![b'x'; 1000];
    let records: Vec<_> = (0..RECORDS_PER_BATCH)
        .map(|_| (None, Some(&value[..])))
        .collect();
    build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records)
}

fn append_one(log: &mut PartitionLog, batch: &mut [u8]) {
    let base = log.log_end_offset();
    set_base_offset(batch, base);
    let meta = AppendMeta::from_header(&validate_batch(batch).unwrap());
    log.append(&[batch], &meta, 1_700_000_000_000).unwrap();
}

fn bench(c: &mut Criterion) {
    let mut b16 = batch();
    let mut g = c.benchmark_group("partition_log");
    g.throughput(Throughput::Bytes(b16.len() as u64));

    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) =
        PartitionLog::open(&dir.path().join("t-0"), LogConfig::default(), 0, None, 0).unwrap();
    g.bench_function("append_16KiB", |b| {
        b.iter(|| {
            // keep the file (and the disk used) bounded; amortised over 4096 appends
            if log.size_bytes() >= 64 * 1024 * 1024 {
                log.truncate_to(0).unwrap();
            }
            append_one(&mut log, &mut b16)
        });
    });
    drop(log);
    drop(dir);

    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) =
        PartitionLog::open(&dir.path().join("t-0"), LogConfig::default(), 0, None, 0).unwrap();
    for _ in 0..4096 {
        append_one(&mut log, &mut b16);
    }
    let end = log.log_end_offset();
    let mut i: i64 = 0;
    g.bench_function("read_16KiB", |b| {
        b.iter_batched(
            || {
                i = (i + 7919 * RECORDS_PER_BATCH) % end;
                i
            },
            |off| {
                let s = log.read(black_box(off), 16 * 1024, end).unwrap();
                assert!(!s.bytes.is_empty());
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.throughput(Throughput::Bytes(1 << 20));
    for (name, zero_copy) in [("read_1MiB_mem", false), ("read_1MiB_file", true)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    i = (i + 7919 * RECORDS_PER_BATCH) % end;
                    i
                },
                |off| {
                    let s = log
                        .read_records(black_box(off), 1 << 20, end, zero_copy)
                        .unwrap();
                    assert!(!s.records.is_empty());
                    s
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
