//! Differential test: the same requests to Sluice (in-process, fresh data directory) and to a
//! reference Kafka (`--kafka HOST:PORT`, started by `scripts/differential` with
//! `scripts/kafka-reference`), the answers decoded with `kafka-protocol` and compared field by
//! field. Fields in [`ALLOWED`] differ by design (identities, addresses, throttle times) and are
//! masked; any other difference is reported and makes the run fail.
//!
//! The comparison walks the pretty `Debug` rendering of the decoded responses: one line per field,
//! nested structures indented, so a field is named by its path and masked by its name; a masked
//! name that opens a structure or list masks all of it. An entry listed in [`KNOWN`] differs by
//! design and is reported, not failed. The corpus is the built entries of [`corpus::CORPUS`]
//! followed by the client frames of [`captured`], on one connection per broker, in order.

mod admin;
mod captured;
mod corpus;
mod features;
mod quotas;
mod scram;
mod share_offsets;
mod share_state;
mod throttling;

use anyhow::{bail, Context, Result};
use protocol_tests::{Client, TestBroker};
use sluice::config::Value;

use corpus::{exchange, find_coordinator, setup, CORPUS};

/// Field names whose values differ between two correct brokers, and why.
const ALLOWED: &[(&str, &str)] = &[
    ("throttle_time_ms", "quota throttling is broker-local"),
    ("cluster_id", "each broker formats its own cluster"),
    ("controller_id", "KRaft controller id vs Sluice's node id"),
    ("node_id", "broker identity"),
    ("host", "advertised address"),
    ("port", "advertised address"),
    ("rack", "broker rack"),
    ("topic_id", "random per topic creation"),
    (
        "api_keys",
        "ApiVersions: each broker advertises what it implements",
    ),
    (
        "supported_features",
        "ApiVersions: feature levels differ by design",
    ),
    (
        "finalized_features",
        "ApiVersions: feature levels differ by design",
    ),
    ("finalized_features_epoch", "ApiVersions: metadata epoch"),
    ("zk_migration_ready", "ApiVersions: KRaft migration state"),
    (
        "documentation",
        "DescribeConfigs: Sluice writes its own documentation text",
    ),
    ("session_id", "fetch sessions are broker-local"),
    (
        "producer_id",
        "InitProducerId: each broker allocates producer ids from its own block",
    ),
    (
        "member_id",
        "JoinGroup: the coordinator generates a member id per join",
    ),
];

