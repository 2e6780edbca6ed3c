//! Differential test: the same requests to Sluice (in-process, fresh data directory) and to a
//! reference Kafka (`--kafka HOST:PORT`, started by `scripts/differential` with
//! `scripts/kafka-reference`), the answers decoded with `kafka-protocol` and compared field by
//! field. Fields in [`ALLOWED`] differ by design (identities, addresses, throttle times) and are
//! masked; any other difference is reported and makes the run fail.
//!
//! The comparison walks the pretty `Debug` rendering of the decoded responses: one line per field,
//! nested structures indented, so a field is named by its path and masked by its name; a masked
//! name that opens a structure or list masks all of it.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    BrokerId, DescribeConfigsRequest, FindCoordinatorRequest, GroupId, ListOffsetsRequest,
    OffsetCommitRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, batch, create_topics_request, fetch_request, metadata_request,
    produce_request, topic_name, Client, TestBroker, Uuid,
};

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
];

const TOPIC: &str = "diff-t";
const GROUP: &str = "diff-g";
const VALUES: &[&[u8]] = &[b"differential-1", b"differential-2"];
const TIMESTAMP: i64 = 1_700_000_000_000;

/// One corpus entry: a name and the request it sends.
#[derive(Clone, Copy)]
enum Case {
    ApiVersions,
    CreateTopicInvalidName,
    CreateTopicZeroPartitions,
    CreateTopicExists,
    Metadata,
    Produce,
    FetchFromStart,
    FetchOutOfRange,
    FetchOutOfRangeClassic,
    ListOffsetsEarliest,
    ListOffsetsLatest,
    ListOffsetsByTimestamp,
    OffsetCommit,
    OffsetFetch,
    DescribeConfigsTopic,
}

const CORPUS: &[(&str, Case)] = &[
    ("ApiVersions v3", Case::ApiVersions),
    ("CreateTopics v7 invalid name", Case::CreateTopicInvalidName),
    (
        "CreateTopics v7 zero partitions",
        Case::CreateTopicZeroPartitions,
    ),
    ("CreateTopics v7 existing topic", Case::CreateTopicExists),
    ("Metadata v12 of a created topic", Case::Metadata),
    ("Produce v11 of a known batch", Case::Produce),
    ("Fetch v12 from offset 0", Case::FetchFromStart),
    ("Fetch v12 at an out-of-range offset", Case::FetchOutOfRange),
    (
        "Fetch v4 at an out-of-range offset",
        Case::FetchOutOfRangeClassic,
    ),
    ("ListOffsets v8 earliest", Case::ListOffsetsEarliest),
    ("ListOffsets v8 latest", Case::ListOffsetsLatest),
    ("ListOffsets v8 by timestamp", Case::ListOffsetsByTimestamp),
    ("OffsetCommit v8 (simple group)", Case::OffsetCommit),
    ("OffsetFetch v8 (simple group)", Case::OffsetFetch),
    (
        "DescribeConfigs v4 of two topic keys",
        Case::DescribeConfigsTopic,
    ),
];

fn list_offsets(timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])])
}

/// Sends `case`'s request and renders the decoded answer.
async fn exchange(c: &mut Client, case: Case) -> Result<String> {
    let s = match case {
        Case::ApiVersions => format!("{:#?}", c.call(3, &api_versions_request()).await?),
        Case::CreateTopicInvalidName => format!(
            "{:#?}",
            c.call(7, &create_topics_request("bad/name", 1, 1, &[]))
                .await?
        ),
        Case::CreateTopicZeroPartitions => format!(
            "{:#?}",
            c.call(7, &create_topics_request("diff-zero", 0, 1, &[]))
                .await?
        ),
        Case::CreateTopicExists => format!(
            "{:#?}",
            c.call(7, &create_topics_request(TOPIC, 1, 1, &[])).await?
        ),
        Case::Metadata => format!(
            "{:#?}",
            c.call(12, &metadata_request(&[TOPIC], false)).await?
        ),
        Case::Produce => {
            let r = produce_request(TOPIC, 0, -1, Bytes::from(known_batch()));
            format!("{:#?}", c.call(11, &r).await?)
        }
        Case::FetchFromStart => {
            let r = fetch_request(12, TOPIC, Uuid::nil(), 0, 0, 0, 1);
            format!("{:#?}", c.call(12, &r).await?)
        }
        Case::FetchOutOfRange => {
            let r = fetch_request(12, TOPIC, Uuid::nil(), 0, 1000, 0, 1);
            format!("{:#?}", c.call(12, &r).await?)
        }
        Case::FetchOutOfRangeClassic => {
            let r = fetch_request(4, TOPIC, Uuid::nil(), 0, 1000, 0, 1);
            format!("{:#?}", c.call(4, &r).await?)
        }
        Case::ListOffsetsEarliest => format!("{:#?}", c.call(8, &list_offsets(-2)).await?),
        Case::ListOffsetsLatest => format!("{:#?}", c.call(8, &list_offsets(-1)).await?),
        Case::ListOffsetsByTimestamp => {
            format!("{:#?}", c.call(8, &list_offsets(TIMESTAMP)).await?)
        }
        Case::OffsetCommit => {
            let r = OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1)
                        .with_committed_leader_epoch(-1)
                        .with_committed_metadata(Some(StrBytes::from_static_str("m")))])]);
            format!("{:#?}", c.call(8, &r).await?)
        }
        Case::OffsetFetch => {
            let r =
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(topic_name(TOPIC))
                        .with_partition_indexes(vec![0])]))]);
            format!("{:#?}", c.call(8, &r).await?)
        }
        Case::DescribeConfigsTopic => {
            let keys = ["retention.ms", "cleanup.policy"]
                .map(StrBytes::from_static_str)
                .to_vec();
            let r = DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str(TOPIC))
                    .with_configuration_keys(Some(keys)),
            ]);
            format!("{:#?}", c.call(4, &r).await?)
        }
    };
    Ok(s)
}

