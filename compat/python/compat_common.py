"""Shared helpers for the confluent-kafka compat suites (also used by compat/crash)."""
import os
import socket
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6


class Checks:
    """PASS/FAIL lines per check and the final 'N passed, N failed' line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS {name}" + (f" ({detail})" if detail else ""), flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}: {detail}", flush=True)
        return ok

    def run(self, name, fn):
        """fn returns 'ok ...' for success or an error message; exceptions fail the check. Anything
        else (None included: a check that forgot its verdict) fails, so no check passes by accident."""
        try:
            res = fn()
        except Exception as e:  # noqa: BLE001 - report every failure as a failed check
            return self.check(name, False, f"{type(e).__name__}: {e}")
        if res is None:
            return self.check(name, False, "the check returned no verdict (None)")
        return self.check(name, str(res).startswith("ok"), str(res))

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        sys.exit(0 if self.failed == 0 else 1)


def env(name, default=None):
    v = os.environ.get(name)
    return v if v else default


def print_client_version():
    v = confluent_kafka.version()
    v = v[0] if isinstance(v, tuple) else v
    print(f"CLIENT_VERSION: confluent-kafka {v} "
          f"(librdkafka {confluent_kafka.libversion()[0]})", flush=True)


def log_error_cb(err):
    # librdkafka reports transient transport / coordinator errors here; they are not fatal by themselves.
    print(f"  [client error_cb] {err}", flush=True)


def create_topic(bootstrap, topic, partitions=PARTITIONS):
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    futs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                               operation_timeout=30, request_timeout=30)
    futs[topic].result(timeout=60)
    # Kafka's metadata cache learns of a new topic asynchronously: look again for up to 10 s
    deadline = time.time() + 10
    while True:
        md = admin.list_topics(topic, timeout=30)
        t = md.topics.get(topic)
        if (t is not None and t.error is None and len(t.partitions) == partitions) or time.time() > deadline:
            break
        time.sleep(0.2)
    if t is None or t.error is not None:
        return f"topic {topic} missing from metadata: {t.error if t else 'absent'}"
    if len(t.partitions) != partitions:
        return f"topic {topic} has {len(t.partitions)} partitions, want {partitions}"
    return f"ok {topic}: {partitions} partitions"


def ok_unless(err, what):
    """A check's verdict from a helper that returns None for no error: 'ok <what>' or the error."""
    return f"ok {what}" if err is None else err


def produce_all(producer, topic, items, on_ack=None, flush_timeout=120):
    """Produce (key, value) items; returns (acked dict value->(partition, offset), errors list)."""
    acked = {}
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(f"{msg.value()[:40]!r}: {err}")
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())
            if on_ack:
                on_ack(msg)

    for k, v in items:
        while True:
            try:
                producer.produce(topic, key=k, value=v, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(flush_timeout)
    if remaining:
        errors.append(f"{remaining} records still in flight after flush({flush_timeout})")
    return acked, errors


def consume_all(bootstrap, topic, expected=None, partitions=PARTITIONS, timeout=120, group_id=None):
    """Reads every partition from the beginning with assign() (no group membership, no commits).

    confluent-kafka's Consumer refuses to start without group.id, so a unique one is passed; with assign()
    and enable.auto.commit=False it is never joined, but librdkafka still looks the coordinator up
    (FindCoordinator) in the background: a broker without group support only causes logged errors.
    Returns a list of (partition, offset, key, value).
    """
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group_id or f"compat-assign-only-{os.getpid()}-{time.time_ns()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "error_cb": log_error_cb,
    })
    out = []
    eof = set()
    try:
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.time() + timeout
        while time.time() < deadline:
            msgs = c.consume(num_messages=10000, timeout=0.5)
            for m in msgs:
                err = m.error()
                if err is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
                    eof.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    print(f"  [consumer error] {err}", flush=True)
            if len(eof) == partitions and (expected is None or len(out) >= expected):
                break
    finally:
        c.close()
    return out


def verify_records(records, expected_values, acked=None):
    """records: (partition, offset, key, value). expected_values: dict value->key.

    Checks: count, every value exactly once with its key, every key on one partition, the partition the
    delivery report gave, offsets per partition contiguous from 0."""
    if len(records) != len(expected_values):
        return f"read {len(records)} records, want {len(expected_values)}"
    seen = set()
    key_part = {}
    next_off = {}
    for p, off, k, v in sorted(records, key=lambda r: (r[0], r[1])):
        if v not in expected_values:
            return f"unexpected or corrupt value {v[:60]!r} at partition {p} offset {off}"
        if v in seen:
            return f"duplicate value {v[:60]!r} at partition {p} offset {off}"
        seen.add(v)
        if expected_values[v] != k:
            return f"value {v[:40]!r} carries key {k!r}, want {expected_values[v]!r}"
        prev = key_part.setdefault(k, p)
        if prev != p:
            return f"key {k!r} found on partitions {prev} and {p}"
        if acked is not None and v in acked and acked[v][0] != p:
            return f"value {v[:40]!r} acked on partition {acked[v][0]} but read from {p}"
        want = next_off.get(p, 0)
        if off != want:
            return f"partition {p}: offset {off}, want {want} (offsets not contiguous from 0)"
        next_off[p] = want + 1
    return f"ok {len(records)} records, per partition {dict(sorted(next_off.items()))}"


def free_port():
    """A free TCP port on 127.0.0.1 (for a broker a test starts itself)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def port_open(port):
    """Whether something accepts connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
