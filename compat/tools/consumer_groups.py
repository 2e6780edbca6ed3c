"""Kafka's own `kafka-consumer-groups` (ConsumerGroupCommand from kafka-tools 4.1, run from
$KAFKA_LIBS) against $BOOTSTRAP: --list, --describe with lag, --reset-offsets --to-earliest --execute,
--delete (an active group is refused, an empty one deleted). Offsets are set up with confluent-kafka.
Runs with compat/python/.venv.
"""
import os
import subprocess
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from compat_common import Checks, create_topic, env, log_error_cb  # noqa: E402
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

PARTS = 3
PER_PART = 10


def dump_log_segments_class(libs):
    """kafka.tools.DumpLogSegments up to Kafka 4.1, org.apache.kafka.tools.DumpLogSegments in 4.4."""
    for name in os.listdir(libs):
        if name.startswith("kafka-tools-") and name.endswith(".jar"):
            with zipfile.ZipFile(os.path.join(libs, name)) as z:
                if "org/apache/kafka/tools/DumpLogSegments.class" in z.namelist():
                    return "org.apache.kafka.tools.DumpLogSegments"
    return "kafka.tools.DumpLogSegments"


def tool(bootstrap, *args):
    libs = env("KAFKA_LIBS")
    cmd = ["java", "-Xmx512m", "-cp", os.path.join(libs, "*"),
           "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(f"$ kafka-consumer-groups {' '.join(args)}\n{r.stdout}{r.stderr[-2000:]}", flush=True)
    return r.stdout, r.returncode


def java_hash_partition(group, partitions=50):
    """Kafka's __consumer_offsets partition for a group: abs(String.hashCode) % partitions."""
    raw = group.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):  # Java hashes UTF-16 code units
        h = (h * 31 + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return 0 if h == -(1 << 31) else abs(h) % partitions


def dump_offsets(group):
    """Kafka's DumpLogSegments --offsets-decoder over the group's __consumer_offsets partition."""
    data = env("BROKER_DATA_DIR")
    n = sum(1 for f in os.listdir(data) if f.startswith("__consumer_offsets-"))
    d = os.path.join(data, f"__consumer_offsets-{java_hash_partition(group, n)}")
    logs = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))
    cmd = ["java", "-Xmx512m", "-cp", os.path.join(env("KAFKA_LIBS"), "*"), dump_log_segments_class(env("KAFKA_LIBS")),
           "--offsets-decoder", "--files", ",".join(logs)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r.stdout


def rows(out, group):
    """Table rows of a --describe / --reset-offsets output for `group`, as lists of columns."""
    return [line.split() for line in out.splitlines() if line.split()[:1] == [group]]


def main():
    bootstrap = env("BOOTSTRAP", "127.0.0.1:9092")
    prefix = env("TOPIC_PREFIX", f"compat-{int(time.time())}")
    topic, group, active = f"{prefix}-cg-topic", f"{prefix}-cg-idle", f"{prefix}-cg-active"
    print("CLIENT_VERSION: kafka-tools ConsumerGroupCommand (" + env("KAFKA_LIBS", "?") + ")", flush=True)
    ch = Checks()
    if not env("KAFKA_LIBS") or not os.path.isdir(env("KAFKA_LIBS")):
        ch.check("KAFKA_LIBS", False, "kafka libs not resolved (scripts/kafka-reference libs)")
        ch.finish()
    if not ch.run("create a 3-partition topic", lambda: create_topic(bootstrap, topic, PARTS)):
        ch.finish()
    p = Producer({"bootstrap.servers": bootstrap, "error_cb": log_error_cb})
    for i in range(PARTS * PER_PART):
        p.produce(topic, value=f"v{i}".encode(), partition=i % PARTS)
    p.flush(30)

    # An idle group with committed offsets 4 on every partition (a simple, member-less commit).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "error_cb": lambda e: None})
    c.commit(offsets=[TopicPartition(topic, i, 4) for i in range(PARTS)], asynchronous=False)
    c.close()
    # An active group: one subscribed member.
    a = Consumer({"bootstrap.servers": bootstrap, "group.id": active, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "error_cb": lambda e: None})
    a.subscribe([topic])
    deadline = time.time() + 30
    got = 0
    while time.time() < deadline and got < PARTS * PER_PART:
        got += sum(1 for m in a.consume(100, 0.5) if m.error() is None)

    try:
        def dumped():
            if not env("BROKER_DATA_DIR"):
                return "ok skipped: BROKER_DATA_DIR not set"
            out = dump_offsets(group)
            want = [f'"group":"{group}","topic":"{topic}","partition":{i}' for i in range(PARTS)]
            missing = [w for w in want if w not in out]
            if missing or '"offset":4' not in out:
                return f"offset records not found in DumpLogSegments output: {missing[:1]} {out[-500:]}"
            return "ok Kafka's decoder reads the committed offsets"
        ch.run("DumpLogSegments --offsets-decoder reads the __consumer_offsets records", dumped)

        def listed():
            out, rc = tool(bootstrap, "--list")
            names = set(out.split())
            if rc != 0 or group not in names or active not in names:
                return f"exit {rc}; {group} and {active} not both listed"
            return "ok both groups listed"
        ch.run("--list shows both groups", listed)

        def describe_lag():
            out, rc = tool(bootstrap, "--describe", "--group", group)
            r = rows(out, group)
            want = [[group, topic, str(i), "4", str(PER_PART), str(PER_PART - 4)] for i in range(PARTS)]
            got = sorted(x[:6] for x in r)
            return "ok lag 6 on each partition" if rc == 0 and got == want else f"exit {rc}; rows {got}, want {want}"
        ch.run("--describe shows current offset, log end offset and lag", describe_lag)

        def describe_active():
            out, rc = tool(bootstrap, "--describe", "--group", active, "--members")
            r = rows(out, active)
            if rc != 0 or len(r) != 1:
                return f"exit {rc}; {len(r)} member rows, want 1"
            return f"ok member {r[0][1]} host {r[0][2]}"
        ch.run("--describe --members lists the active member", describe_active)

        def reset():
            out, rc = tool(bootstrap, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                           "--execute")
            r = rows(out, group)
            if rc != 0 or sorted(x[2:4] for x in r) != [[str(i), "0"] for i in range(PARTS)]:
                return f"exit {rc}; rows {r}"
            out, rc = tool(bootstrap, "--describe", "--group", group)
            cur = sorted((x[2], x[3], x[5]) for x in rows(out, group))
            want = [(str(i), "0", str(PER_PART)) for i in range(PARTS)]
            return "ok offsets reset to 0, lag 10" if cur == want else f"after reset: {cur}, want {want}"
        ch.run("--reset-offsets --to-earliest --execute moves committed offsets to 0", reset)

        def delete_active():
            out, rc = tool(bootstrap, "--delete", "--group", active)
            return "ok refused" if "not empty" in out.lower() or "NonEmptyGroup" in out else f"exit {rc}: {out[-300:]}"
        ch.run("--delete of an active group is refused (NON_EMPTY_GROUP)", delete_active)

        def delete_idle():
            out, rc = tool(bootstrap, "--delete", "--group", group)
            if "successful" not in out:
                return f"exit {rc}: {out[-300:]}"
            out, _ = tool(bootstrap, "--list")
            return "ok deleted" if group not in out.split() else "group still listed after --delete"
        ch.run("--delete removes an empty group", delete_idle)
    finally:
        a.close()
    ch.finish()


if __name__ == "__main__":
    main()
