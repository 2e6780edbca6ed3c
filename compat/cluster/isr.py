"""The ISR as `kafka-topics --describe` (Kafka's TopicCommand) shows it on a 3-node cluster
(scripts/cluster, replica.lag.time.max.ms=5000): an RF 3 topic starts with every replica in sync;
pause (SIGSTOP) one node and, after the lag time, it is out of the ISR of every partition (the ones it
led get a new leader from the ISR); resume it and it comes back into every ISR. Times measured and
printed. Starts its own cluster.

Env: SLUICE_BIN, CLUSTER_SCRIPT (scripts/cluster), CRASH_DIR (work dir), KAFKA_LIBS (Kafka's jars),
CLUSTER_KIND (sluice or kafka), TOPIC_PREFIX. Runs with compat/python/.venv.
"""
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
from compat_common import Checks, env  # noqa: E402
from durability import Cluster, admin, partitions, wait_for  # noqa: E402

LAG_MS = 5000
PAUSED = 3
SETS = [f"replica.lag.time.max.ms={LAG_MS}", "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=500"]


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
        checks.check("describe: every replica in the ISR at first", True, str(before))
    except TimeoutError as e:
        checks.check("describe: every replica in the ISR at first", False, str(e))
        return

    # The times come from fast Metadata polls (confluent-kafka); the verdicts from kafka-topics --describe,
    # whose JVM start and retries away from the paused node take seconds per call.
    a = admin(others)
    t0 = time.monotonic()
    cluster.run("pause", "--node", str(PAUSED))
    try:
        wait_for("ISR shrink in Metadata", lambda: all(PAUSED not in isr for _, _, isr in partitions(a, topic, count=3).values()),
                 LAG_MS / 1000 + 30)
        shrink = time.monotonic() - t0
        print(f"node {PAUSED} paused; out of every ISR in Metadata after {shrink:.1f} s "
              f"(replica.lag.time.max.ms {LAG_MS})", flush=True)
        checks.check("the ISR does not shrink before replica.lag.time.max.ms, and does within 3x",
                     LAG_MS / 1000 * 0.8 <= shrink <= LAG_MS / 1000 * 3, f"{shrink:.1f} s")
    except TimeoutError as e:
        print(f"Metadata: {e}", flush=True)
    try:
        during = wait_describe(others, topic, workdir,
                               lambda d: all(PAUSED not in isr and leader != PAUSED for leader, isr in d.values()), 60)
        checks.check(f"describe: the paused node {PAUSED} is out of every ISR", True, str(during))
        checks.check("describe: every partition led by an ISR member, ISR kept at 2",
                     all(leader in isr and len(isr) == 2 for leader, isr in during.values()), str(during))
    except TimeoutError as e:
        checks.check(f"describe: the paused node {PAUSED} is out of every ISR", False, str(e))

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
        checks.check("describe: the resumed node is back in every ISR", True, str(after))
    except TimeoutError as e:
        checks.check("describe: the resumed node is back in every ISR", False, str(e))


if __name__ == "__main__":
    main()
