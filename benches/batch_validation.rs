//! The per-batch work of the produce path, per byte of batch:
//! - `header_crc`: `record::validate_batch` (header parse + CRC-32C): what produce did before the
//!   record walk;
//! - `records`: `log_validator::validate` alone (batch rules + record walk, or decompression +
//!   walk for compressed batches);
//! - `produce`: both, as `api::produce` now runs them.
//!
//! Batches: 1 KiB records (16 per batch, ~16 KiB, like a Java producer with 1 KiB values) and
//! 100 B records (160 per batch), uncompressed and under each codec.
//! `cargo bench --bench batch_validation [-- --quick]`; criterion's MiB/s gives CPU per GiB as
//! 1024 / (MiB/s) seconds.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice::log_validator::{validate, Rules};
use sluice::record::build::{compress_batch, Codec};
use sluice::record::{build_batch, validate_batch, KeyValue};

const NOW: i64 = 1_700_000_000_000;

fn rules() -> Rules<'static> {
    Rules::defaults("bench", NOW)
}

/// `n` records of `size`-byte values with 8-byte keys; the values vary (so they compress as text
/// would, not as zeros).
fn batch(n: usize, size: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            (0..size)
                .map(|j| b"abcdefghijklmnopqrstuvwxyz0123456789"[(i * 7 + j * 13 + j / 5) % 36])
                .collect()
        })
        .collect();
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("key{i:05}").into_bytes()).collect();
    let records: Vec<KeyValue<'_>> = (0..n)
        .map(|i| (Some(&keys[i][..]), Some(&values[i][..])))
        .collect();
    build_batch(0, NOW, (-1, -1, -1), &records)
}

fn bench(c: &mut Criterion) {
    let rules = rules();
    let shapes = [("1KiB", batch(16, 1024)), ("100B", batch(160, 100))];
    let mut g = c.benchmark_group("batch_validation");
    for (shape, plain) in &shapes {
        g.throughput(Throughput::Bytes(plain.len() as u64));
        let header = validate_batch(plain).unwrap();
        validate(plain, &header, &rules).unwrap();
        g.bench_function(format!("header_crc/{shape}"), |b| {
            b.iter(|| validate_batch(black_box(plain)).unwrap())
        });
        g.bench_function(format!("records/{shape}"), |b| {
            b.iter(|| validate(black_box(plain), &header, &rules).unwrap())
        });
        g.bench_function(format!("produce/{shape}"), |b| {
            b.iter(|| {
                let h = validate_batch(black_box(plain)).unwrap();
                validate(plain, &h, &rules).unwrap()
            })
        });
        // Compressed: throughput counted in decompressed (record) bytes, like the uncompressed
        // rows, so the rows compare CPU per GiB of records.
        for codec in Codec::ALL {
            let compressed = compress_batch(plain, codec);
            let h = validate_batch(&compressed).unwrap();
            validate(&compressed, &h, &rules).unwrap();
            g.bench_function(format!("produce/{shape}/{codec:?}"), |b| {
                b.iter(|| {
                    let h = validate_batch(black_box(&compressed)).unwrap();
                    validate(&compressed, &h, &rules).unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
