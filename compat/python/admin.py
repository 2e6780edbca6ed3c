"""Topic administration with confluent-kafka's AdminClient against $BOOTSTRAP, every call read back:
create_topics with configs, a duplicate create refused, describe_topics, describe_configs (topic and
broker), incremental_alter_configs SET/DELETE/APPEND (and a bad value refused), create_partitions
(grow; shrink refused), delete_records (low watermark), list_offsets, delete_topics, describe_cluster.
Prints PASS/FAIL per check and a final 'N passed, N failed' line."""
import time

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, OffsetSpec)

from compat_common import Checks, env, log_error_cb, ok_unless, print_client_version

T = 30  # seconds per admin call


def error_code(fut):
    """The KafkaError code a future failed with, or None when it succeeded."""
    try:
        fut.result(timeout=T)
        return None
    except KafkaException as e:
        return e.args[0].code()


def expect_error(fut, code):
    got = error_code(fut)
    if got == code:
        return f"ok {KafkaError(code).name()}"
    return f"expected {KafkaError(code).name()}, got {'success' if got is None else KafkaError(got).name()}"


def topic_config(admin, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([res], request_timeout=T)[res].result(timeout=T)


def entry_is(configs, name, value, source=None):
    e = configs.get(name)
    if e is None:
        return f"{name} missing"
    if e.value != value:
        return f"{name}={e.value}, want {value}"
    if source is not None and e.source != source.value:
        return f"{name} source {ConfigSource(e.source).name}, want {source.name}"
    return None


def first_error(*errs):
    return next((e for e in errs if e is not None), None)


def eventually(fn, seconds=10):
    """fn() until it returns None (Kafka applies config and partition changes to its metadata cache
    asynchronously: a read right after the change may still see the old state)."""
    deadline = time.time() + seconds
    while True:
        err = fn()
        if err is None or time.time() > deadline:
            return err
        time.sleep(0.2)


def describe(admin, topic):
    return admin.describe_topics(TopicCollection([topic]), request_timeout=T)[topic].result(timeout=T)


def main():
    print_client_version()
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", "compat") + "-py-admin"
    compacted, plain = prefix + "-compacted", prefix + "-plain"
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    c = Checks()
    node = {}

    def cluster():
        r = admin.describe_cluster(request_timeout=T).result(timeout=T)
        if not r.cluster_id:
            return "no cluster id"
        if len(r.nodes) != 1:
            return f"nodes {r.nodes}"
        n = r.nodes[0]
        node["id"] = n.id
        if not bootstrap.endswith(f":{n.port}"):
            return f"node {n} is not at {bootstrap}"
        if r.controller is None or r.controller.id != n.id:
            return f"controller {r.controller}"
        return f"ok cluster {r.cluster_id}, node {n.id}"
    c.run("describe_cluster: cluster id, one node at the bootstrap address", cluster)

    def create():
        t = NewTopic(compacted, num_partitions=3, replication_factor=1,
                     config={"cleanup.policy": "compact", "retention.ms": "3600000",
                             "segment.bytes": "1048576"})
        admin.create_topics([t], operation_timeout=T, request_timeout=T)[compacted].result(timeout=T)
        admin.create_topics([NewTopic(plain, num_partitions=1, replication_factor=1)],
                            request_timeout=T)[plain].result(timeout=T)
        return "ok both created"
    c.run("create_topics with config (3 partitions) and a plain topic", create)
    c.run("create_topics: an existing name is refused (TOPIC_ALREADY_EXISTS)",
          lambda: expect_error(admin.create_topics([NewTopic(compacted, 1, 1)], request_timeout=T)[compacted],
                               KafkaError.TOPIC_ALREADY_EXISTS))

    def topics():
        d = describe(admin, compacted)
        if len(d.partitions) != 3:
            return f"partitions {len(d.partitions)}"
        if d.is_internal:
            return "internal"
        for p in d.partitions:
            if p.leader is None or p.leader.id != node.get("id") or len(p.replicas) != 1 or len(p.isr) != 1:
                return f"partition {p.id}: leader {p.leader}, replicas {p.replicas}, isr {p.isr}"
        return "ok 3 partitions on the node"
    c.run("describe_topics: 3 partitions led by the node, replicas = isr = [node]", topics)

    def configs():
        cfg = topic_config(admin, compacted)
        return ok_unless(first_error(
            entry_is(cfg, "cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            entry_is(cfg, "retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            entry_is(cfg, "segment.bytes", "1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            entry_is(cfg, "compression.type", "producer", ConfigSource.DEFAULT_CONFIG),
            None if len(cfg) >= 30 else f"only {len(cfg)} entries"), f"{len(cfg)} entries")
    c.run("describe_configs(topic): overrides DYNAMIC_TOPIC_CONFIG, the rest defaults", configs)

    def broker_configs():
        res = ConfigResource(ConfigResource.Type.BROKER, str(node.get("id")))
        cfg = admin.describe_configs([res], request_timeout=T)[res].result(timeout=T)
        mmb = cfg.get("message.max.bytes")
        if mmb is None or int(mmb.value) <= 0:
            return f"message.max.bytes {mmb}"
        return first_error(
            entry_is(cfg, "log.retention.hours", "168"),
            entry_is(cfg, "log.segment.bytes", "1073741824"),
            entry_is(cfg, "log.cleanup.policy", "delete"),
            entry_is(cfg, "num.partitions", "1")) or f"ok {len(cfg)} entries"
    c.run("describe_configs(broker): the node's log and message settings with their defaults", broker_configs)

    def alter():
        res = ConfigResource(ConfigResource.Type.TOPIC, compacted, incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ])
        admin.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)

        def read_back():
            cfg = topic_config(admin, compacted)
            return first_error(
                entry_is(cfg, "retention.ms", "7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
                entry_is(cfg, "segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
                entry_is(cfg, "cleanup.policy", "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG))
        return ok_unless(eventually(read_back), "read back")
    c.run("incremental_alter_configs SET/DELETE/APPEND, read back", alter)

    def alter_bad():
        res = ConfigResource(ConfigResource.Type.TOPIC, compacted, incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
        e = expect_error(admin.incremental_alter_configs([res], request_timeout=T)[res], KafkaError.INVALID_CONFIG)
        if not e.startswith("ok"):
            return e
        return first_error(entry_is(topic_config(admin, compacted), "retention.ms", "7200000"), e)
    c.run("incremental_alter_configs: a bad value is refused (INVALID_CONFIG), nothing changes", alter_bad)

    def grow():
        admin.create_partitions([NewPartitions(compacted, 5)], request_timeout=T)[compacted].result(timeout=T)

        def five():
            n = len(describe(admin, compacted).partitions)
            return None if n == 5 else f"partitions {n}"
        return ok_unless(eventually(five), "5 partitions")
    c.run("create_partitions: 3 -> 5, describe_topics shows 5", grow)
    c.run("create_partitions: 5 -> 2 is refused (INVALID_PARTITIONS)",
          lambda: expect_error(admin.create_partitions([NewPartitions(compacted, 2)], request_timeout=T)[compacted],
                               KafkaError.INVALID_PARTITIONS))

    ts0 = int(time.time() * 1000) - 60_000

    def produce():
        p = Producer({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
        offsets = []
        for i in range(10):
            p.produce(plain, key=f"k{i}", value=f"v{i}", partition=0, timestamp=ts0 + i,
                      on_delivery=lambda err, m: offsets.append(m.offset() if err is None else str(err)))
            p.flush(T)
        return "ok offsets 0..9" if offsets == list(range(10)) else f"offsets {offsets}"
    c.run("produce 10 records with timestamps ts0+i to the plain topic", produce)

    tp = TopicPartition(plain, 0, 4)

    def delete_records():
        r = admin.delete_records([tp], request_timeout=T)[tp].result(timeout=T)
        return "ok low watermark 4" if r.low_watermark == 4 else f"low watermark {r.low_watermark}"
    c.run("delete_records before offset 4: low watermark 4", delete_records)

    def list_offsets():
        got, ok = [], True
        specs = [("earliest", OffsetSpec.earliest(), 4), ("latest", OffsetSpec.latest(), 10),
                 ("for_timestamp", OffsetSpec.for_timestamp(ts0 + 6), 6),
                 ("max_timestamp", OffsetSpec.max_timestamp(), 9)]
        for name, spec, want in specs:
            key = TopicPartition(plain, 0)
            info = admin.list_offsets({key: spec}, request_timeout=T)[key].result(timeout=T)
            got.append(f"{name}={info.offset}")
            ok &= info.offset == want
            if name in ("for_timestamp", "max_timestamp") and info.timestamp != ts0 + want:
                ok = False
                got.append(f"(timestamp {info.timestamp - ts0})")
        return ("ok " if ok else "") + " ".join(got)
    c.run("list_offsets: earliest 4, latest 10, timestamp ts0+6 -> 6, max timestamp -> 9", list_offsets)

    def delete():
        futs = admin.delete_topics([compacted, plain], operation_timeout=T, request_timeout=T)
        for f in futs.values():
            f.result(timeout=T)
        deadline = time.time() + 15
        while True:
            names = set(admin.list_topics(timeout=T).topics)
            if compacted not in names and plain not in names:
                break
            if time.time() > deadline:
                return f"still listed: {sorted(n for n in names if n.startswith(prefix))}"
            time.sleep(0.2)
        return expect_error(admin.describe_topics(TopicCollection([compacted]), request_timeout=T)[compacted],
                            KafkaError.UNKNOWN_TOPIC_OR_PART)
    c.run("delete_topics: both gone from list_topics and describe_topics", delete)
    c.finish()


if __name__ == "__main__":
    main()
