"""Peer suite: Kafka's own system-test clients (org.apache.kafka.tools from $KAFKA_LIBS).

1. VerifiableProducer --max-messages N --acks -1 --repeating-keys 100 into a 6-partition topic: every send
   acknowledged (producer_send_success per record, no producer_send_error, shutdown_complete).
2. Every acknowledged record is consumed: an assign()-based reader (confluent-kafka, no group) finds each
   acked record at the partition/offset the producer printed, with its key and value.
3. VerifiableConsumer --group-id G --reset-policy earliest reads all N through a consumer group
   (needs FindCoordinator/JoinGroup/SyncGroup/Heartbeat/OffsetCommit)."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import Checks, consume_all, create_topic, env  # noqa: E402

LIBS = env("KAFKA_LIBS")
JAVA = ["java", "-Xmx512m", "-Dlog4j2.level=warn", "-cp", os.path.join(LIBS or ".", "*")]


def events(out):
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                pass


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    n = int(env("VERIFIABLE_RECORDS", "10000"))
    ver = next((f[len("kafka-tools-"):-4] for f in sorted(os.listdir(LIBS)) if f.startswith("kafka-tools-")
                and f.endswith(".jar") and "api" not in f), "?")
    print(f"CLIENT_VERSION: kafka-tools {ver} (VerifiableProducer, VerifiableConsumer)", flush=True)
    print(f"bootstrap={bootstrap} prefix={prefix} records={n}", flush=True)
    ch = Checks()
    topic = f"{prefix}-verifiable"
    if not ch.run("create topic (6 partitions)", lambda: create_topic(bootstrap, topic)):
        ch.finish()

    acked = {}   # value -> (partition, offset, key)

    def produce():
        t = time.time()
        p = subprocess.run(JAVA + ["org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", bootstrap,
                                   "--topic", topic, "--max-messages", str(n), "--acks", "-1",
                                   "--repeating-keys", "100"],
                           capture_output=True, text=True, timeout=180)
        errors, shutdown = [], False
        for ev in events(p.stdout):
            if ev.get("name") == "producer_send_success":
                acked[ev["value"]] = (ev["partition"], ev["offset"], ev.get("key"))
            elif ev.get("name") == "producer_send_error":
                errors.append(ev)
            elif ev.get("name") == "shutdown_complete":
                shutdown = True
        if p.returncode != 0:
            return f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
        if errors:
            return f"{len(errors)} producer_send_error, first: {errors[0]}"
        if len(acked) != n:
            return f"{len(acked)} producer_send_success, want {n}"
        if not shutdown:
            return "no shutdown_complete event"
        return f"ok {n} acked in {time.time() - t:.1f}s"

    if ch.run(f"VerifiableProducer(acks=-1) {n} records all acknowledged", produce):
        def readback():
            recs = consume_all(bootstrap, topic, expected=n)
            got = {(p, off): (k, v) for p, off, k, v in recs}
            for value, (part, off, key) in acked.items():
                kv = got.get((part, off))
                if kv is None:
                    return f"acked value {value} at {part}/{off} not found ({len(recs)} records read)"
                k, v = kv
                if v is None or v.decode() != value or (key is not None and (k or b"").decode() != key):
                    return f"{part}/{off}: read key={k!r} value={v!r}, acked key={key!r} value={value!r}"
            if len(recs) != n:
                return f"read {len(recs)} records, want {n}"
            return f"ok all {n} acknowledged records found at their acked offsets"
        ch.run("every acknowledged record is consumed (assign-based reader, no group)", readback)

        def group_consume():
            t = time.time()
            try:
                p = subprocess.run(JAVA + ["org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server",
                                           bootstrap, "--topic", topic, "--group-id", f"{prefix}-verifiable",
                                           "--max-messages", str(n), "--reset-policy", "earliest"],
                                   capture_output=True, text=True,
                                   timeout=int(env("VERIFIABLE_CONSUMER_TIMEOUT", "45")))
                out, err, rc = p.stdout, p.stderr, p.returncode
            except subprocess.TimeoutExpired as e:
                out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
                rc = "timeout"
            exc = next((ln.strip() for ln in (out + "\n" + err).splitlines() if "Exception:" in ln), "")
            consumed, values = 0, set()
            assigned = False
            for ev in events(out):
                if ev.get("name") == "partitions_assigned" and ev.get("partitions"):
                    assigned = True
                if ev.get("name") == "records_consumed":
                    consumed += ev.get("count", 0)
            if consumed < n:
                return (f"{'timed out' if rc == 'timeout' else f'exit {rc}'} after {time.time() - t:.0f}s: "
                        f"{consumed} of {n} consumed, partitions assigned: {assigned}" + (f"; {exc[:200]}" if exc else ""))
            return f"ok {consumed} consumed in {time.time() - t:.1f}s"
        ch.run(f"VerifiableConsumer(group, reset earliest) consumes all {n}", group_consume)
    ch.finish()


if __name__ == "__main__":
    main()
