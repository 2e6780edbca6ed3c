"""kafka-python: create a 6-partition topic, produce N keyed records (acks=all), read them back with
assign() + seek_to_beginning (group_id=None: no group, no commits)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_common import PARTITIONS, Checks, env, verify_records  # noqa: E402

import kafka  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    n = int(env("KAFKA_PYTHON_RECORDS", "5000"))
    print(f"CLIENT_VERSION: kafka-python {kafka.__version__}", flush=True)
    print(f"bootstrap={bootstrap} prefix={prefix} records={n}", flush=True)
    ch = Checks()
    topic = f"{prefix}-kafka-python"

    def create():
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
        finally:
            admin.close()
        c = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            deadline = time.time() + 30
            parts = None
            while time.time() < deadline:
                parts = c.partitions_for_topic(topic)
                if parts and len(parts) == PARTITIONS:
                    return f"ok {PARTITIONS} partitions"
                time.sleep(0.2)
            return f"metadata shows partitions {parts}, want {PARTITIONS}"
        finally:
            c.close()

    if not ch.run("KafkaAdminClient.create_topics(6 partitions)", create):
        ch.finish()

    expected = {}
    items = []
    for i in range(n):
        k = f"key-{i % 1009}".encode()
        v = f"value-{i:07d}-{'k' * (i % 64)}".encode()
        expected[v] = k
        items.append((k, v))
    acked = {}

    def produce():
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=5)
        t = time.time()
        futs = [(v, p.send(topic, key=k, value=v)) for k, v in items]
        p.flush(timeout=120)
        errors = []
        for v, f in futs:
            try:
                md = f.get(timeout=30)
                acked[v] = (md.partition, md.offset)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{v[:30]!r}: {type(e).__name__}: {e}")
        p.close()
        if errors:
            return f"{len(errors)} send errors, first: {errors[0]}"
        key_part = {}
        for v, (part, _off) in acked.items():
            if key_part.setdefault(expected[v], part) != part:
                return f"key {expected[v]!r} acked on two partitions"
        return f"ok {n} acked in {time.time() - t:.1f}s"

    if ch.run(f"KafkaProducer(acks=all) {n} keyed records all acknowledged", produce):
        def consume():
            c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                              auto_offset_reset="earliest")
            recs = []
            try:
                tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
                c.assign(tps)
                c.seek_to_beginning(*tps)
                deadline = time.time() + 60
                while len(recs) < n and time.time() < deadline:
                    for _tp, msgs in c.poll(timeout_ms=500, max_records=5000).items():
                        recs.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
            finally:
                c.close()
            return verify_records(recs, expected, acked)
        ch.run(f"KafkaConsumer(assign, group_id=None) reads back {n}: count, values, per-key partition, "
               "contiguous offsets", consume)
    ch.finish()


if __name__ == "__main__":
    main()
