//! The simulation is deterministic only if no simulated code reads a wall clock or OS
//! randomness. Simulated modules: this crate's `src/`, and the production code it runs:
//! `quorum/{node,memory,storage,resign}.rs`, `controller/{mod,brokers,topics,state,placement,
//! partition_change,configs,error}.rs`, `metadata/{entry,image,delta,records,codec}.rs` and
//! `metadata/codec/`, `replica/replication/{leader,acks,truncation,epoch_cache}.rs`,
//! `replica/producer_state.rs` and `replica/producer_state/{snapshot,txn}.rs`,
//! `group/{coordinator,offsets,records,classic,pending,mod}.rs` (the group coordinator; of
//! `group/shard.rs` only the pure `coordinator_shard` and `led_shards` run, beside the driver's
//! async waits, so the file is not listed), `txn/{coordinator,end_txn,markers,metadata,records,
//! list,mod}.rs` (the transaction coordinator; `txn/driver.rs` is restated), `share/
//! read_committed.rs` (the consumer's classification of aborted batches) and `log/txn_index.rs`
//! (`collect_overlapping`). (raft-rs
//! draws its randomized election timeout from `thread_rng`; `QuorumNode` overwrites that draw with its seeded one after every call that may make it.)
//! Comment lines are skipped; the `Instant`/`SystemTime` uses of `quorum/mod.rs` (the tokio
//! member, not simulated) are outside the list.

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    "SystemTime",
    "Instant::now",
    "thread_rng",
    "rand::random",
    "tokio::time",
    "std::time::Instant",
];

fn simulated_files() -> Vec<PathBuf> {
    let sim = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = sim.join("..").join("src");
    let mut files: Vec<PathBuf> = std::fs::read_dir(sim.join("src"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    for sub in ["replica", "world"] {
        if let Ok(d) = std::fs::read_dir(sim.join("src").join(sub)) {
            files.extend(d.filter_map(|e| e.ok()).map(|e| e.path()));
        }
    }
    for f in ["node.rs", "memory.rs", "storage.rs", "resign.rs"] {
        files.push(root.join("quorum").join(f));
    }
    for f in [
        "mod.rs",
        "brokers.rs",
        "topics.rs",
        "state.rs",
        "placement.rs",
        "partition_change.rs",
        "configs.rs",
        "error.rs",
    ] {
        files.push(root.join("controller").join(f));
    }
    for f in ["entry.rs", "image.rs", "delta.rs", "records.rs", "codec.rs"] {
        files.push(root.join("metadata").join(f));
    }
    for f in ["leader.rs", "acks.rs", "truncation.rs", "epoch_cache.rs"] {
        files.push(root.join("replica").join("replication").join(f));
    }
    files.push(root.join("replica").join("producer_state.rs"));
    for f in [
        "coordinator.rs",
        "offsets.rs",
        "records.rs",
        "classic.rs",
        "pending.rs",
        "mod.rs",
    ] {
        files.push(root.join("group").join(f));
    }
    for f in ["snapshot.rs", "txn.rs"] {
        files.push(root.join("replica").join("producer_state").join(f));
    }
    // The transaction coordinator (of `txn/driver.rs` only a constant is read: the driver's
    // async glue is restated in `replica/txns.rs`).
    for f in [
        "coordinator.rs",
        "end_txn.rs",
        "markers.rs",
        "metadata.rs",
        "records.rs",
        "list.rs",
        "mod.rs",
    ] {
        files.push(root.join("txn").join(f));
    }
    files.push(root.join("share").join("read_committed.rs"));
    files.push(root.join("log").join("txn_index.rs"));
    if let Ok(d) = std::fs::read_dir(root.join("metadata").join("codec")) {
        files.extend(d.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    files.retain(|f| f.extension().is_some_and(|e| e == "rs"));
    files.sort();
    files
}

/// Forbidden uses in `text` (comment lines skipped): (line number, pattern).
fn forbidden_uses(text: &str) -> Vec<(usize, &'static str)> {
    let mut hits = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for p in FORBIDDEN {
            if line.contains(p) {
                hits.push((n + 1, *p));
            }
        }
    }
    hits
}

#[test]
fn simulated_modules_read_no_wall_clock_or_os_randomness() {
    let files = simulated_files();
    assert!(files.len() >= 20, "the module list went missing: {files:?}");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, p) in forbidden_uses(&text) {
            found.push(format!("{}:{line}: {p}", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "wall clock or OS randomness in simulated code:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_forbidden_use() {
    let text =
        "// std::time::SystemTime in a comment is fine\nlet t = std::time::Instant::now();\n";
    assert_eq!(
        forbidden_uses(text),
        vec![(2, "Instant::now"), (2, "std::time::Instant")]
    );
    let quorum_member = include_str!("../../src/quorum/mod.rs");
    assert!(
        !forbidden_uses(quorum_member).is_empty(),
        "the tokio member uses the clock, so the check must see it"
    );
}
