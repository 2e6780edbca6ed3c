"""Crash test for committed offsets: a consumer group member (confluent-kafka) consumes part of a
6-partition topic and commits synchronously; the member is killed, then the broker is killed with -9
and restarted on the same data dir. A new member of the same group must resume exactly at the
committed offsets (read back from __consumer_offsets) and, with the first member's records, cover
every offset with no gap.

Starts its own broker (CRASH_BROKER=sluice with SLUICE_BIN, or kafka with KAFKA_REFERENCE), under
CRASH_DIR. Runs with compat/python/.venv.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import (PARTITIONS, Checks, create_topic, env, log_error_cb,  # noqa: E402
                           print_client_version)
from confluent_kafka import Consumer, Producer  # noqa: E402
from crash import Broker, free_port  # noqa: E402

RECORDS = 6000


def conf(bootstrap, group):
    # Small fetches interleave the partitions, so commits land mid-partition.
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "max.partition.fetch.bytes": 1024, "error_cb": lambda e: None}


def worker(bootstrap, group, topic, limit):
    """Consumes up to `limit` records, committing each batch synchronously; reports as JSON lines."""
    c = Consumer(conf(bootstrap, group))
    c.subscribe([topic])
    n = 0
    while True:
        msgs = [m for m in c.consume(200, 0.5) if m.error() is None]
        if not msgs or n >= limit:
            continue
        for m in msgs:
            print(json.dumps({"kind": "msg", "p": m.partition(), "o": m.offset()}), flush=True)
        n += len(msgs)
        try:
            done = c.commit(asynchronous=False)
            print(json.dumps({"kind": "committed", "offsets": {str(tp.partition): tp.offset for tp in done}}),
                  flush=True)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"kind": "commit-error", "error": str(e)}), flush=True)


def main():
    kind = env("CRASH_BROKER", "sluice")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    print_client_version()
    ch = Checks()
    base = (env("CRASH_DIR") or tempfile.mkdtemp(prefix="sluice-crash-")) + "-groups"
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    port = free_port()
    broker = Broker(kind, base, port)
    bootstrap = f"127.0.0.1:{port}"
    topic, group = f"{prefix}-crash-groups", f"{prefix}-crash-group"
    consumed = {}   # partition -> set of offsets seen by either member
    committed = {}  # partition -> last committed offset the first member saw acknowledged
    try:
        if not ch.run(f"start {kind}", lambda: broker.start()):
            ch.finish()
        if not ch.run("create a 6-partition topic", lambda: create_topic(bootstrap, topic)):
            ch.finish()
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 20,
                      "error_cb": log_error_cb})
        for i in range(RECORDS):
            p.produce(topic, value=f"r{i}".encode(), partition=i % PARTITIONS)
        ch.check("produce", p.flush(60) == 0, f"{RECORDS} records")

        proc = subprocess.Popen([sys.executable, __file__, "worker", bootstrap, group, topic, str(RECORDS // 2)],
                                stdout=subprocess.PIPE, text=True)

        def read():
            for line in proc.stdout:
                ev = json.loads(line)
                if ev["kind"] == "msg":
                    consumed.setdefault(ev["p"], set()).add(ev["o"])
                elif ev["kind"] == "committed":
                    # librdkafka lists unchanged partitions as -1001 (nothing new to commit): keep the last.
                    for k, v in ev["offsets"].items():
                        if v >= 0:
                            committed[int(k)] = v
        threading.Thread(target=read, daemon=True).start()
        deadline = time.time() + 90
        while time.time() < deadline and sum(committed.values()) < RECORDS // 2:
            time.sleep(0.2)
        time.sleep(1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        before = dict(committed)
        ch.check("first member consumed and committed half of the records",
                 sum(before.values()) >= RECORDS // 2, f"committed {dict(sorted(before.items()))}")
        broker.kill9()
        if not ch.run(f"restart {kind} after kill -9", lambda: broker.start()):
            ch.finish()

        c = Consumer(conf(bootstrap, group))
        c.subscribe([topic])
        first = {}
        deadline = time.time() + 120
        while time.time() < deadline and sum(len(v) for v in consumed.values()) < RECORDS:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    first.setdefault(m.partition(), m.offset())
                    consumed.setdefault(m.partition(), set()).add(m.offset())
        c.close()
        want = {pt: before.get(pt, 0) for pt in range(PARTITIONS)}
        got = {pt: first.get(pt) for pt in range(PARTITIONS) if before.get(pt, 0) < RECORDS // PARTITIONS}
        mid = [pt for pt, off in before.items() if 0 < off < RECORDS // PARTITIONS]
        ch.check("some commits landed mid-partition (a real resume point)", len(mid) > 0, f"partitions {mid}")
        ch.check("the new member resumes exactly at the committed offsets",
                 all(got[pt] == want[pt] for pt in got), f"first offsets {got}, committed {want}")
        gaps = {pt: RECORDS // PARTITIONS - len(consumed.get(pt, ())) for pt in range(PARTITIONS)}
        ch.check("both members together read every offset (no gap)", not any(gaps.values()),
                 f"missing per partition {gaps}")
    finally:
        broker.stop()
    ch.finish()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
