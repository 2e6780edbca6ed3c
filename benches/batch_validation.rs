//! `record::validate_batch` (header parse + CRC-32C over the batch) on a 16 KiB batch: the per-batch
//! work the produce path does.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice::record::{build_batch, validate_batch};

fn batch_16k() -> Vec<u8> {
    // 16 records of ~1 KiB: a 16 KiB-ish batch like a Java producer sends with 1 KiB values.
    let value = vec![b'x'; 1000];
    let records: Vec<_> = (0..16).map(|_| (None, Some(&value[..]))).collect();
    build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records)
}

fn bench(c: &mut Criterion) {
    let batch = batch_16k();
    assert!(validate_batch(&batch).is_ok());
    let mut g = c.benchmark_group("validate_batch");
    g.throughput(Throughput::Bytes(batch.len() as u64));
    g.bench_function("16KiB", |b| {
        b.iter(|| validate_batch(black_box(&batch)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
