use super::*;
use crate::controller::{ControllerSettings, ControllerState};

fn entity(parts: &[(&str, Option<&str>)]) -> QuotaEntity {
    parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
        .collect()
}

fn alter(parts: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
    QuotaAlteration {
        entity: entity(parts),
        ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

fn no_names(_: &str) -> bool {
    false
}

/// Runs one request and commits its records; returns the answers as (code, message).
fn run(c: &mut Controller, alterations: &[QuotaAlteration]) -> Vec<(i16, String)> {
    let out = c.alter_client_quotas(alterations, false, &no_names);
    for r in &out.records {
        c.apply(r);
    }
    out.answer
        .into_iter()
        .map(|(_, r)| match r {
            Ok(()) => (0, String::new()),
            Err(e) => (e.code(), e.message),
        })
        .collect()
}

const INVALID_REQUEST: i16 = 42;

#[test]
fn accepted_alterations_write_one_record_per_changed_key() {
    let mut c = Controller::new(ControllerSettings::default());
    let alice = [(USER, Some("alice"))];
    let out = c.alter_client_quotas(
        &[alter(
            &alice,
            &[
                ("producer_byte_rate", Some(1024.0)),
                ("request_percentage", Some(12.5)),
                ("consumer_byte_rate", None),
            ],
        )],
        false,
        &no_names,
    );
    assert_eq!(out.answer, vec![(entity(&alice), Ok(()))]);
    assert_eq!(
        out.records,
        vec![
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![(USER.into(), Some("alice".into()))],
                key: "producer_byte_rate".into(),
                value: QuotaValue(1024.0),
                remove: false,
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![(USER.into(), Some("alice".into()))],
                key: "request_percentage".into(),
                value: QuotaValue(12.5),
                remove: false,
            }),
        ],
        "removing a key the entity does not have writes nothing"
    );
    for r in &out.records {
        c.apply(r);
    }
    // The same value again writes nothing; a removal of a present key does.
    let again = c.alter_client_quotas(
        &[alter(
            &alice,
            &[
                ("producer_byte_rate", Some(1024.0)),
                ("request_percentage", None),
            ],
        )],
        false,
        &no_names,
    );
    assert_eq!(again.records.len(), 1);
    assert!(matches!(
        &again.records[0],
        MetadataRecord::ClientQuota(q) if q.remove && q.key == "request_percentage"
    ));
}

#[test]
fn validate_only_answers_the_same_and_writes_nothing() {
    let c = Controller::new(ControllerSettings::default());
    let good = alter(&[(CLIENT_ID, None)], &[("consumer_byte_rate", Some(10.0))]);
    let bad = alter(
        &[(CLIENT_ID, Some("c"))],
        &[("consumer_byte_rate", Some(-1.0))],
    );
    let out = c.alter_client_quotas(&[good, bad], true, &no_names);
    assert!(out.records.is_empty());
    assert!(out.answer[0].1.is_ok());
    assert_eq!(
        out.answer[1].1.as_ref().unwrap_err().message,
        "Quota consumer_byte_rate must be greater than 0"
    );
}

#[test]
fn entity_types_and_combinations_are_kafkas() {
    let mut c = Controller::new(ControllerSettings::default());
    let rate = [("producer_byte_rate", Some(100.0))];
    let conn = [("connection_creation_rate", Some(5.0))];
    let cases: Vec<(QuotaAlteration, (i16, &str))> = vec![
        (alter(&[(USER, Some("u"))], &rate), (0, "")),
        (alter(&[(CLIENT_ID, Some("c"))], &rate), (0, "")),
        (alter(&[(USER, None), (CLIENT_ID, None)], &rate), (0, "")),
        (alter(&[(IP, Some("10.0.0.1"))], &conn), (0, "")),
        (alter(&[(IP, Some("::1"))], &conn), (0, "")),
        (alter(&[(IP, None)], &conn), (0, "")),
        (
            alter(&[], &rate),
            (INVALID_REQUEST, "Invalid empty client quota entity"),
        ),
        (
            alter(&[("group", Some("g"))], &rate),
            (
                INVALID_REQUEST,
                "Unhandled client quota entity type: group",
            ),
        ),
        (
            alter(&[(USER, Some(""))], &rate),
            (INVALID_REQUEST, "Empty user not supported"),
        ),
        (
            alter(&[(IP, Some("1.2.3.4")), (USER, Some("u"))], &conn),
            (
                INVALID_REQUEST,
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ),
        ),
        (
            alter(&[(IP, Some("no such host"))], &conn),
            (
                INVALID_REQUEST,
                "no such host is not a valid IP or resolvable host.",
            ),
        ),
        (
            alter(&[(IP, Some("10.0.0.2"))], &rate),
            (INVALID_REQUEST, "Invalid configuration key producer_byte_rate"),
        ),
        (
            alter(&[(USER, Some("u2"))], &conn),
            (
                INVALID_REQUEST,
                "Invalid configuration key connection_creation_rate",
            ),
        ),
    ];
    for (a, (code, message)) in cases {
        let got = run(&mut c, std::slice::from_ref(&a));
        assert_eq!(got, vec![(code, message.to_string())], "{a:?}");
    }
    // A resolvable name (as the caller found it) is an IP entity too.
    let out = c.alter_client_quotas(
        &[alter(&[(IP, Some("localhost"))], &conn)],
        false,
        &|name| name == "localhost",
    );
    assert!(out.answer[0].1.is_ok());
}