/// Entries whose answers differ by design, and why: reported as KNOWN, not failed (and as
/// "same" once they agree, so a stale entry shows).
const KNOWN: &[(&str, &str)] = &[
    (
        "Fetch v12 max_bytes one and a half batches",
        "Kafka cuts the byte range at max_bytes inside the second batch (its FileRecords slice); \
         Sluice stops at the last whole batch. Clients drop a partial trailing batch, so the \
         records delivered are the same",
    ),
    (
        "DescribeShareGroupOffsets v0 after the share consumer",
        "Kafka 4.1.2 describes the start offset its share-partition last persisted, which is the one before that acknowledgement moved it (it writes the state, then advances the start offset in memory: after accepting every acquired record it still reports the first one); Sluice persists and reports the start offset after the acknowledgement",
    ),
    (
        "DescribeShareGroupOffsets v0 all topics after the share consumer",
        "Kafka 4.1.2 describes the start offset its share-partition last persisted, which is the one before that acknowledgement moved it (it writes the state, then advances the start offset in memory: after accepting every acquired record it still reports the first one); Sluice persists and reports the start offset after the acknowledgement",
    ),
    (
        "AlterShareGroupOffsets v0 of a group with a member",
        "Kafka 4.1.2 leaves out every topic of an AlterShareGroupOffsets that exists (only the unknown topics are answered, with error 0 at the top, members or not) and changes no share state (describe afterwards shows the old start offsets, -1 for a new group); Sluice applies the alter as Kafka's group coordinator is written to: NON_EMPTY_GROUP while the group has members, otherwise each existing partition's start offset set and answered",
    ),
    (
        "DescribeShareGroupOffsets v0 after the refused alter",
        "the start offset after the share consumer differs (see that entry)",
    ),
    (
        "AlterShareGroupOffsets v0 of the empty group (and unknown partitions)",
        "Kafka 4.1.2 leaves out every topic of an AlterShareGroupOffsets that exists (only the unknown topics are answered, with error 0 at the top, members or not) and changes no share state (describe afterwards shows the old start offsets, -1 for a new group); Sluice applies the alter as Kafka's group coordinator is written to: NON_EMPTY_GROUP while the group has members, otherwise each existing partition's start offset set and answered",
    ),
    (
        "DescribeShareGroupOffsets v0 after alter",
        "the alter before it changed the state on Sluice only (see the alter entries)",
    ),
    (
        "AlterShareGroupOffsets v0 of a new group before the log start",
        "Kafka 4.1.2 leaves out every topic of an AlterShareGroupOffsets that exists (only the unknown topics are answered, with error 0 at the top, members or not) and changes no share state (describe afterwards shows the old start offsets, -1 for a new group); Sluice applies the alter as Kafka's group coordinator is written to: NON_EMPTY_GROUP while the group has members, otherwise each existing partition's start offset set and answered",
    ),
    (
        "AlterShareGroupOffsets v0 of a new group past the log end",
        "Kafka 4.1.2 leaves out every topic of an AlterShareGroupOffsets that exists (only the unknown topics are answered, with error 0 at the top, members or not) and changes no share state (describe afterwards shows the old start offsets, -1 for a new group); Sluice applies the alter as Kafka's group coordinator is written to: NON_EMPTY_GROUP while the group has members, otherwise each existing partition's start offset set and answered",
    ),
    (
        "DescribeShareGroupOffsets v0 of the new group and all of the other",
        "the alter before it changed the state on Sluice only (see the alter entries)",
    ),
    (
        "captured: java-4.1.2/ListGroups-v5",
        "Kafka 4.1.2 does not list the group diff-captured, whose only join (the replayed \
         JoinGroup) was answered MEMBER_ID_REQUIRED and wrote no record (its ListGroups reads \
         the coordinator's committed state); Sluice lists it as an Empty classic group",
    ),
];

/// Kafka 4.x formats a new cluster with a cluster-level dynamic `min.insync.replicas` (its
/// eligible-leader-replicas default, KIP-966), which topics then describe as
/// DYNAMIC_DEFAULT_BROKER_CONFIG; the same alter on Sluice gives both brokers that state.
async fn mirror_reference_format(c: &mut Client) -> Result<()> {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let r = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_static_str("1")))]),
    ]);
    let answer = c.call(1, &r).await?;
    match answer.responses.first().map(|r| r.error_code) {
        Some(0) => Ok(()),
        other => bail!("IncrementalAlterConfigs: {other:?}"),
    }
}

/// Masks the values of [`ALLOWED`] fields (whole subtrees for structures and lists).
fn normalise(rendered: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_deeper_than: Option<usize> = None;
    for line in rendered.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(depth) = skip_deeper_than {
            if indent > depth {
                continue;
            }
            skip_deeper_than = None;
            if line.trim_start().starts_with(['}', ']', ')']) {
                continue;
            }
        }
        let trimmed = line.trim_start();
        let name = trimmed.split(':').next().unwrap_or("");
        if ALLOWED.iter().any(|(n, _)| *n == name) && trimmed.contains(": ") {
            out.push(format!("{}{name}: <allowed>", &line[..indent]));
            if trimmed.ends_with('{') || trimmed.ends_with('[') || trimmed.ends_with('(') {
                skip_deeper_than = Some(indent);
            }
            continue;
        }
        out.push(line.to_string());
    }
    out
}

