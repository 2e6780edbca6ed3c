"""Transactions with confluent-kafka (librdkafka) against $BOOTSTRAP: init/begin/commit and abort,
read_committed vs read_uncommitted consumers (isolation.level), an open transaction holding read_committed
readers back until its commit, and send_offsets_to_transaction from a group consumer (consume-transform-
produce): the group's offsets appear only on commit and not at all on abort. Every check compares exact
value sets. Prints PASS/FAIL lines and "N passed, N failed".
"""
import time

import confluent_kafka
from compat_common import Checks, create_topic, env, log_error_cb, print_client_version
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

PARTS = 3
TIMEOUT = 15  # seconds per transactional call: a broker without a coordinator fails fast


def producer(bootstrap, txn_id):
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": 60000,
                     "linger.ms": 5, "error_cb": log_error_cb})


def produce(p, topic, values):
    for i, v in enumerate(values):
        p.produce(topic, key=f"k{i % 13}".encode(), value=v.encode())
    left = p.flush(30)
    if left:
        raise RuntimeError(f"{left} records undelivered after flush(30)")


def values(tag, n):
    return [f"{tag}-{i:05d}" for i in range(n)]


def reader(bootstrap, topic, isolation):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-reader-{time.time_ns()}",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True,
                  "auto.offset.reset": "earliest", "error_cb": lambda e: None})
    c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTS)])
    return c


def poll(c, want, timeout):
    """Values read until `want` arrived and every partition is at EOF (or timeout), then 0.5 s more."""
    out, eof = [], set()
    deadline = time.time() + timeout
    while time.time() < deadline and not (len(out) >= want and len(eof) == PARTS):
        for m in c.consume(1000, 0.2):
            if m.error() is None:
                out.append(m.value().decode())
                eof.discard(m.partition())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    end = time.time() + 0.5
    while time.time() < end:
        out += [m.value().decode() for m in c.consume(1000, 0.1) if m.error() is None]
    return out


def read_all(bootstrap, topic, isolation, want, timeout=20):
    c = reader(bootstrap, topic, isolation)
    try:
        return poll(c, want, timeout)
    finally:
        c.close()


def same(got, want):
    if len(got) == len(want) and set(got) == set(want):
        return None
    miss, extra = set(want) - set(got), set(got) - set(want)
    return (f"read {len(got)} records ({len(set(got))} distinct), want {len(want)}; missing {len(miss)} "
            f"{sorted(miss)[:1]}, unexpected {len(extra)} {sorted(extra)[:1]}")


