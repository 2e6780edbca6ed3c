"""The ISR as `kafka-topics --describe` (Kafka's TopicCommand) shows it on a 3-node cluster
(scripts/cluster, replica.lag.time.max.ms=5000): an RF 3 topic starts with every replica in sync;
a producer writes to every partition (acks=1) while it runs; pause (SIGSTOP) one node and, after the lag time but before its broker session expires (20 s), it is
out of the ISR of every partition it follows (the leaders shrink it with AlterPartition); once fenced
it is out of every ISR and leads nothing; resume it and it comes back into every ISR. Times measured
(fast Metadata polls) and printed; verdicts read from `kafka-topics --describe`. Starts its own cluster.

Env: SLUICE_BIN, CLUSTER_SCRIPT (scripts/cluster), CRASH_DIR (work dir), KAFKA_LIBS (Kafka's jars),
CLUSTER_KIND (sluice or kafka), TOPIC_PREFIX. Runs with compat/python/.venv.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
from compat_common import Checks, env  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from durability import Cluster, admin, partitions, wait_for  # noqa: E402
from failover import quorum_status  # noqa: E402

LAG_MS = 5000
PAUSED = 3  # run() picks a node that is not the quorum leader: pausing the controller would delay the
# AlterPartition that shrinks the ISR by a controller election, which is not what this unit measures
# The session timeout well above the lag time: the paused node's follower replicas must leave the ISR
# because the leaders see them lag (AlterPartition), not because the controller fences the node (which
# also takes it out of every ISR, and moves the leadership it held).
SESSION_MS = 20000
# Kafka shrinks between replica.lag.time.max.ms and 1.5 times it (its check runs every half lag time),
# plus the AlterPartition round trip; the bound stays well below the session timeout, so a shrink that
# only comes with fencing fails it.
SHRINK_BOUND_S = 2 * LAG_MS / 1000 + 2
SETS = [f"replica.lag.time.max.ms={LAG_MS}", f"broker.session.timeout.ms={SESSION_MS}",
        "broker.heartbeat.interval.ms=500"]


def describe(bootstrap, topic, workdir):
    """{partition: (leader, [isr])} from TopicCommand --describe; a short request timeout so a request
    sent to the paused node is retried on another one."""
    conf = os.path.join(workdir, "admin.properties")
    with open(conf, "w") as f:
        f.write("request.timeout.ms=4000\ndefault.api.timeout.ms=30000\n")
    out = subprocess.run(["java", "-Xmx256m", "-Dlog4j2.level=error", "-cp", f"{env('KAFKA_LIBS')}/*",
                          "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap,
                          "--command-config", conf, "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=120)
    parts = {}
    for line in out.stdout.splitlines():
        m = re.search(r"Partition: (\d+)\s+Leader: (-?\d+)\s+Replicas: [\d,]+\s+Isr: ([\d,]*)", line)
        if m:
            parts[int(m.group(1))] = (int(m.group(2)), sorted(int(x) for x in m.group(3).split(",") if x))
    if not parts:
        raise RuntimeError(f"describe: {out.stdout.strip()[-300:]} {out.stderr.strip()[-300:]}")
    return parts


def wait_describe(bootstrap, topic, workdir, ok, timeout_s):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = describe(bootstrap, topic, workdir)
            if ok(last):
                return last
        except Exception as e:  # noqa: BLE001 - keep trying until the deadline
            last = e
        time.sleep(0.5)
    raise TimeoutError(f"not within {timeout_s} s; last describe: {last}")


def main():
    checks = Checks()
    libs = env("KAFKA_LIBS")
    ver = next((f[len("kafka-tools-"):-4] for f in sorted(os.listdir(libs)) if f.startswith("kafka-tools-")
                and f.endswith(".jar") and "api" not in f), "?")
    print(f"CLIENT_VERSION: kafka CLI {ver} (TopicCommand)", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind through the finally: stop the cluster
    workdir = env("CRASH_DIR", f"/tmp/sluice-isr-{os.getpid()}")
    os.makedirs(workdir, exist_ok=True)
    cluster = Cluster(workdir, env("CLUSTER_KIND", "sluice"))
    try:
        run(checks, cluster, workdir)
    finally:
        try:
            cluster.run("resume", "--node", str(PAUSED))
        except Exception:  # noqa: BLE001 - it may be running already
            pass
        try:
            cluster.run("stop")
        except Exception as e:  # noqa: BLE001
            print(f"stop: {e}")
    checks.finish()


def run(checks, cluster, workdir):
    args = ["start", "--nodes", "3"] + (["--kafka"] if cluster.kind == "kafka" else [])
    for s in SETS:
        args += ["--set", s]
    bootstrap = cluster.run(*args).splitlines()[-1]
    cluster.bootstrap = bootstrap
    global PAUSED
    try:
        controller = int(quorum_status(bootstrap)["LeaderId"])
    except Exception as e:  # noqa: BLE001
        checks.check("DescribeQuorum names the quorum leader", False, str(e))
        return
    PAUSED = max(n for n in (1, 2, 3) if n != controller)
    print(f"quorum leader: node {controller}; the node paused: {PAUSED}", flush=True)
    others = ",".join(b for i, b in enumerate(bootstrap.split(","), 1) if i != PAUSED)
    topic = f"{env('TOPIC_PREFIX', f'isr-{int(time.time())}')}-isr"
    out = subprocess.run(["java", "-Xmx256m", "-Dlog4j2.level=error", "-cp", f"{env('KAFKA_LIBS')}/*",
                          "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create",
                          "--topic", topic, "--partitions", "3", "--replication-factor", "3"],
                         capture_output=True, text=True, timeout=120)
    if not checks.check("create an RF 3 topic with 3 partitions", f"Created topic {topic}." in out.stdout,
                        (out.stdout + out.stderr).strip()[-300:]):
        return
    try:
        before = wait_describe(bootstrap, topic, workdir,
                               lambda d: len(d) == 3 and all(isr == [1, 2, 3] for _, isr in d.values()), 30)
        checks.check("kafka-topics --describe shows every replica in the ISR at first", True, str(before))
    except TimeoutError as e:
        checks.check("kafka-topics --describe shows every replica in the ISR at first", False, str(e))
        return

    # A follower of an idle partition stays "caught up" (its log end is the leader's) however long it is
    # silent: Kafka only shrinks the ISR of a partition that moves, so a producer writes all along.
    stop = threading.Event()
    writer = threading.Thread(target=keep_writing, args=(bootstrap, topic, stop), daemon=True)
    writer.start()
    try:
        pause_and_resume(checks, cluster, workdir, bootstrap, others, topic, before)
    finally:
        stop.set()
        writer.join(30)


def keep_writing(bootstrap, topic, stop):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0, "message.timeout.ms": 20000,
                  "log_level": 2, "error_cb": lambda e: None})
    while not stop.is_set():
        for part in range(3):
            try:
                p.produce(topic, value=b"isr", partition=part)
            except BufferError:
                pass
        p.poll(0.2)
    p.flush(5)


def pause_and_resume(checks, cluster, workdir, bootstrap, others, topic, before):
    # The times come from fast Metadata polls (confluent-kafka); the verdicts from kafka-topics --describe,
    # whose JVM start and retries away from the paused node take seconds per call.
    a = admin(others)
    t0 = time.monotonic()
    cluster.run("pause", "--node", str(PAUSED))
    followed = [p for p, (leader, _) in before.items() if leader != PAUSED]
    try:
        wait_for("ISR shrink in Metadata", lambda: all(PAUSED not in partitions(a, topic, count=3)[p][2]
                                                       for p in followed), SESSION_MS / 1000 + 30)
        shrink = time.monotonic() - t0
        print(f"node {PAUSED} paused; out of the ISR of the partitions it follows ({followed}) in Metadata "
              f"after {shrink:.1f} s (replica.lag.time.max.ms {LAG_MS}, broker.session.timeout.ms {SESSION_MS})",
              flush=True)
        checks.check("a paused follower leaves the ISR after replica.lag.time.max.ms, before its session expires",
                     LAG_MS / 1000 * 0.8 <= shrink <= SHRINK_BOUND_S, f"{shrink:.1f} s, bound {SHRINK_BOUND_S:.0f} s")
    except TimeoutError as e:
        checks.check("a paused follower leaves the ISR after replica.lag.time.max.ms, before its session expires",
                     False, str(e))
    try:
        during = wait_describe(others, topic, workdir,
                               lambda d: all(PAUSED not in isr and leader != PAUSED for leader, isr in d.values()), 60)
        checks.check("kafka-topics --describe shows the paused node out of every ISR", True, f"node {PAUSED}: {during}")
        checks.check("kafka-topics --describe shows every partition led by an ISR member, ISR kept at 2",
                     all(leader in isr and len(isr) == 2 for leader, isr in during.values()), str(during))
    except TimeoutError as e:
        checks.check("kafka-topics --describe shows the paused node out of every ISR", False, f"node {PAUSED}: {e}")

    t1 = time.monotonic()
    cluster.run("resume", "--node", str(PAUSED))
    a = admin(bootstrap)
    try:
        wait_for("ISR expansion in Metadata", lambda: all(isr == [1, 2, 3] for _, _, isr in partitions(a, topic, count=3).values()),
                 60)
        print(f"node {PAUSED} resumed; back in every ISR in Metadata after {time.monotonic() - t1:.1f} s", flush=True)
    except TimeoutError as e:
        print(f"Metadata: {e}", flush=True)
    try:
        after = wait_describe(bootstrap, topic, workdir, lambda d: all(isr == [1, 2, 3] for _, isr in d.values()), 60)
        checks.check("kafka-topics --describe shows the resumed node back in every ISR", True, str(after))
    except TimeoutError as e:
        checks.check("kafka-topics --describe shows the resumed node back in every ISR", False, str(e))


if __name__ == "__main__":
    main()
