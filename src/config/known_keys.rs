//! Kafka 4.1's broker configuration table: every key `KafkaConfig` defines, with its type, default
//! and validator, as Kafka's `ConfigDef` reports them (taken from `KafkaConfig.configDef()` of Kafka
//! 4.1.2). Sluice uses it to tell a known key it does not implement (accepted, warned once) from an
//! unknown key (a typo: startup stops and names the closest known key), and to check the value of
//! an ignored key with Kafka's own type and range, so a file Kafka would refuse is refused here too.
//! `cluster::broker_config` takes the types and defaults of the dynamic keys Sluice only stores
//! from it, and tells static keys by it.
//!
//! This module is data plus two lookups; it performs no I/O.

/// A key's type as Kafka's `ConfigDef.Type` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Int,
    Short,
    Long,
    Double,
    String,
    List,
    Class,
    Password,
}

impl Kind {
    /// Kafka's spelling in "Not a number of type INT".
    pub fn name(self) -> &'static str {
        match self {
            Kind::Boolean => "BOOLEAN",
            Kind::Int => "INT",
            Kind::Short => "SHORT",
            Kind::Long => "LONG",
            Kind::Double => "DOUBLE",
            Kind::String => "STRING",
            Kind::List => "LIST",
            Kind::Class => "CLASS",
            Kind::Password => "PASSWORD",
        }
    }
}

/// A key's validator (Kafka's `ConfigDef.Range`, `ValidString`, `ValidList`, ...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    None,
    AtLeast(i64),
    Between(i64, i64),
    /// `[min,...,max] or -1` (Kafka's `log.cleaner.io.max.bytes.per.second`-style special value).
    BetweenOrMinusOne(i64, i64),
    AtLeastF(f64),
    BetweenF(f64, f64),
    /// One of these strings (`true`: case-insensitive).
    OneOf(&'static [&'static str], bool),
    /// A list whose every element is one of these.
    ListOf(&'static [&'static str]),
    NonEmptyString,
    NonEmptyList,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct KnownKey {
    pub name: &'static str,
    pub kind: Kind,
    /// Kafka's default rendered as text ("" for none/null).
    pub default: &'static str,
    pub check: Check,
}

const fn k(name: &'static str, kind: Kind, default: &'static str, check: Check) -> KnownKey {
    KnownKey {
        name,
        kind,
        default,
        check,
    }
}

/// Prefix of Kafka's per-listener keys (`listener.name.internal.ssl.keystore.location`,
/// `listener.name.external.plain.sasl.jaas.config`). Sluice ignores them like any JVM key.
const LISTENER_PREFIX: &str = "listener.name.";

/// Looks a key up in Kafka's table.
pub fn lookup(name: &str) -> Option<&'static KnownKey> {
    KAFKA_BROKER_KEYS
        .binary_search_by(|k| k.name.cmp(name))
        .ok()
        .map(|i| &KAFKA_BROKER_KEYS[i])
}

/// Whether Kafka would accept `name` as a broker key: in the table, or a table key (possibly
/// behind a SASL mechanism name) under `listener.name.<listener>.`.
pub fn is_known(name: &str) -> bool {
    if lookup(name).is_some() {
        return true;
    }
    let Some((listener, key)) = name
        .strip_prefix(LISTENER_PREFIX)
        .and_then(|rest| rest.split_once('.'))
    else {
        return false;
    };
    !listener.is_empty()
        && (lookup(key).is_some()
            || key
                .split_once('.')
                .is_some_and(|(_mechanism, k)| lookup(k).is_some()))
}

