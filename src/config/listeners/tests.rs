use super::*;

fn keys(listeners: &str, advertised: Option<&str>) -> ListenerKeys {
    ListenerKeys {
        listeners: Some(listeners.to_string()),
        advertised: advertised.map(str::to_string),
        ..ListenerKeys::default()
    }
}

fn errors(k: &ListenerKeys) -> Vec<String> {
    resolve(k, "myhost")
        .unwrap_err()
        .into_iter()
        .map(|(key, reason)| format!("{key}: {reason}"))
        .collect()
}

#[test]
fn endpoint_forms_kafka_takes() {
    let e = parse_endpoint("PLAINTEXT://:9095").unwrap();
    assert_eq!(
        (e.name.as_str(), e.host.as_str(), e.port),
        ("PLAINTEXT", "", 9095)
    );
    let e = parse_endpoint("internal://[::1]:9092").unwrap();
    assert_eq!((e.name.as_str(), e.host.as_str()), ("INTERNAL", "::1"));
    let e = parse_endpoint("EXTERNAL://kafka-1.example:29092").unwrap();
    assert_eq!(e.host, "kafka-1.example");
    for bad in [
        "127.0.0.1:9092",
        "PLAINTEXT://host",
        "X://::1:9092",
        "X://a b:1",
        "://h:1",
    ] {
        assert_eq!(parse_endpoint(bad), None, "{bad}");
    }
}

#[test]
fn compose_stack_with_two_client_listeners_and_a_controller() {
    let k = ListenerKeys {
        listeners: Some(
            "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093,PLAINTEXT_HOST://:29092".into(),
        ),
        advertised: Some("PLAINTEXT://kafka:9092,PLAINTEXT_HOST://localhost:29092".into()),
        protocol_map: Some(
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT".into(),
        ),
        inter_broker: Some("PLAINTEXT".into()),
        controller_names: Some("CONTROLLER".into()),
        broker_only: false,
        controller_only: false,
    };
    let l = resolve(&k, "myhost").unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!(l[0].bind, "0.0.0.0:9092".parse().unwrap());
    assert_eq!(l[0].advertised, Some(("kafka".to_string(), 9092)));
    assert_eq!((l[1].controller, l[1].advertised.clone()), (true, None));
    assert_eq!(l[2].bind, "0.0.0.0:29092".parse().unwrap());
    assert_eq!(l[2].advertised, Some(("localhost".to_string(), 29092)));
}

#[test]
fn kafka_defaults_bind_all_and_advertise_the_host_name() {
    let l = resolve(&ListenerKeys::default(), "myhost").unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].bind, "0.0.0.0:9092".parse().unwrap());
    assert_eq!(l[0].advertised, Some(("myhost".to_string(), 9092)));
    // A controller listener missing from the default map is PLAINTEXT, as in Kafka.
    let k = ListenerKeys {
        controller_names: Some("CONTROLLER".into()),
        ..keys(
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            None,
        )
    };
    let l = resolve(&k, "h").unwrap();
    assert_eq!(l[1].advertised, None);
}

#[test]
fn refusals_name_the_key_with_kafkas_reason() {
    let e = errors(&keys("PLAINTEXT://:9092", Some("PLAINTEXT://0.0.0.0:9092")));
    assert!(
        e[0].starts_with("advertised.listeners: ") && e[0].contains("0.0.0.0"),
        "{e:?}"
    );
    let e = errors(&keys("EXTERNAL://127.0.0.1:9095", None));
    assert_eq!(
        e,
        vec!["listener.security.protocol.map: No security protocol defined for listener EXTERNAL"]
    );
    let e = errors(&keys("SSL://:9093", None));
    assert!(
        e[0].contains("SSL") && e[0].contains("PLAINTEXT only"),
        "{e:?}"
    );
    let e = errors(&keys("PLAINTEXT://:9092,PLAINTEXT://:9093", None));
    assert!(e[0].contains("different name"), "{e:?}");
    let e = errors(&keys("PLAINTEXT://:9092", Some("OTHER://h:1")));
    assert!(e[0].contains("subset") && e[0].contains("OTHER"), "{e:?}");
    let e = errors(&keys("127.0.0.1:9092", None));
    assert!(e[0].starts_with("listeners: Unable to parse"), "{e:?}");
    let k = ListenerKeys {
        inter_broker: Some("INTERNAL".into()),
        ..keys("PLAINTEXT://:9092", None)
    };
    assert!(errors(&k)[0].starts_with("inter.broker.listener.name: "));
    let k = ListenerKeys {
        controller_names: Some("CONTROLLER".into()),
        ..keys("PLAINTEXT://:9092", None)
    };
    assert!(errors(&k)[0].starts_with("controller.listener.names: "));
}

#[test]
fn several_errors_are_all_reported() {
    let k = keys("A://:1,B://:2", Some("A://0.0.0.0:1,B://h:2"));
    let e = errors(&k);
    // A and B have no protocol, and A is advertised as 0.0.0.0.
    assert_eq!(e.len(), 3, "{e:?}");
}