#[test]
fn values_must_be_positive_and_integral_for_integer_keys() {
    let mut c = Controller::new(ControllerSettings::default());
    let u = [(USER, Some("u"))];
    let ip = [(IP, Some("1.1.1.1"))];
    let cases: Vec<(QuotaAlteration, &str)> = vec![
        (
            alter(&u, &[("producer_byte_rate", Some(0.0))]),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            alter(&u, &[("request_percentage", Some(-0.5))]),
            "Quota request_percentage must be greater than 0",
        ),
        (
            alter(&u, &[("consumer_byte_rate", Some(10.5))]),
            "consumer_byte_rate cannot be a fractional value.",
        ),
        (
            alter(&u, &[("producer_byte_rate", Some(1e19))]),
            "Proposed value for producer_byte_rate is too large for a LONG.",
        ),
        (
            alter(&ip, &[("connection_creation_rate", Some(3e9))]),
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            alter(&ip, &[("connection_creation_rate", Some(2.25))]),
            "connection_creation_rate cannot be a fractional value.",
        ),
        (
            alter(&u, &[("controller_mutation_rate", Some(f64::NAN))]),
            "Quota controller_mutation_rate must be greater than 0",
        ),
    ];
    for (a, message) in cases {
        assert_eq!(
            run(&mut c, std::slice::from_ref(&a)),
            vec![(INVALID_REQUEST, message.to_string())],
            "{a:?}"
        );
    }
    // Doubles may be fractional; integers within a millionth of a whole number pass.
    assert_eq!(
        run(
            &mut c,
            &[alter(
                &u,
                &[
                    ("request_percentage", Some(0.25)),
                    ("producer_byte_rate", Some(2048.0000001)),
                ]
            )]
        ),
        vec![(0, String::new())]
    );
    assert!(c.state().quotas.get(&entity(&u)).is_some());
    // A refused key refuses the entity's whole alteration.
    let out = c.alter_client_quotas(
        &[alter(
            &[(USER, Some("v"))],
            &[("consumer_byte_rate", Some(5.0)), ("bogus", Some(1.0))],
        )],
        false,
        &no_names,
    );
    assert!(out.records.is_empty());
    assert!(out.answer[0].1.is_err());
}

#[test]
fn repeated_keys_and_entities_answer_ignoring_duplicate_entity() {
    let mut c = Controller::new(ControllerSettings::default());
    let u = [(USER, Some("u")), (CLIENT_ID, Some("c"))];
    let dup_key = alter(
        &u,
        &[
            ("producer_byte_rate", Some(1.0)),
            ("producer_byte_rate", Some(2.0)),
        ],
    );
    let message = "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=u})";
    assert_eq!(
        run(&mut c, &[dup_key]),
        vec![(INVALID_REQUEST, message.to_string())]
    );
    // The same entity twice: one answer, the refusal; the first alteration is still written.
    let first = alter(&u, &[("producer_byte_rate", Some(1.0))]);
    let second = alter(&u, &[("consumer_byte_rate", Some(1.0))]);
    let out = c.alter_client_quotas(&[first, second], false, &no_names);
    assert_eq!(out.answer.len(), 1);
    assert_eq!(out.answer[0].1.as_ref().unwrap_err().message, message);
    assert_eq!(out.records.len(), 1);
    // Defaults render as null.
    assert_eq!(
        entity_string(&entity(&[(USER, None)])),
        "ClientQuotaEntity(entries={user=null})"
    );
}

#[test]
fn quotas_survive_a_snapshot() {
    let mut c = Controller::new(ControllerSettings::default());
    run(
        &mut c,
        &[
            alter(&[(USER, None)], &[("producer_byte_rate", Some(1e6))]),
            alter(
                &[(USER, Some("a")), (CLIENT_ID, None)],
                &[("request_percentage", Some(40.0))],
            ),
            alter(&[(IP, None)], &[("connection_creation_rate", Some(30.0))]),
        ],
    );
    assert_eq!(c.state().quotas.iter().count(), 3);
    let snapshot = c.snapshot();
    assert_eq!(ControllerState::replay(&snapshot), *c.state());
}
