//! Kafka 4.1's dynamic broker configs that Sluice does not use are accepted, stored, persisted
//! and described (DescribeConfigs v3+ documentation says they have no effect), with Kafka's
//! per-broker / listener-prefix / non-dynamic refusals (INVALID_REQUEST), as the real Kafka 4.1.2
//! answers them.

mod admin_support;

use admin_support::*;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const BROKER: i8 = 4;
const KEY: &str = "sasl.kerberos.min.time.before.relogin";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn set(c: &mut Client, resource: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s(resource))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req).await;
    let x = &r.responses[0];
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// DescribeConfigs v4 of broker "1" for `key`: (value, source, sensitive, synonyms, documentation).
async fn describe(
    c: &mut Client,
    key: &str,
) -> (
    Option<String>,
    i8,
    bool,
    Vec<(Option<String>, i8)>,
    Option<String>,
) {
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("1"))
            .with_configuration_keys(Some(vec![s(key)]))])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req).await;
    let e = &r.results[0].configs[0];
    assert_eq!(e.name.as_str(), key);
    assert!(!e.read_only, "{key} is dynamic");
    (
        e.value.as_ref().map(|v| v.to_string()),
        e.config_source,
        e.is_sensitive,
        e.synonyms
            .iter()
            .map(|y| (y.value.as_ref().map(|v| v.to_string()), y.source))
            .collect(),
        e.documentation.as_ref().map(|d| d.to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkas_dynamic_broker_configs_are_stored_and_described() {
    let mut b = TestBroker::start(&[]).await;
    let mut c = b.client().await;
    let (value, source, _, synonyms, doc) = describe(&mut c, KEY).await;
    assert_eq!((value.as_deref(), source), (Some("60000"), 5));
    assert_eq!(synonyms, vec![(Some("60000".into()), 5)]);
    assert!(doc.is_some_and(|d| d.contains("Sluice does not use it")));

    assert_eq!(set(&mut c, "1", KEY, "1234").await, (0, None));
    let refusals: [(&str, &str, &str, &str); 4] = [
        ("", KEY, "1000", "Cannot update these configs at default cluster level, broker id must be specified: Set(sasl.kerberos.min.time.before.relogin)"),
        ("1", KEY, "abc", "Invalid value abc for configuration sasl.kerberos.min.time.before.relogin: Not a number of type LONG"),
        ("1", "num.partitions", "3", "Cannot update these configs dynamically: Set(num.partitions)"),
        ("1", "ssl.keystore.location", "/x", "These security configs can be dynamically updated only per-listener using the listener prefix: HashSet(ssl.keystore.location)"),
    ];
    for (resource, key, value, message) in refusals {
        let got = set(&mut c, resource, key, value).await;
        assert_eq!(
            got,
            (42, Some(message.to_string())),
            "[{resource}] {key}={value}"
        );
    }
    // Cluster-wide keys work at the default level too; passwords are never shown.
    assert_eq!(set(&mut c, "", "log.cleaner.threads", "2").await, (0, None));
    assert_eq!(
        set(
            &mut c,
            "1",
            "listener.name.plaintext.ssl.keystore.password",
            "secret"
        )
        .await,
        (0, None)
    );
    let (value, sensitive) = {
        let d = describe(&mut c, "ssl.keystore.password").await;
        (d.0, d.2)
    };
    assert_eq!((value, sensitive), (None, true));

    b.restart(&[]).await;
    let mut c = b.client().await;
    let (value, source, _, synonyms, _) = describe(&mut c, KEY).await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("1234"), 2),
        "DYNAMIC_BROKER_CONFIG"
    );
    assert_eq!(
        synonyms,
        vec![(Some("1234".into()), 2), (Some("60000".into()), 5)]
    );
    let (value, source, ..) = describe(&mut c, "log.cleaner.threads").await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("2"), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );

    // Legacy AlterConfigs replaces the per-broker layer, with the same rules.
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(s("1"))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s("num.io.threads"))
            .with_value(Some(s("4")))])]);
    let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req).await;
    assert_eq!(r.responses[0].error_code, 0);
    let (value, source, ..) = describe(&mut c, KEY).await;
    assert_eq!((value.as_deref(), source), (Some("60000"), 5));
    let (value, source, ..) = describe(&mut c, "num.io.threads").await;
    assert_eq!((value.as_deref(), source), (Some("4"), 2));
}
