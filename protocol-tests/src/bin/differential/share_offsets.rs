//! The share-group offsets entries of the differential corpus (DescribeShareGroupOffsets 90,
//! AlterShareGroupOffsets 91, DeleteShareGroupOffsets 92, v0), run while `share.version` is 1 on
//! both brokers: describe of an unknown group, a share consumer (ShareGroupHeartbeat, ShareFetch,
//! ShareAcknowledge v1 with `share.auto.offset.reset=earliest`) that accepts its first record and
//! releases the rest, describe after it, alter and delete refused while it is a member, alter of
//! the emptied group and of a new group (also before the log start and past the log end), delete,
//! and describe after each.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::alter_share_group_offsets_request as asq;
use kafka_protocol::messages::delete_share_group_offsets_request as dsq;
use kafka_protocol::messages::describe_share_group_offsets_request as dsoq;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::share_acknowledge_request as sa;
use kafka_protocol::messages::share_fetch_request as sf;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{metadata_request, topic_name, Client, Uuid};

use crate::corpus::TOPIC;

/// The share group the consumer joins.
const GROUP: &str = "diff-sg";
/// A share group only the admin APIs create.
const NEW_GROUP: &str = "diff-sg-new";
const MEMBER: &str = "diff-share-member-0001";

#[derive(Clone, Copy)]
pub enum ShareOffsetsCase {
    DescribeUnknownGroup,
    DescribeUnknownGroupAll,
    Consume,
    DescribeAfterConsume,
    DescribeAllAfterConsume,
    AlterNonEmpty,
    DescribeAfterAlterNonEmpty,
    DeleteNonEmpty,
    Leave,
    AlterEmpty,
    DescribeAfterAlter,
    AlterNewGroupBeforeLogStart,
    AlterNewGroupPastLogEnd,
    DescribeNewGroup,
    Delete,
    DescribeAfterDelete,
    DescribeAllAfterDelete,
    DeleteUnknownGroup,
}

pub(crate) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(crate) fn render<T: std::fmt::Debug>(r: T) -> String {
    format!("{r:#?}")
}

/// A topic a describe names, with its partitions.
type Named<'a> = (&'a str, &'a [i32]);

fn describe(groups: &[(&str, Option<&[Named]>)]) -> DescribeShareGroupOffsetsRequest {
    DescribeShareGroupOffsetsRequest::default().with_groups(
        groups
            .iter()
            .map(|(g, topics)| {
                dsoq::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(s(g)))
                    .with_topics(topics.map(|ts| {
                        ts.iter()
                            .map(|(t, ps)| {
                                dsoq::DescribeShareGroupOffsetsRequestTopic::default()
                                    .with_topic_name(topic_name(t))
                                    .with_partitions(ps.to_vec())
                            })
                            .collect()
                    }))
            })
            .collect(),
    )
}

/// A describe answer with its topics sorted by name (Kafka answers an all-topics describe in
/// the order of a hash map).
fn render_describe(mut r: DescribeShareGroupOffsetsResponse) -> String {
    for g in &mut r.groups {
        g.topics.sort_by(|a, b| a.topic_name.cmp(&b.topic_name));
        for t in &mut g.topics {
            t.partitions.sort_by_key(|p| p.partition_index);
        }
    }
    render(r)
}

fn alter(group: &str, topics: &[(&str, &[(i32, i64)])]) -> AlterShareGroupOffsetsRequest {
    AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    asq::AlterShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(topic_name(t))
                        .with_partitions(
                            ps.iter()
                                .map(|(p, o)| {
                                    asq::AlterShareGroupOffsetsRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_start_offset(*o)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

fn delete(group: &str, topics: &[&str]) -> DeleteShareGroupOffsetsRequest {
    DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    dsq::DeleteShareGroupOffsetsRequestTopic::default()
                        .with_topic_name(topic_name(t))
                })
                .collect(),
        )
}

async fn heartbeat(c: &mut Client, epoch: i32) -> Result<ShareGroupHeartbeatResponse> {
    let mut req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(GROUP)))
        .with_member_id(s(MEMBER))
        .with_member_epoch(epoch);
    if epoch == 0 {
        req.subscribed_topic_names = Some(vec![topic_name(TOPIC)]);
    }
    c.call(1, &req).await
}

/// The topic id of [`TOPIC`] on this broker.
pub(crate) async fn topic_id(c: &mut Client) -> Result<Uuid> {
    let m: MetadataResponse = c.call(12, &metadata_request(&[TOPIC], false)).await?;
    m.topics
        .first()
        .map(|t| t.topic_id)
        .context("no metadata of the topic")
}

