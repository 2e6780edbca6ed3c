"""confluent-kafka: produce N keyed records over 6 partitions, read them all back with assign()."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compat_common import (Checks, consume_all, create_topic, env, log_error_cb, print_client_version,  # noqa: E402
                           produce_all, verify_records)
from confluent_kafka import Producer  # noqa: E402


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    n = int(env("PYTHON_RECORDS", "100000"))
    print_client_version()
    print(f"bootstrap={bootstrap} prefix={prefix} records={n}", flush=True)
    ch = Checks()
    topic = f"{prefix}-python-roundtrip"
    if not ch.run("AdminClient.create_topics(6 partitions)", lambda: create_topic(bootstrap, topic)):
        ch.finish()

    expected = {}
    items = []
    for i in range(n):
        k = f"key-{i % 1009}".encode()
        v = f"value-{i:07d}-{'y' * (i % 64)}".encode()
        expected[v] = k
        items.append((k, v))

    acked = {}

    def produce():
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True, "error_cb": log_error_cb})
        t = time.time()
        a, errors = produce_all(p, topic, items)
        acked.update(a)
        if errors:
            return f"{len(errors)} delivery errors, first: {errors[0]}"
        if len(a) != n:
            return f"{len(a)} delivery reports, want {n}"
        key_part = {}
        for v, (part, _off) in a.items():
            if key_part.setdefault(expected[v], part) != part:
                return f"key {expected[v]!r} acked on two partitions"
        return f"ok {n} acked in {time.time() - t:.1f}s"

    if ch.run(f"producer(idempotent, acks=all) {n} keyed records all acknowledged", produce):
        t = time.time()
        recs = consume_all(bootstrap, topic, expected=n)
        res = verify_records(recs, expected, acked)
        ch.check(f"consumer(assign, no group) reads back {n}: count, values, per-key partition, contiguous offsets",
                 res.startswith("ok"), res + (f" in {time.time() - t:.1f}s" if res.startswith("ok") else ""))
    ch.finish()


if __name__ == "__main__":
    main()
