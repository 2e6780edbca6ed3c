//! What Kafka 4.1.2 says of its broker keys beyond `config::known_keys` (which has every key's
//! type, default and validator): which keys are dynamic (read from the real broker's
//! DescribeConfigs answer), which of them only a per-broker resource or a listener prefix may set
//! (its IncrementalAlterConfigs refusals), and which keys DescribeConfigs does not list (Kafka's
//! internal ones). A Kafka key is static when it is none of these nor a dynamic key of
//! `BROKER_CONFIGS`. Data only.

/// Dynamic in Kafka, stored by Sluice with no effect (reported as such in DescribeConfigs'
/// documentation), sorted by name; types and defaults from `config::known_keys`. Dynamic keys
/// Sluice uses are in `BROKER_CONFIGS` instead.
pub const STORED_DYNAMIC: &[&str] = &[
    "background.threads",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "listener.security.protocol.map",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.threads",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.preallocate",
    "log.roll.jitter.ms",
    "log.segment.delete.delay.ms",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "metric.reporters",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "principal.builder.class",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.reader.threads",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "transaction.partition.verification.enable",
];

/// Keys of [`STORED_DYNAMIC`] whose Kafka default is the empty string (`known_keys` writes "" for
/// both that and null; the others' "" is null).
pub const EMPTY_STRING_DEFAULT: &[&str] =
    &["max.connections.per.ip.overrides", "ssl.cipher.suites"];

/// Security configs Kafka lets change only per listener (`listener.name.<listener>.<key>`).
pub const LISTENER_PREFIX_ONLY: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Dynamic keys Kafka refuses at the cluster-default level (resource name "").
pub const PER_BROKER_ONLY: &[&str] = &[
    "listener.security.protocol.map",
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Listener configs that stay cluster-wide under a listener prefix.
pub const CLUSTER_LEVEL_LISTENER_CONFIGS: &[&str] = &[
    "max.connection.creation.rate",
    "max.connections",
    "num.network.threads",
];

/// Kafka's internal broker keys: in `known_keys` (Kafka accepts them at startup) but not in its
/// DescribeConfigs answer; Sluice neither lists them nor refuses them as static.
pub const INTERNAL: &[&str] = &[
    "controller.performance.always.log.threshold.ms",
    "controller.performance.sample.period.ms",
    "group.consumer.regex.refresh.interval.ms",
    "group.share.enable",
    "group.share.persister.class.name",
    "internal.metadata.delete.delay.millis",
    "internal.metadata.log.segment.bytes",
    "internal.metadata.max.batch.size.in.bytes",
    "internal.metadata.max.fetch.size.in.bytes",
    "log.initial.task.delay.ms",
    "producer.id.expiration.check.interval.ms",
    "remote.log.manager.task.retry.backoff.max.ms",
    "remote.log.manager.task.retry.backoff.ms",
    "remote.log.manager.task.retry.jitter",
    "server.max.startup.time.ms",
    "share.coordinator.cold.partition.snapshot.interval.ms",
    "share.coordinator.state.topic.prune.interval.ms",
    "unclean.leader.election.interval.ms",
    "unstable.api.versions.enable",
    "unstable.feature.versions.enable",
];