/// Joins [`GROUP`] (earliest), waits for partition 0, acquires its records, accepts the first
/// one and releases the rest. Renders what both brokers must agree on: the acquired ranges with
/// their delivery counts and the acknowledgement's error codes.
async fn consume(c: &mut Client) -> Result<String> {
    let config = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s(GROUP))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s("share.auto.offset.reset"))
                .with_config_operation(0)
                .with_value(Some(s("earliest")))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(1, &config).await?;
    if r.responses.first().map(|r| r.error_code) != Some(0) {
        bail!("share.auto.offset.reset: {:?}", r.responses);
    }
    let id = topic_id(c).await?;
    let mut hb = heartbeat(c, 0).await?;
    for _ in 0..100 {
        if hb.error_code != 0 {
            bail!("heartbeat: {} {:?}", hb.error_code, hb.error_message);
        }
        let assigned = hb
            .assignment
            .as_ref()
            .is_some_and(|a| a.topic_partitions.iter().any(|t| t.topic_id == id));
        if assigned {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        hb = heartbeat(c, hb.member_epoch).await?;
    }
    let mut epoch = 0;
    let mut acquired = Vec::new();
    for _ in 0..40 {
        let req = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s(GROUP))))
            .with_member_id(Some(s(MEMBER)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(250)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(500)
            .with_batch_size(500)
            .with_topics(vec![sf::FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![
                    sf::FetchPartition::default().with_partition_index(0)
                ])]);
        let r: ShareFetchResponse = c.call(1, &req).await?;
        epoch += 1;
        if r.error_code != 0 {
            bail!("share fetch: {} {:?}", r.error_code, r.error_message);
        }
        acquired = r
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .flat_map(|p| p.acquired_records.iter())
            .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
            .collect();
        if !acquired.is_empty() {
            break;
        }
    }
    let (Some(first), Some(last)) = (acquired.first(), acquired.last()) else {
        bail!("no records acquired");
    };
    let (first, last) = (first.0, last.1);
    let batches = vec![sa::AcknowledgementBatch::default()
        .with_first_offset(first)
        .with_last_offset(last)
        .with_acknowledge_types(vec![1])];
    let ack = ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(MEMBER)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![sa::AcknowledgeTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![sa::AcknowledgePartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(batches)])]);
    let r: ShareAcknowledgeResponse = c.call(1, &ack).await?;
    let partition_codes: Vec<i16> = r
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    Ok(format!(
        "acquired {acquired:?}\nacknowledge error {} partitions {partition_codes:?}",
        r.error_code
    ))
}

/// Sends `case`'s request and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: ShareOffsetsCase) -> Result<String> {
    use ShareOffsetsCase as S;
    let t0: &[Named] = &[(TOPIC, &[0]), ("diff-share-nope", &[0])];
    Ok(match case {
        S::DescribeUnknownGroup => {
            render_describe(c.call(0, &describe(&[("diff-sg-none", Some(t0))])).await?)
        }
        S::DescribeUnknownGroupAll => {
            render_describe(c.call(0, &describe(&[("diff-sg-none", None)])).await?)
        }
        S::Consume => consume(c).await?,
        S::DescribeAfterConsume
        | S::DescribeAfterAlterNonEmpty
        | S::DescribeAfterAlter
        | S::DescribeAfterDelete => {
            render_describe(c.call(0, &describe(&[(GROUP, Some(t0))])).await?)
        }
        S::DescribeAllAfterConsume | S::DescribeAllAfterDelete => {
            render_describe(c.call(0, &describe(&[(GROUP, None)])).await?)
        }
        S::AlterNonEmpty => render(c.call(0, &alter(GROUP, &[(TOPIC, &[(0, 5)])])).await?),
        S::DeleteNonEmpty => render(c.call(0, &delete(GROUP, &[TOPIC])).await?),
        S::Leave => {
            let r = heartbeat(c, -1).await?;
            format!(
                "error {} epoch {} message {:?}",
                r.error_code, r.member_epoch, r.error_message
            )
        }
        S::AlterEmpty => {
            let r = alter(
                GROUP,
                &[(TOPIC, &[(0, 3), (5, 0)]), ("diff-share-nope", &[(0, 0)])],
            );
            render(c.call(0, &r).await?)
        }
        S::AlterNewGroupBeforeLogStart => {
            render(c.call(0, &alter(NEW_GROUP, &[(TOPIC, &[(0, 0)])])).await?)
        }
        S::AlterNewGroupPastLogEnd => render(
            c.call(0, &alter(NEW_GROUP, &[(TOPIC, &[(0, 1000)])]))
                .await?,
        ),
        S::DescribeNewGroup => render_describe(
            c.call(0, &describe(&[(NEW_GROUP, Some(t0)), (GROUP, None)]))
                .await?,
        ),
        S::Delete => render(
            c.call(0, &delete(GROUP, &[TOPIC, "diff-share-nope"]))
                .await?,
        ),
        S::DeleteUnknownGroup => render(c.call(0, &delete("diff-sg-none", &[TOPIC])).await?),
    })
}
