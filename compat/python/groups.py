"""Classic consumer groups with confluent-kafka (librdkafka, classic protocol) against $BOOTSTRAP.

Members run as worker subprocesses (this file with `worker ...`) so one can be killed with SIGKILL: no
LeaveGroup, the broker must notice through the session timeout. Checks: 3 members of one group on a
6-partition topic get disjoint assignments covering all 6; the group receives every record; after
kill -9 of one member the survivors cover all 6 and receive new records; a second group on the same
topic receives every record too; committed offsets reach the log end.

With GROUP_PROTOCOL=consumer the same checks run with the KIP-848 protocol (`group.protocol=consumer`,
broker-side `uniform` assignor); the killed member's partitions move after the broker's session timeout
(group.consumer.session.timeout.ms, 45 s by default).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compat_common import (PARTITIONS, Checks, create_topic, env, log_error_cb,  # noqa: E402
                           print_client_version)
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


GROUP_PROTOCOL = os.environ.get("GROUP_PROTOCOL", "classic")
# KIP-848: a member killed without leaving goes after the broker's 45 s session timeout.
FAILOVER_TIMEOUT = 120 if GROUP_PROTOCOL == "consumer" else 60


def consumer_conf(bootstrap, group, name):
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "error_cb": lambda e: None,
    }
    if GROUP_PROTOCOL == "consumer":
        # The broker assigns; session and heartbeat timing are broker configs.
        conf.update({"group.protocol": "consumer", "group.remote.assignor": "uniform"})
    else:
        conf.update({"group.protocol": "classic", "partition.assignment.strategy": "range",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return conf


def worker(bootstrap, group, topic, name):
    """Consumes and reports JSON lines on stdout: assignments and record values."""
    c = Consumer(consumer_conf(bootstrap, group, name))

    def report(kind, parts):
        print(json.dumps({"kind": kind, "partitions": sorted(p.partition for p in parts)}), flush=True)

    c.subscribe([topic], on_assign=lambda _c, ps: report("assign", ps),
                on_revoke=lambda _c, ps: report("revoke", ps))
    while True:
        for m in c.consume(num_messages=500, timeout=0.2):
            if m.error() is None:
                print(json.dumps({"kind": "msg", "value": m.value().decode()}), flush=True)


class Member:
    def __init__(self, bootstrap, group, topic, name, seen):
        self.name = name
        self.partitions = set()
        self.seen = seen
        self.proc = subprocess.Popen([sys.executable, __file__, "worker", bootstrap, group, topic, name],
                                     stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            # Incremental for the consumer protocol; eager (full sets) for classic range.
            if ev["kind"] == "assign":
                self.partitions = self.partitions | set(ev["partitions"])
            elif ev["kind"] == "revoke":
                self.partitions = self.partitions - set(ev["partitions"])
            elif ev["kind"] == "msg":
                self.seen.add(ev["value"])

    def kill9(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def wait_cover(members, timeout=60):
    deadline = time.time() + timeout
    stable = 0
    last = ""
    while time.time() < deadline:
        parts = [m.partitions for m in members]
        union = set().union(*parts)
        last = " ".join(f"{m.name}={sorted(m.partitions)}" for m in members)
        ok = len(union) == PARTITIONS and sum(len(p) for p in parts) == PARTITIONS and all(parts)
        stable = stable + 1 if ok else 0
        if stable >= 10:
            return f"ok {last}"
        time.sleep(0.2)
    return f"assignments never covered all {PARTITIONS} partitions disjointly: {last}"


def wait_seen(seen, want, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if want <= seen:
            return f"ok {len(want)} records"
        time.sleep(0.2)
    return f"missing {len(want - seen)} of {len(want)} records"


def produce(bootstrap, topic, start, n):
    p = Producer({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    values = []
    for i in range(start, start + n):
        v = f"pg-{i:06d}"
        p.produce(topic, key=f"k{i}".encode(), value=v.encode(), partition=i % PARTITIONS)
        values.append(v)
    if p.flush(60):
        raise RuntimeError("records left undelivered")
    return set(values)


def committed_sum(bootstrap, group, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "error_cb": lambda e: None})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
        return sum(max(tp.offset, 0) for tp in tps)
    finally:
        c.close()


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    topic = f"{prefix}-py-groups" + ("-consumer" if GROUP_PROTOCOL == "consumer" else "")
    print_client_version()
    print(f"bootstrap={bootstrap} topic={topic}", flush=True)
    ch = Checks()
    if not ch.run("create a 6-partition topic", lambda: create_topic(bootstrap, topic)):
        ch.finish()
    produced = produce(bootstrap, topic, 0, 600)
    seen = set()
    group = f"{topic}-g1"
    members = [Member(bootstrap, group, topic, f"py-{i}", seen) for i in range(3)]
    other_seen = set()
    others = []
    try:
        ch.run("3 members get disjoint assignments covering all 6 partitions", lambda: wait_cover(members))
        ch.run("the group receives every record", lambda: wait_seen(seen, produced))
        members[2].kill9()
        ch.run("after kill -9 of one member the other two cover all 6 partitions",
               lambda: wait_cover(members[:2], FAILOVER_TIMEOUT))
        produced |= produce(bootstrap, topic, 600, 60)
        ch.run("survivors receive records produced after the failover", lambda: wait_seen(seen, produced))
        others = [Member(bootstrap, f"{topic}-g2", topic, f"py2-{i}", other_seen) for i in range(2)]
        ch.run("a second group on the same topic receives every record", lambda: wait_seen(other_seen, produced))

        def committed():
            deadline = time.time() + 30
            got = -1
            while time.time() < deadline:
                got = committed_sum(bootstrap, group, topic)
                if got == len(produced):
                    return f"ok committed offsets sum to {got}"
                time.sleep(0.5)
            return f"committed offsets sum to {got}, want {len(produced)}"
        ch.run("committed offsets reach the log end", committed)
    finally:
        for m in members + others:
            m.kill9()
    ch.finish()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(*sys.argv[2:6])
    else:
        main()