/// The lines only one side has, by a longest-common-subsequence alignment of the two
/// normalised renderings ("-" Sluice only, "+" Kafka only).
fn differences(sluice: &[String], kafka: &[String]) -> Vec<String> {
    let (n, m) = (sluice.len(), kafka.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if sluice[i] == kafka[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && sluice[i] == kafka[j] {
            i += 1;
            j += 1;
        } else if j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("    - sluice {}", sluice[i].trim()));
            i += 1;
        } else {
            out.push(format!("    + kafka  {}", kafka[j].trim()));
            j += 1;
        }
    }
    out
}

/// Prints one entry's verdict (and its differing lines); returns 1 when they differ. With
/// `DIFFERENTIAL_DUMP=<dir>` both renderings of a differing entry are written there (of every
/// entry with `DIFFERENTIAL_DUMP_ALL=1` too).
fn report(name: &str, sluice: &str, kafka: &str) -> usize {
    let diff = differences(&normalise(sluice), &normalise(kafka));
    let known = KNOWN.iter().any(|(n, _)| *n == name);
    let dump = !diff.is_empty() || std::env::var_os("DIFFERENTIAL_DUMP_ALL").is_some();
    if let (true, Some(dir)) = (dump, std::env::var_os("DIFFERENTIAL_DUMP")) {
        let file: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = std::path::Path::new(&dir);
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(dir.join(format!("{file}.sluice")), sluice);
        let _ = std::fs::write(dir.join(format!("{file}.kafka")), kafka);
    }
    if diff.is_empty() {
        let stale = if known {
            " (listed in KNOWN: remove it)"
        } else {
            ""
        };
        println!("same  {name}{stale}");
        return 0;
    }
    let verdict = if known { "KNOWN" } else { "DIFF " };
    println!("{verdict} {name} ({} lines)", diff.len());
    for d in diff.iter().take(24) {
        println!("{d}");
    }
    usize::from(!known)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let kafka_addr = match (args.next().as_deref(), args.next()) {
        (Some("--kafka"), Some(a)) => a,
        _ => bail!("usage: differential --kafka HOST:PORT"),
    };
    // As scripts/kafka-reference configures Kafka: no fsync by message count (a static broker config)
    let broker =
        TestBroker::start_with(&[("log.flush.interval.messages", Value::Int(i64::MAX))]).await?;
    let mut sluice = broker.connect().await?;
    let mut kafka = Client::connect(kafka_addr.parse().context("--kafka address")?).await?;
    setup(&mut sluice).await.context("sluice setup")?;
    mirror_reference_format(&mut sluice)
        .await
        .context("sluice: cluster-level min.insync.replicas")?;
    setup(&mut kafka).await.context("kafka setup")?;
    find_coordinator(&mut sluice)
        .await
        .context("sluice coordinator")?;
    find_coordinator(&mut kafka)
        .await
        .context("kafka coordinator")?;

    let replayed = captured::frames()?;
    let total = CORPUS.len() + replayed.len();
    println!(
        "differential: {total} corpus entries ({} built, {} captured from clients); allowed differences:",
        CORPUS.len(),
        replayed.len()
    );
    for (name, why) in ALLOWED {
        println!("  {name}: {why}");
    }
    println!("known differences (entries):");
    for (name, why) in KNOWN {
        println!("  {name}: {why}");
    }
    let mut failed = 0;
    for &(name, case) in CORPUS {
        let s = exchange(&mut sluice, case)
            .await
            .with_context(|| format!("sluice: {name}"))?;
        let k = exchange(&mut kafka, case)
            .await
            .with_context(|| format!("kafka: {name}"))?;
        failed += report(name, &s, &k);
    }
    for frame in &replayed {
        let name = format!("captured: {}", frame.name);
        let s = frame
            .replay(&mut sluice)
            .await
            .with_context(|| format!("sluice: {name}"))?;
        let k = frame
            .replay(&mut kafka)
            .await
            .with_context(|| format!("kafka: {name}"))?;
        failed += report(&name, &s, &k);
    }
    println!("differential: {} passed, {failed} failed", total - failed);
    broker.shutdown().await;
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
