//! The client quota entries of the differential corpus: AlterClientQuotas (accepted, refused,
//! validate-only, removals) and DescribeClientQuotas filters (exact, default, any, strict, and
//! the filters Kafka refuses). Kafka lists entries, entity parts and values from hash maps, so
//! each answer is rendered with those lists sorted.

use anyhow::Result;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::Client;

#[derive(Clone, Copy)]
pub enum QuotaCase {
    AlterSet,
    AlterMore,
    AlterRefused,
    AlterValidateOnly,
    DescribeValidateOnly,
    DescribeAll,
    DescribeUserExact,
    DescribeUserExactStrict,
    DescribeUserDefault,
    DescribeUserAndClientAnyStrict,
    DescribeClientDefaultV0,
    DescribeDuplicateType,
    DescribeUnsupportedType,
    DescribeExactWithoutName,
    DescribeIpWithUser,
    DescribeUnknownMatchType,
    AlterRemove,
    DescribeAfterRemove,
    AlterIpV0,
    DescribeIpAny,
}

/// An entity part: (type, name or None for the default).
type Part = (&'static str, Option<&'static str>);
/// An op: (key, value or None to remove).
type Op = (&'static str, Option<f64>);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn entry(entity: &[Part], ops: &[Op]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn alter(entries: Vec<EntryData>, validate_only: bool) -> AlterClientQuotasRequest {
    AlterClientQuotasRequest::default()
        .with_entries(entries)
        .with_validate_only(validate_only)
}

/// A filter component: (type, match type, match).
fn describe(components: &[(&str, i8, Option<&str>)], strict: bool) -> DescribeClientQuotasRequest {
    DescribeClientQuotasRequest::default()
        .with_components(
            components
                .iter()
                .map(|(t, m, name)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(*m)
                        .with_match(name.map(s))
                })
                .collect(),
        )
        .with_strict(strict)
}

fn render_alter(mut r: AlterClientQuotasResponse) -> String {
    for e in &mut r.entries {
        e.entity
            .sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    }
    r.entries
        .sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    format!("{r:#?}")
}

fn render_describe(mut r: DescribeClientQuotasResponse) -> String {
    if let Some(entries) = &mut r.entries {
        for e in entries.iter_mut() {
            e.entity
                .sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            e.values.sort_by(|a, b| a.key.cmp(&b.key));
        }
        entries.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    }
    format!("{r:#?}")
}

/// AlterClientQuotas, then a pause: Kafka answers once the controller committed the records,
/// and its broker applies them to the cache DescribeClientQuotas reads a moment later.
async fn altered(
    c: &mut Client,
    version: i16,
    r: &AlterClientQuotasRequest,
) -> Result<AlterClientQuotasResponse> {
    let answer = c.call(version, r).await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    Ok(answer)
}

const USER: &str = "user";
const CLIENT: &str = "client-id";
const IP: &str = "ip";
const ALICE: &[Part] = &[(USER, Some("diff-alice"))];

