//! `log::index::OffsetIndex::lookup` on a full-size index (a 1 GiB segment with an entry every 4 KiB:
//! 262,144 entries), the first step of every fetch.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice::log::index::OffsetIndex;

fn bench(c: &mut Criterion) {
    let entries = 262_144u32;
    let mut idx = OffsetIndex::new(1_000_000, entries as usize);
    for i in 0..entries {
        // one entry per 4 records of 1 KiB
        idx.append(1_000_000 + i as i64 * 4, i * 4096);
    }
    assert_eq!(idx.len(), entries as usize);
    let targets: Vec<i64> = (0..1024u64)
        .map(|i| 1_000_000 + ((i * 2_654_435_761) % (entries as u64 * 4)) as i64)
        .collect();
    c.bench_function("offset_index_lookup/262144_entries", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 1023;
            idx.lookup(black_box(targets[i]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