/// The batch both brokers store: plain, two records, a fixed CreateTime.
fn known_batch() -> Vec<u8> {
    let records: Vec<_> = VALUES.iter().map(|v| (None, Some(*v))).collect();
    sluice::record::build_batch(0, TIMESTAMP, (-1, -1, -1), &records)
}

/// Creates the topic and produces the known batch once, retrying while a new topic's leader is
/// not known yet (Kafka answers UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER for a moment).
async fn setup(c: &mut Client) -> Result<()> {
    let r = c.call(7, &create_topics_request(TOPIC, 1, 1, &[])).await?;
    let code = r.topics.first().map_or(-1, |t| t.error_code);
    if code != 0 {
        bail!("creating {TOPIC}: error {code}");
    }
    for _ in 0..100 {
        let r = produce_request(TOPIC, 0, -1, Bytes::from(batch(VALUES)));
        let r = c.call(11, &r).await?;
        let code = r.responses[0].partition_responses[0].error_code;
        match code {
            0 => return Ok(()),
            3 | 5 | 6 => tokio::time::sleep(Duration::from_millis(100)).await,
            e => bail!("producing the setup batch: error {e}"),
        }
    }
    bail!("{TOPIC} had no leader after 10 s")
}

/// Waits until the group coordinator of the corpus's group answers (Kafka creates
/// `__consumer_offsets` on the first FindCoordinator and loads it before it answers).
async fn find_coordinator(c: &mut Client) -> Result<()> {
    for _ in 0..150 {
        let r = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_static_str(GROUP)]);
        let r = c.call(4, &r).await?;
        match r.coordinators.first().map_or(-1, |c| c.error_code) {
            0 => {
                // and the coordinator has loaded it: a commit no longer answers 14/15/16
                let commit = exchange(c, Case::OffsetCommit).await?;
                if !["error_code: 14", "error_code: 15", "error_code: 16"]
                    .iter()
                    .any(|e| commit.contains(e))
                {
                    return Ok(());
                }
            }
            15 => {}
            e => bail!("FindCoordinator: error {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("no group coordinator after 15 s")
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let kafka_addr = match (args.next().as_deref(), args.next()) {
        (Some("--kafka"), Some(a)) => a,
        _ => bail!("usage: differential --kafka HOST:PORT"),
    };
    let broker = TestBroker::start().await?;
    let mut sluice = broker.connect().await?;
    let mut kafka = Client::connect(kafka_addr.parse().context("--kafka address")?).await?;
    setup(&mut sluice).await.context("sluice setup")?;
    setup(&mut kafka).await.context("kafka setup")?;
    find_coordinator(&mut sluice)
        .await
        .context("sluice coordinator")?;
    find_coordinator(&mut kafka)
        .await
        .context("kafka coordinator")?;

    println!(
        "differential: {} corpus entries; allowed differences:",
        CORPUS.len()
    );
    for (name, why) in ALLOWED {
        println!("  {name}: {why}");
    }
    let mut failed = 0;
    for &(name, case) in CORPUS {
        let s = normalise(
            &exchange(&mut sluice, case)
                .await
                .with_context(|| format!("sluice: {name}"))?,
        );
        let k = normalise(
            &exchange(&mut kafka, case)
                .await
                .with_context(|| format!("kafka: {name}"))?,
        );
        let diff = differences(&s, &k);
        if diff.is_empty() {
            println!("same  {name}");
        } else {
            failed += 1;
            println!("DIFF  {name} ({} lines)", diff.len());
            for d in diff.iter().take(16) {
                println!("{d}");
            }
        }
    }
    println!(
        "differential: {} passed, {failed} failed",
        CORPUS.len() - failed
    );
    broker.shutdown().await;
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