/// Sends `case`'s request and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: QuotaCase) -> Result<String> {
    use QuotaCase as Q;
    let d = |components: &[(&str, i8, Option<&str>)], strict| describe(components, strict);
    Ok(match case {
        Q::AlterSet => {
            let r = alter(
                vec![entry(
                    ALICE,
                    &[
                        ("producer_byte_rate", Some(1024.0)),
                        ("request_percentage", Some(12.5)),
                    ],
                )],
                false,
            );
            render_alter(altered(c, 1, &r).await?)
        }
        Q::AlterMore => {
            let r = alter(
                vec![
                    entry(&[(CLIENT, None)], &[("consumer_byte_rate", Some(2048.0))]),
                    entry(
                        &[(USER, Some("diff-alice")), (CLIENT, Some("diff-app"))],
                        &[("controller_mutation_rate", Some(0.5))],
                    ),
                    entry(&[(USER, None)], &[("producer_byte_rate", Some(4096.0))]),
                ],
                false,
            );
            render_alter(altered(c, 1, &r).await?)
        }
        Q::AlterRefused => {
            let rate = &[("producer_byte_rate", Some(100.0))][..];
            let r = alter(
                vec![
                    entry(&[], rate),
                    entry(&[("group", Some("g"))], rate),
                    entry(&[(USER, Some(""))], rate),
                    entry(&[(IP, Some("10.1.1.1")), (USER, Some("u1"))], rate),
                    entry(&[(IP, Some("10.1.1.2"))], rate),
                    entry(&[(USER, Some("u2"))], &[("producer_byte_rate", Some(0.0))]),
                    entry(&[(USER, Some("u3"))], &[("consumer_byte_rate", Some(10.5))]),
                    entry(&[(USER, Some("u4"))], &[("request_percentage", Some(-1.0))]),
                    entry(
                        &[(IP, Some("10.1.1.3"))],
                        &[("connection_creation_rate", Some(3e9))],
                    ),
                    entry(&[(USER, Some("u5"))], &[("producer_byte_rate", Some(1e19))]),
                    entry(
                        &[(USER, Some("u6"))],
                        &[
                            ("producer_byte_rate", Some(1.0)),
                            ("producer_byte_rate", Some(2.0)),
                        ],
                    ),
                    entry(&[(USER, Some("u7"))], &[("SCRAM-SHA-256", Some(1.0))]),
                    entry(&[(CLIENT, Some("c1"))], &[("bogus", Some(1.0))]),
                ],
                false,
            );
            render_alter(altered(c, 1, &r).await?)
        }
        Q::AlterValidateOnly => {
            let r = alter(
                vec![
                    entry(
                        &[(USER, Some("diff-bob"))],
                        &[("producer_byte_rate", Some(7.0))],
                    ),
                    entry(
                        &[(USER, Some("diff-carol"))],
                        &[("producer_byte_rate", Some(-7.0))],
                    ),
                ],
                true,
            );
            render_alter(altered(c, 1, &r).await?)
        }
        Q::DescribeValidateOnly => {
            render_describe(c.call(1, &d(&[(USER, 0, Some("diff-bob"))], false)).await?)
        }
        Q::DescribeAll => render_describe(c.call(1, &d(&[], false)).await?),
        Q::DescribeUserExact => render_describe(
            c.call(1, &d(&[(USER, 0, Some("diff-alice"))], false))
                .await?,
        ),
        Q::DescribeUserExactStrict => render_describe(
            c.call(1, &d(&[(USER, 0, Some("diff-alice"))], true))
                .await?,
        ),
        Q::DescribeUserDefault => render_describe(c.call(1, &d(&[(USER, 1, None)], false)).await?),
        Q::DescribeUserAndClientAnyStrict => render_describe(
            c.call(1, &d(&[(USER, 2, None), (CLIENT, 2, None)], true))
                .await?,
        ),
        Q::DescribeClientDefaultV0 => {
            render_describe(c.call(0, &d(&[(CLIENT, 1, None)], false)).await?)
        }
        Q::DescribeDuplicateType => render_describe(
            c.call(1, &d(&[(USER, 2, None), (USER, 1, None)], false))
                .await?,
        ),
        Q::DescribeUnsupportedType => {
            render_describe(c.call(1, &d(&[("group", 2, None)], false)).await?)
        }
        Q::DescribeExactWithoutName => {
            render_describe(c.call(1, &d(&[(USER, 0, None)], false)).await?)
        }
        Q::DescribeIpWithUser => render_describe(
            c.call(1, &d(&[(IP, 2, None), (USER, 1, None)], false))
                .await?,
        ),
        Q::DescribeUnknownMatchType => {
            render_describe(c.call(1, &d(&[(USER, 5, None)], false)).await?)
        }
        Q::AlterRemove => {
            let r = alter(
                vec![entry(
                    ALICE,
                    &[("request_percentage", None), ("consumer_byte_rate", None)],
                )],
                false,
            );
            render_alter(altered(c, 1, &r).await?)
        }
        Q::DescribeAfterRemove => render_describe(
            c.call(1, &d(&[(USER, 0, Some("diff-alice"))], true))
                .await?,
        ),
        Q::AlterIpV0 => {
            let r = alter(
                vec![
                    entry(
                        &[(IP, Some("10.0.0.1"))],
                        &[("connection_creation_rate", Some(5.0))],
                    ),
                    entry(&[(IP, None)], &[("connection_creation_rate", Some(50.0))]),
                    entry(
                        &[(IP, Some("10.0.0.2"))],
                        &[("connection_creation_rate", Some(1.5))],
                    ),
                ],
                false,
            );
            render_alter(altered(c, 0, &r).await?)
        }
        Q::DescribeIpAny => {
            // Kafka's broker applies the committed quota records asynchronously: ask again
            // until the IP entities of the entries before show, for up to 5 s
            let r = d(&[(IP, 2, None)], false);
            let mut answer: DescribeClientQuotasResponse = c.call(1, &r).await?;
            for _ in 0..50 {
                if answer.entries.as_ref().is_some_and(|e| !e.is_empty()) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                answer = c.call(1, &r).await?;
            }
            render_describe(answer)
        }
    })
}
