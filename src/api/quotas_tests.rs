use kafka_protocol::messages::describe_client_quotas_request::ComponentData;

use super::*;
use crate::metadata::quotas::{ClientQuotaRecord, QuotaValue};

fn quotas() -> ClientQuotas {
    let mut q = ClientQuotas::default();
    let mut set = |entity: &[(&str, Option<&str>)], key: &str, value: f64| {
        q.apply(&ClientQuotaRecord {
            entity: entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
            key: key.into(),
            value: QuotaValue(value),
            remove: false,
        })
    };
    set(&[(USER, Some("alice"))], "producer_byte_rate", 1000.0);
    set(&[(USER, None)], "producer_byte_rate", 500.0);
    set(
        &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
        "request_percentage",
        20.0,
    );
    set(&[(CLIENT_ID, None)], "consumer_byte_rate", 300.0);
    set(&[(IP, Some("10.0.0.1"))], "connection_creation_rate", 7.0);
    q
}

fn component(t: &str, match_type: i8, m: Option<&str>) -> ComponentData {
    ComponentData::default()
        .with_entity_type(StrBytes::from_string(t.into()))
        .with_match_type(match_type)
        .with_match(m.map(|m| StrBytes::from_string(m.into())))
}

/// The entities described, each as "type=name" parts joined by ",".
fn described(components: Vec<ComponentData>, strict: bool) -> Result<Vec<String>, (i16, String)> {
    let request = DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(strict);
    let r = describe_from(&quotas(), &request);
    if r.error_code != 0 {
        assert!(r.entries.is_none(), "an error has no entries");
        return Err((r.error_code, r.error_message.unwrap().to_string()));
    }
    let mut out: Vec<String> = r
        .entries
        .unwrap()
        .iter()
        .map(|e| {
            e.entity
                .iter()
                .map(|d| {
                    let name = d.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                    format!("{}={name}", d.entity_type.as_str())
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    out.sort();
    Ok(out)
}

#[test]
fn filters_match_exact_default_and_any_names_strictly_or_not() {
    assert_eq!(
        described(vec![component(USER, MATCH_EXACT, Some("alice"))], false).unwrap(),
        vec!["client-id=app,user=alice", "user=alice"]
    );
    assert_eq!(
        described(vec![component(USER, MATCH_EXACT, Some("alice"))], true).unwrap(),
        vec!["user=alice"]
    );
    assert_eq!(
        described(vec![component(USER, MATCH_DEFAULT, None)], false).unwrap(),
        vec!["user=<default>"]
    );
    assert_eq!(
        described(vec![component(USER, MATCH_ANY, None)], false).unwrap(),
        vec!["client-id=app,user=alice", "user=<default>", "user=alice"]
    );
    assert_eq!(
        described(
            vec![
                component(USER, MATCH_ANY, None),
                component(CLIENT_ID, MATCH_ANY, None)
            ],
            true
        )
        .unwrap(),
        vec!["client-id=app,user=alice"]
    );
    assert_eq!(described(vec![], false).unwrap().len(), 5, "no filter: all");
    assert!(
        described(vec![], true).unwrap().is_empty(),
        "strict, no filter: none"
    );
    assert_eq!(
        described(vec![component(IP, MATCH_ANY, None)], false).unwrap(),
        vec!["ip=10.0.0.1"]
    );
}

#[test]
fn bad_filters_answer_kafkas_errors() {
    let e = |components| described(components, false).unwrap_err();
    assert_eq!(
        e(vec![
            component(USER, MATCH_ANY, None),
            component(USER, MATCH_DEFAULT, None)
        ]),
        (
            error::INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.".into()
        )
    );
    assert_eq!(
        e(vec![component("group", MATCH_ANY, None)]),
        (
            error::UNSUPPORTED_VERSION,
            "Unsupported entity type group".into()
        )
    );
    assert_eq!(
        e(vec![component("", MATCH_ANY, None)]).1,
        "Invalid empty entity type."
    );
    assert_eq!(
        e(vec![component(USER, MATCH_EXACT, None)]).1,
        "Request specified MATCH_TYPE_EXACT, but set match string to null."
    );
    assert_eq!(
        e(vec![component(USER, MATCH_DEFAULT, Some("x"))]).1,
        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
    );
    assert_eq!(
        e(vec![component(USER, MATCH_ANY, Some("x"))]).1,
        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
    );
    assert_eq!(e(vec![component(USER, 3, None)]).1, "Unknown match type 3");
    assert_eq!(
        e(vec![
            component(IP, MATCH_ANY, None),
            component(CLIENT_ID, MATCH_DEFAULT, None)
        ])
        .0,
        error::INVALID_REQUEST
    );
}
