"""aiokafka: create a 6-partition topic, produce N keyed records (idempotent, acks=all), read them back
with assign() + seek_to_beginning (group_id=None: no group, no commits)."""
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_common import PARTITIONS, Checks, env, verify_records  # noqa: E402

import aiokafka  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402


async def arun(ch, fn):
    try:
        res = await fn()
    except Exception as e:  # noqa: BLE001
        return ("err", f"{type(e).__name__}: {e}")
    return ("ok", res)


def record(ch, name, outcome):
    kind, res = outcome
    if kind == "err":
        return ch.check(name, False, res)
    ok = res is None or str(res).startswith("ok")
    return ch.check(name, ok, "" if res is None else str(res))


async def amain():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    n = int(env("AIOKAFKA_RECORDS", "10000"))
    print(f"CLIENT_VERSION: aiokafka {aiokafka.__version__}", flush=True)
    print(f"bootstrap={bootstrap} prefix={prefix} records={n}", flush=True)
    ch = Checks()
    topic = f"{prefix}-aiokafka"

    async def create():
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
        finally:
            await admin.close()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await c.start()
        try:
            deadline = time.time() + 30
            parts = None
            while time.time() < deadline:
                parts = await c.partitions_for_topic(topic) if asyncio.iscoroutinefunction(
                    c.partitions_for_topic) else c.partitions_for_topic(topic)
                if parts and len(parts) == PARTITIONS:
                    return None
                await c._client.force_metadata_update()  # noqa: SLF001
                await asyncio.sleep(0.2)
            return f"metadata shows partitions {parts}, want {PARTITIONS}"
        finally:
            await c.stop()

    if not record(ch, "AIOKafkaAdminClient.create_topics(6 partitions)", await arun(ch, create)):
        ch.finish()

    expected = {}
    items = []
    for i in range(n):
        k = f"key-{i % 1009}".encode()
        v = f"value-{i:07d}-{'a' * (i % 64)}".encode()
        expected[v] = k
        items.append((k, v))
    acked = {}

    async def produce():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
        await p.start()
        t = time.time()
        errors = []
        try:
            futs = [(v, await p.send(topic, key=k, value=v)) for k, v in items]
            for v, f in futs:
                try:
                    md = await f
                    acked[v] = (md.partition, md.offset)
                except Exception as e:  # noqa: BLE001
                    errors.append(f"{v[:30]!r}: {type(e).__name__}: {e}")
        finally:
            await p.stop()
        if errors:
            return f"{len(errors)} send errors, first: {errors[0]}"
        key_part = {}
        for v, (part, _off) in acked.items():
            if key_part.setdefault(expected[v], part) != part:
                return f"key {expected[v]!r} acked on two partitions"
        return f"ok {n} acked in {time.time() - t:.1f}s"

    if record(ch, f"AIOKafkaProducer(idempotent, acks=all) {n} keyed records all acknowledged",
              await arun(ch, produce)):
        async def consume():
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
            await c.start()
            recs = []
            try:
                tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
                c.assign(tps)
                await c.seek_to_beginning(*tps)
                deadline = time.time() + 60
                while len(recs) < n and time.time() < deadline:
                    batch = await c.getmany(timeout_ms=500, max_records=5000)
                    for _tp, msgs in batch.items():
                        recs.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
            finally:
                await c.stop()
            return verify_records(recs, expected, acked)
        record(ch, f"AIOKafkaConsumer(assign, group_id=None) reads back {n}: count, values, per-key partition, "
                   "contiguous offsets", await arun(ch, consume))
    ch.finish()


if __name__ == "__main__":
    asyncio.run(amain())