def group_offsets(admin, group, topic, stable=False, want=None):
    """Committed offsets {partition: offset}. stable: OffsetFetch require_stable, retried for up to 10 s while
    the broker answers UNSTABLE_OFFSET_COMMIT (markers of an ended transaction not yet applied) or, with
    `want`, until the answer equals it (Kafka writes the markers after EndTxn returns)."""
    req = confluent_kafka.ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTS)])
    deadline = time.time() + (10 if stable else 0)
    while True:
        try:
            res = admin.list_consumer_group_offsets([req], require_stable=stable)[group].result(timeout=30)
            got = {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}
            errs = [str(tp.error) for tp in res.topic_partitions if tp.error is not None]
            if not errs and (want is None or got == want) or time.time() > deadline:
                return got if not errs else f"errors {errs}"
        except confluent_kafka.KafkaException as e:
            if time.time() > deadline:
                return f"error {e}"
        time.sleep(0.2)


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    print_client_version()
    ch = Checks()
    t0 = time.time()
    topic, t_in, t_out = f"{prefix}-pytxn", f"{prefix}-pytxn-in", f"{prefix}-pytxn-out"
    committed, aborted, opened = values("commit", 200), values("abort", 100), values("open", 50)
    p = producer(bootstrap, f"{prefix}-pytxn")
    def create_topics():
        verdicts = [create_topic(bootstrap, t, PARTS) for t in (topic, t_in, t_out)]
        return next((v for v in verdicts if not v.startswith("ok")), "ok 3 topics")
    if not ch.run("transactions/create-topics", create_topics):
        ch.finish()
    if not ch.run("transactions/init", lambda: p.init_transactions(TIMEOUT) or "ok initialized"):
        ch.finish()  # no transaction coordinator: every later check would repeat this failure

    def commit():
        p.begin_transaction()
        produce(p, topic, committed)
        p.commit_transaction(TIMEOUT)
        return "ok 200 records committed"

    def abort():
        p.begin_transaction()
        produce(p, topic, aborted)
        p.abort_transaction(TIMEOUT)
        return "ok 100 records aborted"
    if not (ch.run("transactions/commit", commit) and ch.run("transactions/abort", abort)):
        ch.finish()
    ch.run("transactions/read-committed",
           lambda: same(read_all(bootstrap, topic, "read_committed", 200), committed) or "ok exactly the 200 committed")
    ch.run("transactions/read-uncommitted", lambda: same(read_all(bootstrap, topic, "read_uncommitted", 300),
                                                         committed + aborted) or "ok 200 committed + 100 aborted")

    rc = reader(bootstrap, topic, "read_committed")
    try:
        def open_blocks():
            p.begin_transaction()
            produce(p, topic, opened)
            got = poll(rc, 10**6, 2.5)  # the full 2.5 s: nothing of the open transaction may arrive
            return same(got, committed) or "ok only the 200 committed records while a transaction is open"
        ch.run("transactions/open-blocks-read-committed", open_blocks)
        ch.run("transactions/open-visible-read-uncommitted",
               lambda: same(read_all(bootstrap, topic, "read_uncommitted", 350), committed + aborted + opened)
               or "ok 350 records including the open transaction")

        def commit_releases():
            p.commit_transaction(TIMEOUT)
            return same(poll(rc, 50, 20), opened) or "ok the same read_committed consumer gets the 50 after commit"
        ch.run("transactions/commit-releases-read-committed", commit_releases)
    finally:
        rc.close()

    # consume-transform-produce: a group consumer's positions go into the transaction
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    group, group2 = f"{prefix}-pytxn-group", f"{prefix}-pytxn-group2"
    inputs = values("in", 90)
    src = Producer({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    for i, v in enumerate(inputs):
        src.produce(t_in, value=v.encode(), partition=i % PARTS)
    src.flush(30)
    gc = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                   "enable.auto.commit": False, "auto.offset.reset": "earliest", "error_cb": log_error_cb})
    positions = {}
    try:
        gc.subscribe([t_in])

        def consume_transform():
            got = []
            deadline = time.time() + 30
            while len(got) < len(inputs) and time.time() < deadline:
                got += [m for m in gc.consume(500, 0.2) if m.error() is None]
            if sorted(m.value().decode() for m in got) != inputs:
                return f"group consumer read {len(got)} records, want the {len(inputs)} inputs"
            p.begin_transaction()
            produce(p, t_out, [f"T({m.value().decode()})" for m in got])
            pos = gc.position(gc.assignment())
            positions.update({tp.partition: tp.offset for tp in pos})
            p.send_offsets_to_transaction(pos, gc.consumer_group_metadata(), TIMEOUT)
            return f"ok {len(got)} records transformed, positions {dict(sorted(positions.items()))} sent"
        if ch.run("transactions/send-offsets", consume_transform):
            ch.run("transactions/send-offsets-invisible-before-commit",
                   lambda: (lambda g: f"ok no offsets for {group}" if not g else f"offsets visible before commit: {g}")(
                       group_offsets(admin, group, t_in)))

            def after_commit():
                p.commit_transaction(TIMEOUT)
                g = group_offsets(admin, group, t_in, stable=True, want=positions)
                if g != positions:
                    return f"committed offsets {g}, want the positions {positions}"
                out = read_all(bootstrap, t_out, "read_committed", 90)
                return same(out, [f"T({v})" for v in inputs]) or f"ok offsets {g}, output = the 90 inputs transformed"
            ch.run("transactions/send-offsets-visible-after-commit", after_commit)

            def aborted_offsets():
                p.begin_transaction()
                produce(p, t_out, values("dropped", 10))
                c2 = Consumer({"bootstrap.servers": bootstrap, "group.id": group2, "error_cb": lambda e: None})
                try:  # group metadata of a consumer that never joined: generation -1, like the Java client's
                    p.send_offsets_to_transaction([TopicPartition(t_in, q, 1) for q in range(PARTS)],
                                                  c2.consumer_group_metadata(), TIMEOUT)
                    p.send_offsets_to_transaction([TopicPartition(t_in, q, 2) for q in range(PARTS)],
                                                  gc.consumer_group_metadata(), TIMEOUT)
                finally:
                    c2.close()
                p.abort_transaction(TIMEOUT)
                g1 = group_offsets(admin, group, t_in, stable=True)
                if g1 != positions:
                    return f"after abort: {group} offsets {g1}, want {positions}"
                # a later committed transaction: once its offsets show, the abort before it was applied too
                later = {q: positions[q] + 100 for q in positions}
                p.begin_transaction()
                p.send_offsets_to_transaction([TopicPartition(t_in, q, o) for q, o in later.items()],
                                              gc.consumer_group_metadata(), TIMEOUT)
                p.commit_transaction(TIMEOUT)
                g1 = group_offsets(admin, group, t_in, stable=True, want=later)
                g2 = group_offsets(admin, group2, t_in, stable=True)
                if g2 or g1 != later:
                    return f"after abort and a later commit: {group2} offsets {g2} (want none), {group} {g1} (want {later})"
                out = read_all(bootstrap, t_out, "read_committed", 90)
                return same(out, [f"T({v})" for v in inputs]) or "ok aborted offsets and records dropped"
            ch.run("transactions/send-offsets-abort", aborted_offsets)
    finally:
        gc.close()
    print(f"seconds: {time.time() - t0:.1f}", flush=True)
    ch.finish()


if __name__ == "__main__":
    main()