/// The known key closest to `name` by edit distance (Levenshtein over bytes), if any is close
/// enough to be a plausible typo (at most a third of the name's length).
pub fn closest<'a>(name: &str, extra: impl IntoIterator<Item = &'a str>) -> Option<&'a str>
where
    'static: 'a,
{
    let limit = (name.len() / 3).max(2);
    KAFKA_BROKER_KEYS
        .iter()
        .map(|k| k.name)
        .chain(extra)
        .map(|cand| (edit_distance(name, cand), cand))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance over bytes, in O(len(b)) memory.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Every key of Kafka 4.1.2's `KafkaConfig.configDef()`, sorted by name (binary-searched).
#[rustfmt::skip]
pub static KAFKA_BROKER_KEYS: &[KnownKey] = &[
    k("add.partitions.to.txn.retry.backoff.max.ms", Kind::Int, "100", Check::AtLeast(0)),
    k("add.partitions.to.txn.retry.backoff.ms", Kind::Int, "20", Check::AtLeast(1)),
    k("advertised.listeners", Kind::String, "", Check::None),
    k("alter.config.policy.class.name", Kind::Class, "", Check::None),
    k("alter.log.dirs.replication.quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("alter.log.dirs.replication.quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("authorizer.class.name", Kind::String, "", Check::None),
    k("auto.create.topics.enable", Kind::Boolean, "true", Check::None),
    k("auto.leader.rebalance.enable", Kind::Boolean, "true", Check::None),
    k("background.threads", Kind::Int, "10", Check::AtLeast(1)),
    k("broker.heartbeat.interval.ms", Kind::Int, "2000", Check::None),
    k("broker.id", Kind::Int, "-1", Check::None),
    k("broker.rack", Kind::String, "", Check::None),
    k("broker.session.timeout.ms", Kind::Int, "9000", Check::None),
    k("client.quota.callback.class", Kind::Class, "", Check::None),
    k("compression.gzip.level", Kind::Int, "-1", Check::BetweenOrMinusOne(1, 9)),
    k("compression.lz4.level", Kind::Int, "9", Check::Between(1, 17)),
    k("compression.type", Kind::String, "producer", Check::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"], false)),
    k("compression.zstd.level", Kind::Int, "3", Check::Between(-131072, 22)),
    k("connection.failed.authentication.delay.ms", Kind::Int, "100", Check::AtLeast(0)),
    k("connections.max.idle.ms", Kind::Long, "600000", Check::None),
    k("connections.max.reauth.ms", Kind::Long, "0", Check::None),
    k("controlled.shutdown.enable", Kind::Boolean, "true", Check::None),
    k("controller.listener.names", Kind::String, "", Check::None),
    k("controller.performance.always.log.threshold.ms", Kind::Long, "2000", Check::AtLeast(0)),
    k("controller.performance.sample.period.ms", Kind::Long, "60000", Check::AtLeast(100)),
    k("controller.quorum.append.linger.ms", Kind::Int, "25", Check::AtLeast(0)),
    k("controller.quorum.bootstrap.servers", Kind::List, "", Check::NonEmptyList),
    k("controller.quorum.election.backoff.max.ms", Kind::Int, "1000", Check::AtLeast(0)),
    k("controller.quorum.election.timeout.ms", Kind::Int, "1000", Check::AtLeast(0)),
    k("controller.quorum.fetch.timeout.ms", Kind::Int, "2000", Check::AtLeast(0)),
    k("controller.quorum.request.timeout.ms", Kind::Int, "2000", Check::AtLeast(0)),
    k("controller.quorum.retry.backoff.ms", Kind::Int, "20", Check::AtLeast(0)),
    k("controller.quorum.voters", Kind::List, "", Check::NonEmptyList),
    k("controller.quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("controller.quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("controller.socket.timeout.ms", Kind::Int, "30000", Check::None),
    k("create.topic.policy.class.name", Kind::Class, "", Check::None),
    k("default.replication.factor", Kind::Int, "1", Check::None),
    k("delegation.token.expiry.check.interval.ms", Kind::Long, "3600000", Check::AtLeast(1)),
    k("delegation.token.expiry.time.ms", Kind::Long, "86400000", Check::AtLeast(1)),
    k("delegation.token.max.lifetime.ms", Kind::Long, "604800000", Check::AtLeast(1)),
    k("delegation.token.secret.key", Kind::Password, "", Check::None),
    k("delete.records.purgatory.purge.interval.requests", Kind::Int, "1", Check::None),
    k("delete.topic.enable", Kind::Boolean, "true", Check::None),
    k("early.start.listeners", Kind::String, "", Check::None),
    k("fetch.max.bytes", Kind::Int, "57671680", Check::AtLeast(1024)),
    k("fetch.purgatory.purge.interval.requests", Kind::Int, "1000", Check::None),
    k("group.consumer.assignors", Kind::List, "uniform,range", Check::None),
    k("group.consumer.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.consumer.max.heartbeat.interval.ms", Kind::Int, "15000", Check::AtLeast(1)),
    k("group.consumer.max.session.timeout.ms", Kind::Int, "60000", Check::AtLeast(1)),
    k("group.consumer.max.size", Kind::Int, "2147483647", Check::AtLeast(1)),
    k("group.consumer.migration.policy", Kind::String, "bidirectional", Check::OneOf(&["DISABLED", "DOWNGRADE", "UPGRADE", "BIDIRECTIONAL"], true)),
    k("group.consumer.min.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.consumer.min.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("group.consumer.regex.refresh.interval.ms", Kind::Int, "600000", Check::AtLeast(10000)),
    k("group.consumer.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("group.coordinator.append.linger.ms", Kind::Int, "5", Check::AtLeast(0)),
    k("group.coordinator.rebalance.protocols", Kind::List, "classic,consumer,streams", Check::ListOf(&["consumer", "classic", "share", "streams"])),
    k("group.coordinator.threads", Kind::Int, "4", Check::AtLeast(1)),
    k("group.initial.rebalance.delay.ms", Kind::Int, "3000", Check::None),
    k("group.max.session.timeout.ms", Kind::Int, "1800000", Check::None),
    k("group.max.size", Kind::Int, "2147483647", Check::AtLeast(1)),
    k("group.min.session.timeout.ms", Kind::Int, "6000", Check::None),
    k("group.share.assignors", Kind::List, "simple", Check::None),
    k("group.share.delivery.count.limit", Kind::Int, "5", Check::Between(2, 10)),
    k("group.share.enable", Kind::Boolean, "false", Check::None),
    k("group.share.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.share.max.heartbeat.interval.ms", Kind::Int, "15000", Check::AtLeast(1)),
    k("group.share.max.record.lock.duration.ms", Kind::Int, "60000", Check::Between(30000, 3600000)),
    k("group.share.max.session.timeout.ms", Kind::Int, "60000", Check::AtLeast(1)),
    k("group.share.max.share.sessions", Kind::Int, "2000", Check::AtLeast(1)),
    k("group.share.max.size", Kind::Int, "200", Check::Between(1, 1000)),
    k("group.share.min.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.share.min.record.lock.duration.ms", Kind::Int, "15000", Check::Between(1000, 30000)),
    k("group.share.min.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("group.share.partition.max.record.locks", Kind::Int, "2000", Check::Between(100, 10000)),
    k("group.share.persister.class.name", Kind::String, "org.apache.kafka.server.share.persister.DefaultStatePersister", Check::None),
    k("group.share.record.lock.duration.ms", Kind::Int, "30000", Check::Between(1000, 3600000)),
    k("group.share.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("group.streams.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.streams.max.heartbeat.interval.ms", Kind::Int, "15000", Check::AtLeast(1)),
    k("group.streams.max.session.timeout.ms", Kind::Int, "60000", Check::AtLeast(1)),
    k("group.streams.max.size", Kind::Int, "2147483647", Check::AtLeast(1)),
    k("group.streams.max.standby.replicas", Kind::Int, "2", Check::AtLeast(0)),
    k("group.streams.min.heartbeat.interval.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("group.streams.min.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("group.streams.num.standby.replicas", Kind::Int, "0", Check::AtLeast(0)),
    k("group.streams.session.timeout.ms", Kind::Int, "45000", Check::AtLeast(1)),
    k("initial.broker.registration.timeout.ms", Kind::Int, "60000", Check::None),
    k("inter.broker.listener.name", Kind::String, "", Check::None),
    k("internal.metadata.delete.delay.millis", Kind::Long, "60000", Check::None),
    k("internal.metadata.log.segment.bytes", Kind::Int, "", Check::None),
    k("internal.metadata.max.batch.size.in.bytes", Kind::Int, "8388608", Check::None),
    k("internal.metadata.max.fetch.size.in.bytes", Kind::Int, "8388608", Check::None),
    k("kafka.metrics.polling.interval.secs", Kind::Int, "10", Check::AtLeast(1)),
    k("kafka.metrics.reporters", Kind::List, "", Check::None),
    k("leader.imbalance.check.interval.seconds", Kind::Long, "300", Check::AtLeast(1)),
    k("listener.security.protocol.map", Kind::String, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", Check::None),
    k("listeners", Kind::String, "PLAINTEXT://:9092", Check::None),
    k("log.cleaner.backoff.ms", Kind::Long, "15000", Check::AtLeast(0)),
    k("log.cleaner.dedupe.buffer.size", Kind::Long, "134217728", Check::None),
    k("log.cleaner.delete.retention.ms", Kind::Long, "86400000", Check::AtLeast(0)),
    k("log.cleaner.enable", Kind::Boolean, "true", Check::None),
    k("log.cleaner.io.buffer.load.factor", Kind::Double, "0.9", Check::None),
    k("log.cleaner.io.buffer.size", Kind::Int, "524288", Check::AtLeast(0)),
    k("log.cleaner.io.max.bytes.per.second", Kind::Double, "1.7976931348623157E308", Check::None),
    k("log.cleaner.max.compaction.lag.ms", Kind::Long, "9223372036854775807", Check::AtLeast(1)),
    k("log.cleaner.min.cleanable.ratio", Kind::Double, "0.5", Check::BetweenF(0.0, 1.0)),
    k("log.cleaner.min.compaction.lag.ms", Kind::Long, "0", Check::AtLeast(0)),
    k("log.cleaner.threads", Kind::Int, "1", Check::AtLeast(0)),
    k("log.cleanup.policy", Kind::List, "delete", Check::ListOf(&["compact", "delete"])),
    k("log.dir", Kind::String, "/tmp/kafka-logs", Check::None),
    k("log.dir.failure.timeout.ms", Kind::Long, "30000", Check::AtLeast(1)),
    k("log.dirs", Kind::String, "", Check::None),
    k("log.flush.interval.messages", Kind::Long, "9223372036854775807", Check::AtLeast(1)),
    k("log.flush.interval.ms", Kind::Long, "", Check::None),
    k("log.flush.offset.checkpoint.interval.ms", Kind::Int, "60000", Check::AtLeast(0)),
    k("log.flush.scheduler.interval.ms", Kind::Long, "9223372036854775807", Check::None),
    k("log.flush.start.offset.checkpoint.interval.ms", Kind::Int, "60000", Check::AtLeast(0)),
    k("log.index.interval.bytes", Kind::Int, "4096", Check::AtLeast(0)),
    k("log.index.size.max.bytes", Kind::Int, "10485760", Check::AtLeast(4)),
    k("log.initial.task.delay.ms", Kind::Long, "30000", Check::AtLeast(0)),
    k("log.local.retention.bytes", Kind::Long, "-2", Check::AtLeast(-2)),
    k("log.local.retention.ms", Kind::Long, "-2", Check::AtLeast(-2)),
    k("log.message.timestamp.after.max.ms", Kind::Long, "3600000", Check::AtLeast(0)),
    k("log.message.timestamp.before.max.ms", Kind::Long, "9223372036854775807", Check::AtLeast(0)),
    k("log.message.timestamp.type", Kind::String, "CreateTime", Check::OneOf(&["CreateTime", "LogAppendTime"], false)),
    k("log.preallocate", Kind::Boolean, "false", Check::None),
    k("log.retention.bytes", Kind::Long, "-1", Check::None),
    k("log.retention.check.interval.ms", Kind::Long, "300000", Check::AtLeast(1)),
    k("log.retention.hours", Kind::Int, "168", Check::None),
    k("log.retention.minutes", Kind::Int, "", Check::None),
    k("log.retention.ms", Kind::Long, "", Check::None),
    k("log.roll.hours", Kind::Int, "168", Check::AtLeast(1)),
    k("log.roll.jitter.hours", Kind::Int, "0", Check::AtLeast(0)),
    k("log.roll.jitter.ms", Kind::Long, "", Check::None),
    k("log.roll.ms", Kind::Long, "", Check::None),
    k("log.segment.bytes", Kind::Int, "1073741824", Check::AtLeast(1048576)),
    k("log.segment.delete.delay.ms", Kind::Long, "60000", Check::AtLeast(0)),
    k("max.connection.creation.rate", Kind::Int, "2147483647", Check::AtLeast(0)),
    k("max.connections", Kind::Int, "2147483647", Check::AtLeast(0)),
    k("max.connections.per.ip", Kind::Int, "2147483647", Check::AtLeast(0)),
    k("max.connections.per.ip.overrides", Kind::String, "", Check::None),
    k("max.incremental.fetch.session.cache.slots", Kind::Int, "1000", Check::AtLeast(0)),
    k("max.request.partition.size.limit", Kind::Int, "2000", Check::AtLeast(1)),
    k("message.max.bytes", Kind::Int, "1048588", Check::AtLeast(0)),
    k("metadata.log.dir", Kind::String, "", Check::None),
    k("metadata.log.max.record.bytes.between.snapshots", Kind::Long, "20971520", Check::AtLeast(1)),
    k("metadata.log.max.snapshot.interval.ms", Kind::Long, "3600000", Check::AtLeast(0)),
    k("metadata.log.segment.bytes", Kind::Int, "1073741824", Check::AtLeast(8388608)),
    k("metadata.log.segment.ms", Kind::Long, "604800000", Check::None),
    k("metadata.max.idle.interval.ms", Kind::Int, "500", Check::AtLeast(0)),
    k("metadata.max.retention.bytes", Kind::Long, "104857600", Check::None),
    k("metadata.max.retention.ms", Kind::Long, "604800000", Check::None),
    k("metric.reporters", Kind::List, "org.apache.kafka.common.metrics.JmxReporter", Check::None),
    k("metrics.num.samples", Kind::Int, "2", Check::AtLeast(1)),
    k("metrics.recording.level", Kind::String, "INFO", Check::None),
    k("metrics.sample.window.ms", Kind::Long, "30000", Check::AtLeast(1)),
    k("min.insync.replicas", Kind::Int, "1", Check::AtLeast(1)),
    k("node.id", Kind::Int, "", Check::AtLeast(0)),
    k("num.io.threads", Kind::Int, "8", Check::AtLeast(1)),
    k("num.network.threads", Kind::Int, "3", Check::AtLeast(1)),
    k("num.partitions", Kind::Int, "1", Check::AtLeast(1)),
    k("num.recovery.threads.per.data.dir", Kind::Int, "2", Check::AtLeast(1)),
    k("num.replica.alter.log.dirs.threads", Kind::Int, "", Check::None),
    k("num.replica.fetchers", Kind::Int, "1", Check::None),
    k("offset.metadata.max.bytes", Kind::Int, "4096", Check::None),
    k("offsets.commit.timeout.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("offsets.load.buffer.size", Kind::Int, "5242880", Check::AtLeast(1)),
    k("offsets.retention.check.interval.ms", Kind::Long, "600000", Check::AtLeast(1)),
    k("offsets.retention.minutes", Kind::Int, "10080", Check::AtLeast(1)),
    k("offsets.topic.compression.codec", Kind::Int, "0", Check::None),
    k("offsets.topic.num.partitions", Kind::Int, "50", Check::AtLeast(1)),
    k("offsets.topic.replication.factor", Kind::Short, "3", Check::AtLeast(1)),
    k("offsets.topic.segment.bytes", Kind::Int, "104857600", Check::AtLeast(1)),
    k("principal.builder.class", Kind::Class, "class org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", Check::None),
    k("process.roles", Kind::List, "", Check::ListOf(&["broker", "controller"])),
    k("producer.id.expiration.check.interval.ms", Kind::Int, "600000", Check::AtLeast(1)),
    k("producer.id.expiration.ms", Kind::Int, "86400000", Check::AtLeast(1)),
    k("producer.purgatory.purge.interval.requests", Kind::Int, "1000", Check::None),
    k("queued.max.request.bytes", Kind::Long, "-1", Check::None),
    k("queued.max.requests", Kind::Int, "500", Check::AtLeast(1)),
    k("quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("remote.fetch.max.wait.ms", Kind::Int, "500", Check::AtLeast(1)),
    k("remote.list.offsets.request.timeout.ms", Kind::Long, "30000", Check::AtLeast(1)),
    k("remote.log.index.file.cache.total.size.bytes", Kind::Long, "1073741824", Check::AtLeast(1)),
    k("remote.log.manager.copier.thread.pool.size", Kind::Int, "10", Check::AtLeast(1)),
    k("remote.log.manager.copy.max.bytes.per.second", Kind::Long, "9223372036854775807", Check::AtLeast(1)),
    k("remote.log.manager.copy.quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("remote.log.manager.copy.quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("remote.log.manager.expiration.thread.pool.size", Kind::Int, "10", Check::AtLeast(1)),
    k("remote.log.manager.fetch.max.bytes.per.second", Kind::Long, "9223372036854775807", Check::AtLeast(1)),
    k("remote.log.manager.fetch.quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("remote.log.manager.fetch.quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("remote.log.manager.task.interval.ms", Kind::Long, "30000", Check::AtLeast(1)),
    k("remote.log.manager.task.retry.backoff.max.ms", Kind::Long, "30000", Check::AtLeast(1)),
    k("remote.log.manager.task.retry.backoff.ms", Kind::Long, "500", Check::AtLeast(1)),
    k("remote.log.manager.task.retry.jitter", Kind::Double, "0.2", Check::BetweenF(0.0, 0.5)),
    k("remote.log.manager.thread.pool.size", Kind::Int, "2", Check::AtLeast(1)),
    k("remote.log.metadata.custom.metadata.max.bytes", Kind::Int, "128", Check::AtLeast(0)),
    k("remote.log.metadata.manager.class.name", Kind::String, "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", Check::NonEmptyString),
    k("remote.log.metadata.manager.class.path", Kind::String, "", Check::None),
    k("remote.log.metadata.manager.impl.prefix", Kind::String, "rlmm.config.", Check::NonEmptyString),
    k("remote.log.metadata.manager.listener.name", Kind::String, "", Check::NonEmptyString),
    k("remote.log.reader.max.pending.tasks", Kind::Int, "100", Check::AtLeast(1)),
    k("remote.log.reader.threads", Kind::Int, "10", Check::AtLeast(1)),
    k("remote.log.storage.manager.class.name", Kind::String, "", Check::NonEmptyString),
    k("remote.log.storage.manager.class.path", Kind::String, "", Check::None),
    k("remote.log.storage.manager.impl.prefix", Kind::String, "rsm.config.", Check::NonEmptyString),
    k("remote.log.storage.system.enable", Kind::Boolean, "false", Check::None),
    k("replica.fetch.backoff.ms", Kind::Int, "1000", Check::AtLeast(0)),
    k("replica.fetch.max.bytes", Kind::Int, "1048576", Check::AtLeast(0)),
    k("replica.fetch.min.bytes", Kind::Int, "1", Check::None),
    k("replica.fetch.response.max.bytes", Kind::Int, "10485760", Check::AtLeast(0)),
    k("replica.fetch.wait.max.ms", Kind::Int, "500", Check::None),
    k("replica.high.watermark.checkpoint.interval.ms", Kind::Long, "5000", Check::None),
    k("replica.lag.time.max.ms", Kind::Long, "30000", Check::None),
    k("replica.selector.class", Kind::String, "", Check::None),
    k("replica.socket.receive.buffer.bytes", Kind::Int, "65536", Check::None),
    k("replica.socket.timeout.ms", Kind::Int, "30000", Check::None),
    k("replication.quota.window.num", Kind::Int, "11", Check::AtLeast(1)),
    k("replication.quota.window.size.seconds", Kind::Int, "1", Check::AtLeast(1)),
    k("request.timeout.ms", Kind::Int, "30000", Check::None),
    k("sasl.client.callback.handler.class", Kind::Class, "", Check::None),
    k("sasl.enabled.mechanisms", Kind::List, "GSSAPI", Check::None),
    k("sasl.jaas.config", Kind::Password, "", Check::None),
    k("sasl.kerberos.kinit.cmd", Kind::String, "/usr/bin/kinit", Check::None),
    k("sasl.kerberos.min.time.before.relogin", Kind::Long, "60000", Check::None),
    k("sasl.kerberos.principal.to.local.rules", Kind::List, "DEFAULT", Check::None),
    k("sasl.kerberos.service.name", Kind::String, "", Check::None),
    k("sasl.kerberos.ticket.renew.jitter", Kind::Double, "0.05", Check::None),
    k("sasl.kerberos.ticket.renew.window.factor", Kind::Double, "0.8", Check::None),
    k("sasl.login.callback.handler.class", Kind::Class, "", Check::None),
    k("sasl.login.class", Kind::Class, "", Check::None),
    k("sasl.login.connect.timeout.ms", Kind::Int, "", Check::None),
    k("sasl.login.read.timeout.ms", Kind::Int, "", Check::None),
    k("sasl.login.refresh.buffer.seconds", Kind::Short, "300", Check::None),
    k("sasl.login.refresh.min.period.seconds", Kind::Short, "60", Check::None),
    k("sasl.login.refresh.window.factor", Kind::Double, "0.8", Check::None),
    k("sasl.login.refresh.window.jitter", Kind::Double, "0.05", Check::None),
    k("sasl.login.retry.backoff.max.ms", Kind::Long, "10000", Check::None),
    k("sasl.login.retry.backoff.ms", Kind::Long, "100", Check::None),
    k("sasl.mechanism.controller.protocol", Kind::String, "GSSAPI", Check::None),
    k("sasl.mechanism.inter.broker.protocol", Kind::String, "GSSAPI", Check::None),
    k("sasl.oauthbearer.assertion.algorithm", Kind::String, "RS256", Check::OneOf(&["ES256", "RS256"], true)),
    k("sasl.oauthbearer.assertion.claim.aud", Kind::String, "", Check::None),
    k("sasl.oauthbearer.assertion.claim.exp.seconds", Kind::Int, "300", Check::Between(0, 86400)),
    k("sasl.oauthbearer.assertion.claim.iss", Kind::String, "", Check::None),
    k("sasl.oauthbearer.assertion.claim.jti.include", Kind::Boolean, "false", Check::None),
    k("sasl.oauthbearer.assertion.claim.nbf.seconds", Kind::Int, "60", Check::Between(0, 3600)),
    k("sasl.oauthbearer.assertion.claim.sub", Kind::String, "", Check::None),
    k("sasl.oauthbearer.assertion.file", Kind::String, "", Check::None),
    k("sasl.oauthbearer.assertion.private.key.file", Kind::String, "", Check::None),
    k("sasl.oauthbearer.assertion.private.key.passphrase", Kind::Password, "", Check::None),
    k("sasl.oauthbearer.assertion.template.file", Kind::String, "", Check::None),
    k("sasl.oauthbearer.client.credentials.client.id", Kind::String, "", Check::None),
    k("sasl.oauthbearer.client.credentials.client.secret", Kind::Password, "", Check::None),
    k("sasl.oauthbearer.clock.skew.seconds", Kind::Int, "30", Check::None),
    k("sasl.oauthbearer.expected.audience", Kind::List, "", Check::None),
    k("sasl.oauthbearer.expected.issuer", Kind::String, "", Check::None),
    k("sasl.oauthbearer.jwks.endpoint.refresh.ms", Kind::Long, "3600000", Check::None),
    k("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Kind::Long, "10000", Check::None),
    k("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Kind::Long, "100", Check::None),
    k("sasl.oauthbearer.jwks.endpoint.url", Kind::String, "", Check::None),
    k("sasl.oauthbearer.jwt.retriever.class", Kind::Class, "class org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever", Check::None),
    k("sasl.oauthbearer.jwt.validator.class", Kind::Class, "class org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator", Check::None),
    k("sasl.oauthbearer.scope", Kind::String, "", Check::None),
    k("sasl.oauthbearer.scope.claim.name", Kind::String, "scope", Check::None),
    k("sasl.oauthbearer.sub.claim.name", Kind::String, "sub", Check::None),
    k("sasl.oauthbearer.token.endpoint.url", Kind::String, "", Check::None),
    k("sasl.server.callback.handler.class", Kind::Class, "", Check::None),
    k("sasl.server.max.receive.size", Kind::Int, "524288", Check::None),
    k("security.inter.broker.protocol", Kind::String, "PLAINTEXT", Check::OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], false)),
    k("security.providers", Kind::String, "", Check::None),
    k("server.max.startup.time.ms", Kind::Long, "9223372036854775807", Check::AtLeast(0)),
    k("share.coordinator.append.linger.ms", Kind::Int, "5", Check::AtLeast(0)),
    k("share.coordinator.cold.partition.snapshot.interval.ms", Kind::Int, "300000", Check::AtLeast(1)),
    k("share.coordinator.load.buffer.size", Kind::Int, "5242880", Check::AtLeast(1)),
    k("share.coordinator.snapshot.update.records.per.snapshot", Kind::Int, "500", Check::AtLeast(0)),
    k("share.coordinator.state.topic.compression.codec", Kind::Int, "0", Check::None),
    k("share.coordinator.state.topic.min.isr", Kind::Short, "2", Check::AtLeast(1)),
    k("share.coordinator.state.topic.num.partitions", Kind::Int, "50", Check::AtLeast(1)),
    k("share.coordinator.state.topic.prune.interval.ms", Kind::Int, "300000", Check::AtLeast(1)),
    k("share.coordinator.state.topic.replication.factor", Kind::Short, "3", Check::AtLeast(1)),
    k("share.coordinator.state.topic.segment.bytes", Kind::Int, "104857600", Check::AtLeast(1)),
    k("share.coordinator.threads", Kind::Int, "1", Check::AtLeast(1)),
    k("share.coordinator.write.timeout.ms", Kind::Int, "5000", Check::AtLeast(1)),
    k("share.fetch.purgatory.purge.interval.requests", Kind::Int, "1000", Check::None),
    k("socket.connection.setup.timeout.max.ms", Kind::Long, "30000", Check::None),
    k("socket.connection.setup.timeout.ms", Kind::Long, "10000", Check::None),
    k("socket.listen.backlog.size", Kind::Int, "50", Check::AtLeast(1)),
    k("socket.receive.buffer.bytes", Kind::Int, "102400", Check::None),
    k("socket.request.max.bytes", Kind::Int, "104857600", Check::AtLeast(1)),
    k("socket.send.buffer.bytes", Kind::Int, "102400", Check::None),
    k("ssl.allow.dn.changes", Kind::Boolean, "false", Check::None),
    k("ssl.allow.san.changes", Kind::Boolean, "false", Check::None),
    k("ssl.cipher.suites", Kind::List, "", Check::None),
    k("ssl.client.auth", Kind::String, "none", Check::OneOf(&["required", "requested", "none"], false)),
    k("ssl.enabled.protocols", Kind::List, "TLSv1.2,TLSv1.3", Check::None),
    k("ssl.endpoint.identification.algorithm", Kind::String, "https", Check::None),
    k("ssl.engine.factory.class", Kind::Class, "", Check::None),
    k("ssl.key.password", Kind::Password, "", Check::None),
    k("ssl.keymanager.algorithm", Kind::String, "SunX509", Check::None),
    k("ssl.keystore.certificate.chain", Kind::Password, "", Check::None),
    k("ssl.keystore.key", Kind::Password, "", Check::None),
    k("ssl.keystore.location", Kind::String, "", Check::None),
    k("ssl.keystore.password", Kind::Password, "", Check::None),
    k("ssl.keystore.type", Kind::String, "JKS", Check::None),
    k("ssl.principal.mapping.rules", Kind::String, "DEFAULT", Check::None),
    k("ssl.protocol", Kind::String, "TLSv1.3", Check::None),
    k("ssl.provider", Kind::String, "", Check::None),
    k("ssl.secure.random.implementation", Kind::String, "", Check::None),
    k("ssl.trustmanager.algorithm", Kind::String, "PKIX", Check::None),
    k("ssl.truststore.certificates", Kind::Password, "", Check::None),
    k("ssl.truststore.location", Kind::String, "", Check::None),
    k("ssl.truststore.password", Kind::Password, "", Check::None),
    k("ssl.truststore.type", Kind::String, "JKS", Check::None),
    k("telemetry.max.bytes", Kind::Int, "1048576", Check::AtLeast(1)),
    k("transaction.abort.timed.out.transaction.cleanup.interval.ms", Kind::Int, "10000", Check::AtLeast(1)),
    k("transaction.max.timeout.ms", Kind::Int, "900000", Check::AtLeast(1)),
    k("transaction.partition.verification.enable", Kind::Boolean, "true", Check::None),
    k("transaction.remove.expired.transaction.cleanup.interval.ms", Kind::Int, "3600000", Check::AtLeast(1)),
    k("transaction.state.log.load.buffer.size", Kind::Int, "5242880", Check::AtLeast(1)),
    k("transaction.state.log.min.isr", Kind::Int, "2", Check::AtLeast(1)),
    k("transaction.state.log.num.partitions", Kind::Int, "50", Check::AtLeast(1)),
    k("transaction.state.log.replication.factor", Kind::Short, "3", Check::AtLeast(1)),
    k("transaction.state.log.segment.bytes", Kind::Int, "104857600", Check::AtLeast(1)),
    k("transaction.two.phase.commit.enable", Kind::Boolean, "false", Check::None),
    k("transactional.id.expiration.ms", Kind::Int, "604800000", Check::AtLeast(1)),
    k("unclean.leader.election.enable", Kind::Boolean, "false", Check::None),
    k("unclean.leader.election.interval.ms", Kind::Long, "300000", Check::AtLeast(1)),
    k("unstable.api.versions.enable", Kind::Boolean, "false", Check::None),
    k("unstable.feature.versions.enable", Kind::Boolean, "false", Check::None),
];
