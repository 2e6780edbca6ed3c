//! Client quotas on the wire (DescribeClientQuotas 48, AlterClientQuotas 49), as Apache Kafka
//! 4.1.2 answers them (the differential corpus compares the same requests with the real broker):
//! both advertised at v0-1, alterations written through the controller and described from the
//! image, validate_only writing nothing, per-entity refusals, and quotas surviving a restart.

use anyhow::Result;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{api_versions_request, TestBroker};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
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

/// DescribeClientQuotas of the user `name` (exact, not strict): sorted (entity, key, value).
async fn user_quotas(
    c: &mut protocol_tests::Client,
    name: &str,
) -> Result<Vec<(String, String, f64)>> {
    let r = c
        .call(
            1,
            &DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
                .with_entity_type(s("user"))
                .with_match_type(0)
                .with_match(Some(s(name)))]),
        )
        .await?;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let mut out = Vec::new();
    for e in r.entries.unwrap_or_default() {
        let entity: Vec<String> = e
            .entity
            .iter()
            .map(|d| {
                let n = d.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                format!("{}={n}", d.entity_type.as_str())
            })
            .collect();
        for v in e.values {
            out.push((entity.join(","), v.key.to_string(), v.value));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Ok(out)
}

#[tokio::test]
async fn quotas_are_advertised_altered_described_and_survive_a_restart() -> Result<()> {
    let mut b = TestBroker::start().await?;
    let mut c = b.connect().await?;
    let versions = c.call(3, &api_versions_request()).await?;
    for key in [48, 49] {
        let k = versions.api_keys.iter().find(|k| k.api_key == key).unwrap();
        assert_eq!((k.min_version, k.max_version), (0, 1), "api key {key}");
    }

    let alice = [("user", Some("alice"))];
    let r = c
        .call(
            1,
            &AlterClientQuotasRequest::default().with_entries(vec![
                entry(
                    &alice,
                    &[
                        ("producer_byte_rate", Some(1024.0)),
                        ("request_percentage", Some(25.5)),
                    ],
                ),
                entry(
                    &[("user", Some("alice")), ("client-id", None)],
                    &[("consumer_byte_rate", Some(2048.0))],
                ),
                entry(
                    &[("user", Some("mallory"))],
                    &[("producer_byte_rate", Some(1.5))],
                ),
            ]),
        )
        .await?;
    let answers: Vec<(i16, Option<String>)> = r
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert_eq!(
        answers,
        vec![
            (0, None),
            (0, None),
            (
                42,
                Some("producer_byte_rate cannot be a fractional value.".into())
            )
        ]
    );
    // The user + default client id entity lists client-id first, as Kafka does.
    let parts: Vec<(String, Option<String>)> = r.entries[1]
        .entity
        .iter()
        .map(|d| {
            (
                d.entity_type.to_string(),
                d.entity_name.as_ref().map(|n| n.to_string()),
            )
        })
        .collect();
    assert_eq!(
        parts,
        vec![
            ("client-id".into(), None),
            ("user".into(), Some("alice".into()))
        ]
    );
    let expected = vec![
        (
            "client-id=<default>,user=alice".to_string(),
            "consumer_byte_rate".to_string(),
            2048.0,
        ),
        (
            "user=alice".to_string(),
            "producer_byte_rate".to_string(),
            1024.0,
        ),
        (
            "user=alice".to_string(),
            "request_percentage".to_string(),
            25.5,
        ),
    ];
    assert_eq!(user_quotas(&mut c, "alice").await?, expected);
    assert!(user_quotas(&mut c, "mallory").await?.is_empty());

    // validate_only answers without writing.
    let r = c
        .call(
            0,
            &AlterClientQuotasRequest::default()
                .with_entries(vec![entry(&alice, &[("producer_byte_rate", None)])])
                .with_validate_only(true),
        )
        .await?;
    assert_eq!(r.entries[0].error_code, 0);
    assert_eq!(user_quotas(&mut c, "alice").await?, expected);

    // The metadata log keeps them across a restart.
    drop(c);
    b.restart(&[]).await?;
    let mut c = b.connect().await?;
    assert_eq!(user_quotas(&mut c, "alice").await?, expected);

    // A removal, then only the rest is described.
    let r = c
        .call(
            1,
            &AlterClientQuotasRequest::default()
                .with_entries(vec![entry(&alice, &[("request_percentage", None)])]),
        )
        .await?;
    assert_eq!(r.entries[0].error_code, 0);
    assert_eq!(user_quotas(&mut c, "alice").await?, expected[..2].to_vec());
    b.shutdown().await;
    Ok(())
}
